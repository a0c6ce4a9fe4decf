"""The comparison in words: a few sentences per side (step time, where it goes, what bounds it,
XLA's cost) and one on the two together (which is faster, where the difference comes from)."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from compare.analysis.opdiff import scopes_of
from compare.fmt import duration as ms
from compare.fmt import listed
from compare.vocabulary.thresholds import (
    CHANGE_NOTABLE,
    RUNTIME_NOTABLE,
    TYPE_OVER_NODE,
    UNMAPPED_NOTABLE,
    UNTRACED_NOTABLE,
    input_class,
)

if TYPE_CHECKING:  # the types only; comparison imports this module
    from compare.analysis.comparison import Comparison, SideResult
    from compare.analysis.opdiff import OpDiff

#: Differences named in the comparison sentence.
NAMED = 3


@dataclasses.dataclass
class Change:
    """One difference the verdict names: an op, an op type (several nodes), a fused cluster or
    a stage; ``delta_us`` per step, ``rank_us`` what it is ranked by (wall time for a type)."""

    words: str
    delta_us: float
    rank_us: float
    op: str


@dataclasses.dataclass
class Verdicts:
    sides: dict[str, str]           # side -> a few sentences on it
    comparison: str
    named: list[Change] = dataclasses.field(default_factory=list)  # what the comparison names
    significant: bool = True        # the step times differ beyond noise


def verdicts(c: "Comparison") -> Verdicts:
    named = changes(c)
    gap = gap_change(c, named)
    if gap:
        named = [gap] + named
    text, significant = comparison_sentence(c, named)
    return Verdicts({k: side_verdict(c, k) for k in c.sides}, text, named, significant)


def side_verdict(c: "Comparison", side: str) -> str:
    """A few sentences on one side."""
    r = c.sides[side]
    step = r.steps.median_us
    if not step:
        return f"{c.label(side)}: no steps with events."
    parts = [_step_words(c.label(side), r), _where_time_goes(c, side, step),
             _input_words(r, step)]
    if r.steps.unmarked_calls:
        parts.append(f"{r.steps.unmarked_calls} more train_function call(s) at the trace's "
                     f"edges carry no step marker (the profiler started or stopped inside "
                     f"them) and are not counted as steps")
    parts += _xla_words(r)
    split = r.steps.split_us
    unmapped = c.group_unmapped_us(side) if c.groups else r.unmapped_us
    if unmapped / step >= UNMAPPED_NOTABLE:
        names = ", ".join(o for row in c.groups if row.group == "unmapped"
                          for o in row.cells[side].ops[:4])
        parts.append(f"{unmapped / step:.0%} of the step is in events no rule places "
                     f"({names})")
    elif c.has_pipeline() and r.unmapped_us / step >= UNMAPPED_NOTABLE:
        parts.append(f"{r.unmapped_us / step:.0%} of the step is outside the pipeline's "
                     f"stages: " + _group_words(c, side, step, skip_pipeline=True))
    if split["runtime"] / step >= RUNTIME_NOTABLE:
        parts.append(f"runtime overhead (executor, dispatch, Python) is "
                     f"{split['runtime'] / step:.0%} of the step")
    if split["idle"] / step >= UNTRACED_NOTABLE:
        parts.append(f"nothing traced runs for {split['idle'] / step:.0%} of the step")
    return "; ".join(parts) + "."


def _step_words(side: str, r: "SideResult") -> str:
    st = r.steps
    words = f"{side}: {ms(st.median_us)} per steady step (median of {st.steady_count}"
    if st.first_kind == "window":
        span = f"steps {st.first_num}–{st.last_num}" if st.count > 1 else f"step {st.first_num}"
        return words + f"; the trace holds {span} of a longer run, none of them its first)"
    words += ")"
    if st.first_us is not None:
        words += (f", first step {ms(st.first_us)}" if st.first_kind == "program" else
                  f", the trace's first step {ms(st.first_us)} (the trace does not say whether "
                  f"it is the program's first)")
    return words


def _where_time_goes(c: "Comparison", side: str, step: float) -> str:
    if c.groups and not c.has_pipeline():
        return "time goes to " + _group_words(c, side, step)
    rows = sorted(c.stages, key=lambda row: -row.cells[side].us)
    work = [row for row in rows if row.stage != "idle" and row.cells[side].us > 0][:3]
    return "time goes to " + ", ".join(
        f"{row.stage} {ms(row.cells[side].us)} ({row.cells[side].us / step:.0%})" for row in work)


def _group_words(c: "Comparison", side: str, step: float, skip_pipeline: bool = False) -> str:
    """The largest rows of the generic view (idle aside)."""
    skip = {"idle", "unmapped"} | ({"input", "preprocessing", "runtime", "xla_run",
                                    "xla_compile"} if skip_pipeline else set())
    rows = sorted((r for r in c.groups if r.group not in skip and r.cells[side].us > 0),
                  key=lambda r: -r.cells[side].us)[:3]
    return ", ".join(f"{r.key} {ms(r.cells[side].us)} ({r.cells[side].us / step:.0%})"
                     for r in rows) or "nothing placed"


def _input_words(r: "SideResult", step: float) -> str:
    share = r.steps.split_us["input_wait"] / step
    return f"{input_class(share)} (waiting for or reading input {share:.0%} of the step)"


def _xla_words(r: "SideResult") -> list[str]:
    x, st = r.xla, r.steps
    if not x.compiles:
        return ["no XLA"] if x.launch_style == "none" else []
    first_compile = (st.first_split_us or {}).get("compile", 0.0)
    share = first_compile / st.first_us if st.first_us else 0.0
    # compile_us sums every compile event; compiles on several threads overlap, so it can
    # exceed the first step's wall time, which the share measures (union of intervals)
    return [f"XLA compiled {x.compiles} time(s), {ms(x.compile_us)} of compile work summed "
            f"over threads"
            + (f" ({ms(first_compile)} of the first step's wall time, {share:.0%})"
               if share else "")
            + (f"; recompiled: {listed(x.recompiled)}" if x.recompiled else
               ", no recompilation")]


def comparison_sentence(c: "Comparison", named: list[Change]) -> tuple[str, bool]:
    """What is faster, by how much, and the largest differences by name; caveats that make the
    pair not like for like first, notes after. Returns (sentence, significant)."""
    par = c.parity
    steps = par.steps if par else None
    a = steps["legacy"].us if steps else c.sides["legacy"].steps.median_us
    b = steps["modern"].us if steps else c.sides["modern"].steps.median_us
    if not (a and b):
        return "cannot compare: a side has no steps with events.", False
    la, lb = c.label("legacy"), c.label("modern")
    parts = [x.text for x in par.caveats if x.kind == "identical"] if par else []
    if par and not par.like_for_like:
        parts.append("Not like for like: " + "; ".join(x.text for x in par.caveats if x.breaks))
    noise = par.noise if par else 0.0
    significant = abs(a - b) > noise * max(a, b)
    faster, slower = (lb, la) if b < a else (la, lb)
    ones = [k for k, st in (steps or {}).items() if st.steady < 2]
    one = ("one traced step per side" if len(ones) == 2 else
           f"a single traced step in {c.label(ones[0])}" if ones else "")
    sample = (f"; with {one} that threshold is a typical run-to-run spread, not one measured "
              f"here" if one else "")
    if significant:
        parts.append(f"{faster} is {max(a, b) / min(a, b):.1f}x faster per step than {slower} "
                     f"({ms(min(a, b))} vs {ms(max(a, b))})"
                     + (f" — on {one}: weak evidence" if one else ""))
    else:
        parts.append(f"no significant change per step: {la} {ms(a)}, {lb} {ms(b)} (within the "
                     f"{noise:.0%} these traces can tell apart{sample})")
    parts += _change_words(c, named, max(a, b), significant)
    if par:
        parts += [x.text for x in par.caveats
                  if not x.breaks and x.kind not in ("single_step", "identical")]
    parts += _unmapped_words(c, steps)
    first = _first_words(c)
    if first:
        parts.append(first)
    return "; ".join(parts) + ".", significant


def _change_words(c: "Comparison", named: list[Change], slower: float,
                  significant: bool) -> list[str]:
    """The largest differences; a step change that time with nothing traced (or TF's
    runtime) accounts for is said to be that, with the ops' own change beside it."""
    if named and named[0].op in GAP_GROUPS:
        gap, rest = named[0], named[1:]
        ops = [x for x in rest if abs(x.rank_us) >= CHANGE_NOTABLE * slower] or rest[:1]
        a_ops = sum(r.a_us for r in c.ops_diff)
        b_ops = sum(r.b_us for r in c.ops_diff)
        against = (b_ops - a_ops) * gap.delta_us < 0
        return [f"most of that is {gap.words}"
                + (", not the ops: their summed time went the other way, " if against else
                   "; the ops' summed time went ") + f"{ms(a_ops)} -> {ms(b_ops)}"
                + (f" (largest op changes: {', '.join(x.words for x in ops[:NAMED])})"
                   if ops else "")]
    big = [x for x in named if abs(x.rank_us) >= CHANGE_NOTABLE * slower] or named[:1]
    if big and significant:
        return ["largest changes: " + ", ".join(x.words for x in big[:NAMED])]
    if big:
        return [f"largest change, within that noise: {big[0].words}"]
    return []


def _unmapped_words(c: "Comparison", steps) -> list[str]:
    """Unmapped time in the view the verdict uses (the seed's stages, or the generic groups)."""
    if not steps:
        return []
    if c.view == "groups":
        return ["unmapped (generic groups): " + ", ".join(
            f"{c.label(k)} {_share(c.group_unmapped_us(k), st.us)}" for k, st in steps.items())
            + " of the step"]
    return ["unmapped (seed stages): " + ", ".join(
        f"{c.label(k)} {_share(c.sides[k].unmapped_us, c.sides[k].steps.median_us)}"
        for k in steps) + " of the step"]


def _first_words(c: "Comparison") -> str:
    """The first steps apart, where the traces hold one that is not a later window's."""
    out = []
    for k in ("legacy", "modern"):
        st = c.sides[k].steps
        if st.first_us is None or st.first_kind == "window":
            continue
        out.append(f"{c.label(k)} {ms(st.first_us)}" + (
            "" if st.first_kind == "program" else " (its trace's first step)"))
    return ("first step: " + ", ".join(out)) if out else ""


#: Rows of the generic view that are no op's time: a step change they account for is named
#: as theirs (:func:`gap_change`).
GAP_GROUPS = {"idle": "time with nothing traced between the ops (idle",
              "runtime": "TF's runtime (executor, dispatch, Python"}


def gap_change(c: "Comparison", named: list[Change]) -> Change | None:
    """The idle (or runtime) row of the generic view when it accounts for most of the step's
    change, in the same direction, and for more than any op or type does, while the ops'
    summed time moved the other way or by under a third of the step's change: then the ops'
    differences do not explain the step's (a shorter step whose ops all took longer)."""
    par = c.parity
    if not par or not c.groups:
        return None
    a_us, b_us = par.steps["legacy"].us, par.steps["modern"].us
    d = b_us - a_us
    if abs(d) <= par.noise * max(a_us, b_us):
        return None   # no change to explain
    if any(abs(par.steps[k].us - c.sides[k].steps.median_us) > 1.0 for k in par.steps):
        return None   # compared by traced spans: the group rows hold the untraced gaps too
    ops = sum(r.b_us - r.a_us for r in c.ops_diff)
    if ops * d > 0 and abs(ops) >= abs(d) / 3:
        return None
    top = max((abs(x.rank_us) for x in named), default=0.0)
    for g, words in GAP_GROUPS.items():
        row = next((r for r in c.groups if r.key == g), None)
        if row is None:
            continue
        a, b = row.cells["legacy"].us, row.cells["modern"].us
        delta = b - a
        if delta * d > 0 and abs(delta) >= 0.5 * abs(d) and abs(delta) > top:
            return Change(f"{words}: {ms(a)} in {c.label('legacy')}, {ms(b)} in "
                          f"{c.label('modern')}, {_signed(delta)})", delta, delta, g)
    return None


def _share(us: float, step: float) -> str:
    return f"{us / step:.0%}" if step else "n/a"


def _signed(us: float) -> str:
    return ("+" if us > 0 else "-") + ms(abs(us))


def changes(c: "Comparison") -> list[Change]:
    """The differences worth naming, largest first: for two runs of the seed's pipeline its
    stages (our own scopes); otherwise ops, op types whose nodes moved together, fused XLA
    clusters (see :mod:`compare.analysis.opdiff`)."""
    if all(any(r.kind == "pipeline" and r.cells[k].us > 0 for r in c.stages) for k in c.sides):
        rows = [r for r in c.stages if r.stage != "idle"]
        out = [Change(f"{r.stage} {_signed(r.cells['modern'].us - r.cells['legacy'].us)}",
                      r.cells["modern"].us - r.cells["legacy"].us,
                      r.cells["modern"].us - r.cells["legacy"].us, r.stage) for r in rows]
        return sorted((x for x in out if x.delta_us), key=lambda x: -abs(x.rank_us))
    return _op_changes(c)


def _op_changes(c: "Comparison") -> list[Change]:
    rows = [r for r in c.ops_diff if r.status != "same"]
    node_max: dict[str, float] = {}
    for r in rows:
        node_max[r.type] = max(node_max.get(r.type, 0.0), abs(r.delta_us))
    # a type whose nodes moved together is named once, ranked by its wall time (overlapping
    # ops, such as asynchronous all-reduces waiting together, counted once)
    types = {t.type: t for t in c.types_diff if max(t.a_nodes, t.b_nodes) > 1
             and abs(t.delta_us) >= TYPE_OVER_NODE * node_max.get(t.type, 0.0) > 0
             and (t.delta_us > 0) == (t.wall_delta_us > 0)}
    out = [Change(_type_words(t), t.delta_us, t.wall_delta_us, t.type) for t in types.values()]
    out += [Change(_op_words(r, c), r.delta_us, r.delta_us, r.op) for r in rows
            if r.type not in types or r.status in ("fused", "unfused")]
    return sorted(out, key=lambda x: -abs(x.rank_us))


def _type_words(t) -> str:
    wall = (f", {_signed(t.wall_delta_us)} of wall time" if abs(t.wall_delta_us) < 0.8 * abs(
        t.delta_us) else "")
    return f"{t.type} ({max(t.a_nodes, t.b_nodes)} ops) {_signed(t.delta_us)}{wall}"


def _op_words(r: "OpDiff", c: "Comparison") -> str:
    if r.status == "fused" and r.match == "name":   # a remapper fusion on the modern side
        return (" + ".join(m.rpartition("/")[2] for m in r.members) + f" ({ms(r.a_us)} in "
                f"{c.label('legacy')}) run as one {r.type}, {r.op}, in {c.label('modern')} "
                f"({ms(r.b_us)}; {_signed(r.delta_us)})")
    if r.status == "fused":
        ops_side = "legacy" if r.into == "modern" else "modern"
        ops_us, unit_us = (r.a_us, r.b_us) if r.into == "modern" else (r.b_us, r.a_us)
        return (f"{len(r.members)} ops of {scopes_of(r.members)} ({ms(ops_us)} in "
                f"{c.label(ops_side)}) run inside {r.op} in {c.label(r.into)} ({r.type}, "
                f"{ms(unit_us)}; {_signed(r.delta_us)})")
    if r.status == "unfused":
        return (f"{r.op} ({r.type}, {ms(r.a_us)} in {c.label('legacy')}) runs as "
                + " + ".join(m.rpartition("/")[2] for m in r.members)
                + f" in {c.label('modern')} ({ms(r.b_us)}; {_signed(r.delta_us)})")
    name = r.op if r.op == r.type else f"{r.op} ({r.type})"
    if r.match == "type":
        name = f"{r.type} (x{len(r.members)}, matched by type)"
    tag = {"added": f", only in {c.label('modern')}", "removed": f", only in {c.label('legacy')}"}
    return f"{name} {_signed(r.delta_us)}{tag.get(r.status, '')}"

