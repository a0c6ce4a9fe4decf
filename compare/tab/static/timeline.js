// One steady step of each side, lane by lane, one above the other on one time axis: the
// data timelines.png draws (timelines.json), as SVG. Hover a bar for its op, stage or group,
// and duration.
import {el, svg} from './dom.js';
import {duration} from './format.js';

const GUTTER = 210;   // lane names
const RIGHT = 16;
const LANE = 15;      // lane height
const GAP = 3;
const TITLE = 22;     // a side's title row
const AXIS = 26;

function niceStep(range, target) {
  const raw = range / Math.max(target, 1);
  const p = 10 ** Math.floor(Math.log10(raw || 1));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

export function drawTimelines(model, width) {
  const sides = model.timelines;
  const colors = model.colors;
  const what = model.timelineView === 'groups' ? 'group' : 'stage';
  const box = el('div', {class: 'pc-timelines'});
  const drawn = sides.filter((s) => s);
  if (!drawn.length) {
    box.append(el('p', {class: 'pc-note'}, ['Neither side has a steady step to draw.']));
    return box;
  }
  const span = Math.max(...drawn.map((s) => s.durUs)) || 1;
  const plot = Math.max(width - GUTTER - RIGHT, 200);
  const x = (us) => GUTTER + (us / span) * plot;
  let height = 0;
  for (const s of sides) height += TITLE + (s ? Math.max(s.lanes.length, 1) : 1) * (LANE + GAP);
  height += AXIS;
  const root = svg('svg', {width, height, class: 'pc-timeline-svg', role: 'img',
                           'aria-label': 'one steady step of each side, lane by lane'});
  const tip = el('div', {class: 'pc-tip', hidden: true});
  const barsOf = [];   // per drawn rect: its bar and side, found from data-i
  let y = 0;
  sides.forEach((s, i) => {
    const label = model.labels[i];
    const g = svg('g', {class: 'pc-side', 'data-side': String(i)});
    root.append(g);
    if (!s) {
      g.append(svg('text', {x: 4, y: y + 15, class: 'pc-side-title'},
                   [`${label}: no steady step to draw`]));
      y += TITLE + LANE + GAP;
      return;
    }
    const title = `${label}: step ${s.step}, ${duration(s.durUs)} (one real step: the steady ` +
      `step closest to the median, not an average)${s.folded ? `; ${s.folded}` : ''}`;
    g.append(svg('text', {x: 4, y: y + 15, class: 'pc-side-title'}, [title]));
    y += TITLE;
    s.lanes.forEach((lane, row) => {
      const top = y + row * (LANE + GAP);
      g.append(svg('text', {x: GUTTER - 6, y: top + LANE - 4, class: 'pc-lane-name',
                            'text-anchor': 'end'}, [lane.short, svg('title', {}, [lane.name])]));
      g.append(svg('rect', {x: GUTTER, y: top, width: plot, height: LANE, class: 'pc-lane-bg'}));
      for (const b of lane.bars) {
        const w = Math.max((b.durUs / span) * plot, 0.6);
        g.append(svg('rect', {x: x(b.startUs).toFixed(2), y: top, width: w.toFixed(2),
                              height: LANE, fill: colors[b.label] || '#888',
                              'fill-opacity': b.wait ? 0.3 : 1, class: 'pc-bar',
                              'data-i': String(barsOf.length), 'data-label': b.label}));
        barsOf.push([b, lane, label]);
      }
    });
    const rows = Math.max(s.lanes.length, 1);
    g.append(svg('line', {x1: x(s.durUs), x2: x(s.durUs), y1: y - 4, y2: y + rows * (LANE + GAP),
                          class: 'pc-step-end'}));
    y += rows * (LANE + GAP);
  });
  const step = niceStep(span / 1e3, 10);
  const axis = svg('g', {class: 'pc-axis'});
  axis.append(svg('line', {x1: GUTTER, x2: GUTTER + plot, y1: y + 2, y2: y + 2}));
  for (let t = 0; t <= span / 1e3 + 1e-9; t += step) {
    const tx = x(t * 1e3);
    axis.append(svg('line', {x1: tx, x2: tx, y1: y + 2, y2: y + 6}));
    axis.append(svg('text', {x: tx, y: y + 18, 'text-anchor': 'middle'},
                    [`${+t.toFixed(6)}`]));
  }
  axis.append(svg('text', {x: GUTTER - 6, y: y + 18, 'text-anchor': 'end'},
                  ["ms from the step's start"]));
  root.append(axis);
  root.addEventListener('mousemove', (e) => {
    const i = e.target.dataset ? e.target.dataset.i : undefined;
    if (i === undefined) { tip.hidden = true; return; }
    const [b, lane, label] = barsOf[+i];
    tip.replaceChildren(
      el('div', {class: 'pc-tip-op'}, [b.op]),
      el('div', {}, [`${what}: ${b.label}${b.wait ? ' (waiting for input)' : ''}`]),
      el('div', {}, [`${duration(b.durUs)}, from ${duration(b.startUs)} into the step`]),
      el('div', {class: 'pc-tip-lane'}, [`${label} · ${lane.name}`]));
    const r = box.getBoundingClientRect();
    tip.style.left = `${Math.min(e.clientX - r.left + 12, r.width - 320)}px`;
    tip.style.top = `${e.clientY - r.top + 14}px`;
    tip.hidden = false;
  });
  root.addEventListener('mouseleave', () => { tip.hidden = true; });
  box.append(root, tip, legend(drawn, colors, what));
  return box;
}

function legend(sides, colors, what) {
  const used = new Set();
  const waits = new Set();
  for (const s of sides) {
    for (const lane of s.lanes) {
      for (const b of lane.bars) (b.wait ? waits : used).add(b.label);
    }
  }
  const items = Object.keys(colors).filter((k) => used.has(k)).map((k) =>
    el('span', {class: 'pc-key'}, [el('i', {style: `background:${colors[k]}`}), k]));
  for (const k of Object.keys(colors).filter((k) => waits.has(k))) {
    items.push(el('span', {class: 'pc-key'}, [
      el('i', {style: `background:${colors[k]};opacity:.3`}),
      `waiting for ${k === 'input_wait' ? 'input' : k}`]));
  }
  return el('div', {class: 'pc-legend', title: `colour: the ${what}`}, items);
}
