"""The comparison's artifacts in a run folder: ``report.md``, ``report.json`` (validated against
``compare/output/report.schema.json`` in the tests), ``stages.png``, ``step_delta.png``,
``timelines.png``, ``merged_trace.json.gz``, and ``timelines.json`` (the data ``timelines.png``
draws, which the Pipeline compare tab in TensorBoard draws too).

They are written into a staging folder and moved into place together at the end, so an
interrupted run leaves either the whole report or none of it.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

from common import atomic
from compare.analysis.explanation import explain
from compare.analysis.opkeys import event_keys
from compare.analysis.result import SIDES, Comparison
from compare.analysis.side import Side
from compare.output import (
    compare_words,
    explain_text,
    merged_trace,
    report_json,
    report_md,
    step_timeline,
)
from compare.output.report_data import DATA_FILES, FILES, Report
from compare.output.stage_order import stage_order

SCHEMA_PATH = Path(__file__).with_name("report.schema.json")


def answers(side: Side) -> dict[str, str]:
    """The seed's four questions answered for one side by compare.explain (for a steady step,
    with the XLA summary the side already holds), plus ``summary``; the sequence answer starts
    with the order of the stages' work in that step."""
    out = explain_text.answers(explain(side.trace, xla=side.xla))
    out["sequence"] = stage_order(side) + "\n\n" + out["sequence"]
    return out


def build(comparison: Comparison, sides: dict[str, Side], tensorboard_logdir: str | None = None,
          screenshot: str | None = None) -> Report:
    """``sides``: the two sides, A then B; ``screenshot``: the file name of TensorBoard's
    profile tab saved beside report.md."""
    sides = _keyed(sides)
    words = {"comparison": compare_words.comparison_text(comparison),
             "sides": {k: compare_words.side_text(comparison, k) for k in sides}}
    report = Report(comparison, {k: answers(s) for k, s in sides.items()}, dict(FILES),
                    f"tensorboard --logdir {tensorboard_logdir}" if tensorboard_logdir else None,
                    screenshot, words=words)
    report.timelines = step_timeline.build({k: s.attribution for k, s in sides.items()},
                                           _groups(comparison, sides))
    return report


def _keyed(sides: dict[str, Side]) -> dict[str, Side]:
    """The sides keyed as the comparison keys them (A, B in order)."""
    return dict(zip(SIDES, sides.values()))


def _groups(c: Comparison, sides: dict[str, Side]) -> dict | None:
    """The generic view's groups colour the pictures when no side shows the seed's stages."""
    return {k: s.groups for k, s in sides.items()} if c.view == "groups" else None


def _matches(c: Comparison, sides: dict[str, Side]) -> dict[str, dict[int, str]]:
    """Per side, event -> the ``ops_diff`` row (same, changed or fused) its op belongs to."""
    out = {}
    for k, s in sides.items():
        row_of = {key: r.op for r in c.ops_diff
                  if r.status in ("same", "changed", "fused", "unfused")
                  for key in r.keys.get(k, ())}
        out[k] = {i: row_of[key] for i, key in event_keys(s.analysis).items() if key in row_of}
    return out


def write(out: str | os.PathLike, report: Report, sides: dict[str, Side],
          data_only: bool = False,
          progress: Callable[[str], None] = lambda text: None) -> list[Path]:
    """Write every artifact into ``out`` (all or nothing); returns the paths written.
    ``data_only``: report.json and timelines.json alone (:data:`DATA_FILES`). ``progress`` is
    told each file (or pair of files) before it is written."""
    out = Path(out)
    sides = _keyed(sides)
    staging = out / f".report-staging-{os.getpid()}"
    staging.mkdir(parents=True, exist_ok=False)
    try:
        c = report.comparison
        if data_only:
            report.files = {k: v for k, v in report.files.items() if k in DATA_FILES}
        else:
            _pictures(staging, report, sides, progress)
        progress(f"{FILES['report_json']}, {FILES['timelines_json']}" +
                 ("" if data_only else f", {FILES['report_md']}") + " ...")
        if not data_only:
            atomic.write_text(staging / FILES["report_md"], report_md.render(report))
        atomic.write_text(staging / FILES["timelines_json"],   # compact: thousands of bars
                          json.dumps(step_timeline.to_json(report.timelines, c.labels),
                                     separators=(",", ":")))
        atomic.write_json(staging / FILES["report_json"], report_json.to_json(report))
        written = atomic.move_into(staging, out)
        report.out = out
        return written
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _pictures(staging: Path, report: Report, sides: dict[str, Side],
              progress: Callable[[str], None]) -> None:
    """merged_trace.json.gz, stages.png, step_delta.png and timelines.png."""
    from compare.output import plots  # lazy: matplotlib, which data-only reports never need

    c = report.comparison
    runs = {k: s.attribution for k, s in sides.items()}
    n = sum(len(s.trace.events) for s in sides.values())
    progress(f"{FILES['merged_trace']} ({n:,} events in all) ...")
    report.merged_trace = merged_trace.write(staging / FILES["merged_trace"], runs, c.labels,
                                             _matches(c, sides), _groups(c, sides))
    progress(f"{FILES['stages_png']}, {FILES['timelines_png']} ...")
    plots.stages_png(staging / FILES["stages_png"], c)
    if c.step_delta is not None:
        plots.step_delta_png(staging / FILES["step_delta_png"], c)
    plots.timelines_png(staging / FILES["timelines_png"], report.timelines, c.labels)
