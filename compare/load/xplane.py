"""TensorBoard profiles: an ``.xplane.pb``, a session folder or a logdir, read through xprof's
own converter (``raw_to_tool_data.xspace_to_tool_data(..., "trace_viewer")``), with the HLO
modules of the xplane's ``/host:metadata`` plane (:mod:`common.hlo`)."""
from __future__ import annotations

import os
from pathlib import Path

from common import hlo
from common.errors import InputError
from compare.load.errors import FORMATS_WE_READ, LoadError
from compare.load.json_trace import load_json_bytes, load_json_file
from compare.model.events import Trace


def load_dir(p: Path) -> Trace:
    xplanes = sorted(p.glob("*.xplane.pb"))
    if not xplanes:
        sessions = sorted({x.parent for x in p.glob("**/plugins/profile/*/*.xplane.pb")})
        if not sessions:
            timelines = [t for t in ("timeline.json", "trace.json.gz") if (p / t).is_file()]
            if timelines:
                return load_json_file(p / timelines[0])
            raise LoadError(f"{p}: folder holds no .xplane.pb profile (and no timeline.json); "
                            f"we read {FORMATS_WE_READ}")
        runs = sorted({str(s.parent.parent.parent) for s in sessions})
        if len(runs) > 1:
            names = ", ".join(os.path.relpath(r, p) for r in runs)
            raise LoadError(f"{p}: holds several runs ({names}); pass one of them")
        xplanes = sorted(sessions[-1].glob("*.xplane.pb"))
    return load_xplanes([str(x) for x in xplanes], str(p))


def load_xplanes(paths: list[str], source: str) -> Trace:
    try:  # also validates the files are XSpaces
        modules = hlo.modules_from_xplanes(paths, source)
    except InputError as e:
        raise LoadError(f"{e}; we read {FORMATS_WE_READ}" if "not JSON" in str(e) else str(e)) from None
    try:
        from xprof.convert import raw_to_tool_data  # lazy: loads xprof's native library

        data, _ = raw_to_tool_data.xspace_to_tool_data(paths, "trace_viewer", {})
    except Exception as e:  # xprof raises assorted types; any of them means unusable input
        raise LoadError(f"{source}: xprof could not convert it ({str(e).splitlines()[0][:200]})"
                        ) from None
    if not data:
        raise LoadError(f"{source}: xprof produced no trace events")
    trace = load_json_bytes(data.encode("utf-8") if isinstance(data, str) else data, source)
    trace.format = "xprof"
    trace.hlo = modules
    trace.meta["xplane_files"] = paths
    return trace
