"""``python -m legacy.run --out DIR [--images ...] [--steps N] [--noxla] [--seed S]``.

A thin CLI over :func:`legacy.runner.run_legacy`; see there for what it writes.
"""
from __future__ import annotations

from pathlib import Path

from absl import flags

from common import atomic
from common.errors import InputError, cli_main, say
from common.inputs import checked_images
from common.tflog import native_stderr_to, quiet_python_logs
from legacy.runner import run_legacy

FLAGS = flags.FLAGS

#: What ``--help`` prints above the flags.
USAGE = """\
usage: python -m legacy.run --out DIR [--images FILES,FOLDERS] [--steps N] [--noxla] [--seed S]
           [--verbose]

Runs the seed's TF1 input pipeline as it was written for TF 1.x -- queue runners, a session,
XLA auto-clustering (jit_scope and global_jit_level ON_1) -- on TensorFlow 2.21's
tf.compat.v1, one image per step, and profiles it. DIR (new or empty) receives
timeline_first.json (the first step, with XLA's compiles), timeline.json (a steady step), a
TensorBoard profile of every step and run.json.

examples:
  python -m legacy.run --out runs/legacy
  python -m legacy.run --out runs/legacy-noxla --noxla --images photos/
"""



def _define_flags() -> None:
    flags.DEFINE_string("out", None, "Output folder (new or empty).")
    flags.DEFINE_list("images", [], "JPEG files or folders (default: matplotlib's grace_hopper.jpg).")
    flags.DEFINE_integer("steps", 20, "Session steps to profile (one image per step).", lower_bound=2)
    flags.DEFINE_boolean("noxla", False, "Reference run: no jit_scope, global_jit_level OFF.")
    flags.DEFINE_integer("seed", 0, "Graph-level random seed.")
    flags.DEFINE_boolean("verbose", False, "Show TensorFlow's own log on stderr.")


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.out:
        raise InputError("--out DIR is required")

    checked_images(FLAGS.images)  # every file whole, before anything is created
    out = atomic.prepare_out_dir(FLAGS.out)
    quiet_python_logs()
    say(f"legacy: running {FLAGS.steps} steps (XLA {'off' if FLAGS.noxla else 'on'}); "
        f"TensorFlow's log goes to {out / 'tf.log'} ...")
    with native_stderr_to(None if FLAGS.verbose else out / "tf.log"):
        run = run_legacy(out, FLAGS.images, FLAGS.steps, xla=not FLAGS.noxla, seed=FLAGS.seed,
                         progress=lambda line: say(f"legacy: {line}"))
    say(f"legacy: first step {run['first_step_s'] * 1e3:.0f} ms, steady median "
        f"{run['steady_median_s'] * 1e3:.1f} ms/step, output {tuple(run['output_shape'])}")
    say(f"legacy: wrote {Path(FLAGS.out) / 'timeline.json'}, timeline_first.json, run.json and "
        f"a profile; view it with: tensorboard --logdir {FLAGS.out}")
    return 0


def main() -> None:
    cli_main("legacy.run", _define_flags, _main, usage=USAGE)


if __name__ == "__main__":
    main()
