"""The bottleneck verdict in words (:class:`compare.analysis.verdict.Verdict`): each finding's
sentence and what to try next, and the headline. explain's text, its ``--json`` and report.md's
answers read these; the facts and the judgement are :mod:`compare.analysis.facts` and
:mod:`compare.analysis.verdict`'s."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from compare.analysis.evidence import HOST_LAUNCH_THREADS, Copies
from compare.analysis.facts import Facts
from compare.analysis.verdict import Finding, Verdict
from compare.fmt import duration as ms
from compare.fmt import listed
from compare.vocabulary.thresholds import (
    AUTOTUNE_KERNELS,
    GETNEXT_OK_US,
    INPUT_HIGH,
    INPUT_MODERATE,
    LAUNCH_SHORT_US,
    TINY_CLUSTER_US,
)

#: Copies beside the GPU's kernels worth a mention in a device-bound finding (share of the step).
COPIES_MENTIONED = 0.05

Words = tuple[str, str]   # (the finding's sentence, what to try next; "" for none)


def headline(v: Verdict) -> str:
    """The verdict's first sentence."""
    f, cls = v.facts, v.input_class
    if v.lead == "lead" and v.leader is not None:
        x = v.findings[v.leader]
        return _lead_words(v, x) + (f"; input: {_said(f, cls)}." if x.kind != "input" else ".")
    if v.lead == "several":
        named = [v.findings[i] for i in v.named]
        tail = f"; input: {_said(f, cls)}" if not any(x.kind == "input" for x in named) else ""
        return ("No single bottleneck: " + "; ".join(_phrase(x, f, cls) for x in named) + tail
                + ".")
    if v.lead == "silent":
        return (f"Nothing stands out in what was recorded, and some rows recorded nothing (see "
                f"below); input: {_said(f, cls)}.")
    return f"Nothing stands out; input: {_said(f, cls)}."


def text(v: Verdict, x: Finding) -> str:
    """The finding's sentence."""
    return words(v, x)[0]


def try_next(v: Verdict, x: Finding) -> str:
    """What to try next about it ("" for a finding without advice)."""
    return words(v, x)[1] if x.advised else ""


def words(v: Verdict, x: Finding) -> Words:
    """The finding's sentence and its advice (the advice as the rule words it, whether or not
    the finding carries it: :func:`try_next` says)."""
    f = v.facts
    if x.cause:
        said, advice = (f"The GPU ran kernels {_pct(1 - x.share)} of the step: it waited for "
                        f"{_CAUSE_WORDS[x.cause]}.", "")
    else:
        said, advice = _RULES[x.kind](x, x.facts(f), v.input_class)
    if x.context == "rest" and f.rest is not None:
        said = (f"Without the one-time work ({ms(f.wall_us - f.rest.wall_us)}), in the rest of "
                f"the step ({ms(f.rest.wall_us)}): {said}")
    elif x.context == "first_run":
        said = f"In this first run (one-time work included): {said}"
    return said, advice


def as_dict(v: Verdict) -> dict[str, Any]:
    """The verdict as data with its words (``compare.explain --json``): bottleneck, headline,
    input class, each finding with its ``text`` and ``try_next``, the facts."""
    return {"bottleneck": v.bottleneck, "headline": headline(v), "input_class": v.input_class,
            "findings": [{**dataclasses.asdict(x), "text": text(v, x),
                          "try_next": try_next(v, x)} for x in v.findings],
            "facts": dataclasses.asdict(v.facts)}


# --------------------------------------------------------------------------------------------
# the headline

#: What keeps a GPU idle, said as the cause of an idle GPU.
_CAUSE_WORDS = {"input": "the input above", "copy": "the copies above",
                "communication": "the collectives above", "overhead": "the run's start-up above"}

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


def _lead_words(v: Verdict, x: Finding) -> str:
    f, cls = v.facts, v.input_class
    if x.kind == "input":
        return f"The step is {cls} ({x.share:.0%} of the step)"
    if x.kind == "compute":
        return _compute_words(f, x.share)
    if v.mostly_idle:
        return f"The step is mostly waiting, in idle gaps ({x.share:.0%} of the step)"
    if x.kind == "gpu_idle":
        return (f"The GPU is idle {x.share:.0%} of the step (it ran kernels "
                f"{f.gpu_busy_share or 0.0:.0%} of it)")
    if x.kind == "no_data":
        return _WORDS[x.kind]
    return f"{_WORDS[x.kind]} ({x.share:.0%} of the step)"


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


def _pct(share: float) -> str:
    """A small share in words: "under 1%" rather than "0%" for a little, else "only N%"."""
    return "under 1%" if 0 < share < 0.005 else f"only {share:.0%}"


# --------------------------------------------------------------------------------------------
# input

_INPUT_ADVICE = {
    "tfdata": "add .prefetch(tf.data.AUTOTUNE) at the end of the tf.data pipeline, run map "
              "with num_parallel_calls=tf.data.AUTOTUNE, .cache() decoded data if it fits, "
              "and read files with interleave; TensorBoard's input-pipeline page shows the "
              "slow tf.data stage",
    "queues": "move reading and decoding into tf.data (parallel map with num_parallel_calls="
              "tf.data.AUTOTUNE, then .prefetch(tf.data.AUTOTUNE)); while on queues, give "
              "the queue runners more threads (tf.train.batch(..., num_threads=N)) and a "
              "larger capacity so a dequeue finds data waiting",
}


def _input(x: Finding, f: Facts, cls: str) -> Words:
    ops = listed(f.input_ops) or "input ops"
    waiting = "waiting for or reading" if x.detail["reads"] else "waiting for"
    if x.case != "bound":
        why = (f"IteratorGetNext took {ms(f.get_next_us or 0.0)} ({ms(GETNEXT_OK_US)} or less: "
               f"the input is ready when the step asks)" if x.case == "ready" else
               f"{waiting} input ({ops}) took {ms(f.input_wait_us)}, {x.share:.0%} of the "
               f"step (under {INPUT_MODERATE:.0%})" if x.case == "under" else
               _no_input_words(f))
        head = "Not input-bound" if x.detail["judged"] else \
            "Input cannot be judged from this trace"
        return f"{head}: {why}.", ""
    fix = _INPUT_ADVICE.get(x.detail["advice"]) or (
        f"the pipeline already produces ahead ({listed(f.input_waits_on)}), so its "
        f"producer is too slow: run its map with num_parallel_calls=tf.data.AUTOTUNE, "
        f"read files with interleave, .cache() what repeats each epoch (a "
        f"Dataset.from_generator source runs Python on one thread: move that work into "
        f"tf.data ops); TensorBoard's input-pipeline page names the slow stage")
    return (f"{cls.capitalize()}: the step spent {ms(f.input_wait_us)} {waiting} input "
            f"({ops}), {x.share:.0%} of its {ms(f.wall_us)} (thresholds: "
            f"{INPUT_MODERATE:.0%} moderately, {INPUT_HIGH:.0%} highly)." + _input_detail(f),
            fix)


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


# --------------------------------------------------------------------------------------------
# one-time work, start-up, compiles

def _one_time(x: Finding, f: Facts, cls: str) -> Words:
    o = f.one_time
    if x.case == "later":
        return (f"The trace's first step took {o.first_over_rest:.0f}x the median of the later "
                f"ones: it carries one-time work (warm-up, autotuning, compilation); this "
                f"step, a later one, does not.", "")
    what = "the trace's only step" if o.only_step else "the trace's first step"
    signs = "; ".join(_one_time_sign(f, s) for s in x.detail["signs"])
    return (f"First run: this is {what}, and it shows one-time work: {signs}. That work "
            f"({x.share:.0%} of the step) is paid once; it says nothing of what a later step "
            f"costs.",
            "profile a later step (skip the first: e.g. TensorBoard's profile_batch='10,20', or "
            "trace session run 10 rather than the first) and judge speed there"
            + ("; cuDNN autotunes once per shape, so a later step runs the tuned algorithms "
               "(TF_CUDNN_USE_AUTOTUNE=0 skips the search, but then every step runs cuDNN's "
               "default algorithms, which may be slower: not the tuned steady cost)"
               if o.autotune_nodes else ""))


def _one_time_sign(f: Facts, key: str) -> str:
    o = f.one_time
    signs: dict[str, Callable[[], str]] = {
        "autotune": lambda: (f"cuDNN/cuBLAS autotuning: {o.kernels} GPU kernels for "
                             f"{o.kernel_ops} op executions, {o.autotune_kernels} for "
                             f"{o.autotune_node} alone ({o.autotune_nodes} execution(s) "
                             f"launched {AUTOTUNE_KERNELS} or more; a steady call launches a "
                             f"few)"),
        "outlier": lambda: (f"one {o.outlier_op} call, {o.outlier_node}, took "
                            f"{ms(o.outlier_us)} while its other calls took "
                            f"{ms(o.outlier_others_us)} (median): a first call setting up its "
                            f"library"),
        "launch_setup": lambda: (
            "the first launches of GPU ops took far longer than their kernels ran: "
            + ", ".join(f"{node} {ms(launch)} (its kernels {ms(kernels)})"
                        for node, launch, kernels in o.launch_setup[:3])
            + " (CUDA, cuBLAS or cuDNN setting up on first use; a later launch takes "
              "microseconds)"),
        "compile": lambda: f"XLA compilation, {ms(f.compile_us)}",
        "source": lambda: (f"the run's _SOURCE node on the GPU took {ms(o.source_us)} (the GPU "
                           f"being set up in this run: a later run's takes microseconds)"),
        "slow_first": lambda: (f"the step took {o.first_over_rest:.0f}x the median of the later "
                               f"steps"),
        "iterators": lambda: f"the input pipeline was created in it ({', '.join(o.iterators)})",
    }
    return signs[key]()


def _run_start(x: Finding, f: Facts, cls: str) -> Words:
    r = f.run_start
    return (f"Per-run overhead: before the first op ran, the run's _SOURCE node on {r.row} took "
            f"{ms(r.us)}, {r.share:.0%} of the step: the executor starting the session run "
            f"(scheduling its first ops), a fixed cost every run pays; nothing else here marks "
            f"this run as a first one. A step this short is dominated by it.",
            "give each session.run more work, so its fixed start-up cost is shared: a larger "
            "batch, or several training steps per run (a tf.while_loop over the step, or TF2 "
            "with tf.function and Keras steps_per_execution)")


def _compile(x: Finding, f: Facts, cls: str) -> Words:
    return (f"{'Compile-bound' if x.level == 'high' else 'XLA compiles in this step'}: "
            f"{ms(f.compile_us)}, {x.share:.0%} of the step, is XLA compilation.",
            "judge speed on steady steps (this one pays a one-time compile); keep input shapes "
            "fixed so each cluster compiles once (resize or pad to one shape, batch with "
            "drop_remainder=True)")


def _recompile(x: Finding, f: Facts, cls: str) -> Words:
    return (f"Recompilation: {listed(f.recompiled)} compiled more than once in this trace, "
            f"so its input shapes (or constants) changed between calls.",
            "make the shapes static (padded_batch or drop_remainder=True, fixed image size) "
            "or keep shape-varying ops out of the compiled cluster")


# --------------------------------------------------------------------------------------------
# idle time and rows

def _idle(x: Finding, f: Facts, cls: str) -> Words:
    g = f.gaps[0] if f.gaps else None
    where = (f"; the longest gap, {ms(g['dur_us'])} at +{ms(g['start_us'])}, came after "
             f"{g['after'] or 'the step start'} and before {_gap_before(g)}" if g else "")
    return (f"Idle gaps: for {ms(f.idle_us)} ({x.share:.0%} of the {f.window}) no op of this "
            f"step ran{where}.",
            "find what the host did in the gap: in the trace viewer, look at the Python thread "
            "and the other host threads around it (Python code between calls, Keras callbacks, "
            "a synchronisation with the GPU, another process using the CPU)"
            if f.tids_are == "threads" else
            "find what the executor waited for: profile the same steps with the TensorBoard "
            "profiler (tf.profiler.experimental.start/stop), which shows every host thread; "
            "usual causes are queue-runner threads or other session runs competing for the "
            "CPU, Python between ops (feed_dict) and the time between session runs")


def _gap_before(g: dict[str, Any]) -> str:
    if g["before"]:
        return str(g["before"])
    if g.get("next_step"):
        return "the next step (the time between two steps counts to the earlier one)"
    return "the step end"


def _serialised(x: Finding, f: Facts, cls: str) -> Words:
    if x.case == "threads":
        what = (f"one thread, {f.busiest_row}, was busy {f.busiest_share:.0%} of the step "
                f"while the {f.worker_rows - 1} other worker threads averaged "
                f"{f.others_share:.0%}")
    else:
        what = (f"{f.busiest_row} was busy {f.busiest_share:.0%} of the step with "
                f"{f.parallelism:.2f} ops running at once on average, and "
                f"{x.detail['off_path']:.0%} of the step was work off the critical path that "
                f"could have overlapped")
    return (f"One row serialises the work: {what}.",
            "let independent ops overlap: raise ConfigProto(inter_op_parallelism_threads=N) "
            "(TF2: tf.config.threading.set_inter_op_parallelism_threads), and run per-element "
            "input work in parallel (tf.data map with num_parallel_calls=tf.data.AUTOTUNE)"
            + ("; the seed's five crops do not depend on each other, so they can run side by "
               "side" if f.seed_pipeline else ""))


# --------------------------------------------------------------------------------------------
# devices: communication, copies, launching, no data, an idle GPU, XLA, compute

def _communication(x: Finding, f: Facts, cls: str) -> Words:
    c = f.communication
    return (f"Communication: {c.count} collective(s) ({', '.join(c.ops[:4])}) cover "
            f"{c.share:.0%} of the step (wall; {ms(c.summed_us)} summed over their overlapping "
            f"boxes); for {c.exposed_share:.0%} of the step nothing else ran beside them"
            + (", so the step waited for them." if x.case == "waited" else
               ": they overlapped other work, so the step hardly waited for them."),
            "overlap communication with computation (all-reduce each gradient as soon as it is "
            "ready, as tf.distribute's MirroredStrategy does; bucket small gradients), give "
            "each replica more work per step (a larger per-replica batch), and keep collectives "
            "on NCCL over NVLink where the devices have it")


def _copy(x: Finding, f: Facts, cls: str) -> Words:
    c = f.copies
    kinds = ", ".join(f"{n} {d}" for d, n in sorted(c.by_direction.items(), key=lambda x: -x[1]))
    what = {"input": " (the input batch)", "host": " (made on the host in this run)"}.get(
        c.largest_source, "")
    host = (f" The host's own copy calls held a host thread for {ms(c.host_us)} (staging "
            f"pageable memory, such as numpy arrays, before the transfer)." if c.host_us else "")
    return (f"Copies: {c.count} cop{'y' if c.count == 1 else 'ies'} ({kinds}) cover "
            f"{c.share:.0%} of the {f.window}, and for {c.exposed_share:.0%} of the {f.window} "
            f"the GPU ran no kernel beside them: the step waited for data to move, not for GPU "
            f"compute. The largest took {ms(c.largest_us)}"
            + (f" ({c.largest_direction})" if c.largest_direction else "")
            + (f": {c.largest}{what}." if x.detail["named"] else ".") + host,
            _copy_advice(c))


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


def _launch(x: Finding, f: Facts, cls: str) -> Words:
    la, gpu = f.launch, f.gpu_busy_share or 0.0
    ops = (f"; {la.host_ops} ops, {la.host_ops_short} of them under {LAUNCH_SHORT_US:.0f} us"
           if x.detail["host_ops"] else "")
    row = "the host threads that run ops and launch their kernels" \
        if la.row == HOST_LAUNCH_THREADS else la.row
    return (f"Launch-bound: {row} {'was' if f.tids_are == 'lanes' else 'were'} busy "
            f"{la.busy_share:.0%} of the {f.window}{ops}, while the GPU ran its {la.kernels} "
            f"kernels (median {ms(la.kernel_median_us)}) only {gpu:.0%} of it and idled between "
            f"them: the step costs the host's time to launch many small ops, not GPU work or "
            f"input.",
            "give each launch more work: a larger batch; XLA is on already, so make the "
            "compiled clusters larger (one tf.function(jit_compile=True) over the whole step) "
            "and keep small host-side ops out of the GPU path" if x.case == "xla" else
            "launch fewer, larger ops: compile the step with XLA (tf.function(jit_compile=True), "
            "or TF1 global_jit_level ON_1) so small ops fuse into few kernels, use a larger "
            "batch so each kernel does more, and run several steps per call (Keras "
            "steps_per_execution)")


def _no_data(x: Finding, f: Facts, cls: str) -> Words:
    gpu_words = ("no GPU row recorded anything: the GPU tracer captured no kernel (it failed "
                 "to start, lacked permission, or the device ran nothing), so GPU time cannot "
                 "be judged from this trace" if x.case == "no_gpu_data" else
                 "nothing can be said of the devices behind them")
    names = ", ".join(f.silent_rows[:6]) + (f" and {len(f.silent_rows) - 6} more"
                                            if len(f.silent_rows) > 6 else "")
    return (f"Recorded nothing: {len(f.silent_rows)} row(s) hold only their names ({names}); "
            f"{gpu_words}.",
            "re-profile with the GPU tracer working (check the profiler's log for CUPTI errors: "
            "the user needs permission to read GPU performance counters) to judge those devices")


def _gpu_idle(x: Finding, f: Facts, cls: str) -> Words:
    return (f"The GPU is underused: it ran kernels {f.gpu_busy_share or 0.0:.0%} of the "
            f"{f.window} and waited the remaining time (for input, copies or the host launching "
            f"kernels).",
            "keep the GPU fed: prefetch to the device (tf.data.experimental.prefetch_to_device"
            " or .prefetch), larger batches, fewer and larger kernels (XLA: "
            "tf.function(jit_compile=True))")


def _xla_overhead(x: Finding, f: Facts, cls: str) -> Words:
    return (f"XLA bookkeeping: {f.tiny_clusters} clusters run in under "
            f"{TINY_CLUSTER_US:.0f} us each; with their cache lookups (_XlaCompile) and merges "
            f"(_XlaMerge) that is {ms(f.xla_overhead_us)} per step spent on XLA plumbing.",
            "tiny clusters cost more to launch than they save: compile one larger function "
            "(tf.function(jit_compile=True)) or turn auto-clustering off for this graph")


_COMPUTE_ADVICE = {
    "xla": "see which TF ops the cluster holds (question 2) and its kernels in the TensorBoard "
           "profiler; if it is slower than the same ops without XLA (global_jit_level OFF), "
           "keep those ops out of the cluster",
    "device": "make the GPU's work cheaper: fuse small kernels with XLA (jit_compile=True), use "
              "mixed precision (tf.keras.mixed_precision 'mixed_float16') on tensor-core GPUs, "
              "and check the largest GPU ops in TensorBoard's kernel stats",
    "op": "make it cheaper (smaller inputs, a faster kernel, fewer calls) or take it off the "
          "critical path",
    "const": "its inputs are all constants, so it computes the same result in every run: "
             "compute it once and keep the result (a variable initialised with it, or a "
             "constant saved in its place) instead of recomputing it per step",
}


def _compute(x: Finding, f: Facts, cls: str) -> Words:
    what = f"XLA clusters ({f.top_op})" if f.top_op_category == "xla_run" else f.top_op
    calls = (f"{f.top_op_count} {'kernels' if f.top_op_where == 'GPU' else 'executions'}; "
             f"the longest, {f.top_op_name}, {f.top_op_name_share:.0%}"
             if f.top_op_count > 1 else f.top_op_name)
    return (f"{_compute_where(f)}The largest cost is {what} on the {f.top_op_where}: it covers "
            f"{f.top_op_share:.0%} of the {f.window} (wall time; its executions add up to "
            f"{ms(f.top_op_cpu_us)} of {'GPU' if f.top_op_where == 'GPU' else 'CPU'} time: "
            f"{calls})."
            + (f" The critical path covers {f.critical_share:.0%} of the {f.window}."
               if f.critical_share >= 0.01 else ""),
            f"start with {f.top_op_name or f.top_op}, the largest cost: "
            f"{_COMPUTE_ADVICE[x.case]}")


def _compute_where(f: Facts) -> str:
    """Where the step computed, before the largest op: the GPU's share of the step (and of
    copies alone) when it is device-bound, else the ops' share."""
    if f.device_bound:
        copies = (f" (and copies alone another {f.copies.exposed_share:.0%})"
                  if f.copies.exposed_share >= COPIES_MENTIONED else "")
        return (f"Device-bound: {_busiest_gpu(f)} ran kernels {f.gpu_busy_share or 0.0:.0%} of "
                f"the time{copies}. ")
    if not f.compute_share:
        return ""
    ops_words = "Ops other than input waits" if f.input_wait_us else "Ops"
    return f"{ops_words} ran {f.compute_share:.0%} of the {f.window} (wall). "


def _busiest_gpu(f: Facts) -> str:
    if not f.gpu_busiest:
        return "the GPU"
    return f"{f.gpu_busiest}, the busiest GPU, " + (
        "over its own step row" if f.gpu_busiest_own_window else "over the step")


_RULES: dict[str, Callable[[Finding, Facts, str], Words]] = {
    "input": _input, "one_time": _one_time, "overhead": _run_start, "compile": _compile,
    "recompile": _recompile, "idle": _idle, "serialised": _serialised,
    "communication": _communication, "copy": _copy, "launch": _launch, "no_data": _no_data,
    "gpu_idle": _gpu_idle, "xla_overhead": _xla_overhead, "compute": _compute,
}
