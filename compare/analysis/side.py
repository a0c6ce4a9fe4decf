"""One side of a comparison: a trace analysed once (:mod:`compare.analysis.analyse`), with its
generic view, account and op table once :func:`compare.analysis.comparison.side` has booked
it, and the cross checks from other traces of the same run."""
from __future__ import annotations

import dataclasses

from compare.analysis.account import Account
from compare.analysis.analyse import TraceAnalysis
from compare.analysis.attribution import Attribution
from compare.analysis.groups import GroupMap
from compare.analysis.mapping import StageMap
from compare.analysis.opdiff import SideOps
from compare.analysis.result import CrossCheck
from compare.analysis.xla import XlaSummary
from compare.model.events import Trace


@dataclasses.dataclass
class Side:
    """One side of the comparison: its name, its analysed trace booked once (its generic view,
    account and op table), and where it came from."""

    name: str
    analysis: TraceAnalysis
    groups: GroupMap                        # the generic view of every event
    account: Account                        # every number's source
    ops: SideOps                            # its ops' time per steady step
    source_note: str = ""
    cross_checks: list[CrossCheck] = dataclasses.field(default_factory=list)
    #: tf.data service workers that fed this side, when its run records them (compare.run)
    service_workers: int | None = None

    @property
    def trace(self) -> Trace:
        return self.analysis.trace

    @property
    def smap(self) -> StageMap:
        return self.analysis.smap

    @property
    def attribution(self) -> Attribution:
        return self.analysis.attribution

    @property
    def xla(self) -> XlaSummary:
        return self.analysis.xla
