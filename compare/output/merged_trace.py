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
from compare.model.lanes import unique_pairs
from compare.output.colors import cname, match_cname
from compare.vocabulary.groups import GROUP, GROUPS
from compare.vocabulary.labels import BASES, ESTIMATES, LABELS
from compare.vocabulary.rows import NOT_WORK_KINDS

CHUNK = 20000


#: Rows a viewer can show: past these, the busiest processes (and, among them, the busiest
#: lanes) keep rows of their own and the rest of a run's work is summed in one row.
MAX_PROCESSES_SHOWN = 64
MAX_LANES_SHOWN = 256


class _Rows:
    """The merged trace's rows for one run: a process per kept process of the run (named
    ``merged:<run> <name>``), per lane its events' row and a ``· stages`` row under it. Past
    :data:`MAX_PROCESSES_SHOWN` processes or :data:`MAX_LANES_SHOWN` lanes the busiest are
    kept and the others are folded into one process whose one row sums their stages
    (``folded`` says so in words)."""

    def __init__(self, side: str, att: Attribution, pid_base: int, sort_base: int,
                 label: str | None = None, matches: dict[int, str] | None = None,
                 gmap: GroupMap | None = None) -> None:
        tr = att.trace
        self.side = label or side
        self.matches = matches or {}
        self.gmap = gmap                    # the generic view, when it is the one shown
        band = "groups" if gmap is not None else "stages"
        side = self.side
        work = [p for p in sorted(tr.processes) if tr.processes[p].kind not in NOT_WORK_KINDS]
        ev = tr.events
        pairs, self.lane_of, _ = unique_pairs(ev.pid, ev.tid)
        busy = np.bincount(self.lane_of, weights=ev.dur, minlength=len(pairs))
        self.keep, lanes, self.folded = _shown(tr, work, pairs, busy)
        self.pid = {p: pid_base + k for k, p in enumerate(self.keep)}
        self.tid = {lane: 2 * k + 2 for k, lane in enumerate(lanes)}
        # per distinct lane: its row's (pid, tid), or (-1, -1) when it is not shown at all
        self.row_pid = np.full(len(pairs), -1, np.int64)
        self.row_tid = np.full(len(pairs), -1, np.int64)
        index = {lane: k for k, lane in enumerate(map(tuple, pairs.tolist()))}
        self.shown = np.zeros(len(pairs), bool)   # per distinct lane: has a row of its own
        for lane, tid in self.tid.items():
            k = index[lane]
            self.row_pid[k], self.row_tid[k], self.shown[k] = self.pid[lane[0]], tid, True
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
        if self.folded:
            self.fold_pid = pid_base + len(self.keep)
            work_set = set(work)
            folded = [index[lane] for lane in map(tuple, pairs.tolist())
                      if lane[0] in work_set and lane not in self.tid]
            self.row_pid[folded], self.row_tid[folded] = self.fold_pid, 2   # bands: tid 3
            self._meta("process_name", self.fold_pid, 0, name=f"merged:{side} {self.folded}")
            self._meta("process_sort_index", self.fold_pid, 0,
                       sort_index=sort_base + len(self.keep))
            self._meta("thread_name", self.fold_pid, 3, name=f"the rest · {band}, summed")

    def _meta(self, what: str, pid: int, tid: int, **args) -> None:
        self.meta.append({"ph": "M", "name": what, "pid": pid, "tid": tid, "ts": 0,
                          "args": args})


def _shown(tr, work: list[int], pairs: np.ndarray, busy: np.ndarray
           ) -> tuple[list[int], list[tuple[int, int]], str]:
    """(the processes shown, in pid order; their lanes shown; what was folded, in words, or
    ""): all of them when they fit, else the busiest by time of their events."""
    work_set = set(work)
    mine = np.array([p in work_set for p in pairs[:, 0].tolist()], bool)
    lanes, lane_busy = pairs[mine], busy[mine]
    per_pid: dict[int, float] = {}
    for p, b in zip(lanes[:, 0].tolist(), lane_busy.tolist()):
        per_pid[p] = per_pid.get(p, 0.0) + b
    if len(work) <= MAX_PROCESSES_SHOWN and len(lanes) <= MAX_LANES_SHOWN:
        return work, sorted(map(tuple, lanes.tolist())), ""
    keep = sorted(per_pid, key=lambda p: (-per_pid[p], p))[:MAX_PROCESSES_SHOWN]
    kept = set(keep)
    ok = np.array([p in kept for p in lanes[:, 0].tolist()], bool)
    order = np.lexsort((lanes[ok][:, 1], lanes[ok][:, 0], -lane_busy[ok]))[:MAX_LANES_SHOWN]
    shown = sorted(map(tuple, lanes[ok][order].tolist()))
    keep = sorted({p for p, _ in shown})
    words = []
    if len(per_pid) > len(keep):
        words.append(f"{len(per_pid):,} processes: the {len(keep)} busiest shown")
    if int(ok.sum()) > len(shown):   # threads of the busiest processes, past the limit
        words.append(f"{int(ok.sum()):,} threads: the {len(shown)} busiest shown")
    return keep, shown, "; ".join(words) + ", the rest summed in one row" if words else ""


def _events_of_side(side: str, att: Attribution, pid_base: int, shift: float,
                    sort_base: int, label: str | None = None,
                    matches: dict[int, str] | None = None,
                    gmap: GroupMap | None = None) -> tuple[list[dict], list[dict], str]:
    """(metadata events, complete events, what was folded in words or "") of one run."""
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
    return rows.meta, out, rows.folded


def _op_events(rows: _Rows, att: Attribution, shift: float) -> list[dict]:
    """Every event of the run, coloured by its stage, its basis and ops in its args."""
    tr, smap = att.trace, att.smap
    ev, names = tr.events, tr.strings.names
    est = {i for i, b in enumerate(BASES) if b in ESTIMATES}
    out = []
    for i in np.flatnonzero(rows.shown[rows.lane_of]).tolist():   # folded: only the sum
        lane = (int(ev.pid[i]), int(ev.tid[i]))
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
    seg_e, t0, t1 = att.segments
    if rows.gmap is None:
        labels, names, view = att.segment_labels(), LABELS, "stages"
    else:
        labels = att.segment_labels(rows.gmap.group, OP_GROUPS, GROUP["runtime"])
        names, view = GROUPS, "groups"
    waits = att.segment_waits()
    row_pid, row_tid = rows.row_pid[rows.lane_of[seg_e]], rows.row_tid[rows.lane_of[seg_e]]
    order = np.lexsort((t0, row_tid, row_pid))
    order = order[~waits[order] & (row_tid[order] >= 0)]
    out, cur = [], None
    for k, pid, tid, lab, a, b in zip(order.tolist(), row_pid[order].tolist(),
                                      row_tid[order].tolist(), labels[order].tolist(),
                                      t0[order].tolist(), t1[order].tolist()):
        row = (pid, tid)
        if cur and cur[0] == row and cur[1] == lab and a - cur[3] < 1.0:
            cur[3] = max(cur[3], b)   # a folded row's lanes overlap: the band covers them
            continue
        if cur:
            out.append(_band(cur, shift, names, view))
        cur = [row, lab, a, b]
    if cur:
        out.append(_band(cur, shift, names, view))
    return out


def _band(cur, shift, names, view: str) -> dict:
    (pid, tid), lab, a, b = cur
    name = names[lab]
    return {"ph": "X", "pid": pid, "tid": tid + 1,
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
    metas, events, folded = [], [], {}
    for n, (side, att) in enumerate(runs.items()):
        first, _ = origins[side]
        m, e, folded[labels.get(side, side)] = _events_of_side(side, att, pid_base=1000 * (n + 1), shift=lead - first,
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
    out: dict[str, object] = {"events": len(events), "metadata": len(metas),
                              "bytes": os.path.getsize(path)}
    if any(folded.values()):
        out["folded"] = {k: v for k, v in folded.items() if v}
    return out
