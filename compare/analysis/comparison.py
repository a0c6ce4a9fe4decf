"""One trace against another, stage by stage: the typed facts behind ``report.json``.

Each side is one trace (for our runs the TensorBoard profile, which marks steps and carries the
HLO), analysed once (:mod:`compare.analysis.analyse`: mapping, attribution, XLA). Per stage we
report the median over steady steps (every step but the first) of wall and CPU time, the first
step apart (start-up and XLA compiles), the ops behind each number on each side, and how much
of it rests on an estimate. A side may carry cross checks from other traces of the same run
(legacy's ``timeline.json``). :mod:`compare.output.report_json` serialises a
:class:`Comparison`; :mod:`compare.analysis.comparison_verdict` words it.
"""
from __future__ import annotations

import dataclasses
import time
from collections import defaultdict

import numpy as np

from common.stages import ALL_STAGES, PIPELINE_STAGES
from compare.analysis import opdiff, parity
from compare.analysis.analyse import TraceAnalysis, analyse
from compare.analysis.attribution import Attribution, attribute
from compare.analysis.comparison_verdict import Verdicts, verdicts
from compare.analysis.groups import (
    GroupMap,
    GroupTimes,
    group_times,
    map_groups,
    step_group_times,
)
from compare.analysis.mapping import StageMap, map_stages
from compare.analysis.opdiff import OpDiff, SideOps, TypeDiff
from compare.analysis.parity import Parity
from compare.analysis.xla import XlaSummary, summarize
from compare.model.events import Trace
from compare.model.per_step import stats as per_step_stats
from compare.vocabulary.groups import GROUPS
from compare.vocabulary.labels import BASES, BASIS, ESTIMATES, LABEL, LABELS, SCOPE_SUFFIX
from compare.vocabulary.ops import TRAIN_FUNCTION
from compare.vocabulary.thresholds import GROUP_ROWS_KEPT, SCOPE_VARIANTS_MERGED

#: The two sides, as report.json keys them.
SIDES = ("legacy", "modern")
#: Ops listed with their time per stage row and side.
OPS_WITH_TIME = 12
ATTRIBUTION_NOTE = (
    "wall: each instant of a step is shared equally among the threads working at that instant "
    "(each at its innermost event's stage); instants where threads only wait go to what they "
    "wait in, instants with nothing traced to idle; per step it adds up to the step time. "
    "cpu: busy thread time per stage summed over threads. Stage numbers are medians over "
    "steady steps (every step but the first); the first step is reported apart.")


@dataclasses.dataclass
class Side:
    """One side of the comparison: its name, its analysed trace, and where it came from."""

    name: str
    analysis: TraceAnalysis
    source_note: str = ""
    cross_checks: list["CrossCheck"] = dataclasses.field(default_factory=list)
    groups: GroupMap | None = None          # the generic view of every event
    ops: SideOps | None = None              # its ops' time per steady step

    @property
    def trace(self) -> Trace:
        return self.analysis.trace

    @property
    def smap(self) -> StageMap:
        return self.analysis.smap

    @property
    def attribution(self) -> Attribution:
        return self.analysis.attribution

    @property
    def xla(self) -> XlaSummary:
        return self.analysis.xla


def side(name: str, trace: Trace, source_note: str = "") -> Side:
    """Analyse one trace as a side of a comparison: stages, groups, ops."""
    a = analyse(trace)
    gmap = map_groups(trace, a.smap)
    return Side(name, a, source_note, groups=gmap, ops=opdiff.op_table(a, gmap))


# --------------------------------------------------------------------------------------------
# the typed result

@dataclasses.dataclass
class OpTime:
    op: str
    us: float


@dataclasses.dataclass
class StageCell:
    """One stage on one side: medians per steady step unless named otherwise."""

    us: float
    mean_us: float
    cpu_us: float
    first_us: float | None          # the first step; None when the trace has a single step
    estimated_us: float             # the part of ``us`` that rests on an estimate
    ops: list[str]                  # every op with time in the stage, largest first
    op_us: list[OpTime]             # the largest ones with their median time


@dataclasses.dataclass
class StageRow:
    stage: str
    kind: str                       # "pipeline" or "overhead"
    cells: dict[str, StageCell]     # side -> its cell
    ratio: float | None             # legacy us / modern us; None when modern's is 0


@dataclasses.dataclass
class Representative:
    """The steady step closest to the median (the one the plots show), by stage."""

    step: int
    dur_us: float
    stages_us: dict[str, float]
    groups_us: dict[str, float] = dataclasses.field(default_factory=dict)  # generic view's rows


@dataclasses.dataclass
class StepStats:
    count: int
    steady_count: int
    mean_us: float
    representative: Representative | None
    blocked_us: float
    median_us: float
    first_us: float | None
    min_us: float
    max_us: float
    split_us: dict[str, float]
    first_split_us: dict[str, float] | None
    #: what the trace's first step is: "program" (numbered 0 or 1 by the program: its first
    #: step), "window" (numbered later: the trace is a window of a longer run), "unknown"
    first_kind: str = "unknown"
    first_num: int | None = None
    last_num: int | None = None
    #: Keras train_function calls outside every step the trace marks (at its edges, where the
    #: profiler started or stopped inside a step): left out of the step count
    unmarked_calls: int = 0


@dataclasses.dataclass
class XlaUnitRow:
    kind: str
    ops: list[str]
    stages: dict[str, int]
    compiles: int
    compile_us: float
    runs: int
    run_us: float


@dataclasses.dataclass
class XlaTotals:
    compile_us: float
    run_us: float
    compiles: int
    recompiled: list[str]
    launch_style: str
    units: dict[str, XlaUnitRow] | None = None


@dataclasses.dataclass
class CrossCheck:
    """Another trace of the same run (legacy's timeline.json) beside the side's own numbers."""

    trace: str
    format: str
    steps: int
    against: str                    # "steady" or "first"
    step_us: float
    source_step_us: float
    stages_us: dict[str, float]
    source_stages_us: dict[str, float]
    xla: XlaTotals


@dataclasses.dataclass
class Source:
    path: str
    format: str
    note: str
    warnings: list[str]


@dataclasses.dataclass
class Coverage:
    stages_with_time: list[str]
    unmapped_share: float


@dataclasses.dataclass
class SideResult:
    source: Source
    steps: StepStats
    xla: XlaTotals
    unmapped_us: float
    unmapped_ops: list[OpTime]
    estimates_used: list[str]
    coverage: Coverage
    cross_checks: list[CrossCheck]


@dataclasses.dataclass
class GroupCell:
    us: float
    cpu_us: float
    first_us: float | None
    ops: list[str]


@dataclasses.dataclass
class GroupRow:
    """One row of the generic view: a group (``compute`` rows per top-level scope)."""

    key: str
    group: str
    scope: str
    cells: dict[str, GroupCell]


@dataclasses.dataclass
class Comparison:
    created: str
    stages: list[StageRow]
    sides: dict[str, SideResult]
    verdict: Verdicts | None = None
    attribution_note: str = ATTRIBUTION_NOTE
    estimates: dict[str, str] = dataclasses.field(default_factory=lambda: dict(ESTIMATES))
    labels: dict[str, str] = dataclasses.field(default_factory=lambda: {k: k for k in SIDES})
    groups: list[GroupRow] = dataclasses.field(default_factory=list)
    ops_diff: list[OpDiff] = dataclasses.field(default_factory=list)
    types_diff: list[TypeDiff] = dataclasses.field(default_factory=list)
    parity: Parity | None = None

    def label(self, side: str) -> str:
        return self.labels.get(side, side)

    def group_unmapped_us(self, side: str) -> float:
        """Time per steady step no rule of either view places."""
        return sum(r.cells[side].us for r in self.groups if r.group == "unmapped")

    def has_pipeline(self) -> bool:
        """Either side spends time in the seed pipeline's stages."""
        return any(r.kind == "pipeline" and cell.us > 0 for r in self.stages
                   for cell in r.cells.values())

    @property
    def view(self) -> str:
        """The view the verdict, the plots and the merged trace show: the seed's stages when a
        side shows its image pipeline, else the generic groups (``stages`` rows and the
        stage view's unmapped time stay in report.json all the same)."""
        return "stages" if self.has_pipeline() else "groups"

    def view_reason(self) -> str:
        """Why :attr:`view` is the one shown, in a sentence."""
        if self.view == "stages":
            return ("a trace shows the seed's image pipeline (its stages by our name scopes, "
                    "tf.image API scopes or image op types): the verdict and the plots use "
                    "the stages; the generic groups are beside them")
        return ("neither trace shows the seed's image pipeline (no stage by our name scopes, "
                "tf.image API scopes or image op types): the verdict, the plots and the merged "
                "trace use the generic groups; the seed stages' rows (stages, unmapped_us, "
                "coverage) leave most of such a program unmapped and are kept for reference")

    def row(self, stage: str) -> StageRow:
        return next(r for r in self.stages if r.stage == stage)


# --------------------------------------------------------------------------------------------
# building it

def compare(legacy: Side, modern: Side, labels: dict[str, str] | None = None) -> Comparison:
    """Both sides stage by stage and group by group, op by op, with the parity checks and a
    verdict (see the module docstring). ``labels``: what to call each side in words."""
    sides = {"legacy": legacy, "modern": modern}
    for s in sides.values():
        if s.groups is None:
            s.groups = map_groups(s.trace, s.smap)
            s.ops = opdiff.op_table(s.analysis, s.groups)
    ops = {k: _ops_by_label(s) for k, s in sides.items()}
    stages = [_stage_row(stage, sides, ops) for stage in ALL_STAGES]
    results = {k: _side_result(s, stages, ops[k]) for k, s in sides.items()}
    out = Comparison(time.strftime("%Y-%m-%dT%H:%M:%S%z"), stages, results,
                     labels=dict(labels or {k: k for k in SIDES}))
    times = {k: group_times(s.attribution, s.groups) for k, s in sides.items()}
    alias = scope_aliases({k: set(t.wall) | set(t.cpu) for k, t in times.items()})
    out.groups = group_rows(times, alias)
    for k, s in sides.items():
        rep, st = out.sides[k].steps.representative, s.attribution.representative()
        if rep is not None and st is not None:
            rep.groups_us = {key: round(v, 1) for key, v in _aliased(GroupTimes(
                step_group_times(st, s.groups)[0], {}, None, {}), alias[k]).wall.items() if v > 0}
    out.ops_diff = opdiff.diff(legacy.ops.ops, modern.ops.ops,
                               {k: opdiff.unit_members(s.analysis) for k, s in sides.items()})
    out.types_diff = opdiff.by_type(legacy.ops, modern.ops)
    out.parity = parity.check(sides, out.labels, out.ops_diff)
    out.verdict = verdicts(out)
    return out


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
    base = (lambda sc: SCOPE_SUFFIX.sub("", sc))
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
                      {k: list(v) for k, v in ops.items()})


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
                              t.ops.get(key, [])[:4]) for k, t in times.items()}
        if any(c.us or c.cpu_us or c.first_us for c in cells.values()):
            rows.append(GroupRow(key, group, scope, cells))
    order = {g: i for i, g in enumerate(GROUPS[1:] + ("unmapped",))}
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
                     round(sum(firsts), 1) if firsts else None, [])


def _stage_row(stage: str, sides: dict[str, Side], ops: dict) -> StageRow:
    lab = LABEL[stage]
    cells = {k: _cell(s.attribution, lab, ops[k].get(lab, [])) for k, s in sides.items()}
    m = cells["modern"].us
    return StageRow(stage, "pipeline" if stage in PIPELINE_STAGES else "overhead", cells,
                    round(cells["legacy"].us / m, 3) if m > 0 else None)


def _cell(att: Attribution, lab: int, ops: list[tuple[str, float]]) -> StageCell:
    steady = att.steady
    mean = float(np.mean([st.wall[lab] for st in steady])) if steady else 0.0
    return StageCell(
        us=round(float(att.median("wall")[lab]), 1), mean_us=round(mean, 1),
        cpu_us=round(float(att.median("cpu")[lab]), 1),
        first_us=round(float(att.first.wall[lab]), 1) if att.first else None,
        estimated_us=round(float(att.median("wall_estimated")[lab]), 1),
        ops=[name for name, _ in ops],
        op_us=[OpTime(name, round(v, 1)) for name, v in ops[:OPS_WITH_TIME]])


def _side_result(s: Side, stages: list[StageRow], ops: dict) -> SideResult:
    steps = step_stats(s.attribution)
    unmapped = round(float(s.attribution.median("wall")[0]), 1)
    have = [r.stage for r in stages if r.kind == "pipeline" and r.cells[s.name].us > 0
            and r.cells[s.name].ops]
    return SideResult(
        source=Source(s.trace.source, s.trace.format, s.source_note, list(s.trace.warnings)),
        steps=steps, xla=xla_totals(s.xla, _units(s)), unmapped_us=unmapped,
        unmapped_ops=[OpTime(n, round(v, 1)) for n, v in ops.get(0, [])[:OPS_WITH_TIME]],
        estimates_used=_estimates_used(s),
        coverage=Coverage(have, round(unmapped / steps.median_us, 4) if steps.median_us else 0.0),
        cross_checks=list(s.cross_checks))


def step_stats(att: Attribution) -> StepStats:
    first = att.first
    durs = [s.dur for s in att.steady]
    rep = att.representative()
    by_stage = (lambda arr: {LABELS[i]: round(float(arr[i]), 1) for i in range(len(LABELS))
                             if arr[i] > 0})
    return StepStats(
        count=len(att.steps), steady_count=len(att.steady),
        mean_us=round(float(np.mean(durs)), 1) if durs else 0.0,
        representative=(Representative(rep.num, round(rep.dur, 1), by_stage(rep.wall))
                        if rep else None),
        blocked_us=round(att.median_blocked_us(), 1), median_us=round(att.median_step_us(), 1),
        first_us=round(first.dur, 1) if first else None,
        min_us=round(float(min(durs)), 1) if durs else 0.0,
        max_us=round(float(max(durs)), 1) if durs else 0.0,
        split_us={k: round(v, 1) for k, v in att.median_split().items()},
        first_split_us={k: round(v, 1) for k, v in first.split.items()} if first else None,
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


def _unit_key(name: str):
    parts = name.split("_")
    return (0, int(parts[1])) if name.startswith("cluster_") and parts[1].isdigit() else (1, name)


def _ops_by_label(side: Side) -> dict[int, list[tuple[str, float]]]:
    """Per label: (op display name, median wall µs per steady step), largest first."""
    per_step: list[dict[tuple[int, str], float]] = []
    names: dict[int, str] = {}
    for st in side.attribution.steady:
        acc: dict[tuple[int, str], float] = defaultdict(float)
        for i, w in st.by_event_wall.items():
            if i not in names:
                names[i] = side.smap.display_name(i)
            for lab, frac in side.smap.fractions(i):
                acc[(lab, names[i])] += w * frac
        per_step.append(acc)
    out: dict[int, list[tuple[str, float, float]]] = defaultdict(list)
    keys, med, mean, top = per_step_stats(per_step) if per_step else ([], None, None, None)
    if keys:
        ran = top > 0  # listed if it ran in any steady step; valued by its median
        for r in np.flatnonzero(ran).tolist():
            lab, name = keys[r]
            out[lab].append((name, float(med[r]), float(mean[r])))
    return {lab: [(n, v) for n, v, _ in sorted(rows, key=lambda r: (-r[1], -r[2], r[0]))]
            for lab, rows in out.items()}


def _estimates_used(side: Side) -> list[str]:
    """Which kinds of estimate carry time in this side's steady steps."""
    est = {BASIS[b] for b in ESTIMATES}
    used = {BASES[side.smap.basis[i]] for st in side.attribution.steady
            for i, w in st.by_event_wall.items() if w > 0 and side.smap.basis[i] in est}
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
    wall = np.median(np.stack([s.wall for s in rows]), axis=0) if rows else np.zeros(len(LABELS))
    own = side.attribution
    if against == "first" and own.first is not None:
        mine, mine_step = own.first.wall, own.first.dur
    else:
        mine, mine_step = own.median("wall"), own.median_step_us()
    by_stage = (lambda arr: {LABELS[i]: round(float(arr[i]), 1) for i in range(len(LABELS))
                             if arr[i] > 0})
    return CrossCheck(label, other.format, len(att.steps), against,
                      float(np.median([s.dur for s in rows])) if rows else 0.0,
                      round(float(mine_step), 1), by_stage(wall), by_stage(mine),
                      xla_totals(other_xla))
