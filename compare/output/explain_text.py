"""An :class:`compare.analysis.explanation.Explanation` in plain words: a header, "In short",
then one section per question of the seed. :func:`answers` gives each section on its own
(report.md shows them per run); :func:`to_text` is what ``compare.explain`` prints."""
from __future__ import annotations

import os
import textwrap

from compare.analysis.explanation import Explanation
from compare.analysis.mapping import stage_of_op
from compare.analysis.verdict import Finding
from compare.fmt import duration as ms
from compare.fmt import listed, shown_words, size
from compare.output import legend_words, sequence_words, step_words, verdict_words
from compare.vocabulary.ops import XLA_LAUNCH_OPS, XLA_OP_WORDS, copy_direction
from compare.vocabulary.rows import gpu_of
from compare.vocabulary.thresholds import COMPILE_MIN_US, COMPUTE_NOTABLE

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
    out(f"What it is: {legend_words.format_words(e.legend)}.", hang=4)
    out(f"Step explained: step {step.num} ({step.name}), {ms(step.dur)} wall, chosen because "
        f"{step_words.reason(c)}."
        + (f" The trace has {c.count} steps: first {ms(c.first_us)}, median of the rest "
           f"{ms(c.median_us)}, shortest {ms(c.min_us)}, longest {ms(c.max_us)}. Pick another "
           f"with --step N." if c.count > 1 else ""), hang=4)
    if c.source:
        out(f"Steps come from: {c.source}.", hang=4)
    if step_words.window(c):
        out(f"Step window: {step_words.window(c)}.", hang=4)
    if e.warnings:
        out("Warnings (what was wrong or unusual in the input, and what this report did):")
        for w in e.warnings:
            out(f"- {w}", indent=2)
    out()
    out("In short:")
    out.lines.append(summary(e))
    return out.text()


def summary(e: Explanation) -> str:
    out = Lines()
    x, v, sq = e.xla, e.verdict, e.sequence
    out(f"- {verdict_words.headline(v)}", indent=2)
    if x.compiles:
        out(f"- XLA compiled {x.compiles} time(s), {ms(x.compile_us)} of compile work in all"
            + (f"; recompiled: {listed(x.recompiled)}" if x.recompiled else
               "; no recompilation") + ".", indent=2)
    elif x.launch_style != "none":
        why = _single_call_words(x) or "it shows steady calls only"
        out(f"- XLA ran {sum(1 for u in x.units.values() if u.runs)} cluster(s); none compiled "
            f"in this trace ({why}).", indent=2)
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
        "row. " + legend_words.tids_words(lg))
    empty: dict[str, list] = {}
    full = [p for p in lg.processes if (p.recorded or p.role in ("allocator", "tensors"))
            and (p.events or p.tensors or p.role == "allocator")]
    listed = _busiest(full)
    quiet: dict[str, list] = {}
    for p in lg.processes:
        if not p.recorded and p.role not in ("allocator", "tensors"):
            empty.setdefault(RECORDED_NOTHING, []).append(p)
            continue
        if not p.events and not p.tensors and p.role != "allocator":
            key = (legend_words.process(p) if p.role == "tensors" or not p.recorded else
                   f"{legend_words.process(p)}. It recorded events, but none in step {e.choice.step.num}")
            empty.setdefault(key, []).append(p)
        elif p.pid in listed:
            if p.role in QUIET_ROLES and p.busy_share < QUIET_SHARE:
                host = p.name.split(": ", 1)[0] + ": " if ": /" in p.name else ""
                quiet.setdefault(host + (gpu_of(p.name) or p.role), []).append(p)
                continue
            _process(out, e, p)
    for gpu, group in quiet.items():
        if len(group) == 1:
            _process(out, e, group[0])
            continue
        out()
        out(f"pid {', '.join(str(p.pid) for p in group)}  {_names(group)}", indent=2, hang=4)
        busy = ms(sum(p.busy_us for p in group))
        out(f"CUDA stream and copy rows of {gpu} that were nearly idle in step "
            f"{e.choice.step.num}: each busy under {QUIET_SHARE:.0%} of it ({busy} in all); "
            f"their kernels and copies count in the GPU's totals.", indent=6)
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
            + _names(group) + (" ..." if more else ""), indent=2, hang=4)
        out(f"{meaning}.", indent=6)
    if len(groups) > MAX_EMPTY_GROUPS:
        rest = sum(len(g) for _, g in groups[MAX_EMPTY_GROUPS:])
        out()
        out(f"... and {rest} more processes without events in step {e.choice.step.num} "
            f"(all in --json).", indent=2)
    return out.text()


#: Stream and copy rows busy less than this share of the step share one entry per GPU.
QUIET_SHARE = 0.02
QUIET_ROLES = ("gpu_stream", "gpu_memcpy")


def _span(nums: list[int]) -> str:
    """``3-20`` for consecutive numbers, else the first few."""
    if len(nums) > 2 and nums == list(range(nums[0], nums[-1] + 1)):
        return f"{nums[0]}-{nums[-1]}"
    return ", ".join(map(str, nums[:6])) + (" ..." if len(nums) > 6 else "")


def _names(group: list) -> str:
    """Process names with their common beginning and end said once:
    ``/device:GPU:0/{stream:15, stream:14, memcpy} Compute``."""
    names = [p.name for p in group]
    if len(names) == 1:
        return names[0]
    head = names[0][:len(os.path.commonprefix(names))]
    head = head[:head.rfind("/") + 1] if "/" in head else ""
    tail = os.path.commonprefix([n[::-1] for n in names])[::-1]
    tail = tail[tail.find(" "):] if " " in tail else ""
    inner = [n[len(head):len(n) - len(tail)] for n in names]
    return f"{head}{{{', '.join(inner)}}}{tail}" if head or tail else ", ".join(names)


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
    out(f"{legend_words.process(p)}.{busy}", indent=6)
    if p.role == "allocator":
        _memory(out, e)
    if lg.tids_are == "lanes":
        lanes = [ln for ln in p.lanes if ln.events]
        if len(lanes) > 1:  # one lane is the process itself
            busy = [ln for ln in lanes if ln.busy_share >= 0.01]
            quiet = [ln for ln in lanes if ln.busy_share < 0.01]
            out("lanes (lane 1 and up hold ops that overlapped ops in the lanes below): "
                + ", ".join(f"{ln.tid} busy {ln.busy_share:.0%}" for ln in busy)
                + ((", and " if busy else "") + (
                    f"lane {quiet[0].tid} busy under 1%" if len(quiet) == 1 else
                    f"{len(quiet)} lanes ({_span([ln.tid for ln in quiet])}) busy under 1% "
                    f"each") if quiet else "")
                + ".", indent=6, hang=4)
        return
    shown = [ln for ln in p.lanes if ln.events and ln.role != "derived"]
    derived = [ln for ln in p.lanes if ln.role == "derived"]
    if derived:
        out(f"{', '.join(rows_base(ln.name) for ln in derived)}: {legend_words.lane(derived[0])}.",
            indent=6, hang=4)
    groups: dict[tuple[str, str], list] = {}   # threads of one name and role: one line
    for ln in shown:
        groups.setdefault((rows_base(ln.name), legend_words.lane(ln)), []).append(ln)
    for (base, meaning), lanes in list(groups.items())[:MAX_THREADS_SHOWN]:
        if len(lanes) == 1:
            out(f"{lanes[0].name}: {meaning}; busy {lanes[0].busy_share:.0%}.", indent=6, hang=4)
            continue
        lanes = sorted(lanes, key=lambda ln: -ln.busy_share)
        shares = [f"{ln.busy_share:.0%}" for ln in lanes]
        more = "" if len(lanes) <= MAX_TIDS_SHOWN else ", ..."
        busy = f"{shares[0]} each" if len(set(shares)) == 1 else \
            ", ".join(shares[:MAX_TIDS_SHOWN]) + more
        tids = ", ".join(str(ln.tid) for ln in lanes[:MAX_TIDS_SHOWN]) + more
        out(f"{base} x{len(lanes)} (tid {tids}): {meaning}; busy {busy}.", indent=6, hang=4)
    if len(groups) > MAX_THREADS_SHOWN:
        more = sum(len(v) for v in list(groups.values())[MAX_THREADS_SHOWN:])
        out(f"... and {more} more threads with events (all in --json)", indent=6)
    idle = [ln for ln in p.lanes if not ln.events and ln.role != "derived"]
    if idle:
        out(f"No events in step {step.num}: " + ", ".join(
            ln.name for ln in idle[:MAX_EMPTY_SHOWN])
            + (f" and {len(idle) - MAX_EMPTY_SHOWN} more" if len(idle) > MAX_EMPTY_SHOWN
               else "") + ".", indent=6, hang=4)


def rows_base(label: str) -> str:
    """``Steps`` from a lane label ``Steps (tid 3735928559)``."""
    return label.split(" (tid ", 1)[0]


#: Threads of one process listed one by one (the rest are counted); of a group of threads of
#: one name, the tids (and busy shares) named.
MAX_THREADS_SHOWN, MAX_TIDS_SHOWN = 10, 8


def _memory(out: Lines, e: Explanation) -> None:
    step, memory = e.choice.step, e.legend.memory
    for m in memory[:MAX_SERIES_SHOWN]:
        at = (f"; in step {step.num} up to {size(m.step_peak_bytes)}"
              if m.step_peak_bytes else f"; no sample in step {step.num}")
        out(f"{m.allocator or '(no allocator name)'}: peak {size(m.peak_bytes)} at +{ms(m.peak_at_us)} from "
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
    launch = _launch_op(e)
    for op, words in XLA_OP_WORDS.items():
        if op in e.ops_present or op == "_XlaLaunch" and launch not in e.ops_present:
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
    out("Per cluster (largest first)" + (": first call vs steady call shows the compile."
                                         if not _single_calls(x) else ":"))
    for u in units[:8]:
        _xla_unit(out, u)
    if len(units) > 8:
        out(f"... and {len(units) - 8} more (all in --json).", indent=2)
    if x.launch_style == "launch" and any(u.compiles for u in units):
        u = max(units, key=lambda u: u.compile_us)
        out()
        out(f"How to read the overhead: {u.name}'s first {_launch_op(e)} took "
            f"{ms(u.launch_first_us)} and a steady one {ms(u.launch_steady_us)}, so about "
            f"{ms(u.first_compile_us)} of the first call was compilation, paid once per "
            f"input shape: as long as {u.first_compile_us / e.choice.step.dur:.0f} steps like "
            f"step {e.choice.step.num}.")
    return out.text()


def _launch_op(e: Explanation) -> str:
    """The name of the trace's XLA launch op (_XlaLaunch, or XlaLaunch in later TF 1.x)."""
    return next((op for op in e.ops_present if op in XLA_LAUNCH_OPS), "_XlaLaunch")


def _xla_totals(out: Lines, e: Explanation) -> None:
    x, xs, step = e.xla, e.xla_step, e.choice.step
    launch = _launch_op(e)
    style = {"launch": f"TF 1.x style: one {launch} per cluster",
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
           _no_compiles(x))
        + f"Runs: {ms(x.run_us)} in all. "
        + ("Recompilation: yes, " + listed(x.recompiled) + " compiled more than once "
           "(new input shapes)." if x.recompiled else
           "Recompilation: none (no cluster compiled twice)."))
    out(f"In step {step.num}: compiling {ms(xs.compile_us)} of wall time "
        f"({xs.compile_share:.0%} of the step), running clusters {ms(xs.run_us)} summed "
        f"({xs.run_share:.0%} of the step as wall time)"
        + (f"; the clusters' kernels ran {ms(xs.device_us)} on the GPU "
           f"({min(1.0, xs.device_us / step.dur):.0%} of the step; "
           f"{launch if x.launch_style == 'launch' else '_XlaRun'} on the host only "
           f"launches them)" if xs.device_us else "") + ".")


def _single_calls(x) -> bool:
    """Each cluster that ran was called once (no steady call to compare a first one with)."""
    ran = [u for u in x.units.values() if u.runs]
    return bool(ran) and all(u.runs == 1 for u in ran)


def _single_call_words(x) -> str:
    """Why a trace whose clusters each ran once shows no compile ("" otherwise)."""
    if x.launch_style != "launch" or not _single_calls(x):
        return ""
    longest = max(u.run_first_us for u in x.units.values() if u.runs)
    return ("each cluster ran once, so there is no steady call to compare with; "
            + (f"the longest call, {ms(longest)}, is too short to hold one"
               if longest < COMPILE_MIN_US else
               f"the longest call, {ms(longest)}, may include one"))


def _no_compiles(x) -> str:
    """Why the trace shows no compile, in words."""
    words = _single_call_words(x)
    if words:
        return f"Compiles: none seen ({words}). "
    return "Compiles: none in this trace (every call found its program in the cache). "


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
    out(f"Built from: {sequence_words.basis(sq)}. Dependencies: "
        + (", ".join(f"{n} {k}" for k, n in sorted(sq.edge_counts.items())) or "none") + ".")
    if sq.time_inconsistent:
        n = sq.time_inconsistent
        out(f"({n} {'dependency overlaps' if n == 1 else 'dependencies overlap'} in time (the "
            f"dependent op started before the other's box ended: a box can hold bookkeeping "
            f"after its outputs were ready); the critical path skips "
            f"{'it' if n == 1 else 'those'}. A kernel starting while its launch still runs is "
            f"not one of them.)")
    out()
    _op_list(out, e)
    out()
    _critical_path(out, e)
    return out.text()


#: Ops of the step listed at most (runs of one op type on one row count as one line), and
#: from how many ops on only those of 1 % of the step or more are listed.
MAX_OPS_SHOWN, ALL_OPS_UP_TO = 24, 20
#: A run of this many listed ops on one row is shown as its first RUN_HEAD and a count.
RUN_FOLDED, RUN_HEAD, RUN_KINDS = 4, 2, 3
#: An op taking this share of the step or more keeps a line of its own.
OWN_LINE_SHARE = 0.10


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
    shown = [o for o in sq.ops if o.dur_us >= limit] if len(sq.ops) > ALL_OPS_UP_TO else sq.ops
    first = "depth" if sq.inputs_recorded else "#"
    out(f"{first:>5} {'start':>9} {'took':>9}  op (node) on row  <- after", indent=2)
    position = {o.index: k for k, o in enumerate(sq.ops)}
    lines = listed_ops = 0
    for run in (_runs(shown, sq.wall_us * OWN_LINE_SHARE) if len(shown) > ALL_OPS_UP_TO
                else [[o] for o in shown]):
        if lines >= MAX_OPS_SHOWN:
            break
        head = run[:RUN_HEAD] if len(run) > 1 else run
        for o in head:
            mark = "*" if o.index in crit else " "
            # a timeline kernel depends on its launch, named as the kernel is
            deps = list(dict.fromkeys("its launch" if a == o.name and sq.inputs_recorded
                                      else a for a in o.after))
            after = f"  <- {', '.join(deps[:2])}{' ...' if len(deps) > 2 else ''}" \
                if deps else ""
            col = o.depth if sq.inputs_recorded else position[o.index]
            start = ("+" if o.start_us >= 0 else "-") + ms(abs(o.start_us))
            out(f"{col:>5} {start:>9} {ms(o.dur_us):>9} {mark}{_op_and_node(o)} "
                f"on {o.row}{after}", indent=2, hang=28)
        lines += len(head)
        listed_ops += len(run)
        rest = run[len(head):]
        if rest:
            on_path = sum(r.index in crit for r in rest)
            types: dict[str, int] = {}
            for r in rest:
                types[r.op] = types.get(r.op, 0) + 1
            kinds = ", ".join(f"{t} x{n}" for t, n in sorted(types.items(), key=lambda x: -x[1]))
            where = sorted({r.row for r in rest})
            on = f"on {where[0]}" if len(where) == 1 else f"on {len(where)} rows"
            out(f"{'':>25}... then {len(rest)} more ({kinds}) {on}, "
                f"{ms(min(r.dur_us for r in rest))} to {ms(max(r.dur_us for r in rest))} each, "
                f"{ms(sum(r.dur_us for r in rest))} in all"
                + (f", {on_path} on the critical path" if on_path else "") + ".",
                indent=2, hang=28)
            lines += 1
    hidden = len(sq.ops) - listed_ops
    if hidden > 0:
        big = len(shown) - listed_ops
        out(f"... {hidden} more ops not shown ("
            + (f"{big} of 1 % of the step or more, and {hidden - big} shorter" if big > 0
               else "each under 1 % of the step") + "; all in --json). * = on the critical path.",
            indent=2)
    else:
        out("* = on the critical path.", indent=2)


def _op_and_node(o, brackets: str = "()") -> str:
    """``MatMul (dense/MatMul)``; the name once when the node is named as its op."""
    if not o.name or o.name == o.op:
        return o.op
    return f"{o.op} {brackets[:1]}{o.name}{brackets[1:]}"


def _runs(ops: list, own_line_us: float) -> list[list]:
    """``ops`` cut into runs of consecutive ops of at most :data:`RUN_KINDS` op types on at
    most as many rows (a layer's forward or backward ops, repeated); an op of ``own_line_us``
    or more is never folded into a run; runs shorter than :data:`RUN_FOLDED` are split back
    into single ops."""
    out: list[list] = []
    for o in ops:
        run = out[-1] if out else None
        if run and o.dur_us < own_line_us and run[-1].dur_us < own_line_us and \
                len({r.op for r in run} | {o.op}) <= RUN_KINDS and \
                len({r.row for r in run} | {o.row}) <= RUN_KINDS:
            run.append(o)
        else:
            out.append([o])
    return [r for run in out for r in ([run] if len(run) >= RUN_FOLDED else [[o] for o in run])]


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


#: Rows of the busy table shown (the busiest; the rest are counted).
MAX_BUSY_SHOWN = 12


#: Links of the critical path shown: the first and last ones when the chain is longer.
CHAIN_LINKS = 12
#: This many long ops of one type in a row on the critical path (short ops between them
#: allowed) are one link.
CHAIN_FOLDED = 3


def _chain(sq) -> list[str]:
    """The critical path as links: ops of 1 % of the step or more by name, runs of shorter
    ops between them as one link (how many, of which types, how long together), and a
    repeating stretch of long ops of one type as one link."""
    limit = max(sq.wall_us * 0.01, 1.0)
    items: list[list] = []          # [op] for a long op, [op, op, ...] + "short" for a run
    for o in sq.critical:
        if o.dur_us >= limit or len(sq.critical) <= 12:
            items.append([o])
        elif items and items[-1][-1] == "short":
            items[-1].insert(-1, o)
        else:
            items.append([o, "short"])
    links = [_link(group) for group in _fold_repeats(items)]
    if len(links) > CHAIN_LINKS:
        half = CHAIN_LINKS // 2
        n = len(links) - CHAIN_LINKS
        links = links[:half] + [f"... {n} more link{'s' if n > 1 else ''} ..."] + links[-half:]
    return links


def _fold_repeats(items: list[list]) -> list:
    """Stretches of :data:`CHAIN_FOLDED` or more long ops of one type (short runs between
    them) become one ``("repeat", long ops, short ops)`` item."""
    out: list = []
    k = 0
    while k < len(items):
        if items[k][-1] == "short":
            out.append(items[k])
            k += 1
            continue
        op, longs, shorts, j = items[k][0].op, [], [], k
        while j < len(items):
            if items[j][-1] == "short":
                if j + 1 < len(items) and items[j + 1][-1] != "short" and \
                        items[j + 1][0].op == op:
                    shorts += items[j][:-1]
                    j += 1
                    continue
                break
            if items[j][0].op != op:
                break
            longs.append(items[j][0])
            j += 1
        if len(longs) >= CHAIN_FOLDED:
            out.append(("repeat", longs, shorts))
            k = j
        else:
            out.append(items[k])
            k += 1
    return out


def _link(group) -> str:
    if isinstance(group, tuple):
        _, longs, shorts = group
        between = (f", with {len(shorts)} short op{'s' if len(shorts) > 1 else ''} between "
                   f"({ms(sum(o.dur_us for o in shorts))})" if shorts else "")
        return (f"[{len(longs)} x {longs[0].op}, {ms(min(o.dur_us for o in longs))} to "
                f"{ms(max(o.dur_us for o in longs))} each, {ms(sum(o.dur_us for o in longs))} "
                f"in all{between}: {longs[0].name} ... {longs[-1].name}]")
    if group[-1] != "short":
        o = group[0]
        return f"{_op_and_node(o, '')} ({ms(o.dur_us)})"
    run = group[:-1]
    if len(run) == 1:
        return f"{_op_and_node(run[0], '')} ({ms(run[0].dur_us)})"
    types: dict[str, int] = {}
    for o in run:
        types[o.op] = types.get(o.op, 0) + 1
    kinds = ", ".join(f"{t} x{n}" for t, n in sorted(types.items(), key=lambda kv: -kv[1])[:3])
    more = ", ..." if len(types) > 3 else ""
    return f"[{len(run)} short ops: {kinds}{more}; {ms(sum(o.dur_us for o in run))}]"


# --------------------------------------------------------------------------------------------
# 4. interpret

def interpret(e: Explanation) -> str:
    out = Lines()
    lg, v, step = e.legend, e.verdict, e.choice.step
    out(f"Step {step.num} took {ms(step.dur)}. How busy each row was (time when at least one "
        f"of its boxes was open, not the sum of boxes):")
    busy = sorted((p for p in lg.processes if p.events), key=lambda p: (-p.busy_us, p.pid))
    shown = busy if len(busy) <= MAX_BUSY_SHOWN else (
        [p for p in busy if p.busy_share >= QUIET_SHARE][:MAX_BUSY_SHOWN] or busy[:1])
    for p in shown:
        out(f"{p.busy_share:>5.0%}  {p.name}", indent=2, hang=7)
    if len(busy) > len(shown):
        rest = len(busy) - len(shown)
        out(f"... and {rest} more row{'s' if rest > 1 else ''}, each busy under "
            f"{QUIET_SHARE:.0%} of the step.", indent=2)
    _devices(out, e)
    out()
    out("Where the time went, by op type (a GPU kernel counts for the TF op that launched it). "
        "'wall' is the share of the step the op's own time covers (overlapping executions "
        "count once, so it never passes 100 %); 'summed' adds its executions up (CPU time on "
        "the host, GPU time on the GPU), which passes the step when they overlap:")
    out(f"{'wall':>5} {'summed':>9}  op", indent=2)
    for t in lg.top_ops:
        tag = (" (collective: communication)" if t.collective else
               " (waiting for input: time, not CPU work)" if t.wait else
               f" (a copy, {copy_direction(t.op) or 'not a kernel'})" if t.copy else "")
        out(f"{t.share:>5.0%} {ms(t.self_us):>9}  {t.op} on the {t.where} x{t.count}{tag}; "
            f"longest {t.largest} ({ms(t.largest_us)})", indent=2, hang=18)
    if lg.runtime_us:
        parts = ["executor", "thread pools"] + (["CUDA launch calls"] if lg.gpu else []) + (
            ["XLA launch plumbing", "_XlaMerge"] if e.xla.launch_style != "none" else [])
        out(f"{'':>5} {ms(lg.runtime_us):>9}  TF runtime around the ops ({', '.join(parts)}; "
            f"CPU time summed over threads, waits inside them included), not listed above",
            indent=2, hang=18)
    out()
    out(f"Verdict: {verdict_words.headline(v)}")
    for fnd in v.findings:
        tag = {"high": "!!", "moderate": "! ", "low": "ok", "info": "  "}[fnd.level]
        out(f"[{tag}] {verdict_words.text(v, fnd)}", indent=2, hang=5)
    out()
    out("What to try next:")
    for k, fnd in enumerate(_to_try(e)[:5], 1):
        advice = verdict_words.try_next(v, fnd)
        out(f"{k}. {advice[0].upper()}{advice[1:]}.", indent=2, hang=3)
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


def _to_try(e: Explanation) -> list[Finding]:
    v = e.verdict
    advised = [f for f in v.findings if verdict_words.try_next(v, f)]
    todo = [f for f in advised if f.level in ("high", "moderate") or f.kind == "xla_overhead"
            or f.kind == "compute" and f.share >= COMPUTE_NOTABLE] or advised
    rank = {"high": 0, "moderate": 1}
    return sorted(todo, key=lambda f: (f.kind != v.bottleneck, rank.get(f.level, 2), -f.share))
