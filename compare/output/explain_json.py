"""An :class:`compare.analysis.explanation.Explanation` as data with stable keys
(``compare.explain --json``): the same facts as the text."""
from __future__ import annotations

import dataclasses

from compare.analysis.explanation import Explanation
from compare.analysis.xla import XlaSummary
from compare.output import legend_words, sequence_words, step_words, verdict_words
from compare.output.explain_text import QUESTIONS
from compare.vocabulary.ops import XLA_OP_WORDS

SCHEMA = "compare.explain/1"
#: At most this many clusters/functions in the JSON (the largest by compile + run time).
MAX_UNITS = 1000


def to_json(e: Explanation) -> dict:
    return {
        "schema": SCHEMA,
        "trace": {"source": e.trace_source, "format": e.trace_format,
                  "format_words": legend_words.format_words(e.legend)},
        "warnings": e.warnings,
        "questions": QUESTIONS,
        "step": {**e.choice.as_dict(), "reason": step_words.reason(e.choice),
                 "window": step_words.window(e.choice)},
        "pids": legend_words.as_dict(e.legend),
        "xla": {**_xla_dict(e.xla), "step": dataclasses.asdict(e.xla_step),
                "ops_explained": {op: XLA_OP_WORDS[op] for op in XLA_OP_WORDS
                                  if op in e.ops_present or op == "_XlaLaunch"},
                "ops_present": e.ops_present},
        "sequence": {**e.sequence.as_dict(), "basis": sequence_words.basis(e.sequence)},
        "verdict": verdict_words.as_dict(e.verdict),
    }


def _xla_dict(x: XlaSummary) -> dict:
    """The XLA summary as data; a trace with more than :data:`MAX_UNITS` clusters keeps the
    largest ones (``units_total`` says how many there were)."""
    total = len(x.units)
    if total > MAX_UNITS:
        keep = sorted(x.units.values(), key=lambda u: -(u.compile_us + u.run_us))[:MAX_UNITS]
        x = dataclasses.replace(x, units={u.name: u for u in keep})
    return {**x.as_dict(), "units_total": total}
