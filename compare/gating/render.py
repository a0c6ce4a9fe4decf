"""The gate's answer for people and for CI: log lines, a JSON document, a JUnit XML file.

Log lines (:func:`lines`): the outcome first, then one line per regression and improvement,
largest change of the median first, then what was tested and how. Each finding line gives the
medians per step (what is tested), the change, the Holm-adjusted p and the steps a side, and
what lies behind it: for the step the groups whose mean time changed most, for a group its ops
and the time no op owns in it (mean changes, which add up to the mean change). ASCII only.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

from compare.fmt import duration, shown
from compare.gating.items import Change
from compare.gating.model import (
    IMPROVEMENT,
    REGRESSED,
    REGRESSION,
    TOO_FEW,
    Checked,
    GateResult,
)
from compare.vocabulary.thresholds import GATE_MIN_EFFECT_SHARE, MIN_STEPS_TESTED, TERM_OPS

RESULT_FORMAT, RESULT_VERSION = "compare.gate result", 1
SCHEMA_PATH = Path(__file__).with_name("result.schema.json")
#: Finding lines printed at most (all are in --json and --junit).
MAX_REGRESSION_LINES, MAX_IMPROVEMENT_LINES = 30, 10
ROLES = {"a": "baseline", "b": "new"}


def _label(r: GateResult, k: str) -> str:
    s = r.sides.get(k)
    return s.label if s else ROLES[k]


# --------------------------------------------------------------------------------------------
# log lines

def lines(r: GateResult, strict: bool = False) -> list[str]:
    """What ``compare.gate`` prints."""
    if r.outcome == TOO_FEW:
        return [too_few_line(r, strict)]
    out = [headline(r, strict)]
    regs, imps = r.regressions, r.improvements
    out += [finding(c) for c in regs[:MAX_REGRESSION_LINES]]
    if len(regs) > MAX_REGRESSION_LINES:
        out.append(f"  ... and {len(regs) - MAX_REGRESSION_LINES} more regressions "
                   f"(all in --json and --junit)")
    out += [finding(c) for c in imps[:MAX_IMPROVEMENT_LINES]]
    if len(imps) > MAX_IMPROVEMENT_LINES:
        out.append(f"  ... and {len(imps) - MAX_IMPROVEMENT_LINES} more improvements")
    out += [f"  {unchanged(c, r)}" for c in r.tested
            if c.level == "step" and c.verdict not in (REGRESSION, IMPROVEMENT)]
    out += how(r)
    return out


def headline(r: GateResult, strict: bool) -> str:
    a, b = _label(r, "a"), _label(r, "b")
    regs, imps = len(r.regressions), len(r.improvements)
    better = f"; {imps} improvement{'s' * (imps != 1)}" if imps else ""
    if r.outcome == REGRESSED:
        return (f"compare.gate: REGRESSED: {b} is slower than {a} beyond the noise in {regs} "
                f"of {len(r.tested)} checks{better} (exit {r.exit_code(strict)})")
    return (f"compare.gate: passed: nothing in {b} is slower than in {a} beyond the noise "
            f"({len(r.tested)} checks){better} (exit 0)")


def too_few_line(r: GateResult, strict: bool) -> str:
    n = {k: r.sides[k].steps if k in r.sides else 0 for k in ("a", "b")}
    few = min(n.values())
    why = (f"the rank test needs {MIN_STEPS_TESTED} a side" if few < MIN_STEPS_TESTED else
           f"even if every step of one side were slower than every step of the other, the "
           f"rank test could not reach alpha {r.settings.alpha:g} with so few")
    return (f"compare.gate: too few steps to tell: {_label(r, 'a')} has {_steps(n['a'])}, "
            f"{_label(r, 'b')} {_steps(n['b'])} ({why}; profile more steps, or pool "
            f"repeated runs in a folder); exit {r.exit_code(strict)}"
            + ("" if strict else " (--strict makes it 1)"))


def _steps(n: int) -> str:
    return f"{n} steady step{'s' * (n != 1)}"


def _head(c: Checked) -> str:
    return "step" if c.level == "step" else f"{c.level} {shown(c.name)}"


def finding(c: Checked) -> str:
    word = "REGRESSION" if c.verdict == REGRESSION else "improvement"
    return (f"  {word} {_head(c)}: median {duration(c.a_median_us)} -> {duration(c.b_median_us)} "
            f"per step ({change(c)}, {pvalue(c.p)}, {c.n_a} vs {c.n_b} steps)"
            + behind(c))


def change(c: Checked) -> str:
    if c.change is None:
        return "from 0"
    pct = c.change * 100
    return f"{pct:+.1f}%" if abs(pct) < 10 else f"{pct:+.0f}%"


def pvalue(p: float | None) -> str:
    if p is None:
        return "not tested"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def behind(c: Checked) -> str:
    """The parts that moved the item's mean most, in its direction."""
    sign = 1.0 if c.delta_us >= 0 else -1.0
    parts = sorted((p for p in c.behind if p.delta_us * sign > 0),
                   key=lambda p: -abs(p.delta_us))[:TERM_OPS]
    if not parts:
        return ""
    if c.level == "step":
        return "; groups: " + _changes(parts)
    ops = [p for p in parts if p.kind == "op"]
    events = [p for p in parts if p.kind == "event"]
    text = ""
    if ops:
        text += "; ops: " + _changes(ops)
    if events:
        text += "; time no op owns: " + _changes(events)
    return text


def _changes(parts: list[Change]) -> str:
    return ", ".join(f"{shown(p.name)} {'+' if p.delta_us > 0 else '-'}"
                     f"{duration(abs(p.delta_us))}" for p in parts)


def how(r: GateResult) -> list[str]:
    """What was tested, and how."""
    s = r.settings
    counts = _counts(r)
    given = "" if s.min_effect_us is not None else \
        f" ({GATE_MIN_EFFECT_SHARE:.0%} of the median step; --min-effect-us sets it)"
    which = (f"the {len(r.tested)} whose median could change by {duration(r.min_effect_us)}"
             f"{given} or more" if r.min_effect_us > 0 else
             f"the {len(r.tested)} with time on either side")
    out = [f"  checked {counts}; tested {which}, one-sided rank tests at alpha {s.alpha:g}, "
           f"Holm-adjusted over those {len(r.tested)}; a regression is a median slower by "
           f"over {s.max_slowdown:.1%}"
           + (f" and {duration(r.min_effect_us)}" if r.min_effect_us > 0 else "")
           + ", beyond the spread"]
    if r.max_items is not None:
        out.append(f"  note: with {r.sides['a'].steps} and {r.sides['b'].steps} steps the "
                   f"rank test can tell apart at most {r.max_items} items at alpha "
                   f"{s.alpha:g}, and {len(r.tested)} were tested: profile more steps, or "
                   f"raise --min-effect-us to test fewer")
    for k in ("a", "b"):
        if k in r.sides and r.sides[k].runs > 1:
            out.append(f"  {_label(r, k)}: {r.sides[k].runs} runs pooled, "
                       f"{r.sides[k].steps} steady steps")
    return out


def _counts(r: GateResult) -> str:
    n = {lv: sum(c.level == lv for c in r.checked) for lv in ("step", "group", "op")}
    parts = (["the step"] if n["step"] else []) + \
        [f"{n[lv]} {lv}{'s' * (n[lv] != 1)}" for lv in ("group", "op") if n[lv]]
    return ", ".join(parts) if parts else "nothing"


# --------------------------------------------------------------------------------------------
# JSON

def to_json(r: GateResult, strict: bool = False) -> dict:
    """The same answer as data (schema: ``result.schema.json`` beside this module)."""
    s = r.settings
    return {
        "format": RESULT_FORMAT, "version": RESULT_VERSION, "outcome": r.outcome,
        "exit_code": r.exit_code(strict),
        "settings": {"max_slowdown": s.max_slowdown, "alpha": s.alpha,
                     "min_effect_us": _round(r.min_effect_us),
                     "min_effect_given": s.min_effect_us is not None,
                     "levels": list(s.levels), "strict": strict},
        "sides": {ROLES[k]: {"label": v.label, "sources": v.sources, "runs": v.runs,
                             "steps": v.steps, "baseline_file": v.baseline_file,
                             "warnings": v.warnings} for k, v in r.sides.items()},
        "counts": {"checked": len(r.checked), "tested": len(r.tested),
                   "regressions": len(r.regressions), "improvements": len(r.improvements)},
        "max_items": r.max_items,
        "regressions": [item(c) for c in r.regressions],
        "improvements": [item(c) for c in r.improvements],
        "checked": [item(c) for c in r.checked],
    }


def item(c: Checked) -> dict:
    return {
        "level": c.level, "name": c.name, "group": c.group, "verdict": c.verdict,
        **({"op": c.op, "type": c.op_type, "status": c.status} if c.level == "op" else {}),
        "tested": c.tested, "baseline_steps": c.n_a, "new_steps": c.n_b,
        "baseline_median_us": _round(c.a_median_us), "new_median_us": _round(c.b_median_us),
        "baseline_mean_us": _round(c.a_mean_us), "new_mean_us": _round(c.b_mean_us),
        "delta_us": _round(c.delta_us),
        "change": None if c.change is None else round(c.change, 4),
        "p_slower": _p(c.p_slower), "p_faster": _p(c.p_faster),
        "p_slower_adjusted": _p(c.p_slower_adjusted),
        "p_faster_adjusted": _p(c.p_faster_adjusted),
        "behind": [{"kind": p.kind, "name": p.name, "delta_us": _round(p.delta_us)}
                   for p in sorted(c.behind, key=lambda p: -abs(p.delta_us))[:TERM_OPS * 2]],
    }


def _round(x: float) -> float:
    return round(float(x), 3)


def _p(p: float | None) -> float | None:
    return None if p is None or not math.isfinite(p) else float(f"{p:.6g}")


# --------------------------------------------------------------------------------------------
# JUnit

def junit(r: GateResult, strict: bool = False) -> str:
    """One test case per item tested (a failure per regression; improvements pass with a
    line in system-out); too few steps: one skipped case, or a failure with ``strict``."""
    a, b = _label(r, "a"), _label(r, "b")
    suite = ET.Element("testsuite", name=f"compare.gate: {b} against {a}")
    props = ET.SubElement(suite, "properties")
    for k, v in (("alpha", f"{r.settings.alpha:g}"), ("max_slowdown", f"{r.settings.max_slowdown:g}"),
                 ("min_effect_us", f"{r.min_effect_us:.1f}"), ("outcome", r.outcome),
                 ("checked", str(len(r.checked)))):
        ET.SubElement(props, "property", name=k, value=v)
    failures = skipped = 0
    if r.outcome == TOO_FEW:
        case = ET.SubElement(suite, "testcase", classname="compare.gate", name="steps",
                             time="0")
        tag = "failure" if strict else "skipped"
        ET.SubElement(case, tag, message=too_few_line(r, strict))
        failures, skipped = (1, 0) if strict else (0, 1)
    for c in r.tested:
        case = ET.SubElement(suite, "testcase", classname=f"compare.gate.{c.level}",
                             name=c.name, time="0")
        text = finding(c).strip() if c.verdict in (REGRESSION, IMPROVEMENT) else \
            unchanged(c, r)
        if c.verdict == REGRESSION:
            failures += 1
            ET.SubElement(case, "failure", message=text, type="regression").text = text
        else:
            ET.SubElement(case, "system-out").text = text
    cases = len(r.tested) + (r.outcome == TOO_FEW)
    suite.set("tests", str(cases))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    root = ET.Element("testsuites", name="compare.gate", tests=str(cases),
                      failures=str(failures), errors="0", skipped=str(skipped))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def unchanged(c: Checked, r: GateResult) -> str:
    """An item tested that is neither a regression nor an improvement, and why."""
    return (f"{_head(c)}: median {duration(c.a_median_us)} -> {duration(c.b_median_us)} "
            f"per step ({change(c)}, {pvalue(c.p)}, {c.n_a} vs {c.n_b} steps): "
            f"{why_not(c, r)}")


def why_not(c: Checked, r: GateResult) -> str:
    s, d = r.settings, abs(c.delta_us)
    if c.p is None or c.p >= s.alpha:
        return "within the step-to-step spread"
    if d == 0 or d < r.min_effect_us:
        return f"beyond the spread, but under the minimum effect ({duration(r.min_effect_us)})"
    return f"beyond the spread, but not over --max-slowdown ({s.max_slowdown:.1%})"
