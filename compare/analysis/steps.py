"""Which step of a trace to explain, and why.

A trace's first step usually carries one-time work (XLA compilation, thread pools starting,
files opening), so the default is a steady step: the one whose duration is the median of the
steps after the first. The caller may ask for a step by number instead.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from common.errors import InputError
from compare.model.events import CAT, WHOLE_TRACE, Step, Trace
from compare.vocabulary.ops import TRAIN_FUNCTION
from compare.vocabulary.rows import HOST_PLANE_PREFIX


@dataclasses.dataclass
class StepChoice:
    step: Step
    #: why this step (compare.output.step_words says it): "asked" (by number), "no_steps" (the
    #: whole trace as one window), "only" (the trace's one step), "second" (of two), "steady"
    #: (the median of the steps after the first; ``window_of_run``: the first traced step is
    #: not the program's first, the trace is a window of a longer run)
    why: str
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
    window_of_run: bool = False
    first_num: int = 0          # the first and last steps' numbers
    last_num: int = 0
    timeline: bool = False      # a TF1 timeline: its steps are session runs

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

    @property
    def host_outside(self) -> tuple[float, float]:
        """How long the host's side of the step began before the window and ended after it
        (0, 0 when it lies inside, or the trace marks none)."""
        if self.host is None or (self.host[0] >= self.lo - SAME_WINDOW_US and
                                 self.host[1] <= self.hi + SAME_WINDOW_US):
            return 0.0, 0.0
        return max(0.0, self.lo - self.host[0]), max(0.0, self.host[1] - self.hi)

    def as_dict(self) -> dict[str, Any]:
        """The choice's numbers (compare.output.explain_json adds its words)."""
        return {"num": self.step.num, "name": self.step.name, "start_us": self.step.ts,
                "wall_us": self.step.dur, "why": self.why, "steps_in_trace": self.count,
                "first_step_us": self.first_us, "median_step_us": self.median_us,
                "min_step_us": self.min_us, "max_step_us": self.max_us,
                "steps_from": self.source,
                "host_start_us": self.host[0] if self.host else None,
                "host_step_us": self.host_us}


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
                 source=trace.meta.get("steps_from", ""), first_num=steps[0].num,
                 last_num=steps[-1].num, timeline=trace.format == "timeline")
    return host_side(trace, _pick(trace, steps, durs, later, num, stats))


def _pick(trace: Trace, steps: list[Step], durs: np.ndarray, later: np.ndarray,
          num: int | None, stats: dict[str, Any]) -> StepChoice:
    if num is not None:
        match = [s for s in steps if s.num == num]
        if not match:
            nums = [s.num for s in steps]
            have = f"{nums[0]}..{nums[-1]}" if len(nums) > 1 else str(nums[0])
            raise InputError(f"{trace.source}: no step {num}; the trace has step(s) {have}")
        return StepChoice(match[0], "asked", **stats)
    if len(steps) == 1:
        return StepChoice(steps[0], "no_steps" if steps[0].name == WHOLE_TRACE else "only",
                          **stats)
    if len(steps) == 2:
        return StepChoice(steps[1], "second", **stats)
    median = float(np.median(later))
    k = 1 + int(np.argmin(np.abs(later - median)))
    # the program numbered its steps and the trace starts later: a profile window
    window = bool(trace.meta.get("steps_numbered")) and steps[0].num > 1
    return StepChoice(steps[k], "steady", window_of_run=window, **stats)


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
    recorded beside it (:attr:`StepChoice.host_outside`: what of it lies outside)."""
    host = _host_step(trace, c.step)
    return c if host is None else dataclasses.replace(c, host=host)


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
