"""A :class:`compare.output.report.Report` as ``report.json`` (schema version 1,
``compare/output/report.schema.json``): the one place the typed result becomes a dict."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from compare.analysis.comparison import SIDES, CrossCheck, StageRow, StepStats, XlaTotals

if TYPE_CHECKING:
    from compare.output.report import Report

SCHEMA_VERSION = 1


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
        "verdict": {**c.verdict.sides, "comparison": c.verdict.comparison},
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
    out = {"stage": row.stage, "kind": row.kind}
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


def steps(s: StepStats) -> dict:
    return dataclasses.asdict(s)


def xla(x: XlaTotals) -> dict:
    out = dataclasses.asdict(x)
    if x.units is None:
        out.pop("units")
    return out


def cross_check(x: CrossCheck) -> dict:
    return dataclasses.asdict(x) | {"xla": xla(x.xla)}
