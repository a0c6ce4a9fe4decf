"""How to read a trace: every process and lane in words, how busy each was in a step, where
the step's time went by op, and the memory counters' peaks.

This answers the seed's "What is denoted by different pids in the plot?" and the first part of
"How do I interpret this plot?" for any trace the loaders read.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from compare.analysis import rows
from compare.analysis.attribution import segments, window_self
from compare.analysis.inputs import wait_roots
from compare.analysis.steps import StepChoice
from compare.analysis.xla import kernel_launches
from compare.model import intervals
from compare.model.events import CAT, CATEGORIES, Trace
from compare.model.lanes import groups as lane_groups
from compare.model.lanes import unique_pairs
from compare.vocabulary.groups import is_collective
from compare.vocabulary.ops import cluster_of, is_input_op
from compare.vocabulary.rows import STREAM, TFDATA_GET_NEXT_THREADS, WHERE, is_copy


@dataclasses.dataclass
class LaneInfo:
    """One row of a process (a thread, or a timeline's lane); what it is in words is
    :func:`compare.output.legend_words.lane`'s."""

    tid: int
    name: str
    role: str
    events: int
    busy_us: float
    busy_share: float           # of the step's wall time
    thread: str = ""            # its thread's name without the number TF appends
    get_next: bool = False      # a tf.data thread the step's IteratorGetNext runs on
    #: another thread named like Python's main one: the main one's tid, and the events this
    #: one recorded in the whole trace
    main_tid: int | None = None
    trace_events: int = 0


@dataclasses.dataclass
class ProcessInfo:
    """One process (a row group of the viewer): its role and what it holds; what it is in words
    is :func:`compare.output.legend_words.process`'s."""

    pid: int
    name: str
    kind: str
    role: str
    events: int                 # complete events in the step
    recorded: bool              # holds any event at all in the trace (not only its name)
    busy_us: float              # union of the work of its lanes in the step
    busy_share: float
    parallelism: float          # lanes busy at once on average while busy (sum / union)
    tensors: int                # tensor objects (timeline Tensors rows)
    lanes: list[LaneInfo]
    device: str = ""            # its device, as rows.device_of names it
    gpu: str | None = None      # its GPU, as rows.gpu_of names it
    has_streams: bool = False   # its GPU has CUDA stream rows
    counters: bool = False      # it holds memory counters
    tracer_row: bool = False    # one of the GPU tracer's rows (a stream or memcpy row)
    stream: str = ""            # a stream row's stream number ("?" when not in its name)
    copies_only: bool = False   # a stream row that ran copies only


@dataclasses.dataclass
class OpTime:
    op: str                     # the TF op type (a GPU kernel counts for the op it ran for)
    where: str                  # "host", "GPU" or "GPU launch row" (see WHERE)
    category: str
    count: int
    self_us: float              # CPU (or GPU) time: self time summed over every execution
    wall_us: float              # wall time: the union of its executions' self time
    share: float                # wall share of the step (wall_us / step), never above 1
    largest: str                # node name of its longest single execution
    largest_us: float
    collective: bool = False    # an all-reduce or other collective (communication)
    wait: bool = False          # the step waiting for input (its time is waiting, not CPU)
    copy: bool = False          # a GPU copy or memset (not a kernel)


@dataclasses.dataclass
class DeviceBusy:
    """One GPU in the explained step: how busy its kernels kept it (copies apart)."""

    device: str                 # host prefix (several hosts) and gpu:N
    recorded: bool              # any of its rows recorded an event
    kernels: int                # kernels in its window
    busy_share: float           # compute kernels' union over its window (copies and
                                # collectives apart)
    copy_share: float           # copies' union over its window
    collective_share: float     # collective kernels' (NCCL all-reduce...) union over it
    window_us: float            # its own step row's length, or the explained step's
    own_window: bool            # its window is its own step row (per-GPU step rows)


@dataclasses.dataclass
class AllocatorPeak:
    allocator: str              # its series' name ("" when it has none)
    peak_bytes: float
    peak_at_us: float           # from the start of the trace
    step_peak_bytes: float      # peak within the chosen step (0 if no sample there)


@dataclasses.dataclass
class Legend:
    format: str
    #: a timeline's device names: "full" (/device:CPU:0, TF 1.3 on and TF2) or "short"
    #: (/cpu:0, early TF 1.x); "" for other formats
    device_names: str
    tids_are: str               # "lanes" (timeline.py) or "threads"
    gpu: bool                   # the trace shows GPU execution (stream or device rows)
    processes: list[ProcessInfo]
    top_ops: list[OpTime]       # by wall time, TF runtime events left out (see runtime_us)
    runtime_us: float           # self time of TF runtime events (executor, thread pools)
    memory: list[AllocatorPeak]
    devices: list[DeviceBusy] = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict`` without its deep copies (a trace may have 200,000 rows)."""
        out: dict[str, Any] = _plain(self)
        return out


def _plain(obj: Any) -> Any:
    """A dataclass (and the dataclasses and lists in it) as dicts and lists; other values as
    they are (they are numbers and strings here)."""
    names = _FIELDS.get(type(obj))
    if names is None and dataclasses.is_dataclass(obj):
        names = _FIELDS[type(obj)] = tuple(f.name for f in dataclasses.fields(obj))
    if names is not None:
        return {n: _plain(getattr(obj, n)) for n in names}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


_FIELDS: dict[type, tuple[str, ...]] = {}


# --------------------------------------------------------------------------------------------
# rows

def device_names(trace: Trace) -> str:
    """How a timeline names its devices: "full" or "short" (see :class:`Legend`)."""
    if trace.format != "timeline":
        return ""
    names = " ".join(p.name for p in trace.processes.values())
    return "full" if "/device:" in names else "short"


def _copies_only(trace: Trace, idx: np.ndarray) -> bool:
    names = trace.strings.names
    return len(idx) > 0 and all(rows.is_copy(names[n]) for n in np.unique(trace.events.name[idx]))


def _process(trace: Trace, pid: int, role: str, roles: dict[int, str], idx: np.ndarray,
             streamed: set[str]) -> dict[str, Any]:
    """What the legend's words need of process ``pid`` beyond its role (see
    :class:`ProcessInfo`); ``streamed``: the GPUs that have stream rows."""
    p = trace.processes[pid]
    dev = rows.device_of(p.name)
    gpu = rows.gpu_of(p.name)
    num = STREAM.search(p.name) if role == "gpu_stream" else None
    return {"device": dev, "gpu": gpu, "has_streams": (gpu or "") in streamed,
            "counters": role == "allocator" and bool((trace.counters.pid == pid).any()),
            "tracer_row": "/stream:" in dev or "/memcpy" in dev,
            "stream": (num.group(1) if num else "?") if role == "gpu_stream" else "",
            "copies_only": role == "gpu_stream" and _copies_only(trace, idx)}


def gpus_with_streams(trace: Trace, roles: dict[int, str]) -> set[str]:
    """The GPUs (as :func:`rows.gpu_of` names them) that have CUDA stream rows."""
    return {rows.gpu_of(trace.processes[q].name) or "" for q, r in roles.items()
            if r in ("gpu_stream", "gpu_stream_all")}


def _lane(trace: Trace, pid: int, tid: int, role: str) -> dict[str, Any]:
    """What the legend's words need of a lane beyond its role (see :class:`LaneInfo`)."""
    name = rows.thread_base(trace.lanes.get((pid, tid), ""))
    return {"thread": name,
            "get_next": role == "tf_data" and name.startswith(TFDATA_GET_NEXT_THREADS)}


def _one_main_thread(lanes: list[LaneInfo], rows_of: "_Rows", pid: int) -> None:
    """Several threads named like Python's main one: the one with the most events is it; the
    others are said to be other Python threads (one may have recorded nothing at all)."""
    python = [ln for ln in lanes if ln.role == "python"]
    if len(python) < 2:
        return
    main = max(python, key=lambda ln: (ln.events, rows_of.total(pid, ln.tid), -ln.tid))
    for ln in python:
        if ln is not main:
            ln.main_tid, ln.trace_events = main.tid, rows_of.total(pid, ln.tid)


def lane_label(trace: Trace, pid: int, tid: int) -> str:
    if trace.format == "timeline":
        return f"lane {tid}"
    name = trace.lanes.get((pid, tid))
    return f"{rows.thread_base(name)} (tid {tid})" if name else f"tid {tid}"


# --------------------------------------------------------------------------------------------
# numbers

def _memory(trace: Trace, choice: StepChoice, roles: dict[int, str]) -> list[AllocatorPeak]:
    c = trace.counters
    if not len(c.ts):
        return []
    alloc_pids = [p for p, r in roles.items() if r == "allocator"]
    sel = np.isin(c.pid, alloc_pids) if alloc_pids else np.ones(len(c.ts), dtype=bool)
    t0 = float(trace.events.ts.min()) if len(trace.events) else float(c.ts.min())
    out = []
    picked = np.flatnonzero(sel)
    for sid, at in lane_groups(c.name[picked]):
        m = picked[at]
        vals, ts = c.value[m], c.ts[m]
        k = int(np.argmax(vals))
        if vals[k] <= 0:
            continue
        in_step = (ts >= choice.lo) & (ts <= choice.hi)
        out.append(AllocatorPeak(trace.s(int(sid)), float(vals[k]),
                                 float(ts[k] - t0),
                                 float(vals[in_step].max()) if in_step.any() else 0.0))
    out.sort(key=lambda a: -a.peak_bytes)
    return out


def top_ops(trace: Trace, sel: np.ndarray, gpu: np.ndarray, choice: StepChoice,
            limit: int = 10) -> tuple[list[OpTime], float]:
    """Ops by wall time among the events ``sel`` (a GPU kernel counts for its TF op), each with
    its summed self time (CPU or GPU time: it passes the step when executions overlap); and
    the self time of TF runtime events (ExecutorState::Process and the like: bookkeeping and
    waits around ops), which are left out of the list."""
    if not len(sel):
        return [], 0.0
    ev = trace.events
    wall = choice.step.dur
    selft = window_self(trace, choice.lo, choice.hi)[sel]
    # what a thread does while it waits for input (tf.data's iterator frames, runtime events
    # around the wait) is that wait: it counts for the input op it is nested in
    root = wait_roots(trace)[sel]
    fold = (root >= 0) & (ev.op_type[sel] == 0)
    runtime = (ev.category[sel] == CAT["runtime"]) & ~fold
    runtime_us = float(selft[runtime].sum())
    sel, selft, root, fold = sel[~runtime], selft[~runtime], root[~runtime], fold[~runtime]
    if not len(sel):
        return [], runtime_us
    of = np.where(fold, root, sel)
    label = np.where(ev.op_type[of] != 0, ev.op_type[of], ev.name[of]).astype(np.int64)
    key = label * 4 + _where(trace, sel, gpu)
    uniq, inv = np.unique(key, return_inverse=True)
    totals = np.bincount(inv, weights=selft)
    walls = _wall_by_group(trace, sel, inv, len(uniq), choice)
    names = trace.strings.names
    launched_by = kernel_launches(trace)
    out = []
    for g in np.lexsort((-totals, -walls))[:limit]:
        members = np.flatnonzero(inv == g)
        big = members[int(np.argmax(selft[members]))]
        i = of[big]
        largest = names[ev.tf_name[i]] or names[ev.name[i]]
        module = names[ev.hlo_module[i]]
        if module:
            mod = trace.hlo.get(module)
            largest += f" (XLA kernel of {mod.cluster if mod else module})"
        elif int(i) in launched_by:
            launch = launched_by[int(i)]
            largest += (f" (XLA kernel of "
                         f"{cluster_of(names[ev.tf_name[launch]], names[ev.name[launch]])})")
        op = names[int(uniq[g]) // 4]
        out.append(OpTime(op=op, where=WHERE[int(uniq[g]) % 4],
                          category=CATEGORIES[ev.category[i]],
                          count=int(len(np.unique(of[members]))),
                          self_us=float(totals[g]), wall_us=float(walls[g]),
                          share=min(1.0, float(walls[g] / wall)) if wall else 0.0,
                          largest=largest, largest_us=float(selft[big]),
                          collective=is_collective(op, names[ev.name[i]]),
                          wait=is_input_op(op, op), copy=is_copy(op)))
    return out, runtime_us


class _Rows:
    """The step's events by process and by lane, with each one's busy time (union of its
    busy events in ``[lo, hi]``), all measured at once (:func:`intervals.union_per_group`)."""

    def __init__(self, trace: Trace, step_idx: np.ndarray, busy_ev: np.ndarray, lo: float,
                 hi: float) -> None:
        ev = trace.events
        self._by_pid = {pid: step_idx[at] for pid, at in lane_groups(ev.pid[step_idx])}
        pairs, _, per_lane = unique_pairs(ev.pid, ev.tid)
        self._all = {(p, t): n for (p, t), n in zip(pairs.tolist(), per_lane.tolist())}
        self._tids: dict[int, set[int]] = {}
        for pid, tid in [*map(tuple, pairs.tolist()), *trace.lanes]:
            self._tids.setdefault(pid, set()).add(tid)
        # one group per (pid, tid) lane and one per pid among the step's busy events
        work = step_idx[busy_ev[step_idx]]
        lane_keys, lane_inv, _ = unique_pairs(ev.pid[work], ev.tid[work])
        self._lane_at = {(p, t): k for k, (p, t) in enumerate(lane_keys.tolist())}
        pids, pid_inv = np.unique(ev.pid[work], return_inverse=True)
        self._pid_at = {int(p): k for k, p in enumerate(pids)}
        ends = ev.ts[work] + ev.dur[work]
        self._lane_busy = intervals.union_per_group(np.asarray(lane_inv).reshape(-1), ev.ts[work],
                                                    ends, lo, hi, len(self._lane_at))
        self._pid_busy = intervals.union_per_group(pid_inv.reshape(-1), ev.ts[work], ends, lo,
                                                   hi, len(pids))
        counts = unique_pairs(ev.pid[step_idx], ev.tid[step_idx])
        self._lane_n = {(p, t): n for (p, t), n in zip(counts[0].tolist(), counts[2].tolist())}

    def events(self, pid: int) -> np.ndarray:
        return np.asarray(self._by_pid.get(pid, np.zeros(0, np.int64)))

    def tids(self, pid: int) -> list[int]:
        return sorted(self._tids.get(pid, ()))

    def total(self, pid: int, tid: int) -> int:
        """Events of one lane in the whole trace."""
        return int(self._all.get((pid, tid), 0))

    def lane(self, pid: int, tid: int) -> tuple[int, float]:
        """(events in the step, busy µs) of one lane."""
        k = self._lane_at.get((pid, tid))
        return self._lane_n.get((pid, tid), 0), float(self._lane_busy[k]) if k is not None else 0.0

    def process_busy(self, pid: int) -> float:
        k = self._pid_at.get(pid)
        return float(self._pid_busy[k]) if k is not None else 0.0




def _where(trace: Trace, sel: np.ndarray, gpu: np.ndarray) -> np.ndarray:
    launch = [p for p in trace.processes if rows.process_role(trace, p) == "gpu_launch"]
    out = gpu[sel].astype(np.int64)
    out[np.isin(trace.events.pid[sel], launch) & (out == 0)] = 2
    return np.asarray(out)


def _wall_by_group(trace: Trace, sel: np.ndarray, inv: np.ndarray, groups: int,
                   choice: StepChoice) -> np.ndarray:
    """Per group of ``sel`` (``inv``): the wall time its events' self time covers in the step
    (the union of their innermost-event segments, so overlapping executions count once)."""
    seg_e, t0, t1 = segments(trace)
    group_of = np.full(len(trace.events), -1, np.int64)
    group_of[sel] = inv
    g = group_of[seg_e]
    keep = (g >= 0) & (t1 > choice.lo) & (t0 < choice.hi)
    g, a, b = g[keep], np.maximum(t0[keep], choice.lo), np.minimum(t1[keep], choice.hi)
    out = np.zeros(groups)
    if not len(g):
        return out
    # every group's union at once (a trace may have 200,000 distinct ops)
    return intervals.union_per_group(g, a, b, choice.lo, choice.hi, groups)


def devices(trace: Trace, choice: StepChoice, roles: dict[int, str]) -> list[DeviceBusy]:
    """Each GPU's busy share in the step: its kernels' union over its window (its own step
    row's when each GPU has step rows of its own, else the explained step's)."""
    ev, names = trace.events, trace.strings.names
    per_device = trace.meta.get("per_device_steps", {})
    groups: dict[str, list[int]] = {}
    for pid, role in roles.items():
        gpu = rows.gpu_of(trace.processes[pid].name)
        if gpu and role in ("gpu_stream_all", "gpu_stream", "gpu_memcpy", "gpu_device"):
            host = trace.processes[pid].name.split(": ", 1)[0] + ": " \
                if ": /" in trace.processes[pid].name else ""
            groups.setdefault(host + gpu, []).append(pid)
    out = []
    busy = rows.busy_mask(trace)
    # each process's events, found once (not a pass over the trace per device)
    by_pid = dict(lane_groups(ev.pid)) if groups else {}
    none = np.zeros(0, np.int64)
    for dev, pids in groups.items():
        streams_all = [p for p in pids if roles[p] == "gpu_stream_all"]
        kernel_pids = streams_all or [p for p in pids if roles[p] != "gpu_memcpy"]
        lo, hi, own = choice.lo, choice.hi, False
        mine = [s for p in pids for s in per_device.get(p, ())]
        if mine:
            st = next((s for s in mine if s.num == choice.step.num), mine[0])
            lo, hi, own = st.ts, st.ts + st.dur, True
        k = np.sort(np.concatenate([by_pid.get(p, none) for p in pids]))
        k = k[busy[k] & (ev.ts[k] < hi) & (ev.ts[k] + ev.dur[k] > lo)]
        copy = np.array([rows.is_copy(names[ev.name[i]]) for i in k], bool)
        coll = rows.collective_mask(trace, k)
        on_kernel_rows = np.isin(ev.pid[k], kernel_pids)
        kern, cm, cp = k[~copy & ~coll & on_kernel_rows], k[coll & on_kernel_rows], k[copy]

        def share(x: np.ndarray) -> float:
            return intervals.union_us(ev.ts[x], ev.end[x], lo, hi) / (hi - lo) if hi > lo else 0.0

        out.append(DeviceBusy(dev, any(p in by_pid for p in pids), int(len(kern)),
                              share(kern), share(cp), share(cm), hi - lo, own))
    return out


def describe(trace: Trace, choice: StepChoice, top: int = 10) -> Legend:
    """The legend of ``trace`` with busy shares and top ops for the chosen step."""
    ev = trace.events
    roles = rows.process_roles(trace)
    busy_ev = rows.busy_mask(trace)
    work = rows.work_mask(trace, roles)
    in_step = choice.in_step(trace)
    lo, hi, wall = choice.lo, choice.hi, choice.step.dur
    step_idx = np.flatnonzero(in_step)
    rows_of = _Rows(trace, step_idx, busy_ev, lo, hi)
    streamed = gpus_with_streams(trace, roles)
    recorded = set(np.unique(ev.pid).tolist()) | set(np.unique(trace.counters.pid).tolist()) \
        | {p for p, n in trace.objects.items() if n}
    procs = []
    for pid in sorted(trace.processes, key=lambda p: (trace.processes[p].sort_index or 0, p)):
        p = trace.processes[pid]
        role = roles[pid]
        mine = rows_of.events(pid)
        lanes, lane_sum = [], 0.0
        for tid in rows_of.tids(pid):
            n_events, busy = rows_of.lane(pid, tid)
            lrole = rows.lane_role(trace, pid, tid)
            lane_sum += busy
            lanes.append(LaneInfo(tid, lane_label(trace, pid, tid), lrole, n_events, busy,
                                  busy / wall if wall else 0.0, **_lane(trace, pid, tid, lrole)))
        _one_main_thread(lanes, rows_of, pid)
        busy = rows_of.process_busy(pid)
        procs.append(ProcessInfo(
            pid, p.name, p.kind, role, int(len(mine)), pid in recorded, busy,
            busy / wall if wall else 0.0, lane_sum / busy if busy else 0.0,
            int(trace.objects.get(pid, 0)), lanes,
            **_process(trace, pid, role, roles, mine, streamed)))
    gpu = rows.on_gpu(trace, roles)
    work_idx = step_idx[work[step_idx]]
    tops, runtime_us = top_ops(trace, work_idx, gpu, choice, top)
    return Legend(
        format=trace.format, device_names=device_names(trace),
        tids_are="lanes" if trace.format == "timeline" else "threads", gpu=bool(gpu.any()), processes=procs, top_ops=tops,
        runtime_us=runtime_us, memory=_memory(trace, choice, roles),
        devices=devices(trace, choice, roles))
