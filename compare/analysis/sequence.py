"""The order of operations in one step: a dependency graph of the step's ops, the ops in
dataflow order, and the critical path (the longest chain of dependent work).

This answers the seed's "How do I determine the sequence of operations taking place?".

Where dependencies come from, by trace kind:

- timeline.py traces record each op's inputs (``args.input0..N``, from the executor's
  ``timeline_label``) and draw a flow arrow per tensor that crosses rows. Edges: producer →
  consumer by node name (``name:1`` is output 1 of ``name``, ``^name`` a control input, and a
  ``/_N`` suffix is a Send/Recv TF inserted between devices), ``_Send`` → its ``_Recv``, and
  on GPU rows: the host launch → its kernels, kernel → next kernel on the same CUDA stream (a
  stream runs in order), a producer's last kernel → a consumer's first kernel, a copy
  ``edge_N_<tensor>`` after its producer and before the kernels that use the tensor.
- TensorBoard profiles record no op inputs. The fallback is honest and weaker: consecutive ops
  on one thread (a thread runs one op at a time) plus any flow arrows the trace has.

The dataflow order lists ops by depth (0 = depends on no op of this step, k = its latest
dependency has depth k-1), ties by start time: ops of one depth do not depend on each other.
The critical path uses only edges that are consistent with time (the dependency ended before
the dependent started; a GPU kernel may start while the host op that launched it still runs,
and that launch edge counts with the overlap taken off), weighs each op by its duration inside
the step, and so is never longer than the step's wall time.
"""
from __future__ import annotations

import bisect
import dataclasses
import heapq
import re
from collections import defaultdict
from typing import Any

import numpy as np

from compare.analysis import rows
from compare.analysis.steps import StepChoice
from compare.analysis.xla import kernel_launches
from compare.model.events import CAT, Events, Trace
from compare.model.lanes import keys
from compare.vocabulary.ops import COPY_EDGE, RECV_OPS, SEND_OPS, SEND_RECV_SUFFIX
from compare.vocabulary.rows import MEMCPY_PREFIX

EPS_US = 1e-3
#: Copies x readers of one tensor linked pairwise at most (see :func:`_copy_edges`).
COPY_PAIRS_MAX = 256


@dataclasses.dataclass
class SeqOp:
    index: int                  # event index in the trace
    depth: int
    start_us: float             # from the step's start
    dur_us: float
    op: str
    name: str
    row: str                    # process, and lane or thread
    after: list[str]            # names of the ops it depends on


@dataclasses.dataclass
class Sequence:
    timeline: bool              # a TF1 timeline (executor lanes), else threads of a profile
    flows: int                  # flow arrows that added an edge
    inputs_recorded: bool       # the trace records op inputs (timeline.py); else ops are in
                                # time order (depth is then a position on a thread)
    edge_counts: dict[str, int]
    ops: list[SeqOp]            # dataflow order
    edges: np.ndarray           # (k, 2) event indices: dependency -> dependent
    time_inconsistent: int      # edges whose dependency ended after the dependent started
    critical: list[SeqOp]       # the critical path, in order
    critical_us: float
    wall_us: float

    def as_dict(self, limit: int = 2000) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name not in ("edges", "ops", "critical")}
        d["critical"] = [_op_dict(o) for o in self.critical]
        d["ops"] = [_op_dict(o) for o in self.ops[:limit]]
        d["ops_total"] = len(self.ops)
        d["critical_share"] = self.critical_us / self.wall_us if self.wall_us else 0.0
        return d


def _op_dict(o: SeqOp) -> dict[str, Any]:
    return {"index": o.index, "depth": o.depth, "start_us": o.start_us, "dur_us": o.dur_us,
            "op": o.op, "name": o.name, "row": o.row, "after": list(o.after)}


def _nodes(trace: Trace, choice: StepChoice, work: np.ndarray) -> np.ndarray:
    """The step's ops: its work events; in traces whose events nest, only TF-op-level ones
    (events naming a TF op, tf.data iterator events) and, on rows that have none of those,
    the outermost events."""
    ev = trace.events
    idx = np.flatnonzero(work & choice.in_step(trace))
    if trace.format == "timeline" or not len(idx):
        return idx
    tf_data = CAT["tf_data"]
    # a lane with one event keeps it: only lanes of several are walked one by one
    (lane_key,) = keys(ev.pid[idx], ev.tid[idx])
    _, inv, counts = np.unique(lane_key, return_inverse=True, return_counts=True)
    alone = counts[inv.reshape(-1)] == 1
    keep = [idx[alone]]
    for _, _, lane in trace.iter_lanes(idx[~alone]):
        op_level = lane[(ev.op_type[lane] != 0) | (ev.category[lane] == tf_data)]
        cand = op_level if len(op_level) else lane
        keep.append(_outermost(ev.ts[cand], ev.ts[cand] + ev.dur[cand], cand))
    return np.sort(np.concatenate(keep)) if keep else idx[:0]


def _outermost(ts: np.ndarray, end: np.ndarray, idx: np.ndarray) -> np.ndarray:
    order = np.lexsort((-(end - ts), ts))
    out, reach = [], -np.inf
    for j in order:
        if ts[j] >= reach - EPS_US:
            out.append(idx[j])
        reach = max(reach, end[j])
    return np.array(out, dtype=np.int64)


class _Graph:
    def __init__(self) -> None:
        self.edges: dict[tuple[int, int], str] = {}

    def add(self, u: int, v: int, kind: str) -> None:
        if u != v and (u, v) not in self.edges:
            self.edges[(u, v)] = kind


class _Timeline:
    """A timeline step's nodes by kind, and which event produced a node name by a time."""

    def __init__(self, trace: Trace, nodes: np.ndarray, roles: dict[int, str]) -> None:
        ev, names = trace.events, trace.strings.names
        self.trace, self.ev, self.names = trace, ev, names
        self.role = {int(i): roles[int(ev.pid[i])] for i in nodes}
        self.host = [int(i) for i in nodes if self.role[int(i)] in ("cpu_ops", "gpu_launch",
                                                                    "other")]
        self.kernels = [int(i) for i in nodes if self.role[int(i)] in ("gpu_stream",
                                                                       "gpu_stream_all")]
        self.copies = [int(i) for i in nodes if names[ev.name[i]].startswith(MEMCPY_PREFIX)]
        self.by_name: dict[str, list[int]] = defaultdict(list)
        self.starts: dict[str, list[float]] = defaultdict(list)   # by_name's start times
        for i in sorted(self.host, key=lambda i: ev.ts[i]):
            self.by_name[names[ev.tf_name[i]]].append(i)
            self.starts[names[ev.tf_name[i]]].append(float(ev.ts[i]))
        self.kernels_of: dict[int, list[int]] = defaultdict(list)
        # Sends by the base name they share with their Recv, latest first on a tie of start
        self.sends: dict[str, list[tuple[float, int]]] = defaultdict(list)
        for pos, u in enumerate(self.host):
            if names[ev.op_type[u]] in SEND_OPS:
                base = SEND_RECV_SUFFIX.sub("", names[ev.tf_name[u]])
                self.sends[base].append((float(ev.ts[u]), -pos))
        for v in self.sends.values():
            v.sort()

    def producer(self, name: str, before: float, exclude: int) -> int | None:
        """The last host op named ``name`` (or its Send/Recv base) that started by ``before``
        (a binary search: a node may run thousands of times in a step)."""
        for candidate in (name, SEND_RECV_SUFFIX.sub("", name)):
            us = self.by_name.get(candidate)
            if not us:
                continue
            k = bisect.bisect_right(self.starts[candidate], before)
            best = us[k - 1] if k and us[k - 1] != exclude else us[k - 2] if k > 1 else None
            if best is not None:
                return best
        return None

    def send_for(self, base: str, before: float) -> int | None:
        """The Send of ``base`` that started last by ``before`` (the first of a tie)."""
        sends = self.sends.get(base)
        if not sends:
            return None
        k = bisect.bisect_right(sends, (before, 1))
        return self.host[-sends[k - 1][1]] if k else None


def _timeline_edges(trace: Trace, nodes: np.ndarray, g: _Graph, roles: dict[int, str]) -> None:
    t = _Timeline(trace, nodes, roles)
    _launch_edges(t, g)
    _input_edges(t, g)
    _copy_edges(t, g)
    by_stream: dict[int, list[int]] = defaultdict(list)
    for k in t.kernels:
        if t.role[k] == "gpu_stream":
            by_stream[int(t.ev.pid[k])].append(k)
    for ks in by_stream.values():
        ks.sort(key=lambda i: t.ev.ts[i])
        for a, b in zip(ks, ks[1:]):
            g.add(a, b, "stream order")


def _launch_edges(t: _Timeline, g: _Graph) -> None:
    """Each GPU kernel after the host op that launched it (the tracer names it alike; TF 1.x's
    XLA:GPU kernels, named by their HLO, after the launch op that enqueued them)."""
    ev, names = t.ev, t.names
    launched_by = kernel_launches(t.trace)
    host = set(t.host)
    for k in sorted(t.kernels, key=lambda i: ev.ts[i]):
        if names[ev.name[k]].startswith(MEMCPY_PREFIX):
            continue
        u = launched_by.get(k)
        if u not in host:
            u = t.producer(names[ev.tf_name[k]], ev.ts[k], -1)
        if u is not None:
            g.add(u, k, "launch")
            if t.role[k] == "gpu_stream":
                t.kernels_of[u].append(k)


def _input_edges(t: _Timeline, g: _Graph) -> None:
    """Producer to consumer by the inputs a timeline records; Send to its Recv."""
    ev, names = t.ev, t.names
    for v in t.host:
        for sid in ev.inputs_of(v):
            u = t.producer(names[sid], ev.ts[v], v)
            if u is None:
                continue
            g.add(u, v, "input")
            if t.kernels_of.get(u) and t.kernels_of.get(v):
                g.add(t.kernels_of[u][-1], t.kernels_of[v][0], "gpu data")
        if names[ev.op_type[v]] in RECV_OPS:
            u = t.send_for(SEND_RECV_SUFFIX.sub("", names[ev.tf_name[v]]), float(ev.ts[v]))
            if u is not None:
                g.add(u, v, "send/recv")


def _copy_edges(t: _Timeline, g: _Graph) -> None:
    """A copy after the op that made its tensor; the ops (or kernels) that read it after it.
    A tensor copied several times (to several devices) is read by name, so which copy a
    reader took is unknown: each copy precedes each reader, up to :data:`COPY_PAIRS_MAX`
    pairs; beyond that each reader waits for the latest copy before it (edges linear in the
    trace, not copies x readers)."""
    ev, names = t.ev, t.names
    streams = any(r == "gpu_stream" for r in t.role.values())
    copies: dict[int, str] = {}
    for c in t.copies:
        if t.role[c] == "gpu_memcpy" and streams:
            continue  # the same copy is on its stream row
        m = COPY_EDGE.match(names[ev.tf_name[c]])
        if m:
            copies[c] = m.group(1)
    readers = _copy_readers(t, set(copies.values()))
    of_tensor: dict[str, list[int]] = defaultdict(list)
    for c, tensor in copies.items():
        of_tensor[tensor].append(c)
    for c, tensor in copies.items():
        u = t.producer(tensor, ev.ts[c], -1)
        if u is not None:
            g.add(t.kernels_of[u][-1] if t.kernels_of.get(u) else u, c, "copy")
        several = _Latest(ev, of_tensor[tensor]) if len(of_tensor[tensor]) * \
            len(readers.get(tensor, ())) > COPY_PAIRS_MAX else None
        for v, recv in readers.get(tensor, ()):
            if recv and ev.ts[v] < ev.ts[c]:
                continue
            w = v if recv else t.kernels_of[v][0]
            if several is not None and several.at(float(ev.ts[w])) != c:
                continue
            g.add(c, w, "copy")  # a receiving op gets the copied tensor; kernels wait for it


def _copy_readers(t: _Timeline, tensors: set[str]) -> dict[str, list[tuple[int, bool]]]:
    """Per copied tensor: the host ops that read it, in host order, and whether each is a Recv
    (which receives it) or an op whose kernels read it."""
    ev, names = t.ev, t.names
    out: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    for v in t.host:
        if names[ev.op_type[v]] in RECV_OPS:
            base = SEND_RECV_SUFFIX.sub("", names[ev.tf_name[v]])
            if base in tensors:
                out[base].append((v, True))
        else:
            # an op with kernels reads the copy on the GPU; one without, on another device
            # than the tensor's producer, receives it (a device-to-host copy)
            has_kernels = bool(t.kernels_of.get(v))
            for base in dict.fromkeys(SEND_RECV_SUFFIX.sub("", names[s])
                                      for s in ev.inputs_of(v)):
                if base not in tensors:
                    continue
                if has_kernels:
                    out[base].append((v, False))
                else:
                    u = t.producer(base, ev.ts[v], v)
                    if u is not None and ev.pid[u] != ev.pid[v]:
                        out[base].append((v, True))
    return out


class _Latest:
    """Among copies of one tensor: the one that started last by a time (the first listed of a
    tie), else the earliest."""

    def __init__(self, ev: Events, copies: list[int]) -> None:
        keyed = sorted((float(ev.ts[c]), -pos, c) for pos, c in enumerate(copies))
        self.keys = [(t, p) for t, p, _ in keyed]
        self.copies = [c for _, _, c in keyed]
        self.first = min(copies, key=lambda c: ev.ts[c])

    def at(self, t: float) -> int:
        k = bisect.bisect_right(self.keys, (t, 1))
        return self.copies[k - 1] if k else self.first


def _thread_edges(trace: Trace, nodes: np.ndarray, g: _Graph) -> None:
    for _, _, lane in trace.iter_lanes(nodes):
        for a, b in zip(lane, lane[1:]):
            g.add(int(a), int(b), "thread order")


def _flow_edges(trace: Trace, nodes: np.ndarray, g: _Graph) -> int:
    """Bind flow arrows to the nodes they start and end in; return how many arrows bound."""
    f = trace.flows
    if not len(f.ts) or not len(nodes):
        return 0
    ev = trace.events
    lo, hi = float(ev.ts[nodes].min()), float((ev.ts[nodes] + ev.dur[nodes]).max())
    ids = np.unique(f.id[(f.ts >= lo - EPS_US) & (f.ts <= hi + EPS_US)])
    keep = np.isin(f.id, ids)  # arrows with an end among these ops, both ends kept
    if not keep.any():
        return 0
    f = type(f)(*(getattr(f, c)[keep] for c in ("id", "phase", "pid", "tid", "ts", "name")))
    lanes = {}
    for pid, tid, lane in trace.iter_lanes(nodes):
        lanes[(pid, tid)] = (lane, ev.ts[lane], ev.ts[lane] + ev.dur[lane])

    def at(pid: int, tid: int, t: float, start: bool) -> int | None:
        got = lanes.get((pid, tid))
        if got is None:
            return None
        lane, ts, end = got
        k = int(np.searchsorted(ts, t, side="left" if start else "right")) - (0 if start else 1)
        if start:  # the flow starts where a producer ends
            k -= 1
        if 0 <= k < len(lane) and ts[k] - EPS_US <= t <= end[k] + EPS_US:
            return int(lane[k])
        return None

    ends: dict[int, list[Any]] = defaultdict(lambda: [None, []])
    for j in range(len(f.ts)):
        rec = ends[int(f.id[j])]
        if f.phase[j] == 0:
            rec[0] = (int(f.pid[j]), int(f.tid[j]), float(f.ts[j]))
        else:
            rec[1].append((int(f.pid[j]), int(f.tid[j]), float(f.ts[j])))
    bound = 0
    for first, stops in ends.values():
        if first is None:
            continue
        u = at(first[0], first[1], first[2], start=True)
        if u is None:
            continue
        for stop in stops:
            v = at(stop[0], stop[1], stop[2], start=False)
            if v is not None and v != u:
                before = len(g.edges)
                g.add(u, v, "flow")
                bound += len(g.edges) > before
    return bound


def _order(nodes: list[int], edges: dict[tuple[int, int], str], ts: np.ndarray
           ) -> tuple[list[int], dict[int, int]]:
    """Kahn's algorithm, ready nodes by start time; returns (order, depth). Nodes left in a
    cycle (only possible with flow arrows that contradict time) follow by time."""
    succ: dict[int, list[int]] = defaultdict(list)
    indeg = {n: 0 for n in nodes}
    for (u, v) in edges:
        if u in indeg and v in indeg:
            succ[u].append(v)
            indeg[v] += 1
    depth = {n: 0 for n in nodes}
    heap = [(ts[n], n) for n in nodes if indeg[n] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, u = heapq.heappop(heap)
        order.append(u)
        for v in succ[u]:
            depth[v] = max(depth[v], depth[u] + 1)
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, (ts[v], v))
    if len(order) < len(nodes):
        done = set(order)
        order += sorted((n for n in nodes if n not in done), key=lambda n: ts[n])
    return order, depth


def _critical(nodes: list[int], edges: list[tuple[int, int]], ts: np.ndarray, end: np.ndarray,
              lo: float, hi: float) -> tuple[list[int], float]:
    """The heaviest chain over time-consistent edges; weights are durations inside [lo, hi],
    less the time a dependency overlaps its dependent (a launch and its kernel)."""
    w = {n: max(0.0, min(end[n], hi) - max(ts[n], lo)) for n in nodes}
    order, _ = _order(nodes, {e: "" for e in edges}, ts)
    pred: dict[int, list[int]] = defaultdict(list)
    for u, v in edges:
        pred[v].append(u)
    best: dict[int, float] = {}
    back: dict[int, int | None] = {}
    for n in order:
        b, arg = 0.0, None
        for u in pred.get(n, ()):
            got = best.get(u, 0.0) - max(0.0, min(end[u], hi) - max(ts[n], lo))
            if u in best and got > b:
                b, arg = got, u
        best[n] = b + w[n]
        back[n] = arg
    if not best:
        return [], 0.0
    tail = max(best, key=lambda n: (best[n], -ts[n]))
    path = [tail]
    prev = back[tail]
    while prev is not None:
        path.append(prev)
        prev = back[prev]
    return path[::-1], float(best[tail])


def build(trace: Trace, choice: StepChoice) -> Sequence:
    """The dependency graph, dataflow order and critical path of the chosen step."""
    ev = trace.events
    roles = rows.process_roles(trace)
    work = rows.work_mask(trace, roles)
    nodes = _nodes(trace, choice, work)
    g = _Graph()
    recorded = trace.format == "timeline" and len(ev.input_ids) > 0
    if trace.format == "timeline":
        _timeline_edges(trace, nodes, g, roles)
    else:
        _thread_edges(trace, nodes, g)
    flows = _flow_edges(trace, nodes, g)
    counts: dict[str, int] = defaultdict(int)
    for kind in g.edges.values():
        counts[kind] += 1
    ts, end = ev.ts, ev.ts + ev.dur
    node_list = [int(i) for i in nodes]
    order, depth = _order(node_list, g.edges, ts)
    consistent = [(u, v) for (u, v), kind in g.edges.items() if end[u] <= ts[v] + EPS_US
                  or kind == "launch" and ts[u] <= ts[v] + EPS_US]
    path, length = _critical(node_list, consistent, ts, end, choice.lo, choice.hi)
    after: dict[int, list[int]] = defaultdict(list)
    for (u, v) in g.edges:
        after[v].append(u)
    names = trace.strings.names

    def seq_op(i: int) -> SeqOp:
        label = names[ev.op_type[i]] or names[ev.name[i]]
        deps = sorted(after.get(i, ()), key=lambda u: ts[u])
        return SeqOp(i, depth[i], float(ts[i] - choice.lo), float(ev.dur[i]), label,
                     names[ev.tf_name[i]] or names[ev.name[i]], _row(trace, i),
                     [names[ev.tf_name[u]] or names[ev.name[u]] for u in deps])

    # with op inputs, list by dataflow depth; without, per-thread order makes depth a mere
    # position on the thread, so the honest order is the topological one (by time)
    ordered = sorted(order, key=lambda i: (depth[i], ts[i])) if recorded else order
    edges = np.array(list(g.edges), dtype=np.int64).reshape(-1, 2)
    return Sequence(timeline=trace.format == "timeline", flows=flows, inputs_recorded=recorded, edge_counts=dict(counts),
                    ops=[seq_op(i) for i in ordered], edges=edges,
                    time_inconsistent=len(g.edges) - len(consistent),
                    critical=[seq_op(i) for i in path], critical_us=length,
                    wall_us=float(choice.step.dur))


def _row(trace: Trace, i: int) -> str:
    ev = trace.events
    pid, tid = int(ev.pid[i]), int(ev.tid[i])
    p = trace.processes.get(pid)
    pname = rows.device_of(p.name) if p else f"pid {pid}"
    short = re.sub(r"^/job:[^/]+/replica:\d+/task:\d+", "", pname)
    if trace.format == "timeline":
        return f"{short} lane {tid}"
    name = trace.lanes.get((pid, tid))
    return f"{short} {rows.thread_base(name)}" if name else f"{short} tid {tid}"
