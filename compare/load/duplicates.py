"""One run written several times into one trace: process groups that repeat each other.

``timeline.Timeline.generate_chrome_trace_format()`` gives every call a fresh set of pids for the
same step stats, so a notebook that calls it several times on one Timeline and writes (or
concatenates) the results holds the run N times, in N process groups whose events are the same
to the microsecond. Counted as they are, every op would count N times. A process whose name and
events (names, start times, durations, rows) equal an earlier process's is such a copy: it is
dropped, with the other copies of its group (rows of the same names holding the same
counters), and the trace says so in a warning. Two real processes never record the same events
at the same microseconds, so nothing genuine is dropped.
"""
from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np

from compare.model.events import Trace

#: Pids named in the warning at most.
PIDS_NAMED = 8


def _digest(*arrays: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
        h.update(b"|")
    return h.hexdigest()


def _per_pid(pids: np.ndarray) -> dict[int, int]:
    """How many rows each pid has."""
    uniq, counts = np.unique(np.asarray(pids), return_counts=True)
    return dict(zip(uniq.tolist(), counts.tolist()))


def _suspects(trace: Trace) -> list[int]:
    """The processes that share their name and their numbers of events, counter samples and
    tensor objects with another: only those can repeat one (the rest need no digest)."""
    n_ev, n_c = _per_pid(trace.events.pid), _per_pid(trace.counters.pid)
    cheap = {pid: (p.name, n_ev.get(pid, 0), n_c.get(pid, 0), trace.objects.get(pid, 0))
             for pid, p in trace.processes.items()}
    shared = Counter(cheap.values())
    return [pid for pid, key in cheap.items() if shared[key] > 1]


def _signatures(trace: Trace) -> dict[int, tuple]:
    """Per suspect process (:func:`_suspects`): its name and a digest of everything it
    recorded, in a fixed order."""
    ev, c = trace.events, trace.counters
    out: dict[int, tuple] = {}
    suspects = _suspects(trace)
    if not suspects:
        return out
    by_pid = np.argsort(ev.pid, kind="stable")   # each process's events: one slice of these
    sorted_pid = ev.pid[by_pid]
    c_by_pid = np.argsort(c.pid, kind="stable")
    c_sorted = c.pid[c_by_pid]
    for pid in suspects:
        k = by_pid[np.searchsorted(sorted_pid, pid):np.searchsorted(sorted_pid, pid, "right")]
        k = k[np.lexsort((ev.tid[k], ev.dur[k], ev.ts[k]))]
        # string ids of one trace are one table: equal ids are equal names
        events = _digest(ev.tid[k], ev.ts[k], ev.dur[k], ev.name[k], ev.op_type[k],
                         ev.tf_name[k]) if len(k) else ""
        m = c_by_pid[np.searchsorted(c_sorted, pid):np.searchsorted(c_sorted, pid, "right")]
        m = m[np.lexsort((c.name[m], c.ts[m]))] if len(m) else m
        counters = _digest(c.name[m], c.ts[m], c.value[m]) if len(m) else ""
        out[pid] = (trace.processes[pid].name, events, counters, trace.objects.get(pid, 0))
    return out


def drop_repeated_runs(trace: Trace) -> None:
    """Drop the processes that repeat an earlier one (see the module docstring), in place."""
    sigs = _signatures(trace)
    groups: dict[tuple, list[int]] = {}
    for pid in sorted(sigs):
        groups.setdefault(sigs[pid], []).append(pid)
    repeated = [g for key, g in groups.items() if len(g) > 1 and key[1]]
    if not repeated:
        return
    copies = max(len(g) for g in repeated)
    drop = sorted(p for key, g in groups.items() if len(g) > 1 for p in g[1:])
    _remove(trace, drop)
    busy = repeated[0]
    shown = ", ".join(map(str, busy[:PIDS_NAMED])) + (" ..." if len(busy) > PIDS_NAMED else "")
    trace.warnings.append(
        f"the same run is in this trace {copies} times: pids {shown} "
        f"({trace.processes[busy[0]].name}) hold identical events (same names, start times "
        f"and durations), as when one Timeline's generate_chrome_trace_format() is written "
        f"several times into one file; counted once (the {len(drop)} repeated rows are left "
        f"out)")


def _remove(trace: Trace, pids: list[int]) -> None:
    ev = trace.events
    trace.events = ev.take(~np.isin(ev.pid, pids))
    c = trace.counters
    if len(c.ts):
        keep = ~np.isin(c.pid, pids)
        trace.counters = type(c)(c.pid[keep], c.name[keep], c.ts[keep], c.value[keep])
    f = trace.flows
    if len(f.ts):
        keep = ~np.isin(f.pid, pids)
        trace.flows = type(f)(*(getattr(f, col)[keep]
                                for col in ("id", "phase", "pid", "tid", "ts", "name")))
    gone = set(pids)
    trace.processes = {p: v for p, v in trace.processes.items() if p not in gone}
    trace.lanes = {k: v for k, v in trace.lanes.items() if k[0] not in gone}
    trace.objects = {p: n for p, n in trace.objects.items() if p not in gone}
