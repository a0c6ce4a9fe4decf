// The one place the page reads report.json (compare/output/report_json.py, its schema in
// compare/output/report.schema.json) and timelines.json (compare/output/step_timeline.py).
// Everything else renders the plain model returned here, so a schema change is met here.
//
// Sides: report.json's `order` ([key of A, key of B]) when present, else the version-3 keys
// "legacy" (A) and "modern" (B). Per-side values of a row are `<key>_<field>`.
// `step_delta`, when present: {basis, a_us, b_us, delta_us, terms: [{key, group, a_us, b_us,
// delta_us, ops: [{op, delta_us}]}], rest_us}, the terms adding up to delta_us.

export function sideKeys(report) {
  const order = report.order;
  return Array.isArray(order) && order.length === 2 ? order.slice() : ['legacy', 'modern'];
}

function perSide(row, keys, field) {
  return keys.map((k) => row[`${k}_${field}`]);
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
    labels,
    terms: d.terms.map((t) => ({
      key: t.key,
      group: t.group,
      aUs: t.a_us,
      bUs: t.b_us,
      deltaUs: t.delta_us,
      ops: list(t.ops).map((o) => ({op: o.op, deltaUs: o.delta_us})),
    })),
  };
}

function timelineSides(timelines) {
  if (!timelines || !timelines.sides) return [null, null];
  const order = Array.isArray(timelines.order) && timelines.order.length === 2 ?
    timelines.order : Object.keys(timelines.sides);
  return order.map((k) => timelines.sides[k] ? {
    key: k,
    label: (timelines.labels || {})[k] || k,
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
  const labels = keys.map((k) => (report.labels || {})[k] || k);
  const verdict = report.verdict || {};
  const parity = report.comparability || {};
  const view = report.view || {};
  const steps = keys.map((k) => {
    const s = (report.steps || {})[k] || {};
    return {
      medianUs: s.median_us, count: s.count, steadyCount: s.steady_count,
      firstUs: s.first_us, firstKind: s.first_kind,
      step: s.representative ? s.representative.step : null,
    };
  });
  return {
    keys,
    labels,
    sessions: pair ? [pair.a, pair.b] : [null, null],
    sources: keys.map((k) => (report.sources || {})[k] || {}),
    verdict: {
      comparison: verdict.comparison || '',
      sides: keys.map((k) => verdict[k] || ''),
      significant: !!verdict.significant,
    },
    comparability: {
      likeForLike: !!parity.like_for_like,
      caveats: list(parity.caveats).map((c) => ({kind: c.kind, text: c.text, breaks: !!c.breaks})),
    },
    view: view.shown || 'groups',
    viewWhy: view.why || '',
    steps,
    groups: groupRows(report, keys),
    groupsUnmappedUs: keys.map((k) => ((report.groups || {}).unmapped_us || {})[k] || 0),
    stages: stageRows(report, keys),
    stagesUnmappedUs: keys.map((k) => (report.unmapped_us || {})[k] || 0),
    ops: opRows(report, keys),
    answers: keys.map((k) => (report.answers || {})[k] || {}),
    stepDelta: stepDelta(report, labels),
    timelines: timelineSides(timelines),
    timelineView: (timelines && timelines.view) || 'stages',
    colors: (timelines && timelines.colors) || {},
  };
}
