"""A :class:`compare.output.report.Report` as ``report.json`` (schema version 4,
``compare/output/report.schema.json``): the one place the typed result becomes a dict.

Version 4 names the sides by their labels: ``order`` is [label of side A, label of side B];
what belongs to one side (``sources``, ``steps``, ``xla``, ``coverage``, ``answers``,
``verdict.sides``...) is keyed by its label, and the rows of the tables (``stages``,
``groups.rows``, ``ops_diff``, ``types_diff``, ``step_delta.terms``) carry ``a_*`` and ``b_*``
fields, A being ``order[0]``. It adds ``step_delta`` (the step difference in terms that add up
to it), tests against the step-to-step spread (``p_value``, ``beyond_noise``), ``a_wall_us`` /
``b_wall_us`` of ops and ``busy_us`` of group rows, ``steps.*.basis`` and ``input_us``, and the
verdict as data (``faster``, ``a_us``, ``b_us``, ``named[].kind``). Tables are means per
steady step (stage cells keep their median in ``*_median_us``)."""
from __future__ import annotations

import dataclasses
from typing import Any

from compare.analysis.noise import Test
from compare.analysis.opdiff import OpDiff
from compare.analysis.result import (
    SIDES,
    Comparison,
    CrossCheck,
    StageRow,
    StepStats,
    XlaTotals,
)
from compare.analysis.step_delta import StepDelta, Term
from compare.output import caveat_words, compare_words, report_words
from compare.output.report_data import Report
from compare.vocabulary.thresholds import MEMBERS_LISTED

SCHEMA_VERSION = 4


def to_json(r: Report) -> dict:
    c = r.comparison
    lab = c.label
    per = (lambda f: {lab(k): f(s) for k, s in c.sides.items()})
    out = {
        "schema_version": SCHEMA_VERSION,
        "created": c.created,
        "order": [lab(k) for k in SIDES],
        "sources": per(lambda s: dataclasses.asdict(s.source)),
        "attribution": report_words.ATTRIBUTION_NOTE,
        "stages": [stage_row(row) for row in c.stages],
        "unmapped_us": per(lambda s: s.unmapped_us),
        "unmapped_ops": per(lambda s: [dataclasses.asdict(o) for o in s.unmapped_ops]),
        "steps": per(lambda s: steps(s.steps)),
        "xla": per(lambda s: xla(s.xla)),
        "estimates": dict(c.estimates),
        "estimates_used": per(lambda s: list(s.estimates_used)),
        "coverage": per(lambda s: dataclasses.asdict(s.coverage)),
        "cross_checks": per(lambda s: [cross_check(x) for x in s.cross_checks]),
        "verdict": verdict(c),
        "groups": groups(c),
        "ops_diff": [op_diff(row, c) for row in c.ops_diff],
        "types_diff": [dataclasses.asdict(t) | {"delta_us": round(t.delta_us, 1)}
                       for t in c.types_diff],
        "step_delta": step_delta(c.step_delta, c) if c.step_delta else None,
        "comparability": comparability(c),
        "view": view(c),
        "answers": {lab(k): v for k, v in r.answers.items()},
        "files": r.files,
        "tensorboard": r.tensorboard,
        "screenshot": r.screenshot,
    }
    for key in ("runs", "elapsed_s", "merged_trace"):
        if getattr(r, key) is not None:
            out[key] = getattr(r, key)
    return out


def _test(t: Test | None) -> dict:
    """A difference's bootstrap test: its p-value and whether it is beyond the step-to-step spread
    (both null when the sides hold too few steps to test)."""
    if t is None or t.p is None:
        return {"p_value": None, "beyond_noise": None}
    return {"p_value": round(t.p, 6), "beyond_noise": bool(t.beyond)}


def verdict(c: Comparison) -> dict:
    v = c.verdict
    return {"sides": {c.label(k): compare_words.side_text(c, k) for k in SIDES},
            "comparison": compare_words.comparison_text(c),
            "significant": v.significant,
            "faster": c.label(v.faster) if v.faster else None,
            "a_us": round(v.a_us, 1), "b_us": round(v.b_us, 1), **_test(v.test),
            "named": compare_words.named_list(c)}


def stage_row(row: StageRow) -> dict:
    """One stage's row; per side its cells as ``a_<field>`` / ``b_<field>`` keys."""
    out: dict[str, Any] = {"stage": row.stage, "kind": row.kind}
    for k in SIDES:
        cell = row.cells[k]
        out[f"{k}_us"] = cell.us
        out[f"{k}_median_us"] = cell.median_us
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
            row |= {f"{k}_us": cell.us, f"{k}_cpu_us": cell.cpu_us, f"{k}_busy_us": cell.busy_us,
                    f"{k}_first_us": cell.first_us, f"{k}_ops": list(cell.ops)}
        rows.append(row)
    step = {k: c.sides[k].steps.mean_us for k in SIDES}
    return {"rows": rows,
            "unmapped_us": {c.label(k): round(c.group_unmapped_us(k), 1) for k in SIDES},
            "unmapped_share": {c.label(k): round(c.group_unmapped_us(k) / step[k], 4)
                               if step[k] else 0.0 for k in SIDES}}


def op_diff(r: OpDiff, c: Comparison) -> dict:
    """One ``ops_diff`` row (``a_*`` side A, ``b_*`` side B)."""
    return {"op": r.op, "type": r.type, "a_us": r.a_us, "b_us": r.b_us,
            "delta_us": round(r.delta_us, 1), "a_count": r.a_count, "b_count": r.b_count,
            "status": r.status, "match": r.match, "group": r.group,
            "a_host_us": r.a_host_us, "a_device_us": r.a_device_us,
            "b_host_us": r.b_host_us, "b_device_us": r.b_device_us,
            "a_wall_us": r.a_wall_us, "b_wall_us": r.b_wall_us,
            "members": list(r.members[:MEMBERS_LISTED]), "members_total": len(r.members),
            "into": c.label(r.into) if r.into else "", **_test(r.test)}


def step_delta(d: StepDelta, c: Comparison) -> dict:
    """The step difference and its terms (their ``delta_us`` add up to the whole)."""
    return {"basis": d.basis, "a_us": round(d.a_us, 1), "b_us": round(d.b_us, 1),
            "delta_us": round(d.delta_us, 1), **_test(d.test),
            "terms": [term(t, c) for t in d.terms]}


def term(t: Term, c: Comparison) -> dict:
    out = {"key": t.key, "words": compare_words.TERM_WORDS.get(t.key, t.key),
           "a_us": round(t.a_us, 1), "b_us": round(t.b_us, 1),
           "delta_us": round(t.delta_us, 1), **_test(t.test),
           "ops": [{"op": c.ops_diff[o.row].op, "type": c.ops_diff[o.row].type,
                    "delta_us": round(o.delta_us, 1)} for o in t.ops],
           "events": [{"name": e.name, "delta_us": round(e.delta_us, 1)} for e in t.events]}
    if t.members:
        out |= {"members": t.members, "clusters": list(t.clusters),
                "into": c.label(t.into) if t.into else ""}
    return out


def _sided(c: Comparison, facts):
    """A caveat's facts with side keys (and a ``side`` named) as the sides' labels."""
    if not isinstance(facts, dict):
        return facts
    out = {}
    for k, v in facts.items():
        if k == "side" and v in SIDES:
            v = c.label(v)
        out[c.label(k) if k in SIDES else k] = _sided(c, v)
    return out


def comparability(c: Comparison) -> dict:
    p = c.parity
    sided = (lambda d: _sided(c, d))
    return {"like_for_like": p.like_for_like, "noise_share": round(p.noise, 4),
            "caveats": [caveat_words.as_json(x, sided(x.facts), c.labels) for x in p.caveats],
            "step_us": {c.label(k): round(st.us, 1) for k, st in p.steps.items()},
            "untraced_us": {c.label(k): round(st.untraced_us, 1) for k, st in p.steps.items()}}


def view(c: Comparison) -> dict:
    """Which view the verdict, plots and merged trace use, and each side's unmapped share in
    both views (``unmapped_us``/``coverage`` are the stages', ``groups`` the generic one's)."""
    return {"shown": c.view, "why": report_words.view_reason(c),
            "unmapped_share": {c.label(k): {"stages": c.sides[k].coverage.unmapped_share,
                                            "groups": round(c.group_unmapped_us(k)
                                                            / s.steps.mean_us, 4)
                                            if s.steps.mean_us else 0.0}
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
