"""``stages.png`` (where a steady step's time goes, both runs) and ``timelines.png`` (one steady
step of each run, lane by lane), in the stage colours of :mod:`compare.output.colors`."""
from __future__ import annotations

import io
import os

import numpy as np
from matplotlib.figure import Figure  # no pyplot: no backend, nothing global changed
from matplotlib.patches import Patch

from common import atomic
from compare.analysis.comparison import Comparison
from compare.fmt import fit
from compare.output.colors import rgb01
from compare.output.step_timeline import StepTimeline
from compare.vocabulary.groups import GROUPS
from compare.vocabulary.labels import LABELS

_ORDER = [s for s in LABELS if s != "unmapped"] + ["unmapped"]


def _save(fig, path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic.write_bytes(path, buf.getvalue())


#: compute rows (one per top-level scope) drawn in stages.png's generic version; the rest
#: are added up in one row.
PLOT_COMPUTE_ROWS = 10
#: ... and only those with this share of the slower step.
PLOT_ROW_SHARE = 0.005


def _stage_values(c: Comparison) -> dict[str, tuple[float, float]]:
    values = {row.stage: (row.cells["legacy"].us / 1e3, row.cells["modern"].us / 1e3)
              for row in c.stages if row.cells["legacy"].us > 0 or row.cells["modern"].us > 0}
    um = {k: s.unmapped_us for k, s in c.sides.items()}
    if um["legacy"] or um["modern"]:
        values["unmapped"] = (um["legacy"] / 1e3, um["modern"] / 1e3)
    return {s: values[s] for s in _ORDER if s in values}


def _group_values(c: Comparison) -> dict[str, tuple[float, float]]:
    """The generic view's rows in their order, the compute rows beyond the largest
    :data:`PLOT_COMPUTE_ROWS` added up in one."""
    values: dict[str, tuple[float, float]] = {}
    step = max(s.steps.median_us for s in c.sides.values())
    compute = [r for r in c.groups if r.group == "compute"]
    # the largest scopes, each at least PLOT_ROW_SHARE of the step; the rest in one row
    shown = [r for r in compute if max(x.us for x in r.cells.values()) >=
             PLOT_ROW_SHARE * step][:PLOT_COMPUTE_ROWS]
    rest = [r for r in compute if r not in shown]
    for r in c.groups:
        if r in rest:   # compute rows come largest first: the rest in one row, where they begin
            if r is rest[0]:
                values[f"compute: {len(rest)} more scope(s)"] = tuple(
                    sum(x.cells[k].us for x in rest) / 1e3 for k in ("legacy", "modern"))
            continue
        a, b = r.cells["legacy"].us / 1e3, r.cells["modern"].us / 1e3
        if a > 0 or b > 0:
            values[r.key] = (a, b)
    return values


def _parts(c: Comparison, side: str) -> list[tuple[str, float]]:
    """The representative step's split (ms) in the comparison's view: by stage, or by group
    (compute scopes together)."""
    rep = c.sides[side].steps.representative
    if c.view == "stages":
        return [(s, rep.stages_us.get(s, 0.0) / 1e3) for s in _ORDER]
    by_group: dict[str, float] = {}
    for key, us in rep.groups_us.items():
        g = key.partition(":")[0]
        by_group[g] = by_group.get(g, 0.0) + us / 1e3
    return [(g, by_group[g]) for g in GROUPS[1:] + ("unmapped",) if g in by_group]


def stages_png(path: str | os.PathLike, c: Comparison) -> None:
    """Top: each run's representative steady step (closest to the median) as one bar split by
    stage, or by group when neither trace shows the seed's image pipeline (the comparison's
    view). Bottom: per stage (group row), the two runs' median wall time per steady step
    (ms), legacy solid, modern hatched."""
    view = c.view
    values = _stage_values(c) if view == "stages" else _group_values(c)
    stages = list(values)
    what = "stage" if view == "stages" else "group (the generic view)"
    fig = Figure(figsize=(11, 3.2 + 0.42 * len(stages)))
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [
        1.1, max(len(stages), 1) * 0.42]})
    parts = {side: _parts(c, side) if c.sides[side].steps.representative else []
             for side in ("legacy", "modern")}
    for y, side in enumerate(("legacy", "modern")):
        rep = c.sides[side].steps.representative
        if not rep:
            continue
        left = 0.0
        for s, v in parts[side]:
            if v <= 0:
                continue
            top.barh(y, v, left=left, color=rgb01(s, view), edgecolor="white", linewidth=0.5,
                     hatch="//" if side == "modern" else None)
            left += v
        top.text(left, y, f"  step {rep.step}: {rep.dur_us / 1e3:.1f} ms", va="center",
                 fontsize=9)
    top.set_yticks([0, 1], [c.label("legacy"), c.label("modern")])
    top.invert_yaxis()
    top.set_xlabel(f"the steady step closest to the median (ms), split by {what}, wall time")
    top.set_title("Where a steady step's time goes")
    if view == "groups":
        used = {g for ps in parts.values() for g, v in ps if v > 0}
        shown = [g for g in GROUPS[1:] + ("unmapped",) if g in used]
        top.legend(handles=[Patch(color=rgb01(g, view), label=g) for g in shown],
                   loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=min(len(shown), 10),
                   fontsize=7, frameon=False)
    y = np.arange(len(stages))
    h = 0.38
    leg = [values[s][0] for s in stages]
    mod = [values[s][1] for s in stages]
    colours = [rgb01(s, view) for s in stages]
    bottom.barh(y - h / 2, leg, h, color=colours, edgecolor="black", linewidth=0.4)
    bottom.barh(y + h / 2, mod, h, color=colours, edgecolor="black", linewidth=0.4, hatch="//",
                alpha=0.75)
    for yy, a, b in zip(y, leg, mod):
        bottom.text(max(a, 0), yy - h / 2, f" {a:.2f}", va="center", fontsize=7)
        bottom.text(max(b, 0), yy + h / 2, f" {b:.2f}", va="center", fontsize=7)
    bottom.set_yticks(y, [_fit(s) for s in stages])
    bottom.invert_yaxis()
    bottom.set_xlabel("ms per steady step (median; wall time, shared among concurrent threads)")
    bottom.legend(handles=[Patch(facecolor="white", edgecolor="black", label=c.label("legacy")),
                           Patch(facecolor="white", edgecolor="black", hatch="//",
                                 label=c.label("modern"))], loc="lower right", fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def _fit(name: str) -> str:
    return fit(name, 38)   # a bar label's width


def timelines_png(path: str | os.PathLike, timelines: dict[str, StepTimeline | None],
                  names: dict[str, str] | None = None) -> None:
    """One steady step (the one closest to the median) of each run, one row per thread/lane,
    the runs stacked on a shared time axis (ms from the step's start), as
    :mod:`compare.output.step_timeline` laid it out (the tab in TensorBoard draws the same
    data): a thread waiting for others is left blank, one waiting for input drawn faint;
    coloured by stage, or by group in the generic view."""
    side_names = names or {}
    data = {side: tl for side, tl in timelines.items() if tl is not None}
    view = next((tl.view for tl in data.values()), "stages")
    heights = [max(len(tl.lanes), 1) for tl in data.values()] or [1]
    fig = Figure(figsize=(12, 1.4 + 0.32 * sum(heights) + 0.9 * len(heights)))
    axes = fig.subplots(len(heights), 1, sharex=True, gridspec_kw={"height_ratios": heights},
                        squeeze=False)
    used = set()
    for ax, (side, tl) in zip(axes[:, 0], data.items()):
        for row, lane in enumerate(tl.lanes):
            bars: dict[tuple[str, bool], list] = {}
            for b in lane.bars:
                bars.setdefault((b.label, b.wait), []).append((b.start_us / 1e3, b.dur_us / 1e3))
            for (lab, wait), spans in bars.items():
                # waiting for input is drawn faint: the step's own time, not work
                ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=rgb01(lab, view),
                               alpha=0.3 if wait else 1.0)
                used.add((lab, wait) if wait else lab)
        lane_names = [lane.short for lane in tl.lanes]
        ax.set_yticks(range(len(lane_names)), lane_names, fontsize=7)
        ax.set_ylim(len(lane_names) - 0.5, -0.5)
        folded = tl.folded()
        ax.set_title(f"{side_names.get(side, side)}: step {tl.step}, {tl.dur_us / 1e3:.1f} ms "
                     f"(the steady step closest to the median)"
                     + (f"; {folded}" if folded else ""), fontsize=9, loc="left")
        ax.axvline(tl.dur_us / 1e3, color="black", linewidth=0.8, linestyle=":")
    axes[-1, 0].set_xlabel("ms from the step's start")
    order = [s for s in _ORDER] if view == "stages" else list(GROUPS[1:]) + ["unmapped"]
    handles = [Patch(color=rgb01(s, view), label=s) for s in order if s in used]
    handles += [Patch(color=rgb01(s, view), alpha=0.3, label=f"waiting for {s}".replace(
        "input_wait", "input")) for s in order if (s, True) in used]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 9) or 1, fontsize=7,
               frameon=False, bbox_to_anchor=(0.5, -0.01))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    _save(fig, path)
