"""What a comparison's report holds (:class:`Report`) and the files it is written to: the type
that report.json, report.md and the summary render, apart from :mod:`compare.output.report`,
which builds and writes it, so that they import it downward."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from compare.analysis.result import Comparison
from compare.output import step_timeline

FILES = {"report_md": "report.md", "report_json": "report.json", "stages_png": "stages.png",
         "step_delta_png": "step_delta.png", "timelines_png": "timelines.png",
         "merged_trace": "merged_trace.json.gz", "timelines_json": "timelines.json"}
#: What ``write(..., data_only=True)`` writes: the data, which the Pipeline compare tab draws.
DATA_FILES = ("report_json", "timelines_json")


@dataclasses.dataclass
class Report:
    """Everything report.json and report.md hold: the comparison, the seed's four questions
    answered for each side, the files and how to open them, and (when compare.run ran the
    pipelines) their run records and the phases' times."""

    comparison: Comparison
    answers: dict[str, dict[str, str]]      # side -> question key (and "summary") -> text
    files: dict[str, str]
    tensorboard: str | None = None
    screenshot: str | None = None
    runs: dict | None = None
    elapsed_s: dict[str, float] | None = None
    merged_trace: dict | None = None
    out: Path | None = None                 # the folder it was written into
    #: the verdict in words: "comparison" (the two together), "sides" (side -> its sentences)
    words: dict = dataclasses.field(default_factory=dict)
    timelines: dict[str, step_timeline.StepTimeline | None] | None = None  # one step per side
