"""Load any trace we read into the one event model (:class:`compare.model.events.Trace`).

Formats, detected from content, never from the file name:

- timeline.py JSON (TF1 and TF2 ``tensorflow.python.client.timeline``; CPU and GPU rows);
- Chrome trace JSON, plain or gzip (as xprof's trace_viewer writes it, or any other tool);
- TensorBoard profiles: an ``.xplane.pb`` file, a profile session folder, or a logdir — read
  through xprof's own converter (``raw_to_tool_data.xspace_to_tool_data(..., "trace_viewer")``),
  plus the HLO modules in the xplane's ``/host:metadata`` plane (see :mod:`common.hlo`).

Every failure is a :class:`LoadError` (an :class:`common.errors.InputError`): one line naming
the input and the formats we read. Partly usable input loads with ``Trace.warnings`` saying
what was skipped.
"""
from __future__ import annotations

import os
from pathlib import Path

from compare.load import budget
from compare.load.errors import FORMATS_WE_READ, LoadError
from compare.load.json_trace import load_json_file
from compare.load.xplane import load_dir, load_xplanes
from compare.model.events import Trace

__all__ = ["FORMATS_WE_READ", "LoadError", "load"]


def load(path: str | os.PathLike, max_memory: int | None = None) -> Trace:
    """Load a trace file or folder of any supported format (from its content). A trace whose
    load would take more memory than ``max_memory`` bytes (default: what the machine has
    available) is refused before it is read (:mod:`compare.load.budget`)."""
    p = Path(path)
    if not p.exists():
        raise LoadError(f"{path}: no such file or folder")
    if p.is_dir():
        return load_dir(p, max_memory)
    try:
        with open(p, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise LoadError(f"{path}: cannot read ({e.strerror})") from None
    if not head:
        raise LoadError(f"{path}: empty file; we read {FORMATS_WE_READ}")
    budget.check([p], str(path), max_memory)
    first = head.lstrip()[:1]
    if head[:2] == b"\x1f\x8b" or first in (b"{", b"[") or head.strip() == b"":
        return load_json_file(p)
    return load_xplanes([str(p)], str(p))
