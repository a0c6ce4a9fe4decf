"""Both runs in one Chrome trace (``merged_trace.json.gz``), equal stages in equal colours.

Each run becomes its own processes (``merged:legacy /host:CPU``, ``merged:modern ...``), with
every original lane and, under it, a stage row: the lane's innermost work over time (blank
where the thread waits), one event per stretch of one stage, *named by the stage*. chrome://tracing and TensorBoard's trace viewer
colour events by ``cname`` (set from :mod:`compare.output.colors` on every event); Perfetto colours by
name, so the stage rows look alike across runs there too. Both runs are shifted so their first
steps start together; a ``steps`` row per run marks every step. Every event (metadata
too) carries ``pid``, ``tid`` and ``ts``; complete events carry, as ``args``, their stage, how
the stage was found, and their TF op.

Open it in https://ui.perfetto.dev ("Open trace file") or chrome://tracing ("Load").
"""
from __future__ import annotations

import gzip
import os

import numpy as np
import orjson

from common import atomic
from compare.analysis.attribution import Attribution
from compare.output.colors import cname
from compare.vocabulary.labels import BASES, ESTIMATES, LABELS
from compare.vocabulary.rows import NOT_WORK_KINDS

CHUNK = 20000


def _events_of_side(side: str, att: Attribution, pid_base: int, shift: float,
                    sort_base: int) -> tuple[list[dict], list[dict]]:
    """(metadata events, complete events) of one run."""
    tr, smap = att.trace, att.smap
    ev = tr.events
    names = tr.strings.names
    meta: list[dict] = []
    out: list[dict] = []
    keep_pids = [p for p in sorted(tr.processes) if tr.processes[p].kind not in NOT_WORK_KINDS]
    new_pid = {p: pid_base + k for k, p in enumerate(keep_pids)}
    for k, p in enumerate(keep_pids):
        meta.append({"ph": "M", "name": "process_name", "pid": new_pid[p], "tid": 0, "ts": 0,
                     "args": {"name": f"merged:{side} {tr.processes[p].name}"}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": new_pid[p], "tid": 0, "ts": 0,
                     "args": {"sort_index": sort_base + k}})
    lanes = sorted({(int(p), int(t)) for p, t in zip(ev.pid, ev.tid) if int(p) in new_pid})
    new_tid: dict[tuple[int, int], int] = {}
    for k, lane in enumerate(lanes):
        new_tid[lane] = 2 * k + 2
        pid = new_pid[lane[0]]
        lname = tr.lane_name(*lane)
        for tid, nm, order in ((2 * k + 2, lname, 2 * k + 2), (2 * k + 3, f"{lname} · stages",
                                                             2 * k + 3)):
            meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0,
                         "args": {"name": nm}})
            meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                         "ts": 0, "args": {"sort_index": order}})
    # every event, coloured by its stage
    splits = smap.splits
    est = {i for i, b in enumerate(BASES) if b in ESTIMATES}
    for i in range(len(ev)):
        lane = (int(ev.pid[i]), int(ev.tid[i]))
        if lane not in new_tid:
            continue
        lab = LABELS[smap.label[i]]
        args = {"stage": lab, "stage_basis": BASES[smap.basis[i]], "run": side}
        tf_name, op_type = names[ev.tf_name[i]], names[ev.op_type[i]]
        if tf_name:
            args["long_name"] = f"{tf_name}:{op_type}" if op_type else tf_name
        if ev.hlo_op[i]:
            args["hlo_op"] = names[ev.hlo_op[i]]
            args["xla_unit"] = smap.unit.get(i, "")
        if i in splits:
            args["stage_split"] = ", ".join(f"{LABELS[lb]} {fr:.0%}" for lb, fr in splits[i])
        if smap.basis[i] in est:
            args["estimate"] = ESTIMATES[BASES[smap.basis[i]]]
        if i in smap.ops:
            args["tf_ops"] = [n for _, n in smap.ops[i]][:40]
        out.append({"ph": "X", "pid": new_pid[lane[0]], "tid": new_tid[lane],
                    "ts": round(float(ev.ts[i]) + shift, 3), "dur": round(float(ev.dur[i]), 3),
                    "name": names[ev.name[i]] or op_type or "?", "cat": lab, "cname": cname(lab),
                    "args": args})
    # stage rows: runs of one label on each lane's innermost timeline
    seg_e, t0, t1 = att.segments
    labels = att.segment_labels()
    waits = att.segment_waits()
    lane_pid, lane_tid = ev.pid[seg_e], ev.tid[seg_e]
    order = np.lexsort((t0, lane_tid, lane_pid))
    cur = None
    for k in order[~waits[order]]:
        lane = (int(lane_pid[k]), int(lane_tid[k]))
        if lane not in new_tid:
            continue
        lab = int(labels[k])
        if cur and cur[0] == lane and cur[1] == lab and t0[k] - cur[3] < 1.0:
            cur[3] = float(t1[k])
            continue
        if cur:
            out.append(_band(cur, new_pid, new_tid, shift))
        cur = [lane, lab, float(t0[k]), float(t1[k])]
    if cur:
        out.append(_band(cur, new_pid, new_tid, shift))
    # a steps row
    if keep_pids:
        pid = new_pid[keep_pids[0]]
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 1, "ts": 0,
                     "args": {"name": f"{side} steps"}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": 1, "ts": 0,
                     "args": {"sort_index": 1}})
        for st in tr.steps:
            out.append({"ph": "X", "pid": pid, "tid": 1, "ts": round(st.ts + shift, 3),
                        "dur": round(st.dur, 3), "name": f"{side} step {st.num}", "cat": "step",
                        "args": {"run": side, "step": st.num}})
    return meta, out


def _band(cur, new_pid, new_tid, shift) -> dict:
    lane, lab, a, b = cur
    name = LABELS[lab]
    return {"ph": "X", "pid": new_pid[lane[0]], "tid": new_tid[lane] + 1,
            "ts": round(a + shift, 3), "dur": round(b - a, 3), "name": name, "cat": name,
            "cname": cname(name), "args": {"stage": name}}


def _origin(att: Attribution) -> tuple[float, float]:
    """(start of the first step, earliest event) of a run."""
    ev = att.trace.events
    first = att.trace.steps[0].ts if att.trace.steps else float(ev.ts.min())
    return first, float(ev.ts.min()) if len(ev) else first


def write(path: str | os.PathLike, runs: dict[str, Attribution]) -> dict:
    """Write the merged trace (gzip JSON) atomically; returns a summary {events, bytes}."""
    origins = {k: _origin(a) for k, a in runs.items()}
    lead = max((first - earliest) for first, earliest in origins.values()) if origins else 0.0
    metas, events = [], []
    for n, (side, att) in enumerate(runs.items()):
        first, _ = origins[side]
        m, e = _events_of_side(side, att, pid_base=1000 * (n + 1), shift=lead - first,
                               sort_base=100 * n)
        metas.extend(m)
        events.extend(e)
    doc_head = orjson.dumps({"displayTimeUnit": "ms", "otherData": {
        "about": "legacy and modern runs side by side; one colour per stage (see report.md)",
        "runs": list(runs)}})[:-1] + b',"traceEvents":['
    with atomic.atomic_open(path, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
            gz.write(doc_head)
            items = metas + events
            for k in range(0, len(items), CHUNK):
                chunk = orjson.dumps(items[k:k + CHUNK])[1:-1]
                if k:
                    gz.write(b",")
                gz.write(chunk)
            gz.write(b"]}")
    return {"events": len(events), "metadata": len(metas), "bytes": os.path.getsize(path)}
