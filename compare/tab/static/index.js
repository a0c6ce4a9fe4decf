// The Pipeline compare tab: pick two profile sessions of the logdir, see them compared.
// TensorBoard loads this module in the tab's frame and calls render(). Everything it shows
// comes from the plugin's routes (compare/tab/plugin.py); report.json is read only through
// adapter.js.
import {readReport} from './static/adapter.js';
import {el} from './static/dom.js';
import {cell, delta, duration, ratio} from './static/format.js';
import {SortableTable} from './static/table.js';
import {drawTimelines} from './static/timeline.js';
import {drawWaterfall} from './static/waterfall.js';

const BASE = new URL('./', import.meta.url);
const POLL_MS = 250;   // between polls that brought no news
const ANSWERS = [['pids', 'What each pid and row is'], ['xla', 'XLA: compile and run'],
                 ['sequence', 'In what order ops ran'], ['interpret', 'The bottleneck']];
const STATUSES = ['changed', 'added', 'removed', 'fused', 'unfused', 'same'];

function route(path, params = {}) {
  const url = new URL(path, BASE);
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') url.searchParams.set(k, v);
  return url;
}

async function getJson(url) {
  let response;
  try {
    response = await fetch(url, {cache: 'no-store'});
  } catch (e) {
    return {status: 0, body: {error: 'TensorBoard did not answer: is it still running?'}};
  }
  let body = null;
  try {
    body = await response.json();
  } catch (e) {
    body = {error: `${url.pathname}: HTTP ${response.status}, not JSON`};
  }
  return {status: response.status, body};
}

export async function render() {
  document.head.append(el('link', {rel: 'stylesheet',
                                   href: new URL('./static/style.css', import.meta.url)}));
  const app = new App();
  document.body.append(app.root);
  await app.start();
}

class App {
  constructor() {
    this.token = 0;
    this.pickA = el('select', {id: 'pc-a', 'aria-label': 'side A'});
    this.pickB = el('select', {id: 'pc-b', 'aria-label': 'side B'});
    this.labelA = el('input', {id: 'pc-label-a', placeholder: 'label A', maxlength: '60',
                               'aria-label': 'label of side A'});
    this.labelB = el('input', {id: 'pc-label-b', placeholder: 'label B', maxlength: '60',
                               'aria-label': 'label of side B'});
    const swap = el('button', {type: 'button', id: 'pc-swap', title: 'swap A and B'}, ['⇄']);
    swap.addEventListener('click', () => this.swap());
    const form = el('form', {id: 'pc-pick'}, [
      el('label', {}, ['A ', this.pickA]), this.labelA, swap,
      el('label', {}, ['B ', this.pickB]), this.labelB,
      el('button', {type: 'submit', id: 'pc-go'}, ['Compare'])]);
    form.addEventListener('submit', (e) => { e.preventDefault(); this.compare(true); });
    for (const pick of [this.pickA, this.pickB]) {
      pick.addEventListener('change', () => {
        this.labelA.value = '';
        this.labelB.value = '';
        this.compare(true);
      });
    }
    this.status = el('section', {id: 'pc-status', 'aria-live': 'polite'});
    this.result = el('main', {id: 'pc-result'});
    this.root = el('div', {id: 'pc-root', 'data-state': 'loading'}, [
      el('header', {}, [el('h1', {}, ['Pipeline compare']), form]), this.status, this.result]);
  }

  setState(state) {
    this.root.dataset.state = state;
  }

  say(text, cls = 'pc-note') {
    this.status.replaceChildren(el('p', {class: cls}, [text]));
  }

  async start() {
    this.say('Listing the profile sessions of this logdir …');
    const {status, body} = await getJson(route('sessions'));
    if (status !== 200) return this.fail(body.error || `sessions: HTTP ${status}`);
    for (const pick of [this.pickA, this.pickB]) {
      pick.replaceChildren(...body.sessions.map((s) => el('option', {value: s.name}, [
        s.pipeline && s.pipeline !== s.run ? `${s.name} (${s.pipeline})` : s.name])));
    }
    if (!body.default) return this.fail(body.message);
    this.pickA.value = body.default.a;
    this.pickB.value = body.default.b;
    [this.labelA.placeholder, this.labelB.placeholder] = body.default.labels;
    return this.compare(true);
  }

  swap() {
    [this.pickA.value, this.pickB.value] = [this.pickB.value, this.pickA.value];
    [this.labelA.value, this.labelB.value] = [this.labelB.value, this.labelA.value];
    this.compare(true);
  }

  fail(message) {
    this.setState('error');
    this.result.replaceChildren();
    this.say(message, 'pc-error');
  }

  params() {
    return {a: this.pickA.value, b: this.pickB.value,
            label_a: this.labelA.value.trim(), label_b: this.labelB.value.trim()};
  }

  async compare(retry) {
    const token = ++this.token;
    const params = this.params();
    const started = performance.now();
    this.setState('running');
    this.result.replaceChildren();
    this.say(`Comparing ${params.a} (A) with ${params.b} (B) …`);
    const clock = setInterval(() => this.tick(token, started), 200);
    try {
      await this.poll(token, params, retry, started);
    } finally {
      clearInterval(clock);
    }
  }

  // The seconds so far, between the server's answers.
  tick(token, started) {
    const span = this.status.querySelector('#pc-elapsed');
    if (token === this.token && span) span.textContent = seconds(started, 1);
  }

  async poll(token, params, retry, started) {
    let seen;  // progress lines shown: the server answers once there are more (long poll)
    for (let first = true; token === this.token; first = false) {
      const {status, body} = await getJson(route('compare', {...params, seen,
                                                             retry: retry && first ? '1' : ''}));
      if (token !== this.token) return;
      if (status === 202) {
        this.progress(params, body, started);
        if (seen === body.lines.length) {  // the server had no news: do not ask at once
          await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        }
        seen = body.lines.length;
        continue;
      }
      if (status !== 200) return this.fail(body.error || `compare: HTTP ${status}`);
      if (body.state === 'error') {
        return this.fail(`Could not compare ${params.a} with ${params.b}: ${body.message}`);
      }
      try {
        return this.show(body, params, started);
      } catch (e) {  // report.json not as adapter.js reads it (a newer schema?), or our bug
        console.error(e);
        return this.fail(`This page could not draw the comparison of ${params.a} with ` +
                         `${params.b}: ${e.message}`);
      }
    }
  }

  progress(params, body, started) {
    this.status.replaceChildren(
      el('p', {class: 'pc-note'}, [`Comparing ${params.a} (A) with ${params.b} (B): `,
        el('span', {id: 'pc-elapsed'}, [seconds(started, 1)]),
        ' s so far; computed once, then kept beside the logdir.']),
      el('pre', {id: 'pc-progress'}, [body.lines.join('\n')]));
  }

  show(body, params, started) {
    const model = readReport(body.report, body.timelines, body.pair);
    this.labelA.placeholder = model.labels[0];
    this.labelB.placeholder = model.labels[1];
    const width = Math.max(this.result.clientWidth || document.body.clientWidth, 760);
    const parts = [
      verdictSection(model),
      stepSection(model, width),
      section('pc-timelines', 'One steady step of each side',
              [drawTimelines(model, width)]),
      model.view === 'stages' ? stagesSection(model) : null,
      groupsSection(model),
      opsSection(model),
      sidesSection(model),
      filesSection(body.files, params, model)];
    this.result.replaceChildren(...parts.filter((x) => x));
    this.status.replaceChildren(el('p', {class: 'pc-note', id: 'pc-shown'}, [
      `${model.labels[0]} = ${params.a}, ${model.labels[1]} = ${params.b}; shown in ` +
      `${seconds(started, 2)} s.`]));
    // for benchmarks.tab: from this click (or the tab's first request), and from the start of
    // the tab's page
    this.root.dataset.shownMs = String(Math.round(performance.now() - started));
    this.root.dataset.doneAtMs = String(Math.round(performance.now()));
    this.setState('done');
  }
}

function seconds(since, digits) {
  return ((performance.now() - since) / 1e3).toFixed(digits);
}

function section(id, title, children) {
  return el('section', {id, class: 'pc-section'}, [el('h2', {}, [title]), ...children]);
}

function verdictSection(m) {
  const p = m.comparability;
  const parity = p.likeForLike && !p.caveats.length ?
    [el('p', {class: 'pc-ok'}, ['Like for like: no check found a reason not to compare the ' +
                                'steps.'])] :
    [el('ul', {class: 'pc-caveats'}, p.caveats.map((c) => el('li', {
      class: c.breaks ? 'pc-breaks' : ''}, [c.breaks ? 'Not like for like: ' : '', c.text])))];
  return section('pc-verdict', 'Verdict', [
    el('p', {class: 'pc-comparison'}, [m.verdict.comparison]),
    el('ul', {}, m.verdict.sides.map((t) => el('li', {}, [t]))),
    ...parity]);
}

function stepSection(m, width) {
  const rows = m.steps.map((s, i) => el('tr', {'data-side': String(i)}, [
    el('th', {scope: 'row'}, [m.labels[i]]),
    el('td', {class: 'num', 'data-value': String(s.meanUs ?? '')}, [cell(s.meanUs)]),
    el('td', {class: 'num', 'data-value': String(s.medianUs ?? '')}, [cell(s.medianUs)]),
    el('td', {class: 'num'}, [`${s.steadyCount ?? '?'} of ${s.count ?? '?'}`]),
    el('td', {class: 'num', 'data-value': String(s.firstUs ?? '')}, [cell(s.firstUs)]),
    el('td', {class: 'num'}, [s.step ?? '-'])]));
  const table = el('table', {id: 'pc-steps-table', class: 'pc-table pc-small'}, [
    el('thead', {}, [el('tr', {}, ['side', 'per steady step (mean)', 'median', 'steady steps',
                                   'first step', 'step drawn below'].map((t) =>
      el('th', {}, [t])))]),
    el('tbody', {}, rows)]);
  const parts = [table];
  if (m.stepDelta) parts.push(drawWaterfall(m.stepDelta, width));
  return section('pc-steps', m.stepDelta ? 'The step difference, term by term' : 'Steps', parts);
}

function opsText(ops) {
  const shown = ops.slice(0, 3).map((o) => o.split('/').pop()).join(', ');
  return shown + (ops.length > 3 ? ` (+${ops.length - 3})` : '');
}

function sideColumns(m, field, text) {
  return m.labels.map((label, i) => ({key: `${field}${i}`, title: label, numeric: true,
                                      value: (r) => r[field][i], text: (r) => text(r[field][i])}));
}

function opsColumns(m) {
  return m.labels.map((label, i) => ({key: `ops${i}`, title: `${label} ops`,
                                      value: (r) => r.ops[i].join(', '),
                                      text: (r) => opsText(r.ops[i]),
                                      titleOf: (r) => r.ops[i].join('\n')}));
}

function groupsSection(m) {
  const table = new SortableTable({
    id: 'pc-groups-table',
    rows: m.groups,
    sort: {key: 'us0', dir: 'descending'},
    columns: [
      {key: 'key', title: 'group', value: (r) => r.key},
      ...sideColumns(m, 'us', cell),
      {key: 'ratio', title: 'ratio', numeric: true,
       value: (r) => (r.us[0] && r.us[1] ? r.us[0] / r.us[1] : null),
       text: (r) => (r.us[0] && r.us[1] ? ratio(r.us[0] / r.us[1]) : '-')},
      ...opsColumns(m)],
  });
  return section('pc-groups', 'What each run does, in any TF program\'s terms', [
    el('p', {class: 'pc-note'}, ['Mean per steady step, wall time shared among the threads ' +
      'working at each instant. Time no rule placed (unmapped): ' +
      m.labels.map((l, i) => `${l} ${duration(m.groupsUnmappedUs[i])}`).join(', ') + '.']),
    table.element]);
}

function stagesSection(m) {
  const rows = m.stages.filter((r) => r.us[0] || r.us[1]);
  const table = new SortableTable({
    id: 'pc-stages-table',
    rows,
    sort: {key: 'order', dir: 'ascending'},
    columns: [
      {key: 'order', title: '#', numeric: true, value: (r) => m.stages.indexOf(r)},
      {key: 'key', title: 'stage', value: (r) => r.key},
      ...sideColumns(m, 'us', cell),
      {key: 'ratio', title: 'ratio', numeric: true, value: (r) => r.ratio,
       text: (r) => ratio(r.ratio)},
      ...opsColumns(m)],
  });
  return section('pc-stages', 'The seed pipeline\'s stages', [
    el('p', {class: 'pc-note'}, [m.viewWhy]), table.element]);
}

function opsSection(m) {
  const table = new SortableTable({
    id: 'pc-ops-table',
    rows: m.ops,
    limit: 100,
    sort: {key: 'abs', dir: 'descending'},
    hasDetail: (r) => r.members.length > 0,
    detail: (r) => membersOf(r, m),
    columns: [
      {key: 'op', title: 'op', value: (r) => r.op, titleOf: (r) => r.op},
      {key: 'type', title: 'type', value: (r) => r.type},
      {key: 'status', title: 'status', value: (r) => r.status,
       text: (r) => r.status + (r.match === 'scope' || r.match === 'type' ? ` by ${r.match}` : '')},
      ...sideColumns(m, 'us', cell),
      {key: 'delta', title: 'delta', numeric: true, value: (r) => r.deltaUs,
       text: (r) => delta(r.deltaUs)},
      {key: 'abs', title: '|delta|', numeric: true, value: (r) => Math.abs(r.deltaUs),
       text: (r) => duration(Math.abs(r.deltaUs))},
      ...m.labels.map((label, i) => ({key: `count${i}`, title: `${label} calls`, numeric: true,
                                      value: (r) => r.count[i],
                                      text: (r) => (r.count[i] ? String(+r.count[i].toFixed(2)) : '-')}))],
  });
  const present = STATUSES.filter((s) => m.ops.some((r) => r.status === s));
  const buttons = ['all', ...present].map((s) => {
    const n = s === 'all' ? m.ops.length : m.ops.filter((r) => r.status === s).length;
    const b = el('button', {type: 'button', 'data-status': s, 'aria-pressed': String(s === 'all')},
                 [`${s} (${n})`]);
    b.addEventListener('click', () => {
      for (const x of bar.children) x.setAttribute('aria-pressed', String(x === b));
      table.setFilter(s === 'all' ? () => true : (r) => r.status === s);
    });
    return b;
  });
  const bar = el('div', {class: 'pc-filters', role: 'group', 'aria-label': 'filter by status'},
                 buttons);
  return section('pc-ops', 'Op by op', [
    el('p', {class: 'pc-note'}, ['Per steady step. Ops are matched by node name, then by name ' +
      'without TF\'s _N suffixes, then by type; ops that vanished into an XLA cluster are fused ' +
      'into it (open the row for what it holds). Click a heading to sort.']),
    bar, table.element]);
}

function membersOf(r, m) {
  const side = r.into === m.keys[0] ? m.labels[0] : r.into === m.keys[1] ? m.labels[1] : r.into;
  const more = r.membersTotal > r.members.length ?
    ` and ${r.membersTotal - r.members.length} more` : '';
  const head = r.status === 'fused' || r.status === 'unfused' ?
    `${r.op} holds ${r.membersTotal} op(s) of the other side${side ? ` (the fusion is on ${side})` : ''}:` :
    `${r.op} adds up ${r.membersTotal} op(s) matched by ${r.match || 'name'}:`;
  return el('div', {class: 'pc-members'}, [
    el('p', {}, [head]),
    el('ul', {}, r.members.map((x) => el('li', {}, [x]))),
    more ? el('p', {}, [more.trim()]) : null]);
}

function profileLink(session) {
  if (!session || !session.xplane) {
    return el('span', {class: 'pc-note'}, ['(no .xplane.pb: the Profile tab cannot open it)']);
  }
  const params = new URLSearchParams({run: session.name, tool: 'trace_viewer',
                                      host: session.hosts[0]});
  const top = window.top.location;
  return el('a', {href: `${top.pathname}?${params}#profile`, target: '_top',
                  class: 'pc-profile-link'}, ['open in the Profile tab\'s trace viewer']);
}

function sidesSection(m) {
  const cards = m.labels.map((label, i) => {
    const answers = m.answers[i];
    const s = m.sessions[i];
    return el('div', {class: 'pc-card', 'data-side': String(i)}, [
      el('h3', {}, [`${label}`, el('span', {class: 'pc-session'}, [s ? ` ${s.name}` : ''])]),
      el('p', {}, [profileLink(s)]),
      el('pre', {class: 'pc-answer pc-summary'}, [answers.summary || '']),
      ...ANSWERS.filter(([k]) => answers[k]).map(([k, title]) => el('details', {}, [
        el('summary', {}, [title]), el('pre', {class: 'pc-answer'}, [answers[k]])])),
      m.sources[i].warnings && m.sources[i].warnings.length ?
        el('ul', {class: 'pc-warnings'}, m.sources[i].warnings.map((w) => el('li', {}, [w]))) :
        null]);
  });
  return section('pc-sides', 'Each side explained', [el('div', {class: 'pc-cards'}, cards)]);
}

function quoted(path) {
  return /^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replace(/'/g, "'\\''")}'`;
}

function filesSection(files, params, m) {
  const links = (files || []).map((name) => el('a', {href: route('file', {...params, name}),
                                                     download: name}, [name]));
  const items = [];
  links.forEach((a, i) => { if (i) items.push(' · '); items.push(a); });
  const paths = m.sources.map((s) => s.path).filter((p) => p);
  const command = paths.length === 2 ?
    `python -m compare.run ${quoted(paths[0])} ${quoted(paths[1])} ` +
    `--labels ${quoted(`${m.labels[0]},${m.labels[1]}`)}` : null;
  return section('pc-files', 'Files', [
    items.length ? el('p', {}, ['The data this page shows: ', ...items, '.']) : null,
    command ? el('p', {}, ['The same comparison with report.md, its pictures and both runs ' +
                           'in one trace for Perfetto (merged_trace.json.gz):']) : null,
    command ? el('pre', {class: 'pc-answer', id: 'pc-command'}, [command]) : null]);
}
