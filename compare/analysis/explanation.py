"""The seed's four questions answered for one trace, as facts: which step, what every row is
(:mod:`compare.analysis.legend`), XLA's compile and run cost (:mod:`compare.analysis.xla`),
the order of ops (:mod:`compare.analysis.sequence`) and the bottleneck
(:mod:`compare.analysis.verdict`). :mod:`compare.output.explain_text` and
:mod:`compare.output.explain_json` render an :class:`Explanation`."""
from __future__ import annotations

import dataclasses

import numpy as np

from common.errors import InputError
from compare.analysis import legend, sequence, steps, verdict
from compare.analysis.facts import step_compile_us
from compare.analysis.legend import Legend
from compare.analysis.sequence import Sequence
from compare.analysis.steps import StepChoice
from compare.analysis.verdict import Verdict
from compare.analysis.xla import XlaSummary, device_kernels, summarize
from compare.model import intervals
from compare.model.events import Trace
from compare.vocabulary.ops import XLA_OP_WORDS


@dataclasses.dataclass
class XlaStep:
    """XLA in the explained step (wall time; µs and shares of the step)."""

    compile_us: float
    run_us: float               # summed over the runs (clusters may run in parallel)
    device_us: float
    compile_share: float        # wall shares of the step (never above 1)
    run_share: float


@dataclasses.dataclass
class Explanation:
    trace_source: str
    trace_format: str
    warnings: list[str]
    choice: StepChoice
    legend: Legend
    xla: XlaSummary
    xla_step: XlaStep
    sequence: Sequence
    verdict: Verdict
    ops_present: list[str]   # XLA op types present in the trace


def explain(trace: Trace, step: int | None = None, xla: XlaSummary | None = None) -> Explanation:
    """All four answers for ``trace``, for step ``step`` or a steady one; ``xla``: the trace's
    XLA summary when the caller already has it (compare.run does)."""
    if not len(trace.events):
        raise InputError(f"{trace.source}: the trace holds counters but no op events to explain")
    choice = steps.choose(trace, step)
    lg = legend.describe(trace, choice)
    summary = xla if xla is not None else summarize(trace)
    seq = sequence.build(trace, choice)
    ver = verdict.assess(trace, choice, summary, lg, seq)
    present = [op for op in XLA_OP_WORDS if trace.strings.lookup(op) is not None and
               (trace.mask(op_type=op).any() or trace.mask(name=op).any())]
    return Explanation(trace.source, trace.format, list(trace.warnings), choice, lg, summary,
                       xla_in_step(trace, summary, choice), seq, ver, present)


def xla_in_step(trace: Trace, summary: XlaSummary, choice: StepChoice) -> XlaStep:
    """Compile and run time of XLA in the chosen step, and its kernels' GPU time."""
    ev = trace.events
    in_step = choice.in_step(trace)
    calls = ~np.isin(ev.pid, [p.pid for p in trace.processes.values()
                              if p.kind in ("stream", "memcpy")])
    runs = np.zeros(len(ev), dtype=bool)
    runs[summary.run_events] = True
    ran = np.flatnonzero(in_step & calls & runs)
    # a call that compiled runs after its compile: only [ts + compile, end] ran compiled code,
    # clipped to the step (a first call that began in an earlier step and ends in this one
    # brings the end of its run, never minus its whole compile)
    compiled = np.zeros(len(ev))
    for i, _, c in summary.compile_calls:
        compiled[i] = c
    start = np.minimum(ev.ts[ran] + compiled[ran], ev.end[ran])
    run_us = float(intervals.clipped(start, ev.end[ran], choice.lo, choice.hi).sum())
    compile_us = step_compile_us(trace, summary, choice)
    wall = choice.step.dur
    # clusters run in parallel: their wall share
    run_wall = intervals.union_us(start, ev.end[ran], choice.lo, choice.hi)
    return XlaStep(compile_us, run_us, float(ev.dur[in_step & device_kernels(trace)].sum()),
                   min(1.0, compile_us / wall) if wall else 0.0,
                   min(1.0, run_wall / wall) if wall else 0.0)
