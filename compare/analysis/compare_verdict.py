"""The comparison's verdict, as facts: which side is faster per step and by how much (the step
difference's basis, :mod:`compare.analysis.step_delta`), whether that is beyond the
step-to-step spread, the differences worth naming (the largest terms of the step difference and
the ops behind them; for two runs of the seed's pipeline, its stages), and per side the facts
of its few sentences. :mod:`compare.output.compare_words` writes them in words; nothing here
is a sentence."""
from __future__ import annotations

from compare.analysis.opdiff import OpDiff
from compare.analysis.result import Comparison, Named, Parity, StageRow, Verdicts
from compare.analysis.step_delta import FUSION, StepDelta
from compare.vocabulary.thresholds import CHANGE_NOTABLE

#: Differences named in the verdict at most.
NAMED = 3
#: Terms of the step difference that are no op's time.
GAP_TERMS = ("idle", "untraced", "runtime")


def verdicts(view: str, stages: list[StageRow], d: StepDelta, par: Parity,
             ops_diff: list[OpDiff]) -> Verdicts:
    """The comparison's verdict from its rows (:attr:`Comparison.view`, the stage rows, the
    step difference, the parity checks and the op diff)."""
    a, b = d.a_us, d.b_us
    noise = par.noise
    test = d.test
    if test.tested:
        significant = bool(test.beyond) and abs(a - b) > 0
    else:
        significant = abs(a - b) > noise * max(a, b)
    faster = "" if not (significant and a and b) else ("b" if b < a else "a")
    out = Verdicts(a, b, significant, faster, test, noise)
    out.named = named(view, stages, d, max(a, b))
    listed = {i for x in out.named for i in x.ops}
    terms = not out.named or out.named[0].kind == "term"
    if ops_diff and ops_diff[0].delta_us and terms:
        if not significant:   # no step change to split: the op that changed most leads
            r = ops_diff[0]
            out.top_op = 0
            out.named.insert(0, Named("op", r.op, r.delta_us, r.a_us, r.b_us, r.test, [0]))
            out.named = out.named[:NAMED]
        elif 0 not in listed:
            out.top_op = 0
    return out


def named(view: str, stages: list[StageRow], d: StepDelta, slower: float) -> list[Named]:
    """The differences worth naming, largest first: where the seed's stages hold both steps
    (:attr:`Comparison.view`) its stages; otherwise the largest terms of the step difference
    (each at least CHANGE_NOTABLE of the slower step, else the largest one) with the ops
    behind them."""
    if view == "stages":
        rows = [r for r in stages if r.stage != "idle"]
        out = [Named("stage", r.stage, r.cells["b"].us - r.cells["a"].us, r.cells["a"].us,
                     r.cells["b"].us) for r in rows]
        return sorted((x for x in out if x.delta_us), key=lambda x: -abs(x.delta_us))[:NAMED]
    terms = d.largest(len(d.terms))
    big = [t for t in terms if abs(t.delta_us) >= CHANGE_NOTABLE * slower] or terms[:1]
    return [Named("term", t.key, t.delta_us, t.a_us, t.b_us, t.test, [o.row for o in t.ops],
                  t) for t in big[:NAMED] if t.delta_us]


def first_op(c: Comparison, v: Verdicts) -> str:
    """The op the verdict names first: the first op behind its named terms (a fusion term
    goes by its clusters), else the op diff's top row it names beside them; the first named
    thing when no op is named at all."""
    for x in v.named:
        if x.kind != "term":
            return x.op
        if x.op == FUSION and x.term and x.term.clusters:
            return "+".join(x.term.clusters)
        lead = x.term.behind(1) if x.term else []
        if lead and hasattr(lead[0], "row"):
            return c.ops_diff[lead[0].row].op
    if v.top_op is not None:
        return c.ops_diff[v.top_op].op
    return v.named[0].op if v.named else ""
