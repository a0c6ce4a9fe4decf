"""Run the modern pipeline and write its traces (the library behind ``modern.run``).

Writes into ``out`` (which must be new or empty):
  plugins/profile/<session>/<host>.xplane.pb   TensorBoard profile of all steps, steps marked
  trace.json.gz        the Chrome trace xprof's trace_viewer makes from that profile
  run.json             images, per-step wall times, TF version, jit on/off, output shape, seed,
                       which image (path, stream index) each step got, the files skipped with
                       ``skip_bad``, and the tf.data service used (``data_service``, else null:
                       its workers, the workers lost during the run, the indices made again)

One step is one image: ``next()`` on the tf.data iterator and the augmentation, as one
``tf.function`` call (:func:`modern.augment.make_step`), inside
``tf.profiler.experimental.Trace("modern", step_num=i, _r=1)``. Step 0 includes the XLA
compile; the dataset, its iterator and the traced step function are built before the profile
starts, as legacy builds its graph and starts its queue runners first.

The run reads image indices 0..steps-1 of the stream (:func:`modern.pipeline.build`). With
``data_service`` exactly those are processed on tf.data service workers (``distributed_epoch``)
and arrive in the order the workers finish them; each index still gets the same image, draws
and output as in a local run with the same seed, so ``step_indices`` and ``step_images`` hold
the same pairs, reordered. The profile is this process's: the service reads and the
augmentation; the workers' tf.data work happens in their processes. Each step then runs on a
helper thread while the main thread waits, bounded (:class:`ServiceSteps`): a worker lost
mid-run costs the elements it held, which are made again in this process, so the run still
delivers its steps; a service that cannot go on (dispatcher gone, no worker left) ends the run
with one line, exit 1, and the profile of the steps done in ``out/partial``.
"""
from __future__ import annotations

import contextlib
import gzip
import os
import time

from common import atomic, profiling
from common.errors import InputError, RunFailed, tf_error_line
from common.inputs import preflight, resolve_images
from common.profiling import xplane_files, xplane_to_trace_json
from common.run_record import run_record
from modern import data_service as service
from modern.data_service import parse_address
from modern.service_watch import (
    DEFAULT_LOST_WORKER_WAIT_S,
    DEFAULT_TIMEOUT_S,
    ServiceReads,
    Stall,
)

STEP_NAME = "modern"


def select_images(paths: list[str], skip_bad: bool) -> tuple[list[str], list[tuple[int, int]], list[dict]]:
    """Preflight every image: (good paths, their (height, width), skipped files with reasons).

    Without ``skip_bad`` the first bad file raises :class:`InputError` naming it.
    """

    if not skip_bad:
        return paths, preflight(paths), []
    good, shapes, skipped = [], [], []
    for p in paths:
        try:
            shapes.append(preflight([p])[0])
            good.append(p)
        except InputError as e:
            skipped.append({"path": p, "reason": str(e)})
    if not good:
        raise InputError(f"no usable image: all {len(paths)} input files were skipped "
                         f"(first: {skipped[0]['reason']})")
    return good, shapes, skipped


def _profiled_step(step_fn, i: int, profiled: bool):
    """Step ``i`` of ``step_fn() -> (output, path, index)``, inside its step marker when
    ``profiled``: (output, path, index, wall seconds)."""

    t0 = time.perf_counter()
    with profiling.step(STEP_NAME, i) if profiled else contextlib.nullcontext():
        out, path, index = step_fn()
    return out, path, index, time.perf_counter() - t0


def _run_steps(next_step, steps: int, profile_dir=None, progress=None):
    """``steps`` steps, each ``next_step(i, profiled) -> (output, path, index, wall)`` (see
    :func:`_profiled_step`), profiled into ``profile_dir`` if given; returns (wall seconds,
    image paths, stream indices, last output). ``progress(line)`` hears when the first step is
    done."""
    import tensorflow as tf  # lazy: imports TensorFlow


    walls, keys, indices, out = [], [], [], None
    ctx = profiling.tensorboard_profile(profile_dir) if profile_dir else None
    if ctx:
        ctx.__enter__()
    try:
        for i in range(steps):
            out, path, index, wall = next_step(i, ctx is not None)
            walls.append(wall)
            keys.append(path.numpy().decode("utf-8", "replace"))
            indices.append(int(index))
            if i == 0 and progress and steps > 1:
                progress(f"first step done in {walls[0] * 1e3:.0f} ms; running {steps - 1} "
                         f"more ...")
    except tf.errors.OpError as e:
        raise InputError(f"modern pipeline failed: {tf_error_line(e)}") from None
    finally:
        if ctx:
            ctx.__exit__(None, None, None)
    return walls, keys, indices, out


class ServiceSteps:
    """The steps of a run whose input comes from tf.data service, as ``next_step`` for
    :func:`_run_steps`: each read is bounded (:class:`modern.service_watch.ServiceReads`), and
    when the service can no longer deliver what a run still needs, the run goes on or ends:

    * a worker lost while the dispatcher and other workers still answer, a service silent for
      the whole timeout, or a job that ended early: the indices not yet received are made in
      this process (``make_local(indices) -> step_fn``; the stream is index-addressed, so each
      is the element the service would have delivered) and the run completes;
    * the dispatcher gone, no worker left, or a restarted dispatcher that no longer knows the
      job: :class:`common.errors.RunFailed` naming what went and how many steps were done.

    Each index of the job is delivered once: one the service sends again, or one outside the
    job, is dropped within the step (``duplicate_indices`` in :meth:`report`) and the next
    element read. Once every step is read the watch stops: what happens to the servers after
    that is no longer the run's business.

    ``make_service() -> step_fn`` builds the service iterator's step (on the helper thread:
    creating the iterator already talks to the dispatcher); ``reads``: a
    :class:`modern.service_watch.ServiceReads` (or a stand-in with ``call``, ``address``,
    ``timeout_s``, ``lost_worker_wait_s``, ``watch`` and the context manager).
    :meth:`report` is what run.json adds to ``data_service``.
    """

    def __init__(self, reads, count: int, make_service, make_local, progress=None):
        self._count, self._make_local = count, make_local
        self._progress = progress or (lambda line: None)
        self._reads = reads
        self._make_service = make_service
        self._service = self._local = None
        self._seen: set[int] = set()
        self.duplicates: list[int] = []
        self.reproduced: list[int] = []
        self.reproduced_because: str | None = None

    def __enter__(self) -> "ServiceSteps":

        self._reads.__enter__()
        try:
            try:
                self._service = self._reads.call(self._make_service)
            except Stall as stall:
                self._give_up(stall)
        except BaseException:
            self._reads.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._reads.__exit__(*exc)

    def __call__(self, i: int, profiled: bool):

        if self._local is None:
            try:
                result = self._reads.call(lambda: _profiled_step(self._fresh, i, profiled))
            except Stall as stall:
                self._give_up(stall)
            else:
                self._seen.add(int(result[2]))
                self._reads.watch.steps_done = len(self._seen)
                if len(self._seen) == self._count:
                    self._reads.watch.__exit__(None, None, None)
                return result
        return _profiled_step(self._local, i, profiled)

    def _fresh(self):
        """The service step, until it delivers an index of the job not delivered yet."""
        while True:
            out, path, index = self._service()
            if 0 <= int(index) < self._count and int(index) not in self._seen:
                return out, path, index
            self.duplicates.append(int(index))

    def _give_up(self, stall) -> None:
        """Make the missing indices here, or raise RunFailed."""

        what, hint = stall.describe(self._reads.address)
        done = len(self._seen)
        if not stall.recoverable:
            raise RunFailed(f"{what}; {done} of {self._count} steps done"
                            + (f"; {hint}" if hint else ""))
        missing = sorted(set(range(self._count)) - self._seen)
        self._progress(f"{what}; making the {len(missing)} element(s) still missing in this "
                       f"process ({done} of {self._count} steps done)")
        self._local = self._make_local(missing)
        self.reproduced, self.reproduced_because = missing, what

    def report(self) -> dict:
        return {"timeout_s": self._reads.timeout_s,
                "lost_worker_wait_s": self._reads.lost_worker_wait_s,
                **self._reads.watch.report(),
                "reproduced_indices": self.reproduced,
                "reproduced_count": len(self.reproduced),
                "reproduced_because": self.reproduced_because,
                "duplicate_indices": self.duplicates}


def run_modern(out: str | os.PathLike, images: list[str] | None = None, steps: int = 20,
               jit: bool = True, seed: int = 0, skip_bad: bool = False, progress=None,
               data_service: str | None = None, service_timeout_s: float | None = None,
               lost_worker_wait_s: float | None = None) -> dict:
    """Run the modern pipeline and write its artifacts into ``out``; return run.json's content.

    Artifacts are staged (:func:`common.atomic.staged`): nothing appears in ``out`` until the
    run is done; an interrupted run keeps the profile of the steps that ran in ``out/partial``.
    ``progress(line)``, if given, hears how the run goes. ``data_service``: a tf.data service
    dispatcher (``grpc://host:port``) whose workers run the input pipeline; it must answer and
    have workers that answer (:func:`modern.data_service.check_service`). No read from it waits
    longer than ``service_timeout_s`` (default :data:`modern.service_watch.DEFAULT_TIMEOUT_S`),
    nor longer than ``lost_worker_wait_s`` (default
    :data:`modern.service_watch.DEFAULT_LOST_WORKER_WAIT_S`) once a worker is lost and the rest
    answer; what happens then: :class:`ServiceSteps`."""
    from modern import augment  # lazy: imports TensorFlow

    if steps < 1:
        raise InputError(f"--steps {steps}: need at least one step")
    for flag, seconds in (("service_timeout", service_timeout_s),
                          ("lost_worker_wait", lost_worker_wait_s)):
        if seconds is not None and not seconds > 0:
            raise InputError(f"--{flag} {seconds:g}: need a positive number of seconds")
    paths = [os.path.abspath(p) for p in resolve_images(images)]
    paths, shapes, skipped = select_images(paths, skip_bad)
    service_info = service.check_service(data_service) if data_service else None
    out = atomic.prepare_out_dir(out)
    with atomic.staged(out) as staging, contextlib.ExitStack() as stack:
        augment_fn = augment.make_augment(jit)
        if service_info:
            limits = (service_timeout_s or DEFAULT_TIMEOUT_S,
                      lost_worker_wait_s or DEFAULT_LOST_WORKER_WAIT_S)
            next_step = stack.enter_context(_service_steps(
                paths, seed, steps, augment_fn, service_info, limits, progress))
        else:
            next_step = _local_steps(paths, seed, augment_fn)
        walls, keys, indices, result = _run_steps(next_step, steps, profile_dir=staging,
                                                  progress=progress)
        trace = xplane_to_trace_json(xplane_files(staging))
        atomic.write_bytes(staging / "trace.json.gz", gzip.compress(trace.encode("utf-8"), 6))
        run = run_record("modern", seed=seed, paths=paths, shapes=shapes, step_name=STEP_NAME,
                         walls=walls, keys=keys, output=result)
        if service_info:
            service_info = {**service_info, **next_step.report()}
        run.update({
            "jit": jit,
            "xla": jit,
            "step_indices": indices,
            "trace": "trace.json.gz",
            "profile_logdir": ".",
            "data_service": service_info,
        })
        if skip_bad:
            run["skipped"] = skipped
            run["skipped_count"] = len(skipped)
        atomic.write_json(staging / "run.json", run)
    return run


def _local_steps(paths: list[str], seed: int, augment_fn):
    """``next_step`` for a local run. The stream is endless, as a training input is: tf.data
    keeps reading ahead during every step, which the profile should show."""
    from modern import augment, pipeline  # lazy: imports TensorFlow

    step_fn = augment.make_step(augment_fn, iter(pipeline.build(paths, seed=seed)))
    return lambda i, profiled: _profiled_step(step_fn, i, profiled)


def _service_steps(paths: list[str], seed: int, steps: int, augment_fn, info: dict,
                   limits: tuple[float, float], progress) -> ServiceSteps:
    """``next_step`` for a run on the service. The job is exactly indices 0..steps-1, the
    images a local run reads, and it ends on the workers with the run (an abandoned endless
    job keeps tasks there). ``limits``: (timeout, lost-worker wait) in seconds."""
    from modern import augment, pipeline  # lazy: imports TensorFlow

    def make_service():
        ds = pipeline.build(paths, seed=seed, count=steps, data_service=info["address"])
        return augment.make_step(augment_fn, iter(ds))

    def make_local(indices: list[int]):
        return augment.make_step(augment_fn, iter(pipeline.build(paths, seed=seed,
                                                                 indices=indices)))

    say = progress or (lambda line: None)
    reads = ServiceReads(parse_address(info["address"]), info["workers"], limits[0],
                         notify=say, lost_worker_wait_s=limits[1])
    return ServiceSteps(reads, steps, make_service, make_local, say)
