"""Where a step's time went and what to try next: the bottleneck verdict.

Thresholds (from TensorBoard's input-pipeline analysis and our design notes):

- input: time waiting for input (``IteratorGetNext``, TF1 queue dequeues and reader reads)
  as a share of the step: below 5 % not input-bound, 5-20 % moderately, 20 % and more highly.
  ``IteratorGetNext`` calls totalling 50 µs or less in a step mean the input is not the
  bottleneck, whatever the share (tiny steps).
- compile-bound: XLA compilation takes half of the step or more.
- idle: stretches where no op of the step ran; notable from 10 % of the step, a bottleneck
  from 30 %.
- serialised: one row does the work one op at a time while the others idle (a thread busy
  70 % or more of the step with the other worker threads below 20 % on average; or, in a
  timeline, a device busy half the step or more whose ops hardly overlapped although 20 % of
  the step or more was work off the critical path, i.e. could have run beside it). A step
  that is one dependency chain is not serialised: it is that chain.
- GPU idle: the GPU ran kernels less than half of the step.
- compute: one op execution takes half of the step or more (by self time): that op is it.

When several findings are high, compilation and then input lead (they cause the others: a
GPU idling while XLA compiles, a first ``_XlaLaunch`` that is mostly compile); otherwise the
largest share leads. :func:`judge` turns measured :class:`Facts` into a :class:`Verdict`; :func:`assess` measures the
facts from a trace. They are split so the thresholds can be checked on constructed facts.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from compare.analysis import inputs, rows
from compare.analysis.legend import Legend
from compare.analysis.sequence import Sequence
from compare.analysis.steps import StepChoice
from compare.analysis.xla import XlaSummary
from compare.fmt import duration as ms
from compare.model import intervals
from compare.model.events import Trace
from compare.vocabulary import ops as tfops
from compare.vocabulary.rows import MEMCPY_PREFIX
from compare.vocabulary.thresholds import (
    COMPILE_DOMINATES,
    COMPILE_NOTABLE,
    COMPUTE_DOMINATES,
    COMPUTE_NOTABLE,
    GETNEXT_OK_US,
    GPU_IDLE,
    IDLE_BOUND,
    IDLE_NOTABLE,
    OFF_PATH,
    SERIAL_BUSY,
    SERIAL_OTHERS,
    TIMELINE_SERIAL_BUSY,
    TIMELINE_SERIAL_PARALLELISM,
    TINY_CLUSTER_US,
    TINY_CLUSTERS_NOTABLE,
)
from compare.vocabulary.thresholds import input_class as input_words


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
    gaps: list[dict] = dataclasses.field(default_factory=list)   # longest idle stretches
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
    top_op_where: str = ""                 # "host" or "GPU"
    top_op_count: int = 0
    top_op_share: float = 0.0              # its self time, all executions, over the wall time
    top_op_category: str = ""
    top_op_name: str = ""                  # node name of its longest execution
    top_op_name_share: float = 0.0
    critical_share: float = 0.0


@dataclasses.dataclass
class Finding:
    kind: str      # input, compile, recompile, idle, serialised, gpu_idle, xla_overhead, compute
    level: str     # "high", "moderate", "low" (checked, not a problem) or "info"
    share: float   # of the step it accounts for
    text: str
    try_next: str


@dataclasses.dataclass
class Verdict:
    bottleneck: str            # kind of the leading finding ("compute" when nothing else)
    headline: str
    input_class: str           # "not input-bound", "moderately input-bound", "highly input-bound"
    findings: list[Finding]
    facts: Facts

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def input_class(facts: Facts) -> str:
    """The input verdict from TensorBoard's thresholds (see the module docstring)."""
    if facts.get_next_us is not None and facts.get_next_us <= GETNEXT_OK_US and \
            facts.input_wait_us <= GETNEXT_OK_US:
        return "not input-bound"
    return input_words(facts.input_wait_us / facts.wall_us if facts.wall_us else 0.0)


def judge(f: Facts) -> Verdict:
    """The verdict for a step's facts: every finding, then the one that leads."""
    cls = input_class(f)
    out: list[Finding] = []
    for rule in FINDINGS:
        out.extend(rule(f, cls))
    return _lead(out, f, cls)


def _input(f: Facts, cls: str) -> list[Finding]:
    share = f.input_wait_us / (f.wall_us or 1.0)
    ops = ", ".join(f.input_ops) or "input ops"
    waiting = "waiting for or reading" if tfops.reads_input(f.input_ops) else "waiting for"
    if cls == "not input-bound":
        why = (f"IteratorGetNext took {ms(f.get_next_us)} (50 us or less: the input is "
               f"ready when the step asks)" if f.get_next_us is not None and
               f.get_next_us <= GETNEXT_OK_US else
               f"{waiting} input ({ops}) took {ms(f.input_wait_us)}, {share:.0%} of the "
               f"step (under 5 %)" if f.input_wait_us else
               "the step shows no input wait (no IteratorGetNext, queue dequeue or reader op)")
        return [Finding("input", "low", share, f"Not input-bound: {why}.", "")]
    tfdata = any(tfops.is_get_next(o) for o in f.input_ops)
    fix = ("add .prefetch(tf.data.AUTOTUNE) at the end of the tf.data pipeline, run map "
           "with num_parallel_calls=tf.data.AUTOTUNE, .cache() decoded data if it fits, "
           "and read files with interleave; TensorBoard's input-pipeline page shows the "
           "slow tf.data stage" if tfdata else
           "move reading and decoding into tf.data (parallel map with num_parallel_calls="
           "tf.data.AUTOTUNE, then .prefetch(tf.data.AUTOTUNE)); while on queues, give "
           "the queue runners more threads (tf.train.batch(..., num_threads=N)) and a "
           "larger capacity so a dequeue finds data waiting")
    level = "high" if cls == "highly input-bound" else "moderate"
    return [Finding("input", level, share,
                    f"{cls.capitalize()}: the step spent {ms(f.input_wait_us)} {waiting} "
                    f"input ({ops}), {share:.0%} of its {ms(f.wall_us)} (thresholds: "
                    f"5 % moderately, 20 % highly).", fix)]


def _compile(f: Facts, cls: str) -> list[Finding]:
    if not f.compile_us:
        return []
    share = f.compile_us / (f.wall_us or 1.0)
    level = ("high" if share >= COMPILE_DOMINATES else
             "moderate" if share >= COMPILE_NOTABLE else "info")
    return [Finding(
        "compile", level, share,
        f"{'Compile-bound' if level == 'high' else 'XLA compiles in this step'}: "
        f"{ms(f.compile_us)}, {share:.0%} of the step, is XLA compilation.",
        "judge speed on steady steps (this one pays a one-time compile); keep input shapes "
        "fixed so each cluster compiles once (resize or pad to one shape, batch with "
        "drop_remainder=True)")]


def _recompile(f: Facts, cls: str) -> list[Finding]:
    if not f.recompiled:
        return []
    return [Finding(
        "recompile", "moderate", 0.0,
        f"Recompilation: {', '.join(f.recompiled)} compiled more than once in this trace, "
        f"so its input shapes (or constants) changed between calls.",
        "make the shapes static (padded_batch or drop_remainder=True, fixed image size) "
        "or keep shape-varying ops out of the compiled cluster")]


def _idle(f: Facts, cls: str) -> list[Finding]:
    share = f.idle_us / (f.wall_us or 1.0)
    if share < IDLE_NOTABLE:
        return []
    g = f.gaps[0] if f.gaps else None
    where = (f"; the longest gap, {ms(g['dur_us'])} at +{ms(g['start_us'])}, came after "
             f"{g['after'] or 'the step start'} and before {g['before'] or 'the step end'}"
             if g else "")
    return [Finding(
        "idle", "high" if share >= IDLE_BOUND else "moderate", share,
        f"Idle gaps: for {ms(f.idle_us)} ({share:.0%} of the step) no op of this step ran{where}.",
        "find what the executor waited for: profile the same steps with the TensorBoard "
        "profiler (tf.profiler.experimental.start/stop), which shows every host thread; "
        "usual causes are queue-runner threads or other session runs competing for the "
        "CPU, Python between ops (feed_dict) and the time between session runs")]


def _serialised(f: Facts, cls: str) -> list[Finding]:
    wall = f.wall_us or 1.0
    if f.tids_are == "threads":
        serial = (f.worker_rows >= 2 and f.busiest_share >= SERIAL_BUSY and
                  f.others_share < SERIAL_OTHERS)
        what = (f"one thread, {f.busiest_row}, was busy {f.busiest_share:.0%} of the step "
                f"while the {f.worker_rows - 1} other worker threads averaged "
                f"{f.others_share:.0%}")
    else:
        off_path = f.busiest_share - max(0.0, f.critical_share - f.input_wait_us / wall)
        serial = (f.busiest_share >= TIMELINE_SERIAL_BUSY and
                  0 < f.parallelism < TIMELINE_SERIAL_PARALLELISM and off_path >= OFF_PATH)
        what = (f"{f.busiest_row} was busy {f.busiest_share:.0%} of the step with "
                f"{f.parallelism:.2f} ops running at once on average, and {off_path:.0%} of "
                f"the step was work off the critical path that could have overlapped")
    if not serial:
        return []
    return [Finding(
        "serialised", "high" if f.busiest_share >= 0.8 else "moderate", f.busiest_share,
        f"One row serialises the work: {what}.",
        "let independent work overlap: raise ConfigProto(inter_op_parallelism_threads=N), "
        "and split per-image work so it can run in parallel (tf.data map with "
        "num_parallel_calls; the seed's five crops do not depend on each other)")]


def _gpu_idle(f: Facts, cls: str) -> list[Finding]:
    if f.gpu_busy_share is None or f.gpu_busy_share >= GPU_IDLE:
        return []
    return [Finding(
        "gpu_idle", "high" if f.gpu_busy_share < 0.25 else "moderate", 1 - f.gpu_busy_share,
        f"The GPU is underused: it ran kernels {f.gpu_busy_share:.0%} of the step and "
        f"waited the rest (for input, copies or the host launching kernels).",
        "keep the GPU fed: prefetch to the device (tf.data.experimental.prefetch_to_device"
        " or .prefetch), larger batches, fewer and larger kernels (XLA: "
        "tf.function(jit_compile=True))")]


def _xla_overhead(f: Facts, cls: str) -> list[Finding]:
    if f.tiny_clusters < TINY_CLUSTERS_NOTABLE:
        return []
    return [Finding(
        "xla_overhead", "info", f.xla_overhead_us / (f.wall_us or 1.0),
        f"XLA bookkeeping: {f.tiny_clusters} clusters run in under "
        f"{TINY_CLUSTER_US:.0f} us each; with their cache lookups (_XlaCompile) and merges "
        f"(_XlaMerge) that is {ms(f.xla_overhead_us)} per step spent on XLA plumbing.",
        "tiny clusters cost more to launch than they save: compile one larger function "
        "(tf.function(jit_compile=True)) or turn auto-clustering off for this graph")]


def _compute(f: Facts, cls: str) -> list[Finding]:
    if not f.top_op:
        return []
    what = f"XLA clusters ({f.top_op})" if f.top_op_category == "xla_run" else f.top_op
    calls = (f"{f.top_op_count} {'kernels' if f.top_op_where == 'GPU' else 'executions'}; "
             f"the longest, {f.top_op_name}, {f.top_op_name_share:.0%}"
             if f.top_op_count > 1 else f.top_op_name)
    advice = ("see which TF ops the cluster holds (question 2) and its kernels in the "
              "TensorBoard profiler; if it is slower than the same ops without XLA "
              "(global_jit_level OFF), keep those ops out of the cluster"
              if f.top_op_category == "xla_run" else
              "make it cheaper (smaller inputs, a faster kernel, fewer calls) or take it off "
              "the critical path")
    return [Finding(
        "compute", "high" if f.top_op_share >= COMPUTE_DOMINATES else "info", f.top_op_share,
        f"The largest cost is {what} on the {f.top_op_where}: {f.top_op_share:.0%} of the "
        f"step by self time ({calls}). The critical path covers {f.critical_share:.0%} of "
        f"the step.",
        f"start with {f.top_op_name or f.top_op}, the largest cost: {advice}")]


#: The finding rules, in the order findings are listed.
FINDINGS = (_input, _compile, _recompile, _idle, _serialised, _gpu_idle, _xla_overhead,
            _compute)


def _lead(out: list[Finding], f: Facts, cls: str) -> Verdict:
    """The leading finding and the headline. When several are high, a compile and then an
    input wait lead (they cause the others: an idle GPU, a long first _XlaLaunch); else the
    largest share."""
    highs = [x for x in out if x.level == "high"]
    if highs:
        lead = min(highs, key=lambda x: (_CAUSES.get(x.kind, len(_CAUSES)), -x.share))
        words = (f"The step is {cls}" if lead.kind == "input" else
                 f"The step is busy computing in {f.top_op} on the {f.top_op_where}"
                 if lead.kind == "compute" else _WORDS[lead.kind])
        headline = f"{words} ({lead.share:.0%} of the step)" + (
            f"; input: {cls}." if lead.kind != "input" else ".")
        return Verdict(lead.kind, headline, cls, out, f)
    cands = sorted((x for x in out if x.level == "moderate" and x.share > 0 or
                    x.kind == "compute" and x.share >= COMPUTE_NOTABLE),
                   key=lambda x: -x.share)
    if not cands:
        return Verdict("none", f"Nothing stands out; input: {cls}.", cls, out, f)
    parts = [_phrase(x, f, cls) for x in cands[:3]]
    tail = f"; input: {cls}" if not any(x.kind == "input" for x in cands[:3]) else ""
    return Verdict(cands[0].kind, "No single bottleneck: " + "; ".join(parts) + tail + ".",
                   cls, out, f)


_CAUSES = {"compile": 0, "input": 1}
_WORDS = {
    "compile": "The step is compile-bound",
    "idle": "The step is mostly waiting (idle gaps)",
    "serialised": "One row serialises the step",
    "gpu_idle": "The GPU is underused",
    "recompile": "XLA recompiles",
}


def _phrase(x: Finding, f: Facts, cls: str) -> str:
    return {
        "input": f"waiting for input {x.share:.0%} ({cls})",
        "compile": f"XLA compilation {x.share:.0%}",
        "idle": f"idle gaps {x.share:.0%}",
        "serialised": f"ops running one at a time {x.share:.0%}",
        "gpu_idle": f"GPU idle {x.share:.0%}",
        "compute": f"{f.top_op} on the {f.top_op_where} {x.share:.0%}",
        "recompile": "recompilation",
    }[x.kind]


# --------------------------------------------------------------------------------------------
# measuring

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


def assess(trace: Trace, choice: StepChoice, xla: XlaSummary, legend: Legend,
           sequence: Sequence) -> Verdict:
    """Measure the facts of the chosen step and judge them."""
    ev = trace.events
    in_step = ev.step == choice.step.num
    idx = np.flatnonzero(in_step & rows.work_mask(trace))
    ops = inputs.input_ops(trace)
    # input ops on every row, the step's own (Python) thread too: an eager next(iterator)
    # waits there, and the step split counts it (compare.analysis.inputs)
    st = _Step(trace, choice, idx, np.flatnonzero(in_step & ops))
    f = Facts(wall_us=float(st.wall), tids_are=legend.tids_are)
    _measure_input(st, f, ops)
    f.compile_us = step_compile_us(trace, xla, choice)
    f.recompiled = list(xla.recompiled)
    _measure_gaps(st, f)
    _measure_rows(st, f, legend)
    _measure_gpu(st, f, legend)
    _measure_xla_overhead(st, f, xla)
    _measure_top_op(st, f, legend)
    f.critical_share = sequence.critical_us / st.wall if st.wall else 0.0
    return judge(f)


def _measure_input(st: _Step, f: Facts, ops: np.ndarray) -> None:
    ev, names = st.trace.events, st.trace.strings.names
    f.input_wait_us = inputs.input_us(st.trace, st.waits, st.lo, st.hi, ops)
    f.input_ops = sorted({names[ev.op_type[i] or ev.name[i]] for i in st.waits})
    gn = [i for i in st.waits if tfops.is_get_next(names[ev.op_type[i] or ev.name[i]])]
    if gn:
        f.get_next_us = float(sum(ev.dur[i] for i in gn))


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
        nxt = _name(tr, before) or ("the next step (the time between two steps counts to "
                                    "the earlier one)" if not last else "")
        f.gaps.append({"start_us": float(gs[k] - st.lo), "dur_us": float(ge[k] - gs[k]),
                       "after": _name(tr, after), "before": nxt})


#: Thread roles whose work can serialise a step.
_WORKER_ROLES = ("inter_op", "tf_data", "eigen", "reader", "runtime", "other")


def _measure_rows(st: _Step, f: Facts, legend: Legend) -> None:
    """The busiest row by work other than waiting for input (a long dequeue is not serial
    work), and how busy the others were."""
    ev = st.trace.events
    mine = np.flatnonzero((ev.step == st.choice.step.num) & rows.busy_mask(st.trace))
    mine = mine[~np.isin(mine, st.waits)]
    if legend.tids_are == "threads":
        workers = sorted(((f"{p.name} {ln.name}", st.busy_share(
            mine[(ev.pid[mine] == p.pid) & (ev.tid[mine] == ln.tid)]))
            for p in legend.processes for ln in p.lanes
            if ln.role in _WORKER_ROLES and ln.events), key=lambda x: -x[1])
        if workers:
            f.busiest_row, f.busiest_share = workers[0]
            f.worker_rows = len(workers)
            rest = [s for _, s in workers[1:]]
            f.others_share = float(np.mean(rest)) if rest else 0.0
        return
    hosts = [p for p in legend.processes if p.role == "cpu_ops" and p.events]
    if hosts:
        shares = [st.busy_share(mine[ev.pid[mine] == p.pid]) for p in hosts]
        k = int(np.argmax(shares))
        f.busiest_row = rows.device_of(hosts[k].name)
        f.busiest_share, f.parallelism = shares[k], hosts[k].parallelism
        f.worker_rows = len(hosts[k].lanes)


def _measure_gpu(st: _Step, f: Facts, legend: Legend) -> None:
    """The share of the step the GPU ran kernels (copies left out)."""
    gpu_rows = [p for p in legend.processes if p.role in ("gpu_stream_all", "gpu_stream",
                                                          "gpu_device")]
    if not gpu_rows:
        return
    ev, names = st.trace.events, st.trace.strings.names
    pids = [p.pid for p in gpu_rows if p.role == "gpu_stream_all"] or [p.pid for p in gpu_rows]
    k = np.flatnonzero((ev.step == st.choice.step.num) & np.isin(ev.pid, pids)
                       & rows.busy_mask(st.trace))
    k = k[[not names[ev.name[i]].startswith(MEMCPY_PREFIX) for i in k]] if len(k) else k
    f.gpu_busy_share = st.busy_share(k)


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
            f.xla_overhead_us += float(ev.dur[i])


def _measure_top_op(st: _Step, f: Facts, legend: Legend) -> None:
    """The op with the most self time (compiles and input have findings of their own)."""
    tops = [t for t in legend.top_ops if t.category != "xla_compile" and
            not tfops.is_input_op(t.op, t.op)]
    if tops:
        t = tops[0]
        f.top_op, f.top_op_where, f.top_op_count, f.top_op_share, f.top_op_category = (
            t.op, t.where, t.count, t.share, t.category)
        f.top_op_name, f.top_op_name_share = t.largest, t.largest_us / st.wall


def step_compile_us(trace: Trace, xla: XlaSummary, choice: StepChoice) -> float:
    """Wall time of the step spent compiling: the union of its compile calls (clusters compile
    in parallel on several threads), each counted from its start for its compile time."""
    ev = trace.events
    calls = [(ev.ts[i], us) for i, _, us in xla.compile_calls if ev.step[i] == choice.step.num]
    if not calls:
        return 0.0
    ts = np.array([c[0] for c in calls])
    return intervals.union_us(ts, ts + np.array([c[1] for c in calls]), choice.lo, choice.hi)


def _name(trace: Trace, idx: np.ndarray) -> str:
    if not len(idx):
        return ""
    i = idx[np.argmax(trace.events.dur[idx])]
    return trace.s(trace.events.tf_name[i]) or trace.s(trace.events.name[i])
