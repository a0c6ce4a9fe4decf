"""Legacy against modern, stage by stage: the facts ``report.json`` holds.

Each side is one trace (the source of truth: for our runs the TensorBoard profile, which marks
steps and carries the HLO), mapped by :mod:`compare.analysis.mapping` and attributed per step by
:mod:`compare.analysis.attribution`. Per stage we report the median over steady steps (every step but
the first) of wall time and CPU time, the first step apart (start-up and XLA compiles), the ops
behind each number on each side, and how much of it rests on an estimate. A side may add cross
checks from other traces of the same run (legacy's ``timeline.json``).
"""
from __future__ import annotations

import dataclasses
import time
from collections import defaultdict

import numpy as np

from common.stages import ALL_STAGES, PIPELINE_STAGES
from compare.analysis import xla
from compare.analysis.attribution import Attribution, attribute
from compare.analysis.mapping import StageMap, map_stages
from compare.model.events import Trace
from compare.vocabulary.labels import BASES, BASIS, ESTIMATES, LABEL, LABELS, PIPELINE

SCHEMA_VERSION = 1
SIDES = ("legacy", "modern")
#: Input share of step time (from ../shared/design.md, as xprof's input-pipeline page uses).
INPUT_BOUND = ((0.20, "highly input-bound"), (0.05, "moderately input-bound"),
               (0.0, "not input-bound"))
ATTRIBUTION_NOTE = (
    "wall: each instant of a step is shared equally among the threads working at that instant "
    "(each at its innermost event's stage); instants where threads only wait go to what they "
    "wait in, instants with nothing traced to idle; per step it adds up to the step time. "
    "cpu: busy thread time per stage summed over threads. Stage numbers are medians over "
    "steady steps (every step but the first); the first step is reported apart.")


@dataclasses.dataclass
class Side:
    """One side of the comparison: its trace, mapping, attribution and XLA summary."""

    name: str
    trace: Trace
    smap: StageMap
    attribution: Attribution
    xla: xla.XlaSummary
    source_note: str = ""
    cross_checks: list[dict] = dataclasses.field(default_factory=list)


def analyse(name: str, trace: Trace, source_note: str = "") -> Side:
    """Map and attribute one trace."""
    smap = map_stages(trace)
    return Side(name, trace, smap, attribute(trace, smap), xla.summarize(trace), source_note)


def cross_check(side: Side, other: Trace, label: str, against: str = "steady") -> dict:
    """Per-stage wall time of another trace of the same run (legacy's timeline.json, whose
    cluster runs are split as the profile measured them) beside the side's own numbers for the
    same kind of step (``against``: "steady" = the side's steady median, "first" = its first
    step)."""
    smap = map_stages(other, reference=side.smap)
    att = attribute(other, smap)
    rows = att.steady or att.steps
    wall = np.median(np.stack([s.wall for s in rows]), axis=0) if rows else np.zeros(len(LABELS))
    own = side.attribution
    if against == "first" and own.first is not None:
        mine, mine_step = own.first.wall, own.first.dur
    else:
        mine, mine_step = own.median("wall"), own.median_step_us()
    return {"trace": label, "format": other.format, "steps": len(att.steps),
            "against": against,
            "step_us": float(np.median([s.dur for s in rows])) if rows else 0.0,
            "source_step_us": round(float(mine_step), 1),
            "stages_us": {LABELS[i]: round(float(wall[i]), 1) for i in range(len(LABELS))
                          if wall[i] > 0},
            "source_stages_us": {LABELS[i]: round(float(mine[i]), 1)
                                 for i in range(len(LABELS)) if mine[i] > 0},
            "xla": _xla_dict(xla.summarize(other))}


def _xla_dict(s: xla.XlaSummary, units: dict | None = None) -> dict:
    out = {"compile_us": round(s.compile_us, 1), "run_us": round(s.run_us, 1),
           "compiles": int(s.compiles), "recompiled": list(s.recompiled),
           "launch_style": s.launch_style}
    if units is not None:
        out["units"] = units
    return out


def _units(side: Side) -> dict:
    """Each XLA cluster / compiled function: its TF ops, stages, compiles and run time."""
    out = {}
    for name, contents in sorted(side.smap.units.items(), key=lambda kv: _unit_key(kv[0])):
        u = side.xla.units.get(name)
        d = contents.as_dict()
        d.update({"compiles": u.compiles if u else 0,
                  "compile_us": round(u.compile_us, 1) if u else 0.0,
                  "runs": u.runs if u else 0, "run_us": round(u.run_us, 1) if u else 0.0})
        out[name] = d
    return out


def _unit_key(name: str):
    parts = name.split("_")
    return (0, int(parts[1])) if name.startswith("cluster_") and parts[1].isdigit() else (1, name)


def _ops_by_label(side: Side) -> dict[int, list[tuple[str, float]]]:
    """Per label: (op display name, median wall µs per steady step), largest first."""
    steady = side.attribution.steady
    per_step: list[dict[tuple[int, str], float]] = []
    names: dict[int, str] = {}
    for st in steady:
        acc: dict[tuple[int, str], float] = defaultdict(float)
        for i, w in st.by_event_wall.items():
            if i not in names:
                names[i] = side.smap.display_name(i)
            for lab, frac in side.smap.fractions(i):
                acc[(lab, names[i])] += w * frac
        per_step.append(acc)
    keys = {k for acc in per_step for k in acc}
    out: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for lab, name in keys:
        vals = [acc.get((lab, name), 0.0) for acc in per_step]
        if max(vals) > 0:  # listed if it ran in any steady step; valued by its median
            out[lab].append((name, float(np.median(vals)), float(np.mean(vals))))
    return {lab: [(n, v) for n, v, _ in sorted(rows, key=lambda r: (-r[1], -r[2]))]
            for lab, rows in out.items()}


def _steps(side: Side) -> dict:
    att = side.attribution
    first = att.first
    steady_durs = [s.dur for s in att.steady]
    rep = att.representative()
    return {"count": len(att.steps), "steady_count": len(att.steady),
            "mean_us": round(float(np.mean(steady_durs)), 1) if steady_durs else 0.0,
            "representative": ({"step": rep.num, "dur_us": round(rep.dur, 1),
                                "stages_us": {LABELS[i]: round(float(rep.wall[i]), 1)
                                              for i in range(len(LABELS)) if rep.wall[i] > 0}}
                               if rep else None),
            "blocked_us": round(att.median_blocked_us(), 1),
            "median_us": round(att.median_step_us(), 1),
            "first_us": round(first.dur, 1) if first else None,
            "min_us": round(float(min(steady_durs)), 1) if steady_durs else 0.0,
            "max_us": round(float(max(steady_durs)), 1) if steady_durs else 0.0,
            "split_us": {k: round(v, 1) for k, v in att.median_split().items()},
            "first_split_us": ({k: round(v, 1) for k, v in first.split.items()}
                               if first else None)}


def compare(legacy: Side, modern: Side) -> dict:
    """The report (``report.json``'s content, validated by ``compare/output/report.schema.json``)."""
    sides = {"legacy": legacy, "modern": modern}
    med = {k: s.attribution.median("wall") for k, s in sides.items()}
    mean = {k: (np.mean(np.stack([st.wall for st in s.attribution.steady]), axis=0)
                if s.attribution.steady else np.zeros(len(LABELS))) for k, s in sides.items()}
    cpu = {k: s.attribution.median("cpu") for k, s in sides.items()}
    est = {k: s.attribution.median("wall_estimated") for k, s in sides.items()}
    first = {k: (s.attribution.first.wall if s.attribution.first else None)
             for k, s in sides.items()}
    ops = {k: _ops_by_label(s) for k, s in sides.items()}
    stages = []
    for stage in ALL_STAGES:
        lab = LABEL[stage]
        row = {"stage": stage, "kind": "pipeline" if stage in PIPELINE_STAGES else "overhead"}
        for k in SIDES:
            row[f"{k}_us"] = round(float(med[k][lab]), 1)
        for k in SIDES:
            row[f"{k}_mean_us"] = round(float(mean[k][lab]), 1)
            row[f"{k}_cpu_us"] = round(float(cpu[k][lab]), 1)
            row[f"{k}_first_us"] = (round(float(first[k][lab]), 1) if first[k] is not None
                                    else None)
            row[f"{k}_estimated_us"] = round(float(est[k][lab]), 1)
            row[f"{k}_ops"] = [name for name, _ in ops[k].get(lab, [])]
            row[f"{k}_op_us"] = [{"op": name, "us": round(v, 1)}
                                 for name, v in ops[k].get(lab, [])[:12]]
        row["ratio"] = (round(row["legacy_us"] / row["modern_us"], 3) if row["modern_us"] > 0
                        else None)
        stages.append(row)
    steps = {k: _steps(s) for k, s in sides.items()}
    unmapped = {k: round(float(med[k][0]), 1) for k in SIDES}
    report = {
        "schema_version": SCHEMA_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "sources": {k: {"path": s.trace.source, "format": s.trace.format,
                        "note": s.source_note, "warnings": list(s.trace.warnings)}
                    for k, s in sides.items()},
        "attribution": ATTRIBUTION_NOTE,
        "stages": stages,
        "unmapped_us": unmapped,
        "unmapped_ops": {k: [{"op": n, "us": round(v, 1)} for n, v in ops[k].get(0, [])[:12]]
                         for k in SIDES},
        "steps": steps,
        "xla": {k: _xla_dict(s.xla, _units(s)) for k, s in sides.items()},
        "estimates": dict(ESTIMATES),
        "estimates_used": {k: _estimates_used(s) for k, s in sides.items()},
        "coverage": {k: _coverage(stages, k, steps[k]["median_us"], unmapped[k]) for k in SIDES},
        "cross_checks": {k: s.cross_checks for k, s in sides.items()},
    }
    report["verdict"] = verdict(report)
    return report


def _estimates_used(side: Side) -> list[str]:
    """Which kinds of estimate carry time in this side's steady steps."""
    est = {BASIS[b] for b in ESTIMATES}
    used = {BASES[side.smap.basis[i]] for st in side.attribution.steady
            for i, w in st.by_event_wall.items() if w > 0 and side.smap.basis[i] in est}
    if any(st.credited_us > 0 for st in side.attribution.steady):
        used.add("concurrent_op")
    return sorted(used)


def _coverage(stages: list[dict], side: str, step_us: float, unmapped: float) -> dict:
    have = [r["stage"] for r in stages if r["kind"] == "pipeline" and r[f"{side}_us"] > 0
            and r[f"{side}_ops"]]
    return {"stages_with_time": have, "unmapped_share": round(unmapped / step_us, 4)
            if step_us else 0.0}


def _ms(us: float | None) -> str:
    if us is None:
        return "n/a"
    return f"{us / 1e6:.2f} s" if us >= 1e6 else f"{us / 1e3:.1f} ms" if us >= 1e3 \
        else f"{us:.0f} µs"


def input_bound(share: float) -> str:
    return next(words for limit, words in INPUT_BOUND if share >= limit)


def side_verdict(report: dict, side: str) -> str:
    """A few sentences on one side: step time, where it goes, what bounds it, XLA's cost."""
    st = report["steps"][side]
    step = st["median_us"]
    if not step:
        return f"{side}: no steps with events."
    rows = sorted(report["stages"], key=lambda r: -r[f"{side}_us"])
    work = [r for r in rows if r["stage"] not in ("idle",) and r[f"{side}_us"] > 0][:3]
    top = ", ".join(f"{r['stage']} {_ms(r[f'{side}_us'])} ({r[f'{side}_us'] / step:.0%})"
                    for r in work)
    split = st["split_us"]
    inp = split["input_wait"] / step
    x = report["xla"][side]
    parts = [f"{side}: {_ms(step)} per steady step (median of {st['steady_count']})"]
    if st["first_us"] is not None:
        parts[0] += f", first step {_ms(st['first_us'])}"
    parts.append(f"time goes to {top}")
    parts.append(f"{input_bound(inp)} (waits for input {inp:.0%} of the step)")
    if x["compiles"]:
        first_split = st.get("first_split_us") or {}
        first_compile = first_split.get("compile", 0.0)
        share = first_compile / st["first_us"] if st["first_us"] else 0.0
        # compile_us sums every compile event; compiles on several threads overlap, so it can
        # exceed the first step's wall time, which the share measures (union of intervals)
        parts.append(f"XLA compiled {x['compiles']} time(s), {_ms(x['compile_us'])} of compile "
                     f"work summed over threads"
                     + (f" ({_ms(first_compile)} of the first step's wall time, {share:.0%})"
                        if share else "")
                     + (f"; recompiled: {', '.join(x['recompiled'])}" if x["recompiled"] else
                        ", no recompilation"))
    elif x["launch_style"] == "none":
        parts.append("no XLA")
    um = report["unmapped_us"][side] / step
    if um >= 0.10:
        names = ", ".join(o["op"] for o in report["unmapped_ops"][side][:4])
        parts.append(f"{um:.0%} of the step is in ops of no pipeline stage ({names})")
    rt = split["runtime"] / step
    if rt >= 0.15:
        parts.append(f"runtime overhead (executor, dispatch, Python) is {rt:.0%} of the step")
    if split["idle"] / step >= 0.10:
        parts.append(f"nothing traced runs for {split['idle'] / step:.0%} of the step")
    return "; ".join(parts) + "."


def verdict(report: dict) -> dict:
    out = {k: side_verdict(report, k) for k in SIDES}
    a, b = report["steps"]["legacy"]["median_us"], report["steps"]["modern"]["median_us"]
    if a and b:
        faster, slower = ("modern", "legacy") if b < a else ("legacy", "modern")
        ratio = max(a, b) / min(a, b)
        diffs = sorted(((r["legacy_us"] - r["modern_us"], r["stage"]) for r in report["stages"]
                        if r["stage"] != "idle"), reverse=True)
        gains = [f"{s} ({_ms(r)} less)" for r, s in diffs if r > 0][:3]
        losses = [f"{s} ({_ms(-r)} more)" for r, s in reversed(diffs) if r < 0][:2]
        text = (f"{faster} is {ratio:.1f}x faster per steady step than {slower} "
                f"({_ms(min(a, b))} vs {_ms(max(a, b))})")
        if gains:
            text += f"; modern saves most in {', '.join(gains)}"
        if losses:
            text += f"; modern spends more in {', '.join(losses)}"
        fa, fb = report["steps"]["legacy"]["first_us"], report["steps"]["modern"]["first_us"]
        if fa is not None and fb is not None:
            text += f"; first step: legacy {_ms(fa)}, modern {_ms(fb)}"
        out["comparison"] = text + "."
    else:
        out["comparison"] = "cannot compare: a side has no steps with events."
    return out


def stage_order(side: Side) -> str:
    """Stages in the order their work happens within the representative steady step: by the
    time half of each stage's work is done, with the span holding its middle 80%."""
    att = side.attribution
    st = att.representative()
    if st is None:
        return "No steps."
    e, t0, t1 = att.segments
    labels = att.segment_labels()
    a, b = np.clip(t0, st.ts, st.ts + st.dur), np.clip(t1, st.ts, st.ts + st.dur)
    m = (b > a) & np.isin(labels, list(PIPELINE)) & ~side.smap.wait[e]
    spans = []
    for lab in np.unique(labels[m]):
        k = np.flatnonzero(m & (labels == lab))
        k = k[np.argsort(a[k])]
        done = np.cumsum(b[k] - a[k]) / np.sum(b[k] - a[k])
        at = lambda q: float(a[k][np.searchsorted(done, q)])  # noqa: E731
        spans.append((at(0.5), at(0.1), float(b[k][np.searchsorted(done, 0.9)]),
                      LABELS[int(lab)]))
    chain = " → ".join(f"{name} ({(lo - st.ts) / 1e3:.1f}–{(hi - st.ts) / 1e3:.1f} ms)"
                       for _, lo, hi, name in sorted(spans))
    return (f"By stage, in steady step {st.num} ({_ms(st.dur)}): {chain} (ordered by when half "
            f"of each stage's work is done; the span holds its middle 80%).")


def stage_table(report: dict, width: int = 100) -> str:
    """The stage table the CLI prints (medians per steady step)."""
    head = (f"{'stage':<12} {'legacy':>10} {'modern':>10} {'ratio':>7}   "
            f"{'legacy ops':<28} {'modern ops'}")
    lines = [head, "-" * min(width, len(head) + 30)]

    def cell(us: float) -> str:
        return _ms(us) if us > 0 else "-"

    def opcol(ops: list[str], n: int = 28) -> str:
        s = ", ".join(o.split("/")[-1] for o in ops[:2])
        return s if len(s) <= n else s[: n - 1] + "…"

    for r in report["stages"]:
        if r["legacy_us"] == 0 and r["modern_us"] == 0:
            continue
        ratio = f"{r['ratio']:.1f}x" if r["ratio"] else "-"
        lines.append(f"{r['stage']:<12} {cell(r['legacy_us']):>10} {cell(r['modern_us']):>10} "
                     f"{ratio:>7}   {opcol(r['legacy_ops']):<28} {opcol(r['modern_ops'])}")
    um = report["unmapped_us"]
    lines.append(f"{'unmapped':<12} {cell(um['legacy']):>10} {cell(um['modern']):>10}")
    st = report["steps"]
    lines.append(f"{'step':<12} {cell(st['legacy']['median_us']):>10} "
                 f"{cell(st['modern']['median_us']):>10} "
                 + (f"{st['legacy']['median_us'] / st['modern']['median_us']:>6.1f}x"
                    if st["modern"]["median_us"] else ""))
    lines.append(f"{'first step':<12} {cell(st['legacy']['first_us'] or 0):>10} "
                 f"{cell(st['modern']['first_us'] or 0):>10}")
    return "\n".join(lines)

