"""``python -m benchmarks.pipelines [--images N] [--json FILE]``: images/s of the legacy pipeline,
the modern port with and without XLA, and the floor (read + decode + resize only), on one image
set, in one process, in interleaved rounds.

The image set is ``--images`` JPEGs of varied sizes and aspect ratios (short side 256..640,
long/short 1..2, portrait and landscape) made from ``grace_hopper.jpg`` into a temp folder
(:mod:`benchmarks.images`). Every pipeline is built once (graphs, datasets, compiled
functions); each round then takes ``--batch`` images from each of them in turn, so load from
other processes hits all four alike. Medians over ``--rounds`` rounds are reported, with their
ratios.

tf.data keeps producing into its buffers while its consumer is idle, and AUTOTUNE grows those
buffers when the consumer is fast: a pipeline timed right after waiting would hand out images
made earlier. So each round starts a tf.data pipeline on a fresh iterator (its dataset and the
compiled function are kept; only the buffers are new), takes ``--warmup`` images untimed, then
times the batch, and stops the iterator right after it, so that no pipeline's background
threads run while another is timed. The legacy session keeps running: its queue holds file
names only, all its work happens inside ``sess.run``. Legacy first runs
``--legacy_warmup_epochs`` passes over the image set untimed: its auto-clustered XLA compiles
every cluster again for each image size the second time it sees that size (~0.8 s per size
here), which would otherwise land in the early rounds.

Each batch is also timed in process CPU time (``time.process_time``: all threads of this
process), reported as ``cpu_ms_per_image`` and, paired per round, ``ratios_cpu``: on a machine
shared with other jobs it leaves out the time a thread waits for a core, so it moves less with
their load than wall time does (cache and memory contention still move it).

``ratios`` divide the medians; ``ratios_paired`` is the median over rounds of each round's own
ratio (the two numbers of a pair were taken seconds apart, so a burst of load from elsewhere
hits both); ``ratios_cpu`` is the same for CPU time per image.

``first_output_s`` is the time from the start of building a pipeline (graph or dataset, and the
compiled function) to its first augmented output, compilation included; each is measured on a
freshly built pipeline before the rounds start.
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Callable

from absl import app, flags

from common.errors import InputError, run_cli, say
from common.tflog import quiet_env

FLAGS = flags.FLAGS
PIPELINES = ("legacy", "modern", "modern_nojit", "floor")


def _define_flags() -> None:
    flags.DEFINE_integer("images", 64, "Number of JPEGs in the generated image set.", lower_bound=1)
    flags.DEFINE_integer("rounds", 7, "Interleaved timing rounds.", lower_bound=1)
    flags.DEFINE_integer("batch", 32, "Images timed per pipeline per round.", lower_bound=1)
    flags.DEFINE_integer("warmup", 8, "Untimed images per pipeline at the start of each round.",
                         lower_bound=0)
    flags.DEFINE_integer("legacy_warmup_epochs", 2, "Untimed passes of legacy over the image set "
                         "before the rounds (its XLA compiles per image size).", lower_bound=0)
    flags.DEFINE_string("json", None, "Also write the results as JSON to this file.")
    flags.DEFINE_integer("seed", 0, "Seed for the image set and the pipelines.")
    flags.DEFINE_boolean("verbose", False, "Show TensorFlow's own log on stderr.")


class Legacy:
    """The seed's graph with XLA as the seed ran it (jit_scope + ON_1), one image per sess.run."""


    def __init__(self, paths: list[str], seed: int):
        import tensorflow as tf

        from legacy import pipeline

        v1 = tf.compat.v1
        self.g = pipeline.build(paths, xla=True, seed=seed)
        self.sess = v1.Session(graph=self.g.graph, config=pipeline.session_config(True))
        with self.g.graph.as_default():
            self.coord = v1.train.Coordinator()
            self.threads = v1.train.start_queue_runners(sess=self.sess, coord=self.coord)

    def step(self):
        return self.sess.run(self.g.output)

    def restart(self) -> None:
        pass  # its queue holds file names only; the augmentation runs inside sess.run

    def stop(self) -> None:
        pass

    def close(self) -> None:
        self.coord.request_stop()
        self.coord.join(self.threads, stop_grace_period_secs=10)
        self.sess.close()


class Modern:
    """The tf.data pipeline feeding the augmentation, compiled by XLA or not."""

    def __init__(self, paths: list[str], seed: int, jit: bool):
        from modern import augment, pipeline

        self.ds = pipeline.build(paths, seed=seed)
        self.augment_fn = augment.make_augment(jit)
        self.restart()

    def step(self):
        return self.step_fn()

    def restart(self) -> None:
        from modern import augment

        self.stop()  # the old iterator's threads end before new ones start
        self.step_fn = augment.make_step(self.augment_fn, iter(self.ds))

    def stop(self) -> None:
        self.step_fn = None  # its iterator is captured by the step: released with it

    def close(self) -> None:
        pass


class Floor:
    """read + decode + resize only, same tf.data parallelism and prefetch."""

    def __init__(self, paths: list[str], seed: int):
        from modern import pipeline

        self.ds = pipeline.build_floor(paths, seed=seed)
        self.it = iter(self.ds)

    def step(self):
        return next(self.it)

    def restart(self) -> None:
        self.stop()
        self.it = iter(self.ds)

    def stop(self) -> None:
        self.it = None

    def close(self) -> None:
        pass


def _make(name: str, paths: list[str], seed: int):
    if name == "legacy":
        return Legacy(paths, seed)
    if name == "modern":
        return Modern(paths, seed, jit=True)
    if name == "modern_nojit":
        return Modern(paths, seed, jit=False)
    return Floor(paths, seed)


def first_output_s(name: str, paths: list[str], seed: int) -> float:
    """Seconds from building ``name`` to its first output (compilation included)."""
    t0 = time.perf_counter()
    p = _make(name, paths, seed)
    try:
        p.step()
        return time.perf_counter() - t0
    finally:
        p.close()


def measure(paths: list[str], rounds: int, batch: int, warmup: int, seed: int = 0,
            names: tuple[str, ...] = PIPELINES,
            progress: Callable[[str], None] | None = None, legacy_warmup_epochs: int = 2) -> dict:
    """Interleaved images/s (and CPU ms per image) of each pipeline in ``names``; returns the
    JSON-ready results."""
    first = {}
    for name in ("legacy", "modern"):
        if name in names:
            first[name] = first_output_s(name, paths, seed)
    pipes = {name: _make(name, paths, seed) for name in names}
    try:
        if "legacy" in pipes:
            for p in pipes.values():
                p.stop()
            for _ in range(legacy_warmup_epochs * len(paths)):
                pipes["legacy"].step()
        per_round: dict[str, list[float]] = {name: [] for name in names}
        per_round_cpu: dict[str, list[float]] = {name: [] for name in names}
        loads = []
        for r in range(rounds):
            for name, p in pipes.items():
                p.restart()
                for _ in range(warmup):
                    p.step()
                c0, t0 = time.process_time(), time.perf_counter()
                for _ in range(batch):
                    p.step()
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                p.stop()
                per_round[name].append(batch / wall)
                per_round_cpu[name].append(cpu / batch * 1e3)
            loads.append(_loadavg1())
            if progress:
                progress(f"round {r + 1}/{rounds}: " + ", ".join(
                    f"{n} {v[-1]:.0f}" for n, v in per_round.items()) + " images/s")
    finally:
        for p in pipes.values():
            p.close()
    ips = {name: statistics.median(v) for name, v in per_round.items()}
    cpu = {name: statistics.median(v) for name, v in per_round_cpu.items()}

    def ratio(a: str, b: str) -> float | None:
        return ips[a] / ips[b] if a in ips and b in ips else None

    def paired(a: str, b: str) -> float | None:
        # median over rounds of the ratio within a round: both timed seconds apart
        if a not in per_round or b not in per_round:
            return None
        return statistics.median(x / y for x, y in zip(per_round[a], per_round[b]))

    def paired_cpu(a: str, b: str) -> float | None:
        # images per CPU second, a over b, paired per round
        if a not in per_round_cpu or b not in per_round_cpu:
            return None
        return statistics.median(y / x for x, y in zip(per_round_cpu[a], per_round_cpu[b]))

    pairs = {"modern_vs_legacy": ("modern", "legacy"), "jit_vs_nojit": ("modern", "modern_nojit"),
             "modern_vs_floor": ("modern", "floor")}
    return {
        "images_per_s": ips,
        "ratios": {k: ratio(a, b) for k, (a, b) in pairs.items()},
        "ratios_paired": {k: paired(a, b) for k, (a, b) in pairs.items()},
        "cpu_ms_per_image": cpu,
        "ratios_cpu": {k: paired_cpu(a, b) for k, (a, b) in pairs.items()},
        "first_output_s": first,
        "per_round_images_per_s": per_round,
        "per_round_cpu_ms_per_image": per_round_cpu,
        "per_round_loadavg_1min": loads,
        "legacy_warmup_epochs": legacy_warmup_epochs if "legacy" in names else 0,
        "rounds": rounds, "batch": batch, "warmup": warmup,
    }


def _loadavg1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover
        return None


def machine() -> dict:
    """Where the numbers were taken: cores, load, versions."""
    import tensorflow as tf

    try:
        load = list(os.getloadavg())
    except OSError:  # pragma: no cover
        load = None
    return {"cpus": os.cpu_count(), "loadavg_1_5_15": load, "tf_version": tf.__version__,
            "python": platform.python_version(), "platform": platform.platform()}


def table(result: dict) -> str:
    """The printed summary: medians per pipeline, then the ratios against their targets."""
    ips = result["images_per_s"]
    cpu = result.get("cpu_ms_per_image", {})
    lines = [f"{'pipeline':14} {'images/s':>9} {'ms/image':>9} {'CPU ms/image':>13}"]
    for name, v in ips.items():
        c = cpu.get(name)
        lines.append(f"{name:14} {v:9.1f} {1e3 / v:9.2f} {'' if c is None else f'{c:13.2f}'}")
    targets = {"modern_vs_legacy": 10.0, "jit_vs_nojit": 1.0, "modern_vs_floor": 0.6}
    lines.append("")
    lines.append(f"{'ratio':17} {'medians':>8} {'paired':>8} {'CPU':>8}")
    for k, v in result["ratios"].items():
        if v is not None:
            p = result.get("ratios_paired", {}).get(k)
            c = result.get("ratios_cpu", {}).get(k)
            lines.append(f"{k:17} {v:7.2f}x {p if p is None else f'{p:7.2f}x':>8} "
                         f"{c if c is None else f'{c:7.2f}x':>8}  (target >= {targets[k]})")
    for k, v in result["first_output_s"].items():
        lines.append(f"first output {k:7} {v:6.2f} s")
    lines.append("")
    lines.append(f"images/s per round (legacy warmed up over {result.get('legacy_warmup_epochs', 0)} "
                 "epochs first: its XLA compiles each image size the second time it sees it)")
    for name, v in result.get("per_round_images_per_s", {}).items():
        lines.append(f"{name:14} " + " ".join(f"{x:6.0f}" for x in v))
    loads = result.get("per_round_loadavg_1min")
    if loads:
        lines.append(f"{'load avg 1 min':14} " + " ".join(f"{x:6.1f}" for x in loads))
    return "\n".join(lines)


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    from common import atomic
    from common.tflog import native_stderr_to, quiet_python_logs

    from benchmarks.images import make_image_set, varied_sizes

    quiet_python_logs()
    log = None if FLAGS.verbose else os.devnull
    with tempfile.TemporaryDirectory(prefix="bench-images-") as tmp, native_stderr_to(log):
        load_before = machine()["loadavg_1_5_15"]
        say(f"benchmarks: making {FLAGS.images} JPEGs of varied sizes in {tmp} ...")
        sizes = varied_sizes(FLAGS.images, seed=FLAGS.seed)
        paths = make_image_set(tmp, sizes, seed=FLAGS.seed)
        say(f"benchmarks: {FLAGS.rounds} interleaved rounds x {FLAGS.batch} images per pipeline ...")
        result = measure(paths, FLAGS.rounds, FLAGS.batch, FLAGS.warmup, FLAGS.seed, progress=say,
                         legacy_warmup_epochs=FLAGS.legacy_warmup_epochs)
    result["image_set"] = {"count": len(sizes), "from": "grace_hopper.jpg",
                           "sizes_hw": [list(s) for s in sizes],
                           "short_side": [min(min(s) for s in sizes), max(min(s) for s in sizes)]}
    result["machine"] = machine()
    result["machine"]["loadavg_before"] = load_before
    print(table(result))
    print(f"load average (1/5/15 min) before {load_before}, after {result['machine']['loadavg_1_5_15']}")
    if FLAGS.json:
        atomic.write_json(FLAGS.json, result)
        say(f"benchmarks: wrote {FLAGS.json}")
    return 0


def main() -> None:
    quiet_env()
    _define_flags()
    app.run(lambda argv: sys.exit(run_cli(_main, argv, "benchmarks.pipelines")))


if __name__ == "__main__":
    main()
