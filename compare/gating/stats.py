"""The gate's statistics: many items tested at once, the false-alarm rate held across them.

- The test is the project's rank test (:func:`compare.analysis.noise.rank_test`: Mann–Whitney
  U, scipy, exact where a side has at most 8 steps and no ties, else normal with tie
  correction), one-sided in each direction and run over all items in one call. (compare.run's
  tables test means, with :func:`compare.analysis.noise.mean_test`; the gate tests medians,
  which one odd step cannot move.)
  :func:`one_sided` gives, per item, the p of "B slower" and of "B faster".
- Items too small to show the minimum effect are not tested (:func:`can_show`). Whether an
  item can show it is read from both sides' steps pooled, which a rank test never sees (it
  ranks them): under no change, leaving such items out does not bias the tests of the others
  (independent filtering).
- Holm's step-down method over the items tested (:func:`holm`) keeps the chance of any false
  alarm at most alpha, however many items there are and however they depend on each other.
"""
from __future__ import annotations

import math

import numpy as np

from compare.vocabulary.thresholds import MIN_STEPS_TESTED

#: scipy's exact distribution is used up to this many steps on the smaller side (its 'auto').
EXACT_MAX_STEPS = 8


def one_sided(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``a`` (items x steps of A) and ``b`` (items x steps of B): the one-sided
    p of B slower than A, and of B faster. NaN where a side has too few steps."""
    m = a.shape[0]
    slower, faster = np.full(m, np.nan), np.full(m, np.nan)
    if m == 0 or min(a.shape[1], b.shape[1]) < MIN_STEPS_TESTED:
        return slower, faster
    both = np.concatenate([a, b], axis=1)
    const = (both == both[:, :1]).all(axis=1)
    slower[const] = faster[const] = 1.0        # no difference (rank_test's answer)
    exact = ~const & ~_has_ties(both) & (min(a.shape[1], b.shape[1]) <= EXACT_MAX_STEPS)
    for rows, method in ((exact, "exact"), (~const & ~exact, "asymptotic")):
        if rows.any():
            slower[rows] = _p(b[rows], a[rows], method)
            faster[rows] = _p(a[rows], b[rows], method)
    return slower, faster


def _p(x: np.ndarray, y: np.ndarray, method: str) -> np.ndarray:
    """p of x stochastically greater than y, per row."""
    # lazy: scipy.stats takes 1-2 s to import; --help, bad input and too few steps need none
    from scipy.stats import mannwhitneyu
    p = mannwhitneyu(x, y, alternative="greater", axis=1, method=method).pvalue
    return np.where(np.isfinite(p), p, 1.0)


def _has_ties(v: np.ndarray) -> np.ndarray:
    s = np.sort(v, axis=1)
    return (np.diff(s, axis=1) == 0).any(axis=1)


def can_show(a: np.ndarray, b: np.ndarray, effect_us: float) -> np.ndarray:
    """Per item: could its medians differ by ``effect_us`` or more, judged from both sides'
    steps pooled? A median of at least ``effect_us`` on one side needs half that side's
    steps at or above it, so at least that many of the pooled steps."""
    need = min(math.ceil(a.shape[1] / 2), math.ceil(b.shape[1] / 2))
    both = np.concatenate([a, b], axis=1)
    big = (both >= effect_us).sum(axis=1) >= need
    return big & (both != 0).any(axis=1)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values: an item is beyond the spread at family-wise level alpha
    when its adjusted p is below alpha."""
    m = len(p)
    if not m:
        return p.copy()
    order = np.argsort(p, kind="stable")
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest one-sided p the rank test can give with these many steps (every step of
    one side above every step of the other, no ties)."""
    return 1.0 / math.comb(n_a + n_b, n_a)
