"""Run the seed pipeline on TF 2.21 and write its traces (the library behind ``legacy.run``).

Writes into ``out`` (which must be new or empty):
  timeline_first.json  FULL_TRACE of the first step (includes XLA compilation), from timeline.py
  timeline.json        FULL_TRACE of a steady step
  plugins/profile/<session>/<host>.xplane.pb   TensorBoard profile of all steps, steps marked
  run.json             images, per-step wall times, TF version, XLA on/off, output shape

FULL_TRACE and the TensorBoard profiler cannot run at once ("Another profiling session
active"), so the profiled steps run in one session and the two traced steps in a second,
fresh session (which compiles again, so its first step shows the compile too).
"""
from __future__ import annotations

import os
import platform
import time

from common import atomic
from common.errors import InputError, tf_error_line

STEP_NAME = "legacy"
STEADY_WARMUP = 3


def _op_error(e) -> InputError:
    """One line for a TF error raised while the graph ran (node and first message line)."""
    msg = tf_error_line(e)
    node = getattr(getattr(e, "op", None), "name", None)
    return InputError(f"legacy pipeline failed at {node or 'a graph op'}: {msg}")


def _run_steps(g, config, n: int, trace_steps: dict | None = None, profile_dir=None):
    """Run ``n`` steps with queue runners; return (wall seconds, keys, last output, metadata)."""
    import tensorflow as tf
    from common import profiling

    v1 = tf.compat.v1
    walls, keys, out, metas = [], [], None, {}
    with v1.Session(graph=g.graph, config=config) as sess:
        coord = v1.train.Coordinator()
        threads = v1.train.start_queue_runners(sess=sess, coord=coord)
        try:
            ctx = profiling.tensorboard_profile(profile_dir) if profile_dir else None
            if ctx:
                ctx.__enter__()
            try:
                for i in range(n):
                    kwargs = {}
                    if trace_steps and i in trace_steps:
                        kwargs["options"] = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
                        kwargs["run_metadata"] = metas.setdefault(i, v1.RunMetadata())
                    t0 = time.perf_counter()
                    if profile_dir:
                        with profiling.step(STEP_NAME, i):
                            out, key = sess.run([g.output, g.key], **kwargs)
                    else:
                        out, key = sess.run([g.output, g.key], **kwargs)
                    walls.append(time.perf_counter() - t0)
                    keys.append(key.decode("utf-8", "replace"))
            finally:
                if ctx:
                    ctx.__exit__(None, None, None)
        except tf.errors.OpError as e:
            raise _op_error(e) from None
        finally:
            coord.request_stop()
            try:
                coord.join(threads, stop_grace_period_secs=10)
            except tf.errors.OpError as e:  # raised inside a queue-runner thread
                raise _op_error(e) from None
    return walls, keys, out, metas


def run_legacy(out: str | os.PathLike, images: list[str] | None = None, steps: int = 20,
               xla: bool = True, seed: int | None = 0) -> dict:
    """Run the legacy pipeline and write its artifacts into ``out``; return run.json's content."""
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.client import timeline

    from common.inputs import preflight, resolve_images
    from legacy import pipeline

    paths = [os.path.abspath(p) for p in resolve_images(images)]
    shapes = preflight(paths)
    out = atomic.prepare_out_dir(out)
    staging = out / f".staging-{os.getpid()}"
    staging.mkdir()
    try:
        g = pipeline.build(paths, xla=xla, seed=seed)
        config = pipeline.session_config(xla)
        walls, keys, result, _ = _run_steps(g, config, steps, profile_dir=staging)
        traced = {0: "timeline_first.json", STEADY_WARMUP: "timeline.json"}
        _, tkeys, _, metas = _run_steps(g, config, STEADY_WARMUP + 1, trace_steps=traced)
        for i, name in traced.items():
            tl = timeline.Timeline(metas[i].step_stats, graph=g.graph)
            atomic.write_text(staging / name, tl.generate_chrome_trace_format(
                show_dataflow=True, show_memory=True))
        steady = walls[1:]
        run = {
            "pipeline": "legacy",
            "tf_version": tf.__version__,
            "python": platform.python_version(),
            "xla": xla,
            "seed": seed,
            "images": [{"path": p, "height": h, "width": w} for p, (h, w) in zip(paths, shapes)],
            "steps": steps,
            "step_name": STEP_NAME,
            "step_wall_s": walls,
            "step_images": keys,
            "first_step_s": walls[0],
            "steady_median_s": float(np.median(steady)),
            "output_shape": list(result.shape),
            "output_dtype": str(result.dtype),
            "timelines": {"first": {"file": "timeline_first.json", "image": tkeys[0]},
                          "steady": {"file": "timeline.json", "step": STEADY_WARMUP,
                                     "image": tkeys[STEADY_WARMUP]}},
            "profile_logdir": ".",
        }
        atomic.write_json(staging / "run.json", run)
        atomic.move_into(staging, out)
        return run
    except BaseException:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        raise
