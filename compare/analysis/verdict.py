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
:func:`judge` turns measured :class:`Facts` (:mod:`compare.analysis.facts`) into a
:class:`Verdict` of typed :class:`Finding`s; :func:`assess` measures the facts of a trace's step
and judges them. They are split so the thresholds can be checked on constructed facts. Nothing
here is a sentence: :mod:`compare.output.verdict_words` says each finding and the headline.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from compare.analysis import evidence, rows
from compare.analysis.facts import Facts, measure
from compare.analysis.legend import Legend
from compare.analysis.sequence import Sequence
from compare.analysis.steps import StepChoice
from compare.analysis.xla import XlaSummary
from compare.model.events import Trace
from compare.vocabulary import ops as tfops
from compare.vocabulary.thresholds import (
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
    TINY_CLUSTERS_NOTABLE,
)
from compare.vocabulary.thresholds import input_class as input_words


@dataclasses.dataclass
class Finding:
    """One finding about a step, as data. ``case`` names which of the kind's situations it is
    and ``detail`` holds what else the rule decided (both listed per rule below); a finding
    judged on the rest of a first step (``context`` "rest") reads :attr:`Facts.rest`, one
    stated as part of a first run ("first_run") or as the effect of another finding's
    ``cause`` is a fact without advice."""

    kind: str      # one_time, input, compile, recompile, copy, communication, overhead,
                   # launch, idle, serialised, gpu_idle, xla_overhead, compute, no_data
    level: str     # "high", "moderate", "low" (checked, not a problem) or "info"
    share: float   # of the step it accounts for
    case: str = ""
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)
    context: str = ""    # "", "rest" or "first_run"
    cause: str = ""      # gpu_idle: the high finding that explains it
    advised: bool = True  # it comes with what to try next

    def facts(self, f: Facts) -> Facts:
        """The facts it was judged on, of the step's facts ``f``."""
        return f.rest if self.context == "rest" and f.rest is not None else f


@dataclasses.dataclass
class Verdict:
    """``bottleneck``: the leading finding's kind ("compute" when nothing else); ``lead``: how
    the headline reads: "lead" (a high finding leads: :attr:`leader`), "several" (no single
    bottleneck: :attr:`named`, the largest first), "silent" or "none" (nothing stands out,
    with rows that recorded nothing or not); ``mostly_idle``: the idle gaps leading hold most
    of the step."""

    bottleneck: str
    input_class: str           # "not input-bound", "moderately input-bound", "highly input-bound"
    findings: list[Finding]
    facts: Facts
    lead: str = "none"
    leader: int | None = None  # index into findings
    named: list[int] = dataclasses.field(default_factory=list)
    mostly_idle: bool = False


def assess(trace: Trace, choice: StepChoice, xla: XlaSummary, legend: Legend,
           sequence: Sequence) -> Verdict:
    """Measure the facts of the chosen step and judge them."""
    return judge(measure(trace, choice, xla, legend, sequence))


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


#: What can keep a GPU idle when it is high: an idle GPU is then its effect, not a finding.
_GPU_IDLE_CAUSES = ("input", "copy", "communication", "overhead")


def _caused(x: Finding, out: list[Finding]) -> Finding:
    """An idle GPU while a high finding explains it: stated as that finding's effect."""
    if x.kind != "gpu_idle":
        return x
    cause = next((y.kind for y in out if y.level == "high" and y.kind in _GPU_IDLE_CAUSES),
                 None)
    if cause is None:
        return x
    return dataclasses.replace(x, level="info", advised=False, cause=cause)


#: Findings judged again on the rest of a first step, without its one-time work.
_REJUDGED = ("launch", "gpu_idle", "idle", "compute")


def _without_one_time(f: Facts, cls: str) -> list[Finding]:
    """The distorted findings judged on the step without its one-time work (``f.rest``): what
    the rest of this run shows, stated beside the first-run finding, never above it."""
    r = f.rest
    if r is None:
        return []
    rules = {"launch": _launch, "gpu_idle": _gpu_idle, "idle": _idle, "compute": _compute}
    # facts about the rest, not advice: only a later step shows what to optimise
    return [dataclasses.replace(x, level="moderate" if x.level == "high" else x.level,
                                advised=False, context="rest")
            for kind in _REJUDGED for x in rules[kind](r, cls)]


#: Findings a first run's one-time work distorts (autotuning blocks the launch row, a
#: first call's set-up is "the largest op"): stated for what they are, not judged.
_DISTORTED_BY_ONE_TIME = ("launch", "compute", "gpu_idle", "idle", "serialised")


def _in_a_first_run(x: Finding) -> Finding:
    if x.kind not in _DISTORTED_BY_ONE_TIME:
        return x
    return dataclasses.replace(x, level="info", advised=False, context="first_run")


def _input(f: Facts, cls: str) -> list[Finding]:
    """case: "ready" (IteratorGetNext under GETNEXT_OK_US), "under" (a wait under the
    moderate share), "none" (no input op); "bound" otherwise, with ``advice`` "producer" (the
    pipeline produces ahead and is still slow), "tfdata" or "queues". detail: ``reads`` (the
    input ops read data, not only wait), ``judged`` (False: a feed_dict step's input is
    outside the trace)."""
    share = f.input_wait_us / (f.wall_us or 1.0)
    detail: dict[str, Any] = {"reads": tfops.reads_input(f.input_ops)}
    if cls == "not input-bound":
        ready = f.get_next_us is not None and f.get_next_us <= GETNEXT_OK_US
        detail["judged"] = bool(f.input_wait_us or not f.feeds)
        return [Finding("input", "low", share, "ready" if ready else
                        "under" if f.input_wait_us else "none", detail, advised=False)]
    tfdata = any(tfops.is_get_next(o) for o in f.input_ops)
    detail["advice"] = "producer" if f.input_waits_on else "tfdata" if tfdata else "queues"
    level = "high" if cls == "highly input-bound" else "moderate"
    return [Finding("input", level, share, "bound", detail)]


def _one_time(f: Facts, cls: str) -> list[Finding]:
    """case "later": the explained step is a later one, and the trace's first took
    FIRST_STEP_FACTOR of the median or more (a fact); "first": this step shows one-time work,
    detail ``signs`` (:func:`_one_time_signs`)."""
    o = f.one_time
    if not o.first_step:
        if o.first_over_rest >= FIRST_STEP_FACTOR:
            return [Finding("one_time", "info", 0.0, "later", advised=False)]
        return []
    share = evidence.one_time_share(o, f.compile_us / (f.wall_us or 1.0))
    signs = _one_time_signs(f)
    if not signs:
        return []
    level = "high" if share >= ONE_TIME_LEADS else "moderate"
    return [Finding("one_time", level, share, "first", {"signs": signs})]


def _one_time_signs(f: Facts) -> list[str]:
    """The signs of one-time work the step shows, in the order they are told."""
    o = f.one_time
    present = {"autotune": bool(o.autotune_nodes), "outlier": bool(o.outlier_node),
               "launch_setup": bool(o.launch_setup), "compile": f.compile_us >= COMPILE_MIN_US,
               "source": bool(o.source_us),
               "slow_first": o.first_step and o.first_over_rest >= FIRST_STEP_FACTOR}
    out = [k for k, yes in present.items() if yes]
    if out and o.iterators:
        out.append("iterators")
    return out


def _run_start(f: Facts, cls: str) -> list[Finding]:
    r = f.run_start
    if not r.us or r.share < RUN_START_NOTABLE:
        return []
    level = "high" if r.share >= RUN_START_BOUND else "moderate"
    return [Finding("overhead", level, r.share)]


def _compile(f: Facts, cls: str) -> list[Finding]:
    if not f.compile_us:
        return []
    share = f.compile_us / (f.wall_us or 1.0)
    level = ("high" if share >= COMPILE_DOMINATES else
             "moderate" if share >= COMPILE_NOTABLE else "info")
    return [Finding("compile", level, share)]


def _recompile(f: Facts, cls: str) -> list[Finding]:
    return [Finding("recompile", "moderate", 0.0)] if f.recompiled else []


def _idle(f: Facts, cls: str) -> list[Finding]:
    share = f.idle_us / (f.wall_us or 1.0)
    if share < IDLE_NOTABLE:
        return []
    return [Finding("idle", "high" if share >= IDLE_BOUND else "moderate", share)]


def _serialised(f: Facts, cls: str) -> list[Finding]:
    """case "threads" (one busy thread, the others idle) or "lanes" (a timeline's busy device
    with ops hardly overlapping; detail ``off_path``: the share of work off the critical
    path that could have overlapped)."""
    wall = f.wall_us or 1.0
    detail: dict[str, Any] = {}
    if f.tids_are == "threads":
        # a thread launching one GPU's kernels is busy by design: launch and compute judge it
        serial = (f.worker_rows >= 2 and f.busiest_share >= SERIAL_BUSY and
                  f.others_share < SERIAL_OTHERS and
                  not any(t in f.busiest_row for t in tfops.GPU_LAUNCH_THREADS))
    else:
        off_path = f.busiest_share - max(0.0, f.critical_share - f.input_wait_us / wall)
        serial = (f.busiest_share >= TIMELINE_SERIAL_BUSY and
                  0 < f.parallelism < TIMELINE_SERIAL_PARALLELISM and off_path >= OFF_PATH)
        detail["off_path"] = off_path
    if not serial or _launch(f, cls):  # a thread busy launching kernels: launch says it
        return []
    return [Finding("serialised", "high" if f.busiest_share >= 0.8 else "moderate",
                    f.busiest_share, f.tids_are, detail)]


def _communication(f: Facts, cls: str) -> list[Finding]:
    """case "waited" (the step waited for the collectives) or "overlapped"."""
    c = f.communication
    if not c.count:
        return []
    level = ("high" if c.exposed_share >= COMM_BOUND else
             "moderate" if c.exposed_share >= COMM_NOTABLE else "info")
    return [Finding("communication", level, c.exposed_share,
                    "waited" if c.exposed_share >= COMM_NOTABLE else "overlapped")]


def _copy(f: Facts, cls: str) -> list[Finding]:
    """detail ``named``: the largest copy's event names something other than a copy (the
    tensor it moves)."""
    c = f.copies
    if not c.count or c.exposed_share < COPY_NOTABLE:
        return []
    level = "high" if c.exposed_share >= COPY_BOUND else "moderate"
    return [Finding("copy", level, c.exposed_share, c.largest_source,
                    {"named": not rows.is_copy(c.largest)})]


def _launch(f: Facts, cls: str) -> list[Finding]:
    """case "xla" (XLA is on: make its clusters larger) or "ops" (compile the step with XLA);
    detail ``host_ops``: the host ran enough ops to count them."""
    la, gpu = f.launch, f.gpu_busy_share
    if gpu is None or gpu >= GPU_IDLE or la.busy_share < LAUNCH_ROW_BUSY or \
            la.kernels < LAUNCH_MIN_KERNELS or la.kernel_median_us >= LAUNCH_SHORT_US:
        return []
    xla = f.tiny_clusters or "_XlaLaunch" in f.top_op or f.top_op_category == "xla_run"
    return [Finding("launch", "high", la.busy_share, "xla" if xla else "ops",
                    {"host_ops": la.host_ops >= LAUNCH_MIN_KERNELS})]


def _no_data(f: Facts, cls: str) -> list[Finding]:
    """case "no_gpu_data" (GPUs that recorded nothing) or "rows" (other rows)."""
    if not f.silent_rows:
        return []
    no_gpu = bool(f.gpu_rows and not f.gpus_recorded)
    # GPUs that recorded nothing while the host mostly waited: the step cannot be judged (its
    # waits are for GPU work the trace does not hold), so that is what leads; a host that ran
    # the step's ops itself (a CPU-only run beside an empty GPU row) is judged as usual
    blind = no_gpu and f.compute_share < MOSTLY
    return [Finding("no_data", "high" if blind else "info", 1.0 if blind else 0.0,
                    "no_gpu_data" if no_gpu else "rows")]


def _gpu_idle(f: Facts, cls: str) -> list[Finding]:
    if f.gpu_busy_share is None or f.gpu_busy_share >= GPU_IDLE or _launch(f, cls) or \
            f.communication.exposed_share >= COMM_BOUND:
        return []  # a launch-bound step, or one waiting on collectives, says why the GPU idles
    return [Finding("gpu_idle", "high" if f.gpu_busy_share < 0.25 else "moderate",
                    1 - f.gpu_busy_share)]


def _xla_overhead(f: Facts, cls: str) -> list[Finding]:
    if f.tiny_clusters < TINY_CLUSTERS_NOTABLE:
        return []
    return [Finding("xla_overhead", "info", min(1.0, f.xla_overhead_us / (f.wall_us or 1.0)))]


def _compute(f: Facts, cls: str) -> list[Finding]:
    """case (what to try): "const" (the op reads only constants), "xla" (an XLA cluster is the
    largest cost), "device" (the GPU is busy) or "op"."""
    if not f.top_op or (not f.device_bound and
                        max(f.top_op_share, f.compute_share) < COMPUTE_SHOWN):
        return []  # ops that hardly ran: other findings say where the time went
    share = f.gpu_busy_share if f.device_bound and f.gpu_busy_share is not None else \
        max(f.top_op_share, f.compute_share)
    high = f.device_bound or f.top_op_share >= COMPUTE_DOMINATES or (
        f.compute_share >= COMPUTE_DOMINATES and f.top_op_share >= COMPUTE_NOTABLE)
    case = ("const" if f.top_op_const_inputs and not f.device_bound else
            "xla" if f.top_op_category == "xla_run" else
            "device" if f.device_bound else "op")
    return [Finding("compute", "high" if high else "info", share, case)]


#: The finding rules, in the order findings are listed.
FINDINGS = (_one_time, _input, _compile, _recompile, _copy, _communication, _run_start,
            _launch, _idle, _serialised, _gpu_idle, _xla_overhead, _compute, _no_data)

#: When several findings are high, the cause leads: one-time work of a first run, then a
#: compile, an input wait, communication and launching (they cause an idle GPU, idle gaps).
_CAUSES = {"no_data": -1, "one_time": 0, "compile": 1, "input": 2, "copy": 3,
           "communication": 4, "overhead": 5, "launch": 6}


def _lead(out: list[Finding], f: Facts, cls: str) -> Verdict:
    """The leading finding. When several are high, a compile and then an input wait lead
    (they cause the others: an idle GPU, a long first _XlaLaunch); else the largest share
    among the moderate ones, named together."""
    highs = [i for i, x in enumerate(out) if x.level == "high"]
    if highs:
        lead = min(highs, key=lambda i: (_CAUSES.get(out[i].kind, len(_CAUSES)), -out[i].share))
        x = out[lead]
        return Verdict(x.kind, cls, out, f, "lead", lead,
                       mostly_idle=x.kind == "idle" and x.share >= MOSTLY)
    cands = sorted((i for i, x in enumerate(out) if x.level == "moderate" and x.share > 0 or
                    x.kind == "compute" and x.share >= COMPUTE_NOTABLE),
                   key=lambda i: -out[i].share)
    if not cands:
        silent = any(x.kind == "no_data" for x in out)
        return Verdict("no_data" if silent else "none", cls, out, f,
                       "silent" if silent else "none")
    return Verdict(out[cands[0]].kind, cls, out, f, "several", named=cands[:3])
