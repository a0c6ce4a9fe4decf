"""``python -m modern.run --out DIR [--images ...] [--steps N] [--nojit] [--seed S] [--skip_bad]
[--data_service grpc://HOST:PORT [--service_timeout SECONDS] [--lost_worker_wait SECONDS]]``.

A thin CLI over :func:`modern.runner.run_modern`; see there for what it writes.
"""
from __future__ import annotations

from pathlib import Path

from absl import flags

from common import atomic
from common.errors import InputError, cli_main, say
from common.inputs import checked_images
from common.tflog import native_stderr_to, quiet_python_logs
from modern.data_service import parse_address
from modern.runner import run_modern
from modern.service_watch import DEFAULT_LOST_WORKER_WAIT_S, DEFAULT_TIMEOUT_S

FLAGS = flags.FLAGS

#: What ``--help`` prints above the flags.
USAGE = """\
usage: python -m modern.run --out DIR [--images FILES,FOLDERS] [--steps N] [--nojit] [--seed S]
           [--skip_bad] [--verbose]
           [--data_service grpc://HOST:PORT [--service_timeout S] [--lost_worker_wait S]]

Runs the tf.data port of the seed's pipeline, one image per step: tf.data reads, decodes,
resizes and crops; the augmentation is compiled by XLA once for every image size; random
draws are stateless, from --seed, so a seed reproduces a run. DIR (new or empty) receives a
TensorBoard profile with the steps marked, trace.json.gz (its trace viewer JSON) and run.json.

With --data_service the input pipeline runs on the workers of a tf.data service (start them
with python -m modern.service); a worker lost mid-run costs time, not steps.

examples:
  python -m modern.run --out runs/modern
  python -m modern.run --out runs/photos --images photos/ --skip_bad
  python -m modern.run --out runs/svc --data_service grpc://127.0.0.1:5050
"""



def _define_flags() -> None:
    flags.DEFINE_string("out", None, "Output folder (new or empty).")
    flags.DEFINE_list("images", [], "JPEG files or folders (default: matplotlib's grace_hopper.jpg).")
    flags.DEFINE_integer("steps", 20, "Steps to profile (one image per step).", lower_bound=2)
    flags.DEFINE_boolean("nojit", False, "Reference run: the same augmentation without XLA.")
    flags.DEFINE_integer("seed", 0, "Root seed of the stateless random draws; a seed reproduces a run.")
    flags.DEFINE_boolean("skip_bad", False, "Skip corrupt or non-JPEG files (named in run.json) "
                                            "instead of stopping at the first one.")
    flags.DEFINE_string("data_service", None, "Run the input pipeline on the tf.data service "
                        "workers of this dispatcher (grpc://HOST:PORT; see python -m "
                        "modern.service); the augmentation stays in this process.")
    flags.DEFINE_float("service_timeout", None, "With --data_service: the longest any read from "
                       "the service may wait, in seconds (default "
                       f"{DEFAULT_TIMEOUT_S:g}); then the run makes what the service still owes "
                       "in this process if the service still answers, else ends with exit 1.",
                       lower_bound=0.1)
    flags.DEFINE_float("lost_worker_wait", None, "With --data_service: once a worker is lost "
                       "and the rest of the service answers, how long a read waits before the "
                       "elements the lost worker held are made in this process, in seconds "
                       f"(default {DEFAULT_LOST_WORKER_WAIT_S:g}; at most --service_timeout). "
                       "Longer if one element takes the workers longer than that.",
                       lower_bound=0.1)
    flags.DEFINE_boolean("verbose", False, "Show TensorFlow's own log on stderr.")


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.out:
        raise InputError("--out DIR is required")

    if FLAGS.data_service is not None:
        parse_address(FLAGS.data_service)
    else:
        for name in ("service_timeout", "lost_worker_wait"):
            if FLAGS[name].value is not None:
                raise InputError(f"--{name} goes with --data_service")
    if not FLAGS.skip_bad:
        checked_images(FLAGS.images)  # every file whole, before anything is created
    out = atomic.prepare_out_dir(FLAGS.out)
    quiet_python_logs()
    where = f", input on the tf.data service at {FLAGS.data_service}" if FLAGS.data_service else ""
    say(f"modern: running {FLAGS.steps} steps (XLA {'off' if FLAGS.nojit else 'on'}{where}); "
        f"TensorFlow's log goes to {out / 'tf.log'} ...")
    with native_stderr_to(None if FLAGS.verbose else out / "tf.log"):
        run = run_modern(out, FLAGS.images, FLAGS.steps, jit=not FLAGS.nojit, seed=FLAGS.seed,
                         skip_bad=FLAGS.skip_bad, data_service=FLAGS.data_service,
                         service_timeout_s=FLAGS.service_timeout,
                         lost_worker_wait_s=FLAGS.lost_worker_wait,
                         progress=lambda line: say(f"modern: {line}"))
    if run["data_service"]:
        _say_service(run["data_service"])
    for s in run.get("skipped", []):
        say(f"modern: skipped {s['reason']}")
    say(f"modern: first step {run['first_step_s'] * 1e3:.0f} ms, steady median "
        f"{run['steady_median_s'] * 1e3:.1f} ms/step, output {tuple(run['output_shape'])}"
        + (f", {run['skipped_count']} file(s) skipped" if FLAGS.skip_bad else ""))
    say(f"modern: wrote {Path(FLAGS.out) / 'trace.json.gz'}, run.json and a profile; "
        f"view it with: tensorboard --logdir {FLAGS.out}")
    return 0


def _say_service(svc: dict) -> None:
    say(f"modern: input pipeline ran on {svc['worker_count']} tf.data service worker(s) "
        f"({', '.join(svc['workers'])}), {svc['processing_mode']}")
    faults = [f"worker {w['address']} lost after step {w['after_steps']}"
              + (f" (back {w['back_after_s']:g} s later)" if w.get("back_after_s") else "")
              for w in svc.get("lost_workers", [])]
    faults += [f"dispatcher unreachable after step {o['after_steps']} for "
               + (f"{o['seconds']:g} s" if o["seconds"] is not None else "the rest of the run")
               for o in svc.get("dispatcher_outages", [])]
    if svc.get("duplicate_indices"):
        faults.append(f"{len(svc['duplicate_indices'])} element(s) the service sent twice "
                      f"dropped")
    if faults or svc.get("reproduced_count"):
        say(f"modern: {'; '.join(faults) or 'no server lost'}; {svc['reproduced_count']} "
            f"element(s) made again in this process (run.json: data_service)")


def main() -> None:
    cli_main("modern.run", _define_flags, _main, usage=USAGE)


if __name__ == "__main__":
    main()
