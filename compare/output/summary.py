"""The one-screen summary report.md opens with, and all that ``compare.run --brief`` prints: the
verdict, the step times, the few largest changes and the caveats, in at most
:data:`MAX_LINES` lines of Markdown (a long sentence is one line; names are cut as
report.md cuts them).

Built from the typed fields of a :class:`compare.output.report.Report` only -- the verdict
sentence, each side's step statistics, the op diff and the parity caveats -- so that it does
not depend on how the rest of report.md is laid out.
"""
from __future__ import annotations

from compare.analysis.result import Comparison
from compare.fmt import duration, shown, shown_words
from compare.output import caveat_words
from compare.output.compare_words import no_ops_words, status_words
from compare.output.report_data import Report
from compare.output.tables import describe

#: The summary's length bound, in lines.
MAX_LINES = 25
#: Op differences named.
CHANGES = 5
#: Caveats listed one by one; the rest are counted.
CAVEATS = 4


def summary(report: Report) -> list[str]:
    """The summary's lines (no trailing newlines), at most :data:`MAX_LINES`."""
    c = report.comparison
    verdict = report.words.get("comparison", "")
    lines = ["## Summary", "", f"**{verdict}**" if verdict else "", ""]
    lines += _steps(c) + [""] + _changes(c) + [""] + _caveats(c)
    return [shown_words(line) for line in lines][:MAX_LINES]


def _cell(us: float | None) -> str:
    return duration(us) if us else "–"


def _steps(c: Comparison) -> list[str]:
    """Step times, a column per side: the steady step the verdict compares (the mean step, or
    the mean traced span of a session run when untraced time sits between runs), the median
    steady step, and the first step."""
    keys = list(c.sides)
    steps = [c.sides[k].steps for k in keys]
    d = c.step_delta
    steady = [(getattr(d, f"{k}_us") if d else 0.0) or s.basis_us or s.mean_us
              for k, s in zip(keys, steps)]
    what = "mean traced span" if d and d.basis == "traced" else "mean step"
    first = "first traced step" if any(s.first_kind == "window" for s in steps) else "first step"
    return [f"| per step | {' | '.join(c.label(k) for k in keys)} |",
            "|---|" + "---:|" * len(keys),
            f"| steady, {what} as compared (steps) | "
            + " | ".join(f"{_cell(us)} ({s.steady_count})" for us, s in zip(steady, steps))
            + " |",
            "| steady, median step | " + " | ".join(_cell(s.median_us) for s in steps) + " |",
            f"| {first} | " + " | ".join(_cell(s.first_us) for s in steps) + " |"]


def _changes(c: Comparison) -> list[str]:
    """The largest op differences per steady step, largest first."""
    if not c.ops_diff:
        return [no_ops_words(c)]
    rows = [r for r in c.ops_diff if r.delta_us][:CHANGES]
    if not rows:
        return ["No op's time differs between the two."]
    la, lb = (c.label(k) for k in list(c.sides)[:2])
    lines = [f"Largest changes per steady step, {la} → {lb} ({len(c.ops_diff)} rows in "
             "report.json's `ops_diff`):"]
    for r in rows:
        sign = "+" if r.delta_us > 0 else "−"
        lines.append(f"- `{shown(describe(r)).replace('`', chr(39))}`: {_cell(r.a_us)} → "
                     f"{_cell(r.b_us)} ({sign}{duration(abs(r.delta_us))}, {status_words(r.status)})")
    return lines


def _caveats(c: Comparison) -> list[str]:
    """What the numbers rest on: the parity checks' caveats (those that break the comparison
    first), and each trace that was only partly read."""
    caveats = sorted(c.parity.caveats, key=lambda x: not x.breaks) if c.parity else []
    lines = [f"- {'**Not like for like**: ' if x.breaks else ''}{caveat_words.text(x, c.labels)}"
             for x in caveats[:CAVEATS]]
    if len(caveats) > CAVEATS:
        lines.append(f"- {len(caveats) - CAVEATS} more under \"Can these two traces be "
                     f"compared?\"")
    for k, side in c.sides.items():
        if side.source.warnings:
            lines.append(f"- {c.label(k)}'s trace was read in part: "
                         f"{len(side.source.warnings)} warning(s), the first: "
                         f"{side.source.warnings[0]}")
    like = c.parity is None or c.parity.like_for_like
    if not lines:
        return ["Caveats: none; no check found a reason not to compare the steps like for "
                "like."]
    return ["Caveats (none breaks the comparison: like for like):" if like else "Caveats:",
            *lines]
