"""What each process and row of a trace is, in words (:class:`compare.analysis.legend.Legend`):
the answer to the seed's "What is denoted by different pids in the plot?" in explain's text and
``compare.explain --json``'s ``pids``."""
from __future__ import annotations

from typing import Any

from compare.analysis.legend import LaneInfo, Legend, ProcessInfo


def format_words(lg: Legend) -> str:
    """What kind of trace it is."""
    if lg.format == "timeline":
        era = ("full device names (/device:CPU:0), as TF 1.x from 1.3 on and TF2 write them"
               if lg.device_names == "full" else
               "short device names (/cpu:0, /gpu:0), as early TF 1.x wrote them")
        return ("a timeline.py trace (tensorflow.python.client.timeline): the step stats of "
                "session runs traced with RunOptions(trace_level=FULL_TRACE), with " + era)
    if lg.format == "xprof":
        return ("a TensorBoard profile (the TF profiler's trace, as xprof's trace viewer "
                "shows it): real threads, with events nested inside the ones that called them")
    return "a Chrome trace from another tool (rows and names read as they are)"


def tids_words(lg: Legend) -> str:
    """What a row's tid is in this trace."""
    if lg.tids_are == "lanes":
        return ("In a timeline.py trace a row's tid is a lane, not a thread: timeline.py puts "
                "each op into the first lane that is free when the op starts (greedy, "
                "non-overlapping). Lane 1 and up only hold ops that overlapped an op in a lower "
                "lane, so several lanes mean ops ran at the same time; which thread ran an op "
                "is not recorded.")
    return ("Here a row's tid is a real thread id; an event drawn inside another ran within it "
            "(a parent contains what it called).")


def process(p: ProcessInfo) -> str:
    """What process ``p`` is (no full stop)."""
    dev, gpu = p.device, p.gpu
    if p.role == "allocator":
        if not p.counters:
            return ("empty: timeline.py makes an Allocators row in every trace, and it holds "
                    "memory counters only when the timeline is written with show_memory=True "
                    "(generate_chrome_trace_format(show_memory=True)); this one holds none")
        return ("memory counters: bytes held by each allocator over time, one series per "
                "allocator (the curve rises when an op's output is allocated and falls after "
                "the tensor's last use)")
    if p.role == "tensors":
        if not p.tensors:
            return ("empty: timeline.py makes a Tensors row for every device, and the GPU "
                    "tracer's rows record no tensors" if p.tracer_row
                    else "empty: no tensor lifetimes were recorded for this device")
        return (f"tensor lifetimes on {dev}: one object per tensor an op produced, from its "
                f"creation to its last use ({p.tensors} tensors; click one in the viewer to see "
                f"its shape and bytes)")
    if p.role == "gpu_launch":
        if p.has_streams:
            return (f"the host side of {gpu}: one box per op the executor launched onto the "
                    f"GPU. A box is the CPU time to enqueue the op's kernels, not the GPU "
                    f"running them: for that, read the {gpu} stream rows")
        return (f"ops placed on {gpu}, as the host saw them: this trace has no stream rows "
                f"(the GPU tracer was off), so a box is launch and scheduling time, not GPU "
                f"time")
    if p.role == "gpu_stream":
        if p.copies_only:
            return (f"copies that ran on CUDA stream {p.stream} of {gpu} (a stream runs its "
                    f"work one item after another)")
        return (f"GPU kernels that ran on CUDA stream {p.stream} of {gpu} (a stream runs its "
                f"kernels one after another; this is GPU time, not launch)")
    return _PROCESSES.get(p.role, _other_process)(p)


def _other_process(p: ProcessInfo) -> str:
    return f"a process named {p.name!r} (not a TensorFlow row we know; read as it is)"


_PROCESSES = {
    "cpu_ops": lambda p: (f"op executions on {p.device}: one box per op, from the executor "
                          f"starting it to the op finishing; the arrows are tensors flowing "
                          f"from producer to consumer"),
    "gpu_stream_all": lambda p: (f"what {p.gpu} actually ran: every GPU kernel of every CUDA "
                                 f"stream in one row (the per-stream rows repeat these "
                                 f"kernels, split by stream)"),
    "gpu_memcpy": lambda p: (f"copies between host memory and {p.gpu} memory: MEMCPYHtoD "
                             f"(host to device), MEMCPYDtoH (device to host), as the GPU ran "
                             f"them"),
    "host": lambda p: (f"the host CPU ({p.name}): each row below is a real OS thread, named by "
                       f"TensorFlow"),
    "gpu_device": lambda p: (f"what {p.gpu} ran, as the profiler saw it: rows for CUDA streams "
                             f"(kernels and copies) and rows derived from them (Steps, XLA "
                             f"Ops, TensorFlow Ops) that repeat the same time"),
    "device": lambda p: f"the device {p.name}: rows are its streams or derived views of its work",
    "merged": lambda p: "a merged view of several traces (made by our compare tool)",
}

#: What a thread of each role is.
LANE_WORDS = {
    "python": ("the Python main thread: it calls session.run (or a tf.function) and waits "
               "inside it for the whole step, so its box spans the step (not counted as work)"),
    "tf_data": ("a tf.data background thread: it produces input elements (read, decode, "
                "map) ahead of the step that will consume them"),
    "inter_op": ("TensorFlow's inter-op pool: runs the graph's ops, one at a time per thread "
                 "(ExecutorState::Process > the op > its XLA kernels)"),
    "eigen": ("Eigen's intra-op pool: helper threads that split the work inside one op "
              "(and pieces of XLA:CPU kernels)"),
    "xla_codegen": "XLA:CPU's code-generation threads: busy only while XLA compiles",
    "gpu_private": ("a GPU's private thread (tf_gpu_private): it runs the ops placed on that "
                    "GPU and launches their kernels (its boxes are launch time, not GPU time)"),
    "reader": "a reader op's own thread (TF1 queue-runner input: reads files)",
    "stream": "kernels and copies on this CUDA stream",
    "derived": "derived from the stream rows (repeats their time; not counted as work)",
}


def lane(ln: LaneInfo) -> str:
    """What row ``ln`` is (no full stop)."""
    if ln.main_tid is not None:
        n = ln.trace_events
        return (f"another Python thread (the main one is tid {ln.main_tid}); " +
                (f"it recorded {n} events in the trace" if n else "it recorded no events"))
    if ln.role == "lane":
        tid = ln.tid
        return ("ops that did not overlap an earlier op" if tid == 0 else
                f"ops that started while lane{'s 0..' if tid > 1 else ' '}{tid - 1} "
                f"{'were' if tid > 1 else 'was'} busy")
    if ln.get_next:
        return ("the thread the step's IteratorGetNext runs on: it takes the next element "
                "from the tf.data pipeline and waits while none is ready (its boxes are the "
                "step waiting for input; it runs the pipeline's stages itself only where "
                "nothing produces ahead, e.g. no prefetch)")
    if ln.role in LANE_WORDS:
        return LANE_WORDS[ln.role]
    if ln.role == "runtime":
        return f"a TensorFlow-internal thread ({ln.thread})"
    return f"a thread named {ln.thread!r}" if ln.thread else "a thread with no name"


def as_dict(lg: Legend) -> dict[str, Any]:
    """The legend as data with its words: each process's and row's ``meaning``, and the
    trace's ``format_words`` and ``tids_words``."""
    d = lg.as_dict()
    for p, pd in zip(lg.processes, d["processes"]):
        pd["meaning"] = process(p)
        for ln, ld in zip(p.lanes, pd["lanes"]):
            ld["meaning"] = lane(ln)
    return {**d, "format_words": format_words(lg), "tids_words": tids_words(lg)}
