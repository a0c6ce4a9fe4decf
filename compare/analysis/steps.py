"""Which step of a trace to explain, and why.

A trace's first step usually carries one-time work (XLA compilation, thread pools starting,
files opening), so the default is a steady step: the one whose duration is the median of the
steps after the first. The caller may ask for a step by number instead.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from common.errors import InputError
from compare.fmt import duration as ms
from compare.model.events import CAT, WHOLE_TRACE, Step, Trace
from compare.vocabulary.ops import TRAIN_FUNCTION
from compare.vocabulary.rows import HOST_PLANE_PREFIX

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
    #: The host's side of the step (its ``train_function`` call) where a TF2 profile's step
    #: is the device's (see :func:`host_side`): its start and end. The explained window stays
    #: the step as the trace marks it; this says what of the host's step lies outside it.
    host: tuple[float, float] | None = None
    window: str = ""            # the host's side beside the window, in words

    @property
    def lo(self) -> float:
        return self.step.ts

    @property
    def hi(self) -> float:
        return self.step.ts + self.step.dur

    def in_step(self, trace: Trace) -> np.ndarray:
        """Per event: it has time inside the step window (it overlaps it; an instant event:
        it lies in it). Its time there is clipped to the window
        (:func:`compare.analysis.attribution.window_self`), as in compare's account."""
        ev = trace.events
        return np.where(ev.dur > 0, (ev.ts < self.hi) & (ev.end > self.lo),
                        (ev.ts >= self.lo) & (ev.ts < self.hi))

    @property
    def host_us(self) -> float:
        return self.host[1] - self.host[0] if self.host else 0.0

    def as_dict(self) -> dict:
        return {"num": self.step.num, "name": self.step.name, "start_us": self.step.ts,
                "wall_us": self.step.dur, "reason": self.reason, "steps_in_trace": self.count,
                "first_step_us": self.first_us, "median_step_us": self.median_us,
                "min_step_us": self.min_us, "max_step_us": self.max_us,
                "steps_from": self.source,
                "host_start_us": self.host[0] if self.host else None,
                "host_step_us": self.host_us, "window": self.window}


def choose(trace: Trace, num: int | None = None) -> StepChoice:
    """The step to explain: ``num`` if given (an :class:`InputError` if the trace has no such
    step), else a steady one (see the module docstring)."""
    steps = sorted(trace.steps, key=lambda s: s.ts)
    if not steps:
        raise InputError(f"{trace.source}: the trace has no events to explain")
    if trace.format == "timeline" and len(steps) > 1:
        steps = traced_spans(trace, steps)
    durs = np.array([s.dur for s in steps])
    later = durs[1:] if len(durs) > 1 else durs
    stats = dict(count=len(steps), first_us=float(durs[0]), median_us=float(np.median(later)),
                 min_us=float(durs.min()), max_us=float(durs.max()),
                 source=trace.meta.get("steps_from", ""))
    return host_side(trace, _pick(trace, steps, durs, later, num, stats))


def _pick(trace: Trace, steps: list[Step], durs: np.ndarray, later: np.ndarray,
          num: int | None, stats: dict) -> StepChoice:
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


def traced_spans(trace: Trace, steps: list[Step]) -> list[Step]:
    """TF1 session runs as the trace marks them: from their first event to their last, not to
    the next run's start (the time between runs is Python the trace does not show)."""
    ev = trace.events
    nums = np.array([st.num for st in steps])
    keys, inv = np.unique(ev.step, return_inverse=True)
    lo = np.full(len(keys), np.inf)
    hi = np.full(len(keys), -np.inf)
    np.minimum.at(lo, inv, ev.ts)
    np.maximum.at(hi, inv, ev.end)
    at = {int(k): j for j, k in enumerate(keys.tolist())}
    out = []
    for st, n in zip(steps, nums.tolist()):
        j = at.get(n)
        if j is None or hi[j] <= lo[j]:
            out.append(st)
            continue
        a, b = max(st.ts, float(lo[j])), min(st.ts + st.dur, float(hi[j]))
        out.append(dataclasses.replace(st, ts=a, dur=max(b - a, 0.0)) if b > a else st)
    return out


#: A host step and a device step differing by less than this (µs) are the same window.
SAME_WINDOW_US = 1.0


def host_side(trace: Trace, c: StepChoice) -> StepChoice:
    """A TF2 profile's step is the device's (xprof's step rows and step database time the GPU),
    while the host begins it earlier: Keras' ``train_function`` call fetches the input batch
    and launches the ops before the GPU starts. The explained window stays the step the trace
    marks (so it is the step compare.run's account and xprof use); the host's side of it is
    recorded beside it, and said in words when it reaches outside the window."""
    host = _host_step(trace, c.step)
    if host is None:
        return c
    if host[0] >= c.lo - SAME_WINDOW_US and host[1] <= c.hi + SAME_WINDOW_US:
        return dataclasses.replace(c, host=host)
    before, after = max(0.0, c.lo - host[0]), max(0.0, host[1] - c.hi)
    words = (f"{ms(c.step.dur)}, the step as the profile marks it (the device's); the host's "
             f"side of the step (its train_function call, {ms(host[1] - host[0])}) "
             + (f"began {ms(before)} before it (fetching the input and launching the ops)"
                if before else "")
             + (" and " if before and after else "")
             + (f"ended {ms(after)} after it" if after else "")
             + ": that host time is outside the window explained here (the previous step's "
               "window holds it in a run of many steps)")
    return dataclasses.replace(c, host=host, window=words)


def _host_step(trace: Trace, step: Step) -> tuple[float, float] | None:
    """(start, end) of the host's side of ``step``: the outermost ``train_function`` call
    around the step's root events on host threads (xprof marks each step's root event on
    the host with the step's name), else those root events; None in a timeline or when the
    host marks nothing."""
    if trace.format == "timeline":
        return None
    ev = trace.events
    host_pids = [p.pid for p in trace.processes.values() if p.name.split(": ")[-1]
                 .startswith(HOST_PLANE_PREFIX)]
    roots = np.flatnonzero((ev.step == step.num) & (ev.category == CAT["step"]) &
                           np.isin(ev.pid, host_pids))
    if not len(roots):
        return None
    lo, hi = float(ev.ts[roots].min()), float(ev.end[roots].max())
    parent, names = trace.nesting.parent, trace.strings.names
    seen: set[int] = set()
    for r in roots:
        p = int(parent[r])
        while p >= 0 and p not in seen:  # each enclosing event looked at once
            seen.add(p)
            if TRAIN_FUNCTION.match(names[ev.name[p]]):
                lo, hi = min(lo, float(ev.ts[p])), max(hi, float(ev.end[p]))
            p = int(parent[p])
    return lo, hi
