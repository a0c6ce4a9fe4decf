"""The seed's augmentation as numbers: ranges, sizes and the layout of its output.

Both pipelines follow this spec; the equivalence tests drive both with the same explicit
random draws (:class:`Draws`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from common.stages import CROP_SIZE, NUM_CROPS

BRIGHTNESS_MAX_DELTA = 100.0 / 255.0
SATURATION_RANGE = (0.2, 2.0)
CONTRAST_RANGE = (0.2, 2.0)
NUM_JITTERED = NUM_CROPS - 1
OUTPUT_SHAPE = (2 * NUM_CROPS,) + CROP_SIZE

#: Row order of the assembled tensor before the shuffle. The seed builds
#: ``out = stack([crop0, flip0])`` then, for i = 1..4, ``out = concat([stack([aug_i, flip_i]), out])``,
#: so the newest crop comes first: rows (2k, 2k+1) hold crop ``4 - k`` and its mirror.
ASSEMBLY_ORDER = tuple(c for i in range(NUM_CROPS - 1, -1, -1) for c in (i, i))


@dataclasses.dataclass(frozen=True)
class Draws:
    """Every random number one image's augmentation uses.

    crop_offsets: int32 [5, 2] (row, col) of each 221x221 crop's top-left corner, crop 0 first.
    brightness, saturation, contrast: float32 [4], for jittered crops 1..4.
    permutation: int32 [10], output row j is assembled row ``permutation[j]``.
    """

    crop_offsets: np.ndarray
    brightness: np.ndarray
    saturation: np.ndarray
    contrast: np.ndarray
    permutation: np.ndarray

    @staticmethod
    def sample(rng: np.random.Generator, image_hw: tuple[int, int]) -> "Draws":
        """Draws with the seed's distributions for an image of the given resized size."""
        h, w = image_hw
        ch, cw, _ = CROP_SIZE
        return Draws(
            crop_offsets=np.stack([rng.integers(0, h - ch + 1, NUM_CROPS),
                                   rng.integers(0, w - cw + 1, NUM_CROPS)], 1).astype(np.int32),
            brightness=rng.uniform(-BRIGHTNESS_MAX_DELTA, BRIGHTNESS_MAX_DELTA,
                                   NUM_JITTERED).astype(np.float32),
            saturation=rng.uniform(*SATURATION_RANGE, NUM_JITTERED).astype(np.float32),
            contrast=rng.uniform(*CONTRAST_RANGE, NUM_JITTERED).astype(np.float32),
            permutation=rng.permutation(2 * NUM_CROPS).astype(np.int32),
        )
