"""The report's fixed explanations: how every number is booked (report.json's
``attribution``, report.md's "How the numbers are made") and why the report shows the view it
shows (report.json's ``view.why``)."""
from __future__ import annotations

from compare.analysis.result import Comparison

#: How every number of the report is booked, for people.
ATTRIBUTION_NOTE = (
    "Every number is booked once, inside step windows (the steps the trace marks): an event "
    "counts by its overlap with the window, its own time only, each kernel and copy once. "
    "wall: each instant of a step is shared equally among the threads working at that instant; "
    "instants where threads only wait go to what they wait in, instants with nothing traced "
    "to idle (between the ops) or untraced (at the window's edges); per step it adds up to the "
    "step time. cpu: busy thread time summed over threads. Op time (ops_diff): an op's own "
    "time in the window, waits included, parallel executions added. Tables are means over "
    "steady steps (every step but the first), so they add up; the first step is reported "
    "apart.")


def view_reason(c: Comparison) -> str:
    """Why :attr:`Comparison.view` is the one shown, in a sentence."""
    if c.view == "stages":
        return ("the traces show the seed's image pipeline (its stages by our name scopes, "
                "tf.image API scopes or image op types) and little else: the verdict and "
                "the plots use the stages; the generic groups are beside them")
    if c.has_pipeline():
        return ("a trace shows image pipeline stages, but most of a step is outside them "
                "(a model, its optimizer): the verdict, the plots and the merged trace use "
                "the generic groups; the stage rows are kept for the pipeline's part")
    return ("neither trace shows the seed's image pipeline (no stage by our name scopes, "
            "tf.image API scopes or image op types): the verdict, the plots and the merged "
            "trace use the generic groups; the seed stages' rows (stages, unmapped_us, "
            "coverage) leave most of such a program unmapped and are kept for reference")
