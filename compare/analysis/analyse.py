"""Everything a trace's analyses share, computed once: the stage map, the per-step attribution
and the XLA summary. Explain, compare and the report all read one :class:`TraceAnalysis`."""
from __future__ import annotations

import dataclasses

from compare.analysis.attribution import Attribution, attribute
from compare.analysis.mapping import StageMap, map_stages
from compare.analysis.xla import XlaSummary, summarize
from compare.model.events import Trace


@dataclasses.dataclass
class TraceAnalysis:
    trace: Trace
    smap: StageMap
    attribution: Attribution
    xla: XlaSummary


def analyse(trace: Trace, reference: StageMap | None = None) -> TraceAnalysis:
    """Map, attribute and summarise ``trace``; ``reference``: the stage map of a profile of the
    same run, which splits a timeline's cluster runs (see :func:`map_stages`)."""
    xla = summarize(trace)
    smap = map_stages(trace, reference, xla.lookup_events)
    return TraceAnalysis(trace, smap, attribute(trace, smap), xla)
