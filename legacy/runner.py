"""Run the seed pipeline on TF 2.21 and write its traces (the library behind ``legacy.run``).

Writes into ``out`` (which must be new or empty):
  timeline_first.json  FULL_TRACE of the first step (includes XLA compilation), from timeline.py
  timeline.json        FULL_TRACE of a steady step
  plugins/profile/<session>/<host>.xplane.pb   TensorBoard profile of all steps, steps marked
  run.json             images, per-step wall times, TF version, XLA on/off, output shape

Artifacts are staged (:func:`common.atomic.staged`): nothing appears in ``out`` until the run
is done; an interrupted run keeps the profile of the steps that ran in ``out/partial``.

FULL_TRACE and the TensorBoard profiler cannot run at once ("Another profiling session
active"), so the profiled steps run in one session and the two traced steps in a second,
fresh session (which compiles again, so its first step shows the compile too).
"""
from __future__ import annotations

import os
import time

from common import atomic, profiling
from common.errors import InputError, tf_error_line
from common.inputs import preflight, resolve_images
from common.run_record import run_record

STEP_NAME = "legacy"
STEADY_WARMUP = 3


def _op_error(e) -> InputError:
    """One line for a TF error raised while the graph ran (node and first message line)."""
    msg = tf_error_line(e)
    node = getattr(getattr(e, "op", None), "name", None)
    return InputError(f"legacy pipeline failed at {node or 'a graph op'}: {msg}")


def _run_session(g, config, plan: list[str], profile_dir=None, progress=None):
    """Run one session with queue runners, one image per step, following ``plan``:
    "profile" steps run under the TensorBoard profiler with a step marker, "trace" steps run
    with FULL_TRACE (and the partition graphs), "plain" steps run bare. The profiler is stopped
    before the first traced step, since the two cannot run at once. ``progress(line)`` hears
    when the first step is done.

    Returns (wall seconds per step, file read per step, last output, {step: RunMetadata}).
    """
    import tensorflow as tf  # lazy: imports TensorFlow


    v1 = tf.compat.v1
    walls: list[float] = []
    keys: list[str] = []
    out = None
    metas: dict = {}
    profiler = None
    with v1.Session(graph=g.graph, config=config) as sess:
        coord = v1.train.Coordinator()
        threads = v1.train.start_queue_runners(sess=sess, coord=coord)
        try:
            for i, mode in enumerate(plan):
                kwargs = {}
                if mode == "profile" and profiler is None:
                    profiler = profiling.tensorboard_profile(profile_dir)
                    profiler.__enter__()
                elif mode != "profile" and profiler is not None:
                    profiler.__exit__(None, None, None)
                    profiler = None
                if mode == "trace":
                    kwargs["options"] = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE,
                                                      output_partition_graphs=True)
                    kwargs["run_metadata"] = metas.setdefault(i, v1.RunMetadata())
                t0 = time.perf_counter()
                if mode == "profile":
                    with profiling.step(STEP_NAME, i):
                        out, key = sess.run([g.output, g.key])
                else:
                    out, key = sess.run([g.output, g.key], **kwargs)
                walls.append(time.perf_counter() - t0)
                keys.append(key.decode("utf-8", "replace"))
                if i == 0 and progress and len(plan) > 1:
                    progress(f"first step done in {walls[0] * 1e3:.0f} ms; running "
                             f"{len(plan) - 1} more ...")
        except tf.errors.OpError as e:
            raise _op_error(e) from None
        finally:
            if profiler is not None:
                profiler.__exit__(None, None, None)
            coord.request_stop()
            try:
                coord.join(threads, stop_grace_period_secs=10)
            except tf.errors.OpError as e:  # raised inside a queue-runner thread
                raise _op_error(e) from None
    return walls, keys, out, metas


def _run_steps(g, config, n: int):
    """``n`` plain steps (used by tests and benchmarks)."""
    return _run_session(g, config, ["plain"] * n)


def run_legacy(out: str | os.PathLike, images: list[str] | None = None, steps: int = 20,
               xla: bool = True, seed: int | None = 0, progress=None) -> dict:
    """Run the legacy pipeline and write its artifacts into ``out``; return run.json's content.
    ``progress(line)``, if given, hears how the run goes."""
    from tensorflow.python.client import timeline  # lazy: imports TensorFlow

    from legacy import pipeline, xla_clusters  # lazy: imports TensorFlow

    paths = [os.path.abspath(p) for p in resolve_images(images)]
    shapes = preflight(paths)
    out = atomic.prepare_out_dir(out)
    with atomic.staged(out) as staging:
        g = pipeline.build(paths, xla=xla, seed=seed)
        config = pipeline.session_config(xla)
        # Session 1: the profiled steps (step 0 compiles), then one FULL_TRACE steady step, so
        # timeline.json and the profile share cluster names.
        plan = ["profile"] * steps + ["plain"] * (STEADY_WARMUP - 1) + ["trace"]
        walls, all_keys, result, metas = _run_session(g, config, plan, profile_dir=staging,
                                                      progress=progress)
        steady_meta = metas[len(plan) - 1]
        walls, keys = walls[:steps], all_keys[:steps]
        # Session 2, fresh: its first step compiles again, as the seed's first step did.
        _, first_keys, _, first_metas = _run_session(g, config, ["trace"])
        first_meta = first_metas[0]
        for meta, name in ((first_meta, "timeline_first.json"), (steady_meta, "timeline.json")):
            tl = timeline.Timeline(meta.step_stats, graph=g.graph)
            atomic.write_text(staging / name, tl.generate_chrome_trace_format(
                show_dataflow=True, show_memory=True))
        if xla:
            atomic.write_json(staging / "xla_clusters.json", xla_clusters.describe(
                staging, {"timeline.json": steady_meta, "timeline_first.json": first_meta}))
        run = run_record("legacy", seed=seed, paths=paths, shapes=shapes, step_name=STEP_NAME,
                         walls=walls, keys=keys, output=result)
        run.update({
            "xla": xla,
            "timelines": {"first": {"file": "timeline_first.json", "image": first_keys[0],
                                    "session": 2},
                          "steady": {"file": "timeline.json", "step": len(plan) - 1,
                                     "image": all_keys[-1], "session": 1}},
            "profile_logdir": ".",
        })
        atomic.write_json(staging / "run.json", run)
    return run
