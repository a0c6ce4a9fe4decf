"""``stages.png`` (where a steady step's time goes, both runs) and ``timelines.png`` (one steady
step of each run, lane by lane), in the stage colours of :mod:`compare.output.colors`."""
from __future__ import annotations

import io
import os

import numpy as np
from matplotlib.figure import Figure  # no pyplot: no backend, nothing global changed
from matplotlib.patches import Patch

from common import atomic
from compare.analysis.attribution import Attribution
from compare.analysis.comparison import Comparison
from compare.output.colors import rgb01
from compare.vocabulary.labels import LABEL, LABELS

_ORDER = [s for s in LABELS if s != "unmapped"] + ["unmapped"]


def _save(fig, path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic.write_bytes(path, buf.getvalue())


def stages_png(path: str | os.PathLike, c: Comparison) -> None:
    """Top: each run's representative steady step (closest to the median) as one bar split by
    stage. Bottom: per stage, the two runs' median wall time per steady step (ms), legacy
    solid, modern hatched."""
    values = {row.stage: (row.cells["legacy"].us / 1e3, row.cells["modern"].us / 1e3)
              for row in c.stages if row.cells["legacy"].us > 0 or row.cells["modern"].us > 0}
    um = {k: s.unmapped_us for k, s in c.sides.items()}
    if um["legacy"] or um["modern"]:
        values["unmapped"] = (um["legacy"] / 1e3, um["modern"] / 1e3)
    stages = [s for s in _ORDER if s in values]
    fig = Figure(figsize=(11, 3.2 + 0.42 * len(stages)))
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [
        1.1, max(len(stages), 1) * 0.42]})
    for y, side in enumerate(("legacy", "modern")):
        rep = c.sides[side].steps.representative
        if not rep:
            continue
        left = 0.0
        for s in _ORDER:
            v = rep.stages_us.get(s, 0.0) / 1e3
            if v <= 0:
                continue
            top.barh(y, v, left=left, color=rgb01(s), edgecolor="white", linewidth=0.5,
                     hatch="//" if side == "modern" else None)
            left += v
        top.text(left, y, f"  step {rep.step}: {rep.dur_us / 1e3:.1f} ms", va="center",
                 fontsize=9)
    top.set_yticks([0, 1], [c.label("legacy"), c.label("modern")])
    top.invert_yaxis()
    top.set_xlabel("the steady step closest to the median (ms), split by stage (wall time)")
    top.set_title("Where a steady step's time goes")
    y = np.arange(len(stages))
    h = 0.38
    leg = [values[s][0] for s in stages]
    mod = [values[s][1] for s in stages]
    bottom.barh(y - h / 2, leg, h, color=[rgb01(s) for s in stages], edgecolor="black",
                linewidth=0.4)
    bottom.barh(y + h / 2, mod, h, color=[rgb01(s) for s in stages], edgecolor="black",
                linewidth=0.4, hatch="//", alpha=0.75)
    for yy, a, b in zip(y, leg, mod):
        bottom.text(max(a, 0), yy - h / 2, f" {a:.2f}", va="center", fontsize=7)
        bottom.text(max(b, 0), yy + h / 2, f" {b:.2f}", va="center", fontsize=7)
    bottom.set_yticks(y, stages)
    bottom.invert_yaxis()
    bottom.set_xlabel("ms per steady step (median; wall time, shared among concurrent threads)")
    bottom.legend(handles=[Patch(facecolor="white", edgecolor="black", label=c.label("legacy")),
                           Patch(facecolor="white", edgecolor="black", hatch="//",
                                 label=c.label("modern"))], loc="lower right", fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def _lanes_of_step(att: Attribution, st, max_lanes: int):
    e, t0, t1 = att.segments
    labels = att.segment_labels()
    ev = att.trace.events
    m = (t1 > st.ts) & (t0 < st.ts + st.dur) & (labels != LABEL["idle"])
    idx = np.flatnonzero(m)
    lanes: dict[tuple[int, int], list[int]] = {}
    for k in idx:
        lanes.setdefault((int(ev.pid[e[k]]), int(ev.tid[e[k]])), []).append(int(k))
    waits = att.segment_waits()
    busy = {ln: sum(min(t1[k], st.ts + st.dur) - max(t0[k], st.ts) for k in ks
                    if not waits[k]) for ln, ks in lanes.items()}
    chosen = sorted(lanes, key=lambda ln: -busy[ln])[:max_lanes]
    chosen.sort(key=lambda ln: att.trace.lane_name(*ln))
    return [(ln, lanes[ln]) for ln in chosen], labels, t0, t1, e


def timelines_png(path: str | os.PathLike, runs: dict[str, Attribution],
                  names: dict[str, str] | None = None, max_lanes: int = 14) -> None:
    """One steady step (the one closest to the median) of each run, one row per thread/lane,
    the runs stacked on a shared time axis (ms from the step's start); a thread waiting for
    others is left blank."""
    side_names = names or {}
    picked = {side: att.representative() for side, att in runs.items()}
    data = {side: _lanes_of_step(att, picked[side], max_lanes)
            for side, att in runs.items() if picked[side] is not None}
    heights = [max(len(d[0]), 1) for d in data.values()] or [1]
    fig = Figure(figsize=(12, 1.4 + 0.32 * sum(heights) + 0.9 * len(heights)))
    axes = fig.subplots(len(heights), 1, sharex=True, gridspec_kw={"height_ratios": heights},
                        squeeze=False)
    used = set()
    for ax, (side, (lanes, labels, t0, t1, e)) in zip(axes[:, 0], data.items()):
        att, st = runs[side], picked[side]
        waits = att.segment_waits()
        for row, (ln, ks) in enumerate(lanes):
            bars = {}
            for k in ks:
                a = max(t0[k], st.ts) - st.ts
                b = min(t1[k], st.ts + st.dur) - st.ts
                lab = LABELS[labels[k]]
                if waits[k]:
                    continue  # a waiting thread: leave the row empty there
                bars.setdefault(lab, []).append((a / 1e3, (b - a) / 1e3))
            for lab, spans in bars.items():
                ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=rgb01(lab))
                used.add(lab)
        names = _dedupe([_short(att.trace.lane_name(*ln)) for ln, _ in lanes])
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_title(f"{side_names.get(side, side)}: step {st.num}, {st.dur / 1e3:.1f} ms (the "
                     f"steady step closest to the median)", fontsize=9, loc="left")
        ax.axvline(st.dur / 1e3, color="black", linewidth=0.8, linestyle=":")
    axes[-1, 0].set_xlabel("ms from the step's start")
    handles = [Patch(color=rgb01(s), label=s) for s in _ORDER if s in used]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 9), fontsize=7,
               frameon=False, bbox_to_anchor=(0.5, -0.01))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    _save(fig, path)


def _short(name: str, n: int = 34) -> str:
    base = name.split("/")[0] if name.startswith("tf_") else name
    return base if len(base) <= n else base[: n - 1] + "…"


def _dedupe(names: list[str]) -> list[str]:
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
