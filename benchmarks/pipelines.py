"""``python -m benchmarks.pipelines [--images N] [--json FILE] [--data_service]``: images/s of the
legacy pipeline, the modern port with and without XLA, and the floor (read + decode + resize
only), on one image set, in one process, in interleaved rounds.

With ``--data_service`` it compares, in the same way, the modern pipeline run locally against the
same pipeline with its input on tf.data service (``distributed_epoch``) with 1 and with 2
workers: two local clusters (:func:`modern.data_service.local_cluster`: a dispatcher and its
workers, each a ``python -m modern.service`` process on 127.0.0.1, elements over gRPC), started
before the rounds and kept for all of them. The client (this process) runs the augmentation in
all three.

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
every cluster again for each image size the second time it sees that size (BENCHMARKS.md,
the legacy pipeline's XLA), which would otherwise land in the early rounds.

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

import contextlib
import dataclasses
import gc
import os
import platform
import statistics
import tempfile
import time
from typing import Callable

from absl import flags

from benchmarks.images import make_image_set, varied_sizes
from common import atomic
from common.errors import InputError, RunFailed, cli_main, say
from common.tflog import native_stderr_to, quiet_python_logs
from modern.data_service import list_workers, local_cluster, parse_address
from modern.service_watch import DEFAULT_TIMEOUT_S, ServiceReads, Stall

FLAGS = flags.FLAGS

#: What ``--help`` prints above the flags.
USAGE = """\
usage: python -m benchmarks.pipelines [--images N] [--rounds N] [--batch N] [--json FILE]
           [--data_service] [--seed S] [--verbose]

Times images per second of the legacy pipeline (XLA as in the seed), the modern port with and
without XLA, and the floor (read, decode and resize only), on one generated set of JPEGs of
varied sizes, in interleaved rounds in one process so that load from elsewhere hits all of
them alike. Prints medians and their ratios (wall and CPU time); --json also writes them.

With --data_service it instead times the modern pipeline locally against the same pipeline
with its input on a tf.data service of 1 and of 2 local workers.
"""
PIPELINES = ("legacy", "modern", "modern_nojit", "floor")
#: ``--data_service``: the local modern run and the service with 1 and 2 workers.
SERVICE_PIPELINES = ("modern", "service_1", "service_2")


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
    flags.DEFINE_boolean("data_service", False, "Instead: the modern pipeline locally vs on "
                         "tf.data service with 1 and 2 local workers (subprocesses, 127.0.0.1).")
    flags.DEFINE_boolean("verbose", False, "Show TensorFlow's own log on stderr.")


class Legacy:
    """The seed's graph with XLA as the seed ran it (jit_scope + ON_1), one image per sess.run."""


    def __init__(self, paths: list[str], seed: int):
        import tensorflow as tf  # lazy: imports TensorFlow

        from legacy import pipeline  # lazy: imports TensorFlow

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
    """The tf.data pipeline feeding the augmentation, compiled by XLA or not; its input on the
    tf.data service at ``data_service`` if given. There every read is bounded
    (:class:`modern.service_watch.ServiceReads`): a worker lost, or a service that stops
    delivering (the dispatcher lost), ends the benchmark with one line, exit 1, instead of
    timing a damaged service or waiting without end; SIGINT and SIGTERM are handled while a
    read is blocked."""

    def __init__(self, paths: list[str], seed: int, jit: bool, data_service: str | None = None,
                 count: int | None = None, service_timeout_s: float | None = None):
        from modern import augment, pipeline  # lazy: imports TensorFlow

        self.ds = pipeline.build(paths, seed=seed, count=count, data_service=data_service)
        self.augment_fn = augment.make_augment(jit)
        self.reads = _service_reads(data_service, service_timeout_s) if data_service else None
        self.restart()

    def _call(self, fn, element: bool = False):
        """``fn()``, bounded on the service; ``element``: it reads one element."""
        if self.reads is None:
            return fn()

        try:
            result = self.reads.call(fn)
        except Stall as stall:
            what, hint = stall.describe(self.reads.address)
            raise RunFailed(f"{what}; {self._done()}" + (f"; {hint}" if hint else "")) from None
        self.reads.watch.steps_done += element
        lost = self.reads.watch.history
        if lost:  # the elements it held are gone: what is timed now is not this service
            raise RunFailed(f"tf.data service worker {lost[0].address} lost ({lost[0].reason}); "
                            f"{self._done()}; a benchmark does not time a damaged service")
        return result

    def _done(self) -> str:
        return f"{self.reads.watch.steps_done} element(s) read from it"

    def step(self):
        return self._call(self.step_fn, element=True)

    def restart(self) -> None:
        from modern import augment  # lazy: imports TensorFlow

        self.stop()  # the old iterator's threads end before new ones start
        self.step_fn = self._call(lambda: augment.make_step(self.augment_fn, iter(self.ds)))

    def stop(self) -> None:
        self.step_fn = None  # its iterator is captured by the step: released with it

    def close(self) -> None:
        self.stop()  # a service client stops reading before its servers are stopped
        if self.reads is not None:
            self.reads.__exit__(None, None, None)


def _service_reads(target: str, timeout_s: float | None):
    """Bounded reads from the service at ``target`` (its workers as registered now)."""

    address = parse_address(target)
    return ServiceReads(address, list_workers(address), timeout_s or DEFAULT_TIMEOUT_S,
                        notify=lambda line: say(f"benchmarks: {line}")).__enter__()


class Floor:
    """read + decode + resize only, same tf.data parallelism and prefetch."""

    def __init__(self, paths: list[str], seed: int):
        from modern import pipeline  # lazy: imports TensorFlow

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


def _make(name: str, paths: list[str], seed: int, services: dict | None = None,
          count: int | None = None):
    if services and name in services:
        return Modern(paths, seed, jit=True, data_service=services[name].address.target,
                      count=count)
    if name == "legacy":
        return Legacy(paths, seed)
    if name == "modern":
        return Modern(paths, seed, jit=True, count=count)
    if name == "modern_nojit":
        return Modern(paths, seed, jit=False)
    return Floor(paths, seed)


def first_output_s(name: str, paths: list[str], seed: int, services: dict | None = None) -> float:
    """Seconds from building ``name`` to its first output (compilation included)."""
    t0 = time.perf_counter()
    p = _make(name, paths, seed, services, count=1 if services else None)
    try:
        p.step()
        return time.perf_counter() - t0
    finally:
        p.close()


@dataclasses.dataclass
class _Rounds:
    """Per pipeline, one number per round: images/s, CPU ms per image (this process), and the
    service's server processes' CPU ms per image; the 1-minute load average per round."""

    ips: dict[str, list[float]]
    cpu: dict[str, list[float]]
    servers: dict[str, list[float]]
    loads: list[float] = dataclasses.field(default_factory=list)


def measure(paths: list[str], rounds: int, batch: int, warmup: int, seed: int = 0,
            names: tuple[str, ...] = PIPELINES,
            progress: Callable[[str], None] | None = None, legacy_warmup_epochs: int = 2,
            services: dict | None = None) -> dict:
    """Interleaved images/s (and CPU ms per image) of each pipeline in ``names``; returns the
    JSON-ready results.

    CPU per image is this process's (all its threads), over the timed batch. ``services`` maps
    extra pipeline names to running :class:`modern.data_service.LocalCluster` s: the modern
    pipeline with its input on that service. With ``services`` every modern pipeline (the local
    one too, like for like) reads exactly ``warmup + batch`` images per round, and CPU is taken
    over each whole round (one finite job, start-up included), this process's and the server
    processes': a finite job ends on the workers with the round, where abandoned endless jobs
    left tasks behind that kept a worker's stop waiting."""
    first = {name: first_output_s(name, paths, seed, services)
             for name in ("legacy", "modern", *(services or {})) if name in names}
    per_round_count = warmup + batch if services else None
    pipes = {name: _make(name, paths, seed, services, per_round_count) for name in names}
    data = _Rounds({n: [] for n in names}, {n: [] for n in names},
                   {n: [] for n in services or {}})
    try:
        if "legacy" in pipes:
            for p in pipes.values():
                p.stop()
            for _ in range(legacy_warmup_epochs * len(paths)):
                pipes["legacy"].step()
        for r in range(rounds):
            for name, p in pipes.items():
                _one_round(name, p, warmup, batch, services, data)
            data.loads.append(_loadavg1())
            if progress:
                progress(f"round {r + 1}/{rounds}: " + ", ".join(
                    f"{n} {v[-1]:.0f}" for n, v in data.ips.items()) + " images/s")
    finally:
        for p in pipes.values():
            p.close()
        pipes.clear()
        # Dropped iterators can sit in reference cycles; a tf.data service client that is not
        # collected keeps its workers' stop waiting on its requests.
        gc.collect()
    result = _summary(data, first)
    result.update(legacy_warmup_epochs=legacy_warmup_epochs if "legacy" in names else 0,
                  rounds=rounds, batch=batch, warmup=warmup)
    return result


def _one_round(name: str, p, warmup: int, batch: int, services: dict | None,
               data: _Rounds) -> None:
    """Time one round of one pipeline: ``warmup`` images untimed, then ``batch`` timed."""
    pids = services[name].pids if services and name in services else ()
    r0, s0 = time.process_time(), _cpu_s(pids)
    p.restart()
    for _ in range(warmup):
        p.step()
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(batch):
        p.step()
    wall = time.perf_counter() - t0
    p.stop()
    data.ips[name].append(batch / wall)
    if services:
        # the whole round: one finite job, all the work its images took, wherever
        data.cpu[name].append(1e3 * (time.process_time() - r0) / (warmup + batch))
        if pids and s0 is not None:
            data.servers[name].append(1e3 * (_cpu_s(pids) - s0) / (warmup + batch))
    else:
        data.cpu[name].append(1e3 * (time.process_time() - c0) / batch)


def _summary(data: _Rounds, first: dict) -> dict:
    """Medians, ratios (of medians, and paired per round) and the per-round numbers."""
    ips = {name: statistics.median(v) for name, v in data.ips.items()}
    cpu = {name: statistics.median(v) for name, v in data.cpu.items()}

    def ratio(a: str, b: str) -> float | None:
        return ips[a] / ips[b] if a in ips and b in ips else None

    def paired(a: str, b: str) -> float | None:
        # median over rounds of the ratio within a round: both timed seconds apart
        if a not in data.ips or b not in data.ips:
            return None
        return statistics.median(x / y for x, y in zip(data.ips[a], data.ips[b]))

    def paired_cpu(a: str, b: str) -> float | None:
        # images per CPU second, a over b, paired per round
        if a not in data.cpu or b not in data.cpu:
            return None
        return statistics.median(y / x for x, y in zip(data.cpu[a], data.cpu[b]))

    pairs = {"modern_vs_legacy": ("modern", "legacy"), "jit_vs_nojit": ("modern", "modern_nojit"),
             "modern_vs_floor": ("modern", "floor")}
    result = {
        "images_per_s": ips,
        "ratios": {k: ratio(a, b) for k, (a, b) in pairs.items()},
        "ratios_paired": {k: paired(a, b) for k, (a, b) in pairs.items()},
        "cpu_ms_per_image": cpu,
        "ratios_cpu": {k: paired_cpu(a, b) for k, (a, b) in pairs.items()},
        "first_output_s": first,
        "per_round_images_per_s": data.ips,
        "per_round_cpu_ms_per_image": data.cpu,
        "server_cpu_ms_per_image": {name: statistics.median(v) if v else None
                                    for name, v in data.servers.items()},
        "per_round_loadavg_1min": data.loads,
    }
    if set(SERVICE_PIPELINES) <= set(ips):
        service_pairs = {"workers_1_vs_local": ("service_1", "modern"),
                         "workers_2_vs_local": ("service_2", "modern"),
                         "workers_2_vs_1": ("service_2", "service_1")}
        result["data_service"] = {
            "local": ips["modern"], "workers_1": ips["service_1"], "workers_2": ips["service_2"],
            "ratios": {k: ratio(a, b) for k, (a, b) in service_pairs.items()},
            "ratios_paired": {k: paired(a, b) for k, (a, b) in service_pairs.items()},
            "cpu_ms_per_image": {key: {"client": cpu[name],
                                       "servers": result["server_cpu_ms_per_image"].get(name)}
                                 for key, name in (("local", "modern"), ("workers_1", "service_1"),
                                                   ("workers_2", "service_2"))},
            "processing_mode": "distributed_epoch",
            "servers": "one python -m modern.service process per dispatcher and worker, "
                       "127.0.0.1, elements over gRPC",
        }
    return result


def _cpu_s(pids) -> float | None:
    """CPU seconds (user + system) the processes ``pids`` have used so far, from /proc (Linux);
    None where that cannot be read."""
    total = 0.0
    try:
        for pid in pids:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return total


def _loadavg1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover
        return None


def _loads(v) -> str:
    return " ".join(f"{x:.2f}" for x in v) if v else "n/a"


def machine() -> dict:
    """Where the numbers were taken: cores, load, versions."""
    import tensorflow as tf  # lazy: imports TensorFlow

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
    servers = result.get("server_cpu_ms_per_image", {})
    lines = [f"{'pipeline':14} {'images/s':>9} {'ms/image':>9} {'CPU ms/image':>13}"
             + (f" {'servers':>8}" if servers else "")]
    for name, v in ips.items():
        c, s = cpu.get(name), servers.get(name)
        lines.append(f"{name:14} {v:9.1f} {1e3 / v:9.2f} {'' if c is None else f'{c:13.2f}'}"
                     + ("" if s is None else f" {s:8.2f}"))
    targets = {"modern_vs_legacy": 10.0, "jit_vs_nojit": 1.0, "modern_vs_floor": 0.6}
    lines.append("")
    if any(v is not None for v in result["ratios"].values()):
        lines.append(f"{'ratio':17} {'medians':>8} {'paired':>8} {'CPU':>8}")
    for k, v in result["ratios"].items():
        if v is not None:
            p = result.get("ratios_paired", {}).get(k)
            c = result.get("ratios_cpu", {}).get(k)
            lines.append(f"{k:17} {v:7.2f}x {p if p is None else f'{p:7.2f}x':>8} "
                         f"{c if c is None else f'{c:7.2f}x':>8}  (target >= {targets[k]})")
    svc = result.get("data_service")
    if svc:
        lines.append(f"tf.data service, {svc['processing_mode']}: local {svc['local']:.1f}, "
                     f"1 worker {svc['workers_1']:.1f}, 2 workers {svc['workers_2']:.1f} images/s")
        for k, v in svc["ratios"].items():
            lines.append(f"{k:19} {v:6.2f}x  (paired {svc['ratios_paired'][k]:.2f}x)")
    for k, v in result["first_output_s"].items():
        lines.append(f"first output {k:9} {v:6.2f} s")
    lines.append("")
    lines.append("images/s per round" + ("" if svc else
                 f" (legacy warmed up over {result.get('legacy_warmup_epochs', 0)} epochs first: "
                 "its XLA compiles each image size the second time it sees it)"))
    for name, v in result.get("per_round_images_per_s", {}).items():
        lines.append(f"{name:14} " + " ".join(f"{x:6.0f}" for x in v))
    loads = result.get("per_round_loadavg_1min")
    if loads:
        lines.append(f"{'load avg 1 min':14} " + " ".join(f"{x:6.1f}" for x in loads))
    return "\n".join(lines)


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")

    quiet_python_logs()
    log = None if FLAGS.verbose else os.devnull
    with tempfile.TemporaryDirectory(prefix="bench-images-") as tmp, native_stderr_to(log):
        load_before = machine()["loadavg_1_5_15"]
        say(f"benchmarks: making {FLAGS.images} JPEGs of varied sizes in {tmp} ...")
        sizes = varied_sizes(FLAGS.images, seed=FLAGS.seed)
        paths = make_image_set(tmp, sizes, seed=FLAGS.seed)
        with contextlib.ExitStack() as stack:
            services, names = None, PIPELINES
            if FLAGS.data_service:

                say("benchmarks: starting two local tf.data service clusters (1 and 2 workers) ...")
                services = {f"service_{n}": stack.enter_context(local_cluster(n)) for n in (1, 2)}
                names = SERVICE_PIPELINES
            say(f"benchmarks: {FLAGS.rounds} interleaved rounds x {FLAGS.batch} images per "
                f"pipeline ...")
            result = measure(paths, FLAGS.rounds, FLAGS.batch, FLAGS.warmup, FLAGS.seed,
                             names=names, progress=say, services=services,
                             legacy_warmup_epochs=FLAGS.legacy_warmup_epochs)
    result["image_set"] = {"count": len(sizes), "from": "grace_hopper.jpg",
                           "sizes_hw": [list(s) for s in sizes],
                           "short_side": [min(min(s) for s in sizes), max(min(s) for s in sizes)]}
    result["machine"] = machine()
    result["machine"]["loadavg_before"] = load_before
    print(table(result))
    print(f"load average (1/5/15 min) before {_loads(load_before)}, after "
          f"{_loads(result['machine']['loadavg_1_5_15'])}")
    if FLAGS.json:
        atomic.write_json(FLAGS.json, result)
        say(f"benchmarks: wrote {FLAGS.json}")
    return 0


def main() -> None:
    cli_main("benchmarks.pipelines", _define_flags, _main, usage=USAGE)


if __name__ == "__main__":
    main()
