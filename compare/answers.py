"""The seed's four questions, answered in plain words for one analysed trace.

1. How do I read this trace?  2. What does XLA cost, and what is ``_XlaLaunch``?
3. In what order do the ops run?  4. What are the pids (and threads)?

Built from the event model, the stage map, the per-step attribution and :mod:`compare.xla`
(``compare.explain`` answers the same questions for any single trace in more depth).
"""
from __future__ import annotations

import re

import numpy as np

from compare.mapping import LABELS, PIPELINE

_LANE_WORDS = (
    (re.compile(r"^(run\.py|python|MainThread)"), "your Python thread: step markers, "
     "session.run / eager calls, and the time they wait"),
    (re.compile(r"^tf_Compute"), "TensorFlow's inter-op pool: the executor runs graph ops here"),
    (re.compile(r"Eigen|tf_numa"), "the intra-op pool: shards of one op's work and XLA:CPU "
     "kernels, running in parallel"),
    (re.compile(r"^tf_data_iterator"), "tf.data's iterator threads: each dataset's "
     "producer loop (prefetch, parallel map) runs and waits here"),
    (re.compile(r"^tf_data_private|^tf_data"), "tf.data's worker pool: your map functions' ops"),
    (re.compile(r"^tf_reader_thread"), "a TF1 reader op's own thread: reading files"),
    (re.compile(r"xla-cpu-codegen"), "XLA's compiler threads (code generation)"),
    (re.compile(r"^tf_device_initialization"), "device set-up at start"),
)
_PROCESS_WORDS = {
    "host": "the host CPU: one row per thread",
    "compute": "ops as they executed on this device; its tids are lanes packed so events do "
               "not overlap, not threads",
    "tensors": "tensor lifetimes (allocation to release) on this device",
    "allocator": "memory in use per allocator over time (counters)",
    "stream": "GPU kernels as they actually ran on a stream (stream:all is the union)",
    "memcpy": "copies between host and GPU",
    "device": "an accelerator's own timeline",
    "merged": "a run of a merged comparison trace",
}


def _ms(us: float) -> str:
    return f"{us / 1e6:.2f} s" if us >= 1e6 else f"{us / 1e3:.1f} ms" if us >= 1e3 \
        else f"{us:.0f} µs"


def _lane_words(name: str) -> str:
    for rx, words in _LANE_WORDS:
        if rx.search(name):
            return words
    return "other work"


def how_to_read(side) -> str:
    tr, att = side.trace, side.attribution
    steady = att.steady
    med = att.median("wall")
    step = att.median_step_us()
    work = sorted(((med[i], LABELS[i]) for i in range(len(LABELS))
                   if med[i] > 0 and LABELS[i] != "idle"), reverse=True)[:4]
    how = {"xprof": "marked by the profiler", "timeline": "one per session run"}.get(
        tr.format, "as found")
    parts = [f"Read it as {len(att.steps)} step(s) ({how}); a steady step takes {_ms(step)} "
             f"(median of {len(steady)})."]
    parts.append("Each row is a thread (or lane); each bar one op or runtime event, nested bars "
                 "are work done inside the outer one. Colour by stage in merged_trace.json.gz.")
    if work:
        parts.append("Most of a steady step goes to " + ", ".join(
            f"{lab} ({v / step:.0%})" for v, lab in work) + ".")
    return " ".join(parts)


def xla_answer(side) -> str:
    x = side.xla
    units = side.smap.units
    if x.launch_style == "none" and not units:
        return ("No XLA in this trace: no _XlaCompile/_XlaRun/_XlaLaunch ops and no compiled "
                "kernels.")
    first = side.attribution.first
    comp_first = first.split["compile"] if first else 0.0
    text = (f"XLA compiled {x.compiles} time(s), {_ms(x.compile_us)} in all"
            + (f" ({comp_first / first.dur:.0%} of the first step)" if first and first.dur else "")
            + f"; compiled code ran for {_ms(x.run_us)} over the trace"
            + (f"; recompiled: {', '.join(x.recompiled)}" if x.recompiled else
               "; nothing recompiled") + ". ")
    text += ("_XlaLaunch (TF1) runs a whole compiled cluster as one op and its first call "
             "includes the compile; TF2 splits it into _XlaCompile (compile, or a cache lookup "
             "of tens of µs on later steps) and _XlaRun (runs the compiled code; XLA:CPU adds "
             "one event per kernel, named by HLO instruction); _XlaMerge joins the compiled "
             "path with the fallback path. ")
    big = sorted(units.values(), key=lambda u: -len(u.ops))[:3]
    if big:
        text += "Largest compiled units: " + "; ".join(
            f"{u.name} ({len(u.ops)} TF ops: "
            + ", ".join(f"{s} {n}" for s, n in list(u.stages.items())[:5]) + ")"
            for u in big) + "."
    return text


def sequence_answer(side) -> str:
    """Stages in the order their work happens within the representative steady step: by the
    time half of each stage's work is done, with the span holding its middle 80%."""
    from compare.plots import representative_step

    att = side.attribution
    st = representative_step(att)
    if st is None:
        return "No steps."
    e, t0, t1 = att.segments
    labels = att.segment_labels()
    a, b = np.clip(t0, st.ts, st.ts + st.dur), np.clip(t1, st.ts, st.ts + st.dur)
    m = (b > a) & np.isin(labels, list(PIPELINE)) & ~side.smap.wait[e]
    spans = []
    for lab in np.unique(labels[m]):
        k = np.flatnonzero(m & (labels == lab))
        k = k[np.argsort(a[k])]
        done = np.cumsum(b[k] - a[k]) / np.sum(b[k] - a[k])
        at = lambda q: float(a[k][np.searchsorted(done, q)])  # noqa: E731
        spans.append((at(0.5), at(0.1), float(b[k][np.searchsorted(done, 0.9)]),
                      LABELS[int(lab)]))
    chain = " → ".join(f"{name} ({(lo - st.ts) / 1e3:.1f}–{(hi - st.ts) / 1e3:.1f} ms)"
                       for _, lo, hi, name in sorted(spans))
    extra = ("Dataflow arrows (flow events) in the trace link each op to the ops that consume "
             "its output." if len(side.trace.flows.ts) else
             "Within a thread, nested events run inside their parent; across threads, order "
             "by start time.")
    return (f"In steady step {st.num} ({_ms(st.dur)}) the stages' work happens in this order "
            f"(by when half of it is done; the span holds the middle 80%): {chain}. {extra}")


def pids_answer(side) -> str:
    tr = side.trace
    parts = []
    for p in tr.processes.values():
        lanes = [name for (pid, _), name in tr.lanes.items() if pid == p.pid]
        line = f"pid {p.pid} '{p.name}': {_PROCESS_WORDS.get(p.kind, 'other events')}"
        if p.kind == "host" and lanes:
            kinds: dict[str, int] = {}
            for ln in lanes:
                base = ln.split("/")[0]
                kinds[base] = kinds.get(base, 0) + 1
            line += " — threads: " + "; ".join(
                f"{base}{f' ×{n}' if n > 1 else ''} ({_lane_words(base)})"
                for base, n in sorted(kinds.items()))
        parts.append(line)
    return ". ".join(parts) + "."


def answer(side) -> dict[str, str]:
    """The four answers for one :class:`compare.comparison.Side`."""
    return {"how_to_read": how_to_read(side), "xla": xla_answer(side),
            "sequence": sequence_answer(side), "pids": pids_answer(side)}

