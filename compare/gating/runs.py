"""What one side of the gate is: the runs a path holds, each read as compare.run reads a trace.

A side is anything compare.run reads — a trace file, a profile session, a folder above one,
one of our run folders — or a folder of several runs of the same program (repetitions),
whose steps are pooled:

- a folder that is not itself a trace and holds more than one profile session or trace:
  every trace file in it (``.json``, ``.json.gz``) is a run, and each folder in it is read the
  same way (a run folder, or its own repetitions): one TensorBoard run profiled several times
  gives one run per session.

A folder is itself a trace when it holds a ``timeline.json`` or ``trace.json.gz`` (our run
folders), or is a profile session: it holds ``<host>.xplane.pb`` files, or one
``<host>.trace.json.gz``, or several in a folder named as the profiler names sessions (the time,
``2024_01_31_12_00_00``); there, as compare.run reads it, each file is one host of the same run.
Several ``*.trace.json.gz`` files in a folder named otherwise are repetitions.

A compare.run report folder holds two sides (``legacy/``, ``modern/`` or A and B): it is
refused with a line naming one side's folder. A baseline saved by ``--save-baseline`` is read
instead (:mod:`compare.gating.baseline`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from common.errors import InputError
from compare.analysis.comparison import side
from compare.gating import baseline
from compare.gating.samples import SideSamples, of_side, pooled
from compare.load import LoadError, load
from compare.load.xplane import HOST_TRACE_SUFFIX, SESSION_PATTERNS, TIMELINE_NAMES, XPLANE_SUFFIX

#: File names a folder of repetitions may hold as traces (others are not runs).
TRACE_SUFFIXES = (".json", ".json.gz")
#: How the profiler names a session folder: the time it was written.
SESSION_NAME = re.compile(r"\d{4}(_\d{2}){5}")


def runs_of(path: str | os.PathLike) -> list[Path]:
    """The runs ``path`` holds, in name order (see the module docstring)."""
    p = Path(path)
    if not p.exists():
        raise LoadError(f"{path}: no such file or folder")
    if p.is_file():
        return [p]
    if (p / "report.json").is_file():
        sides = sorted(c.name for c in p.iterdir() if c.is_dir() and not c.name.startswith("."))
        one = f", e.g. {p / sides[0]}" if sides else ""
        raise InputError(f"{p}: a compare.run report folder, which holds both sides of a "
                         f"comparison; give one side's run folder{one}")
    if _holds_session(p) or any((p / t).is_file() for t in TIMELINE_NAMES):
        return [p]
    entries = [c for c in sorted(p.iterdir()) if not c.name.startswith(".")]
    files = [c for c in entries if c.is_file() and c.name.endswith(TRACE_SUFFIXES)]
    if not files and len(_sessions(p)) == 1:
        return [p]                                   # a run folder, a logdir of one run
    runs = files + [r for c in entries if c.is_dir() and _holds_trace(c) for r in runs_of(c)]
    if not runs:
        raise LoadError(f"{p}: folder holds no trace, profile session or folder of runs")
    return runs


def _holds_session(p: Path) -> bool:
    """``p`` is a profile session (see the module docstring)."""
    if any(p.glob("*" + XPLANE_SUFFIX)):
        return True
    hosts = list(p.glob("*" + HOST_TRACE_SUFFIX))
    return len(hosts) == 1 or (len(hosts) > 1 and SESSION_NAME.fullmatch(p.name) is not None)


def _sessions(p: Path) -> list[Path]:
    """Every profile session folder below ``p`` (as the loader finds them)."""
    return sorted({x.parent for pattern in SESSION_PATTERNS
                   for suffix in (XPLANE_SUFFIX, HOST_TRACE_SUFFIX)
                   for x in p.glob(pattern + "*" + suffix)})


def _holds_trace(p: Path) -> bool:
    return _holds_session(p) or bool(_sessions(p)) or \
        any(c.is_file() and c.name.endswith(TRACE_SUFFIXES) for c in p.iterdir())


def read_side(path: str | os.PathLike, max_memory: int | None = None) -> SideSamples:
    """A side's samples: a saved baseline as saved, else its runs loaded and pooled (each
    run's load refused past ``max_memory`` bytes, default the memory available)."""
    if baseline.is_baseline(path):
        return baseline.read(path)
    return pooled([of_side(side("gate", load(run, max_memory)), str(run))
                   for run in runs_of(path)])


def is_trace(path: str | os.PathLike) -> bool:
    """``path`` is a trace or runs of one, not a saved baseline."""
    return not baseline.is_baseline(path)
