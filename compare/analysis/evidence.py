"""Measurements behind the verdict's first-run, launch, communication and no-data findings
(:mod:`compare.analysis.verdict` judges them): what a step's events show of one-time work,
of a host busy launching many small kernels, of collectives the step waits on, and of rows
that recorded nothing. Every share here is a wall-time share of the step (a union of
intervals over its window), never above 1.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from compare.analysis import rows
from compare.analysis.legend import Legend
from compare.analysis.steps import StepChoice
from compare.model import intervals
from compare.model.events import CAT, Trace
from compare.model.lanes import groups, in_lanes
from compare.vocabulary import ops as tfops
from compare.vocabulary.groups import FEED_NODE
from compare.vocabulary.thresholds import (
    AUTOTUNE_KERNELS,
    FIRST_STEP_FACTOR,
    LAUNCH_SETUP_FACTOR,
    LAUNCH_SETUP_MIN_US,
    OUTLIER_FACTOR,
    OUTLIER_MIN_US,
    SOURCE_GPU_SETUP_US,
    SOURCE_MIN_US,
)


@dataclasses.dataclass
class OneTime:
    """Signs of one-time work in the explained step (times in µs)."""

    first_step: bool = False          # the trace's first step (or its only one)
    only_step: bool = False
    steps: int = 0
    first_over_rest: float = 0.0      # first step / median of the later ones (3+ steps)
    autotune_node: str = ""           # the op execution that launched the most kernels
    autotune_kernels: int = 0
    autotune_nodes: int = 0           # executions that launched AUTOTUNE_KERNELS or more
    kernels: int = 0                  # GPU kernels in the step
    kernel_ops: int = 0               # op executions that launched them
    autotune_share: float = 0.0       # wall share of the autotuning executions
    outlier_node: str = ""            # one call far longer than the others of its type
    outlier_op: str = ""
    outlier_us: float = 0.0
    outlier_others_us: float = 0.0    # median of the other calls of that type
    outlier_share: float = 0.0
    source_us: float = 0.0            # a long _SOURCE on a GPU (the device set up in this run)
    source_share: float = 0.0
    #: GPU ops whose launch took far longer than their kernels: (node, launch µs, kernels µs)
    launch_setup: list[tuple[str, float, float]] = dataclasses.field(default_factory=list)
    launch_setup_share: float = 0.0
    iterators: list[str] = dataclasses.field(default_factory=list)  # created in this step
    #: (start, end) of each piece of one-time work above, to judge the rest of the step
    spans: list[tuple[float, float]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class RunStart:
    """A session run's ``_SOURCE`` node that took long without setting up a GPU: the
    executor starting the run (scheduling its first ops), a cost every run pays."""

    us: float = 0.0
    share: float = 0.0
    row: str = ""


@dataclasses.dataclass
class Launch:
    """How busy the host was launching GPU work, and how small the kernels were."""

    row: str = ""                     # the launch row (TF1) or HOST_LAUNCH_THREADS
    busy_share: float = 0.0
    host_ops: int = 0                 # op executions on the launch rows
    host_ops_short: int = 0           # of which under LAUNCH_SHORT_US
    kernels: int = 0
    kernel_median_us: float = 0.0


@dataclasses.dataclass
class Copies:
    """Copies (host to device, device to host, ...) in the step: they are not kernels."""

    count: int = 0
    by_direction: dict[str, int] = dataclasses.field(default_factory=dict)
    share: float = 0.0                # wall share of the copies
    exposed_share: float = 0.0        # of it, time when the GPU ran no kernel beside them
    summed_us: float = 0.0
    largest: str = ""                 # the tensor it copied (a timeline names it), else its name
    largest_us: float = 0.0
    largest_direction: str = ""
    largest_source: str = ""          # "input" (a fed or iterator batch), "host" (made on the
                                      # host in this step), "" (the trace does not say)
    host_us: float = 0.0              # the host's own copy calls (staging pageable memory)


@dataclasses.dataclass
class Communication:
    ops: list[str] = dataclasses.field(default_factory=list)   # collective op types
    count: int = 0
    share: float = 0.0                # wall share of the collectives
    exposed_share: float = 0.0        # of it, time when the device computed nothing else
    summed_us: float = 0.0            # their summed time (overlapping boxes add up)


def step_events(trace: Trace, choice: StepChoice) -> np.ndarray:
    return np.flatnonzero(choice.in_step(trace) & rows.work_mask(trace))


def kernel_mask(trace: Trace, roles: dict[int, str]) -> np.ndarray:
    """GPU kernels, each once (``stream:all`` when a GPU has it), copies left out."""
    ev, names = trace.events, trace.strings.names
    gpus_all = {rows.gpu_of(trace.processes[p].name) for p, r in roles.items()
                if r == "gpu_stream_all"}
    pids = [p for p, r in roles.items() if r in ("gpu_stream_all", "gpu_device") or
            r == "gpu_stream" and rows.gpu_of(trace.processes[p].name) not in gpus_all]
    m = np.isin(ev.pid, pids) & rows.busy_mask(trace)
    copy_ids = [i for i in np.unique(ev.name[m]) if rows.is_copy(names[i])]
    return np.asarray(m & ~np.isin(ev.name, copy_ids))


def step_kernels(trace: Trace, choice: StepChoice, roles: dict[int, str]) -> np.ndarray:
    """The step's GPU kernels, each once (see :func:`kernel_mask`)."""
    return np.flatnonzero(choice.in_step(trace) & kernel_mask(trace, roles))


def _union(trace: Trace, k: np.ndarray, choice: StepChoice) -> float:
    ev = trace.events
    return intervals.union_us(ev.ts[k], ev.end[k], choice.lo, choice.hi)


# --------------------------------------------------------------------------------------------
# one-time work

def one_time(trace: Trace, choice: StepChoice, idx: np.ndarray,
             roles: dict[int, str]) -> OneTime:
    ev, names = trace.events, trace.strings.names
    wall = choice.step.dur or 1.0
    steps = sorted(trace.steps, key=lambda s: s.ts)
    out = OneTime(steps=len(steps), only_step=len(steps) == 1,
                  first_step=bool(steps) and steps[0].num == choice.step.num)
    durs = [s.dur for s in steps]
    if len(durs) >= 3:
        out.first_over_rest = durs[0] / (float(np.median(durs[1:])) or 1.0)
    kern = step_kernels(trace, choice, roles)
    host = idx[~rows.on_gpu(trace, roles)[idx] & (ev.op_type[idx] != 0)]
    _autotune(trace, choice, out, kern, host)
    _outlier(trace, out, host, wall)
    _launch_setup(trace, choice, out, kern, idx, roles)
    s = _sources(trace, host, roles, gpu=True)
    s = s[ev.dur[s] >= SOURCE_GPU_SETUP_US]
    if len(s):
        out.source_us = float(ev.dur[s].max())
        out.source_share = min(1.0, _union(trace, s, choice) / wall)
        out.spans += [(float(ev.ts[i]), float(ev.end[i])) for i in s]
    out.iterators = sorted({names[ev.op_type[i]] for i in host
                            if names[ev.op_type[i]] in tfops.ITERATOR_CREATION_OPS})
    return out


def _sources(trace: Trace, host: np.ndarray, roles: dict[int, str], gpu: bool) -> np.ndarray:
    """The ``_SOURCE`` executions among ``host``: on a GPU's launch row (``gpu``), or not."""
    ev = trace.events
    src = trace.strings.lookup(tfops.SOURCE_NODE)
    if src is None:
        return host[:0]
    s = host[ev.tf_name[host] == src]
    on_gpu = np.array([roles.get(int(p)) == "gpu_launch" for p in ev.pid[s]], bool)
    return np.asarray(s[on_gpu == gpu])


def run_start(trace: Trace, choice: StepChoice, idx: np.ndarray,
              roles: dict[int, str]) -> RunStart:
    """The longest ``_SOURCE`` of the step that is not a GPU being set up (see
    :class:`RunStart`), if it took :data:`SOURCE_MIN_US` or more."""
    ev = trace.events
    host = idx[~rows.on_gpu(trace, roles)[idx] & (ev.op_type[idx] != 0)]
    s = np.concatenate([_sources(trace, host, roles, gpu=False),
                        [i for i in _sources(trace, host, roles, gpu=True)
                         if ev.dur[i] < SOURCE_GPU_SETUP_US]]).astype(np.int64)
    s = s[ev.dur[s] >= SOURCE_MIN_US]
    if not len(s):
        return RunStart()
    j = int(s[np.argmax(ev.dur[s])])
    return RunStart(float(ev.dur[j]), min(1.0, _union(trace, s, choice) / (choice.step.dur or 1.0)),
                    rows.device_of(trace.processes[int(ev.pid[j])].name))


def _autotune(trace: Trace, choice: StepChoice, out: OneTime, kern: np.ndarray,
              host: np.ndarray) -> None:
    """Kernels per op execution: cuDNN/cuBLAS autotuning launches hundreds for one call."""
    ev = trace.events
    named = kern[ev.tf_name[kern] != 0]
    out.kernels = int(len(kern))
    if not len(named):
        return
    nodes, per_node = np.unique(ev.tf_name[named], return_counts=True)
    # executions of each node on the host rows (one count, not a pass over them per node)
    host_nodes, host_runs = np.unique(ev.tf_name[host], return_counts=True)
    at = np.minimum(np.searchsorted(host_nodes, nodes), max(len(host_nodes) - 1, 0))
    found = (host_nodes[at] == nodes) if len(host_nodes) else np.zeros(len(nodes), bool)
    execs = np.maximum(np.where(found, host_runs[at] if len(host_runs) else 0, 0), 1)
    per_exec = per_node / execs
    out.kernel_ops = int(execs.sum())
    top = int(np.argmax(per_exec))
    out.autotune_node = trace.s(int(nodes[top]))
    out.autotune_kernels = int(per_node[top])
    tuned = nodes[per_exec >= AUTOTUNE_KERNELS]
    out.autotune_nodes = int(len(tuned))
    if len(tuned):
        on_host = host[np.isin(ev.tf_name[host], tuned)]
        k = on_host if len(on_host) else named[np.isin(ev.tf_name[named], tuned)]
        out.autotune_share = min(1.0, _union(trace, k, choice) / (choice.step.dur or 1.0))
        out.spans += [(float(ev.ts[i]), float(ev.end[i])) for i in k]


def _launch_setup(trace: Trace, choice: StepChoice, out: OneTime, kern: np.ndarray,
                  idx: np.ndarray, roles: dict[int, str]) -> None:
    """GPU ops launched on the host for far longer than their kernels ran, the GPU idle
    meanwhile (a first call setting up CUDA, cuBLAS or cuDNN: a later launch takes
    microseconds; one blocked behind a full queue of kernels overlaps them)."""
    ev, names = trace.events, trace.strings.names
    launch_rows = [p for p, r in roles.items() if r == "gpu_launch"]
    launches = idx[np.isin(ev.pid[idx], launch_rows) & (ev.op_type[idx] != 0)]
    if trace.format != "timeline":        # a profile: the host calls named after kernels
        from compare.analysis.kernels import kernel_ops  # lazy: an import loop otherwise
        launches = idx[kernel_ops(trace).launches[idx]]
    inside = intervals.clipped(ev.ts[launches], ev.end[launches], choice.lo, choice.hi)
    long = launches[inside >= LAUNCH_SETUP_MIN_US]
    if not len(long):
        return
    # each op's kernels in the step: by node (a timeline's launch row names the node), by
    # kernel name (a profile's host launch is named after its kernel)
    timeline = trace.format == "timeline"
    def key(j: int) -> int:
        return int(ev.tf_name[j]) or int(ev.name[j]) if timeline else int(ev.name[j])

    device: dict[int, float] = {}
    for k in kern.tolist():
        device[key(k)] = device.get(key(k), 0.0) + float(ev.dur[k])
    gpu_work = idx[rows.on_gpu(trace, roles)[idx]]     # kernels and copies
    hit = []
    for i in long.tolist():
        node = key(i)
        lo, hi = max(float(ev.ts[i]), choice.lo), min(float(ev.end[i]), choice.hi)
        launch = hi - lo
        kernels = device.get(node, 0.0)
        # the GPU idle meanwhile: a launch blocked behind a full queue (kernels, a copy on its
        # stream) is not set-up
        busy = intervals.union_us(ev.ts[gpu_work], ev.end[gpu_work], lo, hi) \
            if len(gpu_work) else 0.0
        if launch >= LAUNCH_SETUP_FACTOR * kernels and busy <= launch / LAUNCH_SETUP_FACTOR:
            hit.append(i)
            out.launch_setup.append((names[node], launch, kernels))
    if hit:
        k = np.array(hit, np.int64)
        out.launch_setup.sort(key=lambda x: -x[1])
        out.launch_setup_share = min(1.0, _union(trace, k, choice) / (choice.step.dur or 1.0))
        out.spans += [(float(ev.ts[i]), float(ev.end[i])) for i in hit]


def _outlier(trace: Trace, out: OneTime, host: np.ndarray, wall: float) -> None:
    """One call of an op type far longer than its other calls (a first call's set-up)."""
    ev = trace.events
    plumbing = [i for i in np.unique(ev.op_type[host])
                if trace.s(int(i)) in tfops.GRAPH_PLUMBING_OPS or tfops.is_input_op(trace.s(int(i)))]
    h = host[~np.isin(ev.op_type[host], plumbing)]
    best = (0.0, -1, 0.0)
    for _, at in groups(ev.op_type[h]):   # one sort, not a pass over h per op type
        k = h[at]
        if len(k) < 3:
            continue
        j = int(k[np.argmax(ev.dur[k])])
        others = float(np.median(ev.dur[k[k != j]])) or 1.0
        if ev.dur[j] >= OUTLIER_MIN_US and ev.dur[j] / others >= OUTLIER_FACTOR and \
                ev.dur[j] > best[0]:
            best = (float(ev.dur[j]), j, others)
    if best[1] >= 0:
        j = best[1]
        out.outlier_node, out.outlier_op = trace.s(ev.tf_name[j]), trace.s(ev.op_type[j])
        out.outlier_us, out.outlier_others_us = best[0], best[2]
        out.outlier_share = min(1.0, best[0] / (wall or 1.0))
        out.spans.append((float(ev.ts[j]), float(ev.end[j])))


class Rest:
    """The step without some stretches of it (a first run's one-time work): shares of what
    is left. ``share(k)``: the part of the rest the events ``k`` cover."""

    def __init__(self, trace: Trace, choice: StepChoice, spans: list[tuple[float, float]]):
        self.trace, self.lo, self.hi = trace, choice.lo, choice.hi
        self.cut_ts = np.array([a for a, _ in spans], dtype=np.float64)
        self.cut_end = np.array([b for _, b in spans], dtype=np.float64)
        self.cut_us = intervals.union_us(self.cut_ts, self.cut_end, self.lo, self.hi)
        self.wall = choice.step.dur - self.cut_us

    def covered_us(self, k: np.ndarray) -> float:
        ev = self.trace.events
        both = intervals.union_us(np.concatenate([ev.ts[k], self.cut_ts]),
                                  np.concatenate([ev.end[k], self.cut_end]), self.lo, self.hi)
        return max(0.0, both - self.cut_us)

    def share(self, k: np.ndarray) -> float:
        return min(1.0, self.covered_us(k) / self.wall) if self.wall > 0 else 0.0

    def outside(self, k: np.ndarray) -> np.ndarray:
        """The events of ``k`` not wholly inside the stretches cut out."""
        ev = self.trace.events
        if not len(self.cut_ts) or not len(k):
            return k
        order = np.argsort(self.cut_ts)
        a, b = self.cut_ts[order], np.maximum.accumulate(self.cut_end[order])
        at = np.searchsorted(a, ev.ts[k], side="right") - 1
        inside = (at >= 0) & (ev.end[k] <= b[np.maximum(at, 0)])
        return np.asarray(k[~inside])


def one_time_share(o: OneTime, compile_share: float) -> float:
    """The wall share of the step the strongest sign of one-time work accounts for."""
    first = (1.0 - 1.0 / o.first_over_rest) if o.first_over_rest >= FIRST_STEP_FACTOR else 0.0
    return max(o.autotune_share, o.outlier_share, o.source_share, o.launch_setup_share,
               compile_share, first if o.first_step else 0.0)


# --------------------------------------------------------------------------------------------
# launching

#: The launch row of a profile: its threads that run ops and launch their kernels.
HOST_LAUNCH_THREADS = "host_launch_threads"


def launch_events(trace: Trace, choice: StepChoice, legend: Legend) -> tuple[str, np.ndarray]:
    """(the launch rows, their busy events in the step): a timeline's busiest ``<gpu> Compute``
    row, or a profile's threads that run ops and launch their kernels
    (:data:`HOST_LAUNCH_THREADS`)."""
    ev = trace.events
    busy = np.flatnonzero(choice.in_step(trace) & rows.busy_mask(trace))
    if trace.format == "timeline":
        launchers = [p for p in legend.processes if p.role == "gpu_launch" and p.events]
        if not launchers:
            return "", busy[:0]
        p = max(launchers, key=lambda p: p.busy_share)
        return rows.device_of(p.name) + " Compute", busy[ev.pid[busy] == p.pid]
    lanes = [(p.pid, ln.tid) for p in legend.processes for ln in p.lanes
             if ln.role == "inter_op" or ln.name.startswith(tfops.GPU_LAUNCH_THREADS)]
    if not lanes:
        return "", busy[:0]
    return HOST_LAUNCH_THREADS, busy[in_lanes(ev.pid[busy], ev.tid[busy], lanes)]


def launch(trace: Trace, choice: StepChoice, idx: np.ndarray, legend: Legend,
           roles: dict[int, str]) -> Launch:
    ev = trace.events
    out = Launch()
    kern = step_kernels(trace, choice, roles)
    out.kernels = int(len(kern))
    out.kernel_median_us = float(np.median(ev.dur[kern])) if len(kern) else 0.0
    out.row, k = launch_events(trace, choice, legend)
    if not out.row:
        return out
    k = k[~rows.collective_mask(trace, k)]  # its box lasts until the others join: no launch
    out.busy_share = min(1.0, _union(trace, k, choice) / (choice.step.dur or 1.0))
    ops = k[(ev.op_type[k] != 0)]
    out.host_ops = int(len(ops))
    out.host_ops_short = int((ev.dur[ops] < 20.0).sum())
    return out


# --------------------------------------------------------------------------------------------
# copies

def copies(trace: Trace, choice: StepChoice, idx: np.ndarray, roles: dict[int, str]) -> Copies:
    """The step's copies (each once: ``idx`` is the step's work): the GPU's transfers, and the
    host's own copy calls (a pageable batch staged by a host thread, xprof's ``MemcpyH2D``
    inside ``_Send``), and how much of the step they held with no kernel running beside them."""
    ev, names = trace.events, trace.strings.names
    copy_ids = [i for i in np.unique(ev.name[idx]) if rows.is_copy(names[i])]
    every = idx[np.isin(ev.name[idx], copy_ids)]
    gpu = rows.on_gpu(trace, roles)[every]
    dev, host = every[gpu], every[~gpu]
    out = Copies()
    if not len(every):
        return out
    wall = choice.step.dur or 1.0
    hit = dev if len(dev) else host
    inside = intervals.clipped(ev.ts[hit], ev.end[hit], choice.lo, choice.hi)
    # a transfer's host call and its device copy are one copy: the host's time outside it
    host_only = max(0.0, _union(trace, every, choice) - _union(trace, dev, choice)) \
        if len(dev) else 0.0
    out.count, out.summed_us = int(len(hit)), float(inside.sum()) + host_only
    out.host_us = _union(trace, host, choice)
    for i in hit:
        d = tfops.copy_direction(names[ev.name[i]]) or "other"
        out.by_direction[d] = out.by_direction.get(d, 0) + 1
    out.share = min(1.0, _union(trace, every, choice) / wall)
    kern = step_kernels(trace, choice, roles)
    both = np.concatenate([every, kern])
    out.exposed_share = min(1.0, max(0.0, _union(trace, both, choice) -
                                     _union(trace, kern, choice)) / wall)
    j = int(hit[np.argmax(inside)])
    out.largest_us = float(inside.max())
    out.largest_direction = tfops.copy_direction(names[ev.name[j]])
    edge = tfops.COPY_EDGE.match(names[ev.tf_name[j]])
    out.largest = edge.group(1) if edge else names[ev.tf_name[j]] or names[ev.name[j]]
    out.largest_source = _copy_source(trace, idx, roles, out.largest) if edge else ""
    return out


def _copy_source(trace: Trace, idx: np.ndarray, roles: dict[int, str], tensor: str) -> str:
    """Where a copied tensor came from: the input batch (a fed placeholder or an iterator's
    output), made on the host in this step, or "" when the trace does not say."""
    base = tfops.SEND_RECV_SUFFIX.sub("", tensor.split(":")[0])
    if FEED_NODE.match(base) or base.startswith(tfops.INPUT_WAIT_EVENT_SUFFIXES):
        return "input"
    sid = trace.strings.lookup(base)
    if sid is None:
        return ""
    made = idx[(trace.events.tf_name[idx] == sid) & ~rows.on_gpu(trace, roles)[idx]]
    host = [p for p, r in roles.items() if r in ("cpu_ops", "host")]
    return "host" if np.isin(trace.events.pid[made], host).any() else ""


# --------------------------------------------------------------------------------------------
# communication

def communication(trace: Trace, choice: StepChoice, idx: np.ndarray,
                  roles: dict[int, str]) -> Communication:
    ev, names = trace.events, trace.strings.names
    hit = idx[rows.collective_mask(trace, idx)]
    out = Communication()
    if not len(hit):
        return out
    wall = choice.step.dur or 1.0
    out.ops = sorted({names[ev.op_type[i]] or names[ev.name[i]] for i in hit})
    out.count = int(len(hit))
    out.summed_us = float(intervals.clipped(ev.ts[hit], ev.end[hit], choice.lo, choice.hi).sum())
    out.share = min(1.0, _union(trace, hit, choice) / wall)
    rest = np.setdiff1d(idx, hit)
    kern = step_kernels(trace, choice, roles)
    kern = kern[~rows.collective_mask(trace, kern)]
    compute = kern if len(kern) else rest[ev.category[rest] != CAT["runtime"]]
    both = np.concatenate([hit, compute])
    out.exposed_share = min(1.0, max(0.0, _union(trace, both, choice) -
                                     _union(trace, compute, choice)) / wall)
    return out


# --------------------------------------------------------------------------------------------
# rows that recorded nothing

def silent_rows(legend: Legend) -> list[str]:
    """Processes that hold only their names: the profiler recorded no event for them."""
    return [p.name for p in legend.processes if not p.recorded and
            p.role not in ("tensors", "allocator")]


def feeds(trace: Trace, idx: np.ndarray) -> list[str]:
    """TF1 placeholders fed through feed_dict in the step (timeline ``_arg_`` / ``_recv_``)."""
    ev, names = trace.events, trace.strings.names
    # a fed placeholder often shows only as an op's input
    ids = set(np.unique(np.concatenate([ev.tf_name[idx], ev.inputs_of_all(idx)])).tolist())
    return sorted({tfops.SEND_RECV_SUFFIX.sub("", names[n]) for n in ids
                   if FEED_NODE.match(names[n])})[:6]
