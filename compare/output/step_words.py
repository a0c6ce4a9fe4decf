"""Why explain looks at the step it looks at, and what of the host's step lies outside that
window, in words (:class:`compare.analysis.steps.StepChoice`): explain's header and
``compare.explain --json``'s ``step.reason`` and ``step.window``."""
from __future__ import annotations

from compare.analysis.steps import StepChoice
from compare.fmt import duration as ms

NO_STEPS = ("the trace marks no steps (no xprof step rows, no train_function, ProfilerStep or "
            "Trace(step_num=...) markers, no TF1 session runs), so the whole trace is "
            "explained as one window; shares below are of the whole trace, which may hold "
            "set-up and idle time around the work")


def reason(c: StepChoice) -> str:
    """Why this step, in one sentence (no full stop)."""
    if c.why == "asked":
        return f"you asked for step {c.step.num}"
    if c.why == "no_steps":
        return NO_STEPS
    if c.why == "only":
        return f"the trace holds one {'session run' if c.timeline else 'step'}"
    if c.why == "second":
        return ("the second of two steps (a first step usually carries one-time work such as "
                "XLA compilation)")
    if c.window_of_run:
        why = (f"the first traced step ({c.first_num}, {c.first_us / 1e3:.1f} ms) is left out "
               f"as every trace's first is, though this trace is a window of a longer run "
               f"(steps {c.first_num}–{c.last_num}), so it is not the program's first")
    else:
        why = (f"the first step ({c.first_us / 1e3:.1f} ms) is left out, as a first step "
               f"usually carries one-time work (XLA compilation, thread pools and allocators "
               f"warming up, files opening)")
    return (f"a steady step: its duration is the median of the {c.count - 1} steps after the "
            f"first; {why}")


def window(c: StepChoice) -> str:
    """The host's side of a TF2 profile's step where it reaches outside the window the profile
    marks (the device's), in words; "" when it does not."""
    before, after = c.host_outside
    if not (before or after) or c.host is None:
        return ""
    return (f"{ms(c.step.dur)}, the step as the profile marks it (the device's); the host's "
            f"side of the step (its train_function call, {ms(c.host_us)}) "
            + (f"began {ms(before)} before it (fetching the input and launching the ops)"
               if before else "")
            + (" and " if before and after else "")
            + (f"ended {ms(after)} after it" if after else "")
            + ": that host time is outside the window explained here (the previous step's "
              "window holds it in a run of many steps)")
