"""What each row of a trace is: the role of every process and lane (thread), from names alone.

Roles drive both the words the legend prints and which events the analyses count as work:
``/gpu:0/stream:all`` repeats every kernel of the per-stream rows, a ``<gpu> Compute`` row of a
timeline is the host launching kernels (not the GPU running them), the Python thread of an
xprof trace sits inside ``session.run`` for the whole step, and so on.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compare.model.events import CAT, Trace
from compare.model.lanes import in_lanes, unique_pairs
from compare.vocabulary.groups import is_collective
from compare.vocabulary.ops import (
    CUDA_SYNC_PREFIXES,
    PROGRAM_CALL_EVENTS,
    WAIT_EVENT_PREFIXES,
)

# re-exported: the analyses read rows' names through this module
from compare.vocabulary.rows import device_of as device_of
from compare.vocabulary.rows import gpu_of as gpu_of
from compare.vocabulary.rows import is_copy as is_copy
from compare.vocabulary.rows import process_role as _role_of
from compare.vocabulary.rows import thread_base as thread_base
from compare.vocabulary.rows import thread_role as thread_role


def process_role(trace: Trace, pid: int) -> str:
    """The role of process ``pid`` (see :func:`compare.vocabulary.rows.process_role`), worked
    out once per process of a trace (the analyses ask several times per row)."""
    known = _memo(trace, "_process_roles")
    role = known.get(pid)
    if role is None:
        p = trace.processes[pid]
        role = known[pid] = _role_of(p.kind, p.name)
    return role


def lane_role(trace: Trace, pid: int, tid: int) -> str:
    """For timeline rows: ``lane``; for threads and device lines, the role their name gives
    (:func:`compare.vocabulary.rows.thread_role`); a host thread of a name TensorFlow does not
    give that calls into TensorFlow (:data:`PROGRAM_CALL_EVENTS`) is
    the program's Python, whatever the executable named it. Once per lane of a trace."""
    if trace.format == "timeline":
        return "lane"
    known = _memo(trace, "_lane_roles")
    role = known.get((pid, tid))
    if role is None:
        role = thread_role(process_role(trace, pid), trace.lanes.get((pid, tid), ""))
        if role == "other" and (pid, tid) in _calling_lanes(trace):
            role = "python"
        known[(pid, tid)] = role
    return role


def _memo(trace: Trace, key: str) -> dict[Any, str]:
    """A per-trace cache of what its rows' names give (a loaded trace's rows do not change)."""
    memo = trace.meta.get(key)
    if not isinstance(memo, dict):
        memo = trace.meta[key] = {}
    return memo


def _calling_lanes(trace: Trace) -> frozenset[tuple[int, int]]:
    """Lanes holding a call of the program into TensorFlow; once per trace."""
    cached = trace.meta.get("_calling_lanes")
    if isinstance(cached, frozenset):
        return cached
    ids = [i for i in map(trace.strings.lookup, sorted(PROGRAM_CALL_EVENTS)) if i is not None]
    ev = trace.events
    hit = np.flatnonzero(np.isin(ev.name, ids)) if ids else np.zeros(0, dtype=np.int64)
    out = frozenset(zip(ev.pid[hit].tolist(), ev.tid[hit].tolist()))
    trace.meta["_calling_lanes"] = out
    return out


def lane_roles(trace: Trace) -> np.ndarray:
    """Per event, its lane's role (:func:`lane_role`), as an array of strings; one look-up
    per distinct lane."""
    ev = trace.events
    if not len(ev):
        return np.zeros(0, dtype=object)
    lanes, inv, _ = unique_pairs(ev.pid, ev.tid)
    roles = np.array([lane_role(trace, p, t) for p, t in lanes.tolist()], dtype=object)
    return np.asarray(roles[inv])


def process_roles(trace: Trace) -> dict[int, str]:
    return {pid: process_role(trace, pid) for pid in trace.processes}


def busy_mask(trace: Trace) -> np.ndarray:
    """Events that count as a row being busy: not step markers, not Python waiting inside
    session.run (ops that Python runs itself, eagerly, count), not xprof's derived device
    lines."""
    ev = trace.events
    cached = trace.meta.get("_busy_mask")
    if cached is not None and len(cached) == len(ev):   # one pass per trace (analyses ask often)
        return np.asarray(cached.copy())
    m = ~np.isin(ev.category, [CAT["step"], CAT["python"]])
    if trace.format != "timeline":
        roles = {(p, t): lane_role(trace, p, t) for p, t in trace.lanes}
        derived = [lane for lane, role in roles.items() if role == "derived"]
        python = [lane for lane, role in roles.items() if role == "python"]
        if derived:
            m &= ~in_lanes(ev.pid, ev.tid, derived)
        if python:  # it waits inside calls; ops it runs itself (eager) are work
            m &= ~(in_lanes(ev.pid, ev.tid, python) & (ev.op_type == 0))
    trace.meta["_busy_mask"] = m.copy()
    return m


def duplicate_pids(trace: Trace, roles: dict[int, str] | None = None) -> set[int]:
    """Rows that repeat other rows' events: the GPU tracer writes every kernel to
    ``stream:all`` and to its ``stream:N``, and every copy to ``memcpy`` and to its
    ``stream:N``, so where a GPU has per-stream rows, its ``stream:all`` and ``memcpy`` rows
    repeat them. Every analysis leaves these rows out, so each kernel and copy counts once."""
    roles = roles or process_roles(trace)
    gpus_with_streams = {gpu_of(trace.processes[p].name) for p, r in roles.items()
                         if r == "gpu_stream"}
    return {p for p, r in roles.items() if r in ("gpu_stream_all", "gpu_memcpy") and
            gpu_of(trace.processes[p].name) in gpus_with_streams}


def work_mask(trace: Trace, roles: dict[int, str] | None = None) -> np.ndarray:
    """Busy events (see :func:`busy_mask`) with each piece of work counted once (rows that
    repeat others left out: :func:`duplicate_pids`)."""
    ev = trace.events
    m = busy_mask(trace)
    drop = duplicate_pids(trace, roles)
    if drop:
        m &= ~np.isin(ev.pid, sorted(drop))
    return m


def on_gpu(trace: Trace, roles: dict[int, str] | None = None) -> np.ndarray:
    """Events the GPU itself ran (kernels and copies), as opposed to host-side work."""
    roles = roles or process_roles(trace)
    pids = [p for p, r in roles.items() if r in ("gpu_stream_all", "gpu_stream", "gpu_memcpy",
                                                  "gpu_device")]
    return np.isin(trace.events.pid, pids)


def collective_mask(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """Which of the events ``idx`` run a collective (NCCL, all-reduce...), by op type or name;
    one test per distinct (op type, name) pair."""
    ev, names = trace.events, trace.strings.names
    if not len(idx):
        return np.zeros(0, bool)
    keys, inv, _ = unique_pairs(ev.op_type[idx], ev.name[idx])
    hit = np.array([is_collective(names[o], names[n]) for o, n in keys.tolist()], bool)
    return np.asarray(hit[inv])


def blocking_mask(trace: Trace) -> np.ndarray:
    """Events in which a thread is known to block on other threads (a session waiting for its
    executor, a caller waiting for a function's ops) or on the GPU (a CUDA synchronisation):
    waiting, not work."""
    ev, names = trace.events, trace.strings.names
    blocking = WAIT_EVENT_PREFIXES + CUDA_SYNC_PREFIXES
    ids = [int(i) for i in np.unique(ev.name) if names[i].startswith(blocking)]
    return np.isin(ev.name, ids) if ids else np.zeros(len(ev), bool)
