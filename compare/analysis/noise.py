"""Is a difference between two sides beyond the step-to-step spread? Two tests over the
per-step values of each side, both without assumptions about how step times are distributed:

- :func:`mean_test`, what the comparison's tables use (they are means per step): a bootstrap
  of the difference of the two means (resampling each side's steps, a fixed seed so a report
  is reproducible); beyond the spread when the interval at ``1 - alpha`` leaves out zero;
- :func:`rank_test`, a two-sided Mann–Whitney U test (as Google Benchmark's ``compare.py`` does
  for repetitions): one odd step cannot make a difference out of nothing.

Below :data:`MIN_STEPS_TESTED` steps on either side there is no spread to test against, and
the answer is None (not tested)."""
from __future__ import annotations

import dataclasses

import numpy as np

from compare.vocabulary.thresholds import MIN_STEPS_TESTED, NOISE_ALPHA


@dataclasses.dataclass
class Test:
    """The test of one difference: ``p`` (None: too few steps to test), ``beyond``: p below
    ``alpha`` (None when not tested)."""

    p: float | None
    n_a: int
    n_b: int
    alpha: float = NOISE_ALPHA
    low: float | None = None          # mean_test: the interval of b - a at 1 - alpha
    high: float | None = None

    @property
    def beyond(self) -> bool | None:
        return None if self.p is None else self.p < self.alpha

    @property
    def tested(self) -> bool:
        return self.p is not None


def rank_test(a: np.ndarray, b: np.ndarray, alpha: float = NOISE_ALPHA,
              min_steps: int = MIN_STEPS_TESTED) -> Test:
    """Mann–Whitney U of ``a`` against ``b`` (per-step values), two-sided."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if min(len(a), len(b)) < min_steps:
        return Test(None, len(a), len(b), alpha)
    if np.array_equal(np.unique(a), np.unique(b)) and len(np.unique(a)) == 1:
        return Test(1.0, len(a), len(b), alpha)      # both constant and equal: no difference
    # lazy: scipy.stats takes 1-2 s to import; only comparisons with several steps a side test
    from scipy.stats import mannwhitneyu
    res = mannwhitneyu(a, b, alternative="two-sided", method="auto")
    p = float(res.pvalue)
    return Test(p if np.isfinite(p) else 1.0, len(a), len(b), alpha)


#: Bootstrap resamples of :func:`mean_test`, and its seed (a report is reproducible).
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20261203


def mean_test(a: np.ndarray, b: np.ndarray, alpha: float = NOISE_ALPHA,
              min_steps: int = MIN_STEPS_TESTED) -> Test:
    """Bootstrap of ``mean(b) - mean(a)``: its two-sided p (twice the share of resampled
    differences on the far side of zero) and the percentile interval at ``1 - alpha``."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if min(len(a), len(b)) < min_steps:
        return Test(None, len(a), len(b), alpha)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    ra = a[rng.integers(0, len(a), (BOOTSTRAP_RESAMPLES, len(a)))].mean(axis=1)
    rb = b[rng.integers(0, len(b), (BOOTSTRAP_RESAMPLES, len(b)))].mean(axis=1)
    d = rb - ra
    if not d.any():
        return Test(1.0, len(a), len(b), alpha, 0.0, 0.0)
    p = min(1.0, 2.0 * min(float((d <= 0).mean()), float((d >= 0).mean())))
    low, high = np.quantile(d, [alpha / 2, 1 - alpha / 2])
    return Test(p, len(a), len(b), alpha, float(low), float(high))
