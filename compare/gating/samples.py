"""One side of the gate as per-step samples, read from the account compare.run reads.

Each run of a side (a trace, a profile session) is analysed as compare.run analyses a side
(:func:`compare.analysis.comparison.side`) and its steady steps (every step but the first; a
single step's own) are read from its account (:mod:`compare.analysis.account`), per step:

- the step: each window's duration and its untraced edges, so the step time can be taken on
  the basis of compare.run's step difference (:func:`compare.analysis.step_delta.basis`: the
  window, or the traced span where a timeline leaves notable untraced time);
- the wall time of each term of that step difference before XLA fusion is accounted for: the
  generic view's groups (``input``, ``compute``...), ``unmapped``, ``idle``, ``untraced``;
- per op (the op table's key, :func:`compare.analysis.opdiff.op_table`): its op time (busy,
  host + device) and its wall time in each of those terms; the op table itself, so ops are
  matched across sides by :func:`compare.analysis.opdiff.diff` as ``ops_diff`` matches them,
  and which ops XLA fused on one side only is known only then (their wall time makes the
  step difference's ``xla_fusion`` term: :mod:`compare.gating.items`);
- the mean wall time of each kind of time no op owns (by its events' name) in each term, and
  the XLA units' members (the op diff's fused rows need them).

Several runs of one side are pooled: their steady steps one after another; an op or term a
run lacks counts 0 in that run's steps, and the op table's means are over all pooled steps.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np

from compare.analysis.account import IDLE, UNTRACED, Account, Cell
from compare.analysis.opdiff import OpStat, op_samples, op_table, unit_members
from compare.analysis.opkeys import Key
from compare.analysis.side import Side
from compare.analysis.step_delta import TERM_ORDER, basis


@dataclasses.dataclass
class Run:
    """One run pooled into a side: where it came from and how many steps it gave."""

    source: str
    format: str
    steps: int                 # steps the trace marks
    steady: int                # steps pooled (all but the first; a single step's own)
    traced: bool               # its step basis is the traced span (see step_delta.basis)
    warnings: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SideSamples:
    """A side's per-step samples (one column per pooled steady step) and op table."""

    runs: list[Run]
    dur_us: np.ndarray                            # each step window's duration
    untraced_us: np.ndarray                       # its untraced edges
    terms: dict[str, np.ndarray]                  # term -> wall time per step
    ops: dict[Key, OpStat]                        # the op table: means per pooled step
    op_us: dict[Key, np.ndarray]                  # op -> op time per step
    op_wall: dict[Key, dict[str, np.ndarray]]     # op -> term -> its wall time per step
    events: dict[str, dict[str, float]]           # term -> event name -> mean wall per step
    units: dict[str, set[str]]                    # XLA unit -> the ops it holds

    @property
    def steps(self) -> int:
        return len(self.dur_us)

    @property
    def traced(self) -> bool:
        return any(r.traced for r in self.runs)

    def step_us(self, traced: bool) -> np.ndarray:
        """The step time per step: the window, or its traced span."""
        return self.dur_us - self.untraced_us if traced else self.dur_us


def term_of(c: Cell) -> str:
    """The step difference's term a cell's time is in, XLA fusion aside (as
    :mod:`compare.analysis.step_delta` books it)."""
    if c.row in (IDLE, UNTRACED):
        return c.row
    return c.group if c.group in TERM_ORDER else "unmapped"


def of_side(s: Side, source: str) -> SideSamples:
    """One run's samples, from the side's account (booked by ``comparison.side``)."""
    acc = s.account
    assert acc is not None, "comparison.side books every side's account"
    table = s.ops.ops if s.ops is not None else op_table(acc).ops
    run = Run(source, s.trace.format, len(acc.steps), len(acc.steady),
              basis(acc, s.trace.format == "timeline").kind == "traced",
              list(s.trace.warnings))
    return SideSamples([run], acc.durations(), acc.untraced(), _terms(acc), table,
                       op_samples(acc, list(table), "busy"), _op_wall(acc, table),
                       _events(acc), unit_members(s.analysis))


def _terms(acc: Account) -> dict[str, np.ndarray]:
    ids, names = acc.ids(term_of)
    m = acc.per_step("wall", ids, len(names))
    return {t: m[j] for j, t in enumerate(names) if m[j].any()}


def _op_wall(acc: Account, table: dict[Key, OpStat]) -> dict[Key, dict[str, np.ndarray]]:
    ids, keys = acc.ids(lambda c: (acc.ops[c.op].key, term_of(c)) if c.op >= 0 else None)
    m = acc.per_step("wall", ids, len(keys))
    out: dict[Key, dict[str, np.ndarray]] = defaultdict(dict)
    for j, k in enumerate(keys):
        if k is not None and k[0] in table and m[j].any():
            out[k[0]][k[1]] = m[j]
    return dict(out)


def _events(acc: Account) -> dict[str, dict[str, float]]:
    ids, keys = acc.ids(lambda c: (term_of(c), c.event) if c.op < 0 and c.event else None)
    means = acc.mean("wall", ids, len(keys))
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for k, v in zip(keys, means.tolist()):
        if k is not None and v:
            out[k[0]][k[1]] = v
    return dict(out)


def pooled(runs: list[SideSamples]) -> SideSamples:
    """Several runs of one side as one: their steps one after another."""
    if len(runs) == 1:
        return runs[0]
    n = [r.steps for r in runs]

    def series(per_run: list[dict]) -> dict:
        keys = dict.fromkeys(k for d in per_run for k in d)
        return {k: np.concatenate([d.get(k, np.zeros(r.steps)) for d, r in zip(per_run, runs)])
                for k in keys}

    op_keys = dict.fromkeys(k for r in runs for k in r.op_wall)
    return SideSamples(
        [x for r in runs for x in r.runs],
        np.concatenate([r.dur_us for r in runs]), np.concatenate([r.untraced_us for r in runs]),
        series([r.terms for r in runs]), _pooled_ops(runs, n), series([r.op_us for r in runs]),
        {k: series([r.op_wall.get(k, {}) for r in runs]) for k in op_keys},
        _pooled_events(runs, n), _pooled_units(runs))


def _pooled_ops(runs: list[SideSamples], n: list[int]) -> dict[Key, OpStat]:
    """The op table over all pooled steps: each run's means weighted by its steps; what an op
    is (type, unit, group) as the first run holding it says."""
    out: dict[Key, OpStat] = {}
    total = sum(n)
    for r, k in zip(runs, n):
        w = k / total
        for key, st in r.ops.items():
            o = out.setdefault(key, OpStat(st.type, unit=st.unit, group=st.group, key=key))
            o.host_us += st.host_us * w
            o.device_us += st.device_us * w
            o.count += st.count * w
            o.wall_us += st.wall_us * w
    return out


def _pooled_events(runs: list[SideSamples], n: list[int]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = defaultdict(dict)
    total = sum(n)
    for r, k in zip(runs, n):
        for term, names in r.events.items():
            for name, v in names.items():
                out[term][name] = out[term].get(name, 0.0) + v * k / total
    return dict(out)


def _pooled_units(runs: list[SideSamples]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for r in runs:
        for u, members in r.units.items():
            out[u] |= members
    return dict(out)
