"""The one place the known-answer tests read compare.run's report and explain's result.

``report.json`` (schema 4) keys what belongs to one side by its label (``order``: [A, B]);
its table rows carry ``a_*`` and ``b_*`` fields; ``step_delta`` splits the step difference
into terms. Everything the tests need goes through :class:`Report` (and :class:`Explained`
for explain), so a schema change is an edit here only.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from compare.api import compare_traces, explain_trace
from compare.output import verdict_words

LABELS = ("A", "B")


@dataclasses.dataclass(frozen=True)
class OpRow:
    """One ``ops_diff`` row, A against B, per steady step (µs)."""

    op: str
    type: str
    a_us: float
    b_us: float
    delta_us: float
    status: str
    match: str
    members: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Named:
    """One difference the verdict names."""

    op: str
    delta_us: float
    words: str


@dataclasses.dataclass(frozen=True)
class GroupRow:
    group: str
    scope: str
    a_us: float
    b_us: float


@dataclasses.dataclass(frozen=True)
class Term:
    key: str
    group: str
    a_us: float
    b_us: float
    delta_us: float
    ops: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class StepDelta:
    basis: str
    a_us: float
    b_us: float
    delta_us: float
    terms: tuple[Term, ...]


class Report:
    """``report.json`` of one comparison, side A against side B."""

    def __init__(self, doc: dict, folder: Path | None = None) -> None:
        self.doc, self.folder = doc, folder
        self.keys = tuple(doc["order"])        # the sides' labels, A then B

    def ops(self) -> list[OpRow]:
        return [OpRow(r["op"], r["type"], r["a_us"], r["b_us"], r["delta_us"],
                      r["status"], r["match"], tuple(r.get("members", ())))
                for r in self.doc["ops_diff"]]

    def step_us(self) -> tuple[float, float]:
        """Each side's step time as the comparison compares them (its step basis)."""
        sd = self.step_delta()
        if sd is not None:
            return sd.a_us, sd.b_us
        steps = self.doc["comparability"]["step_us"]
        return steps[self.keys[0]], steps[self.keys[1]]

    def step_delta(self) -> StepDelta | None:
        sd = self.doc.get("step_delta")
        if sd is None:
            return None
        terms = tuple(Term(t["key"], t.get("group", ""), t["a_us"], t["b_us"], t["delta_us"],
                           tuple(o["op"] for o in t.get("ops", ()))) for t in sd["terms"])
        return StepDelta(sd.get("basis", ""), sd["a_us"], sd["b_us"], sd["delta_us"], terms)

    def group_rows(self) -> list[GroupRow]:
        """The generic view's rows (``groups.rows``): each group's wall time per steady
        step on each side."""
        return [GroupRow(r["group"], r.get("scope", ""), r["a_us"], r["b_us"])
                for r in self.doc["groups"]["rows"]]

    def verdict(self) -> str:
        return self.doc["verdict"]["comparison"]

    def named(self) -> list[Named]:
        """What the verdict names, in order: each term, then the ops behind it."""
        out = []
        for x in self.doc["verdict"]["named"]:
            out.append(Named(x["op"], x["delta_us"], x["words"]))
            out += [Named(op, x["delta_us"], x["words"]) for op in x.get("ops", ())]
        return out

    def brief(self) -> str:
        """What a failing assertion shows: the verdict and the top of the op table."""
        rows = "\n".join(f"  {r.op} ({r.type}) {r.a_us} -> {r.b_us} ({r.delta_us:+}) "
                         f"{r.status}/{r.match}" for r in self.ops()[:6])
        return f"verdict: {self.verdict()}\nops_diff:\n{rows}"


def compare(a: Path, b: Path, out: Path) -> Report:
    """``compare.api.compare_traces`` on A and B (labels "A" and "B"), its report read."""
    compare_traces(a, b, out, labels=dict(zip(("a", "b"), LABELS)))
    return Report(json.loads((Path(out) / "report.json").read_text()), Path(out))


@dataclasses.dataclass(frozen=True)
class Explained:
    """What explain leads with."""

    bottleneck: str
    headline: str
    kinds: tuple[str, ...]            # every finding's kind, high ones first


def explain(path: Path) -> Explained:
    e = explain_trace(path)
    v = e.verdict
    order = sorted(v.findings, key=lambda f: f.level != "high")
    return Explained(v.bottleneck, verdict_words.headline(v), tuple(f.kind for f in order))
