"""What the gate checks for one pair of sides — the step, each group, each op — named, matched
and counted as compare.run's comparison does it.

- ``step``: the step time on the basis of compare.run's step difference (the window, or the
  traced span on both sides when either is a timeline whose runs leave notable untraced time;
  :func:`compare.analysis.step_delta.basis`);
- ``group``: each term of that step difference (:mod:`compare.analysis.step_delta`): the
  generic view's groups (``input``, ``preprocessing``, ``compute``, ``optimizer``...), with
  ``unmapped``, ``idle``, ``untraced``, and ``xla_fusion``: the ops XLA fused on one side only
  with the compiled code that replaced them, so that a change of what runs inside XLA does not
  read as one group growing from nothing and another vanishing. Their wall time per step adds
  up to the step;
- ``op``: each row of compare.run's ``ops_diff`` (:func:`compare.analysis.opdiff.diff`: by
  node name, then scope, then type; fused into XLA units); its op time per step, the ops of
  each side that the row holds summed.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from compare.analysis.account import UNTRACED
from compare.analysis.opdiff import OpDiff, diff
from compare.analysis.opkeys import Key
from compare.analysis.step_delta import FUSION, TERM_ORDER, fused_keys
from compare.gating.samples import SideSamples
from compare.output.tables import describe

LEVELS = ("step", "group", "op")
#: The group whose time, in a side that runs every compiled unit as fused ops elsewhere, is
#: the compiled code's own (XLA's runtime, waits for it): part of the fusion then.
XLA_RUN = "xla_run"
#: A part's change below this (µs per step) is not named (the tables' precision).
PART_MIN_US = 0.5


@dataclasses.dataclass
class Change:
    """What a part of an item changed by (mean per step, B - A): ``kind`` "group" (a group
    behind the step), "op" or "event" (time no op owns, by its events' name) behind a group."""

    kind: str
    name: str
    delta_us: float


@dataclasses.dataclass
class Item:
    """One thing checked: its per-step samples on each side and what lies behind it."""

    level: str                 # "step", "group" or "op"
    name: str                  # "step", a group, an op row's description
    group: str                 # the item's group; "" for the step
    a: np.ndarray
    b: np.ndarray
    behind: list[Change] = dataclasses.field(default_factory=list)
    op: OpDiff | None = None   # an op item's ops_diff row


def items(a: SideSamples, b: SideSamples, levels: tuple[str, ...] = LEVELS) -> list[Item]:
    """The items of ``levels`` for the pair, A the baseline."""
    traced = a.traced or b.traced
    rows = opdiff_rows(a, b)
    groups = group_items({"a": a, "b": b}, traced, rows)
    out = []
    if "step" in levels:
        out.append(Item("step", "step", "", a.step_us(traced), b.step_us(traced),
                        [Change("group", g.name, _mean_delta(g)) for g in groups]))
    if "group" in levels:
        out += groups
    if "op" in levels:
        out += [_op_item(r, a, b) for r in rows]
    return out


def opdiff_rows(a: SideSamples, b: SideSamples) -> list[OpDiff]:
    """compare.run's op diff of the two sides' op tables."""
    return diff(a.ops, b.ops, {"a": a.units, "b": b.units})


def _op_item(r: OpDiff, a: SideSamples, b: SideSamples) -> Item:
    def summed(s: SideSamples, keys) -> np.ndarray:
        held = [s.op_us[k] for k in keys if k in s.op_us]
        return held[0] if len(held) == 1 else sum(held, np.zeros(s.steps))

    return Item("op", describe(r), r.group, summed(a, r.keys.get("a", [])),
                summed(b, r.keys.get("b", [])), op=r)


# --------------------------------------------------------------------------------------------
# groups: the step difference's terms

def group_items(sides: dict[str, SideSamples], traced: bool, rows: list[OpDiff]) -> list[Item]:
    """One item per term of the step difference either side has, in its order."""
    fused = fused_keys(rows)
    booked = {k: _booked(s, fused[k], traced) for k, s in sides.items()}
    terms = {k: b[0] for k, b in booked.items()}
    out = []
    for key in TERM_ORDER:
        if not any(key in t for t in terms.values()):
            continue
        va, vb = (terms[k].get(key, np.zeros(sides[k].steps)) for k in ("a", "b"))
        behind = _ops_behind(key, rows, {k: b[1] for k, b in booked.items()}) + \
            _events_behind(key, {k: b[2] for k, b in booked.items()})
        out.append(Item("group", key, key, va, vb, behind))
    return out


def _all_units_fused(s: SideSamples, fused: set[Key]) -> bool:
    """Every compiled unit the side runs is in a fused row."""
    units = {st.unit for st in s.ops.values() if st.unit}
    held = {st.unit for k, st in s.ops.items() if st.unit and k in fused}
    return bool(units) and units == held


def _booked(s: SideSamples, fused: set[Key], traced: bool
            ) -> tuple[dict[str, np.ndarray], dict[tuple[str, Key], float],
                       dict[tuple[str, str], float]]:
    """The side's terms per step with the fused ops' time (and, when every unit is fused,
    the compiled code's own time) moved into ``xla_fusion``; the mean wall time of each
    (term, op) and (term, event name)."""
    terms = {t: v.copy() for t, v in s.terms.items()}
    op_means: dict[tuple[str, Key], float] = {}
    zero = np.zeros(s.steps)
    for key, per in s.op_wall.items():
        for t, v in per.items():
            into = FUSION if key in fused else t
            if into != t:
                terms[t] = terms[t] - v
                terms[FUSION] = terms.get(FUSION, zero) + v
            op_means[(into, key)] = op_means.get((into, key), 0.0) + float(v.mean())
    events = {(t, n): us for t, names in s.events.items() for n, us in names.items()}
    if _all_units_fused(s, fused) and XLA_RUN in terms:
        own = s.terms[XLA_RUN] - sum((per[XLA_RUN] for per in s.op_wall.values()
                                      if XLA_RUN in per), zero)
        terms[XLA_RUN] = terms[XLA_RUN] - own
        terms[FUSION] = terms.get(FUSION, zero) + own
        events = {((FUSION if t == XLA_RUN else t), n): us for (t, n), us in events.items()}
    if traced:
        terms.pop(UNTRACED, None)
    return {t: _clean(v) for t, v in terms.items() if _clean(v).any()}, op_means, events


def _clean(v: np.ndarray) -> np.ndarray:
    """What a subtraction leaves of a term that is all fused: rounding error, as 0."""
    return np.where(np.abs(v) < 1e-6, 0.0, v)


def _ops_behind(term: str, rows: list[OpDiff], means: dict[str, dict[tuple[str, Key], float]]
                ) -> list[Change]:
    """The op diff's rows whose wall time in the term changed (B - A), by their names."""
    out = []
    for r in rows:
        side = {k: sum(means[k].get((term, key), 0.0) for key in r.keys.get(k, []))
                for k in ("a", "b")}
        d = side["b"] - side["a"]
        if abs(d) >= PART_MIN_US:
            out.append(Change("op", describe(r), d))
    return out


def _events_behind(term: str, events: dict[str, dict[tuple[str, str], float]]
                   ) -> list[Change]:
    names = {n for per in events.values() for (t, n) in per if t == term}
    out = [Change("event", n, events["b"].get((term, n), 0.0) - events["a"].get((term, n), 0.0))
           for n in sorted(names)]
    return [c for c in out if c.delta_us]


def _mean_delta(item: Item) -> float:
    return float(item.b.mean() - item.a.mean())

