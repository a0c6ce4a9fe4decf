"""Which step of a trace to explain, and why.

A trace's first step usually carries one-time work (XLA compilation, thread pools starting,
files opening), so the default is a steady step: the one whose duration is the median of the
steps after the first. The caller may ask for a step by number instead.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from common.errors import InputError
from compare.model.events import WHOLE_TRACE, Step, Trace

NO_STEPS = ("the trace marks no steps (no xprof step rows, no train_function, ProfilerStep or "
            "Trace(step_num=...) markers, no TF1 session runs), so the whole trace is "
            "explained as one window; shares below are of the whole trace, which may hold "
            "set-up and idle time around the work")


@dataclasses.dataclass
class StepChoice:
    step: Step
    reason: str                 # one sentence: why this step
    count: int                  # steps in the trace
    first_us: float             # duration of the first step
    median_us: float            # median duration of the steps after the first (or of all)
    min_us: float
    max_us: float
    source: str = ""            # where the trace's steps came from, in words

    @property
    def lo(self) -> float:
        return self.step.ts

    @property
    def hi(self) -> float:
        return self.step.ts + self.step.dur

    def as_dict(self) -> dict:
        return {"num": self.step.num, "name": self.step.name, "start_us": self.step.ts,
                "wall_us": self.step.dur, "reason": self.reason, "steps_in_trace": self.count,
                "first_step_us": self.first_us, "median_step_us": self.median_us,
                "min_step_us": self.min_us, "max_step_us": self.max_us,
                "steps_from": self.source}


def choose(trace: Trace, num: int | None = None) -> StepChoice:
    """The step to explain: ``num`` if given (an :class:`InputError` if the trace has no such
    step), else a steady one (see the module docstring)."""
    steps = sorted(trace.steps, key=lambda s: s.ts)
    if not steps:
        raise InputError(f"{trace.source}: the trace has no events to explain")
    durs = np.array([s.dur for s in steps])
    later = durs[1:] if len(durs) > 1 else durs
    stats = dict(count=len(steps), first_us=float(durs[0]), median_us=float(np.median(later)),
                 min_us=float(durs.min()), max_us=float(durs.max()),
                 source=trace.meta.get("steps_from", ""))
    if num is not None:
        match = [s for s in steps if s.num == num]
        if not match:
            nums = [s.num for s in steps]
            have = f"{nums[0]}..{nums[-1]}" if len(nums) > 1 else str(nums[0])
            raise InputError(f"{trace.source}: no step {num}; the trace has step(s) {have}")
        return StepChoice(match[0], f"you asked for step {num}", **stats)
    if len(steps) == 1:
        if steps[0].name == WHOLE_TRACE:
            return StepChoice(steps[0], NO_STEPS, **stats)
        what = "session run" if trace.format == "timeline" else "step"
        return StepChoice(steps[0], f"the trace holds one {what}", **stats)
    if len(steps) == 2:
        return StepChoice(steps[1], "the second of two steps (a first step usually carries "
                                    "one-time work such as XLA compilation)", **stats)
    median = float(np.median(later))
    k = 1 + int(np.argmin(np.abs(later - median)))
    if trace.meta.get("steps_numbered") and steps[0].num > 1:
        # the program numbered its steps and the trace starts later: a profile window
        why = (f"the first traced step ({steps[0].num}, {durs[0] / 1e3:.1f} ms) is left out "
               f"as every trace's first is, though this trace is a window of a longer run "
               f"(steps {steps[0].num}–{steps[-1].num}), so it is not the program's first")
    else:
        why = (f"the first step ({durs[0] / 1e3:.1f} ms) is left out, as a first step usually "
               f"carries one-time work (XLA compilation, thread pools and allocators warming "
               f"up, files opening)")
    return StepChoice(steps[k], f"a steady step: its duration is the median of the "
                                f"{len(steps) - 1} steps after the first; {why}", **stats)
