"""Image sets for benchmarks and tests: JPEGs of varied sizes and aspect ratios, made with
TensorFlow from matplotlib's ``grace_hopper.jpg`` (so any machine can make them, no download)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from common import atomic
from common.inputs import default_image


def varied_sizes(n: int, seed: int = 0, short=(256, 640), aspect=(1.0, 2.0)) -> list[tuple[int, int]]:
    """``n`` (height, width) pairs: short side uniform in ``short``, long/short uniform in
    ``aspect``, alternating portrait and landscape."""
    rng = np.random.default_rng(seed)
    sizes = []
    for i in range(n):
        s = int(rng.integers(short[0], short[1] + 1))
        l = max(s, int(round(s * rng.uniform(*aspect))))
        sizes.append((l, s) if i % 2 == 0 else (s, l))
    return sizes


def make_image_set(folder: str | os.PathLike, sizes: list[tuple[int, int]], seed: int = 0,
                   quality: int = 90) -> list[str]:
    """Write one JPEG per (height, width) into ``folder``: a random window of grace_hopper.jpg
    (at least half of each side) resized to that size. Returns the paths, in order."""
    import tensorflow as tf  # lazy: imports TensorFlow


    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    src = tf.io.decode_jpeg(tf.io.read_file(default_image()), channels=3)
    sh, sw = int(src.shape[0]), int(src.shape[1])
    rng = np.random.default_rng(seed)
    paths = []
    for i, (h, w) in enumerate(sizes):
        ch = int(rng.integers(sh // 2, sh + 1))
        cw = int(rng.integers(sw // 2, sw + 1))
        top, left = int(rng.integers(0, sh - ch + 1)), int(rng.integers(0, sw - cw + 1))
        window = src[top:top + ch, left:left + cw]
        img = tf.cast(tf.clip_by_value(tf.round(tf.image.resize(window, (h, w))), 0, 255), tf.uint8)
        path = folder / f"img_{i:03d}_{h}x{w}.jpg"
        atomic.write_bytes(path, tf.io.encode_jpeg(img, quality=quality).numpy())
        paths.append(str(path))
    return paths
