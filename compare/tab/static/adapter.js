// The one place the page reads report.json (compare/output/report_json.py, its schema in
// compare/output/report.schema.json) and timelines.json (compare/output/step_timeline.py).
// Everything else renders the plain model returned here, so a schema change is met here.
//
// Sides (schema 4): `order` is [label of A, label of B]; what belongs to one side (steps,
// sources, answers, verdict.sides, ...) is keyed by its label, and a table row holds side A's
// values as `a_<field>` and side B's as `b_<field>`. Reports without `order` (schema 3 and
// before) key both by "legacy" (A) and "modern" (B).
// `step_delta`, when present: {basis, a_us, b_us, delta_us, terms: [{key, words, a_us, b_us,
// delta_us, ops: [{op, type, delta_us}]}]}, the terms adding up to delta_us (a `rest_us` the
// terms leave is drawn when a report has one).

function hasOrder(report) {
  return Array.isArray(report.order) && report.order.length === 2;
}

// The keys of the per-side objects, A then B.
export function sideKeys(report) {
  return hasOrder(report) ? report.order.slice() : ['legacy', 'modern'];
}

// The prefixes of a row's per-side fields, A then B.
function rowPrefixes(report) {
  return hasOrder(report) ? ['a', 'b'] : ['legacy', 'modern'];
}

function perSide(row, prefixes, field) {
  return prefixes.map((k) => row[`${k}_${field}`]);
}

function list(x) {
  return Array.isArray(x) ? x : [];
}

function groupRows(report, keys) {
  const groups = report.groups || {};
  return list(groups.rows).map((r) => ({
    key: r.scope ? `${r.group}: ${r.scope}` : r.group,
    group: r.group,
    us: perSide(r, keys, 'us'),
    busyUs: perSide(r, keys, 'busy_us'),
    cpuUs: perSide(r, keys, 'cpu_us'),
    firstUs: perSide(r, keys, 'first_us'),
    ops: perSide(r, keys, 'ops').map(list),
  }));
}

function stageRows(report, keys) {
  return list(report.stages).map((r) => ({
    key: r.stage,
    kind: r.kind,
    us: perSide(r, keys, 'us'),
    cpuUs: perSide(r, keys, 'cpu_us'),
    firstUs: perSide(r, keys, 'first_us'),
    ops: perSide(r, keys, 'ops').map(list),
    ratio: r.ratio,
  }));
}

function opRows(report, keys) {
  return list(report.ops_diff).map((r, i) => ({
    index: i,
    op: r.op,
    type: r.type,
    status: r.status,
    match: r.match,
    group: r.group,
    us: perSide(r, keys, 'us'),
    wallUs: perSide(r, keys, 'wall_us'),
    count: perSide(r, keys, 'count'),
    deltaUs: r.delta_us,
    members: list(r.members),
    membersTotal: r.members_total || 0,
    into: r.into || '',
  }));
}

function stepDelta(report, labels) {
  const d = report.step_delta;
  if (!d || !Array.isArray(d.terms)) return null;
  return {
    basis: d.basis,
    aUs: d.a_us,
    bUs: d.b_us,
    deltaUs: d.delta_us,
    restUs: d.rest_us || 0,
    beyondNoise: d.beyond_noise ?? null,
    labels,
    terms: d.terms.map((t) => ({
      key: t.key,
      words: t.words || t.key,
      aUs: t.a_us,
      bUs: t.b_us,
      deltaUs: t.delta_us,
      beyondNoise: t.beyond_noise ?? null,
      ops: list(t.ops).map((o) => ({op: o.op, type: o.type || '', deltaUs: o.delta_us})),
    })),
  };
}

// timelines.json: sides keyed as report.json's (`keys`), `order` naming them A then B.
function timelineSides(timelines, keys) {
  if (!timelines || !timelines.sides) return [null, null];
  const order = Array.isArray(timelines.order) && timelines.order.length === 2 ?
    timelines.order : keys;
  return order.map((k) => timelines.sides[k] ? {
    key: k,
    label: k,
    step: timelines.sides[k].step,
    durUs: timelines.sides[k].dur_us,
    lanesTotal: timelines.sides[k].lanes_total,
    folded: timelines.sides[k].folded || '',
    lanes: list(timelines.sides[k].lanes).map((ln) => ({
      name: ln.name,
      short: ln.short || ln.name,
      bars: list(ln.bars).map((b) => ({
        startUs: b.start_us, durUs: b.dur_us, label: b.label, op: b.op, wait: !!b.wait,
        ops: b.ops || 1,
      })),
    })),
  } : null);
}

// The model every view renders. `pair`: the sessions compared ({a, b} as /sessions lists them).
export function readReport(report, timelines, pair) {
  const keys = sideKeys(report);
  const prefixes = rowPrefixes(report);
  const labels = hasOrder(report) ? keys : keys.map((k) => (report.labels || {})[k] || k);
  const verdict = report.verdict || {};
  const verdictSides = verdict.sides && typeof verdict.sides === 'object' ? verdict.sides : verdict;
  const parity = report.comparability || {};
  const view = report.view || {};
  const perKey = (name) => keys.map((k) => (report[name] || {})[k]);
  const steps = perKey('steps').map((s = {}) => ({
    meanUs: s.mean_us ?? s.median_us, medianUs: s.median_us, count: s.count,
    steadyCount: s.steady_count, firstUs: s.first_us, firstKind: s.first_kind,
    step: s.representative ? s.representative.step : null,
  }));
  return {
    keys,
    labels,
    sessions: pair ? [pair.a, pair.b] : [null, null],
    sources: perKey('sources').map((s) => s || {}),
    verdict: {
      comparison: verdict.comparison || '',
      sides: keys.map((k) => verdictSides[k] || ''),
      significant: !!verdict.significant,
    },
    comparability: {
      likeForLike: !!parity.like_for_like,
      caveats: list(parity.caveats).map((c) => ({kind: c.kind, text: c.text, breaks: !!c.breaks})),
    },
    view: view.shown || 'groups',
    viewWhy: view.why || '',
    steps,
    groups: groupRows(report, prefixes),
    groupsUnmappedUs: keys.map((k) => ((report.groups || {}).unmapped_us || {})[k] || 0),
    stages: stageRows(report, prefixes),
    stagesUnmappedUs: perKey('unmapped_us').map((x) => x || 0),
    ops: opRows(report, prefixes),
    answers: perKey('answers').map((x) => x || {}),
    stepDelta: stepDelta(report, labels),
    timelines: timelineSides(timelines, keys),
    timelineView: (timelines && timelines.view) || 'stages',
    colors: (timelines && timelines.colors) || {},
  };
}
