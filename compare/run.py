"""``python -m compare.run``: run both pipelines, compare them stage by stage, write the report.

    python -m compare.run [--out DIR] [--images A.jpg,B/] [--steps N] [--seed S] [--verbose]
                          [--data_service grpc://HOST:PORT [--service_timeout S]
                          [--lost_worker_wait S]] [--screenshot]
    python -m compare.run A B [--out DIR] [--labels NAME_A,NAME_B]
    python -m compare.run --legacy A --modern B [--out DIR] [--labels NAME_A,NAME_B]

The first form runs the legacy pipeline and then the modern one, each in its own process and
profiled, into ``DIR/legacy`` and ``DIR/modern`` (so ``tensorboard --logdir DIR`` shows both
runs), then compares them; with ``--data_service`` modern's input pipeline runs on that tf.data
service's workers (see ``python -m modern.service``). The others compare two traces that already
exist (A the baseline), in any format we read, without running anything; ``--legacy`` and
``--modern`` are the seed pipeline's names for A and B. Either way DIR (default
``runs/<timestamp>``, never an existing non-empty folder) receives report.md, report.json,
stages.png, step_delta.png, timelines.png, timelines.json and merged_trace.json.gz, and with
``--screenshot`` profile_tab.png and compare_tab.png. TensorFlow's own log goes to DIR/tf.log
unless ``--verbose``. ``--labels`` names the two sides in every output, report.json's keys
included (default: the traces' file names; legacy and modern for our own runs). A thin CLI over
:func:`compare.api.run_and_compare` and :func:`compare.api.compare_traces`.
"""
from __future__ import annotations

import time
from pathlib import Path

from absl import flags

from common.errors import InputError, cli_main, say
from common.tflog import quiet_python_logs
from compare.analysis.result import SIDES
from compare.api import RunOptions, compare_traces, run_and_compare
from compare.cli_flags import define_max_memory, max_memory_flag
from compare.fmt import shown_words
from compare.output.report import Report
from compare.output.summary import summary
from compare.output.tables import delta_table, group_table, ops_table, stage_table
from compare.viewers.tensorboard import tab_installed

FLAGS = flags.FLAGS

#: What ``--help`` prints above the flags.
USAGE = """\
usage: python -m compare.run [--out DIR] [--images FILES,FOLDERS] [--steps N] [--seed S]
           [--skip_bad] [--brief] [--screenshot] [--verbose]
           [--data_service grpc://HOST:PORT [--service_timeout S] [--lost_worker_wait S]]
       python -m compare.run --legacy TRACE --modern TRACE [--out DIR] [--labels A,B] [--brief]

Runs the seed's TF1 queue-runner pipeline (legacy) and its tf.data + XLA port (modern), each
in a process of its own and profiled, into DIR/legacy and DIR/modern, then compares the two
stage by stage and op by op: where each run's time goes, what changed, and why.

With --legacy and --modern it compares two traces that already exist instead, of any
TensorFlow program, without running anything: timeline.py JSON, Chrome or xprof trace JSON
(.json or .json.gz), .xplane.pb, or a TensorBoard logdir, run or profile folder.

DIR (default runs/<timestamp>; never a folder that holds files) receives report.md,
report.json, stages.png, timelines.png and merged_trace.json.gz. report.md opens with a
one-screen summary; --brief prints only that summary. tensorboard --logdir DIR shows the
two runs' profiles.

examples:
  python -m compare.run --steps 5
  python -m compare.run --images photos/ --skip_bad --out runs/photos
  python -m compare.run --legacy old/timeline.json --modern new/logdir --labels before,after
"""


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
    flags.DEFINE_string("legacy", None, "Compare this existing trace (side A) instead of "
                                        "running the pipelines (with --modern).")
    flags.DEFINE_string("modern", None, "Compare this existing trace (side B; with --legacy).")
    flags.DEFINE_list("labels", None, "Two names for the sides, A,B (default: the traces' "
                                      "file names; legacy,modern for our own runs).")
    flags.DEFINE_boolean("skip_bad", False, "Run on the images that can be used, naming each "
                         "one skipped (truncated, corrupt, not a JPEG, ...), instead of stopping "
                         "before the runs with one line naming every bad one.")
    flags.DEFINE_boolean("brief", False, "Print only the summary report.md opens with (the "
                         "verdict, step times, largest changes, caveats), not the tables.")
    define_max_memory()


def _traces(argv: list[str]) -> tuple[str, str] | None:
    """The two traces to compare (positional A B, or --legacy/--modern), or None to run."""
    given = argv[1:]
    if given and (FLAGS.legacy or FLAGS.modern):
        raise InputError("give the two traces either as A B or as --legacy A --modern B, "
                         "not both")
    if given:
        if len(given) != 2:
            raise InputError(f"compare.run takes two traces, A B; got {len(given)}: "
                             f"{' '.join(given)}")
        return given[0], given[1]
    if bool(FLAGS.legacy) != bool(FLAGS.modern):
        raise InputError("--legacy and --modern go together: give both traces, or neither to "
                         "run both pipelines")
    return (FLAGS.legacy, FLAGS.modern) if FLAGS.legacy else None


def _main(argv: list[str]) -> int:
    traces = _traces(argv)
    labels = _labels(FLAGS.labels)
    quiet_python_logs()  # SIGINT and SIGTERM: common.errors.run_cli raises Interrupted for both
    t0 = time.monotonic()
    if traces:
        for name in ("data_service", "skip_bad", "images"):
            if FLAGS[name].present:
                raise InputError(f"--{name} is for running the pipelines, not for comparing "
                                 f"existing traces")
        out = Path(FLAGS.out) if FLAGS.out else None
        report = compare_traces(*traces, out, FLAGS.verbose, say, labels=labels,
                                max_memory=max_memory_flag())
        _print_summary(report, t0, tensorboard=False, brief=FLAGS.brief)
        return 0
    if FLAGS.max_memory is not None:
        raise InputError("--max_memory goes with --legacy/--modern (existing traces)")
    for name in ("service_timeout", "lost_worker_wait"):
        if FLAGS[name].value is not None and not FLAGS.data_service:
            raise InputError(f"--{name} goes with --data_service")
    options = RunOptions(FLAGS.images, FLAGS.steps, FLAGS.seed, FLAGS.data_service,
                         FLAGS.screenshot, FLAGS.service_timeout, FLAGS.lost_worker_wait,
                         FLAGS.skip_bad)
    report = run_and_compare(FLAGS.out, options, FLAGS.verbose, say, labels=labels)
    _print_summary(report, t0, tensorboard=True, brief=FLAGS.brief)
    return 0


def _labels(given: list[str] | None) -> dict[str, str] | None:
    if given is None:
        return None
    names = [x.strip() for x in given]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise InputError(f"--labels takes two different names, A,B; got {','.join(given)!r}")
    return dict(zip(SIDES, names))


def _print_summary(report: Report, t0: float, tensorboard: bool, brief: bool) -> None:
    c = report.comparison
    for k in SIDES:  # partly usable traces: what was skipped
        for w in c.sides[k].source.warnings:
            say(f"compare.run: {c.label(k)} trace {c.sides[k].source.path}: {w}")
    if brief:
        print("\n".join(summary(report)))
        say(f"[{time.monotonic() - t0:6.1f}s] done: {report.out / 'report.md'}")
        return
    if c.has_pipeline():
        print("The seed pipeline's stages (mean per steady step):")
        print(stage_table(c))
        print()
    print("What each run does, in any TF program's terms (mean per steady step):")
    print(group_table(c))
    print()
    if c.step_delta is not None:
        print("The step difference, term by term (they add up to it):")
        print(delta_table(c))
        print()
    print("Largest op differences (op time per steady step; all in report.json's ops_diff):")
    print(ops_table(c))
    print()
    for text in (*report.words["sides"].values(), report.words["comparison"]):
        print(f"- {shown_words(text)}")   # names in it cut as report.md cuts them
    print()
    folder = report.out
    shots = "".join(f", {x}" for x in (report.screenshot, report.files.get("compare_tab_png"))
                    if x)
    print(f"report: {folder / 'report.md'} (and report.json, stages.png, step_delta.png, "
          f"timelines.png, timelines.json, merged_trace.json.gz{shots})")
    if tensorboard:
        print(_tensorboard_line(folder))
    say(f"[{time.monotonic() - t0:6.1f}s] done in {time.monotonic() - t0:.1f} s")


def _tensorboard_line(folder: Path | None) -> str:
    """How to open the run folder in TensorBoard, its Pipeline compare tab included."""
    if tab_installed():
        return (f"open the profiles and their comparison (TensorBoard's Profile and Pipeline "
                f"compare tabs): tensorboard --logdir {folder}")
    return (f"open the profiles: tensorboard --logdir {folder} (with the Pipeline compare tab: "
            f"python -m compare.tab.launch --logdir {folder})")


def main() -> None:
    cli_main("compare.run", _define_flags, _main, usage=USAGE)


if __name__ == "__main__":
    main()
