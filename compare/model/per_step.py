"""Statistics over steps of values keyed by name (a row, an op): one numpy reduction per call,
so a trace with many distinct keys costs one pass, not one per key. A step lacking a key
counts 0.0 for it.

Up to :data:`DENSE_CELLS_MAX` cells (keys x steps) the values sit in one dense matrix; past
it only the values present are kept (a trace whose every step runs ops of its own, a step
marker named after its step, has as many keys as steps: the matrix grew with the square of
the steps)."""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np

#: Cells (keys x steps) of the dense matrix at most (32 MB of float64).
DENSE_CELLS_MAX = 1 << 22


def matrix(per_step: Sequence[Mapping[Hashable, float]],
           keys: Iterable[Hashable] | None = None) -> tuple[list[Hashable], np.ndarray]:
    """(keys, values): row k holds key k's value in each step (0.0 where a step lacks it).
    ``keys`` default: every key of any step, in first-seen order."""
    keys = _keys(per_step, keys)
    pos = {k: r for r, k in enumerate(keys)}
    out = np.zeros((len(keys), len(per_step)))
    for j, step in enumerate(per_step):
        for k, v in step.items():
            r = pos.get(k)
            if r is not None:
                out[r, j] = v
    return keys, out


def stats(per_step: Sequence[Mapping[Hashable, float]],
          keys: Iterable[Hashable] | None = None
          ) -> tuple[list[Hashable], np.ndarray, np.ndarray, np.ndarray]:
    """(keys, median, mean, max): each key's statistics over the steps (at least one step);
    ``keys`` as :func:`matrix` takes them. Dense or sparse, the medians are the same."""
    keys = _keys(per_step, keys)
    if len(keys) * len(per_step) <= DENSE_CELLS_MAX:
        _, m = matrix(per_step, keys)
        return keys, np.median(m, axis=1), np.mean(m, axis=1), m.max(axis=1)
    return (keys, *_sparse_stats(per_step, keys))


def medians(per_step: Sequence[Mapping[Hashable, float]],
            keys: Iterable[Hashable] | None = None) -> dict[Hashable, float]:
    """Each key's median over the steps (a step without the key counts 0.0)."""
    keys = _keys(per_step, keys)
    if not len(per_step):
        return {k: 0.0 for k in keys}
    keys, med, _, _ = stats(per_step, keys)
    return dict(zip(keys, med.tolist()))


def _keys(per_step: Sequence[Mapping[Hashable, float]],
          keys: Iterable[Hashable] | None) -> list[Hashable]:
    if keys is None:
        keys = dict.fromkeys(k for step in per_step for k in step)
    return list(keys)


def _sparse_stats(per_step: Sequence[Mapping[Hashable, float]], keys: list[Hashable]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`stats` from the values present alone: per key, its values sorted, with the
    steps lacking it as zeros placed among them where they sort."""
    pos = {k: r for r, k in enumerate(keys)}
    rows, vals = [], []
    for step in per_step:
        for k, v in step.items():
            r = pos.get(k)
            if r is not None:
                rows.append(r)
                vals.append(v)
    n, width = len(per_step), len(keys)
    rows_a, vals_a = np.asarray(rows, np.int64), np.asarray(vals, np.float64)
    present = np.bincount(rows_a, minlength=width)
    zeros = n - present
    mean = np.bincount(rows_a, weights=vals_a, minlength=width) / n
    top = np.full(width, -np.inf)
    np.maximum.at(top, rows_a, vals_a)
    top = np.where(zeros > 0, np.maximum(top, 0.0), top)
    order = np.lexsort((vals_a, rows_a))
    ranked = vals_a[order]
    start = np.concatenate([[0], np.cumsum(present)[:-1]])
    below = np.bincount(rows_a[vals_a < 0], minlength=width)   # values sorting before 0.0

    def at(rank: int) -> np.ndarray:
        """Each key's value of this rank among its n values (zeros included)."""
        zero = (rank >= below) & (rank < below + zeros)
        k = np.where(rank < below, rank, rank - zeros)
        k = np.clip(k, 0, np.maximum(present - 1, 0))
        got = ranked[np.minimum(start + k, len(ranked) - 1)] if len(ranked) else np.zeros(width)
        return np.where(zero, 0.0, got)

    median = at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2
    return median, mean, top
