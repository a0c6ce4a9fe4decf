"""The stage vocabulary shared by both pipelines and the op mapper.

Both pipelines open one ``tf.name_scope`` per stage (``crop_3``, ``brightness_2``, ...), so the
node names in their traces carry the stage; ``compare`` reads it back with :func:`stage_of_scope`.
"""
from __future__ import annotations

import re

#: The eleven pipeline stages, in pipeline order.
PIPELINE_STAGES: tuple[str, ...] = (
    "read", "decode", "resize", "crop", "flip", "brightness", "saturation", "contrast",
    "clip", "assemble", "shuffle",
)
#: Time that is not one stage's work.
OVERHEAD_CATEGORIES: tuple[str, ...] = (
    "xla_compile", "xla_run", "input_wait", "runtime", "idle",
)
ALL_STAGES: tuple[str, ...] = PIPELINE_STAGES + OVERHEAD_CATEGORIES

#: Number of random crops per image, as in the seed: crop 0 is plain, crops 1..4 are jittered.
NUM_CROPS = 5
CROP_SIZE = (221, 221, 3)
SHORT_SIDE = 256

_SCOPE_RE = re.compile(r"^(%s)(?:_\d+)*$" % "|".join(PIPELINE_STAGES))


def scope(stage: str, index: int | None = None) -> str:
    """The name-scope string for ``stage`` (optionally numbered), e.g. ``scope('crop', 3)``."""
    if stage not in PIPELINE_STAGES:
        raise ValueError(f"unknown stage {stage!r}")
    return stage if index is None else f"{stage}_{index}"


def stage_of_scope(tf_name: str) -> str | None:
    """The stage named by the outermost scope of our own that ``tf_name`` carries, or None.

    Scopes are searched outside-in, so ``cluster_1_1/brightness_2/add`` and
    ``augment/saturation_3/AdjustSaturation`` both resolve; TF's uniquifying suffixes
    (``clip_1_2``) are accepted.
    """
    for part in tf_name.split("/")[:-1] if "/" in tf_name else ():
        m = _SCOPE_RE.match(part)
        if m:
            return m.group(1)
    return None
