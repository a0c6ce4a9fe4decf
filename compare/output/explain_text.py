"""An :class:`compare.analysis.explanation.Explanation` in plain words: a header, "In short",
then one section per question of the seed. :func:`answers` gives each section on its own
(report.md shows them per run); :func:`to_text` is what ``compare.explain`` prints."""
from __future__ import annotations

import textwrap

from compare.analysis.explanation import Explanation
from compare.analysis.mapping import stage_of_op
from compare.fmt import duration as ms
from compare.fmt import listed, shown_words, size
from compare.vocabulary.ops import XLA_OP_WORDS
from compare.vocabulary.thresholds import COMPUTE_NOTABLE

#: The seed's four questions (question.md), and the key of the section answering each.
QUESTIONS = {
    "pids": "What is denoted by different pids in the plot?",
    "xla": "How do I understand the overhead of XLA compiler and what does _XLA_LAUNCH mean "
           "in the plot?",
    "sequence": "How do I determine the sequence of operations taking place?",
    "interpret": "How do I interpret this plot? (where the time went, the bottleneck, what to "
                 "try next)",
}
WIDTH = 100
#: Processes listed by name (question 1, and the busy list of question 4); a trace with more
#: lists the busiest and says how many more there are (all are in --json).
MAX_PROCESSES_SHOWN = 64
#: Processes named in one line of rows that recorded nothing.
MAX_EMPTY_SHOWN = 16
#: Lines of processes without events in the step (one per kind of row); the rest counted.
MAX_EMPTY_GROUPS = 8
#: Memory series (allocators) and GPUs listed; a trace with more lists the largest (all are
#: in --json).
MAX_SERIES_SHOWN = 10
MAX_DEVICES_SHOWN = 16


class Lines:
    """Wrapped lines of text, built up by calls."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str = "", indent: int = 0, hang: int = 2) -> None:
        if not text:
            self.lines.append("")
            return
        pad = " " * indent
        text = shown_words(text)   # a 4096-character name would wrap over 40 lines
        self.lines.extend(textwrap.wrap(text, WIDTH, initial_indent=pad,
                                        subsequent_indent=pad + " " * hang,
                                        break_on_hyphens=False) or [pad])

    def text(self) -> str:
        return "\n".join(self.lines).strip("\n")


def to_text(e: Explanation) -> str:
    """The whole report: header, "In short", and the four numbered sections."""
    sections = answers(e)
    parts = [header(e)]
    for n, key in enumerate(QUESTIONS, 1):
        title = f"{n}. {QUESTIONS[key]}"
        parts += ["", title, "=" * min(len(title), WIDTH), sections[key]]
    return "\n".join(parts) + "\n"


def answers(e: Explanation) -> dict[str, str]:
    """Each question's section (keyed as :data:`QUESTIONS`), and ``summary``: "In short"."""
    return {"summary": summary(e), "pids": pids(e), "xla": xla(e), "sequence": sequence(e),
            "interpret": interpret(e)}


# --------------------------------------------------------------------------------------------
# header and summary

def header(e: Explanation) -> str:
    out = Lines()
    c, step = e.choice, e.choice.step
    out(f"Trace: {e.trace_source}")
    out(f"What it is: {e.legend.format_words}.", hang=4)
    out(f"Step explained: step {step.num} ({step.name}), {ms(step.dur)} wall, chosen because "
        f"{c.reason}. The trace has {c.count} step(s)"
        + (f": first {ms(c.first_us)}, median of the rest {ms(c.median_us)}, shortest "
           f"{ms(c.min_us)}, longest {ms(c.max_us)}" if c.count > 1 else "")
        + ". Pick another with --step N.", hang=4)
    if c.source:
        out(f"Steps come from: {c.source}.", hang=4)
    if e.warnings:
        out("Warnings (the trace is damaged; this report uses what could be read):")
        for w in e.warnings:
            out(f"- {w}", indent=2)
    out()
    out("In short:")
    out.lines.append(summary(e))
    return out.text()


def summary(e: Explanation) -> str:
    out = Lines()
    x, v, sq = e.xla, e.verdict, e.sequence
    out(f"- {v.headline}", indent=2)
    if x.compiles:
        out(f"- XLA compiled {x.compiles} time(s), {ms(x.compile_us)} of compile work in all"
            + (f"; recompiled: {listed(x.recompiled)}" if x.recompiled else
               "; no recompilation") + ".", indent=2)
    elif x.launch_style != "none":
        out(f"- XLA ran {sum(1 for u in x.units.values() if u.runs)} cluster(s); none compiled "
            f"in this trace (it shows steady calls only).", indent=2)
    else:
        out("- No XLA in this trace.", indent=2)
    _gpu_summary(out, e)
    out(f"- Critical path: {ms(sq.critical_us)} of the {ms(sq.wall_us)} step "
        f"({sq.critical_us / sq.wall_us:.0%})." if sq.wall_us else "- No critical path.",
        indent=2)
    return out.text()


def _gpu_summary(out: Lines, e: Explanation) -> None:
    devs = e.legend.devices
    if not devs:
        return
    recorded = [d for d in devs if d.recorded]
    if not recorded:
        out(f"- The GPU rows ({len(devs)} GPU(s)) recorded nothing: GPU time cannot be judged "
            f"from this trace.", indent=2)
        return
    launch = (" The '<gpu> Compute' row is the host launching them." if
              e.trace_format == "timeline" else "")
    if len(recorded) == 1 and len(devs) == 1:
        d = recorded[0]
        if not d.kernels:
            out(f"- The GPU ran no kernel in this step (its rows hold only copies, "
                f"{d.copy_share:.0%} of the step).", indent=2)
        else:
            out(f"- The GPU ran kernels {d.busy_share:.0%} of the step.{launch}", indent=2)
        return
    busiest = max(recorded, key=lambda d: d.busy_share)
    silent = len(devs) - len(recorded)
    out(f"- {len(devs)} GPUs: the busiest, {busiest.device}, ran kernels "
        f"{busiest.busy_share:.0%} of {'its own step row' if busiest.own_window else 'the step'}"
        + (f"; {silent} recorded nothing" if silent else "") + " (table in question 4)."
        + launch, indent=2)


# --------------------------------------------------------------------------------------------
# 1. pids

def pids(e: Explanation) -> str:
    out = Lines()
    lg = e.legend
    out("Each pid is one row group of the viewer (a 'process'); each tid inside it is one "
        "row. " + lg.tids_words)
    empty: dict[str, list] = {}
    full = [p for p in lg.processes if (p.recorded or p.role in ("allocator", "tensors"))
            and (p.events or p.tensors or p.role == "allocator")]
    listed = _busiest(full)
    for p in lg.processes:
        if not p.recorded and p.role not in ("allocator", "tensors"):
            empty.setdefault(RECORDED_NOTHING, []).append(p)
            continue
        if not p.events and not p.tensors and p.role != "allocator":
            key = (p.meaning if p.role == "tensors" or not p.recorded else
                   f"{p.meaning}. It recorded events, but none in step {e.choice.step.num}")
            empty.setdefault(key, []).append(p)
        elif p.pid in listed:
            _process(out, e, p)
    if len(full) > len(listed):
        out()
        out(f"... and {len(full) - len(listed)} more processes with events (the "
            f"{len(listed)} busiest are shown; all in --json).", indent=2)
    groups = list(empty.items())
    for meaning, group in groups[:MAX_EMPTY_GROUPS]:
        out()
        more = f" and {len(group) - MAX_EMPTY_SHOWN} more" if len(group) > MAX_EMPTY_SHOWN \
            else ""
        group = group[:MAX_EMPTY_SHOWN]
        out("pid " + ", ".join(str(p.pid) for p in group) + more + "  "
            + ", ".join(p.name for p in group) + (" ..." if more else ""), indent=2, hang=4)
        out(f"{meaning}.", indent=6)
    if len(groups) > MAX_EMPTY_GROUPS:
        rest = sum(len(g) for _, g in groups[MAX_EMPTY_GROUPS:])
        out()
        out(f"... and {rest} more processes without events in step {e.choice.step.num} "
            f"(all in --json).", indent=2)
    return out.text()


def _busiest(processes: list) -> set[int]:
    """The pids of the :data:`MAX_PROCESSES_SHOWN` busiest of ``processes`` (all when fewer)."""
    if len(processes) <= MAX_PROCESSES_SHOWN:
        return {p.pid for p in processes}
    ranked = sorted(processes, key=lambda p: (-p.busy_us, -p.events))
    return {p.pid for p in ranked[:MAX_PROCESSES_SHOWN]}


#: What a row that holds only its name (metadata) is.
RECORDED_NOTHING = ("recorded nothing: these rows hold only their names; the profiler captured "
                    "no event for them (for a GPU: its tracer recorded no kernel or copy, "
                    "because it failed to start, lacked permission to read GPU counters, or "
                    "the device did no work). Nothing is judged from them")


def _process(out: Lines, e: Explanation, p) -> None:
    lg, step = e.legend, e.choice.step
    busy = (f" Busy {p.busy_share:.0%} of step {step.num} ({ms(p.busy_us)})"
            + (f", {p.parallelism:.2f} rows busy at once on average" if
               p.parallelism > 1.05 else "") + "." if p.events else "")
    out()
    out(f"pid {p.pid}  {p.name}", indent=2)
    out(f"{p.meaning}.{busy}", indent=6)
    if p.role == "allocator":
        _memory(out, e)
    shown = [ln for ln in p.lanes if ln.events or lg.tids_are == "threads"]
    for ln in shown[:10]:
        out(f"{ln.name}: {ln.meaning}; busy {ln.busy_share:.0%}.", indent=6, hang=4)
    if len(shown) > 10:
        out(f"... and {len(shown) - 10} more rows", indent=6)


def _memory(out: Lines, e: Explanation) -> None:
    step, memory = e.choice.step, e.legend.memory
    for m in memory[:MAX_SERIES_SHOWN]:
        at = (f"; in step {step.num} up to {size(m.step_peak_bytes)}"
              if m.step_peak_bytes else f"; no sample in step {step.num}")
        out(f"{m.allocator}: peak {size(m.peak_bytes)} at +{ms(m.peak_at_us)} from "
            f"the trace start{at}", indent=6)
    if len(memory) > MAX_SERIES_SHOWN:
        out(f"... and {len(memory) - MAX_SERIES_SHOWN} more series, each peaking at most "
            f"{size(memory[MAX_SERIES_SHOWN].peak_bytes)} (all in --json)", indent=6)
    if any(not m.step_peak_bytes for m in e.legend.memory) and e.trace_format == "timeline" \
            and e.choice.count > 1:
        out("(timeline.py tracks tensors by name, so when several session runs share "
            "a trace only the last run's allocations are drawn.)", indent=6)


# --------------------------------------------------------------------------------------------
# 2. XLA

def xla(e: Explanation) -> str:
    out = Lines()
    x = e.xla
    for op, words in XLA_OP_WORDS.items():
        if op in e.ops_present or op == "_XlaLaunch":
            note = "" if op in e.ops_present else " (not in this trace)"
            out(f"{op}{note}: {words}", indent=2, hang=4)
    out()
    if x.launch_style == "none":
        out("This trace shows no XLA ops: nothing was compiled by XLA (or XLA ran inside "
            "ops this trace does not name).")
        return out.text()
    _xla_totals(out, e)
    units = sorted((u for u in x.units.values() if u.runs or u.compiles),
                   key=lambda u: -(u.compile_us + u.run_us))
    out()
    out("Per cluster (largest first): first call vs steady call shows the compile.")
    for u in units[:8]:
        _xla_unit(out, u)
    if len(units) > 8:
        out(f"... and {len(units) - 8} more (all in --json).", indent=2)
    if x.launch_style == "launch" and any(u.compiles for u in units):
        u = max(units, key=lambda u: u.compile_us)
        out()
        out(f"How to read the overhead: {u.name}'s first _XlaLaunch took "
            f"{ms(u.launch_first_us)} and a steady one {ms(u.launch_steady_us)}, so about "
            f"{ms(u.first_compile_us)} of the first call was compilation, paid once per "
            f"input shape: as long as {u.first_compile_us / e.choice.step.dur:.0f} steps like "
            f"step {e.choice.step.num}.")
    return out.text()


def _xla_totals(out: Lines, e: Explanation) -> None:
    x, xs, step = e.xla, e.xla_step, e.choice.step
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
        + ("Recompilation: yes, " + listed(x.recompiled) + " compiled more than once "
           "(new input shapes)." if x.recompiled else
           "Recompilation: none (no cluster compiled twice)."))
    out(f"In step {step.num}: compiling {ms(xs.compile_us)} of wall time "
        f"({xs.compile_share:.0%} of the step), running clusters {ms(xs.run_us)} summed "
        f"({xs.run_share:.0%} of the step as wall time)"
        + (f"; the clusters' kernels ran {ms(xs.device_us)} on the GPU "
           f"({min(1.0, xs.device_us / step.dur):.0%} of the step; "
           f"{'_XlaLaunch' if x.launch_style == 'launch' else '_XlaRun'} on the host only "
           f"launches them)" if xs.device_us else "") + ".")


def _xla_unit(out: Lines, u) -> None:
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


def _members(members: list) -> str:
    scopes: dict[str, None] = {}
    types: dict[str, int] = {}
    members = [(t, n) for t, n in members if t and not n.startswith("XLA_")]
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


# --------------------------------------------------------------------------------------------
# 3. sequence

def sequence(e: Explanation) -> str:
    out = Lines()
    sq = e.sequence
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
    _op_list(out, e)
    out()
    _critical_path(out, e)
    return out.text()


def _op_list(out: Lines, e: Explanation) -> None:
    sq, step = e.sequence, e.choice.step
    if sq.inputs_recorded:
        out(f"Ops of step {step.num} in dataflow order (depth 0 needs no other op of the step; "
            f"ops at one depth do not depend on each other; ties by start time):")
    else:
        out(f"Ops of step {step.num} in time order (no inputs are recorded, so 'after' is the "
            f"op before it on the same thread, or a flow arrow):")
    crit = {o.index for o in sq.critical}
    limit = max(sq.wall_us * 0.01, 1.0)
    shown = [o for o in sq.ops if o.dur_us >= limit] if len(sq.ops) > 40 else sq.ops
    first = "depth" if sq.inputs_recorded else "#"
    out(f"{first:>5} {'start':>9} {'took':>9}  op (node) on row  <- after", indent=2)
    position = {o.index: k for k, o in enumerate(sq.ops)}
    for o in shown[:40]:
        mark = "*" if o.index in crit else " "
        after = f"  <- {', '.join(o.after[:2])}{' ...' if len(o.after) > 2 else ''}" \
            if o.after else ""
        col = o.depth if sq.inputs_recorded else position[o.index]
        start = ("+" if o.start_us >= 0 else "-") + ms(abs(o.start_us))
        out(f"{col:>5} {start:>9} {ms(o.dur_us):>9} {mark}{o.op} "
            f"({o.name}) on {o.row}{after}", indent=2, hang=28)
    hidden = len(sq.ops) - min(len(shown), 40)
    if hidden > 0:
        out(f"... {hidden} more ops not shown (each under 1 % of the step; all in --json). "
            f"* = on the critical path.", indent=2)
    else:
        out("* = on the critical path.", indent=2)


def _critical_path(out: Lines, e: Explanation) -> None:
    sq = e.sequence
    share = sq.critical_us / sq.wall_us if sq.wall_us else 0
    out(f"Critical path (the longest chain of dependent work): {ms(sq.critical_us)} of the "
        f"{ms(sq.wall_us)} step ({share:.0%}), {len(sq.critical)} ops. "
        + ("The rest of the step is time when the next op of the chain was not running: "
           "waiting to be scheduled, for a free thread, or for something the trace does not "
           "show." if share < 0.9 else "The step is essentially this chain: shorten it to "
                                      "shorten the step."))
    if sq.critical:
        out(" -> ".join(_chain(sq)), indent=2, hang=4)


#: Links of the critical path shown: the first and last ones when the chain is longer.
CHAIN_LINKS = 16


def _chain(sq) -> list[str]:
    """The critical path as links: ops of 1 % of the step or more by name, runs of shorter
    ops between them as one link (how many, of which types, how long together)."""
    limit = max(sq.wall_us * 0.01, 1.0)
    links, run = [], []

    def flush() -> None:
        if run:
            types: dict[str, int] = {}
            for o in run:
                types[o.op] = types.get(o.op, 0) + 1
            kinds = ", ".join(f"{t} x{n}" for t, n in
                              sorted(types.items(), key=lambda kv: -kv[1])[:3])
            more = ", ..." if len(types) > 3 else ""
            links.append(f"[{len(run)} short op{'s' if len(run) > 1 else ''}: {kinds}{more}; "
                         f"{ms(sum(o.dur_us for o in run))}]" if len(run) > 1 else
                         f"{run[0].op} {run[0].name} ({ms(run[0].dur_us)})")
            run.clear()

    for o in sq.critical:
        if o.dur_us >= limit or len(sq.critical) <= 12:
            flush()
            links.append(f"{o.op} {o.name} ({ms(o.dur_us)})")
        else:
            run.append(o)
    flush()
    if len(links) > CHAIN_LINKS:
        half = CHAIN_LINKS // 2
        links = links[:half] + [f"... {len(links) - CHAIN_LINKS} more links ..."] + links[-half:]
    return links


# --------------------------------------------------------------------------------------------
# 4. interpret

def interpret(e: Explanation) -> str:
    out = Lines()
    lg, v, step = e.legend, e.verdict, e.choice.step
    out(f"Step {step.num} took {ms(step.dur)}. How busy each row was (time when at least one "
        f"of its boxes was open, not the sum of boxes):")
    busy = [p for p in lg.processes if p.events]
    listed = _busiest(busy)
    for p in busy:
        if p.pid in listed:
            out(f"{p.busy_share:>5.0%}  {p.name}", indent=2, hang=7)
    if len(busy) > len(listed):
        out(f"... and {len(busy) - len(listed)} more processes, each busy at most "
            f"{max(p.busy_share for p in busy if p.pid not in listed):.0%}.", indent=2)
    _devices(out, e)
    out()
    out("Where the time went, by op type (a GPU kernel counts for the TF op that launched it). "
        "'wall' is the share of the step the op's own time covers (overlapping executions "
        "count once, so it never passes 100 %); 'summed' adds its executions up (CPU time on "
        "the host, GPU time on the GPU), which passes the step when they overlap:")
    out(f"{'wall':>5} {'summed':>9}  op", indent=2)
    for t in lg.top_ops:
        tag = " (collective: communication)" if t.collective else ""
        out(f"{t.share:>5.0%} {ms(t.self_us):>9}  {t.op} on the {t.where} x{t.count}{tag}; "
            f"longest {t.largest} ({ms(t.largest_us)})", indent=2, hang=18)
    if lg.runtime_us:
        out(f"{'':>5} {ms(lg.runtime_us):>9}  TF runtime around the ops (executor, thread "
            f"pools, CUDA launch calls, XLA launch plumbing, _XlaMerge; CPU time summed over "
            f"threads, waits inside them included), not listed above", indent=2, hang=18)
    out()
    out(f"Verdict: {v.headline}")
    for fnd in v.findings:
        tag = {"high": "!!", "moderate": "! ", "low": "ok", "info": "  "}[fnd.level]
        out(f"[{tag}] {fnd.text}", indent=2, hang=5)
    out()
    out("What to try next:")
    for k, fnd in enumerate(_to_try(e)[:5], 1):
        out(f"{k}. {fnd.try_next[0].upper()}{fnd.try_next[1:]}.", indent=2, hang=3)
    return out.text()


def _devices(out: Lines, e: Explanation) -> None:
    """One line per GPU when the trace has several (or one that recorded nothing)."""
    devs = e.legend.devices
    if len(devs) < 2 and all(d.recorded for d in devs):
        return
    out()
    out("Per GPU (its compute kernels' union over its window; copies and collectives apart; a "
        "GPU with step rows of its own is measured over its own step):")
    ranked = sorted(range(len(devs)), key=lambda k: (not devs[k].recorded, -devs[k].busy_share))
    shown = set(ranked[:MAX_DEVICES_SHOWN])   # listed in the legend's order
    for d in (d for k, d in enumerate(devs) if k in shown):
        if not d.recorded:
            out(f"{'-':>5}  {d.device}: recorded nothing", indent=2, hang=7)
            continue
        window = f"its own step row, {ms(d.window_us)}" if d.own_window else "the step"
        out(f"{d.busy_share:>5.0%}  {d.device}: {d.kernels} kernels over {window}; copies "
            f"{d.copy_share:.0%}" + (f"; collectives {d.collective_share:.0%}"
                                     if d.collective_share else ""), indent=2, hang=7)
    if len(devs) > len(shown):
        rest = [d for k, d in enumerate(devs) if k not in shown]
        out(f"... and {len(rest)} more GPUs, each busy at most "
            f"{max(d.busy_share for d in rest):.0%} (all in --json).", indent=2)


def _to_try(e: Explanation) -> list:
    v = e.verdict
    todo = [f for f in v.findings if f.try_next and (
        f.level in ("high", "moderate") or f.kind == "xla_overhead" or
        f.kind == "compute" and f.share >= COMPUTE_NOTABLE)] \
        or [f for f in v.findings if f.try_next]
    return sorted(todo, key=lambda f: (f.kind != v.bottleneck, f.level != "high", -f.share))
