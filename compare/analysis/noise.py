"""Is a difference between two sides beyond the step-to-step spread? A two-sided Mann–Whitney
U test over the per-step values of each side (as Google Benchmark's ``compare.py`` does for
repetitions): it needs no assumption about how step times are distributed, and one odd step
cannot make a difference out of nothing. Below :data:`MIN_STEPS_TESTED` steps on either side
there is no spread to test against, and the answer is None (not tested)."""
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
