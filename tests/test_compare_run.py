"""``python -m compare.run`` end to end: the report files, their schema, the merged trace, the
plots, bad input and interruption. One run of each mode per test session (conftest)."""
from __future__ import annotations

import copy
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, assert_one_line_error, run_module
from tests.schema import validate

pytestmark = pytest.mark.slow
REPORT_FILES = ("report.md", "report.json", "stages.png", "timelines.png",
                "merged_trace.json.gz")
PIPELINE = ("read", "decode", "resize", "crop", "flip", "brightness", "saturation", "contrast",
            "clip", "assemble", "shuffle")


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def _no_leftovers(out: Path) -> None:
    hidden = [p for p in out.rglob(".*") if p.name.startswith((".report-staging", ".staging"))
              or p.suffix == ".tmp"]
    assert not hidden, hidden


# --------------------------------------------------------------------------------------------
# --legacy/--modern on existing traces

def test_existing_traces_give_every_report_file(compare_traces_run):
    out, proc = compare_traces_run
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for name in REPORT_FILES:
        assert (out / name).stat().st_size > 1000, name
    _no_leftovers(out)
    # progress per phase on stderr, the table and the verdicts on stdout
    for phase in ("converting profiles", "mapping", "writing", "done in"):
        assert phase in proc.stderr, (phase, proc.stderr)
    r = _report(out)
    a, b = r["order"]   # the sides are named by their folders, everywhere
    assert (a, b) == ("legacy_xla0/run", "legacy_noxla0/run")
    assert "stage " in proc.stdout and f"{a} ops" in proc.stdout
    for text in (r["verdict"]["sides"][a], r["verdict"]["sides"][b], r["verdict"]["comparison"]):
        assert text in proc.stdout
    assert r["sources"][a]["format"] == r["sources"][b]["format"] == "xprof"
    # the legacy folder's timeline.json is used as a cross-check of the profile
    assert [c["trace"] for c in r["cross_checks"][a]] == ["timeline.json", "timeline_first.json"]


def test_report_json_follows_its_schema_and_the_schema_bites(compare_traces_run):
    import jsonschema

    out, _ = compare_traces_run
    r = _report(out)
    validate(r)
    a, b = r["order"]
    for breakage in (lambda d: d.pop("stages"),
                     lambda d: d["stages"][0].update(stage="teleport"),
                     lambda d: d["stages"][3].update(a_us=-1.0),
                     lambda d: d["xla"][b].pop("compiles"),
                     lambda d: d["steps"][a].update(first_us="soon"),
                     lambda d: d["unmapped_us"].update(sideways=0.0),
                     lambda d: d["step_delta"]["terms"][0].pop("delta_us")):
        bad = copy.deepcopy(r)
        breakage(bad)
        with pytest.raises(jsonschema.ValidationError):
            validate(bad)


def test_report_numbers_hang_together(compare_traces_run):
    out, _ = compare_traces_run
    r = _report(out)
    a, b = r["order"]
    assert [row["stage"] for row in r["stages"]][:11] == list(PIPELINE)
    for side, key in ((a, "a"), (b, "b")):
        st = r["steps"][side]
        assert st["count"] >= 4 and st["steady_count"] == st["count"] - 1
        assert st["first_us"] > st["median_us"] > 0
        # one account: the split, the group rows and the stage rows (with what the stages
        # leave unmapped) each add up to the mean steady step
        assert sum(st["split_us"].values()) == pytest.approx(st["mean_us"], abs=1.0)
        assert sum(row[f"{key}_us"] for row in r["groups"]["rows"]) == \
            pytest.approx(st["mean_us"], abs=0.1 * len(r["groups"]["rows"]) + 0.2)
        assert sum(row[f"{key}_us"] for row in r["stages"]) + r["unmapped_us"][side] == \
            pytest.approx(st["mean_us"], abs=0.1 * len(r["stages"]) + 0.2)
        # every pipeline stage has time and ops on both sides of this pair
        have = r["coverage"][side]["stages_with_time"]
        assert set(have) == set(PIPELINE), have
        assert r["unmapped_us"][side] <= 0.10 * st["mean_us"]
    d = r["step_delta"]
    assert sum(t["delta_us"] for t in d["terms"]) == pytest.approx(d["delta_us"], abs=1.0)
    # legacy with XLA compiled (first step) and the no-XLA run did not
    assert r["xla"][a]["compiles"] > 0 and r["xla"][b]["compiles"] == 0
    assert any(u["stages"].get("resize") for u in r["xla"][a]["units"].values())
    first = r["steps"][a]
    assert 0 < first["first_compile_us"] <= first["first_us"]
    # the verdict gives the summed compile work and, apart, how long of the first step some
    # thread compiled (compiles overlap on threads: the sum may exceed the step, this never)
    verdict = r["verdict"]["sides"][a]
    assert "of compile work summed over threads" in verdict
    share = int(re.search(r"of the first step, (\d+)%\)", verdict).group(1))
    assert share == round(100 * first["first_compile_us"] / first["first_us"])
    # the ops behind a stage are named on each side: a fusion on the XLA side, the TF op on
    # the other
    sat = next(row for row in r["stages"] if row["stage"] == "saturation")
    assert any("fusion" in o for o in sat["a_ops"]) and "AdjustSaturation" in sat["b_ops"]
    assert "hlo_split" in r["estimates_used"][a]


def test_report_md_answers_the_four_questions(compare_traces_run):
    out, _ = compare_traces_run
    md = (out / "report.md").read_text()
    from compare.output.explain_text import QUESTIONS

    for heading in ("## Verdict", "## Stages per steady step", "## The step, split", "## XLA",
                    "## How the numbers are made", "merged_trace.json.gz", "ui.perfetto.dev",
                    *QUESTIONS.values()):
        assert heading in md, heading
    r = _report(out)
    for side in r["order"]:
        a = r["answers"][side]
        assert set(a) == {"summary", *QUESTIONS}
        for key in QUESTIONS:
            assert a[key] in md
        assert a["sequence"].startswith("By stage, in steady step")
        assert "_XlaCompile" in r["answers"][r["order"][0]]["xla"]


def test_merged_trace_parses_reloads_and_colours_stages_alike(compare_traces_run):
    from compare.load import load
    from compare.output.colors import STAGE_COLORS
    from compare.vocabulary.labels import LABELS

    out, _ = compare_traces_run
    doc = json.loads(gzip.decompress((out / "merged_trace.json.gz").read_bytes()))
    events = doc["traceEvents"]
    assert events and all({"pid", "tid", "ts"} <= e.keys() for e in events)
    procs = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    labels = _report(out)["order"]
    assert {p.split(" ")[0] for p in procs} == {f"merged:{v}" for v in labels}
    # an op matched across the runs is named and coloured alike on both sides
    matched = [e for e in events if e["ph"] == "X" and e.get("cat") == "op_match"]
    assert matched
    by_match: dict[str, set] = {}
    for e in matched:
        by_match.setdefault(e["name"], set()).add(e["cname"])
    assert all(len(c) == 1 for c in by_match.values())
    xs = [e for e in events if e["ph"] == "X"]
    by_stage: dict[str, set[str]] = {}
    for e in xs:
        if e.get("cat") in STAGE_COLORS:
            by_stage.setdefault(e["cat"], set()).add(e["cname"])
    assert all(len(c) == 1 and c == {STAGE_COLORS[s][0]} for s, c in by_stage.items())
    bands = [e for e in xs if e["name"] in LABELS]
    pid_side = {e["pid"]: e["args"]["name"].split(" ")[0] for e in events
                if e["ph"] == "M" and e["name"] == "process_name"}
    assert {pid_side[e["pid"]] for e in bands if e["name"] == "resize"} == {
        f"merged:{v}" for v in labels}
    tr = load(out / "merged_trace.json.gz")
    assert len(tr.events) == len(xs) and not tr.warnings
    assert {p.kind for p in tr.processes.values()} == {"merged"}


def test_plots_are_real_pngs(compare_traces_run):
    import matplotlib.image as mpimg

    out, _ = compare_traces_run
    for name in ("stages.png", "step_delta.png", "timelines.png"):
        img = mpimg.imread(out / name)
        assert img.shape[0] > 300 and img.shape[1] > 600, (name, img.shape)
        assert img[..., :3].std() > 0.05  # not a blank canvas


def test_mixed_formats_on_either_side(tmp_path, legacy_run, legacy_run_noxla):
    from common.profiling import xplane_files

    out = tmp_path / "mixed"
    proc = run_module("compare.run", "--legacy", str(legacy_run[0] / "timeline.json"),
                      "--modern", xplane_files(legacy_run_noxla[0])[0], "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    r = _report(out)
    a, b = r["order"]
    assert (r["sources"][a]["format"], r["sources"][b]["format"]) == ("timeline", "xprof")
    assert r["steps"][a]["count"] == 1 and r["steps"][a]["first_us"] is None


@pytest.mark.parametrize("case", ["missing", "garbage", "empty_logdir", "one_side",
                                  "not_empty_out"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, legacy_run, case):
    good = str(legacy_run[0] / "timeline.json")
    out = tmp_path / "out"
    if case == "missing":
        bad = str(tmp_path / "nope.json")
        args, needles = ["--legacy", bad, "--modern", good], [bad]
    elif case == "garbage":
        bad = tmp_path / "trace.json"
        bad.write_bytes(b"\x00\x01 not a trace")
        args, needles = ["--legacy", good, "--modern", str(bad)], [str(bad), "we read"]
    elif case == "empty_logdir":
        bad = tmp_path / "logdir"
        bad.mkdir()
        args, needles = ["--legacy", str(bad), "--modern", good], [str(bad), "xplane"]
    elif case == "one_side":
        args, needles = ["--legacy", good], ["--modern"]
    else:
        out.mkdir()
        (out / "mine.txt").write_text("keep")
        args, needles = ["--legacy", good, "--modern", good], [str(out), "not empty"]
    proc = run_module("compare.run", *args, "--out", str(out))
    assert_one_line_error(proc, *needles)
    if case == "not_empty_out":
        assert [p.name for p in out.iterdir()] == ["mine.txt"]
    else:
        assert not out.exists(), list(out.iterdir())


def test_sigterm_mid_run_leaves_no_half_written_report(tmp_path):
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "compare.run", "--out", str(out),
                             "--steps", "400"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(out.glob("legacy/.staging-*")):
            time.sleep(0.2)
        assert list(out.glob("legacy/.staging-*")), "legacy never started"
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err  # common.errors.run_cli's contract
    assert "Traceback" not in err
    assert "compare.run: interrupted by SIGTERM; " in err
    assert not any((out / f).exists() for f in REPORT_FILES)
    _no_leftovers(out)


# --------------------------------------------------------------------------------------------
# the real thing: both pipelines

def test_full_run_meets_the_acceptance_criteria(compare_run):
    out, proc = compare_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    for phase in ("running legacy", "running modern", "converting profiles", "mapping",
                  "writing"):
        assert phase in proc.stderr, phase
    assert f"tensorboard --logdir {out}" in proc.stdout
    for name in REPORT_FILES + ("tf.log",):
        assert (out / name).is_file(), name
    _no_leftovers(out)
    # the run folder is a TensorBoard logdir with runs "legacy" and "modern"
    for side in ("legacy", "modern"):
        assert list(out.glob(f"{side}/plugins/profile/*/*.xplane.pb")), side
    r = _report(out)
    assert r["order"] == ["legacy", "modern"]   # our own runs: named by their pipelines
    both = [row["stage"] for row in r["stages"] if row["kind"] == "pipeline"
            and row["a_us"] > 0 and row["b_us"] > 0 and row["a_ops"] and row["b_ops"]]
    assert len(both) >= 10, both
    for side in ("legacy", "modern"):
        assert r["unmapped_us"][side] <= 0.10 * r["steps"][side]["mean_us"], side
        assert r["runs"][side]["pipeline"] == side
    assert r["xla"]["modern"]["compiles"] >= 1 and r["xla"]["legacy"]["compiles"] >= 1
    assert not r["xla"]["modern"]["recompiled"]
    d = r["step_delta"]
    assert sum(t["delta_us"] for t in d["terms"]) == pytest.approx(d["delta_us"], abs=1.0)


@pytest.mark.browser
@pytest.mark.needs("chromium")
def test_screenshot_of_the_profile_tab_lands_in_the_run_folder(compare_run):
    """``--screenshot``: real TensorBoard + headless chromium over the run folder; the PNG sits
    beside report.md, which shows it, and the page listed both sessions."""
    out, proc = compare_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no screenshot" not in proc.stderr, proc.stderr[-2000:]
    png = out / "profile_tab.png"
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert width >= 800 and height >= 600
    assert _report(out)["screenshot"] == "profile_tab.png"
    assert "](profile_tab.png)" in (out / "report.md").read_text()
    listed = next(line for line in proc.stderr.splitlines() if "the profile tab lists" in line)
    assert "legacy/" in listed and "modern/" in listed
    assert "profile_tab.png" in proc.stdout


def test_screenshot_without_a_browser_is_one_line_and_the_run_goes_on(compare_run, tmp_path,
                                                                     monkeypatch):
    import shutil

    from compare import api

    out, _ = compare_run
    folder = tmp_path / "run"
    shutil.copytree(out / "modern", folder / "modern")
    monkeypatch.setenv("CHROMIUM", str(tmp_path / "no-chromium"))
    said = []
    monkeypatch.setattr(api, "say", said.append)
    assert api._screenshot(folder, api.Phases()) is None
    assert not (folder / "profile_tab.png").exists()
    line = said[-1]
    assert line.startswith("compare.run: no screenshot: ") and "no-chromium" in line
    assert "\n" not in line
