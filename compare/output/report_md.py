"""``report.md``: a :class:`compare.output.report.Report` for people, one function per section."""
from __future__ import annotations

from compare.analysis.result import SIDES, Comparison, StageRow
from compare.fmt import duration, listed, shown, shown_words
from compare.output import caveat_words, compare_words, report_words
from compare.output.colors import GROUP_COLORS, STAGE_COLORS
from compare.output.explain_text import QUESTIONS
from compare.output.report_data import Report
from compare.output.summary import summary
from compare.vocabulary.groups import SPLIT_KEYS
from compare.vocabulary.thresholds import BLOCKED_MIN_US, ESTIMATED_NOTABLE

#: The seed's questions in the seed's order, keyed as compare.explain keys them.
QUESTION_ORDER = ("interpret", "xla", "sequence", "pids")


def ms(us: float | None) -> str:
    """A table cell: a dash for nothing."""
    return duration(us, zero="–")


def render(r: Report) -> str:
    c = r.comparison
    parts = [_title(c), summary(r), [""], _head(r), _verdict(c), _comparability(c),
             _step_delta(c), _groups(c), _ops_diff(c),
             _stages(c) if c.has_pipeline() else _no_stages(c), _split(c), _xla(c), _how(c),
             _questions(r), _files(c, (r.merged_trace or {}).get("folded", {}))]
    # every name cut where it is shown (a 4,096-character op name made 12,000-character lines)
    return "\n".join(shown_words(line) for part in parts for line in part) + "\n"


def _cell(name: str) -> str:
    """A name in a table cell: cut, and no ``|`` to end the cell early."""
    return shown(name).replace("|", "\\|")


def _code(name: str) -> str:
    """A name as a code span in a table cell (no backtick to end the span early)."""
    return "`" + _cell(name).replace("`", "'") + "`"


def _ops(ops: list[str], n: int = 4) -> str:
    cells = ", ".join(_code(o) for o in ops[:n])
    return cells + (f" (+{len(ops) - n})" if len(ops) > n else "")


def _title(c: Comparison) -> list[str]:
    return [f"# {c.label('a')} vs {c.label('b')}: where the time goes", ""]


def _head(r: Report) -> list[str]:
    c = r.comparison
    lines = ["## The two traces", ""]
    for k, s in c.sides.items():
        src = s.source
        lines.append(f"- **{c.label(k)}** (side {k.upper()}): `{src.path}` ({src.format})"
                     + (f": {src.note}" if src.note else ""))
    if r.tensorboard:
        lines.append(f"- Open the profiles: `{r.tensorboard}` (runs `legacy` and `modern`, "
                     "Profile tab).")
    if r.screenshot:
        lines += ["", f"![TensorBoard's profile tab over this run folder, both sessions listed]"
                      f"({r.screenshot})"]
    if r.files.get("compare_tab_png"):
        lines += ["", f"![The Pipeline compare tab in TensorBoard over this run folder (the same "
                      f"comparison as this report)]({r.files['compare_tab_png']})"]
    return lines + [""]


def _verdict(c: Comparison) -> list[str]:
    return ["## Verdict", "", f"- {compare_words.comparison_text(c)}"] + \
        [f"- {compare_words.side_text(c, k)}" for k in SIDES] + [""]


def _step_delta(c: Comparison) -> list[str]:
    """The step difference in terms that add up to it, and the ops behind each."""
    d = c.step_delta
    if d is None:
        return []
    la, lb = c.label("a"), c.label("b")
    what = ("mean traced span (the untraced edges of session runs left out)"
            if d.basis == "traced" else "mean steady step")
    tested = d.test.tested
    lines = ["## The step difference, term by term", "",
             f"The {what}: {la} {duration(d.a_us)}, {lb} {duration(d.b_us)}, "
             f"{compare_words.signed(d.delta_us)}. Each term is a group's wall time per step "
             "(instants shared among the threads working at them), so the terms add up to the "
             "difference; ops that XLA fused into clusters on one side only are one term. The "
             "ops behind a term are its parts: the ops whose wall time in it changed most, and "
             "time no op owns (TF's executor, thread pools, waits) by its events."
             + (" `p`: a bootstrap of the difference of the term's mean over the steps of "
                "each side; above 0.05 the change is within the step-to-step spread."
                if tested else
                " Too few steps on a side to test a term against the step-to-step spread."),
             "", f"| term | {la} | {lb} | delta |" + (" p |" if tested else "") + " ops behind it |",
             "|---|---:|---:|---:|" + ("---:|" if tested else "") + "---|"]
    for t in d.terms:
        ops = ", ".join(f"{_code(compare_words.part_name(c, o))} "
                        f"{compare_words.signed(o.delta_us)}" for o in t.behind())
        if t.members:
            ops = f"{t.members} ops in {len(t.clusters)} cluster run(s)" + (f": {ops}" if ops else "")
        p = (f" {t.test.p:.2g} |" if t.test.tested else " – |") if tested else ""
        lines.append(f"| {compare_words.TERM_WORDS.get(t.key, t.key)} | {ms(t.a_us)} | "
                     f"{ms(t.b_us)} | {compare_words.signed(t.delta_us) or '0'} |{p} {ops} |")
    total = sum(t.delta_us for t in d.terms)
    lines.append(f"| **step** | {ms(d.a_us)} | {ms(d.b_us)} | "
                 f"**{compare_words.signed(total) or '0'}** |" + (" |" if tested else "") + " |")
    return lines + ["", "![the step difference, term by term](step_delta.png)", ""]


def _comparability(c: Comparison) -> list[str]:
    p = c.parity
    lines = ["## Can these two traces be compared?", "",
             "Checked before any number, as xprof's session-diff procedure does (workload "
             "parity, host apart from device, host overhead masking a device gain), plus what "
             "TF1 session traces add (first runs, feed_dict, one step against many).", ""]
    if p.like_for_like:
        lines.append("- **Like for like**: no check found a reason not to compare the steps.")
    lines += [f"- {'**Not like for like**: ' if x.breaks else ''}{caveat_words.text(x, c.labels)}"
              for x in sorted(p.caveats, key=lambda x: not x.breaks)]
    return lines + [""]


def _groups(c: Comparison) -> list[str]:
    la, lb = c.label("a"), c.label("b")
    lines = ["## What each run does", "",
             "Every event in a group of any TF program's work — input (readers, queues, "
             "tf.data, fed tensors), preprocessing (decode, parse, strings, images), the "
             "program's own compute by its top-level name scope, optimizer updates, "
             "communication, copies, XLA, runtime, idle — wall time per steady step (mean: "
             "the rows add up to the mean step); `busy` is the rows' own event time (waits "
             "included, parallel threads added); `unmapped` is what no rule of either view "
             "places.", "",
             f"| group | {la} | {lb} | {la} busy | {lb} busy | {la} ops | {lb} ops |",
             "|---|---:|---:|---:|---:|---|---|"]
    for r in c.groups:
        a, b = r.cells["a"], r.cells["b"]
        lines.append(f"| {_cell(r.key)} | {ms(a.us)} | {ms(b.us)} | "
                     f"{ms(a.busy_us)} | {ms(b.busy_us)} | "
                     f"{_ops(a.ops, 3)} | {_ops(b.ops, 3)} |")
    lines.append(f"| **step** | {ms(c.sides['a'].steps.mean_us)} | "
                 f"{ms(c.sides['b'].steps.mean_us)} | | | | |")
    return lines + [""]


#: Rows of the op diff shown in report.md (report.json has them all).
OPS_SHOWN = 15


def _ops_diff(c: Comparison) -> list[str]:
    if not c.ops_diff:
        return ["## Op by op", "", compare_words.no_ops_words(c), ""]
    la, lb = c.label("a"), c.label("b")
    lines = ["## Op by op", "",
             f"Per steady step, largest difference first ({len(c.ops_diff)} rows in "
             "`report.json`'s `ops_diff`). Ops are matched by node name (XLA cluster and "
             "function prefixes removed), then by name without TF's `_N` suffixes, then by op "
             "type; ops that vanished while an XLA cluster appeared on the other side are "
             "*fused* into it, and a Grappler fusion on one side only (`_FusedConv2D` against "
             "Conv2D + BiasAdd + Relu) is *fused* or *unfused*. Op time is the op's own time "
             "inside each step window (clipped at the window's edges), host (executor rows, "
             "launches) plus device (kernels, copies), each kernel and copy once (a copy drawn "
             "on a host and a device row as the union of the two), mean per steady step.", "",
             f"| op | type | {la} | {lb} | delta | {la} n | {lb} n | status |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for r in c.ops_diff[:OPS_SHOWN]:
        status = compare_words.status_words(r.status) + (f" (by {r.match})" if r.match in ("scope", "type") else "")
        if r.status in ("fused", "unfused"):
            apart = "a" if r.into == "b" else "b"
            status += f": {len(r.members)} ops in {c.label(apart)}, one in {c.label(r.into)}"
        sign = "+" if r.delta_us > 0 else "-" if r.delta_us < 0 else ""
        lines.append(f"| {_code(_md_name(r))} | {_cell(r.type)} | "
                     f"{ms(r.a_us)} | {ms(r.b_us)} | "
                     f"{sign}{duration(abs(r.delta_us))} | {r.a_count:g} | {r.b_count:g} | "
                     f"{status} |")
    for r in c.ops_diff[:OPS_SHOWN]:
        if not (r.status in ("fused", "unfused") or r.match in ("scope", "type") and
                r.members != [r.op]):
            continue
        listed_ = ", ".join(_code(m) for m in r.members[:40]) + (
            f" … (+{len(r.members) - 40})" if len(r.members) > 40 else "")
        if r.status == "fused" and r.match == "xla":
            head = f"{_code(r.op)} ({r.type} in {c.label(r.into)}) holds: "
        elif r.status in ("fused", "unfused"):
            apart = "a" if r.into == "b" else "b"
            head = (f"{_code(r.op)} ({r.type} in {c.label(r.into)}) runs in {c.label(apart)} as: ")
        else:
            head = f"{_code(r.op)} ({r.type}, matched by {r.match}) is the nodes: "
        lines += ["", head + listed_]
    return lines + [""]


def _md_name(r) -> str:
    """The op column: the node, or for a match by type the type and how many nodes."""
    if r.match == "type":
        return f"{r.type} x{len(r.members)}"
    return r.op


def _no_stages(c: Comparison) -> list[str]:
    shares = ", ".join(f"{c.label(k)} {s.coverage.unmapped_share:.0%}"
                       for k, s in c.sides.items())
    return ["## Stages of the seed pipeline", "",
            "Neither trace shows the seed's image pipeline (no stage by our name scopes, "
            "`tf.image` API scopes or image op types): these are other programs, described "
            "above by group and op, and the verdict, `stages.png`, `timelines.png` and the "
            "merged trace use those groups. `report.json`'s `stages` rows, `unmapped_us` and "
            f"`coverage` are the seed stages' view all the same, which leaves {shares} of the "
            "step unmapped (`view` in report.json says which view each number belongs to).",
            "", "![where a steady step's time goes, by group](stages.png)", ""]


def _stage_line(row: StageRow) -> str:
    cells = row.cells
    est = [f"{k} {cells[k].estimated_us / cells[k].us:.0%}" for k in SIDES
           if cells[k].us and cells[k].estimated_us >= ESTIMATED_NOTABLE * cells[k].us]
    name = row.stage + (f" (estimated: {', '.join(est)})" if est else "")
    ratio = f"{row.ratio:.2f}x" if row.ratio else "–"
    a, b = cells["a"], cells["b"]
    return (f"| {name} | {ms(a.us)} | {ms(b.us)} | {ratio} | {ms(a.cpu_us)} | {ms(b.cpu_us)} | "
            f"{ms(a.first_us)} | {ms(b.first_us)} | {_ops(a.ops)} | {_ops(b.ops)} |")


def _stages(c: Comparison) -> list[str]:
    la, lb = c.label("a"), c.label("b")
    lines = ["## Stages per steady step", "",
             "Mean over steady steps of wall time (see *How the numbers are made*): the rows "
             "add up to the mean step; CPU time beside it; the first step (start-up, compiles) "
             "apart. `report.json` also has each row's median (`*_median_us`).", "",
             f"| stage | {la} | {lb} | {la}/{lb} | {la} cpu | {lb} cpu | "
             f"{la} first step | {lb} first step | {la} ops | {lb} ops |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    lines += [_stage_line(row) for row in c.stages
              if any(cell.us or cell.cpu_us or cell.first_us for cell in row.cells.values())]
    lg, md = c.sides["a"], c.sides["b"]
    lines.append(f"| **unmapped** | {ms(lg.unmapped_us)} | {ms(md.unmapped_us)} | | | | | | "
                 f"{_ops([o.op for o in lg.unmapped_ops])} | "
                 f"{_ops([o.op for o in md.unmapped_ops])} |")
    a, b = lg.steps, md.steps
    lines.append(f"| **step** | {ms(a.mean_us)} | {ms(b.mean_us)} | "
                 + (f"{a.mean_us / b.mean_us:.2f}x" if b.mean_us else "–")
                 + f" | | | {ms(a.first_us)} | {ms(b.first_us)} | | |")
    return lines + ["", "![stages](stages.png)", ""]


def _split(c: Comparison) -> list[str]:
    lines = ["## The step, split", "",
             "The group table above, coarser: input (reading, tf.data, queues, waiting for "
             "them), compute (the program's ops, preprocessing, optimizer, compiled XLA code), "
             "copies, communication, compiling, runtime only (executor, dispatch, Python), and "
             "idle (nothing traced). Mean per steady step: it adds up to the mean step.", "",
             "| | " + " | ".join(SPLIT_KEYS) + " | step | steps |",
             "|---|" + "---:|" * (len(SPLIT_KEYS) + 2)]
    for k in SIDES:
        st = c.sides[k].steps
        step = st.mean_us or 1.0
        lines.append(f"| {c.label(k)} (steady mean) | " + " | ".join(
            f"{ms(st.split_us[s])} ({st.split_us[s] / step:.0%})" for s in SPLIT_KEYS)
            + f" | {ms(st.mean_us)} | {st.steady_count} of {st.count} |")
        if st.first_split_us:
            first = "first traced step" if st.first_kind == "window" else "first step"
            lines.append(f"| {c.label(k)} ({first}) | " + " | ".join(
                ms(st.first_split_us[s]) for s in SPLIT_KEYS) + f" | {ms(st.first_us)} | 1 |")
    lines += ["", "Waiting for or reading input, on any of the step's threads (what input-bound "
              "is judged by; other threads may work meanwhile): " + ", ".join(
                  f"{c.label(k)} {ms(c.sides[k].steps.input_us)} per steady step" for k in SIDES)
              + "."]
    return lines + [
        "", f"Stretches of TF's own runtime on a TF thread with no op inside, "
        f"{ms(BLOCKED_MIN_US)} or longer, are counted as waiting (the thread waits for another, "
        "is descheduled, or does something the trace does not show; executor bookkeeping "
        "takes microseconds), thread time summed over threads: "
        + ", ".join(f"{c.label(k)} {ms(c.sides[k].steps.blocked_us)} per steady step"
                    for k in SIDES)
        + ".", "", "![one steady step of each run](timelines.png)", ""]


def _xla(c: Comparison) -> list[str]:
    lines = ["## XLA", ""]
    for k in SIDES:
        x = c.sides[k].xla
        lines.append(f"**{c.label(k)}** ({x.launch_style}): {x.compiles} compile(s), "
                     f"{ms(x.compile_us)} compiling, {ms(x.run_us)} running compiled code over "
                     f"the whole trace"
                     + (f"; recompiled: {listed(x.recompiled)}" if x.recompiled else "") + ".")
        lines += _xla_units(c.label(k), x.units or {}) + [""]
    return lines


def _xla_units(k: str, units: dict) -> list[str]:
    ran = [(n, u) for n, u in units.items() if u.ops and (u.runs or u.compiles)]
    idle = sum(1 for u in units.values() if not (u.runs or u.compiles))
    lines = []
    if idle:
        lines.append(f"({idle} more compiled module(s) in the profile's metadata did not run "
                     f"in this trace; they are listed in report.json.)")
    if not ran:
        return lines
    lines += ["", "| unit | TF ops | stages | compiles | compile | runs | run |",
              "|---|---:|---|---:|---:|---:|---:|"]
    for n, u in sorted(ran, key=lambda kv: -kv[1].run_us)[:12]:
        stages = ", ".join(f"{s} {cnt}" for s, cnt in u.stages.items())
        lines.append(f"| `{n}` | {len(u.ops)} | {stages} | {u.compiles} | "
                     f"{ms(u.compile_us)} | {u.runs} | {ms(u.run_us)} |")
    if len(ran) > 12:
        lines.append(f"| … {len(ran) - 12} more in report.json | | | | | | |")
    lines += ["", f"<details><summary>The TF ops in each of {k}'s units</summary>", ""]
    for n, u in ran:
        lines.append(f"- `{n}`: " + ", ".join(f"`{o}`" for o in u.ops[:60])
                     + (f" … (+{len(u.ops) - 60})" if len(u.ops) > 60 else ""))
    return lines + ["", "</details>"]


def _how(c: Comparison) -> list[str]:
    lines = ["## How the numbers are made", "", report_words.ATTRIBUTION_NOTE, "",
             "Stages come from our name scopes first, TensorFlow's own API scopes second, op "
             "types third; XLA kernels map through the HLO of their module to the TF ops fused "
             "into them. Estimates used here:", ""]
    used = {b for s in c.sides.values() for b in s.estimates_used}
    lines += [f"- **{basis}**: {text}" for basis, text in c.estimates.items() if basis in used]
    if not used:
        lines.append("- none: every number is measured")
    lines.append("")
    for k in SIDES:
        for cc in c.sides[k].cross_checks:
            lines += _cross_check(c.label(k), cc, c.sides[k].source.format)
    return lines


def _cross_check(k: str, cc, fmt: str) -> list[str]:
    what = "first step" if cc.against == "first" else "steady step"
    top = sorted(cc.stages_us.items(), key=lambda kv: -kv[1])[:8]
    return [f"Cross-check, {k} {what}: `{cc.trace}` ({cc.format}) against the {fmt} trace — "
            f"step {ms(cc.step_us)} vs {ms(cc.source_step_us)}; XLA there: "
            f"{cc.xla.compiles} compile(s), {ms(cc.xla.compile_us)}.", "",
            "| stage | " + " | ".join(s for s, _ in top) + " |",
            "|---|" + "---:|" * len(top),
            f"| `{cc.trace}` | " + " | ".join(ms(v) for _, v in top) + " |",
            f"| {fmt} | " + " | ".join(ms(cc.source_stages_us.get(s, 0.0)) for s, _ in top)
            + " |", ""]


def _questions(r: Report) -> list[str]:
    lines = ["## The four questions", "",
             "The seed's questions, answered for each run by `compare.explain` (for its steady "
             "step closest to the median; `python -m compare.explain TRACE` gives the same for "
             "any one trace).", ""]
    for key in QUESTION_ORDER:
        lines += [f"### {QUESTIONS[key]}", ""]
        for k in SIDES:
            lines += [f"**{r.comparison.label(k)}**", "", "```text", r.answers[k][key], "```",
                      ""]
    return lines


def _files(c: Comparison, folded: dict[str, str]) -> list[str]:
    """The files, and which rows of the merged trace were folded (``folded``: per run, in
    words)."""
    what = "stage" if c.view == "stages" else "group"
    lines = ["## Files", "",
             "- `report.json`: every number above (schema: `compare/output/report.schema.json`).",
             f"- `stages.png`, `timelines.png`: the {what} bars and one steady step of each run.",
             "- `timelines.json`: that steady step of each run as data, lane by lane (what "
             "`timelines.png` and TensorBoard's Pipeline compare tab draw).",
             "- `merged_trace.json.gz`: both runs in one Chrome trace. TensorBoard's profile "
             "tab shows only its own profiles, so open this one in https://ui.perfetto.dev "
             "(*Open trace file*) or chrome://tracing (*Load*). Under every thread a "
             f"`· {what}s` row shows its work by {what}; chrome://tracing colours events by "
             f"{what}, Perfetto colours by name (so the {what} rows match across runs)."
             + "".join(f" In {_code(k)}, {v}." for k, v in folded.items()), "",
             f"| {what} | colour |", "|---|---|"]
    table = STAGE_COLORS if c.view == "stages" else GROUP_COLORS
    lines += [f"| {lab} | rgb{rgb} (`{cname}`) |" for lab, (cname, rgb) in table.items()]
    return lines + [""]
