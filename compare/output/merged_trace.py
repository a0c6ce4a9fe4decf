"""Both runs in one Chrome trace (``merged_trace.json.gz``), equal stages in equal colours.

Each run becomes its own processes (``merged:legacy /host:CPU``, ``merged:modern ...``), with
every original lane and, under it, a stage row: the lane's innermost work over time (blank
where the thread waits), one event per stretch of one stage, *named by the stage*. chrome://tracing and TensorBoard's trace viewer
colour events by ``cname`` (set from :mod:`compare.output.colors` on every event); Perfetto colours by
name, so the stage rows look alike across runs there too. An op matched across the two runs
(a row of ``ops_diff`` that is the same, changed or fused) is named by that row on both sides
and coloured alike (:func:`compare.output.colors.match_cname`), its stage in its args. Both
runs are shifted so their first
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
from compare.analysis.groups import OP_GROUPS, GroupMap
from compare.output.colors import cname, match_cname
from compare.vocabulary.groups import GROUP, GROUPS
from compare.vocabulary.labels import BASES, ESTIMATES, LABELS
from compare.vocabulary.rows import NOT_WORK_KINDS

CHUNK = 20000


class _Rows:
    """The merged trace's rows for one run: a process per kept process of the run (named
    ``merged:<run> <name>``), per lane its events' row and a ``· stages`` row under it."""

    def __init__(self, side: str, att: Attribution, pid_base: int, sort_base: int,
                 label: str | None = None, matches: dict[int, str] | None = None,
                 gmap: GroupMap | None = None) -> None:
        tr = att.trace
        self.side = label or side
        self.matches = matches or {}
        self.gmap = gmap                    # the generic view, when it is the one shown
        band = "groups" if gmap is not None else "stages"
        side = self.side
        self.keep = [p for p in sorted(tr.processes) if tr.processes[p].kind not in NOT_WORK_KINDS]
        self.pid = {p: pid_base + k for k, p in enumerate(self.keep)}
        ev = tr.events
        lanes = sorted({(int(p), int(t)) for p, t in zip(ev.pid, ev.tid) if int(p) in self.pid})
        self.tid = {lane: 2 * k + 2 for k, lane in enumerate(lanes)}
        self.meta: list[dict] = []
        for k, p in enumerate(self.keep):
            self._meta("process_name", self.pid[p], 0, name=f"merged:{side} "
                                                            f"{tr.processes[p].name}")
            self._meta("process_sort_index", self.pid[p], 0, sort_index=sort_base + k)
        for lane, tid in self.tid.items():
            lname = tr.lane_name(*lane)
            for t, nm in ((tid, lname), (tid + 1, f"{lname} · {band}")):
                self._meta("thread_name", self.pid[lane[0]], t, name=nm)
                self._meta("thread_sort_index", self.pid[lane[0]], t, sort_index=t)

    def _meta(self, what: str, pid: int, tid: int, **args) -> None:
        self.meta.append({"ph": "M", "name": what, "pid": pid, "tid": tid, "ts": 0,
                          "args": args})


def _events_of_side(side: str, att: Attribution, pid_base: int, shift: float,
                    sort_base: int, label: str | None = None,
                    matches: dict[int, str] | None = None,
                    gmap: GroupMap | None = None) -> tuple[list[dict], list[dict]]:
    """(metadata events, complete events) of one run."""
    rows = _Rows(side, att, pid_base, sort_base, label, matches, gmap)
    side = rows.side
    out = _op_events(rows, att, shift) + _stage_bands(rows, att, shift)
    if rows.keep:  # a steps row
        pid = rows.pid[rows.keep[0]]
        rows._meta("thread_name", pid, 1, name=f"{side} steps")
        rows._meta("thread_sort_index", pid, 1, sort_index=1)
        out += [{"ph": "X", "pid": pid, "tid": 1, "ts": round(st.ts + shift, 3),
                 "dur": round(st.dur, 3), "name": f"{side} step {st.num}", "cat": "step",
                 "args": {"run": side, "step": st.num}} for st in att.trace.steps]
    return rows.meta, out


def _op_events(rows: _Rows, att: Attribution, shift: float) -> list[dict]:
    """Every event of the run, coloured by its stage, its basis and ops in its args."""
    tr, smap = att.trace, att.smap
    ev, names = tr.events, tr.strings.names
    est = {i for i, b in enumerate(BASES) if b in ESTIMATES}
    out = []
    for i in range(len(ev)):
        lane = (int(ev.pid[i]), int(ev.tid[i]))
        if lane not in rows.tid:
            continue
        lab = LABELS[smap.label[i]]
        args = {"stage": lab, "stage_basis": BASES[smap.basis[i]], "run": rows.side}
        if rows.gmap is not None:
            args["group"] = rows.gmap.key(i)
        tf_name, op_type = names[ev.tf_name[i]], names[ev.op_type[i]]
        if tf_name:
            args["long_name"] = f"{tf_name}:{op_type}" if op_type else tf_name
        if ev.hlo_op[i]:
            args["hlo_op"] = names[ev.hlo_op[i]]
            args["xla_unit"] = smap.unit.get(i, "")
        if i in smap.splits:
            args["stage_split"] = ", ".join(f"{LABELS[lb]} {fr:.0%}" for lb, fr in smap.splits[i])
        if smap.basis[i] in est:
            args["estimate"] = ESTIMATES[BASES[smap.basis[i]]]
        if i in smap.ops:
            args["tf_ops"] = [n for _, n in smap.ops[i]][:40]
        name = names[ev.name[i]] or op_type or "?"
        cat, colour = (lab, cname(lab)) if rows.gmap is None else \
            (args["group"], cname(args["group"], "groups"))
        match = rows.matches.get(i)
        if match:  # matched across the runs: one name and one colour on both sides
            args["event_name"], args["op_match"] = name, match
            name, cat, colour = match, "op_match", match_cname(match)
        out.append({"ph": "X", "pid": rows.pid[lane[0]], "tid": rows.tid[lane],
                    "ts": round(float(ev.ts[i]) + shift, 3), "dur": round(float(ev.dur[i]), 3),
                    "name": name, "cat": cat, "cname": colour, "args": args})
    return out


def _stage_bands(rows: _Rows, att: Attribution, shift: float) -> list[dict]:
    """Per lane, runs of one label (stage, or group) on its innermost timeline (waits left
    blank)."""
    ev = att.trace.events
    seg_e, t0, t1 = att.segments
    if rows.gmap is None:
        labels, names, view = att.segment_labels(), LABELS, "stages"
    else:
        labels = att.segment_labels(rows.gmap.group, OP_GROUPS, GROUP["runtime"])
        names, view = GROUPS, "groups"
    waits = att.segment_waits()
    lane_pid, lane_tid = ev.pid[seg_e], ev.tid[seg_e]
    order = np.lexsort((t0, lane_tid, lane_pid))
    out, cur = [], None
    for k in order[~waits[order]]:
        lane = (int(lane_pid[k]), int(lane_tid[k]))
        if lane not in rows.tid:
            continue
        lab = int(labels[k])
        if cur and cur[0] == lane and cur[1] == lab and t0[k] - cur[3] < 1.0:
            cur[3] = float(t1[k])
            continue
        if cur:
            out.append(_band(cur, rows.pid, rows.tid, shift, names, view))
        cur = [lane, lab, float(t0[k]), float(t1[k])]
    if cur:
        out.append(_band(cur, rows.pid, rows.tid, shift, names, view))
    return out


def _band(cur, new_pid, new_tid, shift, names, view: str) -> dict:
    lane, lab, a, b = cur
    name = names[lab]
    return {"ph": "X", "pid": new_pid[lane[0]], "tid": new_tid[lane] + 1,
            "ts": round(a + shift, 3), "dur": round(b - a, 3), "name": name, "cat": name,
            "cname": cname(name, view), "args": {"stage" if view == "stages" else "group": name}}


def _origin(att: Attribution) -> tuple[float, float]:
    """(start of the first step, earliest event) of a run."""
    ev = att.trace.events
    first = att.trace.steps[0].ts if att.trace.steps else float(ev.ts.min())
    return first, float(ev.ts.min()) if len(ev) else first


def write(path: str | os.PathLike, runs: dict[str, Attribution],
          labels: dict[str, str] | None = None,
          matches: dict[str, dict[int, str]] | None = None,
          groups: dict[str, GroupMap] | None = None) -> dict:
    """Write the merged trace (gzip JSON) atomically; returns a summary {events, bytes}.
    ``labels``: what to call each run; ``matches``: per run, event -> the ``ops_diff`` row it
    belongs to (matched ops are named and coloured alike on both sides); ``groups``: per run
    its generic view, when that is the view shown (rows and colours by group, not stage)."""
    labels, matches, groups = labels or {}, matches or {}, groups or {}
    origins = {k: _origin(a) for k, a in runs.items()}
    lead = max((first - earliest) for first, earliest in origins.values()) if origins else 0.0
    metas, events = [], []
    for n, (side, att) in enumerate(runs.items()):
        first, _ = origins[side]
        m, e = _events_of_side(side, att, pid_base=1000 * (n + 1), shift=lead - first,
                               sort_base=100 * n, label=labels.get(side),
                               matches=matches.get(side), gmap=groups.get(side))
        metas.extend(m)
        events.extend(e)
    doc_head = orjson.dumps({"displayTimeUnit": "ms", "otherData": {
        "about": "two runs side by side; one colour per stage, or per group when the "
                 "traces show no image pipeline (see report.md), matched ops "
                 "named and coloured alike",
        "runs": [labels.get(k, k) for k in runs]}})[:-1] + b',"traceEvents":['
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
