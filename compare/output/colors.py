"""One colour per stage, the same in every artifact.

Chrome's trace viewer (chrome://tracing, and TensorBoard's) colours an event by its ``cname``,
which must be one of catapult's reserved colour names; the PNGs use the same RGB values, so a
stage looks alike in the plots and the merged trace. Perfetto ignores ``cname`` and colours by
event name, which is why the merged trace also carries a stage row per lane whose events are
named by stage.
"""
from __future__ import annotations

import zlib

from compare.vocabulary.groups import GROUPS
from compare.vocabulary.labels import LABELS

#: label -> (catapult reserved colour name, RGB)
STAGE_COLORS: dict[str, tuple[str, tuple[int, int, int]]] = {
    "read": ("thread_state_iowait", (255, 140, 0)),
    "decode": ("rail_animation", (244, 74, 63)),
    "resize": ("detailed_memory_dump", (180, 0, 180)),
    "crop": ("thread_state_runnable", (133, 160, 210)),
    "flip": ("background_memory_dump", (0, 180, 180)),
    "brightness": ("startup", (230, 230, 0)),
    "saturation": ("rail_response", (67, 135, 253)),
    "contrast": ("good", (0, 125, 0)),
    "clip": ("olive", (100, 100, 0)),
    "assemble": ("thread_state_unknown", (199, 155, 125)),
    "shuffle": ("thread_state_uninterruptible", (182, 125, 143)),
    "xla_compile": ("terrible", (180, 0, 0)),
    "xla_run": ("cq_build_passed", (153, 238, 102)),
    "input_wait": ("light_memory_dump", (0, 0, 180)),
    "runtime": ("generic_work", (125, 125, 125)),
    "idle": ("grey", (221, 221, 221)),
    "unmapped": ("black", (0, 0, 0)),
}
assert set(STAGE_COLORS) == set(LABELS)

#: group of the generic view -> (catapult reserved colour name, RGB); every ``compute`` row
#: (one per top-level scope) shares the compute colour.
GROUP_COLORS: dict[str, tuple[str, tuple[int, int, int]]] = {
    "input": ("light_memory_dump", (0, 0, 180)),
    "preprocessing": ("rail_animation", (244, 74, 63)),
    "compute": ("rail_load", (13, 168, 97)),
    "optimizer": ("rail_response", (67, 135, 253)),
    "communication": ("rail_idle", (238, 142, 0)),
    "copy": ("background_memory_dump", (0, 180, 180)),
    "xla_compile": ("terrible", (180, 0, 0)),
    "xla_run": ("cq_build_passed", (153, 238, 102)),
    "runtime": ("generic_work", (125, 125, 125)),
    "idle": ("grey", (221, 221, 221)),
    "unmapped": ("black", (0, 0, 0)),
    # a step window's edges with nothing traced (the account's ``untraced`` row)
    "untraced": ("white", (245, 245, 245)),
}
assert set(GROUP_COLORS) == set(GROUPS) | {"untraced"}


#: Catapult colour names for ops matched across the two runs (both sides' events of one
#: ``ops_diff`` row get the same one).
MATCH_PALETTE = ("thread_state_running", "thread_state_sleeping", "rail_idle", "rail_load",
                 "vsync_highlight_color", "heap_dump_stack_frame", "heap_dump_object_type",
                 "cq_build_running", "cq_build_failed", "cq_build_abandoned", "bad", "yellow",
                 "cq_build_attempt_passed", "cq_build_attempt_failed")


def match_cname(key: str) -> str:
    """The colour of a matched op, stable across runs and sides (a hash of its name)."""
    return MATCH_PALETTE[zlib.crc32(key.encode()) % len(MATCH_PALETTE)]


def _table(view: str) -> dict[str, tuple[str, tuple[int, int, int]]]:
    return GROUP_COLORS if view == "groups" else STAGE_COLORS


def cname(label: str, view: str = "stages") -> str:
    """The catapult colour name of a stage (``view="stages"``) or of a group (``"groups"``,
    a ``compute: <scope>`` row taking the compute colour)."""
    return _table(view)[label.partition(":")[0]][0]


def rgb01(label: str, view: str = "stages") -> tuple[float, float, float]:
    """The stage's (or group's) colour as matplotlib wants it."""
    r, g, b = _table(view)[label.partition(":")[0]][1]
    return (r / 255, g / 255, b / 255)
