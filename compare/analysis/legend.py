"""How to read a trace: every process and lane in words, how busy each was in a step, where
the step's time went by op, and the memory counters' peaks.

This answers the seed's "What is denoted by different pids in the plot?" and the first part of
"How do I interpret this plot?" for any trace the loaders read.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np

from compare.analysis import rows
from compare.analysis.steps import StepChoice
from compare.model import intervals
from compare.model.events import CAT, CATEGORIES, Trace
from compare.vocabulary.rows import MEMCPY_PREFIX


@dataclasses.dataclass
class LaneInfo:
    tid: int
    name: str
    role: str
    meaning: str
    events: int
    busy_us: float
    busy_share: float           # of the step's wall time


@dataclasses.dataclass
class ProcessInfo:
    pid: int
    name: str
    kind: str
    role: str
    meaning: str
    events: int                 # complete events in the step
    busy_us: float              # union of the work of its lanes in the step
    busy_share: float
    parallelism: float          # lanes busy at once on average while busy (sum / union)
    tensors: int                # tensor objects (timeline Tensors rows)
    lanes: list[LaneInfo]


@dataclasses.dataclass
class OpTime:
    op: str
    where: str                  # "host" or "GPU"
    category: str
    count: int
    self_us: float
    share: float                # of the step's wall time
    largest: str                # node name of its longest single execution
    largest_us: float


@dataclasses.dataclass
class AllocatorPeak:
    allocator: str
    peak_bytes: float
    peak_at_us: float           # from the start of the trace
    step_peak_bytes: float      # peak within the chosen step (0 if no sample there)


@dataclasses.dataclass
class Legend:
    format: str
    format_words: str
    tids_are: str               # "lanes" (timeline.py) or "threads"
    tids_words: str
    gpu: bool                   # the trace shows GPU execution (stream or device rows)
    processes: list[ProcessInfo]
    top_ops: list[OpTime]       # by self time, TF runtime events left out (see runtime_us)
    runtime_us: float           # self time of TF runtime events (executor, thread pools)
    memory: list[AllocatorPeak]

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------------------------
# words

def format_words(trace: Trace) -> str:
    if trace.format == "timeline":
        names = " ".join(p.name for p in trace.processes.values())
        era = ("full device names (/device:CPU:0), as TF 1.x from 1.3 on and TF2 write them"
               if "/device:" in names else
               "short device names (/cpu:0, /gpu:0), as early TF 1.x wrote them")
        return ("a timeline.py trace (tensorflow.python.client.timeline): the step stats of "
                "session runs traced with RunOptions(trace_level=FULL_TRACE), with " + era)
    if trace.format == "xprof":
        return ("a TensorBoard profile (the TF profiler's trace, as xprof's trace viewer "
                "shows it): real threads, with events nested inside the ones that called them")
    return "a Chrome trace from another tool (rows and names read as they are)"


def tids_words(trace: Trace) -> tuple[str, str]:
    if trace.format == "timeline":
        return "lanes", (
            "In a timeline.py trace a row's tid is a lane, not a thread: timeline.py puts each "
            "op into the first lane that is free when the op starts (greedy, non-overlapping). "
            "Lane 1 and up only hold ops that overlapped an op in a lower lane, so several "
            "lanes mean ops ran at the same time; which thread ran an op is not recorded.")
    return "threads", ("Here a row's tid is a real thread id; an event drawn inside another "
                       "ran within it (a parent contains what it called).")


def _copies_only(trace: Trace, idx: np.ndarray) -> bool:
    names = trace.strings.names
    return len(idx) > 0 and all(names[n].startswith(MEMCPY_PREFIX) for n in
                                np.unique(trace.events.name[idx]))


def process_meaning(trace: Trace, pid: int, role: str, roles: dict[int, str],
                    idx: np.ndarray) -> str:
    p = trace.processes[pid]
    dev = rows.device_of(p.name)
    gpu = rows.gpu_of(p.name)
    has_streams = any(r in ("gpu_stream", "gpu_stream_all") and
                      rows.gpu_of(trace.processes[q].name) == gpu for q, r in roles.items())
    if role == "allocator":
        return ("memory counters: bytes held by each allocator over time, one series per "
                "allocator (the curve rises when an op's output is allocated and falls after "
                "the tensor's last use)")
    if role == "tensors":
        n = trace.objects.get(pid, 0)
        if not n:
            return ("empty: timeline.py makes a Tensors row for every device, and the GPU "
                    "tracer's rows record no tensors" if "/stream:" in dev or "/memcpy" in dev
                    else "empty: no tensor lifetimes were recorded for this device")
        return (f"tensor lifetimes on {dev}: one object per tensor an op produced, from its "
                f"creation to its last use ({n} tensors; click one in the viewer to see its "
                f"shape and bytes)")
    if role == "cpu_ops":
        return (f"op executions on {dev}: one box per op, from the executor starting it to "
                f"the op finishing; the arrows are tensors flowing from producer to consumer")
    if role == "gpu_launch":
        if has_streams:
            return (f"the host side of {gpu}: one box per op the executor launched onto the "
                    f"GPU. A box is the CPU time to enqueue the op's kernels, not the GPU "
                    f"running them: for that, read the {gpu} stream rows")
        return (f"ops placed on {gpu}, as the host saw them: this trace has no stream rows "
                f"(the GPU tracer was off), so a box is launch and scheduling time, not GPU "
                f"time")
    if role == "gpu_stream_all":
        return (f"what {gpu} actually ran: every GPU kernel of every CUDA stream in one row "
                f"(the per-stream rows repeat these kernels, split by stream)")
    if role == "gpu_stream":
        num = re.search(r"/stream:(\w+)", p.name, re.I)
        s = num.group(1) if num else "?"
        if _copies_only(trace, idx):
            return (f"copies that ran on CUDA stream {s} of {gpu} (a stream runs its work one "
                    f"item after another)")
        return (f"GPU kernels that ran on CUDA stream {s} of {gpu} (a stream runs its "
                f"kernels one after another; this is GPU time, not launch)")
    if role == "gpu_memcpy":
        return (f"copies between host memory and {gpu} memory: MEMCPYHtoD (host to device), "
                f"MEMCPYDtoH (device to host), as the GPU ran them")
    if role == "host":
        return (f"the host CPU ({p.name}): each row below is a real OS thread, named by "
                f"TensorFlow")
    if role == "gpu_device":
        return (f"what {gpu} ran, as the profiler saw it: rows for CUDA streams (kernels and "
                f"copies) and rows derived from them (Steps, XLA Ops, TensorFlow Ops) that "
                f"repeat the same time")
    if role == "device":
        return f"the device {p.name}: rows are its streams or derived views of its work"
    if role == "merged":
        return "a merged view of several traces (made by our compare tool)"
    return f"a process named {p.name!r} (not a TensorFlow row we know; read as it is)"


_LANE_WORDS = {
    "python": ("the Python main thread: it calls session.run (or a tf.function) and waits "
               "inside it for the whole step, so its box spans the step (not counted as work)"),
    "tf_data": ("a tf.data background thread: it produces input elements (read, decode, "
                "map) ahead of the step that will consume them"),
    "inter_op": ("TensorFlow's inter-op pool: runs the graph's ops, one at a time per thread "
                 "(ExecutorState::Process > the op > its XLA kernels)"),
    "eigen": ("Eigen's intra-op pool: helper threads that split the work inside one op "
              "(and pieces of XLA:CPU kernels)"),
    "xla_codegen": "XLA:CPU's code-generation threads: busy only while XLA compiles",
    "reader": "a reader op's own thread (TF1 queue-runner input: reads files)",
    "stream": "kernels and copies on this CUDA stream",
    "derived": "derived from the stream rows (repeats their time; not counted as work)",
}


def lane_meaning(trace: Trace, pid: int, tid: int, role: str) -> str:
    if role == "lane":
        return ("ops that did not overlap an earlier op" if tid == 0 else
                f"ops that started while lane{'s 0..' if tid > 1 else ' '}{tid - 1} "
                f"{'were' if tid > 1 else 'was'} busy")
    if role in _LANE_WORDS:
        return _LANE_WORDS[role]
    name = rows.thread_base(trace.lanes.get((pid, tid), ""))
    if role == "runtime":
        return f"a TensorFlow-internal thread ({name})"
    return f"a thread named {name!r}" if name else "a thread with no name"


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
    for sid in np.unique(c.name[sel]):
        m = sel & (c.name == sid)
        vals, ts = c.value[m], c.ts[m]
        k = int(np.argmax(vals))
        if vals[k] <= 0:
            continue
        in_step = (ts >= choice.lo) & (ts <= choice.hi)
        out.append(AllocatorPeak(trace.s(int(sid)) or "(no allocator name)", float(vals[k]),
                                 float(ts[k] - t0),
                                 float(vals[in_step].max()) if in_step.any() else 0.0))
    out.sort(key=lambda a: -a.peak_bytes)
    return out


def top_ops(trace: Trace, sel: np.ndarray, gpu: np.ndarray, wall: float,
            limit: int = 10) -> tuple[list[OpTime], float]:
    """Ops by self time (duration minus nested children) among the events ``sel``, and the
    self time of TF runtime events (ExecutorState::Process and the like: bookkeeping and
    waits around ops), which are left out of the list."""
    if not len(sel):
        return [], 0.0
    ev = trace.events
    selft = trace.self_time(sel)
    runtime = ev.category[sel] == CAT["runtime"]
    runtime_us = float(selft[runtime].sum())
    sel, selft = sel[~runtime], selft[~runtime]
    if not len(sel):
        return [], runtime_us
    label = np.where(ev.op_type[sel] != 0, ev.op_type[sel], ev.name[sel]).astype(np.int64)
    key = label * 2 + gpu[sel].astype(np.int64)
    uniq, inv = np.unique(key, return_inverse=True)
    totals = np.bincount(inv, weights=selft)
    counts = np.bincount(inv)
    names = trace.strings.names
    out = []
    for g in np.argsort(-totals)[:limit]:
        members = np.flatnonzero(inv == g)
        big = members[int(np.argmax(selft[members]))]
        i = sel[big]
        largest = names[ev.tf_name[i]] or names[ev.name[i]]
        module = names[ev.hlo_module[i]]
        if module:
            mod = trace.hlo.get(module)
            largest += f" (XLA kernel of {mod.cluster if mod else module})"
        out.append(OpTime(op=names[int(uniq[g]) // 2], where="GPU" if uniq[g] % 2 else "host",
                          category=CATEGORIES[ev.category[i]], count=int(counts[g]),
                          self_us=float(totals[g]), share=float(totals[g] / wall) if wall else 0.0,
                          largest=largest, largest_us=float(selft[big])))
    return out, runtime_us


def describe(trace: Trace, choice: StepChoice, top: int = 10) -> Legend:
    """The legend of ``trace`` with busy shares and top ops for the chosen step."""
    ev = trace.events
    roles = rows.process_roles(trace)
    busy_ev = rows.busy_mask(trace)
    work = rows.work_mask(trace, roles)
    in_step = ev.step == choice.step.num
    lo, hi, wall = choice.lo, choice.hi, choice.step.dur
    step_idx = np.flatnonzero(in_step)
    procs = []
    for pid in sorted(trace.processes, key=lambda p: (trace.processes[p].sort_index or 0, p)):
        p = trace.processes[pid]
        role = roles[pid]
        mine = step_idx[ev.pid[step_idx] == pid]
        tids = sorted({int(t) for t in np.unique(ev.tid[ev.pid == pid])} |
                      {t for (q, t) in trace.lanes if q == pid})
        lanes, lane_sum = [], 0.0
        for tid in tids:
            li = mine[ev.tid[mine] == tid]
            lrole = rows.lane_role(trace, pid, tid)
            wi = li[busy_ev[li]]
            busy = intervals.union_us(ev.ts[wi], ev.ts[wi] + ev.dur[wi], lo, hi)
            lane_sum += busy
            lanes.append(LaneInfo(tid, lane_label(trace, pid, tid), lrole,
                                  lane_meaning(trace, pid, tid, lrole), int(len(li)), busy,
                                  busy / wall if wall else 0.0))
        wm = mine[busy_ev[mine]]
        busy = intervals.union_us(ev.ts[wm], ev.ts[wm] + ev.dur[wm], lo, hi)
        procs.append(ProcessInfo(
            pid, p.name, p.kind, role, process_meaning(trace, pid, role, roles, mine),
            int(len(mine)), busy, busy / wall if wall else 0.0,
            lane_sum / busy if busy else 0.0, int(trace.objects.get(pid, 0)), lanes))
    gpu = rows.on_gpu(trace, roles)
    work_idx = step_idx[work[step_idx]]
    fmt_lanes, fmt_words = tids_words(trace)
    tops, runtime_us = top_ops(trace, work_idx, gpu, wall, top)
    return Legend(
        format=trace.format, format_words=format_words(trace), tids_are=fmt_lanes,
        tids_words=fmt_words, gpu=bool(gpu.any()), processes=procs, top_ops=tops,
        runtime_us=runtime_us, memory=_memory(trace, choice, roles))
