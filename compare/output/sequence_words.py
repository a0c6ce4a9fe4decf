"""What a step's dependencies were built from (:class:`compare.analysis.sequence.Sequence`), in
words: explain's sequence answer and ``compare.explain --json``'s ``sequence.basis``."""
from __future__ import annotations

from compare.analysis.sequence import Sequence

#: Edge kinds that come from a GPU's rows rather than the executor's.
GPU_EDGES = ("launch", "stream order", "gpu data", "copy")


def basis(sq: Sequence) -> str:
    """What the dependencies were built from, in words (no full stop)."""
    if sq.timeline:
        out = ("op inputs recorded in the trace (args input0..N)" if sq.inputs_recorded else
               "the trace's rows only: it records no op inputs")
        if any(k in sq.edge_counts for k in GPU_EDGES):
            out += ", GPU launches, stream order and copies"
        if sq.flows:
            out += f" and {sq.flows} flow arrows that added an edge"
        return out
    return ("per-thread order (a thread runs one op at a time)"
            + (f" and {sq.flows} flow arrows" if sq.flows else "")
            + ": this trace does not record which op fed which, so the order of ops on "
              "different threads is by time and the path below follows threads, a lower "
              "bound of the true dependencies")
