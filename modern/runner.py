"""Run the modern pipeline and write its traces (the library behind ``modern.run``).

Writes into ``out`` (which must be new or empty):
  plugins/profile/<session>/<host>.xplane.pb   TensorBoard profile of all steps, steps marked
  trace.json.gz        the Chrome trace xprof's trace_viewer makes from that profile
  run.json             images, per-step wall times, TF version, jit on/off, output shape, seed,
                       which image (path, stream index) each step got, the files skipped with
                       ``skip_bad``, and the tf.data service used (``data_service``, else null)

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
augmentation; the workers' tf.data work happens in their processes.
"""
from __future__ import annotations

import contextlib
import gzip
import os
import time

from common import atomic
from common.errors import InputError, tf_error_line
from common.run_record import run_record

STEP_NAME = "modern"


def select_images(paths: list[str], skip_bad: bool) -> tuple[list[str], list[tuple[int, int]], list[dict]]:
    """Preflight every image: (good paths, their (height, width), skipped files with reasons).

    Without ``skip_bad`` the first bad file raises :class:`InputError` naming it.
    """
    from common.inputs import preflight

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


def _run_steps(step_fn, steps: int, profile_dir=None, progress=None):
    """``steps`` profiled steps of ``step_fn() -> (output, path, index)``; returns (wall
    seconds, image paths, stream indices, last output). ``progress(line)`` hears when the first
    step is done."""
    import tensorflow as tf

    from common import profiling

    walls, keys, indices, out = [], [], [], None
    ctx = profiling.tensorboard_profile(profile_dir) if profile_dir else None
    if ctx:
        ctx.__enter__()
    try:
        for i in range(steps):
            t0 = time.perf_counter()
            with profiling.step(STEP_NAME, i) if ctx else contextlib.nullcontext():
                out, path, index = step_fn()
            walls.append(time.perf_counter() - t0)
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


def run_modern(out: str | os.PathLike, images: list[str] | None = None, steps: int = 20,
               jit: bool = True, seed: int = 0, skip_bad: bool = False, progress=None,
               data_service: str | None = None) -> dict:
    """Run the modern pipeline and write its artifacts into ``out``; return run.json's content.

    Artifacts are staged (:func:`common.atomic.staged`): nothing appears in ``out`` until the
    run is done; an interrupted run keeps the profile of the steps that ran in ``out/partial``.
    ``progress(line)``, if given, hears how the run goes. ``data_service``: a tf.data service
    dispatcher (``grpc://host:port``) whose workers run the input pipeline; it must answer and
    have workers (:func:`modern.data_service.check_service`)."""
    from common.inputs import resolve_images
    from common.profiling import xplane_files, xplane_to_trace_json
    from modern import augment, pipeline
    from modern import data_service as service

    if steps < 1:
        raise InputError(f"--steps {steps}: need at least one step")
    paths = [os.path.abspath(p) for p in resolve_images(images)]
    paths, shapes, skipped = select_images(paths, skip_bad)
    service_info = service.check_service(data_service) if data_service else None
    out = atomic.prepare_out_dir(out)
    with atomic.staged(out) as staging:
        # Locally the stream is endless, as a training input is: tf.data keeps reading ahead
        # during every step, which the profile should show. On the service the job is exactly
        # indices 0..steps-1, the images a local run reads, and it ends on the workers with
        # the run (an abandoned endless job keeps tasks there).
        it = iter(pipeline.build(paths, seed=seed, count=steps if service_info else None,
                                 data_service=service_info and service_info["address"]))
        step_fn = augment.make_step(augment.make_augment(jit), it)
        walls, keys, indices, result = _run_steps(step_fn, steps, profile_dir=staging,
                                                  progress=progress)
        trace = xplane_to_trace_json(xplane_files(staging))
        atomic.write_bytes(staging / "trace.json.gz", gzip.compress(trace.encode("utf-8"), 6))
        run = run_record("modern", seed=seed, paths=paths, shapes=shapes, step_name=STEP_NAME,
                         walls=walls, keys=keys, output=result)
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
