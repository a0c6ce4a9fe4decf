"""Which event runs inside which, on each lane: one pass over a trace, cached on it.

A thread runs a call stack, so on one lane an event that starts while another is open runs
inside it (xprof: ``ExecutorState::Process`` > the op > its XLA kernels). Clocks of different
tracers are not perfectly aligned, so a child may seem to end after its parent: its time is
clipped to the parent's (``end``), and ``contained`` says whether it really fitted. Lanes of a
timeline.py trace never nest (they are greedy non-overlapping rows), so there every event is
its own root and the pass costs one sort.

Self time, the mapper's inheritance and attribution's innermost-event timeline all read this.
"""
from __future__ import annotations

import dataclasses

import numpy as np

#: Tolerance (µs) for a child ending at its parent's end (float rounding of ts + dur).
EPS_US = 1e-6


@dataclasses.dataclass
class Nesting:
    """``parent``: the enclosing event on the same lane, -1 for a root; ``end``: each event's
    end clipped to its parent's; ``contained``: the event really ended inside its parent;
    ``depth``: 0 for roots; ``order``: every event, lane by lane, by start (longer first), so
    parents come before their children."""

    parent: np.ndarray
    end: np.ndarray
    contained: np.ndarray
    depth: np.ndarray
    order: np.ndarray

    def walk(self) -> np.ndarray:
        """Events that have a parent, parents before children (by depth, then start)."""
        nested = np.flatnonzero(self.parent >= 0)
        return nested[np.argsort(self.depth[nested], kind="stable")]

    def outermost(self, flags: np.ndarray) -> np.ndarray:
        """Per event: the outermost of itself and its ancestors that is flagged, -1 for none.
        Pointer doubling: after round k each event has seen its ancestors up to 2**k levels
        up, so the cost is log2(depth) passes over the nested events, however deep."""
        out = np.where(flags, np.arange(len(flags)), -1)
        anc = self.parent.copy()           # per event, the ancestor 2**k levels up
        todo = np.flatnonzero(anc >= 0)
        while len(todo):
            up = anc[todo]
            theirs = out[up]               # outermost flagged from there on up: further out
            out[todo] = np.where(theirs >= 0, theirs, out[todo])
            anc[todo] = anc[up]
            todo = todo[anc[todo] >= 0]
        return out

    def nearest_in(self, index: np.ndarray) -> np.ndarray:
        """For each event of ``index``: its nearest ancestor that is also in ``index`` (-1 if
        none), i.e. its parent had only the events ``index`` been traced."""
        member = np.zeros(len(self.parent), bool)
        member[index] = True
        anc: np.ndarray = self.parent[index].copy()
        todo = np.flatnonzero((anc >= 0) & ~member[np.maximum(anc, 0)])
        while len(todo):
            anc[todo] = self.parent[anc[todo]]
            todo = todo[(anc[todo] >= 0) & ~member[np.maximum(anc[todo], 0)]]
        return anc


def lane_order(pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Event indices lane by lane, each lane by start time, longer events first on a tie."""
    return np.lexsort((-dur, ts, tid, pid))


def build(pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> Nesting:
    n = len(ts)
    order = lane_order(pid, tid, ts, dur)
    parent = np.full(n, -1, np.int64)
    end = ts + dur
    clipped = end.copy()
    contained = np.ones(n, bool)
    depth = np.zeros(n, np.int32)
    if n < 2:
        return Nesting(parent, clipped, contained, depth, order)
    p, t, s, e = pid[order], tid[order], ts[order], end[order]
    same_lane = (p[1:] == p[:-1]) & (t[1:] == t[:-1])
    # if any event of a lane starts before an earlier one has ended, so does one before the
    # next (the earlier ones are sorted by start), so neighbours tell which lanes nest
    overlap = same_lane & (s[1:] < e[:-1])
    if not overlap.any():
        return Nesting(parent, clipped, contained, depth, order)
    lane_of = np.concatenate([[0], np.cumsum(~same_lane)])
    nesting_lanes = np.unique(lane_of[1:][overlap])
    bounds = np.concatenate([[0], np.flatnonzero(~same_lane) + 1, [n]])
    for k in nesting_lanes:
        _walk_lane(order[bounds[k]:bounds[k + 1]], ts, end, parent, clipped, contained, depth)
    return Nesting(parent, clipped, contained, depth, order)


def _walk_lane(lane: np.ndarray, ts: np.ndarray, end: np.ndarray, parent: np.ndarray,
               clipped: np.ndarray, contained: np.ndarray, depth: np.ndarray) -> None:
    """The call-stack walk of one lane (events by start, longer first)."""
    lts, lend = ts[lane], end[lane]
    stack: list[int] = []        # positions in ``lane``
    stack_end: list[float] = []  # their clipped ends
    for k in range(len(lane)):
        t0 = lts[k]
        while stack and stack_end[-1] <= t0:
            stack.pop()
            stack_end.pop()
        e = lend[k]
        i = lane[k]
        if stack:
            top = lane[stack[-1]]
            parent[i] = top
            depth[i] = depth[top] + 1
            contained[i] = e <= end[top] + EPS_US
            e = min(e, stack_end[-1])
            clipped[i] = e
        stack.append(k)
        stack_end.append(e)
