"""What a trace's rows are, from their names: process kinds and roles (timeline.py, TF2 GPU and
xprof conventions) and the roles of threads (TensorFlow names its threads for their work)."""
from __future__ import annotations

import re

from compare.vocabulary.ops import COPY_NAME

GPU_DEVICE = re.compile(r"(/gpu:\d+|/device:GPU:\d+|/device:XLA_GPU:\d+)", re.I)
STREAM = re.compile(r"/stream:(\w+)", re.I)
#: xprof lines on a device plane derived from the kernels (they repeat the kernels' time).
DERIVED_LINES = frozenset({
    "Steps", "XLA Modules", "XLA Ops", "XLA TraceMe", "TensorFlow Ops",
    "TensorFlow Name Scope", "Framework Ops", "Framework Name Scope", "Source code",
    "Launch Stats", "Host Threads"})
#: The GPU tracer names copies MEMCPYHtoD, MEMCPYDtoH, MEMCPYDtoD... (timelines); xprof
#: MemcpyH2D, MemcpyD2H, MemcpyD2D, MemcpyP2P, and memsets Memset.
MEMCPY_PREFIX = "MEMCPY"
def is_copy(name: str) -> bool:
    """A GPU copy or memset (not a kernel), by the event's name (``ops.COPY_NAME``)."""
    return bool(COPY_NAME.match(name))
#: The threads tf.data's IteratorGetNext ops run on (TF2; also ``..._as_optional`` and the
#: multi-device iterator's): the consumer's side of the pipeline, where the step takes its next
#: element and waits while none is ready.
TFDATA_GET_NEXT_THREADS = ("tf_data_iterator_get_next", "tf_data_multi_device_iterator_get_next")
#: xprof's host plane (``/host:CPU``): real threads.
HOST_PLANE_PREFIX = "/host:"
#: Process kinds whose rows record no work (memory counters, tensor lifetimes).
NOT_WORK_KINDS = frozenset({"allocator", "tensors"})


def is_stream_all(process_name: str) -> bool:
    """The GPU tracer's ``stream:all`` row, which repeats every per-stream kernel."""
    m = STREAM.search(process_name)
    return m is not None and m.group(1).lower() == "all"


def process_kind(name: str) -> str:
    """What a process row is, from its name: allocator, tensors, memcpy, stream, host, device,
    compute, merged or other (``compare.model.events.PROCESS_KINDS``)."""
    n = name.strip()
    low = n.lower()
    if n == "Allocators":
        return "allocator"
    if n.endswith(" Tensors"):
        return "tensors"
    if "/memcpy" in low:
        return "memcpy"
    if "/stream:" in low:
        return "stream"
    if n.startswith("/host:"):
        return "host"
    if n.startswith("/device:"):
        return "device"
    if n.endswith(" Compute"):
        return "compute"
    if n.startswith("merged:"):
        return "merged"
    return "other"


def device_of(process_name: str) -> str:
    """``/job:.../gpu:0`` from ``/job:.../gpu:0 Compute``; the stream/memcpy suffix is kept."""
    n = process_name.strip()
    for suffix in (" Compute", " Tensors"):
        if n.endswith(suffix):
            return n[: -len(suffix)]
    return n


def gpu_of(process_name: str) -> str | None:
    """``gpu:0`` (lower case, short) for a process that belongs to a GPU, else None."""
    m = GPU_DEVICE.search(process_name)
    if not m:
        return None
    number = re.search(r"\d+", m.group(1))
    return f"gpu:{number.group(0)}" if number else None


def process_role(kind: str, name: str) -> str:
    """One of: allocator, tensors, cpu_ops, gpu_launch, gpu_stream_all, gpu_stream,
    gpu_memcpy, host, gpu_device, device, merged, other."""
    if kind in ("allocator", "tensors"):
        return kind
    if kind == "stream":
        m = STREAM.search(name)
        return "gpu_stream_all" if m and m.group(1).lower() == "all" else "gpu_stream"
    if kind == "memcpy":
        return "gpu_memcpy"
    if kind == "compute":
        return "gpu_launch" if gpu_of(name) else "cpu_ops"
    if kind == "host":
        return "host"
    if kind == "device":
        return "gpu_device" if gpu_of(name) else "device"
    return kind if kind == "merged" else "other"


def thread_base(name: str) -> str:
    """``tf_Compute`` from xprof's ``tf_Compute/8393476760441368995``."""
    return name.split("/", 1)[0] if name else name


def thread_role(process_role_: str, name: str) -> str:
    """The role of a real thread (xprof) from its name: python, tf_data, inter_op, eigen,
    xla_codegen, reader, runtime, other; on device planes: stream, derived, other."""
    base = thread_base(name)
    if process_role_ in ("gpu_device", "device"):
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
    if base.startswith("tf_gpu_private"):
        return "gpu_private"
    if "codegen" in base or "xla-cpu-compile" in base:
        return "xla_codegen"
    if "reader" in base.lower():
        return "reader"
    if base.startswith("tf_"):
        return "runtime"
    return "other"

#: Where an op ran: the host, the GPU, or a timeline's GPU launch row (the host's time to
#: launch an op placed on the GPU). Said as it is ("on the GPU launch row").
WHERE = ("host", "GPU", "GPU launch row")
