"""Small synthetic traces for the fast core tests, written as the tools write them.

A test lists its events as tuples ``(row, lane, ts, dur, name, tf_name, inputs)`` (the last two
optional) and gets a :class:`compare.model.events.Trace` loaded by :func:`compare.load.load`
from a Chrome-trace JSON file, so the events pass through the real loader (categories, steps,
nesting) and look like real ones:

    tr = trace([(CPU, 0, 0, 100, "DecodeJpeg", "decode/DecodeJpeg"),
                (CPU, 0, 100, 50, "ResizeBilinear", "resize/Resize", ["decode/DecodeJpeg"])],
               steps=[0])

``format="timeline"`` writes what ``tensorflow.python.client.timeline`` writes: the row is a
process name (``.../device:CPU:0 Compute``), the lane an int, the name the op type, and the args
``{"name": tf_name, "op": op type, "input0": ...}``; ``steps`` (start times) become ``_SOURCE``
nodes (zero length, on a lane of their own), which the loader reads as session-run starts; the
last run ends with the trace's last event.

``format="xprof"`` writes what xprof's trace viewer writes for a TensorBoard profile: the row is a
process name (``/host:CPU``), the lane a thread name (``tf_Compute/1``; each gets a tid and a
``thread_name`` record), the name the op type or TraceMe name, and a TF op's args
``{"long_name": "tf_name:OpType"}``; ``steps`` ((start, duration) pairs) become step markers
(``step_num``/``step_name`` args) on the ``python3`` thread. Extra args (``hlo_module``,
``hlo_op``...) go in a dict as the tuple's last element.

``clusters`` writes the ``xla_clusters.json`` our legacy runs put beside a timeline (an XLA
cluster's TF ops); ``hlo`` attaches XLA modules (:func:`hlo_module`), as an xplane carries them.
The loaded trace's ``format`` is what the loader finds in the file (timeline.py args make it
"timeline"; a ``/host:`` row or ``long_name`` args "xprof").
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from common.hlo import HloInstruction, HloModule
from compare.load import load
from compare.model.events import Trace

#: Row names as TensorFlow writes them.
CPU = "/job:localhost/replica:0/task:0/device:CPU:0 Compute"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0 Compute"
GPU_ALL = "/device:GPU:0/stream:all Compute"
HOST = "/host:CPU"
#: The thread that marks steps in an xprof trace (our profiling.step runs on it).
PYTHON = "python3"


def _args_timeline(name: str, tf_name: str, inputs, extra: dict) -> dict:
    args = {"name": tf_name or name, "op": name}
    args.update({f"input{k}": v for k, v in enumerate(inputs)})
    return {**args, **extra}


def _args_xprof(name: str, tf_name: str, inputs, extra: dict) -> dict:
    return ({"long_name": f"{tf_name}:{name}"} if tf_name else {}) | extra


def _split(e: tuple) -> tuple:
    """``(row, lane, ts, dur, name[, tf_name[, inputs]][, extra args])``, padded."""
    extra = e[-1] if isinstance(e[-1], dict) else {}
    e = e[:-1] if extra else e
    row, lane, ts, dur, name, *rest = e
    tf_name = rest[0] if rest else ""
    inputs = rest[1] if len(rest) > 1 else ()
    return row, lane, ts, dur, name, tf_name, inputs, extra


def document(events: list[tuple], format: str = "timeline", steps=()) -> dict:
    """The Chrome-trace JSON document of ``events`` (see the module docstring)."""
    out, pids, tids = [], {}, {}
    events = [_split(e) for e in events]
    if format == "timeline":
        # on a lane of their own: a zero-length node at an op's start would nest in the op
        row = events[0][0] if events else CPU
        lane = 1 + max((e[1] for e in events if e[0] == row), default=-1)
        events += [(row, lane, t, 0, "NoOp", "_SOURCE", (), {}) for t in steps]
    else:
        # first: a marker encloses what the step's thread does, also an event as long as it
        events = [(HOST, PYTHON, t, d, "train", "", (), {"step_num": n, "step_name": "train",
                                                         "group_id": n})
                  for n, (t, d) in enumerate(steps)] + events
    for row, lane, ts, dur, name, tf_name, inputs, extra in events:
        if row not in pids:
            pids[row] = pid = len(pids) + 1
            out.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": row}})
        pid = pids[row]
        if isinstance(lane, str):
            if (pid, lane) not in tids:
                tids[(pid, lane)] = tid = 100 + len(tids)
                out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                            "args": {"name": lane}})
            tid = tids[(pid, lane)]
        else:
            tid = lane
        args = (_args_timeline if format == "timeline" else _args_xprof)(name, tf_name, inputs,
                                                                        extra)
        ev = {"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": name}
        if args:
            ev["args"] = args
        out.append(ev)
    return {"traceEvents": out}


def write(path: Path, events: list[tuple], format: str = "timeline", steps=(),
          clusters: dict | None = None) -> Path:
    """Write the trace file (and ``xla_clusters.json`` beside it, from ``clusters``: cluster
    name -> [(op_type, op_name)]); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document(events, format, steps)))
    if clusters is not None:
        doc = {"clusters": {k: [list(o) for o in v] for k, v in clusters.items()},
               "timelines": {path.name: {"aliases": {k: k for k in clusters}}}}
        (path.parent / "xla_clusters.json").write_text(json.dumps(doc))
    return path


def trace(events: list[tuple], format: str = "timeline", steps=(), clusters: dict | None = None,
          hlo: dict[str, HloModule] | None = None) -> Trace:
    """``events`` loaded through :func:`compare.load.load` (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="synthetic-") as tmp:
        name = "timeline.json" if format == "timeline" else "trace.json"
        tr = load(write(Path(tmp) / name, events, format, steps, clusters))
    if hlo:
        tr.hlo = dict(hlo)
    return tr


def hlo_module(name: str, kernels: dict[str, list[tuple[str, str, int]]]) -> HloModule:
    """An XLA module whose entry runs ``kernels``: kernel name -> the TF ops fused into it as
    (op_type, op_name, output elements); an empty list is a kernel with no TF op (a copy)."""
    entry, comps = [], {}
    for k, ops in kernels.items():
        body = f"{k}.body"
        comps[body] = [HloInstruction(f"{k}.{j}", "add", t, n, (), el)
                       for j, (t, n, el) in enumerate(ops)]
        entry.append(HloInstruction(k, "fusion", "", "", (body,), 1))
    return HloModule(name, "main", {"main": entry, **comps})
