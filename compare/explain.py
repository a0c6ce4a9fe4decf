"""``python -m compare.explain TRACE [--json] [--step N]``: answer the seed's four questions
about any trace the loaders read, in plain words with numbers (or as JSON with stable keys).

The four answers come from :mod:`compare.analysis.legend` (what the pids and rows are, how busy, top
ops, memory), :mod:`compare.analysis.xla` (compile and run cost, ``_XlaLaunch`` and friends),
:mod:`compare.analysis.sequence` (dataflow order, critical path) and :mod:`compare.analysis.verdict` (the
bottleneck and what to try next). :func:`explain` assembles them; :func:`to_text` and
:func:`to_json` render them.
"""
from __future__ import annotations

import dataclasses
import sys
import textwrap

from absl import flags

from common.errors import InputError, cli_main
from compare.analysis import verdict

FLAGS = flags.FLAGS

#: The seed's four questions (question.md), and which part of the report answers each.
QUESTIONS = {
    "pids": "What is denoted by different pids in the plot?",
    "xla": "How do I understand the overhead of XLA compiler and what does _XLA_LAUNCH mean "
           "in the plot?",
    "sequence": "How do I determine the sequence of operations taking place?",
    "interpret": "How do I interpret this plot? (where the time went, the bottleneck, what to "
                 "try next)",
}

#: What each XLA op is, in words (the seed asked what _XLA_LAUNCH means).
XLA_OPS = {
    "_XlaLaunch": ("TF 1.x: one op that runs a whole XLA cluster (a group of TF ops XLA "
                   "compiled into one program). Its first call compiles the cluster first, so "
                   "it is long; later calls only run it. First call minus a steady call is "
                   "the compile time."),
    "_XlaCompile": ("TF 1.x from 1.12 on and TF2: the compile half of the old _XlaLaunch. It "
                    "compiles the cluster the first time (or for new input shapes) and "
                    "afterwards only looks the program up in a cache (tens of microseconds)."),
    "_XlaRun": ("the run half: executes the compiled program. Everything inside the cluster "
                "happens inside this one box, so the TF ops it replaced no longer show."),
    "_XlaMerge": ("joins the compiled path with TF's fallback path (used if XLA declines to "
                  "compile); it takes a few microseconds."),
}

SCHEMA = "compare.explain/1"


@dataclasses.dataclass
class Explanation:
    trace_source: str
    trace_format: str
    warnings: list[str]
    choice: object          # compare.analysis.steps.StepChoice
    legend: object          # compare.analysis.legend.Legend
    xla: object             # compare.analysis.xla.XlaSummary
    xla_step: dict          # XLA numbers of the chosen step
    sequence: object        # compare.analysis.sequence.Sequence
    verdict: object         # compare.analysis.verdict.Verdict
    ops_present: list[str]  # XLA op types present in the trace


def explain(trace, step: int | None = None) -> Explanation:
    """All four answers for ``trace`` (a :class:`compare.model.events.Trace`), for step ``step`` or
    a steady step."""
    import numpy as np

    from compare.analysis import legend, sequence, steps, verdict, xla

    if not len(trace.events):
        raise InputError(f"{trace.source}: the trace holds counters but no op events to explain")
    choice = steps.choose(trace, step)
    lg = legend.describe(trace, choice)
    summary = xla.summarize(trace)
    seq = sequence.build(trace, choice)
    ver = verdict.assess(trace, choice, summary, lg, seq)
    ev = trace.events
    in_step = ev.step == choice.step.num
    calls = ~np.isin(ev.pid, [p.pid for p in trace.processes.values()
                              if p.kind in ("stream", "memcpy")])
    runs = np.zeros(len(ev), dtype=bool)
    runs[summary.run_events] = True
    compiled_in_step = sum(c for i, _, c in summary.compile_calls
                           if runs[i] and ev.step[i] == choice.step.num)
    run_us = max(float(ev.dur[in_step & calls & runs].sum()) - compiled_in_step, 0.0)
    step_compile = verdict.step_compile_us(trace, summary, choice)
    device_us = float(ev.dur[in_step & xla.device_kernels(trace)].sum())
    present = [op for op in XLA_OPS if trace.strings.lookup(op) is not None and
               (trace.mask(op_type=op).any() or trace.mask(name=op).any())]
    return Explanation(trace.source, trace.format, list(trace.warnings), choice, lg, summary,
                       {"compile_us": step_compile, "run_us": run_us, "device_us": device_us,
                        "compile_share": step_compile / choice.step.dur if choice.step.dur else 0,
                        "run_share": run_us / choice.step.dur if choice.step.dur else 0},
                       seq, ver, present)


# --------------------------------------------------------------------------------------------
# JSON

def to_json(e: Explanation) -> dict:
    """The same facts as the text report, as data with stable keys."""
    return {
        "schema": SCHEMA,
        "trace": {"source": e.trace_source, "format": e.trace_format,
                  "format_words": e.legend.format_words},
        "warnings": e.warnings,
        "questions": QUESTIONS,
        "step": e.choice.as_dict(),
        "pids": e.legend.as_dict(),
        "xla": {**_xla_dict(e.xla), "step": e.xla_step,
                "ops_explained": {op: XLA_OPS[op] for op in XLA_OPS
                                  if op in e.ops_present or op == "_XlaLaunch"},
                "ops_present": e.ops_present},
        "sequence": e.sequence.as_dict(),
        "verdict": e.verdict.as_dict(),
    }


#: At most this many clusters/functions in the JSON (the largest by compile + run time).
MAX_UNITS = 1000


def _xla_dict(x) -> dict:
    """The XLA summary as data; a trace with more than :data:`MAX_UNITS` clusters keeps the
    largest ones (``units_total`` says how many there were)."""
    total = len(x.units)
    if total > MAX_UNITS:
        keep = sorted(x.units.values(), key=lambda u: -(u.compile_us + u.run_us))[:MAX_UNITS]
        x = dataclasses.replace(x, units={u.name: u for u in keep})
    return {**x.as_dict(), "units_total": total}


# --------------------------------------------------------------------------------------------
# text

WIDTH = 100


ms = verdict.ms


def mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str = "", indent: int = 0, hang: int = 2) -> None:
        if not text:
            self.lines.append("")
            return
        pad = " " * indent
        self.lines.extend(textwrap.wrap(text, WIDTH, initial_indent=pad,
                                        subsequent_indent=pad + " " * hang,
                                        break_on_hyphens=False) or [pad])

    def heading(self, text: str) -> None:
        self.lines += ["", text, "=" * min(len(text), WIDTH)]


def _members(members: list) -> str:
    scopes: dict[str, None] = {}
    types: dict[str, int] = {}
    members = [(t, n) for t, n in members if t and not n.startswith("XLA_")]
    from compare.analysis.mapping import stage_of_op

    unplaced = 0
    for op_type, op_name in members:
        types[op_type] = types.get(op_type, 0) + 1
        stage = stage_of_op(op_type, op_name)
        if stage:
            scopes.setdefault(stage, None)
        else:
            unplaced += 1
    top = sorted(types.items(), key=lambda kv: -kv[1])[:6]
    stages = ", ".join(scopes) if scopes else "no stage we know"
    extra = f" (and {unplaced} op(s) no stage rule places)" if unplaced else ""
    return (f"holds {len(members)} TF ops, from {stages}{extra}; mostly "
            + ", ".join(f"{t} x{n}" for t, n in top))


def to_text(e: Explanation) -> str:
    out = _Out()
    c, lg, v, sq, x = e.choice, e.legend, e.verdict, e.sequence, e.xla
    step = c.step
    out(f"Trace: {e.trace_source}")
    out(f"What it is: {lg.format_words}.", hang=4)
    out(f"Step explained: step {step.num} ({step.name}), {ms(step.dur)} wall, chosen because "
        f"{c.reason}. The trace has {c.count} step(s)"
        + (f": first {ms(c.first_us)}, median of the rest {ms(c.median_us)}, shortest "
           f"{ms(c.min_us)}, longest {ms(c.max_us)}" if c.count > 1 else "")
        + ". Pick another with --step N.", hang=4)
    if e.warnings:
        out("Warnings (the trace is damaged; this report uses what could be read):")
        for w in e.warnings:
            out(f"- {w}", indent=2)
    out()
    out("In short:")
    out(f"- {v.headline}", indent=2)
    if x.compiles:
        out(f"- XLA compiled {x.compiles} time(s), {ms(x.compile_us)} of compile work in all"
            + (f"; recompiled: {', '.join(x.recompiled)}" if x.recompiled else
               "; no recompilation") + ".", indent=2)
    elif x.launch_style != "none":
        out(f"- XLA ran {sum(1 for u in x.units.values() if u.runs)} cluster(s); none compiled "
            f"in this trace (it shows steady calls only).", indent=2)
    else:
        out("- No XLA in this trace.", indent=2)
    if v.facts.gpu_busy_share is not None:
        out(f"- The GPU ran kernels {v.facts.gpu_busy_share:.0%} of the step; the "
            f"'<gpu> Compute' row is the host launching them.", indent=2)
    out(f"- Critical path: {ms(sq.critical_us)} of the {ms(sq.wall_us)} step "
        f"({sq.critical_us / sq.wall_us:.0%})." if sq.wall_us else "- No critical path.",
        indent=2)

    # 1. pids ------------------------------------------------------------------------------
    out.heading(f"1. {QUESTIONS['pids']}")
    out("Each pid is one row group of the viewer (a 'process'); each tid inside it is one "
        "row. " + lg.tids_words)
    empty: dict[str, list] = {}
    for p in lg.processes:
        if not p.events and not p.tensors and p.role != "allocator":
            empty.setdefault(p.meaning, []).append(p)
            continue
        busy = (f" Busy {p.busy_share:.0%} of step {step.num} ({ms(p.busy_us)})"
                + (f", {p.parallelism:.2f} rows busy at once on average" if
                   p.parallelism > 1.05 else "") + "." if p.events else "")
        out()
        out(f"pid {p.pid}  {p.name}", indent=2)
        out(f"{p.meaning}.{busy}", indent=6)
        if p.role == "allocator":
            for m in lg.memory:
                at = (f"; in step {step.num} up to {mb(m.step_peak_bytes)}"
                      if m.step_peak_bytes else f"; no sample in step {step.num}")
                out(f"{m.allocator}: peak {mb(m.peak_bytes)} at +{ms(m.peak_at_us)} from "
                    f"the trace start{at}", indent=6)
            if any(not m.step_peak_bytes for m in lg.memory) and e.trace_format == "timeline" \
                    and c.count > 1:
                out("(timeline.py tracks tensors by name, so when several session runs share "
                    "a trace only the last run's allocations are drawn.)", indent=6)
        shown = [ln for ln in p.lanes if ln.events or lg.tids_are == "threads"]
        for ln in shown[:10]:
            out(f"{ln.name}: {ln.meaning}; busy {ln.busy_share:.0%}.", indent=6, hang=4)
        if len(shown) > 10:
            out(f"... and {len(shown) - 10} more rows", indent=6)
    for meaning, group in empty.items():
        out()
        out("pid " + ", ".join(str(p.pid) for p in group) + "  "
            + ", ".join(p.name for p in group), indent=2, hang=4)
        out(f"{meaning}.", indent=6)

    # 2. XLA -------------------------------------------------------------------------------
    out.heading(f"2. {QUESTIONS['xla']}")
    for op, words in XLA_OPS.items():
        if op in e.ops_present or op == "_XlaLaunch":
            note = "" if op in e.ops_present else " (not in this trace)"
            out(f"{op}{note}: {words}", indent=2, hang=4)
    out()
    if x.launch_style == "none":
        out("This trace shows no XLA ops: nothing was compiled by XLA (or XLA ran inside "
            "ops this trace does not name).")
    else:
        style = {"launch": "TF 1.x style: one _XlaLaunch per cluster",
                 "function": "tf.function(jit_compile=True): one call per function, which "
                             "compiles on its first call for each input shape and then runs "
                             "the compiled program; its XLA kernels show inside the call"
                 }.get(x.launch_style, "_XlaCompile + _XlaRun per cluster")
        ran = sum(1 for u in x.units.values() if u.runs)
        idle = len(x.units) - ran
        out(f"This trace: {ran} cluster(s) or function(s) ran"
            + (f" ({idle} more known from the cluster list did not run here)" if idle else "")
            + f", {style}. "
            + (f"Compiles: {x.compiles}, {ms(x.compile_us)} in all. " if x.compiles else
               "Compiles: none in this trace (every call found its program in the cache). ")
            + f"Runs: {ms(x.run_us)} in all. "
            + ("Recompilation: yes, " + ", ".join(x.recompiled) + " compiled more than once "
               "(new input shapes)." if x.recompiled else
               "Recompilation: none (no cluster compiled twice)."))
        out(f"In step {step.num}: compiling {ms(e.xla_step['compile_us'])} of wall time "
            f"({e.xla_step['compile_share']:.0%} of the step), running clusters "
            f"{ms(e.xla_step['run_us'])} ({e.xla_step['run_share']:.0%})"
            + (f"; the clusters' kernels ran {ms(e.xla_step['device_us'])} on the GPU "
               f"({e.xla_step['device_us'] / step.dur:.0%} of the step; _XlaRun on the host "
               f"only launches them)" if e.xla_step["device_us"] else "") + ".")
        units = sorted((u for u in x.units.values() if u.runs or u.compiles),
                       key=lambda u: -(u.compile_us + u.run_us))
        out()
        out("Per cluster (largest first): first call vs steady call shows the compile.")
        for u in units[:8]:
            parts = [f"{u.runs} run(s)"]
            if u.compiles:
                parts.append(f"compiled {u.compiles}x for {ms(u.compile_us)} (in step(s) "
                             f"{', '.join(map(str, u.compile_steps))})")
            if u.first_call_us and u.runs > 1:
                parts.append(f"first call {ms(u.first_call_us)}")
            elif u.first_call_us:
                parts.append(f"the call took {ms(u.first_call_us)}")
            if u.steady_call_us:
                parts.append(f"steady call {ms(u.steady_call_us)}")
            if u.lookup_us:
                parts.append(f"cache lookup {ms(u.lookup_us)}")
            if u.device_us:
                parts.append(f"its kernels ran {ms(u.device_us)} on the GPU")
            out(f"{u.name}: " + ", ".join(parts) + ".", indent=2, hang=4)
            if any(t and not n.startswith("XLA_") for t, n in u.members):
                out(_members(u.members) + ".", indent=6, hang=2)
        if len(units) > 8:
            out(f"... and {len(units) - 8} more (all in --json).", indent=2)
        if x.launch_style == "launch" and any(u.compiles for u in units):
            u = max(units, key=lambda u: u.compile_us)
            out()
            out(f"How to read the overhead: {u.name}'s first _XlaLaunch took "
                f"{ms(u.launch_first_us)} and a steady one {ms(u.launch_steady_us)}, so about "
                f"{ms(u.first_compile_us)} of the first call was compilation, paid once per "
                f"input shape: as long as {u.first_compile_us / step.dur:.0f} steps like step "
                f"{step.num}.")

    # 3. sequence --------------------------------------------------------------------------
    out.heading(f"3. {QUESTIONS['sequence']}")
    if e.trace_format == "timeline":
        out("How to see it in the viewer: click an op; its args list the ops it consumed "
            "(input0, input1, ...; ':1' means output 1, '^' a control dependency), and arrows "
            "join producer and consumer when they sit on different rows. An op starts once "
            "all its inputs exist, so the order is the dataflow, not the row.")
    else:
        out("How to see it in the viewer: this kind of trace does not record which op fed "
            "which; read each thread top to bottom (parents contain children) and left to "
            "right, and follow any flow arrows between threads.")
    out(f"Built from: {sq.basis}. Dependencies: "
        + (", ".join(f"{n} {k}" for k, n in sorted(sq.edge_counts.items())) or "none") + ".")
    if sq.time_inconsistent:
        n = sq.time_inconsistent
        out(f"({n} {'dependency overlaps' if n == 1 else 'dependencies overlap'} in time (the "
            f"dependent op started before the other ended, e.g. a kernel starting while its "
            f"launch was still running); the critical path skips {'it' if n == 1 else 'those'}.)")
    out()
    if sq.inputs_recorded:
        out(f"Ops of step {step.num} in dataflow order (depth 0 needs no other op of the step; "
            f"ops at one depth do not depend on each other; ties by start time):")
    else:
        out(f"Ops of step {step.num} in time order (no inputs are recorded, so 'after' is the "
            f"op before it on the same thread, or a flow arrow):")
    crit = {o.index for o in sq.critical}
    limit = max(sq.wall_us * 0.01, 1.0)
    shown = [o for o in sq.ops if o.index in crit or o.dur_us >= limit] \
        if len(sq.ops) > 40 else sq.ops
    first = "depth" if sq.inputs_recorded else "#"
    out(f"{first:>5} {'start':>9} {'took':>9}  op (node) on row  <- after", indent=2)
    position = {o.index: k for k, o in enumerate(sq.ops)}
    for o in shown[:40]:
        mark = "*" if o.index in crit else " "
        after = f"  <- {', '.join(o.after[:2])}{' ...' if len(o.after) > 2 else ''}" \
            if o.after else ""
        col = o.depth if sq.inputs_recorded else position[o.index]
        out(f"{col:>5} {'+' + ms(o.start_us):>9} {ms(o.dur_us):>9} {mark}{o.op} "
            f"({o.name}) on {o.row}{after}", indent=2, hang=28)
    hidden = len(sq.ops) - min(len(shown), 40)
    if hidden > 0:
        out(f"... {hidden} more ops not shown (under 1 % of the step and off the critical "
            f"path; all in --json). * = on the critical path.", indent=2)
    else:
        out("* = on the critical path.", indent=2)
    out()
    share = sq.critical_us / sq.wall_us if sq.wall_us else 0
    out(f"Critical path (the longest chain of dependent work): {ms(sq.critical_us)} of the "
        f"{ms(sq.wall_us)} step ({share:.0%}). "
        + ("The rest of the step is time when the next op of the chain was not running: "
           "waiting to be scheduled, for a free thread, or for something the trace does not "
           "show." if share < 0.9 else "The step is essentially this chain: shorten it to "
                                      "shorten the step."))
    big = [o for o in sq.critical if o.dur_us >= limit] if len(sq.critical) > 12 \
        else sq.critical
    out(" -> ".join(f"{o.op} {o.name} ({ms(o.dur_us)})" for o in big[:16])
        + (f" (+{len(sq.critical) - len(big[:16])} short ops)"
           if len(sq.critical) > len(big[:16]) else ""), indent=2, hang=4)

    # 4. interpret -------------------------------------------------------------------------
    out.heading(f"4. {QUESTIONS['interpret']}")
    out(f"Step {step.num} took {ms(step.dur)}. How busy each row was (time when at least one "
        f"of its boxes was open, not the sum of boxes):")
    for p in lg.processes:
        if p.events:
            out(f"{p.busy_share:>5.0%}  {p.name}", indent=2, hang=7)
    out()
    out("Where the time went, by op type (self time: a box's time minus the boxes inside it; "
        "summed over rows, so shares pass 100 % when ops overlap):")
    for t in lg.top_ops:
        out(f"{t.share:>5.0%} {ms(t.self_us):>9}  {t.op} on the {t.where} x{t.count}; longest "
            f"{t.largest} ({ms(t.largest_us)})", indent=2, hang=18)
    if lg.runtime_us:
        out(f"{lg.runtime_us / step.dur:>5.0%} {ms(lg.runtime_us):>9}  TF runtime around the "
            f"ops (executor, thread pools, XLA launch plumbing, _XlaMerge; summed over "
            f"rows, waits inside them included), not listed above", indent=2, hang=18)
    out()
    out(f"Verdict: {v.headline}")
    for fnd in v.findings:
        tag = {"high": "!!", "moderate": "! ", "low": "ok", "info": "  "}[fnd.level]
        out(f"[{tag}] {fnd.text}", indent=2, hang=5)
    todo = [fnd for fnd in v.findings if fnd.try_next and (
        fnd.level in ("high", "moderate") or fnd.kind == "xla_overhead" or
        fnd.kind == "compute" and fnd.share >= verdict.COMPUTE_NOTABLE)] \
        or [fnd for fnd in v.findings if fnd.try_next]
    todo.sort(key=lambda fnd: (fnd.kind != v.bottleneck, fnd.level != "high", -fnd.share))
    out()
    out("What to try next:")
    for k, fnd in enumerate(todo[:5], 1):
        out(f"{k}. {fnd.try_next[0].upper()}{fnd.try_next[1:]}.", indent=2, hang=3)
    return "\n".join(out.lines) + "\n"


# --------------------------------------------------------------------------------------------
# CLI

def _define_flags() -> None:
    flags.DEFINE_boolean("json", False, "Print the facts as JSON instead of the text report.")
    flags.DEFINE_integer("step", None, "Explain this step (default: a steady step).")
    flags.DEFINE_boolean("verbose", False, "Show TensorFlow's own log on stderr.")


def _main(argv: list[str]) -> int:
    if len(argv) != 2:
        raise InputError("usage: python -m compare.explain TRACE [--json] [--step N] (one "
                         "trace file or folder)")
    import json
    import os

    from common.tflog import native_stderr_to, quiet_python_logs
    from compare.load import load

    quiet_python_logs()
    with native_stderr_to(None if FLAGS.verbose else os.devnull):
        trace = load(argv[1])
    e = explain(trace, FLAGS.step)
    if FLAGS.json:
        sys.stdout.write(json.dumps(to_json(e), indent=1) + "\n")
    else:
        sys.stdout.write(to_text(e))
    return 0


def main() -> None:
    """Entry point of ``python -m compare.explain``."""
    # Our own text is ASCII; a trace's node names may not be, and must not crash a C-locale pipe.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    cli_main("compare.explain", _define_flags, _main)


if __name__ == "__main__":
    main()
