"""What each row of a trace is: the role of every process and lane (thread), from names alone.

Roles drive both the words the legend prints and which events the analyses count as work:
``/gpu:0/stream:all`` repeats every kernel of the per-stream rows, a ``<gpu> Compute`` row of a
timeline is the host launching kernels (not the GPU running them), the Python thread of an
xprof trace sits inside ``session.run`` for the whole step, and so on.
"""
from __future__ import annotations

import re

import numpy as np

from compare.model.events import CATEGORIES, Trace

_GPU_DEVICE = re.compile(r"(/gpu:\d+|/device:GPU:\d+|/device:XLA_GPU:\d+)", re.I)
_STREAM = re.compile(r"/stream:(\w+)", re.I)
#: xprof lines on a device plane derived from the kernels (they repeat the kernels' time).
DERIVED_LINES = ("Steps", "XLA Modules", "XLA Ops", "XLA TraceMe", "TensorFlow Ops",
                 "TensorFlow Name Scope", "Framework Ops", "Framework Name Scope", "Source code",
                 "Launch Stats", "Host Threads")


def device_of(process_name: str) -> str:
    """``/job:.../gpu:0`` from ``/job:.../gpu:0 Compute``; the stream/memcpy suffix is kept."""
    n = process_name.strip()
    for suffix in (" Compute", " Tensors"):
        if n.endswith(suffix):
            return n[: -len(suffix)]
    return n


def gpu_of(process_name: str) -> str | None:
    """``gpu:0`` (lower case, short) for a process that belongs to a GPU, else None."""
    m = _GPU_DEVICE.search(process_name)
    if not m:
        return None
    return "gpu:" + re.search(r"\d+", m.group(1)).group(0)


def process_role(trace: Trace, pid: int) -> str:
    """One of: allocator, tensors, cpu_ops, gpu_launch, gpu_stream_all, gpu_stream,
    gpu_memcpy, host, gpu_device, device, merged, other."""
    p = trace.processes[pid]
    if p.kind == "allocator":
        return "allocator"
    if p.kind == "tensors":
        return "tensors"
    if p.kind == "stream":
        m = _STREAM.search(p.name)
        return "gpu_stream_all" if m and m.group(1).lower() == "all" else "gpu_stream"
    if p.kind == "memcpy":
        return "gpu_memcpy"
    if p.kind == "compute":
        return "gpu_launch" if gpu_of(p.name) else "cpu_ops"
    if p.kind == "host":
        return "host"
    if p.kind == "device":
        return "gpu_device" if gpu_of(p.name) else "device"
    return p.kind if p.kind == "merged" else "other"


def thread_base(name: str) -> str:
    """``tf_Compute`` from xprof's ``tf_Compute/8393476760441368995``."""
    return name.split("/", 1)[0] if name else name


def lane_role(trace: Trace, pid: int, tid: int) -> str:
    """For timeline rows: ``lane``. For threads: python, tf_data, inter_op, eigen,
    xla_codegen, reader, runtime, other. For device lines: stream, derived, other."""
    if trace.format == "timeline":
        return "lane"
    name = trace.lanes.get((pid, tid), "")
    base = thread_base(name)
    role = process_role(trace, pid)
    if role in ("gpu_device", "device"):
        if name.startswith("Stream") or "stream" in name.lower():
            return "stream"
        return "derived" if name in DERIVED_LINES else "other"
    if base == "python" or base.startswith(("python", "MainThread")):
        return "python"
    if base.startswith("tf_data"):
        return "tf_data"
    if base in ("tf_Compute", "tf_inter_op", "tf_inter_op_parallelism") or \
            base.startswith("tf_Compute"):
        return "inter_op"
    if "Eigen" in base or base.startswith("tf_intra_op"):
        return "eigen"
    if "codegen" in base or "xla-cpu-compile" in base:
        return "xla_codegen"
    if "reader" in base.lower():
        return "reader"
    if base.startswith("tf_"):
        return "runtime"
    return "other"


def process_roles(trace: Trace) -> dict[int, str]:
    return {pid: process_role(trace, pid) for pid in trace.processes}


def busy_mask(trace: Trace) -> np.ndarray:
    """Events that count as a row being busy: not step markers, not Python waiting inside
    session.run, not xprof's derived device lines."""
    ev = trace.events
    m = ~np.isin(ev.category, [CATEGORIES.index("step"), CATEGORIES.index("python")])
    if trace.format != "timeline":
        for p, t in trace.lanes:
            if lane_role(trace, p, t) in ("python", "derived"):
                m &= ~((ev.pid == p) & (ev.tid == t))
    return m


def work_mask(trace: Trace, roles: dict[int, str] | None = None) -> np.ndarray:
    """Busy events (see :func:`busy_mask`) with each piece of work counted once: the GPU
    tracer writes every kernel to ``stream:all`` and to its ``stream:N``, and every copy to
    ``memcpy`` and to its ``stream:N``, so when per-stream rows exist only they count."""
    ev = trace.events
    roles = roles or process_roles(trace)
    m = busy_mask(trace)
    gpus_with_streams = {gpu_of(trace.processes[p].name) for p, r in roles.items()
                         if r == "gpu_stream"}
    drop_pids = [p for p, r in roles.items() if r in ("gpu_stream_all", "gpu_memcpy") and
                 gpu_of(trace.processes[p].name) in gpus_with_streams]
    if drop_pids:
        m &= ~np.isin(ev.pid, drop_pids)
    return m


def on_gpu(trace: Trace, roles: dict[int, str] | None = None) -> np.ndarray:
    """Events the GPU itself ran (kernels and copies), as opposed to host-side work."""
    roles = roles or process_roles(trace)
    pids = [p for p, r in roles.items() if r in ("gpu_stream_all", "gpu_stream", "gpu_memcpy",
                                                  "gpu_device")]
    return np.isin(trace.events.pid, pids)
