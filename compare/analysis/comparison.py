"""One trace against another: the typed facts behind ``report.json``.

Each side is one trace (for our runs the TensorBoard profile, which marks steps and carries the
HLO), analysed once (:mod:`compare.analysis.analyse`: mapping, attribution, XLA) and booked in
one account (:mod:`compare.analysis.account`): every table below — the seed's stages, the
generic view's groups, the step split, ``ops_diff``, ``types_diff`` and the step difference
(:mod:`compare.analysis.step_delta`) — sums that account's cells, means per steady step (every
step but the first; a single step's own), so the same quantity is the same number in each.
The first step is reported apart (start-up and XLA compiles). A side may carry cross checks
from other traces of the same run (legacy's ``timeline.json``). The sides are ``a`` and ``b``;
``labels`` name them. :mod:`compare.output.report_json` serialises a :class:`Comparison`.
"""
from __future__ import annotations

import dataclasses
import time
from collections import defaultdict

import numpy as np

from common.stages import ALL_STAGES, PIPELINE_STAGES
from compare.analysis import opdiff, parity
from compare.analysis.account import UNTRACED, Account, StepAccount, account
from compare.analysis.analyse import analyse
from compare.analysis.attribution import Attribution, attribute
from compare.analysis.compare_verdict import verdicts
from compare.analysis.groups import map_groups
from compare.analysis.mapping import map_stages
from compare.analysis.noise import mean_test
from compare.analysis.opdiff import OpDiff
from compare.analysis.result import (
    SIDES,
    Comparison,
    Coverage,
    CrossCheck,
    GroupCell,
    GroupRow,
    OpTime,
    Representative,
    SideResult,
    Source,
    StageCell,
    StageRow,
    StepStats,
    XlaTotals,
    XlaUnitRow,
    stages_cover,
    view_of,
)
from compare.analysis.side import Side
from compare.analysis.step_delta import Basis, basis, step_delta
from compare.analysis.xla import XlaSummary, summarize
from compare.model.events import Trace
from compare.vocabulary.groups import GROUP_SPLIT, GROUPS, SPLIT_KEYS
from compare.vocabulary.labels import BASES, BASIS, ESTIMATES, LABEL, LABELS, SCOPE_SUFFIX
from compare.vocabulary.ops import TRAIN_FUNCTION
from compare.vocabulary.thresholds import (
    GROUP_ROWS_KEPT,
    SCOPE_VARIANTS_MERGED,
)

#: Ops listed with their time per stage row and side.
OPS_WITH_TIME = 12
#: Per label: (op display name, mean wall µs per steady step), largest first.
OpsByLabel = dict[int, list[tuple[str, float]]]


def side(name: str, trace: Trace, source_note: str = "") -> Side:
    """Analyse one trace as a side of a comparison: stages, groups, its account, ops."""
    analysis = analyse(trace)
    groups = map_groups(trace, analysis.smap)
    booked = account(analysis, groups)
    return Side(name, analysis, groups, booked, opdiff.op_table(booked), source_note)


# --------------------------------------------------------------------------------------------
# building it

def compare(a: Side, b: Side, labels: dict[str, str] | None = None) -> Comparison:
    """Both sides stage by stage and group by group, op by op, the step difference in terms,
    with the parity checks and a verdict (see the module docstring). ``labels``: what to call
    each side (``a``, ``b``) in words."""
    sides = {"a": a, "b": b}
    ops = {k: _ops_by_label(s) for k, s in sides.items()}
    stages = [_stage_row(stage, sides, ops) for stage in ALL_STAGES]
    bases = {k: basis(s.account, s.trace.format == "timeline") for k, s in sides.items()}
    results = {k: _side_result(k, s, stages, ops[k], bases[k]) for k, s in sides.items()}
    times = {k: group_times(s) for k, s in sides.items()}
    alias = scope_aliases({k: set(t.wall) | set(t.cpu) for k, t in times.items()})
    _representative_groups(sides, results, alias)
    ops_diff = opdiff.diff(a.ops.ops, b.ops.ops,
                           {k: opdiff.unit_members(s.analysis) for k, s in sides.items()})
    delta = step_delta({k: s.account for k, s in sides.items()}, bases, ops_diff)
    _test_top_ops(ops_diff, sides)
    par = parity.check(sides, ops_diff, bases, _stage_times(stages, results))
    verdict = verdicts(view_of(stages, results), stages, delta, par, ops_diff)
    return Comparison(time.strftime("%Y-%m-%dT%H:%M:%S%z"), stages, results, verdict, par, delta,
                      labels=dict(labels or {k: k for k in SIDES}),
                      groups=group_rows(times, alias), ops_diff=ops_diff,
                      types_diff=opdiff.by_type(a.ops, b.ops))


def _representative_groups(sides: dict[str, Side], results: dict[str, SideResult],
                           alias: dict[str, dict[str, str]]) -> None:
    """Each side's representative step by the generic view's rows (aliased as the rows are)."""
    for k, s in sides.items():
        rep, st = results[k].steps.representative, _account_step(s)
        if rep is not None and st is not None:
            rep.groups_us = {key: round(v, 1) for key, v in _aliased(GroupTimes(
                _row_totals(s.account, st, "wall"), {}, None, {}), alias[k]).wall.items()
                if v > 0}


def _stage_times(stages: list[StageRow], sides: dict[str, SideResult]
                 ) -> dict[str, dict[str, float]] | None:
    """Per side, the seed pipeline's stages with time (mean us per step), when the stages hold
    (nearly) all of both sides' steps; else None."""
    if not stages_cover(stages, sides):
        return None
    return {k: {r.stage: r.cells[k].us for r in stages
                if r.kind == "pipeline" and r.cells[k].us > 0} for k in sides}


#: Rows of ``ops_diff`` whose change is tested against the step-to-step spread.
OPS_TESTED = 20


def _test_top_ops(ops_diff: list[OpDiff], sides: dict[str, Side]) -> None:
    """The largest op changes, each tested against its per-step spread (the bootstrap of
    :mod:`compare.analysis.noise`, where both sides hold enough steps)."""
    top = ops_diff[:OPS_TESTED]
    keys = {k: [key for r in top for key in r.keys.get(k, [])] for k in sides}
    samples = {k: opdiff.op_samples(s.account, keys[k]) for k, s in sides.items()}
    for r in top:
        per = {}
        for k, s in sides.items():
            n = len(s.account.steady)
            per[k] = sum((samples[k].get(key, np.zeros(n)) for key in r.keys.get(k, [])),
                         np.zeros(n))
        r.test = mean_test(per["a"], per["b"])


@dataclasses.dataclass
class GroupTimes:
    """Per row key (``compute: layer_1``, ``input``, ...): mean wall, CPU and busy time per
    steady step, the first step's wall time (None with one step), and its largest ops. The
    rows of a step add up to the step (see :mod:`compare.analysis.account`)."""

    wall: dict[str, float]
    cpu: dict[str, float]
    first: dict[str, float] | None
    ops: dict[str, list[str]]
    busy: dict[str, float] = dataclasses.field(default_factory=dict)


def _row_totals(acc: Account, st: StepAccount, what: str) -> dict[str, float]:
    ids, rows = acc.ids(lambda c: c.row)
    vals = st.total(what, ids, len(rows))
    return {r: float(v) for r, v in zip(rows, vals) if v}


def group_times(s: Side, n_ops: int = 4) -> GroupTimes:
    """The generic view's time per row from the side's account, and each row's largest ops
    (by wall time, over the steady steps)."""
    acc = s.account
    ids, rows = acc.ids(lambda c: c.row)
    mean = {what: acc.mean(what, ids, len(rows)) for what in ("wall", "cpu", "busy")}

    def pick(v: np.ndarray) -> dict[str, float]:
        return {r: float(x) for r, x in zip(rows, v) if x}

    first = acc.first
    return GroupTimes(pick(mean["wall"]), pick(mean["cpu"]),
                      _row_totals(acc, first, "wall") if first is not None else None,
                      _row_ops(s, n_ops), pick(mean["busy"]))


def _row_ops(s: Side, n: int) -> dict[str, list[str]]:
    """Per row key, the names of its events with the most wall time in the steady steps."""
    tr, acc = s.trace, s.account
    ev = tr.events
    totals: dict[tuple[int, int], float] = defaultdict(float)
    for st in s.attribution.steady:
        e = st.events
        names = np.where(ev.op_type[e] > 0, ev.op_type[e], ev.name[e])
        for r, nm, w in zip(acc.event_rows[e].tolist(), names.tolist(), st.ev_wall.tolist()):
            totals[(r, nm)] += w
    by_row: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for (r, nm), w in totals.items():
        by_row[acc.rows[r]].append((w, tr.s(nm)))
    return {k: [nm for _, nm in sorted(v, key=lambda x: (-x[0], x[1]))[:n]]
            for k, v in by_row.items()}


def _account_step(s: Side) -> StepAccount | None:
    """The account's step that the attribution's representative step is."""
    rep = s.attribution.representative()
    if rep is None:
        return None
    return next((st for st in s.account.steps if st.num == rep.num and st.ts == rep.ts), None)


def scope_aliases(keys: dict[str, set[str]]) -> dict[str, dict[str, str]]:
    """Per side, row key -> the key it is shown under: a ``compute`` scope found on one side
    only, whose name without TF's uniquifying ``_N`` suffix is that of a scope found on the
    other side only (``gradients`` in A, ``gradients_3`` in B: the same graph built again in
    one process), is shown under that plain name on both, as op matching pairs them; a scope
    with :data:`SCOPE_VARIANTS_MERGED` numbered copies or more is one row, ``<scope>_*``."""
    scopes = {k: {key.partition(": ")[2] for key in ks if key.startswith("compute: ")}
              for k, ks in keys.items()}
    out: dict[str, dict[str, str]] = {k: {} for k in keys}
    if len(scopes) != 2:
        return out
    (ka, a), (kb, b) = scopes.items()
    lone = {ka: a - b, kb: b - a}

    def base(sc: str) -> str:
        return SCOPE_SUFFIX.sub("", sc)

    shared = {base(x) for x in lone[ka]} & {base(x) for x in lone[kb]}
    for k, names in lone.items():
        for sc in names:
            if base(sc) in shared and base(sc) != sc:
                out[k][f"compute: {sc}"] = f"compute: {base(sc)}"
    # many numbered copies of one scope (clip_by_value_1 ... clip_by_value_49: one API call
    # per variable) are one row, ``clip_by_value_*``
    variants: dict[str, set[str]] = defaultdict(set)
    for sc in a | b:
        variants[base(sc)].add(sc)
    for stem, names in variants.items():
        if len(names - {stem}) >= SCOPE_VARIANTS_MERGED:
            for k in out:
                out[k].update({f"compute: {sc}": f"compute: {stem}_*" for sc in names
                               if sc in scopes[k]})
    return out


def _aliased(t: GroupTimes, alias: dict[str, str]) -> GroupTimes:
    """``t`` with its row keys renamed by ``alias`` (rows that meet are added up)."""
    def fold(d: dict[str, float]) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for key, v in d.items():
            out[alias.get(key, key)] += v
        return dict(out)

    ops: dict[str, dict[str, None]] = defaultdict(dict)   # ordered sets: rows may meet by
    for key, names in t.ops.items():                      # the thousand
        ops[alias.get(key, key)].update(dict.fromkeys(names))
    return GroupTimes(fold(t.wall), fold(t.cpu), fold(t.first) if t.first is not None else None,
                      {k: list(v) for k, v in ops.items()}, fold(t.busy))


def group_rows(raw: dict[str, GroupTimes], alias: dict[str, dict[str, str]]
               ) -> list[GroupRow]:
    """The generic view's rows, both sides, in group order (compute rows by time); ``alias``:
    per side, row keys shown under another key (:func:`scope_aliases`)."""
    times = {k: _aliased(t, alias.get(k, {})) for k, t in raw.items()}
    keys = {key for t in times.values() for key in (*t.wall, *t.cpu)}
    rows = []
    for key in keys:
        group, _, scope = key.partition(": ")
        cells = {k: GroupCell(round(t.wall.get(key, 0.0), 1), round(t.cpu.get(key, 0.0), 1),
                              round(t.first.get(key, 0.0), 1) if t.first is not None else None,
                              t.ops.get(key, [])[:4], round(t.busy.get(key, 0.0), 1))
                 for k, t in times.items()}
        if any(c.us or c.cpu_us or c.first_us for c in cells.values()):
            rows.append(GroupRow(key, group, scope, cells))
    order = {g: i for i, g in enumerate(GROUPS[1:] + ("unmapped", UNTRACED))}
    rows.sort(key=lambda r: (order[r.group], -max(c.us for c in r.cells.values()), r.key))
    return _fold_rows(rows)


def _fold_rows(rows: list[GroupRow]) -> list[GroupRow]:
    """Each group's rows past its GROUP_ROWS_KEPT largest as one row, ``(N more scopes)``."""
    out: list[GroupRow] = []
    by_group: dict[str, list[GroupRow]] = defaultdict(list)
    for r in rows:
        by_group[r.group].append(r)
    for group, members in by_group.items():
        out += members[:GROUP_ROWS_KEPT]
        rest = members[GROUP_ROWS_KEPT:]
        if rest:
            scope = f"({len(rest)} more scopes)"
            cells = {k: _sum_cells([r.cells[k] for r in rest]) for k in rest[0].cells}
            out.append(GroupRow(f"{group}: {scope}", group, scope, cells))
    return out


def _sum_cells(cells: list[GroupCell]) -> GroupCell:
    firsts = [c.first_us for c in cells if c.first_us is not None]
    return GroupCell(round(sum(c.us for c in cells), 1), round(sum(c.cpu_us for c in cells), 1),
                     round(sum(firsts), 1) if firsts else None, [],
                     round(sum(c.busy_us for c in cells), 1))


def _stage_row(stage: str, sides: dict[str, Side], ops: dict[str, OpsByLabel]) -> StageRow:
    lab = LABEL[stage]
    cells = {k: _cell(s.attribution, lab, ops[k].get(lab, [])) for k, s in sides.items()}
    m = cells["b"].us
    return StageRow(stage, "pipeline" if stage in PIPELINE_STAGES else "overhead", cells,
                    round(cells["a"].us / m, 3) if m > 0 else None)


def _mean(att: Attribution, what: str) -> np.ndarray:
    rows = [getattr(s, what) for s in att.steady]
    return np.mean(np.stack(rows), axis=0) if rows else np.zeros(len(LABELS))


def _cell(att: Attribution, lab: int, ops: list[tuple[str, float]]) -> StageCell:
    return StageCell(
        us=round(float(_mean(att, "wall")[lab]), 1),
        median_us=round(float(att.median("wall")[lab]), 1),
        cpu_us=round(float(_mean(att, "cpu")[lab]), 1),
        first_us=round(float(att.first.wall[lab]), 1) if att.first else None,
        estimated_us=round(float(_mean(att, "wall_estimated")[lab]), 1),
        ops=[name for name, _ in ops],
        op_us=[OpTime(name, round(v, 1)) for name, v in ops[:OPS_WITH_TIME]])


def _side_result(k: str, s: Side, stages: list[StageRow], ops: OpsByLabel, b: Basis
                 ) -> SideResult:
    steps = step_stats(s, b)
    unmapped = round(float(_mean(s.attribution, "wall")[0]), 1)
    have = [r.stage for r in stages if r.kind == "pipeline" and r.cells[k].us > 0
            and r.cells[k].ops]
    return SideResult(
        source=Source(s.trace.source, s.trace.format, s.source_note, list(s.trace.warnings)),
        steps=steps, xla=xla_totals(s.xla, _units(s)), unmapped_us=unmapped,
        unmapped_ops=[OpTime(n, round(v, 1)) for n, v in ops.get(0, [])[:OPS_WITH_TIME]],
        estimates_used=_estimates_used(s),
        coverage=Coverage(have, round(unmapped / steps.mean_us, 4) if steps.mean_us else 0.0),
        cross_checks=list(s.cross_checks))


def split(acc: Account, st: StepAccount) -> dict[str, float]:
    """One step of the account by :data:`SPLIT_KEYS` (its groups, coarser): adds up to it."""
    ids, keys = acc.ids(lambda c: GROUP_SPLIT.get(c.group, "compute"))
    vals = st.total("wall", ids, len(keys))
    out = dict.fromkeys(SPLIT_KEYS, 0.0)
    for k, v in zip(keys, vals.tolist()):
        out[k] += v
    return out


def _mean_split(acc: Account) -> dict[str, float]:
    ids, keys = acc.ids(lambda c: GROUP_SPLIT.get(c.group, "compute"))
    vals = acc.mean("wall", ids, len(keys))
    out = dict.fromkeys(SPLIT_KEYS, 0.0)
    for k, v in zip(keys, vals.tolist()):
        out[k] += v
    return out



def by_stage(arr: np.ndarray) -> dict[str, float]:
    """Per stage (label) with time: its time, rounded."""
    return {LABELS[i]: round(float(arr[i]), 1) for i in range(len(LABELS)) if arr[i] > 0}

def step_stats(s: Side, b: Basis) -> StepStats:
    att, acc = s.attribution, s.account
    first = att.first
    durs = [x.dur for x in att.steady]
    rep = att.representative()
    return StepStats(
        count=len(att.steps), steady_count=len(att.steady),
        mean_us=round(float(np.mean(durs)), 1) if durs else 0.0,
        representative=(Representative(rep.num, round(rep.dur, 1), by_stage(rep.wall))
                        if rep else None),
        blocked_us=round(float(np.mean([x.blocked_us for x in att.steady])) if durs else 0.0,
                         1),
        median_us=round(att.median_step_us(), 1),
        first_us=round(first.dur, 1) if first else None,
        min_us=round(float(min(durs)), 1) if durs else 0.0,
        max_us=round(float(max(durs)), 1) if durs else 0.0,
        split_us={k: round(v, 1) for k, v in _mean_split(acc).items()},
        first_split_us=({k: round(v, 1) for k, v in split(acc, acc.first).items()}
                        if acc.first is not None else None),
        basis=b.kind, basis_us=round(b.us, 1), untraced_us=round(b.untraced_us, 1),
        input_us=round(float(np.mean([x.input_us for x in att.steady])) if durs else 0.0, 1),
        first_compile_us=round(first.compile_us, 1) if first else None,
        first_kind=first_kind(att.trace),
        first_num=att.steps[0].num if att.steps else None,
        last_num=att.steps[-1].num if att.steps else None,
        unmarked_calls=unmarked_calls(att.trace))


def first_kind(trace: Trace) -> str:
    """Whether the trace's first step is the program's first (see :class:`StepStats`): only
    step numbers the program wrote tell; a timeline's session runs carry none."""
    if not trace.steps or not trace.meta.get("steps_numbered"):
        return "unknown"
    return "program" if min(trace.steps, key=lambda st: st.ts).num <= 1 else "window"


def unmarked_calls(trace: Trace) -> int:
    """Keras ``train_function`` calls (outermost per thread) whose middle lies in no step of
    the trace's steps (taken from other marks)."""
    names = trace.strings.names
    ids = [i for i, n in enumerate(names) if TRAIN_FUNCTION.match(n)]
    if not ids or "train_function" in trace.meta.get("steps_from", ""):
        return 0
    ev = trace.events
    calls = np.isin(ev.name, ids)
    parent = trace.nesting.parent

    def outermost(i: int) -> bool:
        p = int(parent[i])
        while p >= 0 and not calls[p]:
            p = int(parent[p])
        return p < 0

    idx = np.array([i for i in np.flatnonzero(calls).tolist() if outermost(i)], np.int64)
    mids = ev.ts[idx] + ev.dur[idx] / 2
    inside = np.zeros(len(idx), bool)
    for st in trace.steps:
        inside |= (mids >= st.ts) & (mids < st.ts + st.dur)
    return int((~inside).sum())


def xla_totals(s: XlaSummary, units: dict[str, XlaUnitRow] | None = None) -> XlaTotals:
    return XlaTotals(round(s.compile_us, 1), round(s.run_us, 1), int(s.compiles),
                     list(s.recompiled), s.launch_style, units)


def _units(side: Side) -> dict[str, XlaUnitRow]:
    """Each XLA cluster / compiled function: its TF ops, stages, compiles and run time."""
    out = {}
    for name, contents in sorted(side.smap.units.items(), key=lambda kv: _unit_key(kv[0])):
        u = side.xla.units.get(name)
        d = contents.as_dict()
        out[name] = XlaUnitRow(d["kind"], d["ops"], d["stages"], u.compiles if u else 0,
                               round(u.compile_us, 1) if u else 0.0, u.runs if u else 0,
                               round(u.run_us, 1) if u else 0.0)
    return out


def _unit_key(name: str) -> tuple[int, int | str]:
    parts = name.split("_")
    return (0, int(parts[1])) if name.startswith("cluster_") and parts[1].isdigit() else (1, name)


def _ops_by_label(side: Side) -> OpsByLabel:
    """Per label: (op display name, mean wall µs per steady step), largest first."""
    acc: dict[tuple[int, str], float] = defaultdict(float)
    names: dict[int, str] = {}
    steady = side.attribution.steady
    for st in steady:
        for i, w in zip(st.events.tolist(), st.ev_wall.tolist()):
            if i not in names:
                names[i] = side.smap.display_name(i)
            for lab, frac in side.smap.fractions(i):
                acc[(lab, names[i])] += w * frac
    out: dict[int, list[tuple[str, float]]] = defaultdict(list)
    n = max(1, len(steady))
    for (lab, name), v in acc.items():
        out[lab].append((name, v / n))
    return {lab: sorted(rows, key=lambda r: (-r[1], r[0])) for lab, rows in out.items()}


def _estimates_used(side: Side) -> list[str]:
    """Which kinds of estimate carry time in this side's steady steps."""
    est = {BASIS[b] for b in ESTIMATES}
    used = {BASES[side.smap.basis[i]] for st in side.attribution.steady
            for i in st.events[st.ev_wall > 0].tolist() if side.smap.basis[i] in est}
    if any(st.credited_us > 0 for st in side.attribution.steady):
        used.add("concurrent_op")
    return sorted(used)


# --------------------------------------------------------------------------------------------
# cross checks

def cross_check(side: Side, other: Trace, label: str, against: str = "steady") -> CrossCheck:
    """Per-stage wall time of another trace of the same run (legacy's timeline.json, whose
    cluster runs are split as the profile measured them) beside the side's own numbers for the
    same kind of step (``against``: "steady" = the side's steady median, "first" = its first
    step)."""
    other_xla = summarize(other)
    smap = map_stages(other, reference=side.smap, lookups=other_xla.lookup_events)
    att = attribute(other, smap)
    rows = att.steady or att.steps
    wall = np.mean(np.stack([s.wall for s in rows]), axis=0) if rows else np.zeros(len(LABELS))
    own = side.attribution
    if against == "first" and own.first is not None:
        mine, mine_step = own.first.wall, own.first.dur
    else:
        mine = _mean(own, "wall")
        mine_step = float(np.mean([x.dur for x in own.steady])) if own.steady else 0.0
    return CrossCheck(label, other.format, len(att.steps), against,
                      float(np.mean([s.dur for s in rows])) if rows else 0.0,
                      round(float(mine_step), 1), by_stage(wall), by_stage(mine),
                      xla_totals(other_xla))
