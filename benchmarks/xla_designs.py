"""``python -m benchmarks.xla_designs [--rounds N] [--designs 1,2,3,4]``: the augmentation designs
the port went through, each with and without XLA, timed side by side in one process.

Reproduces the design table in BENCHMARKS.md ("Modern port: what XLA:CPU did and what we changed"):

1. random draws inside the compiled function (``tf.image.stateless_random_*``): XLA fuses each
   scalar draw's random-number generator into every per-pixel loop;
2. draws passed in, legacy's ops, one function;
3. crops batched, saturation in RGB, one function: XLA recomputes the colour chain inside the
   output's gather, for every output row and both sides of the mirror;
4. what ships (:func:`modern.augment.make_augment`): two compiled halves.

Each design takes one 300x256 image's worth of input (random pixels; the pixels do not change
the work) and returns the (10, 221, 221, 3) output.
"""
from __future__ import annotations

import os
import statistics
import time

import numpy as np
from absl import flags

from common import augment_spec as spec
from common.errors import InputError, cli_main
from common.stages import CROP_SIZE, NUM_CROPS
from common.tflog import native_stderr_to, quiet_python_logs

FLAGS = flags.FLAGS

#: What ``--help`` prints above the flags.
USAGE = """\
usage: python -m benchmarks.xla_designs [--rounds N] [--calls N] [--designs 1,2,3,4]

Times the augmentation designs the modern port went through, each with and without XLA, side
by side in one process: (1) random draws inside the compiled function, (2) draws passed in,
one function, (3) crops batched and saturation in RGB, one function, (4) what ships: two
compiled halves. Prints milliseconds per call (median and minimum over the rounds) and the
first call's time, compile included.
"""
DESIGNS = {
    "1": "random draws inside (tf.image.stateless_random_*)",
    "2": "draws passed in, legacy's ops, one function",
    "3": "draws passed in, batched, RGB saturation, one function",
    "4": "shipped: two compiled halves (modern.augment)",
}


def _define_flags() -> None:
    flags.DEFINE_integer("rounds", 5, "Interleaved rounds.", lower_bound=1)
    flags.DEFINE_integer("calls", 10, "Calls per design per round (design 1 with XLA: 2).",
                         lower_bound=1)
    flags.DEFINE_list("designs", list(DESIGNS), "Which designs to time.")


def _bodies():
    """The augmentation body of each design, and a function making its arguments."""
    import tensorflow as tf  # lazy: imports TensorFlow

    from modern import augment, pipeline  # lazy: imports TensorFlow

    def coloraugment(x, b, s, c):  # legacy's ops, one crop
        x = tf.clip_by_value(tf.image.adjust_brightness(x, b), 0.0, 1.0)
        x = tf.clip_by_value(tf.image.adjust_saturation(x, s), 0.0, 1.0)
        return tf.clip_by_value(tf.image.adjust_contrast(x, c), 0.0, 1.0)

    def seed_assembly(crops, jittered):  # the seed's stack/concat order
        out = tf.stack([crops[0], tf.image.flip_left_right(crops[0])])
        for x in jittered:
            out = tf.concat([tf.stack([x, tf.image.flip_left_right(x)]), out], 0)
        return out

    def design1(image, seed):
        seeds = tf.random.experimental.stateless_split(seed, 4 * NUM_CROPS)
        crops = [tf.image.stateless_random_crop(image, CROP_SIZE, seeds[i]) for i in range(5)]
        jittered = []
        for i in range(1, NUM_CROPS):
            x = tf.image.stateless_random_brightness(crops[i], spec.BRIGHTNESS_MAX_DELTA,
                                                     seeds[5 + i])
            x = tf.clip_by_value(x, 0.0, 1.0)
            x = tf.image.stateless_random_saturation(x, *spec.SATURATION_RANGE, seeds[10 + i])
            x = tf.clip_by_value(x, 0.0, 1.0)
            x = tf.image.stateless_random_contrast(x, *spec.CONTRAST_RANGE, seeds[15 + i])
            jittered.append(tf.clip_by_value(x, 0.0, 1.0))
        order = tf.argsort(tf.random.stateless_uniform([2 * NUM_CROPS], seeds[0]))
        return tf.gather(seed_assembly(crops, jittered), order)

    def design2(image, offsets, b, s, c, perm):
        crops = [tf.slice(image, tf.concat([offsets[i], [0]], 0), CROP_SIZE) for i in range(5)]
        jittered = [coloraugment(crops[i], b[i - 1], s[i - 1], c[i - 1]) for i in range(1, 5)]
        return tf.gather(seed_assembly(crops, jittered), perm)

    def design3(crops, b, s, c, perm):
        x = tf.clip_by_value(crops[1:] + b[:, None, None, None], 0.0, 1.0)
        x = tf.clip_by_value(augment._saturation(x, s[:, None, None, None]), 0.0, 1.0)
        mean = tf.reduce_mean(x, axis=(1, 2), keepdims=True)
        x = tf.clip_by_value((x - mean) * c[:, None, None, None] + mean, 0.0, 1.0)
        finals = tf.concat([crops[:1], x], 0)
        rows = tf.gather(finals, tf.gather(tf.constant(spec.ASSEMBLY_ORDER), perm))
        return tf.where((perm % 2 == 1)[:, None, None, None], tf.reverse(rows, [2]), rows)

    rng = np.random.default_rng(0)
    image = tf.constant(rng.uniform(0, 1, (300, 256, 3)).astype(np.float32))
    d = spec.Draws.sample(rng, (300, 256))
    crops = pipeline.cut_crops(image, tf.constant(d.crop_offsets))
    draws = (tf.constant(d.brightness), tf.constant(d.saturation), tf.constant(d.contrast),
             tf.constant(d.permutation))
    return {
        "1": (design1, (image, tf.constant([1, 2], tf.int64))),
        "2": (design2, (image, tf.constant(d.crop_offsets)) + draws),
        "3": (design3, (tf.stack(crops),) + draws),
        "4": (None, (crops,) + draws),
    }


def measure(designs: list[str], rounds: int, calls: int) -> dict:
    """{design: {"xla": ms/call, "no_xla": ms/call, "xla_min", "no_xla_min", "first_xla_s"}}:
    medians and minimums over rounds (the minimum is the least disturbed by other load)."""
    import tensorflow as tf  # lazy: imports TensorFlow

    from modern import augment  # lazy: imports TensorFlow

    bodies = _bodies()
    fns = {}
    for key in designs:
        body, args = bodies[key]
        for jit in (True, False):
            fn = (augment.make_augment(jit) if body is None
                  else tf.function(body, jit_compile=jit, autograph=False))
            fns[key, jit] = (fn, args)
    first = {}
    for (key, jit), (fn, args) in fns.items():
        t0 = time.perf_counter()
        fn(*args)
        first[key, jit] = time.perf_counter() - t0
    times: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for (key, jit), (fn, args) in fns.items():
            n = 2 if key == "1" and jit else calls
            t0 = time.perf_counter()
            for _ in range(n):
                fn(*args)
            times[key, jit].append((time.perf_counter() - t0) / n * 1e3)
    return {key: {"xla": statistics.median(times[key, True]),
                  "no_xla": statistics.median(times[key, False]),
                  "xla_min": min(times[key, True]), "no_xla_min": min(times[key, False]),
                  "first_xla_s": first[key, True]} for key in designs}


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    unknown = [d for d in FLAGS.designs if d not in DESIGNS]
    if unknown:
        raise InputError(f"--designs: unknown {', '.join(unknown)} (choose from "
                         f"{', '.join(DESIGNS)})")


    quiet_python_logs()
    with native_stderr_to(os.devnull):
        result = measure(FLAGS.designs, FLAGS.rounds, FLAGS.calls)
    print(f"{'design (ms per call: median / min over rounds)':60} {'XLA':>17} {'no XLA':>17} "
          f"{'first call':>11}")
    for key, r in result.items():
        print(f"{key + '. ' + DESIGNS[key]:60} {r['xla']:7.2f} /{r['xla_min']:7.2f} "
              f"{r['no_xla']:7.2f} /{r['no_xla_min']:7.2f} {r['first_xla_s']:9.2f} s")
    print(f"load average (1/5/15 min): {list(os.getloadavg())}")
    return 0


def main() -> None:
    cli_main("benchmarks.xla_designs", _define_flags, _main, usage=USAGE)


if __name__ == "__main__":
    main()
