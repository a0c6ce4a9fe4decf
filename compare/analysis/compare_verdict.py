"""The comparison's verdict, as facts: which side is faster per step and by how much (the step
difference's basis, :mod:`compare.analysis.step_delta`), whether that is beyond the
step-to-step spread, the differences worth naming (the largest terms of the step difference and
the ops behind them; for two runs of the seed's pipeline, its stages), and per side the facts
of its few sentences. :mod:`compare.output.compare_words` writes them in words; nothing here
is a sentence."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from compare.analysis.noise import Test
from compare.analysis.step_delta import FUSION, Term
from compare.vocabulary.thresholds import CHANGE_NOTABLE

if TYPE_CHECKING:  # the types only; comparison imports this module
    from compare.analysis.comparison import Comparison

#: Differences named in the verdict at most.
NAMED = 3
#: Terms of the step difference that are no op's time.
GAP_TERMS = ("idle", "untraced", "runtime")


@dataclasses.dataclass
class Named:
    """One difference the verdict names: a term of the step difference (``kind`` "term", with
    the ``ops_diff`` rows behind it), a stage of the seed's pipeline ("stage"), or the op diff's
    top row ("op", first when the step did not change beyond the noise); ``delta_us`` per
    step, ``op`` the name it goes by (the term, the stage, the op)."""

    kind: str
    op: str
    delta_us: float
    a_us: float
    b_us: float
    test: Test | None = None
    ops: list[int] = dataclasses.field(default_factory=list)   # ops_diff rows, by position
    term: Term | None = None


@dataclasses.dataclass
class Verdicts:
    """``faster``: the side with the shorter step ("" when not significant or not comparable);
    ``a_us``/``b_us`` the step times compared (the step difference's basis), ``noise`` the
    smallest change (share of the slower step) these traces tell apart when the sides hold
    too few steps to test, ``test`` that test when they do not."""

    a_us: float
    b_us: float
    significant: bool
    faster: str
    test: Test
    noise: float
    named: list[Named] = dataclasses.field(default_factory=list)
    #: the op diff's top row (largest op-time change), when no named term lists it
    top_op: int | None = None

    @property
    def comparable(self) -> bool:
        return bool(self.a_us and self.b_us)

    @property
    def ratio(self) -> float:
        lo, hi = sorted((self.a_us, self.b_us))
        return hi / lo if lo else 0.0


def verdicts(c: "Comparison") -> Verdicts:
    d, par = c.step_delta, c.parity
    a, b = (d.a_us, d.b_us) if d else (0.0, 0.0)
    noise = par.noise if par else 0.0
    test = d.test if d else Test(None, 0, 0)
    if test.tested:
        significant = bool(test.beyond) and abs(a - b) > 0
    else:
        significant = abs(a - b) > noise * max(a, b)
    faster = "" if not (significant and a and b) else ("b" if b < a else "a")
    out = Verdicts(a, b, significant, faster, test, noise)
    out.named = named(c, max(a, b))
    listed = {i for x in out.named for i in x.ops}
    terms = not out.named or out.named[0].kind == "term"
    if c.ops_diff and c.ops_diff[0].delta_us and terms:
        if not significant:   # no step change to split: the op that changed most leads
            r = c.ops_diff[0]
            out.top_op = 0
            out.named.insert(0, Named("op", r.op, r.delta_us, r.a_us, r.b_us, r.test, [0]))
            out.named = out.named[:NAMED]
        elif 0 not in listed:
            out.top_op = 0
    return out


def named(c: "Comparison", slower: float) -> list[Named]:
    """The differences worth naming, largest first: where the seed's stages hold both steps
    (:attr:`Comparison.view`) its stages; otherwise the largest terms of the step difference
    (each at least CHANGE_NOTABLE of the slower step, else the largest one) with the ops
    behind them."""
    if c.view == "stages":
        rows = [r for r in c.stages if r.stage != "idle"]
        out = [Named("stage", r.stage, r.cells["b"].us - r.cells["a"].us, r.cells["a"].us,
                     r.cells["b"].us) for r in rows]
        return sorted((x for x in out if x.delta_us), key=lambda x: -abs(x.delta_us))[:NAMED]
    if c.step_delta is None:
        return []
    terms = c.step_delta.largest(len(c.step_delta.terms))
    big = [t for t in terms if abs(t.delta_us) >= CHANGE_NOTABLE * slower] or terms[:1]
    return [Named("term", t.key, t.delta_us, t.a_us, t.b_us, t.test, [o.row for o in t.ops],
                  t) for t in big[:NAMED] if t.delta_us]


def first_op(c: "Comparison", v: Verdicts) -> str:
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
