"""The one-screen summary (compare/output/summary.py) that report.md opens with and
``compare.run --brief`` prints alone: on two synthetic traces whose numbers are planted, it
holds the verdict, both sides' step times, the largest op changes in order and the caveats,
within its line bound. Fast: no TensorFlow."""
from __future__ import annotations

import dataclasses

import pytest

from compare.analysis import comparison
from compare.analysis.result import Caveat
from compare.output import report as report_mod
from compare.output import report_md
from compare.output.summary import CAVEATS, CHANGES, MAX_LINES, summary
from compare.output.tables import describe
from tests.conftest import ROOT, assert_one_line_error, run_module
from tests.test_core_comparison import LEGACY, MODERN, STEPS, _trace


@pytest.fixture(scope="module")
def report():
    sides = {"a": comparison.side("legacy", _trace(LEGACY), "legacy test trace"),
             "b": comparison.side("modern", _trace(MODERN), "modern test trace")}
    c = comparison.compare(sides["a"], sides["b"], {"a": "old", "b": "new"})
    return report_mod.build(c, sides)


def test_it_opens_with_the_verdict_and_both_step_times(report):
    lines = summary(report)
    c = report.comparison
    assert lines[:4] == ["## Summary", "", f"**{report.words['comparison']}**", ""]
    table = lines[4:9]
    assert table[0] == "| per step | old | new |"
    # planted: 10 and 4 ms steps, of which the events span 6.5 and 2.5 ms (the verdict
    # compares the traced spans, and says why)
    assert c.step_delta.a_us == 6500 and "(2.5 ms vs 6.5 ms" in report.words["comparison"]
    assert table[2] == f"| steady, mean traced span as compared (steps) | 6.5 ms ({STEPS - 1}) " \
                       f"| 2.5 ms ({STEPS - 1}) |"
    assert table[3] == "| steady, median step | 10.0 ms | 4.0 ms |"
    assert table[4] == "| first step | 10.0 ms | 4.0 ms |"
    assert len(lines) <= MAX_LINES


def test_the_largest_changes_come_in_the_op_diffs_order(report):
    lines = summary(report)
    c = report.comparison
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Largest changes"))
    assert lines[start] == (f"Largest changes per steady step, old → new ({len(c.ops_diff)} "
                            "rows in report.json's `ops_diff`):")
    changed = [r for r in c.ops_diff if r.delta_us][:CHANGES]
    shown = lines[start + 1:start + 1 + len(changed)]
    assert [ln.split("`")[1] for ln in shown] == [describe(r) for r in changed]
    # planted: decode 3 ms -> 1 ms, and a 2 ms queue wait where the other waits 0.1 ms
    assert "- `decode/DecodeJpeg (DecodeJpeg)`: 3.0 ms → 1.0 ms (−2.0 ms, changed)" in shown
    assert abs(changed[0].delta_us) == max(abs(r.delta_us) for r in c.ops_diff)


def test_caveats_breaking_ones_first_and_the_rest_counted(report):
    c = report.comparison
    planted = [Caveat("untraced", False, {}, "", {"side": "a", "untraced_us": 1000.0 * i,
                                                  "traced_us": 9000.0}) for i in range(3)] + \
              [Caveat("batch", True, {"a": 32, "b": 64}, "shapes",
                      {"differ": 3, "compared": 4, "example": ["MatMul", "(32,)", "(64,)"],
                       "per_example": {}}),
               Caveat("program", True, {"no_ops": ["a"]}, "no_ops")]
    parity = dataclasses.replace(c.parity, caveats=planted)
    r = dataclasses.replace(report, comparison=dataclasses.replace(c, parity=parity))
    lines = summary(r)
    start = lines.index("Caveats:")
    assert lines[start + 1:start + 1 + CAVEATS] == [
        "- **Not like for like**: different batch sizes: 32 in old, 64 in new (the leading "
        "dimension of 3 of the 4 ops whose output shapes both traces record, e.g. MatMul (32,) "
        "vs (64,)) — compare per example, not per step",
        "- **Not like for like**: old holds no TensorFlow op (no event names an op type or a "
        "graph node): nothing shows that the two run the same program, and there is no op to "
        "compare; only the steps' spans and their events' names are",
        "- old's steps include 0 us with nothing traced between session runs (Python work the "
        "trace does not show); its steps are compared by their traced span (9.0 ms)",
        "- old's steps include 1.0 ms with nothing traced between session runs (Python work "
        "the trace does not show); its steps are compared by their traced span (9.0 ms)"]
    assert lines[start + 1 + CAVEATS] == "- 1 more under \"Can these two traces be compared?\""
    assert len(lines) <= MAX_LINES


def test_like_for_like_and_no_caveat_says_so(report):
    c = report.comparison
    r = dataclasses.replace(report, comparison=dataclasses.replace(
        c, parity=dataclasses.replace(c.parity, caveats=[])))
    assert summary(r)[-1] == ("Caveats: none; no check found a reason not to compare the steps "
                              "like for like.")


def test_report_md_opens_with_the_summary(report):
    md = report_md.render(report).splitlines()
    c = report.comparison
    assert md[0] == f"# {c.label('a')} vs {c.label('b')}: where the time goes"
    lines = summary(report)
    assert md[2:2 + len(lines)] == lines
    assert md[2 + len(lines):2 + len(lines) + 2] == ["", "## The two traces"]


@pytest.mark.slow  # compare.run in a process of its own: ~5 s
def test_compare_run_brief_prints_the_summary_alone(tmp_path):
    fixtures = ROOT / "tests" / "fixtures"
    out = tmp_path / "cmp"
    proc = run_module("compare.run", str(fixtures / "tf1_cpu_xla.timeline.json"),
                      str(fixtures / "tf2_gpu_xla.timeline.json"), "--out", str(out),
                      "--brief", timeout=300)
    assert proc.returncode == 0, proc.stderr
    md = (out / "report.md").read_text().splitlines()
    printed = proc.stdout.splitlines()
    assert printed[0] == "## Summary" and len(printed) <= MAX_LINES
    assert md[2:2 + len(printed)] == printed  # exactly what report.md opens with
    assert proc.stderr.rstrip().endswith(f"done: {out / 'report.md'}")
    # the flags of a run make no sense for traces that exist
    for flag in ("--skip_bad", "--images=a.jpg"):
        bad = run_module("compare.run", "a.json", "b.json", flag,
                         timeout=120)
        assert_one_line_error(bad, f"--{flag[2:].split('=')[0]} is for running the pipelines")
