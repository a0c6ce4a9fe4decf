"""The library: what ``compare.run`` and ``compare.explain`` do, as calls with plain arguments.

    from compare.api import compare_traces, explain_trace
    report = compare_traces("old/timeline.json", "new/trace.json.gz", out="runs/cmp",
                            labels={"a": "old", "b": "new"})
    print(report.words["comparison"])

:func:`run_and_compare` runs both pipelines first (each in a process of its own). Every bad
input raises :class:`common.errors.InputError` (its message is one line naming the input).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

from common import atomic
from common.errors import InputError, say, signals_deferred
from common.run_record import PIPELINES
from common.tflog import native_stderr_to
from compare.analysis import comparison
from compare.analysis.explanation import Explanation, explain
from compare.analysis.result import SIDES
from compare.analysis.side import Side
from compare.load import LoadError, load
from compare.model.events import Trace
from compare.output.report_data import Report

# What runs the pipelines (TensorFlow, grpc), checks a tf.data service or screenshots
# TensorBoard is imported in the functions that do it: a CLI that only reads traces
# (explain, the gate, the tab's child) starts ~0.25 s sooner without them.

#: What ``screenshot=True`` saves into the run folder: TensorBoard's profile tab, and our own
#: Pipeline compare tab.
SCREENSHOT = "profile_tab.png"
COMPARE_SCREENSHOT = "compare_tab.png"
#: The traces beside an xprof run folder that are cross-checked against it.
CROSS_CHECKS = (("timeline.json", "steady"), ("timeline_first.json", "first"))


class Phases:
    """Times each phase of a job and tells ``progress`` (a line per phase) as it goes."""

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self.t0 = time.monotonic()
        self.marks: dict[str, float] = {}
        self._phase: tuple[str, float] | None = None
        self._progress = progress

    def phase(self, name: str, text: str) -> None:
        self.end()
        self._phase = (name, time.monotonic())
        self.say(text)

    def end(self) -> None:
        if self._phase:
            self.marks[self._phase[0]] = round(time.monotonic() - self._phase[1], 2)
            self._phase = None

    def say(self, text: str) -> None:
        if self._progress:
            self._progress(f"[{time.monotonic() - self.t0:6.1f}s] {text}")


def explain_trace(trace: Trace | str | os.PathLike, step: int | None = None,
                  max_memory: int | None = None) -> Explanation:
    """The seed's four questions for one trace (a loaded Trace or any path we read; a path
    whose load would take more than ``max_memory`` bytes, default the memory available, is
    refused before it is read)."""
    return explain(trace if isinstance(trace, Trace) else load(trace, max_memory), step)


def default_out() -> Path:
    """``runs/<timestamp>``, numbered when that exists."""
    base = Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def compare_traces(a: str | os.PathLike, b: str | os.PathLike,
                   out: str | os.PathLike | None = None, verbose: bool = False,
                   progress: Callable[[str], None] | None = None,
                   labels: dict[str, str] | None = None,
                   max_memory: int | None = None,
                   origins: dict[str, str] | None = None, data_only: bool = False) -> Report:
    """Compare two existing traces (any format we read), ``a`` the baseline, and write the
    report into ``out`` (new or empty; default ``runs/<timestamp>``). A bad trace leaves
    nothing behind. ``labels``: {"a": name of A, "b": name of B} (``legacy``/``modern`` keys
    are taken for ``a``/``b``), the names every output gives the two sides (default: the
    traces' file names). ``max_memory``: bytes each trace's load may take (default: the
    memory available when it is loaded, so the second counts the first). ``origins``: how
    each trace was made, for the report, keyed like ``labels`` (default: side A / side B and
    its name). ``data_only``: write report.json and timelines.json alone, no report.md,
    pictures or merged trace (what the Pipeline compare tab draws from)."""
    for p in (a, b):  # cheap: fail on a missing file before creating anything
        if not Path(p).exists():
            raise LoadError(f"{p}: no such file or folder")
    names = side_labels(labels) or default_labels(a, b)
    out = atomic.prepare_out_dir(out or default_out())
    log = None if verbose else out / "tf.log"
    given = origins or {}
    sources = {"a": (Path(a), given.get("a", given.get("legacy"))
                     or f"side A ({names['a']})"),
               "b": (Path(b), given.get("b", given.get("modern"))
                     or f"side B ({names['b']})")}
    try:
        with native_stderr_to(log):
            return analyse_and_write(out, sources, Phases(progress), labels=names,
                                     max_memory=max_memory, data_only=data_only)
    except (InputError, KeyboardInterrupt):
        _remove_if_only_log(out)
        raise


def side_labels(labels: dict[str, str] | None) -> dict[str, str] | None:
    """``labels`` keyed ``a``/``b`` (``legacy``/``modern`` accepted for them); two different,
    non-empty names, else an :class:`InputError`."""
    if labels is None:
        return None
    names = {"a": labels.get("a", labels.get("legacy", "")),
             "b": labels.get("b", labels.get("modern", ""))}
    if not all(n.strip() for n in names.values()) or names["a"] == names["b"]:
        raise InputError(f"labels: two different names are needed, got {names['a']!r} and "
                         f"{names['b']!r}")
    return names


def default_labels(a: str | os.PathLike, b: str | os.PathLike) -> dict[str, str]:
    """The traces' file names (their folders' when those are the same), so that every output
    names the sides as the user knows them."""
    pa_, pb_ = Path(a).resolve(), Path(b).resolve()
    pa, pb = list(reversed(pa_.parts)), list(reversed(pb_.parts))
    for k in range(1, min(len(pa), len(pb)) + 1):   # the shortest tails that differ
        ta, tb = "/".join(reversed(pa[:k])), "/".join(reversed(pb[:k]))
        if ta != tb:
            return {"a": ta, "b": tb}
    return {"a": f"{pa_.name} (A)", "b": f"{pb_.name} (B)"}


def _remove_if_only_log(out: Path) -> None:
    """A bad trace leaves nothing behind but an empty folder we made (and our log)."""
    if out.is_dir() and all(c.name == "tf.log" for c in out.iterdir()):
        shutil.rmtree(out, ignore_errors=True)


@dataclasses.dataclass
class RunOptions:
    """What ``compare.run`` runs: images (files or folders; default matplotlib's
    grace_hopper.jpg), profiled steps per pipeline, seed, an optional tf.data service for
    modern's input (the longest a read from it may wait, and how long once a worker is lost,
    seconds; defaults modern.run's), and whether to screenshot TensorBoard's profile tab."""

    images: list[str] = dataclasses.field(default_factory=list)
    steps: int = 20
    seed: int = 0
    data_service: str | None = None
    screenshot: bool = False
    service_timeout: float | None = None
    lost_worker_wait: float | None = None
    skip_bad: bool = False          # run on the good images, naming each bad one skipped


def run_and_compare(out: str | os.PathLike | None = None, options: RunOptions | None = None,
                    verbose: bool = False,
                    progress: Callable[[str], None] | None = None,
                    labels: dict[str, str] | None = None) -> Report:
    """Run legacy, then modern, each in its own process and profiled, into ``out/legacy`` and
    ``out/modern``; compare them and write the report into ``out``. Every image is checked
    whole first: a bad one stops the run before anything starts, naming every bad one (with
    ``skip_bad``: each is named and skipped). A run that stops (interrupt, failure, full disk)
    keeps what the sides completed in ``out/partial`` (:func:`keep_runs`); the exception then
    carries ``kept`` and ``hint``, the command that rebuilds the report from them."""
    opts = _preflight(options or RunOptions())
    out = atomic.prepare_out_dir(out or default_out())
    log = None if verbose else out / "tf.log"
    say(f"compare.run: run folder {out}" + (f"; TensorFlow's log goes to {log}" if log else ""))
    clock = Phases(progress)
    runs: dict[str, dict] = {}
    try:
        _run_sides(out, opts, log, clock, runs)
        shots = (_screenshot(out, clock) if opts.screenshot else None) or {}
        # the compare tab's screenshot: report.md shows it, report.json lists it in its files
        extra = {"compare_tab_png": shots["compare"]} if "compare" in shots else None
        with native_stderr_to(log):
            report = analyse_and_write(out, _run_sources(out, runs), clock, str(out), runs,
                                       shots.get("profile"),
                                       side_labels(labels) or dict(zip(SIDES, PIPELINES)),
                                       files=extra)
    except BaseException as e:
        keep_runs(out, e)
        raise
    return report


def _preflight(opts: RunOptions) -> RunOptions:
    """Checks before anything is created or run for minutes; ``opts`` with the images that
    passed."""
    from common.inputs import checked_images
    from modern.data_service import check_service

    good, bad = checked_images(opts.images, opts.skip_bad)
    for b in bad:
        say(f"compare.run: skipped {b['reason']}")
    if importlib.util.find_spec("modern") is None or \
            importlib.util.find_spec("modern.runner") is None:
        raise InputError("the modern pipeline (modern.runner) is not installed here; compare "
                         "existing traces with --legacy TRACE --modern TRACE")
    if opts.data_service:  # it answers and has workers
        check_service(opts.data_service)
    return dataclasses.replace(opts, images=good)


def keep_runs(out: Path, error: BaseException) -> dict[str, str]:
    """After ``error`` stopped a run: move what each side left -- its complete run, or the
    partial profile of one that was stopped -- into ``out/partial/<side>``, say so in
    ``out/partial/partial.json``, and add to ``error`` where (``kept``) and, when both sides
    left something, the command that rebuilds the report from them (``hint``). A side that
    cannot be moved (a disk too full for the folder) is kept and named where it is. Returns
    {side: what was kept}."""
    dest, kept, where = out / atomic.PARTIAL_DIR, {}, {}
    with signals_deferred():
        for k in PIPELINES:
            side = out / k
            found = ((side, "complete run") if (side / "run.json").is_file() else
                     (side / atomic.PARTIAL_DIR, "partial run")
                     if (side / atomic.PARTIAL_DIR).is_dir() else None)
            if not found:
                continue
            kept[k], where[k] = found[1], found[0]
            with contextlib.suppress(OSError):
                if not (dest / k).exists():
                    dest.mkdir(exist_ok=True)
                    os.rename(found[0], dest / k)
                    where[k] = dest / k
            with contextlib.suppress(OSError):
                side.rmdir()  # empty now, or never used
    if not kept:
        return kept
    rebuild = (f"python -m compare.run --legacy {shlex.quote(str(where['legacy']))} --modern "
               f"{shlex.quote(str(where['modern']))} --out {shlex.quote(str(out / 'report'))}"
               if len(kept) == len(PIPELINES) else None)
    if all(p.parent == dest for p in where.values()):
        with contextlib.suppress(OSError):  # a full disk may refuse it; the runs are kept
            atomic.write_json(dest / "partial.json", {
                "complete": False, "stopped_by": str(error) or type(error).__name__,
                "runs": kept, "rebuild_report": rebuild})
        listed = [f"{dest} ({', '.join(f'{k}: {v}' for k, v in kept.items())})"]
    else:
        listed = [f"{where[k]} ({k}: {v})" for k, v in kept.items()]
    error.kept = listed  # type: ignore[attr-defined]  # the sides' own paths are in it now
    if rebuild:
        error.hint = f"rebuild the report from them: {rebuild}"  # type: ignore[attr-defined]
    return kept


def _run_sides(out: Path, opts: RunOptions, log: Path | None, clock: Phases,
               runs: dict) -> None:
    from compare.pipelines import run_in_child  # TensorFlow's pipelines: only when run

    clock.phase("legacy", f"running legacy ({opts.steps} steps, queue runners, XLA "
                          f"auto-clustering as in the seed) ...")
    runs["legacy"] = run_in_child("legacy", out / "legacy", opts.images, opts.steps, opts.seed,
                                  log)
    clock.say(_run_line("legacy", runs["legacy"]))
    where = f" on the tf.data service at {opts.data_service}" if opts.data_service else ""
    clock.phase("modern", f"running modern ({opts.steps} steps, tf.data{where} + "
                          f"jit_compile) ...")
    runs["modern"] = run_in_child("modern", out / "modern", opts.images, opts.steps, opts.seed,
                                  log, data_service=opts.data_service,
                                  service_timeout=opts.service_timeout,
                                  lost_worker_wait=opts.lost_worker_wait, relay=clock.say)
    clock.say(_run_line("modern", runs["modern"]))


def _run_line(side: str, run: dict) -> str:
    svc = run.get("data_service") or {}
    lost = [w["address"] for w in svc.get("lost_workers", [])]
    faults = (f"; tf.data service worker(s) lost: {', '.join(lost)}" if lost else "") + (
        f"; {svc['reproduced_count']} element(s) made again in modern's process"
        if svc.get("reproduced_count") else "")
    return (f"{side}: first step {run['first_step_s'] * 1e3:.0f} ms, steady median "
            f"{run['steady_median_s'] * 1e3:.1f} ms/step{faults}")


def _run_sources(out: Path, runs: dict) -> dict[str, tuple[Path, str]]:
    """Side A is legacy's run folder, side B modern's."""
    note = "TensorBoard profile (xplane through xprof), steps marked, HLO included"
    sources = {k: (out / run, note) for k, run in zip(SIDES, PIPELINES)}
    svc = runs["modern"].get("data_service")
    if svc:
        sources["b"] = (out / "modern", note + (
            f"; input pipeline on the tf.data service at {svc['address']} "
            f"({svc['worker_count']} worker(s), {svc['processing_mode']}): its read, decode and "
            f"resize ran in the workers' processes, not in this trace"
            + (f" (except for {svc['reproduced_count']} element(s) a lost worker held, made again "
               f"in this process)" if svc.get("reproduced_count") else "")))
    return sources


def _screenshot(out: Path, clock: Phases) -> dict[str, str] | None:
    """TensorBoard's profile tab and our Pipeline compare tab over the run folder, saved as
    ``out/profile_tab.png`` and ``out/compare_tab.png``: {"profile": name, "compare": name}
    (compare missing when that tab could not be shown), or None, each with one line saying
    why, when none can be taken."""
    clock.phase("screenshot", "screenshotting TensorBoard's profile and Pipeline compare tabs "
                              "(tensorboard + headless chromium) ...")
    from compare.viewers.tensorboard import screenshot_tabs

    saved = {}
    try:
        with tempfile.TemporaryDirectory(prefix="compare-screenshot-") as tmp:
            pngs = {"profile": Path(tmp) / SCREENSHOT, "compare": Path(tmp) / COMPARE_SCREENSHOT}
            shots = screenshot_tabs(out, pngs["profile"], pngs["compare"], work_dir=tmp)
            for key, png in pngs.items():
                if png.is_file():
                    atomic.write_bytes(out / png.name, png.read_bytes())
                    saved[key] = png.name
    except InputError as e:
        say(f"compare.run: no screenshot: {e}")
        return None
    clock.say(f"{out / SCREENSHOT}: the profile tab lists {', '.join(shots.sessions)}")
    if shots.compare_error:
        say(f"compare.run: no screenshot of the Pipeline compare tab: {shots.compare_error}")
    else:
        clock.say(f"{out / COMPARE_SCREENSHOT}: the Pipeline compare tab: {shots.compare}")
    return saved


def analyse_and_write(out: Path, sources: dict[str, tuple[Path, str]], clock: Phases,
                      tensorboard_logdir: str | None = None, runs: dict | None = None,
                      screenshot: str | None = None,
                      labels: dict[str, str] | None = None,
                      max_memory: int | None = None,
                      files: dict[str, str] | None = None, data_only: bool = False) -> Report:
    """Load, analyse and compare the two sources; write the report into ``out``. ``files``:
    more files already in ``out`` for the report to list (name key -> file name);
    ``data_only``: see :func:`compare_traces`."""
    from compare.output import report as report_mod  # lazy: matplotlib; explain stays ~1 s

    clock.phase("convert", "converting profiles (xprof) and loading traces ...")
    traces = {k: load(path, max_memory) for k, (path, _) in sources.items()}
    clock.phase("map", "mapping events to stages ...")
    sides = {k: comparison.side(k, traces[k], note) for k, (_, note) in sources.items()}
    for k, (path, _) in sources.items():
        sides[k].service_workers = _service_workers(path)
    for k, (path, _) in sources.items():
        _add_cross_checks(sides[k], path, traces[k])
    clock.phase("compare", "comparing the two sides (groups, op by op, like-for-like "
                           "checks) ...")
    compared = comparison.compare(sides["a"], sides["b"], labels)
    clock.phase("answers", "answering the four questions for each side ...")
    report = report_mod.build(compared, sides, tensorboard_logdir, screenshot)
    report.runs = runs or None
    report.files.update(files or {})
    clock.phase("write", "writing report.json and timelines.json ..." if data_only else
                "writing the report's files ...")
    report.elapsed_s = dict(clock.marks)
    report_mod.write(out, report, sides, data_only=data_only,
                     progress=lambda text: clock.say(f"  {text}"))
    clock.end()
    report.elapsed_s = dict(clock.marks)   # the files carry the phases up to writing them
    return report


def _service_workers(path: Path) -> int | None:
    """The tf.data service workers that fed one of our modern runs (its run.json), or None."""
    try:
        run = json.loads((path / "run.json").read_text()) if path.is_dir() else {}
    except (OSError, ValueError):
        return None
    n = (run.get("data_service") or {}).get("worker_count") if isinstance(run, dict) else None
    return n if isinstance(n, int) and n > 0 else None


def _add_cross_checks(side: Side, path: Path, trace: Trace) -> None:
    """Our run folders hold timeline.py traces beside the profile: map them as a cross check."""
    if not (path.is_dir() and trace.format == "xprof"):
        return
    for name, against in CROSS_CHECKS:
        if (path / name).is_file():
            side.cross_checks.append(comparison.cross_check(side, load(path / name), name,
                                                            against))
