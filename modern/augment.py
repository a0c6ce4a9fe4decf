"""The seed's augmentation compiled by XLA, driven by explicit random draws.

:func:`make_augment` returns ``f(crops, brightness, saturation, contrast, permutation)``: the
five 221x221 crops already cut by tf.data (a tuple of five [221, 221, 3] tensors, so input
shapes are the same for every image and the compiled code is compiled once) and the draws of :class:`common.augment_spec.Draws` (brightness
delta, saturation and contrast factors for crops 1..4, the shuffle permutation) in; the seed's
(10, 221, 221, 3) output out: crop 0 plain, crops 1..4 colour-jittered (brightness, clip,
saturation, clip, contrast, clip), each followed by its mirror, assembled in the seed's order
(:data:`common.augment_spec.ASSEMBLY_ORDER`) and shuffled (output row j is assembled row
``permutation[j]``). It runs as two compiled halves, :func:`colour` and :func:`finish`; BENCHMARKS.md
("Modern port: what XLA:CPU did and what we changed") says why.

:func:`draw` makes the draws with stateless random ops from one seed, with the seed's
distributions (what ``tf.image.stateless_random_{crop,brightness,saturation,contrast}`` draw).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from common import augment_spec as spec
from common.stages import CROP_SIZE, NUM_CROPS, scope

_CH, _CW, _ = CROP_SIZE
#: For assembled row k: which crop it holds, and whether it is the mirror.
_CROP_OF_ROW = spec.ASSEMBLY_ORDER
_MIRROR_OF_ROW = tuple(k % 2 for k in range(2 * NUM_CROPS))
#: The draw streams split from one image seed, in this order.
_STREAMS = ("crop", "brightness", "saturation", "contrast", "shuffle")


def draw(seed: tf.Tensor, height: tf.Tensor, width: tf.Tensor) -> dict:
    """Every random number one image needs, from the stateless ``seed`` (shape [2]).

    Returns int32 ``crop_offsets`` [5, 2] (row, col) valid for a ``height`` x ``width`` image,
    float32 ``brightness``/``saturation``/``contrast`` [4] and int32 ``permutation`` [10]; the
    fields of :class:`common.augment_spec.Draws`. Offsets are drawn as ``stateless_random_crop``
    draws them (uniform int32 modulo the number of valid positions).
    """
    seeds = dict(zip(_STREAMS, tf.unstack(
        tf.random.experimental.stateless_split(seed, num=len(_STREAMS)))))
    limit = tf.stack([height - _CH + 1, width - _CW + 1])  # >= 36: preflight's short side is 256
    offsets = tf.random.stateless_uniform([NUM_CROPS, 2], seeds["crop"], maxval=tf.int32.max,
                                          dtype=tf.int32) % limit
    n = spec.NUM_JITTERED
    return {
        "crop_offsets": offsets,
        "brightness": tf.random.stateless_uniform(
            [n], seeds["brightness"], -spec.BRIGHTNESS_MAX_DELTA, spec.BRIGHTNESS_MAX_DELTA),
        "saturation": tf.random.stateless_uniform([n], seeds["saturation"], *spec.SATURATION_RANGE),
        "contrast": tf.random.stateless_uniform([n], seeds["contrast"], *spec.CONTRAST_RANGE),
        "permutation": tf.random.experimental.stateless_shuffle(
            tf.range(2 * NUM_CROPS, dtype=tf.int32), seeds["shuffle"]),
    }


def _saturation(x: tf.Tensor, factor: tf.Tensor, value: tf.Tensor | None = None,
                lowest: tf.Tensor | None = None) -> tf.Tensor:
    """``adjust_saturation`` without leaving RGB.

    In HSV, scaling saturation keeps hue and value (the max channel) and sets
    s' = clip(s * f, 0, 1) with s = (v - min) / v; back in RGB every channel moves linearly
    toward v: c' = v - (v - c) * s' / s = v - (v - c) * min(f, v / (v - min)). Grey pixels
    (v == min) are unchanged. ``factor`` broadcasts against ``x`` ([..., H, W, 3]); ``value``
    and ``lowest`` (each pixel's max and min channel, [..., H, W, 1]) may be given.

    Written at the full [..., 3] shape on purpose: computed per pixel and broadcast, the divide
    is an "expensive op reused three times" to XLA, which then writes it to memory as a
    separate kernel; per channel it fuses into one pass.
    """
    if value is None:
        value = tf.reduce_max(x, axis=-1, keepdims=True)
    if lowest is None:
        lowest = tf.reduce_min(x, axis=-1, keepdims=True)
    v = tf.broadcast_to(value, tf.shape(x))
    spread = v - tf.broadcast_to(lowest, tf.shape(x))
    grey = spread <= 0.0
    k = tf.where(grey, factor, tf.minimum(factor, v / tf.where(grey, 1.0, spread)))
    return v - (v - x) * k


def _clip(x: tf.Tensor) -> tf.Tensor:
    with tf.name_scope(scope("clip")):
        return tf.clip_by_value(x, 0.0, 1.0)


def _colour_one(raw: tf.Tensor, delta: tf.Tensor, factor: tf.Tensor, index: int) -> tf.Tensor:
    """Brightness, clip, saturation, clip on one crop ``raw`` [221, 221, 3] (crop ``index``)."""
    with tf.name_scope(scope("brightness", index)):
        x = raw + delta
    with tf.name_scope(scope("clip", index)):
        x = tf.clip_by_value(x, 0.0, 1.0)
    with tf.name_scope(scope("saturation", index)):
        # Each pixel's max and min channel after brightness and clip, taken from the raw
        # channels: x -> clip(x + delta) is monotone (in float too), so it commutes with
        # max/min, and XLA then reads the crop in one pass instead of first writing the
        # brightened crop out because the saturation reads each value four times.
        r, g, b = raw[..., 0:1], raw[..., 1:2], raw[..., 2:3]
        value = tf.clip_by_value(tf.maximum(tf.maximum(r, g), b) + delta, 0.0, 1.0)
        lowest = tf.clip_by_value(tf.minimum(tf.minimum(r, g), b) + delta, 0.0, 1.0)
        x = _saturation(x, factor, value, lowest)
    with tf.name_scope(scope("clip", index)):
        return tf.clip_by_value(x, 0.0, 1.0)


def colour(jittered: tuple, brightness: tf.Tensor, saturation: tf.Tensor) -> tf.Tensor:
    """First half of the seed's coloraugment on crops 1..4: brightness, clip, saturation, clip.

    ``jittered``: crops 1..4, four [221, 221, 3] tensors; returns them coloured, stacked
    [4, 221, 221, 3]. Written per crop (scopes ``brightness_1``.. as legacy's), XLA still
    emits one kernel: the stack of the four chains becomes a single loop over the output that
    reads the four inputs directly.
    """
    return tf.stack([_colour_one(x, brightness[i], saturation[i], i + 1)
                     for i, x in enumerate(jittered)])


def _channel_means(x: tf.Tensor) -> tf.Tensor:
    """Per-image, per-channel means of ``x`` [n, H, W, 3] as [n, 1, 1, 3], computed as two
    matmuls with 0/1 matrices: sums over (W, C) rows pick each channel, then sums over H.

    Exact products and blockwise sums stay within the equivalence test's tolerance of legacy's
    AdjustContrastv2 (which sums pairwise); XLA:CPU's own reduce over (H, W) was neither
    accurate nor fast enough (BENCHMARKS.md, XLA finding 3).
    """
    n, h, w, c = x.shape
    pick = tf.constant(np.tile(np.eye(c, dtype=np.float32), (w, 1)))  # [W*C, C]
    rows = tf.matmul(tf.reshape(x, (n * h, w * c)), pick)  # [n*H, C]
    sums = tf.matmul(tf.ones((n, 1, h)), tf.reshape(rows, (n, h, c)))  # [n, 1, C]
    return (sums / float(h * w))[:, :, None, :]


def finish(crop0: tf.Tensor, coloured: tf.Tensor, contrast: tf.Tensor,
           permutation: tf.Tensor) -> tf.Tensor:
    """Second half: contrast and clip on the coloured crops, then flips, the seed's assembly
    and the shuffle, written straight into the (10, 221, 221, 3) output. ``crop0`` is the plain
    crop [221, 221, 3], ``coloured`` the output of :func:`colour`."""
    with tf.name_scope(scope("contrast")):
        mean = _channel_means(coloured)
        x = (coloured - mean) * contrast[:, None, None, None] + mean
    x = _clip(x)
    with tf.name_scope(scope("shuffle")):
        row = tf.gather(tf.constant(_CROP_OF_ROW, tf.int32), permutation)
        mirrored = tf.gather(tf.constant(_MIRROR_OF_ROW, tf.int32), permutation)
    with tf.name_scope(scope("flip")):
        # sources 0..4: crop 0 plain, crops 1..4 jittered; 5..9: their mirrors
        finals = tf.concat([crop0[None], x], axis=0)
        sources = tf.concat([finals, tf.reverse(finals, axis=[2])], axis=0)
    with tf.name_scope(scope("assemble")):
        return tf.gather(sources, row + NUM_CROPS * mirrored)


def _signature(*specs):
    return [tf.TensorSpec(shape, dtype, name=name) for name, shape, dtype in specs]


_CROP = ("crop", CROP_SIZE, tf.float32)
_FACTOR = lambda name: (name, (spec.NUM_JITTERED,), tf.float32)  # noqa: E731
_PERM = ("permutation", (2 * NUM_CROPS,), tf.int32)


def make_augment(jit: bool = True):
    """The augmentation as one callable ``f(crops, brightness, saturation, contrast,
    permutation) -> [10, 221, 221, 3]`` with fixed input shapes (``crops``: five [221, 221, 3]).

    It is a plain ``tf.function`` (one Python dispatch per image) calling two
    ``tf.function(jit_compile=jit)`` halves, :func:`colour` and :func:`finish`; each half is
    traced and compiled once. Why two: compiled as one, XLA:CPU fused the colour chain into the
    output's gather and computed it again for every output row and for both sides of the mirror
    (see BENCHMARKS.md); the boundary makes XLA write the coloured crops once and read them. No
    autograph: the code has no tensor-dependent Python control flow, and converting it took
    about a third of the time to the first output.
    """
    crops = tuple(_signature(*[(f"crop_{i}",) + _CROP[1:] for i in range(NUM_CROPS)]))
    colour_fn = tf.function(colour, jit_compile=jit, autograph=False, input_signature=[
        crops[1:]] + _signature(_FACTOR("brightness_delta"), _FACTOR("saturation_factor")))
    finish_fn = tf.function(finish, jit_compile=jit, autograph=False, input_signature=_signature(
        ("crop_0",) + _CROP[1:], ("coloured", (spec.NUM_JITTERED,) + CROP_SIZE, tf.float32),
        _FACTOR("contrast_factor"), _PERM))

    def augment(crops, brightness, saturation, contrast, permutation):
        return finish_fn(crops[0], colour_fn(tuple(crops[1:]), brightness, saturation), contrast,
                         permutation)

    return tf.function(augment, autograph=False, input_signature=[crops] + _signature(
        _FACTOR("brightness_delta"), _FACTOR("saturation_factor"),
        _FACTOR("contrast_factor"), _PERM))


def make_step(augment_fn, iterator):
    """One image as one ``tf.function`` call: ``step() -> (output, path, index)`` takes the next
    element of ``iterator`` (a :func:`modern.pipeline.build` iterator) and augments it.

    The same work as calling ``next(iterator)`` and then ``augment_fn`` from Python, with one
    dispatch per image instead of two (a Python-side TF call costs a sizeable share of the
    augmentation itself); the compiled halves stay separate XLA executables inside it. The
    iterator is captured, not passed, and the step is returned as its traced concrete function:
    as an argument, tf.function canonicalises the iterator's structure on every call, and a
    concrete function skips tf.function's dispatch (numbers: BENCHMARKS.md, XLA finding 6).
    Tracing happens here; XLA compiles on the first call.
    """

    def step():
        e = next(iterator)
        return (augment_fn(e["crops"], e["brightness"], e["saturation"], e["contrast"],
                           e["permutation"]), e["path"], e["index"])

    return tf.function(step, autograph=False).get_concrete_function()
