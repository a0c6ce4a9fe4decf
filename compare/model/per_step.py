"""Statistics over steps of values keyed by name (a row, an op): one matrix per call, so a
trace with many distinct keys costs one numpy reduction, not one per key."""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np


def matrix(per_step: Sequence[Mapping[Hashable, float]],
           keys: Iterable[Hashable] | None = None) -> tuple[list, np.ndarray]:
    """(keys, values): row k holds key k's value in each step (0.0 where a step lacks it).
    ``keys`` default: every key of any step, in first-seen order."""
    if keys is None:
        keys = dict.fromkeys(k for step in per_step for k in step)
    keys = list(keys)
    pos = {k: r for r, k in enumerate(keys)}
    out = np.zeros((len(keys), len(per_step)))
    for j, step in enumerate(per_step):
        for k, v in step.items():
            r = pos.get(k)
            if r is not None:
                out[r, j] = v
    return keys, out


def medians(per_step: Sequence[Mapping[Hashable, float]],
            keys: Iterable[Hashable] | None = None) -> dict:
    """Each key's median over the steps (a step without the key counts 0.0)."""
    keys, values = matrix(per_step, keys)
    if not len(per_step):
        return {k: 0.0 for k in keys}
    return dict(zip(keys, np.median(values, axis=1).tolist()))
