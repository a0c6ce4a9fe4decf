"""Where each step's time went, by stage: wall-clock and CPU time, per event and per label.

Work runs on many threads at once (the TF1 executor's inter-op threads and Eigen workers; the
modern pipeline's tf.data threads beside the step's own thread), so "time per stage" needs a
definition. We report two, from the same per-thread timeline:

- **wall** (the default in tables): each instant of the step once. While the step waits for or
  reads its input (an input op, or inside one, on any of its threads; its own thread waiting
  for input), the instant is the input's, shared among what runs then. Every other instant is
  shared equally among the threads *working* at it (each at its innermost event's stage); an
  instant where no thread works goes to what the blocked threads wait in (compiled code a
  thread waits for: ``xla_run``), and to ``idle`` when nothing traced runs (a session or a
  function call waiting in TF's runtime holds no time of its own). Per step the wall times add
  up to the step's duration exactly, so stages, overheads, idle and unmapped time are shares of
  one whole.
- **cpu**: busy thread time per stage, summed over threads (waiting is not counted). It exceeds
  the step time when threads work in parallel; the gap between the two shows the parallelism.

A thread is *working* when its innermost event is not a wait (``SessionRun`` waiting for the
executor, ``IteratorGetNext`` or an async tf.data iterator waiting for elements,
``BlockUntilReady``; see :mod:`compare.analysis.mapping`), and not a long stretch of TF's runtime with
no op inside (:data:`BLOCKED_MIN_US`; waiting, descheduled or untraced, reported as
``blocked_us``). An Eigen worker's region with no event inside runs shards of the ops running
elsewhere at that moment and is credited to them (an estimate).

Per event it also keeps its own time in the step (clipped to the step, its children's time
left out, waits included), which :mod:`compare.analysis.account` books as op time.
"""
from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from compare.analysis.mapping import StageMap
from compare.analysis.rows import duplicate_pids, lane_roles
from compare.model.events import CAT, Step, Trace
from compare.model.lanes import in_lanes
from compare.vocabulary.labels import BASIS, ESTIMATES, LABEL, LABELS, PIPELINE, UNMAPPED
from compare.vocabulary.rows import NOT_WORK_KINDS
from compare.vocabulary.thresholds import BLOCKED_MIN_US

_NL = len(LABELS)

@dataclasses.dataclass
class StepTimes:
    """One step's attribution. Arrays are indexed by :data:`compare.analysis.mapping.LABELS`."""

    num: int
    ts: float
    dur: float
    wall: np.ndarray
    cpu: np.ndarray
    wall_estimated: np.ndarray     # the part of ``wall`` that rests on an estimate
    #: per event with time in this step (ascending ids): its wall share (credited worker time
    #: included), its CPU time (waits excluded), and its own time in the step (``self``: the
    #: event clipped to the step, minus its children; waits included, credit not)
    events: np.ndarray
    ev_wall: np.ndarray
    ev_cpu: np.ndarray
    ev_self: np.ndarray
    credited_us: float = 0.0          # worker-region wall time credited to concurrent ops
    blocked_us: float = 0.0           # TF-thread runtime with no op inside, counted as waiting
    untraced_us: float = 0.0          # the step's edges with nothing traced (before the first
    #                                   event, after the last): part of the idle wall time
    input_us: float = 0.0             # time it waited for or read its input (on any of its
    #                                   threads; what else ran then counts as that input)
    compile_us: float = 0.0           # time some thread compiled (XLA) during it
    ev_input: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    #                                   per event: the part of its wall share that is the input

    @property
    def by_event_wall(self) -> dict[int, float]:
        """Event -> its wall share in this step (see :attr:`ev_wall`)."""
        return dict(zip(self.events.tolist(), self.ev_wall.tolist()))

    @property
    def by_event_cpu(self) -> dict[int, float]:
        return dict(zip(self.events.tolist(), self.ev_cpu.tolist()))


@dataclasses.dataclass
class Attribution:
    """Every step's times; ``segments``: (event, t0, t1) arrays, the innermost event of each
    lane over time (what the plots and the merged trace draw)."""

    trace: Trace
    smap: StageMap
    steps: list[StepTimes]
    critical_lane: dict[int, tuple[int, int]]   # step -> lane of its step marker
    segments: tuple[np.ndarray, np.ndarray, np.ndarray]
    blocked: np.ndarray           # per segment: runtime with nothing inside, counted as a wait

    def segment_waits(self) -> np.ndarray:
        """Per segment: the thread is waiting (a wait event, or executor time found blocked)."""
        return np.asarray(self.smap.wait[self.segments[0]] | self.blocked)

    def median_blocked_us(self) -> float:
        """TF-thread runtime with no op inside counted as waiting, per steady step (median)."""
        return float(np.median([s.blocked_us for s in self.steady])) if self.steady else 0.0

    def segment_labels(self, per_event: np.ndarray | None = None,
                       op_labels: frozenset[int] | None = None,
                       fallback: int = LABEL["runtime"]) -> np.ndarray:
        """Label of each segment for display: the event's label; a worker region that ran
        shards of other ops takes the label of an op running at its midpoint elsewhere.
        ``per_event`` / ``op_labels`` / ``fallback``: another labelling of the events (the
        generic view's groups), the labels that are ops' work, and a region's label when no
        op runs (default: the stages)."""
        e, t0, t1 = self.segments
        if per_event is None:
            per_event, op_labels = self.smap.label, PIPELINE | {LABEL["xla_run"], UNMAPPED}
        labels = per_event[e].astype(np.int64)
        orph = np.flatnonzero(self.smap.orphan[e])
        if not len(orph):
            return np.asarray(labels)
        ops = np.flatnonzero(np.isin(labels, list(op_labels or ()))
                             & ~self.smap.wait[e] & ~self.smap.orphan[e])
        order = ops[np.argsort(t0[ops])]
        mids = 0.5 * (t0[orph] + t1[orph])
        # for each midpoint, the op started last (in start order) that is still running: a
        # sweep in time, the running ops in a heap by start position (ended ones dropped for
        # good, as later midpoints are later still)
        starts, ends = t0[order].tolist(), t1[order].tolist()
        heap: list[tuple[int, float]] = []
        j = 0
        for k in np.argsort(mids, kind="stable"):
            mid = float(mids[k])
            while j < len(starts) and starts[j] <= mid:
                heapq.heappush(heap, (-j, ends[j]))
                j += 1
            while heap and heap[0][1] <= mid:
                heapq.heappop(heap)
            labels[orph[k]] = labels[order[-heap[0][0]]] if heap else fallback
        return np.asarray(labels)

    @property
    def first(self) -> StepTimes | None:
        """The first step (start-up, compiles) when there are at least two."""
        return self.steps[0] if len(self.steps) >= 2 else None

    @property
    def steady(self) -> list[StepTimes]:
        """Every step but the first; a single-step trace's one step."""
        return self.steps[1:] if len(self.steps) >= 2 else list(self.steps)

    def median(self, what: str = "wall") -> np.ndarray:
        """Median over steady steps, per label."""
        rows = [getattr(s, what) for s in self.steady]
        return np.median(np.stack(rows), axis=0) if rows else np.zeros(_NL)

    def representative(self) -> StepTimes | None:
        """The steady step whose duration is closest to the median (what plots show), among
        those that compile nothing when there are any: a compile begun in an earlier step (a
        tf.data function's, on tf.data's threads) can run on into the next one, one-time work
        that the steady state does not have."""
        if not self.steady:
            return None
        med = self.median_step_us()
        steady = [s for s in self.steady if s.wall[LABEL["xla_compile"]] == 0] or self.steady
        return min(steady, key=lambda s: abs(s.dur - med))

    def median_step_us(self) -> float:
        return float(np.median([s.dur for s in self.steady])) if self.steady else 0.0



#: Innermost-event segments: (event, t0, t1) arrays.
Segs = tuple[np.ndarray, np.ndarray, np.ndarray]

def segments(trace: Trace) -> Segs:
    """Innermost-event segments of every lane that holds work (not allocator or tensor rows,
    not rows that repeat other rows' events: :func:`compare.analysis.rows.duplicate_pids`):
    arrays (event, t0, t1), lane by lane in time order. An event's segments are its time
    (clipped to its parent's, :mod:`compare.model.nesting`) minus its children's. Computed once
    per trace."""
    cached = trace.meta.get("_segments")
    if cached is not None and cached[3] == len(trace.events):
        return cached[0], cached[1], cached[2]
    out = _segments(trace)
    trace.meta["_segments"] = (*out, len(trace.events))
    return out


def _segments(trace: Trace) -> Segs:
    ev = trace.events
    nest = trace.nesting
    keep = ~np.isin(ev.pid, sorted(_not_work_pids(trace))) & ~_derived(trace)
    has_kids = np.zeros(len(ev), bool)
    has_kids[nest.parent[nest.parent >= 0]] = True
    leaf = np.flatnonzero(keep & ~has_kids & (nest.end > ev.ts))
    parts = [(leaf, ev.ts[leaf], nest.end[leaf])]
    kids = np.flatnonzero(keep & (nest.parent >= 0))
    if len(kids):
        kids = kids[np.lexsort((ev.ts[kids], nest.parent[kids]))]
        par = nest.parent[kids]
        first = np.concatenate([[True], par[1:] != par[:-1]])
        last = np.concatenate([par[1:] != par[:-1], [True]])
        # siblings never overlap (one starting inside another is its child): the gap before
        # each child runs from the previous sibling's end, or the parent's start
        prev_end = np.where(first, ev.ts[par], np.concatenate([[0.0], nest.end[kids][:-1]]))
        parts.append((par, prev_end, ev.ts[kids]))
        parts.append((par[last], nest.end[kids][last], nest.end[par[last]]))
    e = np.concatenate([p[0] for p in parts]).astype(np.int64)
    t0 = np.concatenate([p[1] for p in parts]).astype(np.float64)
    t1 = np.concatenate([p[2] for p in parts]).astype(np.float64)
    ok = t1 > t0
    e, t0, t1 = e[ok], t0[ok], t1[ok]
    order = np.lexsort((t0, ev.tid[e], ev.pid[e]))
    return e[order], t0[order], t1[order]


def window_self(trace: Trace, lo: float, hi: float) -> np.ndarray:
    """Per event, its own time inside ``[lo, hi]``: its segments (:func:`segments`) clipped to
    the window, so an event that straddles an edge counts by its overlap and a parent without
    its children's time; events on rows that repeat others count 0. The same quantity as a
    step's ``ev_self``, for any window (compare.explain's step)."""
    e, t0, t1 = segments(trace)
    inside = np.maximum(0.0, np.minimum(t1, hi) - np.maximum(t0, lo))
    return np.bincount(e, inside, minlength=len(trace.events))


def _derived(trace: Trace) -> np.ndarray:
    """Events on xprof's device lines derived from the kernels ("TensorFlow Ops", "Steps",
    "XLA Modules"...): they repeat the stream rows' time and are not work of their own."""
    if trace.format == "timeline":
        return np.zeros(len(trace.events), bool)
    return np.asarray(lane_roles(trace) == "derived")


def _not_work_pids(trace: Trace) -> set[int]:
    """Rows that record no work, and rows that repeat other rows' events."""
    skip = {p.pid for p in trace.processes.values() if p.kind in NOT_WORK_KINDS}
    return skip | duplicate_pids(trace)


def attribute(trace: Trace, smap: StageMap) -> Attribution:
    """Per-step wall and CPU time by label, and the step split (see the module docstring)."""
    ev = trace.events
    seg_ev, seg_t0, seg_t1 = segments(trace)
    seg_lane_pid, seg_lane_tid = ev.pid[seg_ev], ev.tid[seg_ev]
    step_cat = CAT["step"]
    markers: dict[int, tuple[int, int]] = {}
    for i in np.flatnonzero(ev.category == step_cat):
        markers.setdefault(int(ev.step[i]), (int(ev.pid[i]), int(ev.tid[i])))
    blocked = _blocked(smap, seg_ev, seg_t0, seg_t1, seg_lane_pid, seg_lane_tid,
                       set(markers.values()))
    out = []
    for st, idx in zip(trace.steps, _per_step(seg_t0, seg_t1, trace.steps)):
        a, b = st.ts, st.ts + st.dur
        seg = _Segments(seg_ev[idx], np.clip(seg_t0[idx], a, b), np.clip(seg_t1[idx], a, b),
                        seg_lane_pid[idx], seg_lane_tid[idx], blocked[idx],
                        smap.input[seg_ev[idx]])
        out.append(_one_step(st, smap, seg, markers.get(st.num)))
    return Attribution(trace, smap, out, markers, (seg_ev, seg_t0, seg_t1), blocked)


def _per_step(t0: np.ndarray, t1: np.ndarray, steps: list[Step]) -> list[np.ndarray]:
    """For each step: the segments (``t1 > t0``) overlapping it, ascending. Those starting
    inside it are a range of the segments by start; those open at its start are kept in a
    sweep over the steps by start. So the cost is the sort plus the answer, not the number of
    steps times the number of segments."""
    order = np.argsort(t0, kind="stable")
    s0, ends = t0[order], t1[order]
    out: list[np.ndarray] = [np.zeros(0, np.int64)] * len(steps)
    heap: list[tuple[float, int]] = []     # (end, segment) of segments started before a
    active: set[int] = set()
    j = 0
    for k in sorted(range(len(steps)), key=lambda k: steps[k].ts):
        a, b = steps[k].ts, steps[k].ts + steps[k].dur
        stop = int(np.searchsorted(s0, a, side="left"))
        while j < stop:
            heapq.heappush(heap, (float(ends[j]), int(order[j])))
            active.add(int(order[j]))
            j += 1
        while heap and heap[0][0] <= a:
            active.discard(heapq.heappop(heap)[1])
        inside = order[stop:int(np.searchsorted(s0, b, side="left"))]
        out[k] = np.sort(np.concatenate([np.fromiter(active, np.int64, len(active)),
                                         inside.astype(np.int64)]))
    return out


def _blocked(smap: StageMap, e: np.ndarray, t0: np.ndarray, t1: np.ndarray, pid: np.ndarray,
             tid: np.ndarray, step_lanes: set[tuple[int, int]]) -> np.ndarray:
    """Per segment: a stretch of TF's own runtime with nothing inside, on a TF thread (not the
    step's own Python thread), at least :data:`BLOCKED_MIN_US` long."""
    runtime = np.isin(smap.label[e], [LABEL["runtime"], LABEL["xla_run"]]) & \
        (smap.basis[e] == BASIS["runtime"]) & ~smap.wait[e] & ~smap.orphan[e] & \
        (t1 - t0 >= BLOCKED_MIN_US)
    if step_lanes and runtime.any():
        runtime &= ~in_lanes(pid, tid, step_lanes)
    return np.asarray(runtime)


@dataclasses.dataclass
class _Segments:
    """One step's innermost-event segments, clipped to the step: the event of each, its span,
    its lane, whether it is blocked runtime, whether it is the step's input."""

    e: np.ndarray
    t0: np.ndarray
    t1: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    blocked: np.ndarray
    input: np.ndarray


class _Sweep:
    """The step cut at every segment boundary into elementary intervals ``dt``: how many of
    some segments cover each (:meth:`count`), and what each segment gets from a per-interval
    quantity (:meth:`over`)."""

    def __init__(self, lo: float, hi: float, t0: np.ndarray, t1: np.ndarray) -> None:
        bounds = np.unique(np.concatenate([[lo, hi], t0, t1]))
        self.dt = np.diff(bounds)
        self.k0 = np.searchsorted(bounds, t0)
        self.k1 = np.searchsorted(bounds, t1)

    def count(self, mask: np.ndarray) -> np.ndarray:
        d = np.zeros(len(self.dt) + 1)
        np.add.at(d, self.k0[mask], 1)
        np.add.at(d, self.k1[mask], -1)
        return np.cumsum(d)[:len(self.dt)]

    def over(self, per_k: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Sum of ``per_k`` over each masked segment's intervals."""
        pre = np.concatenate([[0.0], np.cumsum(per_k)])
        return np.asarray(pre[self.k1[mask]] - pre[self.k0[mask]])


def _safe(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, 1.0)


def _one_step(st: Step, smap: StageMap, seg: _Segments, crit: tuple[int, int] | None
              ) -> StepTimes:
    label = smap.label[seg.e].astype(np.int64)
    wait = smap.wait[seg.e] | seg.blocked
    orphan = smap.orphan[seg.e]
    is_op = np.isin(label, list(PIPELINE | {LABEL["xla_run"], LABEL["xla_compile"], UNMAPPED})) \
        & ~wait & ~orphan
    work = ~wait
    sw = _Sweep(st.ts, st.ts + st.dur, seg.t0, seg.t1)
    # the step's input first: while it waits for or reads its input (:func:`_input_segments`),
    # that is what the instant is, shared among what runs then (its waits, and the threads
    # working: a tf.data thread producing what it waits for, or anything beside it)
    inp = _input_segments(label, seg, crit)
    c_in = sw.count(inp) > 0
    part = (work & ~orphan) | inp
    n_inp = sw.count(part)
    # a thread waiting in TF's runtime (a session waiting for its executor, a function call
    # for its ops, a TF thread blocked) holds no instant of its own: nothing traced runs then
    held = wait & (label != LABEL["runtime"])
    n_work, n_wait, n_op = sw.count(work), sw.count(held), sw.count(is_op)
    n_orph = sw.count(orphan)
    g = np.where((n_work > 0) & ~c_in, sw.dt / _safe(n_work), 0.0)   # wall per working thread
    h = np.where((n_work == 0) & (n_wait > 0) & ~c_in, sw.dt / _safe(n_wait), 0.0)
    g_in = np.where(c_in, sw.dt / _safe(n_inp), 0.0)
    seg_wall = np.zeros(len(seg.e))
    seg_wall[work] = sw.over(g, work)
    seg_wall[held] = sw.over(h, held)
    seg_in = np.zeros(len(seg.e))
    seg_in[part] = sw.over(g_in, part)
    seg_wall += seg_in
    seg_cpu = np.where(wait, 0.0, seg.t1 - seg.t0)
    # orphan worker time: credited to the ops running at that instant, else runtime
    has_op = (n_op > 0) & ~c_in
    extra_cpu, extra_wall = np.zeros(len(seg.e)), np.zeros(len(seg.e))
    extra_cpu[is_op] = sw.over(np.where(n_op > 0, n_orph * sw.dt / _safe(n_op), 0.0), is_op)
    extra_wall[is_op] = sw.over(np.where(has_op, n_orph * g / _safe(n_op), 0.0), is_op)
    per = _by_label(smap, seg.e, np.where(orphan, 0.0, seg_wall) + extra_wall,
                    np.where(orphan, 0.0, seg_cpu) + extra_cpu, extra_wall,
                    seg.t1 - seg.t0, seg_in)
    wall, cpu = per.wall, per.cpu
    wall[LABEL["runtime"]] += float(np.sum(np.where(has_op | c_in, 0.0, n_orph * g)))
    cpu[LABEL["runtime"]] += float(np.sum(np.where(n_op > 0, 0.0, n_orph * sw.dt)))
    wall[LABEL["idle"]] += float(np.sum(np.where((n_work == 0) & (n_wait == 0), sw.dt, 0.0)))
    return StepTimes(st.num, st.ts, st.dur, wall, cpu, per.est, per.events, per.ev_wall,
                     per.ev_cpu, per.ev_self, float(extra_wall.sum()),
                     float(np.sum((seg.t1 - seg.t0)[seg.blocked])), _edges(st, seg),
                     float(sw.dt[c_in].sum()),
                     float(sw.dt[sw.count((label == LABEL["xla_compile"]) & ~wait) > 0].sum()),
                     per.ev_input)


def _input_segments(label: np.ndarray, seg: _Segments, crit: tuple[int, int] | None
                    ) -> np.ndarray:
    """The segments of the step's input: input ops (or events inside one) on any of its
    threads (:mod:`compare.analysis.inputs`), and its own thread waiting for input."""
    inp = seg.input.copy()
    if crit is not None:
        inp |= (seg.pid == crit[0]) & (seg.tid == crit[1]) & (label == LABEL["input_wait"])
    return np.asarray(inp)


def _edges(st: Step, seg: _Segments) -> float:
    """The step's time before its first segment and after its last: nothing traced there."""
    if not len(seg.e):
        return float(st.dur)
    return float(max(0.0, seg.t0.min() - st.ts) + max(0.0, st.ts + st.dur - seg.t1.max()))


@dataclasses.dataclass
class _PerLabel:
    wall: np.ndarray
    cpu: np.ndarray
    est: np.ndarray
    events: np.ndarray
    ev_wall: np.ndarray
    ev_cpu: np.ndarray
    ev_self: np.ndarray
    ev_input: np.ndarray


def _by_label(smap: StageMap, e: np.ndarray, w: np.ndarray, c: np.ndarray,
              credited: np.ndarray, own: np.ndarray, inp: np.ndarray) -> _PerLabel:
    """Per label: wall, CPU and estimated wall; per event: wall, CPU, own time and the input's
    part of its wall. ``credited``: the part of ``w`` credited from worker regions (an
    estimate); ``own``: each segment's length; ``inp``: each segment's wall while the step
    waited for or read its input."""
    wall, cpu, est = np.zeros(_NL), np.zeros(_NL), np.zeros(_NL)
    est_bases = np.array(sorted(BASIS[b] for b in ESTIMATES))
    ev_idx, inv = np.unique(e, return_inverse=True)
    sw = np.bincount(inv, w, minlength=len(ev_idx))
    sc = np.bincount(inv, c, minlength=len(ev_idx))
    xw = np.bincount(inv, credited, minlength=len(ev_idx))
    so = np.bincount(inv, own, minlength=len(ev_idx))
    si = np.bincount(inv, inp, minlength=len(ev_idx))
    keep = (sw != 0) | (sc != 0) | (so != 0)
    ev_idx, sw, sc, xw, so, si = ev_idx[keep], sw[keep], sc[keep], xw[keep], so[keep], si[keep]
    estimated = np.isin(smap.basis[ev_idx], est_bases)
    ew = np.where(estimated, sw, xw)
    plain = smap.single_label(ev_idx)           # events wholly in one label: one bincount
    one = plain >= 0
    wall += np.bincount(plain[one], sw[one], minlength=_NL)
    cpu += np.bincount(plain[one], sc[one], minlength=_NL)
    est += np.bincount(plain[one], ew[one], minlength=_NL)
    for j in np.flatnonzero(~one).tolist():
        for lab, frac in smap.fractions(int(ev_idx[j])):
            wall[lab] += sw[j] * frac
            cpu[lab] += sc[j] * frac
            est[lab] += ew[j] * frac
    return _PerLabel(wall, cpu, est, ev_idx, sw, sc, so, si)
