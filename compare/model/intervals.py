"""Busy time as a union of intervals, and the idle gaps between them.

Summing event durations double-counts overlapping work (nested events on a thread, parallel
lanes); the analyses need "how long was at least one of these busy" instead.
"""
from __future__ import annotations

import numpy as np


def merge(ts: np.ndarray, end: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint intervals covered by ``[ts, end)``, clipped to ``[lo, hi]``, in order."""
    a = np.clip(np.asarray(ts, dtype=np.float64), lo, hi)
    b = np.clip(np.asarray(end, dtype=np.float64), lo, hi)
    keep = b > a
    a, b = a[keep], b[keep]
    if not len(a):
        return a, b
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    reach = np.maximum.accumulate(b)
    new = np.empty(len(a), dtype=bool)
    new[0] = True
    new[1:] = a[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return a[first], np.maximum.reduceat(b, first)


def union_us(ts: np.ndarray, end: np.ndarray, lo: float, hi: float) -> float:
    """Time in ``[lo, hi]`` covered by at least one interval."""
    a, b = merge(ts, end, lo, hi)
    return float((b - a).sum())


def gaps(ts: np.ndarray, end: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The stretches of ``[lo, hi]`` that no interval covers, as (starts, ends)."""
    a, b = merge(ts, end, lo, hi)
    starts = np.concatenate([[lo], b])
    ends = np.concatenate([a, [hi]])
    keep = ends > starts
    return starts[keep], ends[keep]
