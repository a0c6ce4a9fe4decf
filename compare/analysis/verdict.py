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
  Waiting is not work: input waits and what nests in them, events known to block on other
  threads and ops that compute nothing (NoOp) never make a row busy.
- GPU idle: the GPU ran kernels less than half of the step; said as the effect of a high
  input, copy, communication or overhead finding when there is one.
- copy: GPU copies with no kernel beside them, from 10 % of the step; the bottleneck from 50 %.
- overhead: a long ``_SOURCE`` that is not a GPU being set up (the run's start-up cost), from
  20 % of the step; the bottleneck from 50 %.
- one-time work (a first run): autotuning, one call far longer than the others of its type, a
  compile, a ``_SOURCE`` of 10 ms or more on a GPU; the other findings of such a step are
  judged again on the rest of it (without those stretches), as facts without advice.
- compute: one op execution takes half of the step or more (by self time): that op is it.

When several findings are high, one-time work, compilation, input, copies, communication, the
run's start-up and launching lead in that order (they cause the others: a GPU idling while XLA
compiles, a first ``_XlaLaunch`` that is mostly compile); otherwise the largest share leads.
:func:`judge` turns measured :class:`Facts` into a :class:`Verdict`; :func:`assess` measures
the facts from a trace. They are split so the thresholds can be checked on constructed facts.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from common.stages import PIPELINE_STAGES, stage_of_scope
from compare.analysis import evidence, inputs, rows
from compare.analysis.evidence import Communication, Copies, Launch, OneTime, RunStart
from compare.analysis.legend import WHERE, Legend
from compare.analysis.sequence import Sequence
from compare.analysis.steps import StepChoice
from compare.analysis.xla import XlaSummary
from compare.fmt import duration as ms
from compare.fmt import listed
from compare.model import intervals
from compare.model.events import CAT, CATEGORIES, Trace
from compare.model.lanes import keys
from compare.vocabulary import ops as tfops
from compare.vocabulary.thresholds import (
    AUTOTUNE_KERNELS,
    COMM_BOUND,
    COMM_NOTABLE,
    COMPILE_DOMINATES,
    COMPILE_MIN_US,
    COMPILE_NOTABLE,
    COMPUTE_DOMINATES,
    COMPUTE_NOTABLE,
    COMPUTE_SHOWN,
    COPY_BOUND,
    COPY_NOTABLE,
    FIRST_STEP_FACTOR,
    GETNEXT_OK_US,
    GPU_IDLE,
    IDLE_BOUND,
    IDLE_NOTABLE,
    INPUT_HIGH,
    INPUT_MODERATE,
    LAUNCH_MIN_KERNELS,
    LAUNCH_ROW_BUSY,
    LAUNCH_SHORT_US,
    MOSTLY,
    OFF_PATH,
    ONE_TIME_LEADS,
    RUN_START_BOUND,
    RUN_START_NOTABLE,
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
    gpu_busiest: str = ""                  # which GPU gpu_busy_share is of, and over what
    feeds: list[str] = dataclasses.field(default_factory=list)   # feed_dict placeholders
    steps_from: str = ""                   # how the trace's steps were found
    window: str = "step"                   # what wall_us is, in words ("step", or the rest)
    seed_pipeline: bool = False            # the trace is our own seed pipeline's
    #: tf.data iterators producing on threads of their own (Prefetch, ParallelMap...) that the
    #: step's input waits blocked in: the consumer waited for elements other threads make
    input_waits_on: list[str] = dataclasses.field(default_factory=list)
    input_inline_us: float = 0.0           # the pipeline's own ops run inside the waits
    input_producers: str = ""              # "recorded", "not recorded", "" (not known)


@dataclasses.dataclass
class Finding:
    kind: str      # one_time, input, compile, recompile, copy, communication, overhead,
                   # launch, idle, serialised, gpu_idle, xla_overhead, compute, no_data
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
    out = [_caused(x, out) for x in out]
    if any(x.kind == "one_time" and x.level == "high" for x in out):
        judged = _REJUDGED if f.rest is not None else ()
        out = [_in_a_first_run(x) for x in out if x.kind not in judged] + \
            _without_one_time(f, cls)
    return _lead(out, f, cls)


#: What keeps a GPU idle when it is high: an idle GPU is then its effect, not a finding.
_GPU_IDLE_CAUSES = {"input": "the input above", "copy": "the copies above",
                    "communication": "the collectives above",
                    "overhead": "the run's start-up above"}


def _caused(x: Finding, out: list[Finding]) -> Finding:
    """An idle GPU while a high finding explains it: said as that finding's effect."""
    if x.kind != "gpu_idle":
        return x
    cause = next((_GPU_IDLE_CAUSES[y.kind] for y in out
                  if y.level == "high" and y.kind in _GPU_IDLE_CAUSES), None)
    if cause is None:
        return x
    return dataclasses.replace(x, level="info", try_next="",
                               text=f"The GPU ran kernels {_pct(1 - x.share)} of the step: "
                                    f"it waited for {cause}.")


def _pct(share: float) -> str:
    """A small share in words: "under 1%" rather than "0%" for a little, else "only N%"."""
    return "under 1%" if 0 < share < 0.005 else f"only {share:.0%}"


#: Findings judged again on the rest of a first step, without its one-time work.
_REJUDGED = ("launch", "gpu_idle", "idle", "compute")


def _without_one_time(f: Facts, cls: str) -> list[Finding]:
    """The distorted findings judged on the step without its one-time work (``f.rest``): what
    the rest of this run shows, stated beside the first-run finding, never above it."""
    r = f.rest
    if r is None:
        return []
    rules = {"launch": _launch, "gpu_idle": _gpu_idle, "idle": _idle, "compute": _compute}
    out = []
    for kind in _REJUDGED:
        for x in rules[kind](r, cls):
            # facts about the rest, not advice: only a later step shows what to optimise
            out.append(dataclasses.replace(
                x, level="moderate" if x.level == "high" else x.level, try_next="",
                text=f"Without the one-time work ({ms(f.wall_us - r.wall_us)}), in the rest "
                     f"of the step ({ms(r.wall_us)}): {x.text}"))
    return out


#: Findings a first run's one-time work distorts (autotuning blocks the launch row, a
#: first call's set-up is "the largest op"): stated for what they are, not judged.
_DISTORTED_BY_ONE_TIME = ("launch", "compute", "gpu_idle", "idle", "serialised")


def _in_a_first_run(x: Finding) -> Finding:
    if x.kind not in _DISTORTED_BY_ONE_TIME:
        return x
    return dataclasses.replace(x, level="info", try_next="",
                               text=f"In this first run (one-time work included): {x.text}")


def _input(f: Facts, cls: str) -> list[Finding]:
    share = f.input_wait_us / (f.wall_us or 1.0)
    ops = listed(f.input_ops) or "input ops"
    waiting = "waiting for or reading" if tfops.reads_input(f.input_ops) else "waiting for"
    if cls == "not input-bound":
        why = (f"IteratorGetNext took {ms(f.get_next_us)} ({ms(GETNEXT_OK_US)} or less: the input is "
               f"ready when the step asks)" if f.get_next_us is not None and
               f.get_next_us <= GETNEXT_OK_US else
               f"{waiting} input ({ops}) took {ms(f.input_wait_us)}, {share:.0%} of the "
               f"step (under {INPUT_MODERATE:.0%})" if f.input_wait_us else _no_input_words(f))
        head = "Not input-bound" if f.input_wait_us or not f.feeds else \
            "Input cannot be judged from this trace"
        return [Finding("input", "low", share, f"{head}: {why}.", "")]
    tfdata = any(tfops.is_get_next(o) for o in f.input_ops)
    fix = ("add .prefetch(tf.data.AUTOTUNE) at the end of the tf.data pipeline, run map "
           "with num_parallel_calls=tf.data.AUTOTUNE, .cache() decoded data if it fits, "
           "and read files with interleave; TensorBoard's input-pipeline page shows the "
           "slow tf.data stage" if tfdata else
           "move reading and decoding into tf.data (parallel map with num_parallel_calls="
           "tf.data.AUTOTUNE, then .prefetch(tf.data.AUTOTUNE)); while on queues, give "
           "the queue runners more threads (tf.train.batch(..., num_threads=N)) and a "
           "larger capacity so a dequeue finds data waiting")
    if f.input_waits_on:
        fix = (f"the pipeline already produces ahead ({listed(f.input_waits_on)}), so its "
               f"producer is too slow: run its map with num_parallel_calls=tf.data.AUTOTUNE, "
               f"read files with interleave, .cache() what repeats each epoch (a "
               f"Dataset.from_generator source runs Python on one thread: move that work into "
               f"tf.data ops); TensorBoard's input-pipeline page names the slow stage")
    level = "high" if cls == "highly input-bound" else "moderate"
    return [Finding("input", level, share,
                    f"{cls.capitalize()}: the step spent {ms(f.input_wait_us)} {waiting} "
                    f"input ({ops}), {share:.0%} of its {ms(f.wall_us)} (thresholds: "
                    f"{INPUT_MODERATE:.0%} moderately, {INPUT_HIGH:.0%} highly)."
                    + _input_detail(f), fix)]


def _input_detail(f: Facts) -> str:
    """What the trace shows of why the step waited: the buffer it blocked on, whether the
    threads filling it were recorded, and whether one step can tell."""
    out = ""
    if f.input_waits_on:
        out += (f" The consumer blocked in tf.data's {listed(f.input_waits_on)} buffer: the "
                f"step's thread did no input work of its own while it waited for elements "
                f"other threads produce")
        out += ({"not recorded": "; those producer threads recorded nothing in this trace, so "
                                 "which stage is slow cannot be seen here",
                 "recorded": "; the producer threads' work is in the trace (tf.data rows)"}
                .get(f.input_producers, "")) + "."
    elif f.input_inline_us:
        out += (f" Of the wait, {ms(f.input_inline_us)} ran the pipeline's own ops on the "
                f"step's thread (nothing produced elements ahead of the step).")
    if f.one_time.steps == 1:
        out += (" This is the only step in the trace, so it cannot tell a slow pipeline from "
                "one still starting up (a shuffle buffer filling, files opening, a generator's "
                "first elements): profile several later steps to tell.")
    return out


def _no_input_words(f: Facts) -> str:
    if f.feeds:
        return (f"the step runs no input op; it is fed through feed_dict ("
                f"{', '.join(f.feeds)}), and that feeding (Python preparing and copying the "
                f"arrays before each run) happens outside what the trace records")
    return ("the step shows no input op (no IteratorGetNext, queue dequeue or reader op); "
            "input prepared outside the traced run (in Python, before it) is not in the trace")


def _one_time(f: Facts, cls: str) -> list[Finding]:
    o = f.one_time
    compile_share = f.compile_us / (f.wall_us or 1.0)
    signs = _one_time_signs(f)
    if not o.first_step:
        if o.first_over_rest >= FIRST_STEP_FACTOR:
            return [Finding("one_time", "info", 0.0,
                            f"The trace's first step took {o.first_over_rest:.0f}x the median "
                            f"of the later ones: it carries one-time work (warm-up, "
                            f"autotuning, compilation); this step, a later one, does not.", "")]
        return []
    share = evidence.one_time_share(o, compile_share)
    if not signs:
        return []
    what = "the trace's only step" if o.only_step else "the trace's first step"
    level = "high" if share >= ONE_TIME_LEADS else "moderate"
    return [Finding(
        "one_time", level, share,
        f"First run: this is {what}, and it shows one-time work: {'; '.join(signs)}. That "
        f"work ({share:.0%} of the step) is paid once; it says nothing of what a later step "
        f"costs.",
        "profile a later step (skip the first: e.g. TensorBoard's profile_batch='10,20', or "
        "trace session run 10 rather than the first) and judge speed there"
        + ("; cuDNN autotunes once per shape, so a later step runs the tuned algorithms "
           "(TF_CUDNN_USE_AUTOTUNE=0 skips the search, but then every step runs cuDNN's "
           "default algorithms, which may be slower: not the tuned steady cost)"
           if o.autotune_nodes else ""))]


def _one_time_signs(f: Facts) -> list[str]:
    o = f.one_time
    out = []
    if o.autotune_nodes:
        out.append(f"cuDNN/cuBLAS autotuning: {o.kernels} GPU kernels for {o.kernel_ops} op "
                   f"executions, {o.autotune_kernels} for {o.autotune_node} alone "
                   f"({o.autotune_nodes} execution(s) launched {AUTOTUNE_KERNELS} or more; a "
                   f"steady call launches a few)")
    if o.outlier_node:
        out.append(f"one {o.outlier_op} call, {o.outlier_node}, took {ms(o.outlier_us)} while "
                   f"its other calls took {ms(o.outlier_others_us)} (median): a first call "
                   f"setting up its library")
    if o.launch_setup:
        parts = [f"{node} {ms(launch)} (its kernels {ms(kernels)})"
                 for node, launch, kernels in o.launch_setup[:3]]
        out.append("the first launches of GPU ops took far longer than their kernels ran: "
                   + ", ".join(parts) + " (CUDA, cuBLAS or cuDNN setting up on first use; "
                   "a later launch takes microseconds)")
    if f.compile_us >= COMPILE_MIN_US:
        out.append(f"XLA compilation, {ms(f.compile_us)}")
    if o.source_us:
        out.append(f"the run's _SOURCE node on the GPU took {ms(o.source_us)} (the GPU being "
                   f"set up in this run: a later run's takes microseconds)")
    if o.first_step and o.first_over_rest >= FIRST_STEP_FACTOR:
        out.append(f"the step took {o.first_over_rest:.0f}x the median of the later steps")
    if out and o.iterators:
        out.append(f"the input pipeline was created in it ({', '.join(o.iterators)})")
    return out


def _run_start(f: Facts, cls: str) -> list[Finding]:
    r = f.run_start
    if not r.us or r.share < RUN_START_NOTABLE:
        return []
    level = "high" if r.share >= RUN_START_BOUND else "moderate"
    return [Finding(
        "overhead", level, r.share,
        f"Per-run overhead: before the first op ran, the run's _SOURCE node on {r.row} took "
        f"{ms(r.us)}, {r.share:.0%} of the step: the executor starting the session run "
        f"(scheduling its first ops), a fixed cost every run pays; nothing else here marks "
        f"this run as a first one. A step this short is dominated by it.",
        "give each session.run more work, so its fixed start-up cost is shared: a larger "
        "batch, or several training steps per run (a tf.while_loop over the step, or TF2 "
        "with tf.function and Keras steps_per_execution)")]


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
        f"Recompilation: {listed(f.recompiled)} compiled more than once in this trace, "
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
        f"Idle gaps: for {ms(f.idle_us)} ({share:.0%} of the {f.window}) no op of this step "
        f"ran{where}.",
        "find what the host did in the gap: in the trace viewer, look at the Python thread "
        "and the other host threads around it (Python code between calls, Keras callbacks, "
        "a synchronisation with the GPU, another process using the CPU)"
        if f.tids_are == "threads" else
        "find what the executor waited for: profile the same steps with the TensorBoard "
        "profiler (tf.profiler.experimental.start/stop), which shows every host thread; "
        "usual causes are queue-runner threads or other session runs competing for the "
        "CPU, Python between ops (feed_dict) and the time between session runs")]


def _serialised(f: Facts, cls: str) -> list[Finding]:
    wall = f.wall_us or 1.0
    if f.tids_are == "threads":
        # a thread launching one GPU's kernels is busy by design: launch and compute judge it
        serial = (f.worker_rows >= 2 and f.busiest_share >= SERIAL_BUSY and
                  f.others_share < SERIAL_OTHERS and
                  not any(t in f.busiest_row for t in tfops.GPU_LAUNCH_THREADS))
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
    if not serial or _launch(f, cls):  # a thread busy launching kernels: launch says it
        return []
    return [Finding(
        "serialised", "high" if f.busiest_share >= 0.8 else "moderate", f.busiest_share,
        f"One row serialises the work: {what}.",
        "let independent ops overlap: raise ConfigProto(inter_op_parallelism_threads=N) (TF2: "
        "tf.config.threading.set_inter_op_parallelism_threads), and run per-element input "
        "work in parallel (tf.data map with num_parallel_calls=tf.data.AUTOTUNE)"
        + ("; the seed's five crops do not depend on each other, so they can run side by "
           "side" if f.seed_pipeline else ""))]


def _communication(f: Facts, cls: str) -> list[Finding]:
    c = f.communication
    if not c.count:
        return []
    level = ("high" if c.exposed_share >= COMM_BOUND else
             "moderate" if c.exposed_share >= COMM_NOTABLE else "info")
    return [Finding(
        "communication", level, c.exposed_share,
        f"Communication: {c.count} collective(s) ({', '.join(c.ops[:4])}) cover "
        f"{c.share:.0%} of the step (wall; {ms(c.summed_us)} summed over their overlapping "
        f"boxes); for {c.exposed_share:.0%} of the step nothing else ran beside them"
        + (", so the step waited for them." if c.exposed_share >= COMM_NOTABLE else
           ": they overlapped other work, so the step hardly waited for them."),
        "overlap communication with computation (all-reduce each gradient as soon as it is "
        "ready, as tf.distribute's MirroredStrategy does; bucket small gradients), give each "
        "replica more work per step (a larger per-replica batch), and keep collectives on "
        "NCCL over NVLink where the devices have it")]


def _copy(f: Facts, cls: str) -> list[Finding]:
    c = f.copies
    if not c.count or c.exposed_share < COPY_NOTABLE:
        return []
    level = "high" if c.exposed_share >= COPY_BOUND else "moderate"
    kinds = ", ".join(f"{n} {d}" for d, n in sorted(c.by_direction.items(), key=lambda x: -x[1]))
    what = {"input": " (the input batch)", "host": " (made on the host in this run)"}.get(
        c.largest_source, "")
    host = (f" The host's own copy calls held a host thread for {ms(c.host_us)} (staging "
            f"pageable memory, such as numpy arrays, before the transfer)." if c.host_us else "")
    return [Finding(
        "copy", level, c.exposed_share,
        f"Copies: {c.count} cop{'y' if c.count == 1 else 'ies'} ({kinds}) cover "
        f"{c.share:.0%} of the {f.window}, and for {c.exposed_share:.0%} of the {f.window} "
        f"the GPU ran no kernel beside them: the step waited for data to move, not for GPU "
        f"compute. The largest took {ms(c.largest_us)}"
        + (f" ({c.largest_direction})" if c.largest_direction else "")
        + (f": {c.largest}{what}." if not rows.is_copy(c.largest) else ".") + host,
        _copy_advice(c))]


def _copy_advice(c: Copies) -> str:
    if c.largest_source == "host":
        return ("keep that tensor on the GPU instead of making it on the host and copying it "
                "every run: place the op that produces it on the GPU, or store the result as a "
                "variable or constant on the GPU once (weights dequantized or converted on the "
                "CPU in every run are the usual case)")
    overlap = ("overlap the copy with compute: end the input pipeline with "
               "tf.data.experimental.prefetch_to_device('/gpu:0') (or copy_to_device then "
               "prefetch) so the next batch moves while this step computes, and send less: "
               "uint8 images instead of float32 (cast on the GPU) are 4x smaller")
    if c.largest_source == "input":
        return overlap
    return (overlap + "; if the copied data are weights or constants rather than the batch, "
            "keep them on the GPU instead of copying them every step")


def _launch(f: Facts, cls: str) -> list[Finding]:
    la, gpu = f.launch, f.gpu_busy_share
    if gpu is None or gpu >= GPU_IDLE or la.busy_share < LAUNCH_ROW_BUSY or \
            la.kernels < LAUNCH_MIN_KERNELS or la.kernel_median_us >= LAUNCH_SHORT_US:
        return []
    ops = (f"; {la.host_ops} ops, {la.host_ops_short} of them under {LAUNCH_SHORT_US:.0f} us"
           if la.host_ops >= LAUNCH_MIN_KERNELS else "")
    xla = f.tiny_clusters or "_XlaLaunch" in f.top_op or f.top_op_category == "xla_run"
    return [Finding(
        "launch", "high", la.busy_share,
        f"Launch-bound: {la.row} {'was' if f.tids_are == 'lanes' else 'were'} busy "
        f"{la.busy_share:.0%} of the {f.window}{ops}, while the GPU ran its {la.kernels} "
        f"kernels (median {ms(la.kernel_median_us)}) only {gpu:.0%} of it and idled between "
        f"them: "
        f"the step costs the host's time to launch many small ops, not GPU work or input.",
        ("give each launch more work: a larger batch; XLA is on already, so make the "
         "compiled clusters larger (one tf.function(jit_compile=True) over the whole step) "
         "and keep small host-side ops out of the GPU path" if xla else
         "launch fewer, larger ops: compile the step with XLA (tf.function(jit_compile=True), "
         "or TF1 global_jit_level ON_1) so small ops fuse into few kernels, use a larger "
         "batch so each kernel does more, and run several steps per call (Keras "
         "steps_per_execution)"))]


def _no_data(f: Facts, cls: str) -> list[Finding]:
    if not f.silent_rows:
        return []
    gpu_words = ("no GPU row recorded anything: the GPU tracer captured no kernel (it failed "
                 "to start, lacked permission, or the device ran nothing), so GPU time cannot "
                 "be judged from this trace" if f.gpu_rows and not f.gpus_recorded else
                 "nothing can be said of the devices behind them")
    names = ", ".join(f.silent_rows[:6]) + (f" and {len(f.silent_rows) - 6} more"
                                            if len(f.silent_rows) > 6 else "")
    # GPUs that recorded nothing while the host mostly waited: the step cannot be judged (its
    # waits are for GPU work the trace does not hold), so that is what leads; a host that ran
    # the step's ops itself (a CPU-only run beside an empty GPU row) is judged as usual
    blind = bool(f.gpu_rows and not f.gpus_recorded) and f.compute_share < MOSTLY
    return [Finding(
        "no_data", "high" if blind else "info", 1.0 if blind else 0.0,
        f"Recorded nothing: {len(f.silent_rows)} row(s) hold only their names ({names}); "
        f"{gpu_words}.",
        "re-profile with the GPU tracer working (check the profiler's log for CUPTI errors: "
        "the user needs permission to read GPU performance counters) to judge those devices")]


def _gpu_idle(f: Facts, cls: str) -> list[Finding]:
    if f.gpu_busy_share is None or f.gpu_busy_share >= GPU_IDLE or _launch(f, cls) or \
            f.communication.exposed_share >= COMM_BOUND:
        return []  # a launch-bound step, or one waiting on collectives, says why the GPU idles
    return [Finding(
        "gpu_idle", "high" if f.gpu_busy_share < 0.25 else "moderate", 1 - f.gpu_busy_share,
        f"The GPU is underused: it ran kernels {f.gpu_busy_share:.0%} of the {f.window} and "
        f"waited the remaining time (for input, copies or the host launching kernels).",
        "keep the GPU fed: prefetch to the device (tf.data.experimental.prefetch_to_device"
        " or .prefetch), larger batches, fewer and larger kernels (XLA: "
        "tf.function(jit_compile=True))")]


def _xla_overhead(f: Facts, cls: str) -> list[Finding]:
    if f.tiny_clusters < TINY_CLUSTERS_NOTABLE:
        return []
    return [Finding(
        "xla_overhead", "info", min(1.0, f.xla_overhead_us / (f.wall_us or 1.0)),
        f"XLA bookkeeping: {f.tiny_clusters} clusters run in under "
        f"{TINY_CLUSTER_US:.0f} us each; with their cache lookups (_XlaCompile) and merges "
        f"(_XlaMerge) that is {ms(f.xla_overhead_us)} per step spent on XLA plumbing.",
        "tiny clusters cost more to launch than they save: compile one larger function "
        "(tf.function(jit_compile=True)) or turn auto-clustering off for this graph")]


def _compute(f: Facts, cls: str) -> list[Finding]:
    if not f.top_op or (not f.device_bound and
                        max(f.top_op_share, f.compute_share) < COMPUTE_SHOWN):
        return []  # ops that hardly ran: other findings say where the time went
    what = f"XLA clusters ({f.top_op})" if f.top_op_category == "xla_run" else f.top_op
    calls = (f"{f.top_op_count} {'kernels' if f.top_op_where == 'GPU' else 'executions'}; "
             f"the longest, {f.top_op_name}, {f.top_op_name_share:.0%}"
             if f.top_op_count > 1 else f.top_op_name)
    advice = ("see which TF ops the cluster holds (question 2) and its kernels in the "
              "TensorBoard profiler; if it is slower than the same ops without XLA "
              "(global_jit_level OFF), keep those ops out of the cluster"
              if f.top_op_category == "xla_run" else
              "make the GPU's work cheaper: fuse small kernels with XLA (jit_compile=True), "
              "use mixed precision (tf.keras.mixed_precision 'mixed_float16') on tensor-core "
              "GPUs, and check the largest GPU ops in TensorBoard's kernel stats"
              if f.device_bound else
              "make it cheaper (smaller inputs, a faster kernel, fewer calls) or take it off "
              "the critical path")
    share = f.gpu_busy_share if f.device_bound else max(f.top_op_share, f.compute_share)
    high = f.device_bound or f.top_op_share >= COMPUTE_DOMINATES or (
        f.compute_share >= COMPUTE_DOMINATES and f.top_op_share >= COMPUTE_NOTABLE)
    ops_words = "Ops other than input waits" if f.input_wait_us else "Ops"
    copies = (f" (and copies alone another {f.copies.exposed_share:.0%})"
              if f.copies.exposed_share >= 0.05 else "")
    where = (f"Device-bound: {f.gpu_busiest or 'the GPU'} ran kernels "
             f"{f.gpu_busy_share:.0%} of the time{copies}. "
             if f.device_bound else
             f"{ops_words} ran {f.compute_share:.0%} of the {f.window} (wall). "
             if f.compute_share else "")
    if f.top_op_const_inputs and not f.device_bound:
        advice = ("its inputs are all constants, so it computes the same result in every run: "
                  "compute it once and keep the result (a variable initialised with it, or a "
                  "constant saved in its place) instead of recomputing it per step")
    return [Finding(
        "compute", "high" if high else "info", share,
        f"{where}The largest cost is {what} on the {f.top_op_where}: it covers "
        f"{f.top_op_share:.0%} of the {f.window} (wall time; its executions add up to "
        f"{ms(f.top_op_cpu_us)} of {'GPU' if f.top_op_where == 'GPU' else 'CPU'} time: "
        f"{calls})."
        + (f" The critical path covers {f.critical_share:.0%} of the {f.window}."
           if f.critical_share >= 0.01 else ""),
        f"start with {f.top_op_name or f.top_op}, the largest cost: {advice}")]


#: The finding rules, in the order findings are listed.
FINDINGS = (_one_time, _input, _compile, _recompile, _copy, _communication, _run_start,
            _launch, _idle, _serialised, _gpu_idle, _xla_overhead, _compute, _no_data)


def _lead(out: list[Finding], f: Facts, cls: str) -> Verdict:
    """The leading finding and the headline. When several are high, a compile and then an
    input wait lead (they cause the others: an idle GPU, a long first _XlaLaunch); else the
    largest share."""
    highs = [x for x in out if x.level == "high"]
    if highs:
        lead = min(highs, key=lambda x: (_CAUSES.get(x.kind, len(_CAUSES)), -x.share))
        words = (f"The step is {cls} ({lead.share:.0%} of the step)" if lead.kind == "input"
                 else _compute_words(f, lead.share) if lead.kind == "compute" else
                 f"The step is mostly waiting, in idle gaps ({lead.share:.0%} of the step)"
                 if lead.kind == "idle" and lead.share >= MOSTLY else
                 f"The GPU is idle {lead.share:.0%} of the step (it ran kernels "
                 f"{f.gpu_busy_share:.0%} of it)" if lead.kind == "gpu_idle" else
                 _WORDS[lead.kind] if lead.kind == "no_data" else
                 f"{_WORDS[lead.kind]} ({lead.share:.0%} of the step)")
        headline = words + (f"; input: {_said(f, cls)}." if lead.kind != "input" else ".")
        return Verdict(lead.kind, headline, cls, out, f)
    cands = sorted((x for x in out if x.level == "moderate" and x.share > 0 or
                    x.kind == "compute" and x.share >= COMPUTE_NOTABLE),
                   key=lambda x: -x.share)
    if not cands:
        silent = [x for x in out if x.kind == "no_data"]
        if silent:
            return Verdict("no_data", f"Nothing stands out in what was recorded, and some rows "
                                      f"recorded nothing (see below); input: {_said(f, cls)}.",
                           cls, out, f)
        return Verdict("none", f"Nothing stands out; input: {_said(f, cls)}.", cls, out, f)
    parts = [_phrase(x, f, cls) for x in cands[:3]]
    tail = f"; input: {_said(f, cls)}" if not any(x.kind == "input" for x in cands[:3]) else ""
    return Verdict(cands[0].kind, "No single bottleneck: " + "; ".join(parts) + tail + ".",
                   cls, out, f)


def _compute_words(f: Facts, share: float) -> str:
    """The compute headline: how much of the step computed, and the largest op (its own share
    is in the finding)."""
    if f.device_bound:
        return (f"The step is device-bound: the GPU ran kernels {share:.0%} of the time, most "
                f"in {f.top_op} ({f.top_op_share:.0%} of the step)")
    return (f"The step is busy computing: ops ran {share:.0%} of it, most in {f.top_op} on the "
            f"{f.top_op_where} ({f.top_op_share:.0%})")


def _said(f: Facts, cls: str) -> str:
    """The input class in a headline; a feed_dict step's input is outside the trace."""
    if f.feeds and not f.input_wait_us:
        return "fed by feed_dict, outside what the trace records"
    return cls


#: When several findings are high, the cause leads: one-time work of a first run, then a
#: compile, an input wait, communication and launching (they cause an idle GPU, idle gaps).
_CAUSES = {"no_data": -1, "one_time": 0, "compile": 1, "input": 2, "copy": 3,
           "communication": 4, "overhead": 5, "launch": 6}
_WORDS = {
    "one_time": "This is a first run dominated by one-time work: profile a later step",
    "compile": "The step is compile-bound",
    "communication": "The step waits on communication (collectives)",
    "launch": "The step is launch-bound: many small ops, the GPU idling between them",
    "overhead": "The step is mostly per-run overhead, the session run's fixed start-up cost",
    "copy": "The step waits on GPU copies, data moving between host and GPU",
    "idle": "The step waits much of the time, in idle gaps",
    "serialised": "One row serialises the step",
    "gpu_idle": "The GPU is idle most of the step",
    "recompile": "XLA recompiles",
    "no_data": "This trace holds no device data: its GPU rows recorded nothing, so the step "
               "cannot be judged; what the host shows is below",
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
        "one_time": f"one-time work of a first run {x.share:.0%}",
        "communication": f"waiting on collectives {x.share:.0%}",
        "launch": f"launching small ops {x.share:.0%}",
        "overhead": f"the run's start-up {x.share:.0%}",
        "copy": f"GPU copies with no kernel beside them {x.share:.0%}",
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

    def row_shares(self, k: np.ndarray, pids: list[int], tids: list[int] | None = None
                   ) -> np.ndarray:
        """:meth:`busy_share` of the events ``k`` on each row: process ``pids[j]`` (and thread
        ``tids[j]`` when given), all rows measured at once."""
        ev = self.trace.events
        if not self.wall or not pids:
            return np.zeros(len(pids))
        if tids is None:
            mine, rows_ = keys(ev.pid[k], np.zeros(len(k)), (pids, np.zeros(len(pids))))
        else:
            mine, rows_ = keys(ev.pid[k], ev.tid[k], (pids, tids))
        order = np.argsort(rows_, kind="stable")
        at = np.searchsorted(rows_[order], mine)
        hit = np.flatnonzero(at < len(order))
        hit = hit[rows_[order][at[hit]] == mine[hit]]
        busy = intervals.union_per_group(order[at[hit]], ev.ts[k[hit]],
                                         ev.ts[k[hit]] + ev.dur[k[hit]], self.lo, self.hi,
                                         len(pids))
        return busy / self.wall


def assess(trace: Trace, choice: StepChoice, xla: XlaSummary, legend: Legend,
           sequence: Sequence) -> Verdict:
    """Measure the facts of the chosen step and judge them."""
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
    return judge(f)


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
    gn = [i for i in st.waits if tfops.is_get_next(names[ev.op_type[i] or ev.name[i]])]
    if gn:
        gn = np.array(gn, np.int64)
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
        nxt = _name(tr, before) or ("the next step (the time between two steps counts to "
                                    "the earlier one)" if not last else "")
        f.gaps.append({"start_us": float(gs[k] - st.lo), "dur_us": float(ge[k] - gs[k]),
                       "after": _name(tr, after), "before": nxt})


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
        shares = [float(s) for s in st.row_shares(mine, [p.pid for p in hosts])]
        k = int(np.argmax(shares))
        f.busiest_row = rows.device_of(hosts[k].name)
        f.busiest_share, f.parallelism = shares[k], hosts[k].parallelism
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
            f.gpu_busiest = f"{d.device}, the busiest GPU, " + (
                "over its own step row" if d.own_window else "over the step")


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
    return k[~np.isin(ev.op_type[k], idle_ops) & ~np.isin(ev.name[k], copies)]


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
