"""The comparison's artifacts in a run folder: ``report.md``, ``report.json`` (validated by
``compare/output/report.schema.json``), ``stages.png``, ``timelines.png``, ``merged_trace.json.gz``.

They are written into a staging folder and moved into place together at the end, so an
interrupted run leaves either the whole report or none of it.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from common import atomic
from compare import explain
from compare.analysis.comparison import SIDES, Side, compare, stage_order
from compare.output import merged_trace, plots
from compare.output.colors import STAGE_COLORS

SCHEMA_PATH = Path(__file__).with_name("report.schema.json")
FILES = {"report_md": "report.md", "report_json": "report.json", "stages_png": "stages.png",
         "timelines_png": "timelines.png", "merged_trace": "merged_trace.json.gz"}


#: The seed's questions in the seed's order, keyed as compare.explain keys them.
QUESTION_ORDER = ("interpret", "xla", "sequence", "pids")
_HEADING = re.compile(r"^\n?(\d)\. (.+)\n=+$", re.M)


def answers(side: Side) -> dict[str, str]:
    """The seed's four questions answered for one side by :mod:`compare.explain` (for a steady
    step), plus ``summary`` (explain's "In short") and, in the sequence answer, the order of
    the stages' work in that step."""
    text = explain.to_text(explain.explain(side.trace))
    cuts = list(_HEADING.finditer(text))
    out = {"summary": text[:cuts[0].start()].strip() if cuts else text.strip()}
    keys = {q: k for k, q in explain.QUESTIONS.items()}
    for n, m in enumerate(cuts):
        end = cuts[n + 1].start() if n + 1 < len(cuts) else len(text)
        out[keys.get(m.group(2), m.group(2))] = text[m.end():end].strip("\n")
    out["sequence"] = stage_order(side) + "\n\n" + out.get("sequence", "")
    return out


def build(legacy: Side, modern: Side, tensorboard_logdir: str | None = None,
          screenshot: str | None = None) -> dict:
    """report.json's content: the comparison, the four answers per side, files and commands;
    ``screenshot``: the file name of TensorBoard's profile tab saved beside it, if any."""
    report = compare(legacy, modern)
    report["answers"] = {"legacy": answers(legacy), "modern": answers(modern)}
    report["files"] = dict(FILES)
    report["tensorboard"] = (f"tensorboard --logdir {tensorboard_logdir}"
                             if tensorboard_logdir else None)
    report["screenshot"] = screenshot
    return report


def write(out: str | os.PathLike, report: dict, legacy: Side, modern: Side) -> list[Path]:
    """Write every artifact into ``out`` (all or nothing); returns the paths written."""
    out = Path(out)
    staging = out / f".report-staging-{os.getpid()}"
    staging.mkdir(parents=True, exist_ok=False)
    try:
        runs = {"legacy": legacy.attribution, "modern": modern.attribution}
        info = merged_trace.write(staging / FILES["merged_trace"], runs)
        report["merged_trace"] = info
        plots.stages_png(staging / FILES["stages_png"], report)
        plots.timelines_png(staging / FILES["timelines_png"], runs)
        atomic.write_json(staging / FILES["report_json"], report)
        atomic.write_text(staging / FILES["report_md"], render_md(report))
        return atomic.move_into(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


# --------------------------------------------------------------------------------------------
# report.md

def _ms(us) -> str:
    if us is None:
        return "n/a"
    if us == 0:
        return "–"
    return f"{us / 1e6:.2f} s" if us >= 1e6 else f"{us / 1e3:.2f} ms" if us >= 1e3 \
        else f"{us:.0f} µs"


def _ops(ops: list[str], n: int = 4) -> str:
    shown = ", ".join(f"`{o}`" for o in ops[:n])
    return shown + (f" (+{len(ops) - n})" if len(ops) > n else "")


def render_md(r: dict) -> str:
    st = r["steps"]
    lines = ["# Legacy vs modern: where the time goes", ""]
    for k in SIDES:
        src = r["sources"][k]
        lines.append(f"- **{k}**: `{src['path']}` ({src['format']}){': ' + src['note'] if src['note'] else ''}")
    if r.get("tensorboard"):
        lines.append(f"- Open the profiles: `{r['tensorboard']}` (runs `legacy` and `modern`, "
                     "Profile tab).")
    if r.get("screenshot"):
        lines += ["", f"![TensorBoard's profile tab over this run folder, both sessions listed]"
                      f"({r['screenshot']})"]
    lines += ["", "## Verdict", ""]
    lines += [f"- {r['verdict']['comparison']}", f"- {r['verdict']['legacy']}",
              f"- {r['verdict']['modern']}", ""]
    lines += ["## Stages per steady step", "",
              "Median over steady steps of wall time (see *How the numbers are made*); "
              "CPU time beside it; the first step (start-up, compiles) apart.", "",
              "| stage | legacy | modern | legacy/modern | legacy cpu | modern cpu | "
              "legacy first step | modern first step | legacy ops | modern ops |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for row in r["stages"]:
        if not any(row[f"{k}_us"] or row[f"{k}_cpu_us"] or (row[f"{k}_first_us"] or 0)
                   for k in SIDES):
            continue
        est = []
        for k in SIDES:
            if row[f"{k}_us"] and row[f"{k}_estimated_us"] >= 0.05 * row[f"{k}_us"]:
                est.append(f"{k} {row[f'{k}_estimated_us'] / row[f'{k}_us']:.0%}")
        name = row["stage"] + (f" (estimated: {', '.join(est)})" if est else "")
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] else "–"
        lines.append(f"| {name} | {_ms(row['legacy_us'])} | {_ms(row['modern_us'])} | {ratio} | "
                     f"{_ms(row['legacy_cpu_us'])} | {_ms(row['modern_cpu_us'])} | "
                     f"{_ms(row['legacy_first_us'])} | {_ms(row['modern_first_us'])} | "
                     f"{_ops(row['legacy_ops'])} | {_ops(row['modern_ops'])} |")
    um = r["unmapped_us"]
    lines.append(f"| **unmapped** | {_ms(um['legacy'])} | {_ms(um['modern'])} | | | | | | "
                 f"{_ops([o['op'] for o in r['unmapped_ops']['legacy']])} | "
                 f"{_ops([o['op'] for o in r['unmapped_ops']['modern']])} |")
    lines.append(f"| **step** | {_ms(st['legacy']['median_us'])} | "
                 f"{_ms(st['modern']['median_us'])} | "
                 + (f"{st['legacy']['median_us'] / st['modern']['median_us']:.2f}x"
                    if st["modern"]["median_us"] else "–")
                 + f" | | | {_ms(st['legacy']['first_us'])} | {_ms(st['modern']['first_us'])} "
                   "| | |")
    lines += ["", "Stage medians are taken per stage, so they need not add up to the median "
              "step; `report.json` also has each row's mean over steady steps (`*_mean_us`), "
              "which do add up to the mean step, and the split of the steady step closest to "
              "the median (`steps.*.representative`, the top bars below)." , "",
              "![stages](stages.png)", ""]
    lines += ["## The step, split", "",
              "Each instant of a step counted once: waiting for input on the step's own thread, "
              "compiling, computing, runtime only (executor, dispatch, Python), or idle.", "",
              "| | " + " | ".join(k for k in ("input_wait", "compute", "compile", "runtime",
                                              "idle")) + " | steps |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for k in SIDES:
        sp = st[k]["split_us"]
        step = st[k]["median_us"] or 1.0
        lines.append(f"| {k} (steady median) | " + " | ".join(
            f"{_ms(sp[c])} ({sp[c] / step:.0%})" for c in ("input_wait", "compute", "compile",
                                                           "runtime", "idle"))
            + f" | {st[k]['steady_count']} of {st[k]['count']} |")
        if st[k]["first_split_us"]:
            fs = st[k]["first_split_us"]
            lines.append(f"| {k} (first step) | " + " | ".join(
                _ms(fs[c]) for c in ("input_wait", "compute", "compile", "runtime", "idle"))
                + " | 1 |")
    lines += ["", "Stretches of TF's own runtime on a TF thread with no op inside, 100 µs or "
              "longer, are counted as waiting (the thread waits for another, is descheduled, or "
              "does something the trace does not show; executor bookkeeping takes microseconds), "
              "thread time summed over threads: "
              + ", ".join(f"{k} {_ms(st[k]['blocked_us'])} per steady step" for k in SIDES)
              + ".", "", "![one steady step of each run](timelines.png)", ""]
    lines += ["## XLA", ""]
    for k in SIDES:
        x = r["xla"][k]
        lines.append(f"**{k}** ({x['launch_style']}): {x['compiles']} compile(s), "
                     f"{_ms(x['compile_us'])} compiling, {_ms(x['run_us'])} running compiled code"
                     f" over the whole trace"
                     + (f"; recompiled: {', '.join(x['recompiled'])}" if x["recompiled"] else "")
                     + ".")
        units = [(n, u) for n, u in x["units"].items() if u["ops"] and (u["runs"] or u["compiles"])]
        idle = sum(1 for u in x["units"].values() if not (u["runs"] or u["compiles"]))
        if idle:
            lines.append(f"({idle} more compiled module(s) in the profile's metadata did not run "
                         f"in this trace; they are listed in report.json.)")
        if units:
            lines += ["", "| unit | TF ops | stages | compiles | compile | runs | run |",
                      "|---|---:|---|---:|---:|---:|---:|"]
            for n, u in sorted(units, key=lambda kv: -kv[1]["run_us"])[:12]:
                stages = ", ".join(f"{s} {c}" for s, c in u["stages"].items())
                lines.append(f"| `{n}` | {len(u['ops'])} | {stages} | {u['compiles']} | "
                             f"{_ms(u['compile_us'])} | {u['runs']} | {_ms(u['run_us'])} |")
            if len(units) > 12:
                lines.append(f"| … {len(units) - 12} more in report.json | | | | | | |")
            lines += ["", f"<details><summary>The TF ops in each of {k}'s units</summary>", ""]
            for n, u in units:
                lines.append(f"- `{n}`: " + ", ".join(f"`{o}`" for o in u["ops"][:60])
                             + (f" … (+{len(u['ops']) - 60})" if len(u["ops"]) > 60 else ""))
            lines += ["", "</details>"]
        lines.append("")
    lines += ["## How the numbers are made", "", r["attribution"], "",
              "Stages come from our name scopes first, TensorFlow's own API scopes second, op "
              "types third; XLA kernels map through the HLO of their module to the TF ops fused "
              "into them. Estimates used here:", ""]
    used = {b for k in SIDES for b in r["estimates_used"][k]}
    for basis, text in r["estimates"].items():
        if basis in used:
            lines.append(f"- **{basis}**: {text}")
    if not used:
        lines.append("- none: every number is measured")
    lines.append("")
    for k in SIDES:
        for cc in r["cross_checks"][k]:
            what = "first step" if cc.get("against") == "first" else "steady step"
            top = sorted(cc["stages_us"].items(), key=lambda kv: -kv[1])[:8]
            lines += [f"Cross-check, {k} {what}: `{cc['trace']}` ({cc['format']}) against the "
                      f"{r['sources'][k]['format']} trace — step {_ms(cc['step_us'])} vs "
                      f"{_ms(cc.get('source_step_us'))}; XLA there: {cc['xla']['compiles']} "
                      f"compile(s), {_ms(cc['xla']['compile_us'])}.", "",
                      "| stage | " + " | ".join(s for s, _ in top) + " |",
                      "|---|" + "---:|" * len(top),
                      f"| `{cc['trace']}` | " + " | ".join(_ms(v) for _, v in top) + " |",
                      f"| {r['sources'][k]['format']} | " + " | ".join(
                          _ms(cc.get("source_stages_us", {}).get(s, 0.0)) for s, _ in top)
                      + " |", ""]
    lines += ["## The four questions", "",
              "The seed's questions, answered for each run by `compare.explain` (for its steady "
              "step closest to the median; `python -m compare.explain TRACE` gives the same for "
              "any one trace).", ""]
    for key in QUESTION_ORDER:
        lines += [f"### {explain.QUESTIONS[key]}", ""]
        for k in SIDES:
            lines += [f"**{k}**", "", "```text", r["answers"][k][key], "```", ""]
    lines += ["## Files", "",
              "- `report.json`: every number above (schema: `compare/output/report.schema.json`).",
              "- `stages.png`, `timelines.png`: the stage bars and one steady step of each run.",
              "- `merged_trace.json.gz`: both runs in one Chrome trace. TensorBoard's profile "
              "tab shows only its own profiles, so open this one in https://ui.perfetto.dev "
              "(*Open trace file*) or chrome://tracing (*Load*). Under every thread a "
              "`· stages` row shows its work by stage; chrome://tracing colours events by "
              "stage, Perfetto colours by name (so the stage rows match across runs).", "",
              "| stage | colour |", "|---|---|"]
    for lab, (cname, rgb) in STAGE_COLORS.items():
        lines.append(f"| {lab} | rgb{rgb} (`{cname}`) |")
    lines.append("")
    return "\n".join(lines)
