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


def union_per_group(group: np.ndarray, ts: np.ndarray, end: np.ndarray, lo: float, hi: float,
                    n_groups: int) -> np.ndarray:
    """:func:`union_us` of each group's intervals at once (``group``: ids ``0..n_groups-1``),
    equal to it bit for bit: a group whose intervals merge into one block is measured in bulk,
    one of several blocks by :func:`union_us` itself (a float sum's order is its own). So a
    trace of many rows costs one sort, not one pass over it per row."""
    out = np.zeros(n_groups)
    group = np.asarray(group, dtype=np.int64)
    a = np.clip(np.asarray(ts, dtype=np.float64), lo, hi)
    b = np.clip(np.asarray(end, dtype=np.float64), lo, hi)
    keep = np.flatnonzero(b > a)
    if not len(keep):
        return out
    order = keep[np.lexsort((a[keep], group[keep]))]   # by group, then start (stable)
    g, a, b = group[order], a[order], b[order]
    # order-preserving integer ranks, shifted per group, so one running max serves all groups
    _, rank = np.unique(np.concatenate([a, b]), return_inverse=True)
    span = int(rank.max()) + 1
    ra, rb = rank[:len(a)] + g * span, rank[len(a):] + g * span
    reach = np.maximum.accumulate(rb)
    new = np.ones(len(a), bool)
    new[1:] = (ra[1:] > reach[:-1]) | (g[1:] != g[:-1])
    first = np.flatnonzero(new)
    blocks = np.bincount(g[first], minlength=n_groups)
    single = np.flatnonzero(blocks[g[first]] == 1)
    out[g[first[single]]] = np.maximum.reduceat(b, first)[single] - a[first[single]]
    many = np.flatnonzero(blocks > 1)
    if len(many):
        members = np.argsort(group, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=n_groups))])
        for k in many:
            rows = members[bounds[k]:bounds[k + 1]]
            out[k] = union_us(ts[rows], end[rows], lo, hi)
    return out


def clipped(ts: np.ndarray, end: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Each interval's time inside ``[lo, hi]`` (0 for those outside it)."""
    out: np.ndarray = np.maximum(0.0, np.minimum(end, hi) - np.maximum(ts, lo))
    return out
