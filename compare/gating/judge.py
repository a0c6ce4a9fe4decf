"""The gate's judgement of one pair of sides: every item tested at once, then each item's
verdict.

An item regressed when all three hold: its median per step rose by more than
``max_slowdown`` of the baseline's median; the rise is at least the minimum effect (µs); and
the one-sided rank test, Holm-adjusted over every item tested, puts it beyond the spread at
``alpha``. Improvements are judged the same way in the other direction (their own Holm
family) and never fail the gate. Only items that could show the minimum effect are tested
(:func:`compare.gating.stats.can_show`). With too few steps to tell anything apart (fewer
than MIN_STEPS_TESTED a side, or not even a complete separation of the two sides reaching
alpha) nothing is tested and the outcome says so.
"""
from __future__ import annotations

import math

import numpy as np

from compare.gating import stats
from compare.gating.items import Item, items
from compare.gating.model import (
    IMPROVEMENT,
    PASSED,
    REGRESSED,
    REGRESSION,
    SAME,
    TOO_FEW,
    Checked,
    GateResult,
    Settings,
    SideInfo,
)
from compare.gating.samples import SideSamples
from compare.vocabulary.thresholds import GATE_MIN_EFFECT_SHARE, MIN_STEPS_TESTED


def judge(a: SideSamples, b: SideSamples, settings: Settings = Settings(),
          sides: dict[str, SideInfo] | None = None) -> GateResult:
    """The gate's answer for baseline ``a`` against new ``b``."""
    its = items(a, b, settings.levels)
    effect = min_effect(a, b, settings)
    n_a, n_b = a.steps, b.steps
    few = too_few(n_a, n_b, settings.alpha)
    xa = np.stack([it.a for it in its]) if its else np.zeros((0, n_a))
    xb = np.stack([it.b for it in its]) if its else np.zeros((0, n_b))
    checked = _numbers(its, xa, xb)
    if its and not few:
        _test(xa, xb, checked, effect, settings)
    limit = math.floor(settings.alpha / stats.smallest_p(n_a, n_b)) if n_a and n_b else 0
    outcome = TOO_FEW if few else (
        REGRESSED if any(c.verdict == REGRESSION for c in checked) else PASSED)
    tested = sum(c.tested for c in checked)
    return GateResult(outcome, settings, effect, sides or {}, checked,
                      limit if tested > limit else None)


def min_effect(a: SideSamples, b: SideSamples, settings: Settings) -> float:
    """The minimum effect: as given, else a share of the median step of both sides pooled
    (pooled, so that it tells nothing of which side is slower)."""
    if settings.min_effect_us is not None:
        return float(settings.min_effect_us)
    traced = a.traced or b.traced
    steps = np.concatenate([a.step_us(traced), b.step_us(traced)])
    return GATE_MIN_EFFECT_SHARE * float(np.median(steps)) if len(steps) else 0.0


def too_few(n_a: int, n_b: int, alpha: float) -> bool:
    """Too few steps on a side to tell any change from noise."""
    return min(n_a, n_b) < MIN_STEPS_TESTED or stats.smallest_p(n_a, n_b) >= alpha


def _numbers(its: list[Item], a: np.ndarray, b: np.ndarray) -> list[Checked]:
    """Each item's medians and means per step (``a``, ``b``: items x steps)."""
    def per_item(v: np.ndarray, f) -> list[float]:
        return f(v, axis=1).tolist() if v.shape[1] else [0.0] * len(v)

    med = [per_item(v, np.median) for v in (a, b)]
    mean = [per_item(v, np.mean) for v in (a, b)]
    return [Checked(it.level, it.name, it.group, a.shape[1], b.shape[1], med[0][i],
                    med[1][i], mean[0][i], mean[1][i], False, behind=it.behind,
                    op=it.op.op if it.op else "", op_type=it.op.type if it.op else "",
                    status=it.op.status if it.op else "")
            for i, it in enumerate(its)]


def _test(a: np.ndarray, b: np.ndarray, checked: list[Checked], effect: float,
          settings: Settings) -> None:
    tested = np.flatnonzero(stats.can_show(a, b, effect))
    slower, faster = stats.one_sided(a[tested], b[tested])
    adj_s, adj_f = stats.holm(slower), stats.holm(faster)
    for j, i in enumerate(tested.tolist()):
        c = checked[i]
        c.tested = True
        c.p_slower, c.p_faster = float(slower[j]), float(faster[j])
        c.p_slower_adjusted, c.p_faster_adjusted = float(adj_s[j]), float(adj_f[j])
        c.verdict = _verdict(c, float(adj_s[j]), float(adj_f[j]), effect, settings)


def _verdict(c: Checked, p_slower: float, p_faster: float, effect: float, s: Settings) -> str:
    """With the Holm-adjusted p of each direction."""
    d = c.delta_us
    big = abs(d) > 0 and abs(d) >= effect
    if d > 0 and big and p_slower < s.alpha and \
            (c.a_median_us == 0 or d / c.a_median_us > s.max_slowdown):
        return REGRESSION
    if d < 0 and big and p_faster < s.alpha and -d / c.a_median_us > s.max_slowdown:
        return IMPROVEMENT
    return SAME
