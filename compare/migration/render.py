"""The migration report, as text for people and as a JSON document for tools.

Both carry the same facts; the JSON keys are stable (``format`` names the version).
"""
from __future__ import annotations

import textwrap

from compare.migration.rules import CATEGORIES, CATEGORY_NOTES, CATEGORY_TITLES, PITFALLS
from compare.migration.scan import Finding

FORMAT = "compare.migrate/1"
WIDTH = 100


def summary(findings: list[Finding]) -> dict:
    """``{"total": n, "by_category": {category: n}}`` with every category present."""
    by = {c: 0 for c in CATEGORIES}
    for f in findings:
        by[f.rule.category] += 1
    return {"total": len(findings), "by_category": by}


def finding_dict(f: Finding) -> dict:
    """One finding as plain data."""
    return {
        "line": f.line,
        "col": f.col,
        "category": f.rule.category,
        "rule": f.rule.id,
        "construct": f.construct,
        "qualified_name": f.qualified_name,
        "via": f.via,
        "source": f.source,
        "arguments": dict(f.arguments),
        "replacement": f.rule.full_replacement(),
        "pitfalls": [{"id": p, "text": PITFALLS[p]} for p in f.pitfalls],
        "port": f.rule.port(),
        "tf_upgrade_v2": f.upgrade,
    }


def to_json(script: str, findings: list[Finding], plan: str, upgrade: str) -> dict:
    """The whole report as one JSON-ready dict."""
    return {
        "format": FORMAT,
        "script": script,
        "nothing_to_migrate": not findings,
        "summary": summary(findings),
        "tf_upgrade_v2": upgrade,
        "plan": plan,
        "findings": [finding_dict(f) for f in findings],
    }


def _wrap(text: str, indent: str, first: str | None = None) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent if first is None else first,
                         subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False) or [indent.rstrip()]


def _finding_line(f: Finding) -> str:
    where = f"{f.line}:{f.col}"
    text = f"  {where:<8} {f.construct}"
    if f.via:
        text += f"   (via {f.via}: {f.source})"
    return text


def to_text(script: str, findings: list[Finding], plan: str, upgrade: str) -> str:
    """The report for people: header, plan, then one section per category in source order."""
    if not findings:
        return (f"{script}: nothing to migrate: no queue-based input, readers, queue batching, "
                "queue runners, stateful random ops, jit_scope / global_jit_level, FULL_TRACE / "
                "timeline or Session found.\n")
    s = summary(findings)
    out = [f"Migration report for {script}: {s['total']} legacy constructs to move to "
           "tf.data + XLA (line:col, col 1-based)",
           "  " + ", ".join(f"{c} {n}" for c, n in s["by_category"].items()), ""]
    out += ["What tf_upgrade_v2 would do"] + _wrap(upgrade, "  ") + [""]
    out += ["Migration plan"] + _wrap(plan, "  ") + [""]
    for cat in CATEGORIES:
        group = [f for f in findings if f.rule.category == cat]
        if not group:
            continue
        out.append(f"{CATEGORY_TITLES[cat]} [{cat}, {len(group)}]")
        out += [_finding_line(f) for f in group]
        rules, labels = [], {}
        for f in group:
            if f.rule.id not in labels:
                rules.append(f.rule)
                labels[f.rule.id] = []
            if f.short not in labels[f.rule.id]:
                labels[f.rule.id].append(f.short)
        out.append("  replace:")
        for r in rules:
            out += _wrap(r.replacement, " " * 6, f"    - {', '.join(labels[r.id])}: ")
        if cat in CATEGORY_NOTES:
            out += _wrap(CATEGORY_NOTES[cat], " " * 6, "    - ")
        pitfalls = list(dict.fromkeys(p for f in group for p in f.pitfalls))
        if pitfalls:
            out.append("  pitfalls we measured (TF 2.21, CPU):")
            for p in pitfalls:
                out += _wrap(PITFALLS[p], " " * 6, "    - ")
        ports = list(dict.fromkeys((side, tuple(v.items())) for r in rules
                                   for side, v in r.port().items() if v))
        out.append("  our port:")
        for side, items in ports:
            v = dict(items)
            out += _wrap(f"{v['path']}: {v['what']}", " " * 6, "    - ")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
