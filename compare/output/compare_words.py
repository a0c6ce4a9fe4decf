"""The comparison in words: the verdict's sentence (which side is faster and by how much, the
terms of the step difference and the ops behind them, the caveats) and a few sentences per side.
Every number said here is one of the report's tables' (the steps table, ``step_delta``,
``ops_diff``, the group and stage tables): this module only words
:class:`compare.analysis.compare_verdict.Verdicts` and the comparison's rows."""
from __future__ import annotations

from compare.analysis.compare_verdict import GAP_TERMS
from compare.analysis.opdiff import OpDiff, scopes_of
from compare.analysis.result import Comparison, Named, SideResult, Verdicts
from compare.analysis.step_delta import FUSION, StepDelta, Term, TermEvent, TermOp
from compare.fmt import duration as ms
from compare.fmt import listed
from compare.output import caveat_words
from compare.vocabulary.thresholds import (
    OP_SAME_SHARE,
    RUNTIME_NOTABLE,
    UNMAPPED_NOTABLE,
    UNTRACED_NOTABLE,
    input_class,
)

#: What each term of the step difference is, in a few words.
TERM_WORDS = {
    "idle": "idle (nothing traced running between the ops)",
    "untraced": "untraced (nothing traced at the step's edges)",
    "runtime": "runtime (TF's executor, dispatch, Python)",
    FUSION: "XLA fusion",
}


def p_value(p: float | None) -> str:
    if p is None:
        return "not tested"
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def signed(us: float) -> str:
    """A change with its sign; one under the tables' precision (0.5 us) is 0, unsigned."""
    if abs(us) < 0.5:
        return "0 us"
    return ("+" if us > 0 else "-") + ms(abs(us))


# --------------------------------------------------------------------------------------------
# the verdict

def comparison_text(c: Comparison) -> str:
    """The verdict's sentence: caveats that make the pair not like for like first, then which
    side is faster, the terms of the difference, the other caveats and notes."""
    v, par = c.verdict, c.parity
    if v is None or not v.comparable:
        return "cannot compare: a side has no steps with events."
    said = (lambda x: caveat_words.text(x, c.labels))
    parts = [said(x) for x in par.caveats if x.kind == "identical"] if par else []
    if par and not par.like_for_like:
        parts.append("Not like for like: " + "; ".join(said(x) for x in par.caveats if x.breaks))
    parts.append(_headline(c, v))
    parts += _named_words(c, v)
    if par:
        parts += [said(x) for x in par.caveats
                  if not x.breaks and x.kind not in ("single_step", "identical")]
    parts += _unmapped_words(c)
    first = _first_words(c)
    if first:
        parts.append(first)
    return "; ".join(p for p in parts if p) + "."


def _basis_words(c: Comparison) -> str:
    d = c.step_delta
    st = {k: c.sides[k].steps for k in c.sides}
    if st["a"].count == st["b"].count == 1:
        return "one step each" + ("; traced spans" if d and d.basis == "traced" else "")
    n = f"{st['a'].steady_count} and {st['b'].steady_count} steady steps"
    what = "mean traced span" if d and d.basis == "traced" else "mean step"
    return f"{what} of {n}"


def _headline(c: Comparison, v: Verdicts) -> str:
    a, b = v.a_us, v.b_us
    la, lb = c.label("a"), c.label("b")
    steps = c.parity.steps if c.parity else {}
    ones = [k for k, st in steps.items() if st.steady < 2]
    one = ("one traced step per side" if len(ones) == 2 else
           f"a single traced step in {c.label(ones[0])}" if ones else "")
    test = (f", {p_value(v.test.p)}" if v.test.tested else "")
    if v.significant:
        faster, slower = (lb, la) if v.faster == "b" else (la, lb)
        return (f"{faster} is {v.ratio:.1f}x faster per step than {slower} ({ms(min(a, b))} "
                f"vs {ms(max(a, b))}, {_basis_words(c)}"
                + (f"; beyond the step-to-step spread{test}" if v.test.tested else "") + ")"
                + (f" — on {one}: weak evidence" if one else ""))
    if v.test.tested:
        return (f"no significant change per step: {la} {ms(a)}, {lb} {ms(b)} ({_basis_words(c)}; "
                f"within the step-to-step spread{test})")
    sample = (f"; with {one} that threshold is a typical run-to-run spread, not one measured "
              f"here" if one else "")
    return (f"no significant change per step: {la} {ms(a)}, {lb} {ms(b)} (within the "
            f"{v.noise:.0%} these traces can tell apart{sample})")


def _named_words(c: Comparison, v: Verdicts) -> list[str]:
    if not v.named:
        return []
    if v.named[0].kind == "stage":
        words = ", ".join(f"{x.op} {signed(x.delta_us)}" for x in v.named)
        return [("largest changes: " if v.significant else
                 "largest change, within that noise: ") + words]
    d = c.step_delta
    if d is None:
        return []
    top = (f"the largest op change: {op_words(c, c.ops_diff[v.top_op])} (op time; "
           f"{c.ops_diff[v.top_op].group or 'ungrouped'})") if v.top_op is not None else ""
    terms = [x for x in v.named if x.kind == "term"]
    if not v.significant:
        out = [top] if top else []
        if terms:
            out.append("largest term of the step difference, within that noise: "
                       + ", ".join(term_words(c, x) for x in terms))
        return out
    out = [f"the step difference, {signed(d.delta_us)}, is mostly: "
           + ", ".join(term_words(c, x) for x in terms) + _against(d, v)]
    return out + ([top] if top else [])


def _against(d: StepDelta, v: Verdicts) -> str:
    """When time with no op in it (idle, runtime) leads the difference while the ops' own
    terms, together, went the other way: the ops do not explain the step."""
    lead = next((x for x in v.named if x.kind == "term"), None)
    if lead is None or lead.op not in GAP_TERMS:
        return ""
    ops = sum(t.delta_us for t in d.terms if t.key not in GAP_TERMS)
    if ops * lead.delta_us >= 0:
        return ""
    return (f"; not the ops: the terms of their own time went the other way "
            f"({signed(ops)} in all)")


def term_words(c: Comparison, x: Named) -> str:
    """One named term: its change, the ops and events behind it (their parts of that change,
    as the step difference's table gives them), whether it is beyond the step-to-step
    spread."""
    t = x.term
    name = TERM_WORDS.get(x.op, x.op)
    spread = "" if x.test is None or x.test.beyond is not False else \
        f", within the step-to-step spread ({p_value(x.test.p)})"
    if t is not None and t.key == FUSION:
        return fusion_words(c, t) + spread
    parts = [] if t is None else [f"{part_name(c, o)} {signed(o.delta_us)}" for o in t.behind()]
    behind = f" (of which {', '.join(parts)})" if parts else ""
    return f"{name} {signed(x.delta_us)}{behind}{spread}"


def part_name(c: Comparison, part) -> str:
    """An op (by its ``ops_diff`` row) or the events no op owns, behind a term."""
    if isinstance(part, TermEvent):
        return part.name
    r = c.ops_diff[part.row]
    if r.match == "type":
        return f"{r.type} x{len(r.members)}"
    return r.op if r.op == r.type else f"{r.op} ({r.type})"


def fusion_words(c: Comparison, t: Term) -> str:
    """``N ops of scopes ... now run in K clusters (side): before X, after Y``."""
    rows = [r for r in c.ops_diff if r.status == "fused" and r.match == "xla"]
    members = [m for r in rows for m in r.members]
    ops_side = "a" if t.into == "b" else "b"
    before, after = (t.a_us, t.b_us) if t.into == "b" else (t.b_us, t.a_us)
    op_before, op_after = (t.ops_a_us, t.ops_b_us) if t.into == "b" else \
        (t.ops_b_us, t.ops_a_us)
    clusters = listed(t.clusters) if t.clusters else "clusters"
    k = t.cluster_count or len(t.clusters)
    return (f"XLA fusion {signed(t.delta_us)}: {t.members} ops of {scopes_of(members)} "
            f"({c.label(ops_side)}) now run in {k} compiled unit{'s' if k != 1 else ''} "
            f"({clusters}, {c.label(t.into)}): before {ms(before)}, after {ms(after)} of the "
            f"step's wall time (op time {ms(op_before)} -> {ms(op_after)})")


def op_words(c: Comparison, r: OpDiff) -> str:
    """An op diff row in a few words: its name and change, where it is only on one side."""
    name = r.op if r.op == r.type else f"{r.op} ({r.type})"
    if r.match == "type":
        name = f"{r.type} (x{len(r.members)}, matched by type)"
    if r.status in ("fused", "unfused") and r.match == "name":
        arrow = "<-" if r.status == "fused" else "->"
        name = f"{r.op} ({r.type} {arrow} " + " + ".join(
            m.rpartition("/")[2] for m in r.members) + ")"
    tag = {"added": f", only in {c.label('b')}", "removed": f", only in {c.label('a')}"}
    noise = " (within the spread)" if r.test is not None and r.test.beyond is False else ""
    return f"{name} {signed(r.delta_us)}{tag.get(r.status, '')}{noise}"


def _unmapped_words(c: Comparison) -> list[str]:
    """Unmapped time in the view the verdict uses (the seed's stages, or the generic groups)."""
    steps = {k: s.steps.mean_us for k, s in c.sides.items()}
    if not all(steps.values()):
        return []
    if c.view == "groups":
        return ["unmapped (generic groups): " + ", ".join(
            f"{c.label(k)} {c.group_unmapped_us(k) / st:.0%}" for k, st in steps.items())
            + " of the step"]
    return ["unmapped (seed stages): " + ", ".join(
        f"{c.label(k)} {c.sides[k].unmapped_us / st:.0%}" for k, st in steps.items())
        + " of the step"]


def _first_words(c: Comparison) -> str:
    """The first steps apart, where the traces hold one that is not a later window's."""
    out = []
    for k in ("a", "b"):
        st = c.sides[k].steps
        if st.first_us is None or st.first_kind == "window":
            continue
        out.append(f"{c.label(k)} {ms(st.first_us)}" + (
            "" if st.first_kind == "program" else " (its trace's first step)"))
    return ("first step: " + ", ".join(out)) if out else ""


def named_list(c: Comparison) -> list[dict]:
    """What the verdict names, as report.json lists it: each term (or stage) with the ops
    behind it, and the op diff's top row where no term lists it (first when the step did not
    change beyond the noise)."""
    v = c.verdict
    out = []
    for x in (v.named if v else []):
        if x.kind == "op":
            r = c.ops_diff[x.ops[0]]
            out.append({"kind": "op", "op": r.op, "delta_us": round(r.delta_us, 1),
                        "words": op_words(c, r)})
            continue
        item = {"kind": x.kind, "op": x.op, "delta_us": round(x.delta_us, 1),
                "words": term_words(c, x) if x.kind == "term" else
                f"{x.op} {signed(x.delta_us)}"}
        ops = [c.ops_diff[o.row].op for o in x.term.behind() if isinstance(o, TermOp)] \
            if x.term else []
        if ops:
            item["ops"] = ops
        out.append(item)
    if v is not None and v.top_op is not None and not any(x.kind == "op" for x in v.named):
        r = c.ops_diff[v.top_op]
        out.append({"kind": "op", "op": r.op, "delta_us": round(r.delta_us, 1),
                    "words": op_words(c, r)})
    return out


def status_words(status: str) -> str:
    """An op row's status as printed: "same" says what it means (the row may still be among the
    largest differences in absolute time)."""
    return f"same (within {OP_SAME_SHARE:.0%})" if status == "same" else status


def no_ops_words(c: Comparison) -> str:
    """Why the op table is empty, or "" when it is not."""
    if c.ops_diff:
        return ""
    bare: list[str] = next((x.facts.get("no_ops", []) for x in (c.parity.caveats if c.parity else [])
                 if x.kind == "program"), [])
    who = (" and ".join(c.label(k) for k in bare) + (" holds" if len(bare) == 1 else " hold")
           if bare else "the traces hold")
    return (f"No op to compare: {who} no TensorFlow op (no event names an op type or a graph "
            f"node); the step difference's terms are by the events' names.")


def step_delta_words(d: StepDelta, c: Comparison) -> list[str]:
    """One line per term for a text table."""
    return [f"{TERM_WORDS.get(t.key, t.key)}: {ms(t.a_us)} -> {ms(t.b_us)} ({signed(t.delta_us)})"
            for t in d.terms]


# --------------------------------------------------------------------------------------------
# per side

def side_text(c: Comparison, side: str) -> str:
    """A few sentences on one side."""
    r = c.sides[side]
    step = r.steps.mean_us
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


def _step_words(name: str, r: SideResult) -> str:
    st = r.steps
    if st.count == 1:
        words = f"{name}: {ms(st.mean_us)} (the trace's one step"
    else:
        words = f"{name}: {ms(st.mean_us)} per steady step (mean of {st.steady_count}"
    if st.steady_count > 1:
        words += f"; median {ms(st.median_us)}"
    if st.first_kind == "window":
        span = f"steps {st.first_num}–{st.last_num}" if st.count > 1 else f"step {st.first_num}"
        return words + f"; the trace holds {span} of a longer run, none of them its first)"
    words += ")"
    if st.first_us is not None:
        words += (f", first step {ms(st.first_us)}" if st.first_kind == "program" else
                  f", the trace's first step {ms(st.first_us)} (the trace does not say whether "
                  f"it is the program's first)")
    return words


def _where_time_goes(c: Comparison, side: str, step: float) -> str:
    if c.groups and c.view == "groups":
        return "time goes to " + _group_words(c, side, step)
    rows = sorted(c.stages, key=lambda row: -row.cells[side].us)
    work = [row for row in rows if row.stage != "idle" and row.cells[side].us > 0][:3]
    return "time goes to " + ", ".join(
        f"{row.stage} {ms(row.cells[side].us)} ({row.cells[side].us / step:.0%})" for row in work)


def _group_words(c: Comparison, side: str, step: float, skip_pipeline: bool = False) -> str:
    """The largest rows of the generic view (time nothing traced runs aside)."""
    skip = {"idle", "untraced", "unmapped"} | ({"input", "preprocessing", "runtime", "xla_run",
                                                "xla_compile"} if skip_pipeline else set())
    rows = sorted((r for r in c.groups if r.group not in skip and r.cells[side].us > 0),
                  key=lambda r: -r.cells[side].us)[:3]
    return ", ".join(f"{r.key} {ms(r.cells[side].us)} ({r.cells[side].us / step:.0%})"
                     for r in rows) or "nothing placed"


def _input_words(r: SideResult, step: float) -> str:
    share = r.steps.input_us / step
    return f"{input_class(share)} (waiting for or reading input {share:.0%} of the step)"


def _xla_words(r: SideResult) -> list[str]:
    x, st = r.xla, r.steps
    if not x.compiles:
        return ["no XLA"] if x.launch_style == "none" else []
    first_compile = st.first_compile_us or 0.0
    share = first_compile / st.first_us if st.first_us else 0.0
    # compile_us sums every compile event; compiles on several threads overlap, so it can
    # exceed the first step's wall time, during which some thread compiled for the share
    return [f"XLA compiled {x.compiles} time(s), {ms(x.compile_us)} of compile work summed "
            f"over threads"
            + (f" (some thread compiled during {ms(first_compile)} of the first step, "
               f"{share:.0%})" if share else "")
            + (f"; recompiled: {listed(x.recompiled)}" if x.recompiled else
               ", no recompilation")]
