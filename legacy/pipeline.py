"""The seed pipeline as a ``tf.compat.v1`` graph, op for op.

string_input_producer -> WholeFileReader -> decode_jpeg -> aspect-preserving resize (tf.cond,
short side 256) -> 5 random 221x221x3 crops -> colour jitter on crops 1..4 (brightness,
saturation, contrast, a clip after each) -> flip_left_right -> stack/concat in the seed's order
-> random_shuffle. XLA as in the seed: ``jit_scope`` around the graph plus ``global_jit_level =
ON_1``. Every stage opens a ``tf.name_scope`` from :mod:`common.stages`.

The random draws are written out (``random_uniform`` then ``adjust_*``, exactly the ops that
``tf.image.random_*`` and ``tf.random_crop`` create), so tests can feed chosen draws into the
same graph; see :class:`LegacyGraph`.
"""
from __future__ import annotations

import contextlib
import dataclasses

import tensorflow as tf

from common import augment_spec as spec
from common.stages import CROP_SIZE, NUM_CROPS, SHORT_SIDE, scope

v1 = tf.compat.v1


@dataclasses.dataclass
class LegacyGraph:
    """The built graph and the tensors a caller needs.

    ``output``: the shuffled (10, 221, 221, 3) float32 tensor; ``key``: the file name read this
    step; ``assembled``: the tensor before the shuffle; ``resized``: the decoded, resized image.
    ``draws``: the random-draw tensors by :class:`common.augment_spec.Draws` field (lists per
    crop; ``feed_dict`` may override any of them).
    """

    graph: tf.Graph
    output: tf.Tensor
    key: tf.Tensor
    assembled: tf.Tensor
    resized: tf.Tensor
    draws: dict
    xla: bool


def _jit(xla: bool):
    return tf.xla.experimental.jit_scope() if xla else contextlib.nullcontext()


def _aspect_size(aspectratio: tf.Tensor, short_is_height: bool, xla: bool) -> tf.Tensor:
    """The seed's aspect1 / aspect2: the new (height, width), short side 256, int32."""
    with _jit(xla):
        fixed = tf.constant(SHORT_SIDE, dtype=tf.float32)
        if short_is_height:
            newsize = tf.stack([fixed, tf.divide(fixed, aspectratio)], axis=0)
        else:
            newsize = tf.stack([tf.multiply(fixed, aspectratio), fixed], axis=0)
        return tf.cast(newsize, dtype=tf.int32)


def resize_image(image: tf.Tensor, xla: bool) -> tf.Tensor:
    """Aspect-preserving resize to short side 256 with the seed's ``tf.cond`` logic."""
    with tf.name_scope(scope("resize")):
        imageshape = tf.shape(image)
        imageheight = tf.cast(tf.gather(imageshape, tf.constant(0, dtype=tf.int32)), tf.float32)
        imagewidth = tf.cast(tf.gather(imageshape, tf.constant(1, dtype=tf.int32)), tf.float32)
        aspectratio = tf.divide(imageheight, imagewidth)
        newsize = tf.cond(tf.less_equal(imageheight, imagewidth),
                          lambda: _aspect_size(aspectratio, True, xla),
                          lambda: _aspect_size(aspectratio, False, xla))
        image = tf.image.convert_image_dtype(image, dtype=tf.float32)
        return v1.image.resize_images(image, newsize)


def random_crop(image: tf.Tensor, index: int) -> tuple[tf.Tensor, tf.Tensor]:
    """``tf.random_crop`` written out: offset = random_uniform % (shape - size + 1); slice."""
    with tf.name_scope(scope("crop", index)):
        size = tf.constant(CROP_SIZE, dtype=tf.int32)
        limit = tf.shape(image) - size + 1
        with tf.control_dependencies([tf.debugging.assert_non_negative(
                limit - 1, message="image smaller than the crop")]):
            offset = v1.random_uniform([3], dtype=tf.int32, maxval=tf.int32.max) % limit
        return tf.slice(image, offset, size), offset


def _clip(image: tf.Tensor, index: int) -> tf.Tensor:
    with tf.name_scope(scope("clip", index)):
        return tf.clip_by_value(image, 0.0, 1.0)


def coloraugment(image: tf.Tensor, index: int) -> tuple[tf.Tensor, dict]:
    """The seed's coloraugment: random brightness, saturation, contrast, each followed by a clip."""
    with tf.name_scope(scope("brightness", index)):
        delta = v1.random_uniform([], -spec.BRIGHTNESS_MAX_DELTA, spec.BRIGHTNESS_MAX_DELTA)
        out = tf.image.adjust_brightness(image, delta)
    out = _clip(out, index)
    with tf.name_scope(scope("saturation", index)):
        sat = v1.random_uniform([], *spec.SATURATION_RANGE)
        out = tf.image.adjust_saturation(out, sat)
    out = _clip(out, index)
    with tf.name_scope(scope("contrast", index)):
        con = v1.random_uniform([], *spec.CONTRAST_RANGE)
        out = tf.image.adjust_contrast(out, con)
    out = _clip(out, index)
    return out, {"brightness": delta, "saturation": sat, "contrast": con}


def _flip(image: tf.Tensor, index: int) -> tf.Tensor:
    with tf.name_scope(scope("flip", index)):
        return tf.image.flip_left_right(image)


def augmentbody(image: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, dict]:
    """The seed's augmentbody: returns (shuffled, assembled, draw tensors)."""
    draws: dict = {"crop_offsets": [], "brightness": [], "saturation": [], "contrast": []}
    out = None
    for i in range(NUM_CROPS):
        cropped, offset = random_crop(image, i)
        draws["crop_offsets"].append(offset)
        if i == 0:
            flipped = _flip(cropped, i)
            with tf.name_scope(scope("assemble", i)):
                out = tf.stack([cropped, flipped], axis=0)
        else:
            augcolor, d = coloraugment(cropped, i)
            for k, v in d.items():
                draws[k].append(v)
            flipped = _flip(augcolor, i)
            with tf.name_scope(scope("assemble", i)):
                coll = tf.stack([augcolor, flipped], axis=0)
                out = tf.concat([coll, out], axis=0)
    with tf.name_scope(scope("shuffle")):
        shuffled = v1.random_shuffle(out)
    return shuffled, out, draws


def build(images: list[str], xla: bool = True, seed: int | None = None,
          shuffle_files: bool = True) -> LegacyGraph:
    """Build the seed's graph over ``images`` in a new ``tf.Graph``."""
    graph = tf.Graph()
    with graph.as_default():
        if seed is not None:
            v1.set_random_seed(seed)
        with _jit(xla):
            with tf.name_scope(scope("read")):
                queue = v1.train.string_input_producer(images, shuffle=shuffle_files, seed=seed)
                reader = v1.WholeFileReader()
                key, value = reader.read(queue)
            with tf.name_scope(scope("decode")):
                image = tf.io.decode_jpeg(value, channels=3)
            resized = resize_image(image, xla)
            output, assembled, draws = augmentbody(resized)
    return LegacyGraph(graph=graph, output=output, key=key, assembled=assembled,
                       resized=resized, draws=draws, xla=xla)


def session_config(xla: bool):
    """The seed's session config: ``global_jit_level = ON_1`` when XLA is on."""
    config = v1.ConfigProto()
    config.graph_options.optimizer_options.global_jit_level = (
        v1.OptimizerOptions.ON_1 if xla else v1.OptimizerOptions.OFF)
    return config


def draws_feed(g: LegacyGraph, d: spec.Draws, image_hw: tuple[int, int] | None = None) -> dict:
    """A ``feed_dict`` that makes the graph use the explicit draws ``d`` (shuffle excluded).

    Crop offsets are fed as (row, col, 0); the modulo already ran inside the fed tensor's
    producer, so offsets must be valid for the resized image.
    """
    feed: dict = {}
    for i, t in enumerate(g.draws["crop_offsets"]):
        feed[t] = [int(d.crop_offsets[i, 0]), int(d.crop_offsets[i, 1]), 0]
    for name in ("brightness", "saturation", "contrast"):
        for i, t in enumerate(g.draws[name]):
            feed[t] = float(getattr(d, name)[i])
    return feed
