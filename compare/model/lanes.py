"""Rows of a trace as numbers: which (pid, tid) lane each event is on, and groups of events,
found with one sort instead of one pass over every event per lane or per process (a legal
trace may hold 200,000 of either)."""
from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np


def keys(pid: np.ndarray, tid: np.ndarray, *others: tuple[np.ndarray, np.ndarray]
         ) -> list[np.ndarray]:
    """One int64 per (pid, tid) pair, equal for equal pairs across ``(pid, tid)`` and every
    ``others`` pair of arrays (one array of keys each, in that order)."""
    pids = np.concatenate([np.asarray(x, np.int64) for x in (pid, *(p for p, _ in others))])
    tids = np.concatenate([np.asarray(x, np.int64) for x in (tid, *(t for _, t in others))])
    if not len(pids):
        return [np.zeros(0, np.int64) for _ in range(1 + len(others))]
    _, p = np.unique(pids, return_inverse=True)
    tu, t = np.unique(tids, return_inverse=True)
    key = p.reshape(-1).astype(np.int64) * len(tu) + t.reshape(-1)
    cuts = np.cumsum([len(pid)] + [len(p) for p, _ in others])[:-1]
    return np.split(key, cuts)


def in_lanes(pid: np.ndarray, tid: np.ndarray, lanes: Iterable[tuple[int, int]]) -> np.ndarray:
    """Per event: its (pid, tid) is one of ``lanes``."""
    lanes = list(lanes)
    if not lanes:
        return np.zeros(len(pid), bool)
    lp = np.array([p for p, _ in lanes], np.int64)
    lt = np.array([t for _, t in lanes], np.int64)
    mine, theirs = keys(pid, tid, (lp, lt))
    return np.isin(mine, theirs)


def groups(values: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(value, positions into ``values`` holding it, ascending) for each distinct value, in
    ascending order of value."""
    values = np.asarray(values)
    if not len(values):
        return
    order = np.argsort(values, kind="stable")
    v = values[order]
    cuts = np.flatnonzero(v[1:] != v[:-1]) + 1
    for chunk in np.split(order, cuts):
        yield values[chunk[0]].item(), chunk


def unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the distinct ``(a, b)`` pairs as an ``(n, 2)`` int64 array in ascending order, each
    element's index into them, how many elements hold each): ``np.unique(np.stack([a, b],
    axis=1), axis=0, return_inverse=True, return_counts=True)`` in one integer sort
    (numpy's ``axis=0`` sorts rows as structured values, ~10x slower on a million rows)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if not len(a):
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    a0, b0 = int(a.min()), int(b.min())
    span_a, span_b = int(a.max()) - a0 + 1, int(b.max()) - b0 + 1
    if span_a * span_b < 1 << 62:   # one int64 key per pair keeps the pairs' order
        key = (a - a0) * span_b + (b - b0)
        uniq, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
        pairs = np.stack([uniq // span_b + a0, uniq % span_b + b0], axis=1)
        return pairs, inv.reshape(-1), counts
    order = np.lexsort((b, a))
    sa, sb = a[order], b[order]
    first = np.ones(len(a), bool)
    first[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    at = np.flatnonzero(first)
    inv = np.empty(len(a), np.int64)
    inv[order] = np.cumsum(first) - 1
    return np.stack([sa[at], sb[at]], axis=1), inv, np.diff(np.append(at, len(a)))
