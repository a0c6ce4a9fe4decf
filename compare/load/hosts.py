"""Several hosts' traces of one profiling session as one trace: one process group per host.

Each host's processes keep their rows, renamed ``<host>: <process>`` and moved to pids of
their own; their strings, xprof groups, flows and counters follow. Each host's times stay as
its profiler wrote them (relative to that host's own profile start: the files carry no common
clock), and each host's events keep the step their own host's marks gave them. The merged
trace's step windows are the first host's; every host's are in ``meta["host_steps"]``.
"""
from __future__ import annotations

import numpy as np

from compare.model.events import (
    EVENT_COLUMNS,
    STRING_COLUMNS,
    Counters,
    Events,
    Flows,
    Process,
    Strings,
    Trace,
)

#: A host's pids start at a multiple of this (above any pid the profiler writes).
MIN_PID_STRIDE = 1000
#: A host's xprof group ids are moved up by this many times its index.
GROUP_STRIDE = 1 << 40


def _stride(traces: list[Trace]) -> int:
    top = max((max(t.processes, default=0) for t in traces), default=0)
    stride = MIN_PID_STRIDE
    while stride <= top:
        stride *= 10
    return stride


def merge(per_host: list[tuple[str, Trace]], source: str) -> Trace:
    """``per_host``: (host name, its trace) in order; the first host's steps lead."""
    traces = [t for _, t in per_host]
    stride = _stride(traces)
    strings = Strings()
    processes: dict[int, Process] = {}
    lanes: dict[tuple[int, int], str] = {}
    objects: dict[int, int] = {}
    parts, counters, flows, warnings = [], [], [], []
    host_steps, per_device = {}, {}
    for k, (host, t) in enumerate(per_host):
        off = k * stride
        remap = np.asarray(strings.ids(t.strings.names), dtype=np.int32)
        for pid, p in t.processes.items():
            processes[pid + off] = Process(pid + off, strings.short(f"{host}: {p.name}"), p.kind,
                                           None if p.sort_index is None else p.sort_index + off)
        lanes.update({(pid + off, tid): name for (pid, tid), name in t.lanes.items()})
        objects.update({pid + off: n for pid, n in t.objects.items()})
        parts.append(_shifted(t.events, remap, off, k))
        c = t.counters
        counters.append(Counters(c.pid + off, remap[c.name], c.ts, c.value))
        f = t.flows
        flows.append(Flows(f.id + k * GROUP_STRIDE, f.phase, f.pid + off, f.tid, f.ts,
                           remap[f.name]))
        warnings += [f"{host}: {w}" for w in t.warnings]
        host_steps[host] = t.steps
        per_device.update({pid + off: s for pid, s in
                           t.meta.get("per_device_steps", {}).items()})
    merged = Trace(source=source, format=traces[0].format, strings=strings, processes=processes,
                   lanes=lanes, events=_concat(parts), objects=objects, warnings=warnings,
                   counters=Counters(*(np.concatenate([getattr(c, a) for c in counters])
                                       for a in ("pid", "name", "ts", "value"))),
                   flows=Flows(*(np.concatenate([getattr(f, a) for f in flows])
                                 for a in ("id", "phase", "pid", "tid", "ts", "name"))))
    merged.steps = list(traces[0].steps)
    merged.meta = {"hosts": [h for h, _ in per_host], "host_steps": host_steps,
                   "steps_from": traces[0].meta.get("steps_from", ""),
                   "steps_numbered": bool(traces[0].meta.get("steps_numbered"))}
    if per_device:
        merged.meta["per_device_steps"] = per_device
    for t in traces:
        merged.hlo.update(t.hlo)
    return merged


def _shifted(ev: Events, remap: np.ndarray, off: int, k: int) -> Events:
    out = ev.take(np.arange(len(ev)))
    out.pid = out.pid + off
    for col in STRING_COLUMNS:
        setattr(out, col, remap[getattr(out, col)])
    out.input_ids = remap[out.input_ids] if len(out.input_ids) else out.input_ids
    out.group = np.where(out.group >= 0, out.group + k * GROUP_STRIDE, out.group)
    return out


def _concat(parts: list[Events]) -> Events:
    out = Events(0)
    for col in EVENT_COLUMNS:
        setattr(out, col, np.concatenate([getattr(p, col) for p in parts]))
    lengths = np.concatenate([np.diff(p.input_ptr) for p in parts])
    out.input_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    out.input_ids = np.concatenate([p.input_ids for p in parts]).astype(np.int32)
    return out
