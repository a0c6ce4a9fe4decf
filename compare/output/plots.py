"""``stages.png`` (where a steady step's time goes, both runs: the tables' means),
``step_delta.png`` (the step difference, term by term, as a waterfall) and ``timelines.png`` (one
real steady step of each run, lane by lane), in the colours of :mod:`compare.output.colors`."""
from __future__ import annotations

import io
import os

import numpy as np
from matplotlib.figure import Figure  # no pyplot: no backend, nothing global changed
from matplotlib.patches import Patch

from common import atomic
from compare.analysis.result import Comparison
from compare.fmt import duration, fit
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
    values = {row.stage: (row.cells["a"].us / 1e3, row.cells["b"].us / 1e3)
              for row in c.stages if row.cells["a"].us > 0 or row.cells["b"].us > 0}
    um = {k: s.unmapped_us for k, s in c.sides.items()}
    if um["a"] or um["b"]:
        values["unmapped"] = (um["a"] / 1e3, um["b"] / 1e3)
    return {s: values[s] for s in _ORDER if s in values}


def _group_values(c: Comparison) -> dict[str, tuple[float, float]]:
    """The generic view's rows in their order, the compute rows beyond the largest
    :data:`PLOT_COMPUTE_ROWS` added up in one."""
    values: dict[str, tuple[float, float]] = {}
    step = max(s.steps.mean_us for s in c.sides.values())
    compute = [r for r in c.groups if r.group == "compute"]
    # the largest scopes, each at least PLOT_ROW_SHARE of the step; the rest in one row
    shown = [r for r in compute if max(x.us for x in r.cells.values()) >=
             PLOT_ROW_SHARE * step][:PLOT_COMPUTE_ROWS]
    rest = [r for r in compute if r not in shown]
    for r in c.groups:
        if r in rest:   # compute rows come largest first: the rest in one row, where they begin
            if r is rest[0]:
                values[f"compute: {len(rest)} more scope(s)"] = tuple(
                    sum(x.cells[k].us for x in rest) / 1e3 for k in ("a", "b"))
            continue
        a, b = r.cells["a"].us / 1e3, r.cells["b"].us / 1e3
        if a > 0 or b > 0:
            values[r.key] = (a, b)
    return values


def _parts(c: Comparison, side: str) -> list[tuple[str, float]]:
    """The mean steady step's split (ms) in the comparison's view: by stage (its table's
    rows), or by group (the group table's rows, compute scopes together)."""
    if c.view == "stages":
        cells = {row.stage: row.cells[side].us for row in c.stages}
        cells["unmapped"] = c.sides[side].unmapped_us
        return [(s, cells.get(s, 0.0) / 1e3) for s in _ORDER]
    by_group: dict[str, float] = {}
    for r in c.groups:
        by_group[r.group] = by_group.get(r.group, 0.0) + r.cells[side].us / 1e3
    return [(g, by_group[g]) for g in GROUPS[1:] + ("unmapped", "untraced") if g in by_group]


def stages_png(path: str | os.PathLike, c: Comparison) -> None:
    """Top: each run's mean steady step as one bar split by stage, or by group when neither
    trace shows the seed's image pipeline (the comparison's view): the same numbers as the
    tables. Bottom: per stage (group row), the two runs' mean wall time per steady step (ms),
    A solid, B hatched."""
    view = c.view
    values = _stage_values(c) if view == "stages" else _group_values(c)
    stages = list(values)
    what = "stage" if view == "stages" else "group (the generic view)"
    fig = Figure(figsize=(11, 3.2 + 0.42 * len(stages)))
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [
        1.1, max(len(stages), 1) * 0.42]})
    parts = {side: _parts(c, side) for side in ("a", "b")}
    for y, side in enumerate(("a", "b")):
        left = 0.0
        for s, v in parts[side]:
            if v <= 0:
                continue
            top.barh(y, v, left=left, color=rgb01(s, view), edgecolor="white", linewidth=0.5,
                     hatch="//" if side == "b" else None)
            left += v
        st = c.sides[side].steps
        top.text(left, y, f"  {st.mean_us / 1e3:.2f} ms (mean of {st.steady_count})",
                 va="center", fontsize=9)
    top.set_yticks([0, 1], [c.label("a"), c.label("b")])
    top.invert_yaxis()
    top.set_xlabel(f"the mean steady step (ms), split by {what}, wall time")
    top.set_title("Where a steady step's time goes")
    if view == "groups":
        used = {g for ps in parts.values() for g, v in ps if v > 0}
        shown = [g for g in GROUPS[1:] + ("unmapped", "untraced") if g in used]
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
    bottom.set_xlabel("ms per steady step (mean; wall time, shared among concurrent threads)")
    bottom.legend(handles=[Patch(facecolor="white", edgecolor="black", label=c.label("a")),
                           Patch(facecolor="white", edgecolor="black", hatch="//",
                                 label=c.label("b"))], loc="lower right", fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def step_delta_png(path: str | os.PathLike, c: Comparison) -> None:
    """The step difference as a waterfall: A's mean step, each term's change (longer: red,
    shorter: green), B's mean step; the terms' labels name the ops behind them."""
    d = c.step_delta
    terms = [t for t in d.terms if abs(t.delta_us) >= 0.0005 * max(d.a_us, d.b_us, 1.0)]
    fig = Figure(figsize=(11, 1.6 + 0.36 * (len(terms) + 2)))
    ax = fig.subplots()
    names = [f"{c.label('a')} (mean step)"]
    left = [0.0]
    width = [d.a_us / 1e3]
    colours = ["#8c8c8c"]
    run = d.a_us
    for t in terms:
        start, end = run, run + t.delta_us
        names.append(_fit(_term_label(c, t)))
        left.append(min(start, end) / 1e3)
        width.append(abs(t.delta_us) / 1e3)
        colours.append("#d62728" if t.delta_us > 0 else "#2ca02c")
        run = end
    names.append(f"{c.label('b')} (mean step)")
    left.append(0.0)
    width.append(d.b_us / 1e3)
    colours.append("#8c8c8c")
    y = np.arange(len(names))
    ax.barh(y, width, left=left, color=colours, edgecolor="black", linewidth=0.4)
    for yy, lft, w, t in zip(y[1:-1], left[1:-1], width[1:-1], terms):
        ax.text(lft + w, yy, f" {'+' if t.delta_us > 0 else '-'}{duration(abs(t.delta_us))}",
                va="center", fontsize=7)
    ax.text(width[0], 0, f" {duration(d.a_us)}", va="center", fontsize=7)
    ax.text(width[-1], y[-1], f" {duration(d.b_us)}", va="center", fontsize=7)
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    basis = "mean traced span" if d.basis == "traced" else "mean steady step"
    ax.set_xlabel(f"ms ({basis}; each term a group's wall time per step)")
    ax.set_title(f"The step difference, {'+' if d.delta_us > 0 else '-'}"
                 f"{duration(abs(d.delta_us))}, term by term (they add up to it)")
    fig.tight_layout()
    _save(fig, path)


def _term_label(c: Comparison, t) -> str:
    ops = [c.ops_diff[o.row].op.rpartition("/")[2] for o in t.ops[:2]]
    return t.key + (f": {', '.join(ops)}" if ops else "")


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
                     f"(one real step: the steady step closest to the median, not an average)"
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
