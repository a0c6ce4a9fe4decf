"""The comparison's typed result: what :func:`compare.analysis.comparison.compare` returns and
:mod:`compare.output.report_json` serialises. Dataclasses only, so that every module that reads
a result (the parity checks, the verdict, the output) imports it from here, downward."""
from __future__ import annotations

import dataclasses
from typing import Any

from compare.analysis.noise import Test
from compare.analysis.opdiff import OpDiff, TypeDiff
from compare.analysis.step_delta import StepDelta, Term
from compare.vocabulary.labels import ESTIMATES
from compare.vocabulary.thresholds import UNMAPPED_NOTABLE

#: The two sides: ``a`` (the baseline, legacy in our runs) and ``b``.
SIDES = ("a", "b")


@dataclasses.dataclass
class OpTime:
    op: str
    us: float


@dataclasses.dataclass
class StageCell:
    """One stage on one side: means per steady step unless named otherwise."""

    us: float
    median_us: float
    cpu_us: float
    first_us: float | None          # the first step; None when the trace has a single step
    estimated_us: float             # the part of ``us`` that rests on an estimate
    ops: list[str]                  # every op with time in the stage, largest first
    op_us: list[OpTime]             # the largest ones with their mean time


@dataclasses.dataclass
class StageRow:
    stage: str
    kind: str                       # "pipeline" or "overhead"
    cells: dict[str, StageCell]     # side -> its cell
    ratio: float | None             # a us / b us; None when b's is 0


@dataclasses.dataclass
class Representative:
    """The steady step closest to the median (the one timelines.png shows), by stage."""

    step: int
    dur_us: float
    stages_us: dict[str, float]
    groups_us: dict[str, float] = dataclasses.field(default_factory=dict)  # generic view's rows


@dataclasses.dataclass
class StepStats:
    count: int
    steady_count: int
    mean_us: float
    representative: Representative | None
    blocked_us: float
    median_us: float
    first_us: float | None
    min_us: float
    max_us: float
    split_us: dict[str, float]                # the mean steady step by SPLIT_KEYS (adds up)
    first_split_us: dict[str, float] | None
    #: the step time compared: "window" (the mean steady step) or "traced" (its mean traced
    #: span, without the untraced edges of a timeline's session runs), and that time
    basis: str = "window"
    basis_us: float = 0.0
    untraced_us: float = 0.0                  # mean untraced time at the windows' edges
    #: mean time per steady step the step waited for or read its input (on any of its
    #: threads; other threads may work meanwhile): what input-bound is judged by
    input_us: float = 0.0
    #: how long some thread compiled (XLA) during the first step (None with one step)
    first_compile_us: float | None = None
    #: what the trace's first step is: "program" (numbered 0 or 1 by the program: its first
    #: step), "window" (numbered later: the trace is a window of a longer run), "unknown"
    first_kind: str = "unknown"
    first_num: int | None = None
    last_num: int | None = None
    #: Keras train_function calls outside every step the trace marks (at its edges, where the
    #: profiler started or stopped inside a step): left out of the step count
    unmarked_calls: int = 0


@dataclasses.dataclass
class XlaUnitRow:
    kind: str
    ops: list[str]
    stages: dict[str, int]
    compiles: int
    compile_us: float
    runs: int
    run_us: float


@dataclasses.dataclass
class XlaTotals:
    compile_us: float
    run_us: float
    compiles: int
    recompiled: list[str]
    launch_style: str
    units: dict[str, XlaUnitRow] | None = None


@dataclasses.dataclass
class CrossCheck:
    """Another trace of the same run (legacy's timeline.json) beside the side's own numbers."""

    trace: str
    format: str
    steps: int
    against: str                    # "steady" or "first"
    step_us: float
    source_step_us: float
    stages_us: dict[str, float]
    source_stages_us: dict[str, float]
    xla: XlaTotals


@dataclasses.dataclass
class Source:
    path: str
    format: str
    note: str
    warnings: list[str]


@dataclasses.dataclass
class Coverage:
    stages_with_time: list[str]
    unmapped_share: float


@dataclasses.dataclass
class SideResult:
    source: Source
    steps: StepStats
    xla: XlaTotals
    unmapped_us: float
    unmapped_ops: list[OpTime]
    estimates_used: list[str]
    coverage: Coverage
    cross_checks: list[CrossCheck]


@dataclasses.dataclass
class GroupCell:
    us: float                       # mean wall time per steady step
    cpu_us: float
    first_us: float | None
    ops: list[str]
    busy_us: float = 0.0            # its ops' own time (waits included), summed


@dataclasses.dataclass
class GroupRow:
    """One row of the generic view: a group (``compute`` rows per top-level scope)."""

    key: str
    group: str
    scope: str
    cells: dict[str, GroupCell]


@dataclasses.dataclass
class Caveat:
    """What makes a pair less than like for like, as data; its sentence is
    :mod:`compare.output.caveat_words`'."""

    kind: str         # identical, first_run, feed_dict, steps, untraced, batch, precision,
    #                   program, data_service, devices, host_masks, single_step
    breaks: bool      # the pair is not like for like because of it
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)  # report.json's numbers
    case: str = ""    # which of the kind's situations (see compare.analysis.parity's checks)
    #: the numbers and names its sentence states, by side key ("a", "b") where per side
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Scale:
    """Matched ops that take about ``factor`` times as long on side b."""

    factor: float
    scaled: int
    matched: int
    share: float          # of the matched ops' time
    device: bool


@dataclasses.dataclass
class PrecisionSign:
    """One sign that a side computes in mixed or half precision and the other does not:
    ``kind`` loss_scale (``n`` IsFinite nodes), named (node ``names``), half (``n`` tensors
    recorded in float16/bfloat16) or casts (``n`` Cast nodes against the other's ``other``)."""

    kind: str
    n: int = 0
    other: int = 0
    names: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class StepBasis:
    """The step time the verdict compares per side: the mean steady step, or the mean traced
    span of a session run when untraced time sits between runs."""

    us: float
    spread: float     # interquartile range / mean of the steady steps; 0 with one step
    steady: int
    untraced_us: float


@dataclasses.dataclass
class Parity:
    caveats: list[Caveat]
    steps: dict[str, StepBasis]
    noise: float      # a step or op change below this share of the slower step is not named

    @property
    def like_for_like(self) -> bool:
        return not any(c.breaks for c in self.caveats)


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


@dataclasses.dataclass
class Comparison:
    created: str
    stages: list[StageRow]
    sides: dict[str, SideResult]
    verdict: Verdicts
    parity: Parity
    step_delta: StepDelta
    estimates: dict[str, str] = dataclasses.field(default_factory=lambda: dict(ESTIMATES))
    labels: dict[str, str] = dataclasses.field(default_factory=lambda: {k: k for k in SIDES})
    groups: list[GroupRow] = dataclasses.field(default_factory=list)
    ops_diff: list[OpDiff] = dataclasses.field(default_factory=list)
    types_diff: list[TypeDiff] = dataclasses.field(default_factory=list)

    def label(self, side: str) -> str:
        return self.labels.get(side, side)

    def group_unmapped_us(self, side: str) -> float:
        """Time per steady step no rule of either view places."""
        return sum(r.cells[side].us for r in self.groups if r.group == "unmapped")

    def has_pipeline(self) -> bool:
        return has_pipeline(self.stages)

    def stages_cover(self) -> bool:
        return stages_cover(self.stages, self.sides)

    @property
    def view(self) -> str:
        """The view the verdict, the plots and the merged trace show: the seed's stages when
        they hold both traces' steps (our pipelines, an image pipeline alone), else the
        generic groups (a model fed by an image pipeline is mostly outside the stages; the
        ``stages`` rows and the stage view's unmapped time stay in report.json all the same)."""
        return view_of(self.stages, self.sides)

    def row(self, stage: str) -> StageRow:
        return next(r for r in self.stages if r.stage == stage)


def has_pipeline(stages: list[StageRow]) -> bool:
    """Either side spends time in the seed pipeline's stages."""
    return any(r.kind == "pipeline" and cell.us > 0 for r in stages for cell in r.cells.values())


def stages_cover(stages: list[StageRow], sides: dict[str, SideResult]) -> bool:
    """The seed pipeline's stages hold (nearly) all of both sides' steps: every side has stage
    time, and the time outside the stages is under UNMAPPED_NOTABLE of its step."""
    return has_pipeline(stages) and all(
        s.coverage.unmapped_share < UNMAPPED_NOTABLE for s in sides.values())


def view_of(stages: list[StageRow], sides: dict[str, SideResult]) -> str:
    """:attr:`Comparison.view` of these rows: "stages" or "groups"."""
    return "stages" if stages_cover(stages, sides) else "groups"
