"""A :class:`compare.output.report.Report` as ``report.json`` (schema version 2,
``compare/output/report.schema.json``): the one place the typed result becomes a dict.

Version 2 keeps every field of version 1 with its meaning and adds: ``labels`` (what the
outputs call each side; the keys stay ``legacy``/``modern``), ``groups`` (the generic view of
any TF program), ``ops_diff`` and ``types_diff`` (op by op), ``comparability`` (the parity
checks: caveats, like for like, the step times compared) and ``verdict.named`` /
``verdict.significant``; later additions that an old reader can ignore: ``view`` (which view
the verdict and plots use, the unmapped share in each), ``unfused`` rows of ``ops_diff``,
``steps.*.first_kind`` and friends, ``steps.*.representative.groups_us``."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from compare.analysis.comparison import (
    SIDES,
    Comparison,
    CrossCheck,
    StageRow,
    StepStats,
    XlaTotals,
)
from compare.analysis.opdiff import OpDiff
from compare.vocabulary.thresholds import MEMBERS_LISTED

if TYPE_CHECKING:
    from compare.output.report import Report

SCHEMA_VERSION = 3


def to_json(r: "Report") -> dict:
    c = r.comparison
    out = {
        "schema_version": SCHEMA_VERSION,
        "created": c.created,
        "sources": {k: dataclasses.asdict(s.source) for k, s in c.sides.items()},
        "attribution": c.attribution_note,
        "stages": [stage_row(row) for row in c.stages],
        "unmapped_us": {k: s.unmapped_us for k, s in c.sides.items()},
        "unmapped_ops": {k: [dataclasses.asdict(o) for o in s.unmapped_ops]
                         for k, s in c.sides.items()},
        "steps": {k: steps(s.steps) for k, s in c.sides.items()},
        "xla": {k: xla(s.xla) for k, s in c.sides.items()},
        "estimates": dict(c.estimates),
        "estimates_used": {k: list(s.estimates_used) for k, s in c.sides.items()},
        "coverage": {k: dataclasses.asdict(s.coverage) for k, s in c.sides.items()},
        "cross_checks": {k: [cross_check(x) for x in s.cross_checks]
                         for k, s in c.sides.items()},
        "verdict": {**c.verdict.sides, "comparison": c.verdict.comparison,
                    "significant": c.verdict.significant,
                    "named": [{"op": x.op, "delta_us": round(x.delta_us, 1), "words": x.words}
                              for x in c.verdict.named[:10]]},
        "labels": {k: c.label(k) for k in SIDES},
        "groups": groups(c),
        "ops_diff": [op_diff(r) for r in c.ops_diff],
        "types_diff": [dataclasses.asdict(t) | {"delta_us": round(t.delta_us, 1)}
                       for t in c.types_diff],
        "comparability": comparability(c),
        "view": view(c),
        "answers": r.answers,
        "files": r.files,
        "tensorboard": r.tensorboard,
        "screenshot": r.screenshot,
    }
    for key in ("runs", "elapsed_s", "merged_trace"):
        if getattr(r, key) is not None:
            out[key] = getattr(r, key)
    return out


def stage_row(row: StageRow) -> dict:
    """One stage's row; per side its cells as ``<side>_<field>`` keys."""
    out: dict[str, Any] = {"stage": row.stage, "kind": row.kind}
    for k in SIDES:
        cell = row.cells[k]
        out[f"{k}_us"] = cell.us
        out[f"{k}_mean_us"] = cell.mean_us
        out[f"{k}_cpu_us"] = cell.cpu_us
        out[f"{k}_first_us"] = cell.first_us
        out[f"{k}_estimated_us"] = cell.estimated_us
        out[f"{k}_ops"] = list(cell.ops)
        out[f"{k}_op_us"] = [dataclasses.asdict(o) for o in cell.op_us]
    out["ratio"] = row.ratio
    return out


def groups(c: Comparison) -> dict:
    """The generic view: rows (``compute`` per top-level scope) and what no rule places."""
    rows = []
    for r in c.groups:
        row: dict[str, Any] = {"group": r.group, "scope": r.scope}
        for k in SIDES:
            cell = r.cells[k]
            row |= {f"{k}_us": cell.us, f"{k}_cpu_us": cell.cpu_us,
                    f"{k}_first_us": cell.first_us, f"{k}_ops": list(cell.ops)}
        rows.append(row)
    step = {k: c.sides[k].steps.median_us for k in SIDES}
    return {"rows": rows,
            "unmapped_us": {k: round(c.group_unmapped_us(k), 1) for k in SIDES},
            "unmapped_share": {k: round(c.group_unmapped_us(k) / step[k], 4) if step[k] else 0.0
                               for k in SIDES}}


def op_diff(r: OpDiff) -> dict:
    """One ``ops_diff`` row, keyed by side as the rest of report.json is."""
    return {"op": r.op, "type": r.type, "legacy_us": r.a_us, "modern_us": r.b_us,
            "delta_us": round(r.delta_us, 1), "legacy_count": r.a_count,
            "modern_count": r.b_count, "status": r.status, "match": r.match, "group": r.group,
            "legacy_host_us": r.a_host_us, "legacy_device_us": r.a_device_us,
            "modern_host_us": r.b_host_us, "modern_device_us": r.b_device_us,
            "members": list(r.members[:MEMBERS_LISTED]), "members_total": len(r.members),
            "into": r.into}


def comparability(c: Comparison) -> dict:
    p = c.parity
    return {"like_for_like": p.like_for_like, "noise_share": round(p.noise, 4),
            "caveats": [dataclasses.asdict(x) for x in p.caveats],
            "step_us": {k: round(st.us, 1) for k, st in p.steps.items()},
            "untraced_us": {k: round(st.untraced_us, 1) for k, st in p.steps.items()}}


def view(c: Comparison) -> dict:
    """Which view the verdict, plots and merged trace use, and each side's unmapped share in
    both views (``unmapped_us``/``coverage`` are the stages', ``groups`` the generic one's)."""
    return {"shown": c.view, "why": c.view_reason(),
            "unmapped_share": {k: {"stages": c.sides[k].coverage.unmapped_share,
                                   "groups": round(c.group_unmapped_us(k) / s.steps.median_us, 4)
                                   if s.steps.median_us else 0.0}
                               for k, s in c.sides.items()}}


def steps(s: StepStats) -> dict:
    return dataclasses.asdict(s)


def xla(x: XlaTotals) -> dict:
    out = dataclasses.asdict(x)
    if x.units is None:
        out.pop("units")
    return out


def cross_check(x: CrossCheck) -> dict:
    return dataclasses.asdict(x) | {"xla": xla(x.xla)}
