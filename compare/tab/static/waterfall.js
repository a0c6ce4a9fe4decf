// The step difference split into terms (report.json's step_delta): side A's step, each
// term's change as a bar floating from the running total, what no term holds, side B's step.
import {el, svg} from './dom.js';
import {delta, duration} from './format.js';

const GUTTER = 290;
const ROW = 20;
const RIGHT = 90;

function shortKey(key) {
  return key.length <= 46 ? key : `${key.slice(0, 45)}…`;
}

// A term's label: its key and the ops that moved it most, as step_delta.png labels it.
function termLabel(t) {
  const ops = t.ops.slice(0, 2).map((o) => o.op.split('/').pop());
  return ops.length ? `${t.key}: ${ops.join(', ')}` : t.key;
}

// The rows drawn, in order: [{kind: 'total'|'term'|'rest', key, from, to, amount, term?}];
// `amount` is the value written beside the bar (a term's own delta_us, not a difference of
// running sums, so that it reads as report.json's number).
export function waterfallRows(d) {
  const rows = [{kind: 'total', key: d.labels[0], from: 0, to: d.aUs, amount: d.aUs}];
  let at = d.aUs;
  for (const t of d.terms) {
    rows.push({kind: 'term', key: t.key, from: at, to: at + t.deltaUs, amount: t.deltaUs,
               term: t});
    at += t.deltaUs;
  }
  if (d.restUs) {
    rows.push({kind: 'rest', key: 'everything else', from: at, to: at + d.restUs,
               amount: d.restUs});
    at += d.restUs;
  }
  rows.push({kind: 'total', key: d.labels[1], from: 0, to: d.bUs, amount: d.bUs});
  return {rows, end: at};
}

export function drawWaterfall(d, width) {
  const box = el('div', {class: 'pc-waterfall'});
  const {rows, end} = waterfallRows(d);
  const top = Math.max(...rows.map((r) => Math.max(r.from, r.to)), 1);
  const plot = Math.max(width - GUTTER - RIGHT, 200);
  const x = (us) => GUTTER + (us / top) * plot;
  const root = svg('svg', {width, height: rows.length * ROW + 8, class: 'pc-waterfall-svg',
                           role: 'img', 'aria-label': 'the step difference, term by term'});
  rows.forEach((r, i) => {
    const y = i * ROW + 4;
    const lo = Math.min(r.from, r.to);
    const hi = Math.max(r.from, r.to);
    const cls = r.kind === 'total' ? 'pc-wf-total' : r.to < r.from ? 'pc-wf-down' : 'pc-wf-up';
    const g = svg('g', {class: `pc-wf-row ${cls}`, 'data-kind': r.kind, 'data-key': r.key});
    const name = r.term ? termLabel(r.term) : r.key;
    g.append(svg('text', {x: GUTTER - 6, y: y + 13, 'text-anchor': 'end', class: 'pc-wf-name'},
                 [shortKey(name)]));
    g.append(svg('rect', {x: x(lo), y, width: Math.max(x(hi) - x(lo), 1), height: ROW - 5}));
    const amount = r.kind === 'total' ? duration(r.amount) : delta(r.amount);
    g.append(svg('text', {x: x(hi) + 4, y: y + 13, class: 'pc-wf-amount'}, [amount]));
    if (i > 0 && i < rows.length - 1) {
      g.append(svg('line', {x1: x(r.from), x2: x(r.from), y1: y - 5, y2: y, class: 'pc-wf-link'}));
    }
    const ops = r.term ? r.term.ops.map((o) => `${o.op} ${delta(o.deltaUs)}`).join('\n') : '';
    const words = r.term && r.term.words && r.term.words !== r.key ? ` (${r.term.words})` : '';
    g.append(svg('title', {}, [`${r.key}${words}: ${amount}${ops ? `\n${ops}` : ''}`]));
    root.append(g);
  });
  box.append(root);
  const off = end - d.bUs;
  box.append(el('p', {class: 'pc-note'}, [
    `${d.labels[0]} ${duration(d.aUs)} → ${d.labels[1]} ${duration(d.bUs)} (${delta(d.deltaUs)}` +
    `, ${d.basis === 'traced' ? 'mean traced span' : 'mean steady step'})` +
    (Math.abs(off) > 1 ? `; the terms add up to ${duration(end)}, ${delta(off)} off the step` :
      '')]));
  return box;
}
