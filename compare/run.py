"""``python -m compare.run``: run both pipelines, compare them stage by stage, write the report.

    python -m compare.run [--out DIR] [--images A.jpg,B/] [--steps N] [--seed S] [--verbose]
                          [--data_service grpc://HOST:PORT [--service_timeout S]] [--screenshot]
    python -m compare.run --legacy TRACE --modern TRACE [--out DIR]

The first form runs the legacy pipeline and then the modern one, each in its own process and
profiled, into ``DIR/legacy`` and ``DIR/modern`` (so ``tensorboard --logdir DIR`` shows both
runs), then compares them; with ``--data_service`` modern's input pipeline runs on that tf.data
service's workers (see ``python -m modern.service``), so its read, decode and resize happen in
their processes, not in modern's trace. The second compares traces that already exist, in any
format we read, without running anything. Either way DIR (default ``runs/<timestamp>``, never an existing
non-empty folder) receives report.md, report.json, stages.png, timelines.png and
merged_trace.json.gz (see :mod:`compare.report`), and with ``--screenshot`` profile_tab.png
(TensorBoard's profile tab over DIR in headless Chromium, shown in report.md). TensorFlow's own
log goes to DIR/tf.log unless ``--verbose``.
"""
from __future__ import annotations

import time
from pathlib import Path

from absl import flags

from common.errors import InputError, cli_main, say

FLAGS = flags.FLAGS
SIDES = ("legacy", "modern")
#: What --screenshot saves into the run folder.
SCREENSHOT = "profile_tab.png"


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
    flags.DEFINE_boolean("screenshot", False, "Also open the run folder in TensorBoard and "
                         "headless Chromium (Debian's chromium) and save the profile tab, both "
                         "sessions listed, as profile_tab.png (shown in report.md).")
    flags.DEFINE_string("legacy", None, "Compare this existing legacy trace instead of running "
                                        "the pipelines (with --modern).")
    flags.DEFINE_string("modern", None, "Compare this existing modern trace (with --legacy).")


class _Clock:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.marks: dict[str, float] = {}
        self._phase: tuple[str, float] | None = None

    def phase(self, name: str, text: str) -> None:
        self.end()
        self._phase = (name, time.monotonic())
        self.say(text)

    def end(self) -> None:
        if self._phase:
            self.marks[self._phase[0]] = round(time.monotonic() - self._phase[1], 2)
            self._phase = None

    def say(self, text: str) -> None:
        say(f"[{time.monotonic() - self.t0:6.1f}s] {text}")


def _default_out() -> Path:
    base = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    if bool(FLAGS.legacy) != bool(FLAGS.modern):
        raise InputError("--legacy and --modern go together: give both traces, or neither to "
                         "run both pipelines")
    from common.tflog import quiet_python_logs

    quiet_python_logs()  # SIGINT and SIGTERM: common.errors.run_cli raises Interrupted for both
    if FLAGS.legacy:
        if FLAGS.data_service:
            raise InputError("--data_service is for running the pipelines, not for comparing "
                             "existing traces (--legacy/--modern)")
        return _compare_traces(FLAGS.legacy, FLAGS.modern)
    return _run_and_compare()


def _run_and_compare() -> int:
    from common import atomic
    from common.inputs import check_file, resolve_images
    from common.tflog import native_stderr_to
    from compare.pipelines import run_in_child

    images = resolve_images(FLAGS.images)
    for path in images:  # cheap checks before anything is created
        check_file(path)
    import importlib.util

    if importlib.util.find_spec("modern") is None or \
            importlib.util.find_spec("modern.runner") is None:
        raise InputError("the modern pipeline (modern.runner) is not installed here; compare "
                         "existing traces with --legacy TRACE --modern TRACE")
    if FLAGS.service_timeout is not None and not FLAGS.data_service:
        raise InputError("--service_timeout goes with --data_service")
    if FLAGS.data_service:  # before legacy runs for minutes: it answers and has workers
        from modern.data_service import check_service

        check_service(FLAGS.data_service)
    out = atomic.prepare_out_dir(FLAGS.out or _default_out())
    log = None if FLAGS.verbose else out / "tf.log"
    clock = _Clock()
    say(f"compare.run: run folder {out}" + (f"; TensorFlow's log goes to {log}" if log else ""))
    runs: dict[str, dict] = {}
    try:
        clock.phase("legacy", f"running legacy ({FLAGS.steps} steps, queue runners, XLA "
                              f"auto-clustering as in the seed) ...")
        runs["legacy"] = run_in_child("legacy", out / "legacy", FLAGS.images, FLAGS.steps,
                                      FLAGS.seed, log)
        clock.say(_run_line("legacy", runs["legacy"]))
        where = f" on the tf.data service at {FLAGS.data_service}" if FLAGS.data_service else ""
        clock.phase("modern", f"running modern ({FLAGS.steps} steps, tf.data{where} + "
                              f"jit_compile) ...")
        runs["modern"] = run_in_child("modern", out / "modern", FLAGS.images, FLAGS.steps,
                                      FLAGS.seed, log, data_service=FLAGS.data_service,
                                      service_timeout=FLAGS.service_timeout)
        clock.say(_run_line("modern", runs["modern"]))
        screenshot = _screenshot(out, clock) if FLAGS.screenshot else None
        with native_stderr_to(log):
            sources = {k: (out / k, "TensorBoard profile (xplane through xprof), steps marked, "
                                    "HLO included") for k in SIDES}
            if runs["modern"].get("data_service"):
                svc = runs["modern"]["data_service"]
                sources["modern"] = (out / "modern", sources["modern"][1] + (
                    f"; input pipeline on the tf.data service at {svc['address']} "
                    f"({svc['worker_count']} worker(s), {svc['processing_mode']}): its read, "
                    f"decode and resize ran in the workers' processes, not in this trace"
                    + (f" (except for {svc['reproduced_count']} element(s) a lost worker held, "
                       f"made again in this process)" if svc.get("reproduced_count") else "")))
            report = _analyse_and_write(out, sources, clock, tensorboard_logdir=str(out),
                                        runs=runs, screenshot=screenshot)
    except KeyboardInterrupt as e:  # run_cli says where: complete runs, a side's partial
        kept = [f"{out / k} (complete run)" for k in runs]
        kept += [f"{out / k / 'partial'} (interrupted run)" for k in SIDES
                 if k not in runs and (out / k / "partial").is_dir()]
        e.kept = [*kept, *getattr(e, "kept", [])]
        raise
    _print_summary(report, out, clock, tensorboard=True)
    return 0


def _screenshot(out: Path, clock: _Clock) -> str | None:
    """``--screenshot``: TensorBoard's profile tab over the run folder, saved as
    ``out/profile_tab.png``; its name, or None (with one line saying why) when it cannot be
    taken — the comparison goes on without it."""
    import tempfile

    from common import atomic
    from compare.viewers.tensorboard import screenshot_profile

    clock.phase("screenshot", "screenshotting TensorBoard's profile tab (tensorboard + headless "
                              "chromium) ...")
    try:
        with tempfile.TemporaryDirectory(prefix="compare-screenshot-") as tmp:
            png = Path(tmp) / SCREENSHOT
            names = screenshot_profile(out, png, work_dir=tmp)
            atomic.write_bytes(out / SCREENSHOT, png.read_bytes())
    except InputError as e:
        say(f"compare.run: no screenshot: {e}")
        return None
    clock.say(f"{out / SCREENSHOT}: the profile tab lists {', '.join(names)}")
    return SCREENSHOT


def _run_line(side: str, run: dict) -> str:
    return (f"{side}: first step {run['first_step_s'] * 1e3:.0f} ms, steady median "
            f"{run['steady_median_s'] * 1e3:.1f} ms/step")


def _compare_traces(legacy: str, modern: str) -> int:
    from common import atomic
    from common.tflog import native_stderr_to

    clock = _Clock()
    for p in (legacy, modern):  # cheap: fail on a missing file before creating anything
        if not Path(p).exists():
            from compare.load.loaders import LoadError

            raise LoadError(f"{p}: no such file or folder")
    out = atomic.prepare_out_dir(FLAGS.out or _default_out())
    log = None if FLAGS.verbose else out / "tf.log"
    try:
        with native_stderr_to(log):
            report = _analyse_and_write(out, {"legacy": (Path(legacy), "given with --legacy"),
                                              "modern": (Path(modern), "given with --modern")},
                                        clock)
    except InputError:
        _remove_if_only_log(out)
        raise
    except KeyboardInterrupt:
        _remove_if_only_log(out)
        raise
    _print_summary(report, out, clock, tensorboard=False)
    return 0


def _remove_if_only_log(out: Path) -> None:
    """A bad trace leaves nothing behind but an empty folder we made (and our log)."""
    import shutil

    if out.is_dir() and all(c.name == "tf.log" for c in out.iterdir()):
        shutil.rmtree(out, ignore_errors=True)


def _analyse_and_write(out: Path, sources: dict[str, tuple[Path, str]], clock: _Clock,
                       tensorboard_logdir: str | None = None, runs: dict | None = None,
                       screenshot: str | None = None) -> dict:
    from compare.analysis import comparison
    from compare.output import report as report_mod
    from compare.load.loaders import load

    clock.phase("convert", "converting profiles (xprof) and loading traces ...")
    traces = {k: load(path) for k, (path, _) in sources.items()}
    clock.phase("map", "mapping events to stages ...")
    sides = {k: comparison.analyse(k, traces[k], note) for k, (_, note) in sources.items()}
    for k, (path, _) in sources.items():
        if path.is_dir() and traces[k].format == "xprof":
            for name, step in (("timeline.json", "steady"), ("timeline_first.json", "first")):
                if (path / name).is_file():
                    sides[k].cross_checks.append(
                        comparison.cross_check(sides[k], load(path / name), name, step))
    clock.phase("write", "writing report.md, report.json, plots and the merged trace ...")
    report = report_mod.build(sides["legacy"], sides["modern"], tensorboard_logdir, screenshot)
    if runs:
        report["runs"] = runs
    clock.end()
    report["elapsed_s"] = dict(clock.marks)
    report_mod.write(out, report, sides["legacy"], sides["modern"])
    return report


def _print_summary(report: dict, out: Path, clock: _Clock, tensorboard: bool) -> None:
    from compare.analysis.comparison import stage_table

    print(stage_table(report))
    print()
    for k in SIDES:  # partly usable traces: what was skipped
        for w in report["sources"][k]["warnings"]:
            say(f"compare.run: {k} trace {report['sources'][k]['path']}: {w}")
    for k in ("legacy", "modern", "comparison"):
        print(f"- {report['verdict'][k]}")
    print()
    print(f"report: {out / 'report.md'} (and report.json, stages.png, timelines.png, "
          f"merged_trace.json.gz{', ' + report['screenshot'] if report.get('screenshot') else ''})")
    if tensorboard:
        print(f"open the profiles: tensorboard --logdir {out}")
    clock.say(f"done in {time.monotonic() - clock.t0:.1f} s")


def main() -> None:
    cli_main("compare.run", _define_flags, _main)


if __name__ == "__main__":
    main()
