"""A performance regression gate over profiler traces: the pieces behind ``python -m
compare.gate BASELINE NEW``.

- :mod:`.runs`      what a side is: a trace, a profile, a folder of repeated runs, a baseline.
- :mod:`.samples`   a side as per-step samples, read from compare.run's account; runs pooled.
- :mod:`.baseline`  those samples saved as a small versioned JSON file, and read back.
- :mod:`.items`     what is checked: the step, each group (the step difference's terms), each
                    op (matched as ops_diff).
- :mod:`.stats`     the one-sided rank test over all items, the filter, Holm's method.
- :mod:`.judge`     each item's verdict and the outcome; :mod:`.model` the typed answer.
- :mod:`.render`    the answer as CI log lines, JSON and JUnit XML.

Library use::

    result = gate("base/trace.json.gz", "new/trace.json.gz", Settings(max_slowdown=0.05))
    result.outcome, result.regressions, result.exit_code()
    save_baseline("base/", "baseline.json")     # then gate("baseline.json", "new/")
"""
from __future__ import annotations

import dataclasses
import os

from compare.gating import baseline, runs
from compare.gating.judge import judge
from compare.gating.model import GateResult, Settings, SideInfo
from compare.gating.samples import SideSamples

__all__ = ["GateResult", "Saved", "Settings", "gate", "read_side", "save_baseline"]

read_side = runs.read_side


def gate(baseline_path: str | os.PathLike, new_path: str | os.PathLike,
         settings: Settings = Settings(), labels: dict[str, str] | None = None,
         max_memory: int | None = None) -> GateResult:
    """Gate ``new_path`` against ``baseline_path`` (each a trace, a profile, a folder of runs
    or a saved baseline); ``labels``: {"a": baseline's name, "b": new's}; ``max_memory``:
    bytes each trace's load may take (default: the memory available)."""
    names = labels or {"a": "baseline", "b": "new"}
    sides = {"a": read_side(baseline_path, max_memory), "b": read_side(new_path, max_memory)}
    info = {k: side_info(names[k], s, baseline.is_baseline(p))
            for (k, s), p in zip(sides.items(), (baseline_path, new_path))}
    return judge(sides["a"], sides["b"], settings, info)


def side_info(label: str, s: SideSamples, from_file: bool) -> SideInfo:
    return SideInfo(label, [r.source for r in s.runs], len(s.runs), s.steps, from_file,
                    [w for r in s.runs for w in r.warnings])


@dataclasses.dataclass
class Saved:
    """What ``--save-baseline`` kept."""

    path: str
    bytes: int
    runs: int
    steps: int
    terms: int
    ops: int


def save_baseline(trace: str | os.PathLike, out: str | os.PathLike,
                  max_memory: int | None = None) -> Saved:
    """Keep the per-step samples of ``trace`` (any side the gate reads) in ``out``."""
    s = read_side(trace, max_memory)
    size = baseline.write(s, out)
    return Saved(str(out), size, len(s.runs), s.steps, len(s.terms), len(s.ops))
