"""``python -m compare.run``: run both pipelines, compare them stage by stage, write the report.

    python -m compare.run [--out DIR] [--images A.jpg,B/] [--steps N] [--seed S] [--verbose]
                          [--data_service grpc://HOST:PORT [--service_timeout S]
                          [--lost_worker_wait S]] [--screenshot]
    python -m compare.run --legacy TRACE --modern TRACE [--out DIR] [--labels A,B]

The first form runs the legacy pipeline and then the modern one, each in its own process and
profiled, into ``DIR/legacy`` and ``DIR/modern`` (so ``tensorboard --logdir DIR`` shows both
runs), then compares them; with ``--data_service`` modern's input pipeline runs on that tf.data
service's workers (see ``python -m modern.service``). The second compares traces that already
exist, in any format we read, without running anything. Either way DIR (default
``runs/<timestamp>``, never an existing non-empty folder) receives report.md, report.json,
stages.png, timelines.png and merged_trace.json.gz, and with ``--screenshot`` profile_tab.png and
compare_tab.png.
TensorFlow's own log goes to DIR/tf.log unless ``--verbose``. ``--labels A,B`` names the two sides
in every output (default: the traces' file names; legacy and modern for our own runs);
report.json keeps its ``legacy``/``modern`` keys and records the labels. A thin CLI over
:func:`compare.api.run_and_compare` and :func:`compare.api.compare_traces`.
"""
from __future__ import annotations

import time
from pathlib import Path

from absl import flags

from common.errors import InputError, cli_main, say
from common.tflog import quiet_python_logs
from compare.analysis.comparison import SIDES
from compare.api import RunOptions, compare_traces, run_and_compare
from compare.fmt import shown_words
from compare.output.report import Report
from compare.output.tables import group_table, ops_table, stage_table

FLAGS = flags.FLAGS


def _define_flags() -> None:
    flags.DEFINE_string("out", None, "Run folder, new or empty (default: runs/<timestamp>).")
    flags.DEFINE_list("images", [], "JPEG files or folders (default: matplotlib's "
                                    "grace_hopper.jpg).")
    flags.DEFINE_integer("steps", 20, "Profiled steps per pipeline (one image per step).",
                         lower_bound=2)
    flags.DEFINE_integer("seed", 0, "Random seed of both pipelines.")
    flags.DEFINE_boolean("verbose", False, "Show TensorFlow's own log on stderr.")
    flags.DEFINE_string("data_service", None, "Run modern's input pipeline on the workers of "
                        "this tf.data service dispatcher (grpc://HOST:PORT); legacy is "
                        "unchanged.")
    flags.DEFINE_float("service_timeout", None, "With --data_service: the longest a read from "
                       "the service may wait, in seconds (modern.run --service_timeout).",
                       lower_bound=0.1)
    flags.DEFINE_float("lost_worker_wait", None, "With --data_service: once a worker is lost, "
                       "how long a read waits before modern makes what it held in its own "
                       "process, in seconds (modern.run --lost_worker_wait).", lower_bound=0.1)
    flags.DEFINE_boolean("screenshot", False, "Also open the run folder in TensorBoard and "
                         "headless Chromium (Debian's chromium) and save the profile tab, both "
                         "sessions listed, as profile_tab.png, and the Pipeline compare tab as "
                         "compare_tab.png (both shown in report.md).")
    flags.DEFINE_string("legacy", None, "Compare this existing legacy trace instead of running "
                                        "the pipelines (with --modern).")
    flags.DEFINE_string("modern", None, "Compare this existing modern trace (with --legacy).")
    flags.DEFINE_list("labels", None, "Two names for the sides, A,B (default: the traces' "
                                      "file names; legacy,modern for our own runs).")


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    if bool(FLAGS.legacy) != bool(FLAGS.modern):
        raise InputError("--legacy and --modern go together: give both traces, or neither to "
                         "run both pipelines")
    labels = _labels(FLAGS.labels)
    quiet_python_logs()  # SIGINT and SIGTERM: common.errors.run_cli raises Interrupted for both
    t0 = time.monotonic()
    if FLAGS.legacy:
        if FLAGS.data_service:
            raise InputError("--data_service is for running the pipelines, not for comparing "
                             "existing traces (--legacy/--modern)")
        out = Path(FLAGS.out) if FLAGS.out else None
        report = compare_traces(FLAGS.legacy, FLAGS.modern, out, FLAGS.verbose, say,
                                labels=labels)
        _print_summary(report, t0, tensorboard=False)
        return 0
    for name in ("service_timeout", "lost_worker_wait"):
        if FLAGS[name].value is not None and not FLAGS.data_service:
            raise InputError(f"--{name} goes with --data_service")
    options = RunOptions(FLAGS.images, FLAGS.steps, FLAGS.seed, FLAGS.data_service,
                         FLAGS.screenshot, FLAGS.service_timeout, FLAGS.lost_worker_wait)
    report = run_and_compare(FLAGS.out, options, FLAGS.verbose, say, labels=labels)
    _print_summary(report, t0, tensorboard=True)
    return 0


def _labels(given: list[str] | None) -> dict[str, str] | None:
    if given is None:
        return None
    names = [x.strip() for x in given]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise InputError(f"--labels takes two different names, A,B; got {','.join(given)!r}")
    return dict(zip(SIDES, names))


def _print_summary(report: Report, t0: float, tensorboard: bool) -> None:
    c = report.comparison
    if c.has_pipeline():
        print("The seed pipeline's stages (median per steady step):")
        print(stage_table(c))
        print()
    print("What each run does, in any TF program's terms (median per steady step):")
    print(group_table(c))
    print()
    print("Largest op differences (per steady step; all in report.json's ops_diff):")
    print(ops_table(c))
    print()
    for k in SIDES:  # partly usable traces: what was skipped
        for w in c.sides[k].source.warnings:
            say(f"compare.run: {c.label(k)} trace {c.sides[k].source.path}: {w}")
    for text in (c.verdict.sides["legacy"], c.verdict.sides["modern"], c.verdict.comparison):
        print(f"- {shown_words(text)}")   # names in it cut as report.md cuts them
    print()
    folder = report.out
    shots = "".join(f", {x}" for x in (report.screenshot, report.files.get("compare_tab_png"))
                    if x)
    print(f"report: {folder / 'report.md'} (and report.json, stages.png, timelines.png, "
          f"timelines.json, merged_trace.json.gz{shots})")
    if tensorboard:
        print(f"open the profiles: tensorboard --logdir {folder}")
    say(f"[{time.monotonic() - t0:6.1f}s] done in {time.monotonic() - t0:.1f} s")


def main() -> None:
    cli_main("compare.run", _define_flags, _main)


if __name__ == "__main__":
    main()
