"""The comparison in words: a few sentences per side (step time, where it goes, what bounds it,
XLA's cost) and one on the two together (which is faster, where the difference comes from)."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from compare.fmt import duration as ms
from compare.vocabulary.thresholds import (
    RUNTIME_NOTABLE,
    UNMAPPED_NOTABLE,
    UNTRACED_NOTABLE,
    input_class,
)

if TYPE_CHECKING:  # the types only; comparison imports this module
    from compare.analysis.comparison import Comparison, SideResult


@dataclasses.dataclass
class Verdicts:
    sides: dict[str, str]           # side -> a few sentences on it
    comparison: str


def verdicts(c: "Comparison") -> Verdicts:
    return Verdicts({k: side_verdict(c, k) for k in c.sides}, comparison_sentence(c))


def side_verdict(c: "Comparison", side: str) -> str:
    """A few sentences on one side."""
    r = c.sides[side]
    step = r.steps.median_us
    if not step:
        return f"{side}: no steps with events."
    parts = [_step_words(side, r), _where_time_goes(c, side, step), _input_words(r, step)]
    parts += _xla_words(r)
    split = r.steps.split_us
    if r.unmapped_us / step >= UNMAPPED_NOTABLE:
        names = ", ".join(o.op for o in r.unmapped_ops[:4])
        parts.append(f"{r.unmapped_us / step:.0%} of the step is in ops of no pipeline stage "
                     f"({names})")
    if split["runtime"] / step >= RUNTIME_NOTABLE:
        parts.append(f"runtime overhead (executor, dispatch, Python) is "
                     f"{split['runtime'] / step:.0%} of the step")
    if split["idle"] / step >= UNTRACED_NOTABLE:
        parts.append(f"nothing traced runs for {split['idle'] / step:.0%} of the step")
    return "; ".join(parts) + "."


def _step_words(side: str, r: "SideResult") -> str:
    words = (f"{side}: {ms(r.steps.median_us)} per steady step (median of "
             f"{r.steps.steady_count})")
    if r.steps.first_us is not None:
        words += f", first step {ms(r.steps.first_us)}"
    return words


def _where_time_goes(c: "Comparison", side: str, step: float) -> str:
    rows = sorted(c.stages, key=lambda row: -row.cells[side].us)
    work = [row for row in rows if row.stage != "idle" and row.cells[side].us > 0][:3]
    return "time goes to " + ", ".join(
        f"{row.stage} {ms(row.cells[side].us)} ({row.cells[side].us / step:.0%})" for row in work)


def _input_words(r: "SideResult", step: float) -> str:
    share = r.steps.split_us["input_wait"] / step
    return f"{input_class(share)} (waiting for or reading input {share:.0%} of the step)"


def _xla_words(r: "SideResult") -> list[str]:
    x, st = r.xla, r.steps
    if not x.compiles:
        return ["no XLA"] if x.launch_style == "none" else []
    first_compile = (st.first_split_us or {}).get("compile", 0.0)
    share = first_compile / st.first_us if st.first_us else 0.0
    # compile_us sums every compile event; compiles on several threads overlap, so it can
    # exceed the first step's wall time, which the share measures (union of intervals)
    return [f"XLA compiled {x.compiles} time(s), {ms(x.compile_us)} of compile work summed "
            f"over threads"
            + (f" ({ms(first_compile)} of the first step's wall time, {share:.0%})"
               if share else "")
            + (f"; recompiled: {', '.join(x.recompiled)}" if x.recompiled else
               ", no recompilation")]


def comparison_sentence(c: "Comparison") -> str:
    a, b = c.sides["legacy"].steps.median_us, c.sides["modern"].steps.median_us
    if not (a and b):
        return "cannot compare: a side has no steps with events."
    faster, slower = ("modern", "legacy") if b < a else ("legacy", "modern")
    diffs = sorted(((row.cells["legacy"].us - row.cells["modern"].us, row.stage)
                    for row in c.stages if row.stage != "idle"), reverse=True)
    gains = [f"{s} ({ms(d)} less)" for d, s in diffs if d > 0][:3]
    losses = [f"{s} ({ms(-d)} more)" for d, s in reversed(diffs) if d < 0][:2]
    text = (f"{faster} is {max(a, b) / min(a, b):.1f}x faster per steady step than {slower} "
            f"({ms(min(a, b))} vs {ms(max(a, b))})")
    if gains:
        text += f"; modern saves most in {', '.join(gains)}"
    if losses:
        text += f"; modern spends more in {', '.join(losses)}"
    fa, fb = c.sides["legacy"].steps.first_us, c.sides["modern"].steps.first_us
    if fa is not None and fb is not None:
        text += f"; first step: legacy {ms(fa)}, modern {ms(fb)}"
    return text + "."
