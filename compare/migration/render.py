"""The migration report, as text for people and as a JSON document for tools.

Both carry the same facts; the JSON keys are stable (``format`` names the version). Version 2
added ``pipelines`` (one plan per input pipeline: ``function``, ``line`` of its batch or dequeue
call, ``chain``, ``unresolved``, and the typed model behind them), ``notes``, ``see_also`` and a
finding's ``cell`` (notebooks). Later additions to version 2, keys only added: a pipeline's
``ends`` (every batch call it chooses between) and ``attributes`` (a method's ``self.x`` and where
they are set), a variant's ``branches`` (streams zipped), a batch stage's ``after`` (the per-batch
map), the stages ``external``, ``decode`` and ``unbatch`` (``enqueue_many``), a source's
``columns``, ``order`` and ``endless`` and its kind ``computed`` (what an enqueue op computes each
time it runs), a queue stage's ``when``, and a code value's ``default`` (TF1's default for an
argument the script does not give).
"""
from __future__ import annotations

import textwrap
from typing import Any

from compare.migration.model import Pipeline, Report
from compare.migration.rules import (
    CATEGORIES,
    CATEGORY_NOTES,
    CATEGORY_TITLES,
    PITFALLS,
    SEE_ALSO,
    Rule,
)
from compare.migration.scan import Finding

FORMAT = "compare.migrate/2"
WIDTH = 100


def summary(findings: list[Finding]) -> dict[str, Any]:
    """``{"total": n, "by_category": {category: n}}`` with every category present."""
    by = {c: 0 for c in CATEGORIES}
    for f in findings:
        by[f.rule.category] += 1
    return {"total": len(findings), "by_category": by}


def finding_dict(f: Finding) -> dict[str, Any]:
    """One finding as plain data."""
    return {
        "line": f.line,
        "col": f.col,
        "cell": f.cell,
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


def to_json(report: Report) -> dict[str, Any]:
    """The whole report as one JSON-ready dict."""
    return {
        "format": FORMAT,
        "script": report.script,
        "nothing_to_migrate": not report.findings and not report.pipelines,
        "summary": summary(report.findings),
        "notes": list(report.notes),
        "tf_upgrade_v2": report.tf_upgrade_v2,
        "plan": report.plan,
        "pipelines": [p.to_dict() for p in report.pipelines],
        "findings": [finding_dict(f) for f in report.findings],
        "see_also": SEE_ALSO,
    }


def _wrap(text: str, indent: str, first: str | None = None) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent if first is None else first,
                         subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False) or [indent.rstrip()]


def _where(line: int | None, cell: int | None) -> str:
    if line is None:
        return "?"
    return f"c{cell}:{line}" if cell else str(line)


def _finding_line(f: Finding) -> str:
    where = f"{_where(f.line, f.cell)}:{f.col}"
    text = f"  {where:<8} {f.construct}"
    if f.via:
        text += f"   (via {f.via}: {f.source})"
    return text


def _pipeline_lines(p: Pipeline, i: int, n: int) -> list[str]:
    ends = p.ends or [p.end]
    calls = "; ".join((f"cell {e.cell}, line {e.line}" if e.cell else f"line {e.line}")
                      + f": {e.construct}" for e in ends)
    out = [f"Pipeline {i} of {n}: {p.function} ({calls}, {p.kind})"]
    out += _wrap("; ".join(p.notes), "    ", "  note: ") if p.notes else []
    out += ["    " + ln for ln in p.chain.split("\n")]
    if p.legend:
        out.append("  where:")
        for ln in p.legend:
            body = ln.lstrip(" ")
            pad = " " * (4 + len(ln) - len(body))
            out += _wrap(body, pad + "  ", pad)
    if p.unresolved:
        out.append("  unresolved:")
        for u in p.unresolved:
            out += _wrap(f"line {_where(u.line, u.cell)}: {u.what}: {u.why}", " " * 6, "    - ")
    else:
        out.append("  unresolved: none")
    return out + [""]


def _category_lines(cat: str, group: list[Finding]) -> list[str]:
    out = [f"{CATEGORY_TITLES[cat]} [{cat}, {len(group)}]"]
    out += [_finding_line(f) for f in group]
    rules: list[Rule] = []
    labels: dict[str, list[str]] = {}
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
    return out + [""]


def to_text(report: Report) -> str:
    """The report for people: header, notes, tf_upgrade_v2, plan, the pipelines, then one section
    per category in source order, and one "see also" line."""
    findings = report.findings
    if not findings and not report.pipelines:
        notes = "".join(f"  note: {n}\n" for n in report.notes)
        return (f"{report.script}: nothing to migrate: no queue-based input, readers, queue "
                "batching, TF1 iterators, feed_dict feeding, queue runners, stateful random ops, "
                "jit_scope / global_jit_level, FULL_TRACE / timeline or Session found.\n" + notes)
    s = summary(findings)
    where = "line:col, col 1-based" + (", cN:line in a notebook's cell N" if any(
        f.cell for f in findings) else "")
    out = [f"Migration report for {report.script}: {s['total']} legacy constructs to move to "
           f"tf.data + XLA ({where})",
           "  " + ", ".join(f"{c} {n}" for c, n in s["by_category"].items()), ""]
    if report.notes:
        out.append("Notes")
        for n in report.notes:
            out += _wrap(n, "    ", "  - ")
        out.append("")
    if report.tf_upgrade_v2:
        out += ["What tf_upgrade_v2 would do"] + _wrap(report.tf_upgrade_v2, "  ") + [""]
    out += ["Migration plan"] + _wrap(report.plan, "  ") + [""]
    for i, p in enumerate(report.pipelines, 1):
        out += _pipeline_lines(p, i, len(report.pipelines))
    for cat in CATEGORIES:
        group = [f for f in findings if f.rule.category == cat]
        if group:
            out += _category_lines(cat, group)
    out += _wrap(SEE_ALSO, "  ", "See also: ")
    return "\n".join(out).rstrip() + "\n"
