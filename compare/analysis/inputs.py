"""The step's own input: events in which a step waits for or reads its input (an iterator's
``GetNext``, a queue dequeue, a TF1 reader's read inside the step), as
:func:`compare.vocabulary.ops.is_input_op` names them. The verdict's input share and the step
split's ``input_wait`` both count the wall time these cover, so explain and compare agree."""
from __future__ import annotations

import numpy as np

from compare.model import intervals
from compare.model.events import Trace
from compare.vocabulary.ops import is_input_op


def input_ops(trace: Trace) -> np.ndarray:
    """Per event: it is an input op (by its op type or event name)."""
    ev = trace.events
    names = trace.strings.names
    key = ev.op_type.astype(np.int64) * (1 << 31) + ev.name.astype(np.int64)
    uniq, inv = np.unique(key, return_inverse=True)
    hit = np.array([is_input_op(names[int(k >> 31)], names[int(k & ((1 << 31) - 1))])
                    for k in uniq], dtype=bool)
    return hit[inv] if len(uniq) else np.zeros(len(ev), bool)


def inside_input(trace: Trace, ops: np.ndarray | None = None) -> np.ndarray:
    """Per event: an input op, or nested inside one on its lane."""
    return wait_roots(trace, ops) >= 0


def wait_roots(trace: Trace, ops: np.ndarray | None = None) -> np.ndarray:
    """Per event: the outermost input op it is (or is nested in) on its lane, -1 for none."""
    ops = input_ops(trace) if ops is None else ops
    return trace.nesting.outermost(ops)


def input_us(trace: Trace, index: np.ndarray, lo: float, hi: float,
             ops: np.ndarray | None = None) -> float:
    """Wall time in ``[lo, hi]`` covered by the input ops among the events ``index``."""
    ops = input_ops(trace) if ops is None else ops
    k = index[ops[index]]
    return intervals.union_us(trace.events.ts[k], trace.events.ts[k] + trace.events.dur[k], lo, hi)
