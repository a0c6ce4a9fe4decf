"""The step difference, split into terms that add up to it.

Per side, the mean steady step (or, where a timeline's session runs leave untraced time
between them, the mean traced span: :func:`basis`) is the sum of its account's wall time
(:mod:`compare.analysis.account`) over the generic view's groups, plus ``idle`` (nothing traced
between the ops) and ``untraced`` (nothing traced at the window's edges). So is the difference:
one term per group, each the difference of the two sides' mean wall time in it, and they sum to
the step difference exactly (up to rounding). Ops that XLA fused into clusters on one side
only (``ops_diff`` rows of status *fused*, matched by XLA) are one term of their own,
``xla_fusion``: their wall time on the side that runs them as ops against the clusters' on the
other.

Each term names the ops behind it (``ops_diff`` rows of its group, by their op-time change)
and says whether it is beyond the step-to-step spread (a bootstrap of the difference of the
means, :func:`compare.analysis.noise.mean_test`)."""
from __future__ import annotations

import dataclasses

import numpy as np

from compare.analysis.account import IDLE, UNTRACED, Account, Cell
from compare.analysis.noise import Test, mean_test
from compare.analysis.opdiff import OpDiff
from compare.analysis.opkeys import Key
from compare.vocabulary.groups import GROUPS
from compare.vocabulary.thresholds import TERM_OPS, UNTRACED_NOTABLE

#: The term of ops fused into XLA clusters on one side only.
FUSION = "xla_fusion"
#: Terms in display order: groups, the fusion term, then time nothing traced runs.
TERM_ORDER = tuple(g for g in GROUPS[1:] if g != IDLE) + ("unmapped", FUSION, IDLE, UNTRACED)


@dataclasses.dataclass
class Basis:
    """What a side's step time is: ``window`` (the mean step window) or ``traced`` (the mean
    traced span: the window without its untraced edges), with the per-step values."""

    kind: str
    us: float
    samples: np.ndarray
    untraced_us: float        # mean untraced time at the windows' edges


@dataclasses.dataclass
class TermOp:
    """An op behind a term: its ``ops_diff`` row (by position) and the change of its wall time
    in the term (its part of the term's change: the ops' and events' parts add up to it)."""

    row: int
    delta_us: float


@dataclasses.dataclass
class TermEvent:
    """Time no op owns behind a term (TF's executor, a thread pool's region, a wait), by the
    name of its events: its change of wall time per step."""

    name: str
    delta_us: float


@dataclasses.dataclass
class Term:
    key: str                  # a group, ``xla_fusion``, ``idle`` or ``untraced``
    a_us: float
    b_us: float
    test: Test
    ops: list[TermOp] = dataclasses.field(default_factory=list)
    events: list[TermEvent] = dataclasses.field(default_factory=list)
    #: xla_fusion: the ops fused, the clusters they run in (their rows' names, and how many
    #: clusters those hold), the side running the clusters, and the rows' op time
    members: int = 0
    clusters: list[str] = dataclasses.field(default_factory=list)
    cluster_count: int = 0
    into: str = ""
    ops_a_us: float = 0.0
    ops_b_us: float = 0.0

    @property
    def delta_us(self) -> float:
        return self.b_us - self.a_us

    def behind(self, n: int = TERM_OPS) -> list["TermOp | TermEvent"]:
        """The ``n`` largest parts of the change, ops and events together, in the term's
        direction first."""
        parts: list[TermOp | TermEvent] = [*self.ops, *self.events]
        parts.sort(key=lambda o: (-(o.delta_us * self.delta_us > 0), -abs(o.delta_us)))
        return parts[:n]


@dataclasses.dataclass
class StepDelta:
    basis: str               # "window" or "traced" (both sides the same)
    a_us: float
    b_us: float
    test: Test
    terms: list[Term]        # their deltas sum to delta_us

    @property
    def delta_us(self) -> float:
        return self.b_us - self.a_us

    def largest(self, n: int) -> list[Term]:
        """The ``n`` terms of largest change, largest first."""
        return sorted(self.terms, key=lambda t: -abs(t.delta_us))[:n]


def basis(acc: Account, timeline: bool) -> Basis:
    """A side's step time: the mean steady window, or its mean traced span where a timeline's
    session runs leave notable untraced time (Python between ``session.run`` calls) inside
    their windows."""
    durs, untraced = acc.durations(), acc.untraced()
    if not len(durs):
        return Basis("window", 0.0, durs, 0.0)
    mean_u = float(untraced.mean())
    if timeline and mean_u >= UNTRACED_NOTABLE * float(durs.mean()):
        spans = durs - untraced
        return Basis("traced", float(spans.mean()), spans, mean_u)
    return Basis("window", float(durs.mean()), durs, mean_u)


def step_delta(accs: dict[str, Account], bases: dict[str, Basis], rows: list[OpDiff]
               ) -> StepDelta:
    """The terms of ``b - a`` (``accs``/``bases`` keyed ``a`` and ``b``; ``rows``: the op
    diff, largest change first)."""
    kind = "traced" if any(b.kind == "traced" for b in bases.values()) else "window"
    fused = fused_keys(rows)
    whole = {k: _all_units_fused(acc, fused.get(k, set())) for k, acc in accs.items()}
    booked = {k: _term_samples(acc, fused.get(k, set()), whole[k], kind)
              for k, acc in accs.items()}
    per = {k: b[0] for k, b in booked.items()}
    keys = [t for t in TERM_ORDER if any(t in p for p in per.values())]
    terms = []
    for key in keys:
        a, b = (per[s].get(key, np.zeros(max(1, len(accs[s].steady)))) for s in ("a", "b"))
        terms.append(Term(key, float(a.mean()), float(b.mean()), mean_test(a, b)))
    _ops_behind(terms, rows, {k: b[2] for k, b in booked.items()}, accs)
    _events_behind(terms, {k: b[1] for k, b in booked.items()})
    _fusion_facts(terms, rows)
    totals = {k: float(sum(per[k][t].mean() for t in per[k])) for k in accs}
    return StepDelta(kind, totals["a"], totals["b"],
                     mean_test(_basis_samples(accs["a"], kind), _basis_samples(accs["b"], kind)),
                     terms)


def _basis_samples(acc: Account, kind: str) -> np.ndarray:
    durs = acc.durations()
    return durs - acc.untraced() if kind == "traced" else durs


def fused_keys(rows: list[OpDiff]) -> dict[str, set[Key]]:
    """Per side, the op keys of XLA-fused rows (the ops on one side, the clusters on the
    other)."""
    out: dict[str, set[Key]] = {"a": set(), "b": set()}
    for r in rows:
        if r.status == "fused" and r.match == "xla":
            for side, keys in r.keys.items():
                out[side].update(keys)
    return out


def _all_units_fused(acc: Account, fused: set[Key]) -> bool:
    """Every compiled unit the side runs is in a fused row: then its compiled code's own
    time (XLA's runtime, waits for it) belongs to the fusion too."""
    units = {info.unit for info in acc.ops if info.unit}
    held = {info.unit for info in acc.ops if info.unit and info.key in fused}
    return bool(units) and units == held


def _term_samples(acc: Account, fused: set[Key], whole: bool, kind: str
                  ) -> tuple[dict[str, np.ndarray], dict[tuple[str, str], float],
                             dict[tuple[str, int], float]]:
    """Per term, the side's wall time in each steady step; per (term, event name), the mean
    wall time of the time no op owns; per (term, op index), the op's mean wall time."""
    def term(c: Cell) -> str:
        if c.op >= 0 and acc.ops[c.op].key in fused:
            return FUSION
        if whole and c.op < 0 and c.group == "xla_run":
            return FUSION
        if c.row in (IDLE, UNTRACED):
            return str(c.row)
        g = c.group
        return g if g in TERM_ORDER else "unmapped"

    ids, names = acc.ids(term)
    m = acc.per_step("wall", ids, len(names))
    out = {name: m[j] for j, name in enumerate(names)}
    if kind == "traced":
        out.pop(UNTRACED, None)
    ev_ids, ev_keys = acc.ids(lambda c: (term(c), c.event) if c.op < 0 and c.event else None)
    means = acc.mean("wall", ev_ids, len(ev_keys))
    events = {k: float(v) for k, v in zip(ev_keys, means) if k is not None and v}
    op_ids, op_keys = acc.ids(lambda c: (term(c), c.op) if c.op >= 0 else None)
    means = acc.mean("wall", op_ids, len(op_keys))
    ops = {k: float(v) for k, v in zip(op_keys, means) if k is not None and v}
    return {k: v for k, v in out.items() if v.any()}, events, ops


def _events_behind(terms: list[Term], events: dict[str, dict[tuple[str, str], float]]) -> None:
    """Each term's largest changes of time no op owns, by event name (in the term's direction
    first)."""
    for t in terms:
        names = {n for side in events.values() for (k, n) in side if k == t.key}
        deltas = [TermEvent(n, events["b"].get((t.key, n), 0.0) -
                            events["a"].get((t.key, n), 0.0)) for n in names]
        deltas = [d for d in deltas if d.delta_us]
        deltas.sort(key=lambda d: (-(d.delta_us * t.delta_us > 0), -abs(d.delta_us), d.name))
        t.events = deltas[:TERM_OPS]


def _ops_behind(terms: list[Term], rows: list[OpDiff],
                ops: dict[str, dict[tuple[str, int], float]], accs: dict[str, Account]) -> None:
    """Each term's ops: the op diff's rows whose wall time in the term changed most, in the
    term's direction first (a row's wall time in a term: that of its ops on each side)."""
    index = {k: {info.key: j for j, info in enumerate(acc.ops)} for k, acc in accs.items()}
    for t in terms:
        found = []
        for i, r in enumerate(rows):
            side = {k: sum(ops[k].get((t.key, index[k].get(key, -1)), 0.0)
                           for key in r.keys.get(k, [])) for k in ("a", "b")}
            d = side["b"] - side["a"]
            if abs(d) >= 0.5:    # a change at the table's precision
                found.append(TermOp(i, d))
        found.sort(key=lambda o: (-(o.delta_us * t.delta_us > 0), -abs(o.delta_us)))
        t.ops = found[:TERM_OPS]


def _fusion_facts(terms: list[Term], rows: list[OpDiff]) -> None:
    t = next((t for t in terms if t.key == FUSION), None)
    if t is None:
        return
    fused = [r for r in rows if r.status == "fused" and r.match == "xla"]
    t.members = sum(len(r.members) for r in fused)
    t.clusters = [r.op for r in fused]
    t.cluster_count = sum(r.units for r in fused)
    t.into = fused[0].into if fused else ""
    t.ops_a_us = sum(r.a_us for r in fused)
    t.ops_b_us = sum(r.b_us for r in fused)
