"""``python -m compare.gate BASELINE NEW``: the performance regression gate for CI (a thin CLI
over :mod:`compare.gating`); ``USAGE`` below is what ``--help`` prints."""
from __future__ import annotations

from pathlib import Path

from absl import flags

from common import atomic
from common.errors import InputError, cli_main, say
from common.tflog import quiet_python_logs
from compare import gating
from compare.api import compare_traces, default_labels, side_labels
from compare.cli_flags import define_max_memory, max_memory_flag
from compare.fmt import size
from compare.gating import render
from compare.gating.items import LEVELS
from compare.gating.runs import is_trace, runs_of
from compare.vocabulary.thresholds import GATE_ALPHA, GATE_MAX_SLOWDOWN

FLAGS = flags.FLAGS

USAGE = """\
usage: python -m compare.gate BASELINE NEW [--max-slowdown 5%] [--alpha 0.01]
           [--min-effect-us N] [--by step,group,op] [--labels A,B]
           [--json FILE] [--junit FILE] [--report DIR] [--strict] [--max-memory SIZE]
       python -m compare.gate --save-baseline TRACE OUT.json

Did NEW get slower than BASELINE beyond the noise? A performance regression gate for CI, per
step, per group (input, preprocessing, compute by top-level scope, ...) and per op.

BASELINE and NEW are anything compare.run reads (a trace file, a profile session or a folder
above one, one of our run folders), a folder of several runs of one program (their steps
pooled), or a baseline saved by --save-baseline. Each side's steady steps (every step but each
run's first) are read from compare.run's own accounting, ops matched across the sides as its
op diff matches them.

Something regressed when its median per step rose by more than --max-slowdown (default 5%)
and by at least --min-effect-us (default: 1% of the median step), and a one-sided
Mann-Whitney U test puts the rise beyond the step-to-step spread at --alpha (default 0.01),
Holm-adjusted over every item tested, so the chance of any false alarm stays under alpha
however many ops there are. Improvements are listed and never fail.

Exit status: 0 nothing regressed; 1 something did; 2 bad input (one line). Too few steps to
tell (fewer than 5 steady steps a side): one line, exit 0, or 1 with --strict.

examples:
  python -m compare.gate base/plugins/profile new/plugins/profile --junit gate.xml
  python -m compare.gate --save-baseline base/ baseline.json
  python -m compare.gate baseline.json new/ --max-slowdown 3% --json gate.json

docs/gate.md has the details.
"""


def _define_flags() -> None:
    flags.DEFINE_string("max_slowdown", f"{GATE_MAX_SLOWDOWN:.0%}", "A regression is a median "
                        "slower by more than this share of the baseline's, in percent: 5% "
                        "(or 5), 0.5%.")
    flags.DEFINE_float("alpha", GATE_ALPHA, "Family-wise false-alarm rate: the rank test's "
                       "level, Holm-adjusted over every item tested.")
    flags.DEFINE_float("min_effect_us", None, "A regression is also at least this many "
                       "microseconds per step (default: 1% of the median step of both sides).")
    flags.DEFINE_list("by", list(LEVELS), "What to check: step, group, op (any of them).")
    flags.DEFINE_list("labels", None, "Names for BASELINE and NEW in the output, A,B (default: "
                      "their file names).")
    flags.DEFINE_string("json", None, "Also write the findings as JSON to this file.")
    flags.DEFINE_string("junit", None, "Also write a JUnit XML file: one test case per item "
                        "tested, a failure per regression.")
    flags.DEFINE_string("report", None, "Also write compare.run's full report of the two "
                        "sides into this folder (new or empty).")
    flags.DEFINE_boolean("strict", False, "Too few steps to tell is a failure (exit 1).")
    flags.DEFINE_string("save_baseline", None, "Keep this trace's per-step samples in the "
                        "JSON file given as the one argument, instead of gating.")
    for name in ("max_slowdown", "min_effect_us", "save_baseline"):
        flags.DEFINE_alias(name.replace("_", "-"), name)
    define_max_memory()


def _main(argv: list[str]) -> int:
    given = argv[1:]
    quiet_python_logs()
    if FLAGS.save_baseline:
        return _save(FLAGS.save_baseline, given)
    if len(given) != 2:
        raise InputError(f"compare.gate takes two sides, BASELINE NEW; got {len(given)}"
                         + (f": {' '.join(given)}" if given else ""))
    settings = gating.Settings(parse_share(FLAGS.max_slowdown), _alpha(FLAGS.alpha),
                               _effect(FLAGS.min_effect_us), _levels(FLAGS.by))
    labels = side_labels(_labels(FLAGS.labels)) or default_labels(*given)
    for flag, out in (("--json", FLAGS.json), ("--junit", FLAGS.junit)):
        _check_file(flag, out)
    if FLAGS.report:
        _check_report(FLAGS.report, given)
    result = gating.gate(given[0], given[1], settings, labels, max_memory_flag())
    for k, s in result.sides.items():
        for w in s.warnings:
            say(f"compare.gate: {s.label}: {w}")
    if FLAGS.json:
        atomic.write_json(FLAGS.json, render.to_json(result, FLAGS.strict))
    if FLAGS.junit:
        atomic.write_text(FLAGS.junit, render.junit(result, FLAGS.strict))
    for line in render.lines(result, FLAGS.strict):
        print(line, flush=True)
    if FLAGS.report:
        print(_report(FLAGS.report, given, labels, max_memory_flag()))
    return result.exit_code(FLAGS.strict)


def _save(trace: str, given: list[str]) -> int:
    if len(given) != 1:
        raise InputError(f"--save-baseline TRACE takes one argument, the file to write "
                         f"(OUT.json); got {len(given)}" + (f": {' '.join(given)}" if given
                                                           else ""))
    _check_file("--save-baseline TRACE", given[0])
    saved = gating.save_baseline(trace, given[0], max_memory_flag())
    runs = f"{saved.runs} runs, " if saved.runs > 1 else ""
    print(f"compare.gate: baseline of {trace} ({runs}{saved.steps} steady steps, {saved.terms} "
          f"groups, {saved.ops} ops) saved to {saved.path} ({size(saved.bytes)}); gate "
          f"against it with: python -m compare.gate {saved.path} NEW")
    return 0


def parse_share(text: str) -> float:
    """``--max-slowdown``: a percentage, ``5%`` or ``5``, as a fraction."""
    t = text.strip().removesuffix("%").strip()
    try:
        v = float(t) / 100
    except ValueError:
        v = float("nan")
    if not 0 <= v < 100:   # NaN fails too
        raise InputError(f"--max-slowdown {text!r}: a percentage is needed, e.g. 5% or 0.5%")
    return v


def _alpha(a: float) -> float:
    if not 0 < a < 1:
        raise InputError(f"--alpha {a:g}: a level between 0 and 1 is needed, e.g. 0.01")
    return a


def _effect(us: float | None) -> float | None:
    if us is not None and not us >= 0:
        raise InputError(f"--min-effect-us {us:g}: a duration of 0 or more is needed")
    return us


def _levels(by: list[str]) -> tuple[str, ...]:
    wrong = [x for x in by if x not in LEVELS]
    if wrong or not by:
        raise InputError(f"--by {','.join(by)!r}: give any of {', '.join(LEVELS)}")
    return tuple(lv for lv in LEVELS if lv in by)


def _labels(given: list[str] | None) -> dict[str, str] | None:
    if given is None:
        return None
    if len(given) != 2:
        raise InputError(f"--labels takes two names, A,B; got {','.join(given)!r}")
    return {"a": given[0].strip(), "b": given[1].strip()}


def _check_file(flag: str, out: str | None) -> None:
    """An output file can be written there (checked before the traces are read)."""
    if out is not None and Path(out).is_dir():
        raise InputError(f"{flag} {out}: is a folder; give the file to write")


def _check_report(out: str, given: list[str]) -> None:
    """--report is possible: traces on both sides, a new or empty folder."""
    for path in given:
        if not is_trace(path):
            raise InputError(f"--report: {path} is a saved baseline; compare.run's report "
                             f"needs a trace on both sides")
    p = Path(out)
    if p.exists() and (not p.is_dir() or any(p.iterdir())):
        raise InputError(f"--report {out}: exists and is not an empty folder; reports are "
                         f"never overwritten, give a new or empty folder")


def _report(out: str, given: list[str], labels: dict[str, str], max_memory: int | None) -> str:
    """compare.run's report of the two sides (each side's last run when pooled)."""
    runs = [runs_of(p) for p in given]
    compare_traces(runs[0][-1], runs[1][-1], out, labels=labels, max_memory=max_memory)
    which = "" if all(len(r) == 1 for r in runs) else \
        f" (one run a side: {runs[0][-1]} against {runs[1][-1]})"
    return f"report: {Path(out) / 'report.md'}{which}"


def main() -> None:
    cli_main("compare.gate", _define_flags, _main, usage=USAGE)


if __name__ == "__main__":
    main()
