"""What one trace shows of the work its step did, for the parity checks
(:mod:`compare.analysis.parity`): signs of one-time work in a single traced step (the same
evidence explain's first-run finding reads, :mod:`compare.analysis.evidence`), the numeric
precision its ops ran in, and the tensor shapes the trace recorded.

A first run needs evidence of one-time work in the step itself: XLA compiling, cuDNN/cuBLAS
autotuning (one execution launching dozens of kernels), one call of an op type far longer than
its other calls, a long ``_SOURCE`` (a device set up), the input pipeline created in it with
real time. A long input wait is none of these: in a steady step it is the step being
input-bound.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any

import numpy as np

from compare.analysis import evidence, rows
from compare.analysis.evidence import OneTime
from compare.analysis.facts import step_compile_us
from compare.analysis.opkeys import normalise
from compare.analysis.side import Side
from compare.analysis.steps import choose
from compare.vocabulary import ops as tfops
from compare.vocabulary.thresholds import CHANGE_NOTABLE, COMPILE_MIN_US


@dataclasses.dataclass
class OneTimeSigns:
    """Signs of one-time work in a trace's first step (times in µs): ``signs`` names them in
    the order they are told (compile, autotune, outlier, source, iterators), ``one_time`` and
    the two times hold their numbers."""

    step: int                 # the step's number
    signs: list[str]          # each sign by its key
    share: float              # wall share of the step the strongest sign accounts for
    one_time: OneTime = dataclasses.field(default_factory=OneTime)
    compile_us: float = 0.0   # XLA compiles in the step
    made_us: float = 0.0      # ops creating its input pipeline


def one_time_signs(s: Side) -> OneTimeSigns:
    """What the trace's first step shows of one-time work (see the module docstring)."""
    tr = s.trace
    first = min(tr.steps, key=lambda st: st.ts)
    choice = choose(tr, first.num)
    idx = evidence.step_events(tr, choice)
    o = evidence.one_time(tr, choice, idx, rows.process_roles(tr))
    wall = choice.step.dur or 1.0
    compile_us = step_compile_us(tr, s.xla, choice)
    made = _iterator_creation_us(s, choice.step.num)
    present = {"compile": compile_us >= COMPILE_MIN_US, "autotune": bool(o.autotune_nodes),
               "outlier": bool(o.outlier_node), "source": bool(o.source_us),
               "iterators": made >= CHANGE_NOTABLE * wall}
    signs = [k for k, yes in present.items() if yes]
    share = max(evidence.one_time_share(o, compile_us / wall), made / wall if signs else 0.0)
    return OneTimeSigns(first.num, signs, min(1.0, share), o, compile_us, made)


def _iterator_creation_us(s: "Side", num: int) -> float:
    """Time per step in ops that create an input pipeline or iterator."""
    ev, names = s.trace.events, s.trace.strings.names
    ids = [i for i, n in enumerate(names) if n in tfops.ITERATOR_CREATION_OPS]
    if not ids:
        return 0.0
    hit = (ev.step == num) & np.isin(ev.op_type, ids)
    return float(ev.dur[hit].sum())


# --------------------------------------------------------------------------------------------
# precision

@dataclasses.dataclass
class Precision:
    """What a trace shows of the precision its ops ran in: distinct ``Cast`` nodes, the
    nodes of dynamic loss scaling (``IsFinite``), node names that name mixed precision, and
    the dtypes of the tensors the trace recorded (with their counts)."""

    casts: int
    loss_scale: int
    named: list[str]
    dtypes: dict[str, int]

    @property
    def half(self) -> int:
        """Recorded tensors in a half-precision type."""
        return sum(n for d, n in self.dtypes.items() if d in tfops.HALF_DTYPES)


def precision(s: "Side") -> Precision:
    ops = s.ops.ops if s.ops else {}
    nodes = {(name, st.type) for (name, _), st in ops.items()}
    named = sorted({n for n, _ in nodes if tfops.AUTO_MIXED_PRECISION.search(n)})[:4]
    dtypes: Counter[str] = Counter()
    for tensors in s.trace.meta.get("op_shapes", {}).values():
        dtypes.update(d for d, _ in tensors if d)
    return Precision(sum(t in tfops.CAST_OPS for _, t in nodes),
                     sum(t in tfops.LOSS_SCALE_OPS for _, t in nodes), named, dict(dtypes))


# --------------------------------------------------------------------------------------------
# shapes

_DIMS = re.compile(r"-?\d+")


def _dims(shape: str) -> tuple[int, ...]:
    return tuple(int(x) for x in _DIMS.findall(shape))


@dataclasses.dataclass
class Shapes:
    """The two sides' recorded output shapes, compared op by op (by normalised node name)."""

    compared: int                                  # ops with a shape recorded on both sides
    differ: dict[tuple[int, int], int]             # (a, b) leading dim -> ops
    example: tuple[str, str, str] = ("", "", "")   # (op, a's shape, b's shape)

    @property
    def recorded(self) -> bool:
        return self.compared > 0

    def batch(self) -> tuple[int, int] | None:
        """The leading dimension most differing ops agree on, (a, b), or None."""
        if not self.differ:
            return None
        return max(self.differ.items(), key=lambda kv: (kv[1], kv[0]))[0]


def compare_shapes(a: dict[str, list[Any]], b: dict[str, list[Any]]) -> Shapes:
    """Op by op, the output shapes of the same rank whose dimensions after the first agree:
    how many ops have one recorded on both sides, and which leading dimensions differ."""
    na = {normalise(k): v for k, v in a.items()}
    nb = {normalise(k): v for k, v in b.items()}
    compared, example = 0, ("", "", "")
    differ: Counter[tuple[int, int]] = Counter()
    for op in sorted(set(na) & set(nb)):
        pairs = [(_dims(x), _dims(y)) for _, x in na[op] for _, y in nb[op]]
        pairs = [(x, y) for x, y in pairs if x and len(x) == len(y) and x[1:] == y[1:]]
        if not pairs:
            continue
        compared += 1
        x, y = pairs[0]
        if x[0] != y[0]:
            differ[(x[0], y[0])] += 1
            if not example[0] or len(x) > len(_dims(example[1])):
                example = (op, _text(x), _text(y))
    return Shapes(compared, dict(differ), example)


def _text(dims: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"
