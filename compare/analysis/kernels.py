"""Which TF op each GPU kernel of an xprof trace ran for, and which host events launched them.

xprof writes a device's kernels on its stream lines (named by the CUDA kernel) and, on the
derived "TensorFlow Ops" line of the same device, one event per TF op spanning its kernels
(``long_name`` = ``node:Type``). A kernel inside such a span ran for that op. The host thread
that launched a kernel records the launch under the kernel's name. Timelines need none of
this: their stream rows already carry each kernel's op.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from compare.analysis.rows import lane_roles
from compare.model.events import Events, Trace
from compare.vocabulary.ops import COPY_NAME

#: The derived device line holding one event per TF op.
TF_OPS_LINE = "TensorFlow Ops"


@dataclasses.dataclass
class KernelOps:
    """``op_of``: kernel event -> the "TensorFlow Ops" event it ran inside; ``launches``: host
    events named as a kernel of the trace (the host side of launching it)."""

    op_of: dict[int, int]
    launches: np.ndarray


def kernel_ops(trace: Trace) -> KernelOps:
    ev = trace.events
    if trace.format == "timeline" or not len(ev):
        return KernelOps({}, np.zeros(len(ev), bool))
    roles = lane_roles(trace)
    stream = roles == "stream"
    ops_line = np.zeros(len(ev), bool)
    for (pid, tid), name in trace.lanes.items():
        if name == TF_OPS_LINE:
            ops_line |= (roles == "derived") & (ev.pid == pid) & (ev.tid == tid)
    op_of: dict[int, int] = {}
    for pid in np.unique(ev.pid[stream]).tolist():
        op_of.update(_inside(ev, np.flatnonzero(stream & (ev.pid == pid) & (ev.tf_name == 0)),
                             np.flatnonzero(ops_line & (ev.pid == pid))))
    # a host event named as a kernel is its launch; one named as a copy is the host's side of
    # the transfer (a pageable copy staged by the host thread: its own time, a copy)
    names = trace.strings.names
    kernel_names = [k for k in np.unique(ev.name[stream]).tolist() if not COPY_NAME.match(names[k])]
    launches = np.isin(ev.name, kernel_names) & ~stream & ~ops_line & (ev.op_type == 0)
    return KernelOps(op_of, launches)


def _inside(ev: Events, kernels: np.ndarray, spans: np.ndarray) -> dict[int, int]:
    """kernel -> the span (latest starting at or before it) whose end covers the kernel's
    start."""
    if not len(kernels) or not len(spans):
        return {}
    spans = spans[np.argsort(ev.ts[spans], kind="stable")]
    starts = ev.ts[spans]
    ends = starts + ev.dur[spans]
    k_ts = ev.ts[kernels]
    pos = np.searchsorted(starts, k_ts, side="right") - 1
    ok = (pos >= 0) & (ends[np.maximum(pos, 0)] >= k_ts)
    return dict(zip(kernels[ok].tolist(), spans[pos[ok]].tolist()))
