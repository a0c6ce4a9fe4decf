"""The ``xla_clusters.json`` our legacy runs write beside their timelines: the TF ops inside
each XLA cluster, keyed for each timeline file (see :mod:`legacy.xla_clusters`)."""
from __future__ import annotations

import json
from pathlib import Path

from compare.model.events import Trace


def attach(trace: Trace, path: Path) -> None:
    """Our legacy runs write ``xla_clusters.json`` beside their timelines: the TF ops inside
    each XLA cluster, keyed for each timeline file (see :mod:`legacy.xla_clusters`)."""
    side = path.parent / "xla_clusters.json"
    if not side.is_file():
        return
    try:
        doc = json.loads(side.read_text())
        aliases = doc["timelines"][path.name]["aliases"]
        clusters = doc["clusters"]
        trace.meta["xla_members"] = {mine: [tuple(op) for op in clusters.get(ref, [])]
                                     for mine, ref in aliases.items()}
        trace.meta["xla_aliases"] = dict(aliases)  # this timeline's cluster -> the profile's
    except (OSError, ValueError, KeyError, TypeError):
        trace.warnings.append(f"{side.name} beside the timeline is unreadable; XLA cluster "
                              f"contents unknown")
