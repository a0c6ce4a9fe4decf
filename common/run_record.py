"""run.json: what a profiled run of either pipeline records, with the same keys for what both
share (``compare`` and the tests read them alike); each runner adds its own keys."""
from __future__ import annotations

import platform
import statistics

#: Our two pipelines, run.json's ``pipeline``, in the order compare.run runs and compares them
#: (side A, side B).
PIPELINES = ("legacy", "modern")


def run_record(pipeline: str, *, seed: int | None, paths: list[str], shapes: list[tuple[int, int]],
               step_name: str, walls: list[float], keys: list[str], output) -> dict:
    """The shared part of run.json: versions, inputs, per-step wall times and images, the first
    step apart from the steady median (every step but the first), and the output's shape and
    dtype (``output``: a numpy array or a tf.Tensor)."""
    import tensorflow as tf  # lazy: TensorFlow takes seconds to import

    steady = walls[1:] or walls
    return {
        "pipeline": pipeline,
        "tf_version": tf.__version__,
        "python": platform.python_version(),
        "seed": seed,
        "images": [{"path": p, "height": h, "width": w} for p, (h, w) in zip(paths, shapes)],
        "steps": len(walls),
        "step_name": step_name,
        "step_wall_s": walls,
        "step_images": keys,
        "first_step_s": walls[0],
        "steady_median_s": float(statistics.median(steady)),
        "output_shape": list(output.shape),
        "output_dtype": output.dtype.name,
    }
