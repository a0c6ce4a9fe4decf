"""The modern pipeline's run: its artifacts, its profile (steps, XLA kernels, HLO metadata,
one compile per function), its CLI and its handling of bad input."""
from __future__ import annotations

import collections
import gzip
import json

import numpy as np
import pytest

from common.augment_spec import OUTPUT_SHAPE
from common.stages import stage_of_scope
from tests.conftest import assert_one_line_error, run_module

pytestmark = pytest.mark.slow

#: The compiled halves of the augmentation, as their HLO module names start.
XLA_FUNCTIONS = ("a_inference_colour_", "a_inference_finish_")


def _events(out) -> list[dict]:
    with gzip.open(out / "trace.json.gz", "rt") as f:
        return json.load(f)["traceEvents"]


def _xla_function(module: str) -> str | None:
    return next((f for f in XLA_FUNCTIONS if module.startswith(f)), None)


def _compiles(events) -> collections.Counter:
    """XLA compilations per compiled function, from the profile's compile events."""
    return collections.Counter(
        _xla_function(e["args"]["name"]) or e["args"]["name"] for e in events
        if e.get("ph") == "X" and e.get("name") == "CpuCompiler::CompileCpuExecutable")


def _steps_of(events) -> list[dict]:
    """The step markers (``modern <i>`` with ``step_num`` and ``step_name`` args), in time order."""
    return sorted((e for e in events if e.get("ph") == "X"
                   and e.get("args", {}).get("step_name", "").startswith("modern ")
                   and "step_num" in e["args"]), key=lambda e: e["ts"])


def test_run_json(modern_run):
    out, run = modern_run
    on_disk = json.loads((out / "run.json").read_text())
    assert on_disk == json.loads(json.dumps(run))
    legacy_fields = {"pipeline", "tf_version", "python", "xla", "seed", "images", "steps",
                     "step_name", "step_wall_s", "step_images", "first_step_s",
                     "steady_median_s", "output_shape", "output_dtype"}
    assert legacy_fields | {"jit"} <= set(run)
    assert run["pipeline"] == "modern" and run["jit"] is True and run["xla"] is True
    assert run["output_shape"] == list(OUTPUT_SHAPE) and run["output_dtype"] == "float32"
    assert len(run["step_wall_s"]) == len(run["step_images"]) == run["steps"] == 6
    assert run["images"][0]["path"].endswith("grace_hopper.jpg")
    assert run["images"][0]["height"] == 600 and run["images"][0]["width"] == 512
    assert run["first_step_s"] == run["step_wall_s"][0] > run["steady_median_s"] > 0
    assert "skipped" not in run
    assert {p.name for p in out.iterdir()} == {"plugins", "run.json", "trace.json.gz"}


def test_trace_json_has_steps_tf_data_and_xla_kernels(modern_run):
    out, run = modern_run
    events = _events(out)
    steps = _steps_of(events)
    assert [int(e["args"]["step_num"]) for e in steps] == list(range(run["steps"]))
    names = {e.get("name") for e in events if e.get("ph") == "X"}
    assert {"DecodeJpeg", "ResizeBilinear", "ReadFile"} <= names
    assert any(n.startswith("Iterator::") for n in names)
    kernels = [e for e in events if e.get("ph") == "X" and "hlo_op" in e.get("args", {})]
    # every step after the first runs both compiled halves, inside the step
    for step in steps:
        inside = {_xla_function(k["args"]["hlo_module"]) for k in kernels
                  if step["ts"] <= k["ts"] <= step["ts"] + step["dur"]}
        assert set(XLA_FUNCTIONS) <= inside, step["args"]["step_num"]
    # the profile's trace is the one written next to it
    from common.profiling import xplane_files, xplane_to_trace_json

    again = json.loads(xplane_to_trace_json(xplane_files(out)))["traceEvents"]
    assert len(again) == len(events)


def test_compiled_once_on_first_step(modern_run):
    out, _ = modern_run
    events = _events(out)
    assert _compiles(events) == {f: 1 for f in XLA_FUNCTIONS}
    first = _steps_of(events)[0]
    for e in events:
        if e.get("name") == "CpuCompiler::CompileCpuExecutable":
            assert first["ts"] <= e["ts"] <= first["ts"] + first["dur"]


def test_compiles_once_over_50_images_of_10_sizes(modern_run_varied, varied_jpegs):
    """One compile per compiled function for every image size: shapes are static."""
    out, run = modern_run_varied
    sizes = {(i["height"], i["width"]) for i in run["images"]}
    assert len(run["images"]) == 50 and len(sizes) >= 5
    assert len(set(run["step_images"])) == 50 and run["steps"] >= 50
    events = _events(out)
    assert _compiles(events) == {f: 1 for f in XLA_FUNCTIONS}
    # ... and both ran on every step
    kernels_per_module = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and "hlo_op" in e.get("args", {}):
            kernels_per_module[_xla_function(e["args"]["hlo_module"])] += 1
    steps = _steps_of(events)
    assert len(steps) == run["steps"]
    for f in XLA_FUNCTIONS:
        assert kernels_per_module[f] >= run["steps"]


def _hlo_op_names(xplane: str) -> dict[str, list[str]]:
    """HLO module name -> ``metadata.op_name`` of every instruction (fused ones included),
    from the HLO protos the profile keeps in its ``/host:metadata`` plane."""
    from common.hlo import modules_from_xplanes

    return {name: [i.op_name for insts in m.computations.values() for i in insts]
            for name, m in modules_from_xplanes([xplane], xplane).items()}


def test_stage_scopes_survive_into_hlo_metadata(modern_run):
    from common.profiling import xplane_files

    out, _ = modern_run
    modules = _hlo_op_names(xplane_files(out)[0])
    stages = {}
    for name, op_names in modules.items():
        f = _xla_function(name)
        if f:
            stages[f] = {stage_of_scope(n) for n in op_names} - {None}
    assert stages[XLA_FUNCTIONS[0]] == {"brightness", "saturation", "clip"}
    assert stages[XLA_FUNCTIONS[1]] >= {"contrast", "clip", "flip", "assemble", "shuffle"}
    # the kernels the trace shows are instructions of those modules
    events = _events(out)
    kernels = {(e["args"]["hlo_module"], e["name"]) for e in events
               if e.get("ph") == "X" and "hlo_op" in e.get("args", {})}
    assert kernels and {m for m, _ in kernels} <= set(modules)


def _step_rows(tool: str, files: list[str]) -> int:
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data(files, tool, {})
    tables = json.loads(data)
    rows = [len(t.get("rows", [])) for t in tables
            if any(c.get("id") == "stepnum" for c in t.get("cols", []))]
    assert rows, f"{tool}: no step-time table"
    return max(rows)


@pytest.mark.parametrize("tool", ["overview_page", "input_pipeline_analyzer"])
def test_tensorboard_pages_show_steps(modern_run, tool):
    from common.profiling import xplane_files

    out, run = modern_run
    files = xplane_files(out)
    assert len(files) == 1 and "/plugins/profile/" in files[0]
    rows = _step_rows(tool, files)
    assert rows >= run["steps"] - 2  # xprof leaves out the first and last step


def test_nojit_run_has_no_xla(tmp_path):
    from modern.runner import run_modern

    run = run_modern(tmp_path / "run", steps=3, jit=False, seed=1)
    assert run["jit"] is False and run["xla"] is False
    assert run["output_shape"] == list(OUTPUT_SHAPE)
    events = _events(tmp_path / "run")
    assert not [e for e in events if "hlo_op" in e.get("args", {})]
    assert not _compiles(events)
    assert len(_steps_of(events)) == 3


def _corrupt(folder, good: str) -> dict[str, str]:
    """Two bad files beside good ones: a truncated JPEG and a text file named .jpg."""
    data = open(good, "rb").read()
    bad = {"truncated": folder / "b_truncated.jpg", "notjpeg": folder / "c_notes.jpg"}
    bad["truncated"].write_bytes(data[:len(data) // 3])
    bad["notjpeg"].write_text("not an image\n")
    return {k: str(v) for k, v in bad.items()}


@pytest.mark.parametrize("case", ["truncated", "notjpeg"])
def test_cli_bad_image_among_good_ones_is_one_line_exit_2(tmp_path, case):
    from common.inputs import default_image

    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "a_good.jpg").write_bytes(open(default_image(), "rb").read())
    bad = _corrupt(folder, default_image())
    (folder / ("c_notes.jpg" if case == "truncated" else "b_truncated.jpg")).unlink()
    out = tmp_path / "out"
    proc = run_module("modern.run", "--out", str(out), "--images", str(folder), "--steps", "2")
    assert_one_line_error(proc, bad[case])
    artifacts = [p.name for p in out.iterdir()] if out.exists() else []
    assert set(artifacts) <= {"tf.log"}, artifacts


def test_cli_skip_bad_goes_on_and_names_skipped_files(tmp_path):
    from common.inputs import default_image

    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "a_good.jpg").write_bytes(open(default_image(), "rb").read())
    bad = _corrupt(folder, default_image())
    out = tmp_path / "out"
    proc = run_module("modern.run", "--out", str(out), "--images", str(folder), "--steps", "3",
                      "--skip_bad", "--seed", "4")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["skipped_count"] == 2
    assert sorted(s["path"] for s in run["skipped"]) == sorted(bad.values())
    assert all(s["path"] in s["reason"] for s in run["skipped"])
    assert [i["path"] for i in run["images"]] == [str(folder / "a_good.jpg")]
    assert set(run["step_images"]) == {str(folder / "a_good.jpg")}
    assert run["seed"] == 4 and run["output_shape"] == list(OUTPUT_SHAPE)
    assert (out / "trace.json.gz").exists() and list(out.glob("plugins/profile/*/*.xplane.pb"))
    for p in bad.values():
        assert p in proc.stderr


def test_cli_skip_bad_with_nothing_left_is_one_line_exit_2(tmp_path):
    from common.inputs import default_image

    folder = tmp_path / "imgs"
    folder.mkdir()
    bad = _corrupt(folder, default_image())
    proc = run_module("modern.run", "--out", str(tmp_path / "out"), "--images", str(folder),
                      "--skip_bad")
    assert_one_line_error(proc, "no usable image", bad["truncated"])


def test_cli_refuses_non_empty_out(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    proc = run_module("modern.run", "--out", str(tmp_path), "--steps", "2")
    assert_one_line_error(proc, str(tmp_path), "not empty")
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_cli_writes_the_three_artifacts(tmp_path):
    out = tmp_path / "out"
    proc = run_module("modern.run", "--out", str(out), "--steps", "3", "--nojit")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["jit"] is False and run["steps"] == 3
    assert len(list(out.glob("plugins/profile/*/*.xplane.pb"))) == 1
    with gzip.open(out / "trace.json.gz", "rt") as f:
        assert json.load(f)["traceEvents"]
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "staging left behind"
    assert np.isfinite(run["steady_median_s"])
