"""``python -m compare.run``: the main job.

Interim: until the comparison lands, this runs the legacy pipeline on the default image into a
new run folder under ``runs/`` and prints how to open it in TensorBoard.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from absl import app, flags

from common.errors import InputError, run_cli, say
from common.tflog import quiet_env

FLAGS = flags.FLAGS


def _define_flags() -> None:
    flags.DEFINE_string("out", None, "Run folder (default: runs/<timestamp>).")
    flags.DEFINE_list("images", [], "JPEG files or folders (default: grace_hopper.jpg).")
    flags.DEFINE_integer("steps", 20, "Steps per pipeline.", lower_bound=2)
    flags.DEFINE_boolean("verbose", False, "Show TensorFlow's own log on stderr.")


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    from common import atomic
    from common.tflog import native_stderr_to, quiet_python_logs
    from legacy.runner import run_legacy

    out = Path(FLAGS.out or Path("runs") / time.strftime("%Y%m%d-%H%M%S"))
    out = atomic.prepare_out_dir(out)
    quiet_python_logs()
    t0 = time.monotonic()
    say(f"[{0:6.1f}s] running legacy ...")
    with native_stderr_to(None if FLAGS.verbose else out / "tf.log"):
        run = run_legacy(out / "legacy", FLAGS.images, FLAGS.steps)
    say(f"[{time.monotonic() - t0:6.1f}s] legacy: first step {run['first_step_s'] * 1e3:.0f} ms, "
        f"steady {run['steady_median_s'] * 1e3:.1f} ms/step")
    say(f"open it: tensorboard --logdir {out}")
    return 0


def main() -> None:
    quiet_env()
    _define_flags()
    app.run(lambda argv: sys.exit(run_cli(_main, argv, "compare.run")))


if __name__ == "__main__":
    main()
