"""One steady step of each side, lane by lane, as data: what ``timelines.png`` draws and what
the Pipeline compare tab in TensorBoard draws (``timelines.json``), built once so the two cannot
disagree.

Per side the step is the steady one closest to the median (:meth:`Attribution.representative`).
Each lane's innermost work (the attribution's segments, cut to the step) becomes bars coloured
by stage, or by group in the generic view; a thread waiting for others is left blank, one
waiting for input is a faint bar (``wait``). Pieces of one event that touch are one bar.

Bounded, whatever the trace: at most :data:`TIMELINE_LANES` lanes per side (the busiest; the
others are counted with their busy time) and :data:`TIMELINE_BARS` bars per side. Past that,
neighbouring bars of one label on a lane closer than :data:`MERGE_GAP_SHARE` of the step are
merged into one bar naming how many ops it holds, and if that is not enough the shortest bars
are left out. :meth:`StepTimeline.folded` says in words what was folded or left out.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from compare.analysis.attribution import Attribution, StepTimes
from compare.analysis.groups import OP_GROUPS, GroupMap
from compare.fmt import duration
from compare.output.colors import rgb01
from compare.vocabulary.groups import GROUP, GROUPS
from compare.vocabulary.labels import LABELS

#: timelines.json's layout version (a separate file from report.json and its schema).
TIMELINE_VERSION = 2
#: Lanes drawn per side, the busiest first (as many as a readable picture holds).
TIMELINE_LANES = 14
#: Bars per side at most (a steady step of our pipelines has a few hundred).
TIMELINE_BARS = 3000
#: Bars of one label on one lane this close (a share of the step) merge when over the cap.
MERGE_GAP_SHARE = 1 / 2000
#: Labels whose waits are drawn (faint): a thread waiting for input.
INPUT_WAITS = frozenset({"input_wait", "input"})


@dataclasses.dataclass
class Bar:
    """One stretch of one lane: ``start_us`` from the step's start."""

    start_us: float
    dur_us: float
    label: str          # stage, or group in the generic view: the colour
    op: str             # the event's name; for merged bars "N ops (longest: NAME)"
    wait: bool = False  # the thread waits for input here (drawn faint)
    ops: int = 1        # events merged into this bar


@dataclasses.dataclass
class Lane:
    name: str           # the thread's (or row's) name in the trace
    short: str          # what pictures label it with: short, numbered when repeated
    bars: list[Bar]


@dataclasses.dataclass
class StepTimeline:
    """One side's representative steady step, bounded (see the module docstring)."""

    step: int
    dur_us: float
    view: str                      # "stages" or "groups"
    lanes: list[Lane]
    lanes_total: int               # lanes with work in the step
    folded_lanes_us: float = 0.0   # busy time of the lanes not drawn
    merged_bars: int = 0           # bars merged into a neighbour of the same label
    dropped_bars: int = 0          # shortest bars left out past the cap
    dropped_us: float = 0.0

    def folded(self) -> str:
        """What the picture leaves out or merges, in words ("" when nothing)."""
        parts = []
        if self.lanes_total > len(self.lanes):
            parts.append(f"{self.lanes_total - len(self.lanes)} quieter lane(s) not drawn "
                         f"({duration(self.folded_lanes_us)} busy)")
        if self.merged_bars:
            parts.append(f"{self.merged_bars} short ops merged into neighbours of the same "
                         f"{'stage' if self.view == 'stages' else 'group'}")
        if self.dropped_bars:
            parts.append(f"{self.dropped_bars} shortest bars not drawn "
                         f"({duration(self.dropped_us)})")
        return "; ".join(parts)


def build(runs: dict[str, Attribution], groups: dict[str, GroupMap] | None = None,
          max_lanes: int = TIMELINE_LANES, max_bars: int = TIMELINE_BARS
          ) -> dict[str, StepTimeline | None]:
    """Per side its step's timeline (None when it has no steady step). ``groups``: per side
    its generic view, to colour by group instead of by stage."""
    return {side: _side(att, (groups or {}).get(side), max_lanes, max_bars)
            for side, att in runs.items()}


def _side(att: Attribution, gmap: GroupMap | None, max_lanes: int, max_bars: int
          ) -> StepTimeline | None:
    st = att.representative()
    if st is None:
        return None
    if gmap is None:
        seg_labels, names = att.segment_labels(), LABELS
    else:
        seg_labels, names = att.segment_labels(gmap.group, OP_GROUPS, GROUP["runtime"]), GROUPS
    shown_waits = {names.index(x) for x in INPUT_WAITS if x in names}
    lanes, busy = _lanes_of_step(att, st, seg_labels, names.index("idle"), shown_waits)
    chosen = sorted(lanes, key=lambda ln: -busy[ln])[:max_lanes]
    chosen.sort(key=lambda ln: _lane_label(att, ln))
    out = StepTimeline(st.num, float(st.dur), "groups" if gmap is not None else "stages",
                       [], len(lanes), float(sum(busy[ln] for ln in lanes if ln not in chosen)))
    full = [_lane_label(att, ln) for ln in chosen]
    for ln, name, short in zip(chosen, full, numbered([_short(n) for n in full])):
        out.lanes.append(Lane(name, short, _bars(att, st, lanes[ln], seg_labels, names)))
    _bound(out, max_bars)
    return out


def _lanes_of_step(att: Attribution, st: StepTimes, labels: np.ndarray, idle: int,
                   shown_waits: set[int]) -> tuple[dict, dict]:
    """Per lane with work in the step: its segments (indices), and its busy time (work, and
    waits for input, which the picture draws)."""
    e, t0, t1 = att.segments
    ev = att.trace.events
    idx = np.flatnonzero((t1 > st.ts) & (t0 < st.ts + st.dur) & (labels != idle))
    lanes: dict[tuple[int, int], list[int]] = {}
    for k in idx:
        lanes.setdefault((int(ev.pid[e[k]]), int(ev.tid[e[k]])), []).append(int(k))
    waits = att.segment_waits()
    end = st.ts + st.dur
    busy = {ln: float(sum(min(t1[k], end) - max(t0[k], st.ts) for k in ks
                          if not waits[k] or labels[k] in shown_waits))
            for ln, ks in lanes.items()}
    lanes = {ln: ks for ln, ks in lanes.items() if busy[ln] > 0}
    return lanes, busy


def _bars(att: Attribution, st: StepTimes, ks: list[int], labels: np.ndarray,
          names: tuple[str, ...]) -> list[Bar]:
    """A lane's bars in time order; touching pieces of one event are one bar."""
    e, t0, t1 = att.segments
    waits = att.segment_waits()
    ev, strings = att.trace.events, att.trace.strings.names
    bars: list[Bar] = []
    last_event = -1
    for k in sorted(ks, key=lambda k: t0[k]):
        label = names[labels[k]]
        wait = bool(waits[k])
        if wait and label not in INPUT_WAITS:
            continue  # a waiting thread: the lane stays empty there
        a = max(float(t0[k]), st.ts) - st.ts
        b = min(float(t1[k]), st.ts + st.dur) - st.ts
        prev = bars[-1] if bars else None
        if prev and last_event == e[k] and prev.label == label and prev.wait == wait and \
                abs(prev.start_us + prev.dur_us - a) < 1e-6:
            prev.dur_us = b - prev.start_us
            continue
        ename = strings[ev.name[e[k]]] or strings[ev.op_type[e[k]]] or "?"
        bars.append(Bar(a, b - a, label, ename, wait))
        last_event = int(e[k])
    return bars


def _bound(tl: StepTimeline, max_bars: int) -> None:
    """At most ``max_bars`` bars: merge close neighbours of one label, then drop the shortest."""
    if sum(len(ln.bars) for ln in tl.lanes) <= max_bars:
        return
    gap = tl.dur_us * MERGE_GAP_SHARE
    for lane in tl.lanes:
        merged: list[Bar] = []
        longest: dict[int, Bar] = {}
        for bar in lane.bars:
            prev = merged[-1] if merged else None
            if prev and prev.label == bar.label and prev.wait == bar.wait and \
                    bar.start_us - (prev.start_us + prev.dur_us) <= gap:
                top = longest[id(prev)]
                if bar.dur_us > top.dur_us:
                    longest[id(prev)] = top = bar
                prev.dur_us = bar.start_us + bar.dur_us - prev.start_us
                prev.ops += bar.ops
                prev.op = f"{prev.ops} ops (longest: {top.op})"
                tl.merged_bars += 1
                continue
            copy = dataclasses.replace(bar)
            longest[id(copy)] = bar
            merged.append(copy)
        lane.bars = merged
    every = sorted((b.dur_us for ln in tl.lanes for b in ln.bars), reverse=True)
    if len(every) <= max_bars:
        return
    cut = every[max_bars - 1]
    room = max_bars - sum(1 for d in every if d > cut)  # ties at the cut kept in time order
    for lane in tl.lanes:
        kept = []
        for bar in lane.bars:
            if bar.dur_us > cut or (bar.dur_us == cut and room > 0):
                room -= bar.dur_us == cut
                kept.append(bar)
            else:
                tl.dropped_bars += 1
                tl.dropped_us += bar.dur_us
        lane.bars = kept


def _lane_label(att: Attribution, lane: tuple[int, int]) -> str:
    """A lane's name; a lane that is only a number (timelines: one per process) is named for
    its process (``GPU:0 stream:14``, ``CPU:0 Compute``)."""
    name = att.trace.lane_name(*lane)
    proc = att.trace.processes.get(lane[0])
    if name.isdigit() and proc is not None and proc.name:
        return proc.name.rsplit("/device:", 1)[-1].lstrip("/")
    return name


def _short(name: str, n: int = 34) -> str:
    """A lane's label: TensorFlow's thread names without their id (``tf_Compute/1234`` ->
    ``tf_Compute``), cut to ``n`` characters."""
    base = name.split("/")[0] if name.startswith("tf_") else name
    return base if len(base) <= n else base[: n - 1] + "…"


def numbered(names: list[str]) -> list[str]:
    """Number repeated lane names (two ``tf_Compute`` threads -> ``tf_Compute #1``, ``#2``)."""
    counts = {n: names.count(n) for n in names}
    seen: dict[str, int] = {}
    out = []
    for n in names:
        if counts[n] > 1:
            seen[n] = seen.get(n, 0) + 1
            n = f"{n} #{seen[n]}"
        out.append(n)
    return out


def color_hex(label: str, view: str) -> str:
    r, g, b = (round(c * 255) for c in rgb01(label, view))
    return f"#{r:02x}{g:02x}{b:02x}"


def to_json(timelines: dict[str, StepTimeline | None], labels: dict[str, str]) -> dict:
    """``timelines.json``: per side, keyed by its label as report.json keys its sides (``order``:
    [label of A, label of B]), its step, lanes and bars, what was folded, and the colour of
    every label used."""
    views = {tl.view for tl in timelines.values() if tl}
    view = views.pop() if len(views) == 1 else "stages"
    used = {b.label for tl in timelines.values() if tl for ln in tl.lanes for b in ln.bars}
    return {
        "version": TIMELINE_VERSION,
        "view": view,
        "order": [labels.get(k, k) for k in timelines],
        "colors": {lab: color_hex(lab, view) for lab in _legend_order(view) if lab in used},
        "sides": {labels.get(k, k): _side_json(tl) for k, tl in timelines.items()},
    }


def _legend_order(view: str) -> list[str]:
    """Labels in the order legends list them: the view's own order, unmapped last."""
    names = LABELS if view == "stages" else GROUPS
    return [x for x in names if x != "unmapped"] + ["unmapped"]


def _side_json(tl: StepTimeline | None) -> dict | None:
    if tl is None:
        return None
    return {"step": tl.step, "dur_us": round(tl.dur_us, 1), "lanes_total": tl.lanes_total,
            "folded": tl.folded(),
            "lanes": [{"name": ln.name, "short": ln.short,
                       "bars": [{"start_us": round(b.start_us, 2), "dur_us": round(b.dur_us, 2),
                                 "label": b.label, "op": b.op, "wait": b.wait, "ops": b.ops}
                                for b in ln.bars]}
                      for ln in tl.lanes]}
