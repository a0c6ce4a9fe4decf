"""The facts of one step that the bottleneck verdict is judged on (:class:`Facts`), measured
from a trace: input waits, compiles, idle gaps, the busiest rows, the GPU, XLA's bookkeeping,
the largest op, and the evidence of one-time work, copies, launching and communication
(:mod:`compare.analysis.evidence`). A first run's step is measured again without its one-time
work (:attr:`Facts.rest`). :mod:`compare.analysis.verdict` judges them."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from common.stages import PIPELINE_STAGES, stage_of_scope
from compare.analysis import evidence, inputs, rows
from compare.analysis.evidence import Communication, Copies, Launch, OneTime, RunStart
from compare.analysis.legend import Legend
from compare.analysis.sequence import Sequence
from compare.analysis.steps import StepChoice
from compare.analysis.xla import XlaSummary
from compare.model import intervals
from compare.model.events import CAT, CATEGORIES, Trace
from compare.model.lanes import keys
from compare.vocabulary import ops as tfops
from compare.vocabulary.rows import WHERE
from compare.vocabulary.thresholds import GPU_IDLE, TINY_CLUSTER_US


@dataclasses.dataclass
class Facts:
    """Numbers about one step that the verdict is drawn from (times in µs)."""

    wall_us: float
    input_wait_us: float = 0.0
    input_ops: list[str] = dataclasses.field(default_factory=list)
    get_next_us: float | None = None        # IteratorGetNext time, None if the step has none
    compile_us: float = 0.0
    recompiled: list[str] = dataclasses.field(default_factory=list)
    idle_us: float = 0.0
    #: the longest idle stretches: start_us, dur_us, the ops ``after`` and ``before`` them
    #: ("" for none), ``next_step``: it runs into the next step (no op of this one after it)
    gaps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    tids_are: str = "threads"
    busiest_row: str = ""
    busiest_share: float = 0.0
    others_share: float = 0.0              # mean busy share of the other worker rows
    worker_rows: int = 0
    parallelism: float = 0.0               # timeline device: lanes busy at once while busy
    gpu_busy_share: float | None = None    # None: no GPU rows
    xla_overhead_us: float = 0.0           # cache lookups, merges and tiny cluster runs
    tiny_clusters: int = 0
    top_op: str = ""                       # op type with the most self time in the step
    top_op_where: str = ""                 # "host", "GPU" or "GPU launch row"
    top_op_count: int = 0
    top_op_share: float = 0.0              # its self time, all executions, over the wall time
    top_op_category: str = ""
    top_op_name: str = ""                  # node name of its longest execution
    top_op_name_share: float = 0.0
    top_op_cpu_us: float = 0.0             # its executions' summed self time (CPU/GPU time)
    top_op_const_inputs: bool = False      # its longest execution reads only constants
    compute_share: float = 0.0             # wall share of all op work (input waits apart)
    device_bound: bool = False             # the GPU ran kernels GPU_IDLE of the step or more
    critical_share: float = 0.0
    one_time: OneTime = dataclasses.field(default_factory=OneTime)
    run_start: RunStart = dataclasses.field(default_factory=RunStart)
    #: the step without its one-time work (a first run's), or None: see :func:`_rest_facts`
    rest: "Facts | None" = None
    launch: Launch = dataclasses.field(default_factory=Launch)
    communication: Communication = dataclasses.field(default_factory=Communication)
    copies: Copies = dataclasses.field(default_factory=Copies)
    silent_rows: list[str] = dataclasses.field(default_factory=list)  # recorded nothing
    gpu_rows: int = 0                      # GPU processes in the trace
    gpus_recorded: int = 0                 # GPUs with any event
    gpu_busiest: str = ""                  # which GPU gpu_busy_share is of (when several)
    gpu_busiest_own_window: bool = False   # ... over its own step row, else over the step
    feeds: list[str] = dataclasses.field(default_factory=list)   # feed_dict placeholders
    steps_from: str = ""                   # how the trace's steps were found
    window: str = "step"                   # what wall_us is: "step", or "rest" (see rest)
    seed_pipeline: bool = False            # the trace is our own seed pipeline's
    #: tf.data iterators producing on threads of their own (Prefetch, ParallelMap...) that the
    #: step's input waits blocked in: the consumer waited for elements other threads make
    input_waits_on: list[str] = dataclasses.field(default_factory=list)
    input_inline_us: float = 0.0           # the pipeline's own ops run inside the waits
    input_producers: str = ""              # "recorded", "not recorded", "" (not known)



@dataclasses.dataclass
class _Step:
    """What the measurements of one step share."""

    trace: Trace
    choice: StepChoice
    idx: np.ndarray           # the step's work events
    waits: np.ndarray         # its input ops

    @property
    def lo(self) -> float:
        return self.choice.lo

    @property
    def hi(self) -> float:
        return self.choice.hi

    @property
    def wall(self) -> float:
        return self.choice.step.dur

    def busy_share(self, k: np.ndarray) -> float:
        ev = self.trace.events
        if not self.wall:
            return 0.0
        return intervals.union_us(ev.ts[k], ev.ts[k] + ev.dur[k], self.lo, self.hi) / self.wall

    def row_shares(self, k: np.ndarray, pids: list[int], tids: list[int] | None = None
                   ) -> np.ndarray:
        """:meth:`busy_share` of the events ``k`` on each row: process ``pids[j]`` (and thread
        ``tids[j]`` when given), all rows measured at once."""
        ev = self.trace.events
        if not self.wall or not pids:
            return np.zeros(len(pids))
        if tids is None:
            mine, rows_ = keys(ev.pid[k], np.zeros(len(k)),
                               (np.asarray(pids), np.zeros(len(pids))))
        else:
            mine, rows_ = keys(ev.pid[k], ev.tid[k], (np.asarray(pids), np.asarray(tids)))
        order = np.argsort(rows_, kind="stable")
        at = np.searchsorted(rows_[order], mine)
        hit = np.flatnonzero(at < len(order))
        hit = hit[rows_[order][at[hit]] == mine[hit]]
        busy = intervals.union_per_group(order[at[hit]], ev.ts[k[hit]],
                                         ev.ts[k[hit]] + ev.dur[k[hit]], self.lo, self.hi,
                                         len(pids))
        return busy / self.wall


def measure(trace: Trace, choice: StepChoice, xla: XlaSummary, legend: Legend,
            sequence: Sequence) -> Facts:
    """The facts of the chosen step."""
    in_step = choice.in_step(trace)
    idx = np.flatnonzero(in_step & rows.work_mask(trace))
    ops = inputs.input_ops(trace)
    # input ops on every row, the step's own (Python) thread too: an eager next(iterator)
    # waits there, and the step split counts it (compare.analysis.inputs)
    st = _Step(trace, choice, idx, np.flatnonzero(in_step & ops))
    f = Facts(wall_us=float(st.wall), tids_are=legend.tids_are)
    _measure_input(st, f, ops)
    _measure_input_detail(st, f, ops)
    f.compile_us = step_compile_us(trace, xla, choice)
    f.recompiled = list(xla.recompiled)
    _measure_gaps(st, f)
    _measure_rows(st, f, legend)
    _measure_gpu(st, f, legend)
    _measure_xla_overhead(st, f, xla)
    _measure_top_op(st, f, legend)
    f.critical_share = min(1.0, sequence.critical_us / st.wall) if st.wall else 0.0
    roles = rows.process_roles(trace)
    f.one_time = evidence.one_time(trace, choice, idx, roles)
    f.run_start = evidence.run_start(trace, choice, idx, roles)
    f.launch = evidence.launch(trace, choice, idx, legend, roles)
    f.communication = evidence.communication(trace, choice, idx, roles)
    f.copies = evidence.copies(trace, choice, idx, roles)
    f.silent_rows = evidence.silent_rows(legend)
    f.feeds = evidence.feeds(trace, idx)
    f.steps_from = trace.meta.get("steps_from", "")
    f.seed_pipeline = is_seed_pipeline(trace)
    f.rest = _rest_facts(st, f, legend, sequence, xla)
    return f


#: The rest of a first step is judged only when it is this share of the step or more.
REST_MIN_SHARE = 0.02


def _rest_facts(st: _Step, f: Facts, legend: Legend, sequence: Sequence,
                xla: XlaSummary) -> Facts | None:
    """The facts the launch, GPU, idle and compute findings read, measured on the step without
    its one-time work (the stretches :class:`OneTime` and the step's compiles cover)."""
    if not f.one_time.first_step:
        return None
    ev = st.trace.events
    in_step = st.choice.in_step(st.trace)
    spans = list(f.one_time.spans) + [(float(ev.ts[i]), float(ev.ts[i]) + us)
                                      for i, _, us in xla.compile_calls if in_step[i]]
    if not spans:
        return None
    rest = evidence.Rest(st.trace, st.choice, spans)
    if rest.wall < REST_MIN_SHARE * st.wall:
        return None
    r = dataclasses.replace(f, wall_us=rest.wall, compile_us=0.0, one_time=OneTime(),
                            run_start=RunStart(), rest=None, window="rest",
                            input_wait_us=rest.covered_us(st.waits))
    roles = rows.process_roles(st.trace)
    if f.gpu_busy_share is not None:
        r.gpu_busy_share = rest.share(evidence.step_kernels(st.trace, st.choice, roles))
    r.device_bound = r.gpu_busy_share is not None and r.gpu_busy_share >= GPU_IDLE
    row, k = evidence.launch_events(st.trace, st.choice, legend)
    if row:
        r.launch = dataclasses.replace(f.launch, busy_share=rest.share(k))
    work = _compute_events(st)
    r.compute_share = rest.share(work)
    r.idle_us = max(0.0, rest.wall - rest.covered_us(np.union1d(st.idx, st.waits)))
    r.critical_share = rest.share(np.array([o.index for o in sequence.critical], np.int64))
    _rest_top_op(st, r, rest, work)
    return r


def _rest_top_op(st: _Step, r: Facts, rest: "evidence.Rest", work: np.ndarray) -> None:
    """The op type covering the most of the rest of the step (the GPU's when it is busy)."""
    ev, names = st.trace.events, st.trace.strings.names
    work = rest.outside(work)   # the one-time executions themselves are not the rest's work
    gpu = rows.on_gpu(st.trace)[work]
    if r.device_bound:
        work, gpu = work[gpu], gpu[gpu]
    launch = np.isin(ev.pid[work], [p.pid for p in st.trace.processes.values()
                                    if rows.process_role(st.trace, p.pid) == "gpu_launch"])
    where = np.where(gpu, 1, np.where(launch, 2, 0))
    key = ev.op_type[work].astype(np.int64) * 4 + where
    uniq, inv = np.unique(key, return_inverse=True)
    inside = intervals.clipped(ev.ts[work], ev.end[work], st.lo, st.hi)
    summed = np.bincount(inv.reshape(-1), weights=inside)
    best = (0.0, -1)
    for g in np.argsort(-summed)[:TOP_OPS_REJUDGED]:
        share = rest.share(work[inv.reshape(-1) == g])
        if share > best[0]:
            best = (share, int(g))
    r.top_op = ""
    if best[1] < 0:
        return
    g = best[1]
    mine_at = np.flatnonzero(inv.reshape(-1) == g)
    mine = work[mine_at]
    j = int(mine[np.argmax(inside[mine_at])])
    r.top_op, r.top_op_where = names[int(uniq[g]) // 4], WHERE[int(uniq[g]) % 4]
    r.top_op_count, r.top_op_share, r.top_op_cpu_us = len(mine), best[0], float(summed[g])
    r.top_op_category = CATEGORIES[ev.category[j]]
    r.top_op_name = names[ev.tf_name[j]] or names[ev.name[j]]
    r.top_op_name_share = min(1.0, float(inside[mine_at].max()) / rest.wall)


#: Op types whose share of the rest of a first step is measured (the largest by summed time).
TOP_OPS_REJUDGED = 12


#: Our seed pipeline names its ops by stage (``crop_3/...``, common.stages): a trace whose node
#: names carry this many of those stages, crops among them, is the seed's.
SEED_STAGES_MIN = 3


def is_seed_pipeline(trace: Trace) -> bool:
    """The trace is our own seed pipeline's (legacy or modern), by its stage name scopes: only
    then may advice name the seed's structure (its five independent crops)."""
    names = trace.strings.names
    used = np.flatnonzero(np.bincount(trace.events.tf_name, minlength=1)[1:]) + 1
    # only names holding a stage's word can carry its scope: the lines of all node names
    # joined (names are kept showable: none holds a newline) where str.find meets one
    joined = "\n".join([names[i] for i in used.tolist()])
    stages: set[str | None] = set()
    for word in PIPELINE_STAGES:
        at = joined.find(word)
        while at >= 0:
            a, b = joined.rfind("\n", 0, at) + 1, joined.find("\n", at)
            b = len(joined) if b < 0 else b
            stages.add(stage_of_scope(joined[a:b]))
            at = joined.find(word, b)
    stages.discard(None)
    return "crop" in stages and len(stages) >= SEED_STAGES_MIN


def _measure_input(st: _Step, f: Facts, ops: np.ndarray) -> None:
    ev, names = st.trace.events, st.trace.strings.names
    f.input_wait_us = inputs.input_us(st.trace, st.waits, st.lo, st.hi, ops)
    f.input_ops = sorted({names[ev.op_type[i] or ev.name[i]] for i in st.waits})
    gn = np.array([i for i in st.waits if tfops.is_get_next(names[ev.op_type[i] or ev.name[i]])],
                  np.int64)
    if len(gn):
        f.get_next_us = float(intervals.clipped(ev.ts[gn], ev.end[gn], st.lo, st.hi).sum())


def _measure_input_detail(st: _Step, f: Facts, ops: np.ndarray) -> None:
    """What the step's input waits hold: tf.data buffers they blocked in (and whether the
    threads filling them were recorded), or the pipeline's own ops run inside them."""
    if not len(st.waits):
        return
    tr = st.trace
    ev, names = tr.events, tr.strings.names
    roots = inputs.wait_roots(tr, ops)
    in_step = st.choice.in_step(tr)
    inside = np.flatnonzero(in_step & (roots >= 0) & ~ops)
    f.input_waits_on = sorted({tfops.tfdata_kind(names[n]) for n in np.unique(ev.name[inside])
                               if tfops.is_tfdata_async(names[n])})
    work = inside[ev.op_type[inside] != 0]
    f.input_inline_us = intervals.union_us(ev.ts[work], ev.end[work], st.lo, st.hi)
    if f.input_waits_on:
        # the producers: tf.data work outside the waits, on tf.data's rows or as its events
        outside = np.flatnonzero(in_step & rows.busy_mask(tr) & (roots < 0))
        lanes = rows.lane_roles(tr)
        made = (ev.category[outside] == CAT["tf_data"]) | (lanes[outside] == "tf_data")
        f.input_producers = "recorded" if made.any() else "not recorded"


def _measure_gaps(st: _Step, f: Facts) -> None:
    """Idle time and the three longest gaps, with the ops around them."""
    tr, idx = st.trace, np.union1d(st.idx, st.waits)   # waiting for input is not idle
    a, b = tr.events.ts[idx], tr.events.ts[idx] + tr.events.dur[idx]
    f.idle_us = st.wall - intervals.union_us(a, b, st.lo, st.hi)
    gs, ge = intervals.gaps(a, b, st.lo, st.hi)
    last = st.choice.step.num == max(s.num for s in tr.steps)
    for k in np.argsort(-(ge - gs))[:3]:
        before = idx[np.abs(a - ge[k]) < 1e-6]
        after = idx[np.abs(b - gs[k]) < 1e-6]
        nxt = _name(tr, before)
        # a gap with no op after it in a step before the last runs into the next step
        f.gaps.append({"start_us": float(gs[k] - st.lo), "dur_us": float(ge[k] - gs[k]),
                       "after": _name(tr, after), "before": nxt,
                       "next_step": not nxt and not last})


#: Thread roles whose work can serialise a step.
_WORKER_ROLES = ("inter_op", "tf_data", "eigen", "reader", "runtime", "other", "gpu_private")


def _measure_rows(st: _Step, f: Facts, legend: Legend) -> None:
    """The busiest row by work other than waiting for input (a long dequeue is not serial
    work), and how busy the others were."""
    ev = st.trace.events
    # waiting is not work: input waits and everything nested in them (tf.data's frames on the
    # consumer's thread), and events known to block on other threads
    names = st.trace.strings.names
    waiting = inputs.inside_input(st.trace) | rows.blocking_mask(st.trace) | np.isin(
        ev.op_type, [i for i in np.unique(ev.op_type) if names[i] in tfops.NO_WORK_OPS])
    mine = np.flatnonzero(st.choice.in_step(st.trace) & rows.busy_mask(st.trace) & ~waiting)
    if legend.tids_are == "threads":
        rows_ = [(p, ln) for p in legend.processes for ln in p.lanes
                 if ln.role in _WORKER_ROLES and ln.events]
        shares = st.row_shares(mine, [p.pid for p, _ in rows_], [ln.tid for _, ln in rows_])
        workers = sorted(((f"{p.name} {ln.name}", float(s)) for (p, ln), s in
                          zip(rows_, shares)), key=lambda x: -x[1])
        if workers:
            f.busiest_row, f.busiest_share = workers[0]
            f.worker_rows = len(workers)
            rest = [s for _, s in workers[1:]]
            f.others_share = float(np.mean(rest)) if rest else 0.0
        return
    hosts = [p for p in legend.processes if p.role == "cpu_ops" and p.events]
    if hosts:
        host_shares = [float(s) for s in st.row_shares(mine, [p.pid for p in hosts])]
        k = int(np.argmax(host_shares))
        f.busiest_row = rows.device_of(hosts[k].name)
        f.busiest_share, f.parallelism = host_shares[k], hosts[k].parallelism
        f.worker_rows = len(hosts[k].lanes)


def _measure_gpu(st: _Step, f: Facts, legend: Legend) -> None:
    """The share of the step the busiest GPU ran kernels (copies left out), over the GPUs that
    recorded anything; None when the trace has no GPU row or none recorded an event."""
    f.gpu_rows = len(legend.devices)
    recorded = [d for d in legend.devices if d.recorded]
    f.gpus_recorded = len(recorded)
    if recorded:
        d = max(recorded, key=lambda d: d.busy_share)
        f.gpu_busy_share = d.busy_share
        if len(legend.devices) > 1:
            f.gpu_busiest, f.gpu_busiest_own_window = d.device, d.own_window


def _measure_xla_overhead(st: _Step, f: Facts, xla: XlaSummary) -> None:
    """Tiny clusters, and what their lookups, merges and runs cost in this step."""
    tiny = {u.name for u in xla.units.values() if u.runs and
            (u.run_steady_us or u.run_first_us) < TINY_CLUSTER_US}
    f.tiny_clusters = len(tiny)
    if not tiny:
        return
    ev, names = st.trace.events, st.trace.strings.names
    compiled = {i for i, _, _ in xla.compile_calls}
    for i in st.idx:
        op, tf_name = names[ev.op_type[i]], names[ev.tf_name[i]]
        if (op in tfops.XLA_COMPILE_OPS and int(i) not in compiled) or \
                op in tfops.XLA_MERGE_OPS or (op in tfops.XLA_RUN_OPS and
                                              tfops.cluster_of(tf_name, tf_name) in tiny):
            f.xla_overhead_us += float(intervals.clipped(ev.ts[i], ev.end[i], st.lo, st.hi))


def _compute_events(st: _Step) -> np.ndarray:
    """The step's op work: ops other than input waits, tf.data and runtime events, copies
    and the ops that compute nothing (a run's _SOURCE)."""
    ev, names = st.trace.events, st.trace.strings.names
    k = st.idx[(ev.op_type[st.idx] != 0) & ~np.isin(st.idx, st.waits) &
               ~np.isin(ev.category[st.idx], [CAT["runtime"], CAT["tf_data"]])]
    idle_ops = [i for i in np.unique(ev.op_type[k])
                if names[i] in tfops.NO_WORK_OPS or rows.is_copy(names[i])]
    copies = [i for i in np.unique(ev.name[k]) if rows.is_copy(names[i])]
    return np.asarray(k[~np.isin(ev.op_type[k], idle_ops) & ~np.isin(ev.name[k], copies)])


def _measure_top_op(st: _Step, f: Facts, legend: Legend) -> None:
    """The op with the most wall time (compiles and input have findings of their own); on a
    GPU busy GPU_IDLE of the step or more, the GPU's (the step is device-bound)."""
    f.compute_share = st.busy_share(_compute_events(st))
    f.device_bound = f.gpu_busy_share is not None and f.gpu_busy_share >= GPU_IDLE
    # a NoOp computes nothing (its time is the executor's: a run's _SOURCE), a copy is not a
    # kernel (copies have a finding of their own), tf.data's frames are input (input's finding)
    tops = [t for t in legend.top_ops if t.category not in ("xla_compile", "tf_data") and
            not tfops.is_input_op(t.op, t.op) and not t.collective and not t.copy and
            t.op not in tfops.NO_WORK_OPS and (t.where == "GPU" or not f.device_bound)]
    if tops:
        t = tops[0]
        f.top_op, f.top_op_where, f.top_op_count, f.top_op_share, f.top_op_category = (
            t.op, t.where, t.count, t.share, t.category)
        f.top_op_name, f.top_op_name_share = t.largest, min(1.0, t.largest_us / st.wall)
        f.top_op_cpu_us = t.self_us
        f.top_op_const_inputs = _reads_only_constants(st, t.largest)


def _reads_only_constants(st: _Step, node: str) -> bool:
    """The longest execution of ``node`` in the step has inputs (a timeline records them),
    every one of them made by a constant op in the step, and it draws no random numbers."""
    tr = st.trace
    ev, names = tr.events, tr.strings.names
    sid = tr.strings.lookup(node)
    if sid is None:
        return False
    mine = st.idx[ev.tf_name[st.idx] == sid]
    if not len(mine):
        return False
    longest = int(mine[np.argmax(ev.dur[mine])])
    if tfops.STATEFUL_RANDOM_OP.match(names[ev.op_type[longest]]):
        return False     # a random op draws anew from its constant shape every run
    inputs = ev.inputs_of(longest).tolist()
    if not inputs:
        return False
    made = {int(n): names[int(o)] for n, o in zip(ev.tf_name[st.idx], ev.op_type[st.idx])}
    return all(made.get(int(i)) in tfops.CONST_OPS for i in inputs)


def step_compile_us(trace: Trace, xla: XlaSummary, choice: StepChoice) -> float:
    """Wall time of the step spent compiling: the union of its compile calls (clusters compile
    in parallel on several threads), each counted from its start for its compile time."""
    ev = trace.events
    in_step = choice.in_step(trace)
    calls = [(ev.ts[i], us) for i, _, us in xla.compile_calls if in_step[i]]
    if not calls:
        return 0.0
    ts = np.array([c[0] for c in calls])
    return intervals.union_us(ts, ts + np.array([c[1] for c in calls]), choice.lo, choice.hi)


def _name(trace: Trace, idx: np.ndarray) -> str:
    if not len(idx):
        return ""
    i = idx[np.argmax(trace.events.dur[idx])]
    return trace.s(trace.events.tf_name[i]) or trace.s(trace.events.name[i])
