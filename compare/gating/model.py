"""The gate's answer as data: what was checked, each item's numbers and verdict, and the
outcome (:class:`GateResult`). Renderers (:mod:`compare.gating.render`) turn it into log lines,
JSON and JUnit; nothing here is worded for people."""
from __future__ import annotations

import dataclasses

from compare.gating.items import LEVELS, Change
from compare.vocabulary.thresholds import GATE_ALPHA, GATE_MAX_SLOWDOWN

#: Outcomes: nothing regressed, something did, too few steps to tell.
PASSED, REGRESSED, TOO_FEW = "passed", "regressed", "too_few_steps"
#: An item's verdict.
REGRESSION, IMPROVEMENT, SAME = "regression", "improvement", "same"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What counts as a regression: a median slowdown above ``max_slowdown`` (a fraction of
    the baseline's median), beyond the spread at ``alpha`` (Holm over the items tested), of
    at least ``min_effect_us`` (None: GATE_MIN_EFFECT_SHARE of the pooled median step)."""

    max_slowdown: float = GATE_MAX_SLOWDOWN
    alpha: float = GATE_ALPHA
    min_effect_us: float | None = None
    levels: tuple[str, ...] = LEVELS


@dataclasses.dataclass
class Checked:
    """One item, its numbers per step (µs) and its verdict."""

    level: str
    name: str
    group: str
    n_a: int
    n_b: int
    a_median_us: float
    b_median_us: float
    a_mean_us: float
    b_mean_us: float
    tested: bool                   # big enough to show the minimum effect (and enough steps)
    p_slower: float | None = None  # one-sided rank test, and Holm-adjusted
    p_faster: float | None = None
    p_slower_adjusted: float | None = None
    p_faster_adjusted: float | None = None
    verdict: str = SAME
    behind: list[Change] = dataclasses.field(default_factory=list)
    #: an op item: its ops_diff row's op (node name), type and status there
    op: str = ""
    op_type: str = ""
    status: str = ""

    @property
    def delta_us(self) -> float:
        """The change of the median, B - A."""
        return self.b_median_us - self.a_median_us

    @property
    def change(self) -> float | None:
        """The change of the median as a share of A's; None when A's median is 0."""
        return self.delta_us / self.a_median_us if self.a_median_us else None

    @property
    def p(self) -> float | None:
        """The adjusted p of the direction the median moved."""
        return self.p_slower_adjusted if self.delta_us >= 0 else self.p_faster_adjusted


@dataclasses.dataclass
class SideInfo:
    label: str
    sources: list[str]
    runs: int
    steps: int                     # pooled steady steps
    baseline_file: bool            # read from a saved baseline
    warnings: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class GateResult:
    outcome: str
    settings: Settings
    min_effect_us: float           # the minimum effect used (given, or from the steps)
    sides: dict[str, SideInfo]     # "a" (baseline) and "b" (new)
    checked: list[Checked]         # every item of the levels asked, tested or not
    #: the most items the rank test can tell apart at alpha with these steps (Holm needs the
    #: smallest p below alpha / items); None: no limit worth saying
    max_items: int | None = None

    @property
    def tested(self) -> list[Checked]:
        return [c for c in self.checked if c.tested]

    @property
    def regressions(self) -> list[Checked]:
        return _largest([c for c in self.checked if c.verdict == REGRESSION])

    @property
    def improvements(self) -> list[Checked]:
        return _largest([c for c in self.checked if c.verdict == IMPROVEMENT])

    def exit_code(self, strict: bool = False) -> int:
        """0: passed; 1: regressed (or too few steps to tell, with ``strict``)."""
        if self.outcome == REGRESSED or (self.outcome == TOO_FEW and strict):
            return 1
        return 0


def _largest(cs: list[Checked]) -> list[Checked]:
    """Largest change of the median first; the step, then groups, then ops among equals."""
    return sorted(cs, key=lambda c: (-abs(c.delta_us), LEVELS.index(c.level), c.name))
