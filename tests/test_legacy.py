"""The legacy pipeline on TF 2.21: its output, its traces and its CLI."""
from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from common.augment_spec import OUTPUT_SHAPE
from tests.conftest import assert_one_line_error, run_module

pytestmark = pytest.mark.slow


def _mirror_pairs(x: np.ndarray) -> list[tuple[int, int]]:
    """Pairs (i, j), i < j, where row j is the exact left-right mirror of row i."""
    return [(i, j) for i in range(len(x)) for j in range(len(x))
            if i < j and np.array_equal(x[i][:, ::-1], x[j])]


@pytest.mark.parametrize("xla", [True, False], ids=["xla", "noxla"])
def test_output_is_one_plain_crop_and_four_jittered_with_mirrors(xla):
    import tensorflow as tf

    from common.inputs import default_image
    from legacy import pipeline

    g = pipeline.build([default_image()], xla=xla, seed=3)
    v1 = tf.compat.v1
    with v1.Session(graph=g.graph, config=pipeline.session_config(xla)) as sess:
        coord = v1.train.Coordinator()
        threads = v1.train.start_queue_runners(sess=sess, coord=coord)
        out, assembled, resized, offsets = sess.run(
            [g.output, g.assembled, g.resized, g.draws["crop_offsets"]])
        coord.request_stop()
        coord.join(threads)
    assert out.shape == OUTPUT_SHAPE and out.dtype == np.float32
    assert out.min() >= 0.0 and out.max() <= 1.0
    # Aspect-preserving resize: grace_hopper is 600 rows x 512 cols -> 300 x 256.
    assert resized.shape == (300, 256, 3)
    # The shuffle is a permutation of the assembled rows.
    rows = {a.tobytes() for a in assembled}
    assert {o.tobytes() for o in out} == rows and len(rows) == 10
    # Five mirror pairs; exactly one pair is a raw, unjittered window of the resized image.
    pairs = _mirror_pairs(out)
    assert len(pairs) == 5 and len({i for p in pairs for i in p}) == 10
    windows = [resized[int(r):int(r) + 221, int(c):int(c) + 221] for r, c, _ in offsets]
    plain = windows[0]
    raw = [p for p in pairs if np.array_equal(out[p[0]], plain) or np.array_equal(out[p[1]], plain)]
    assert len(raw) == 1
    # The seed's order: the plain crop and its mirror are the last two assembled rows.
    assert np.array_equal(assembled[8], plain) and np.array_equal(assembled[9], plain[:, ::-1])
    # The other four pairs are crops 1..4 (newest first), each jittered away from its raw window.
    for k, crop in enumerate((4, 3, 2, 1)):
        jittered, mirror = assembled[2 * k], assembled[2 * k + 1]
        assert np.array_equal(jittered[:, ::-1], mirror)
        assert np.abs(jittered - windows[crop]).max() > 1e-3


def _trace(path):
    with open(path) as f:
        return json.load(f)["traceEvents"]


def _process_names(events):
    return {e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}


def _ops(events):
    return {e["args"]["op"] for e in events if e.get("ph") == "X"}


@pytest.mark.parametrize("which", ["timeline_first.json", "timeline.json"])
def test_timelines_with_xla(legacy_run, which):
    out, _ = legacy_run
    events = _trace(out / which)
    procs = _process_names(events)
    assert "Allocators" in procs
    assert any(p.endswith("CPU:0 Compute") for p in procs), procs
    assert any(p.endswith("CPU:0 Tensors") for p in procs), procs
    ops = _ops(events)
    assert {"ReaderReadV2", "DecodeJpeg", "RandomShuffle", "_XlaCompile", "_XlaRun"} <= ops, ops
    # memory counters are shown; dataflow arrows too whenever an edge crosses lanes
    # (timeline.py draws arrows only between different lanes)
    phases = {e["ph"] for e in events}
    assert "C" in phases
    lanes = {e["tid"] for e in events if e.get("ph") == "X" and e["pid"] == 1}
    if len(lanes) > 1:
        assert {"s", "t"} <= phases
    # our stage scopes survive into node names
    names = {e["args"]["name"] for e in events if e.get("ph") == "X"}
    assert any(n.startswith("decode/") for n in names)


def test_first_step_compiles_and_steady_step_does_not(legacy_run):
    out, run = legacy_run

    def compile_us(name):
        return sum(e["dur"] for e in _trace(out / name)
                   if e.get("ph") == "X" and e["args"]["op"] == "_XlaCompile")

    first, steady = compile_us("timeline_first.json"), compile_us("timeline.json")
    assert first > 20 * steady, (first, steady)
    assert run["first_step_s"] > 3 * run["steady_median_s"]


def test_timeline_without_xla_has_no_xla_ops(legacy_run_noxla):
    out, run = legacy_run_noxla
    assert run["xla"] is False
    ops = _ops(_trace(out / "timeline.json"))
    assert {"ReaderReadV2", "DecodeJpeg", "RandomShuffle", "AdjustSaturation"} <= ops
    assert not {o for o in ops if o.startswith("_Xla")}, ops


def test_run_json(legacy_run):
    out, run = legacy_run
    on_disk = json.loads((out / "run.json").read_text())
    assert on_disk == json.loads(json.dumps(run))
    assert run["output_shape"] == list(OUTPUT_SHAPE)
    assert len(run["step_wall_s"]) == run["steps"] == 6
    assert run["xla"] is True and run["tf_version"].startswith("2.21")
    assert run["images"][0]["path"].endswith("grace_hopper.jpg")
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "staging left behind"


def test_profile_converts_through_xprof_with_steps(legacy_run):
    from common.profiling import xplane_files, xplane_to_trace_json

    out, run = legacy_run
    files = xplane_files(out)
    assert len(files) == 1 and "/plugins/profile/" in files[0]
    events = json.loads(xplane_to_trace_json(files))["traceEvents"]
    names = {e.get("name") for e in events if e.get("ph") == "X"}
    assert {"DecodeJpeg", "_XlaRun", "SessionRun"} <= names
    steps = {e["args"]["step_num"] for e in events
             if e.get("ph") == "X" and "step_num" in e.get("args", {})}
    assert steps == {str(i) for i in range(run["steps"])}


def test_reader_error_stops_queue_runners_without_hang(tmp_path):
    """A file that vanishes after the preflight fails inside the graph: one clean error and
    every queue-runner thread stopped."""
    from common.errors import InputError
    from legacy import pipeline
    from legacy.runner import _run_steps

    before = threading.active_count()
    g = pipeline.build([str(tmp_path / "gone.jpg")], xla=False)
    t0 = time.monotonic()
    with pytest.raises(InputError, match="gone.jpg"):
        _run_steps(g, pipeline.session_config(False), 3)
    assert time.monotonic() - t0 < 30
    deadline = time.monotonic() + 10
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert threading.active_count() <= before


@pytest.mark.parametrize("case", ["missing", "empty", "png", "truncated"])
def test_cli_bad_image_is_one_line_exit_2(tmp_path, case):
    from common.inputs import default_image

    img = tmp_path / f"{case}.jpg"
    if case == "empty":
        img.write_bytes(b"")
    elif case == "png":
        img.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    elif case == "truncated":
        img.write_bytes(open(default_image(), "rb").read()[:4000])
    out = tmp_path / "out"
    proc = run_module("legacy.run", "--out", str(out), "--images", str(img), "--steps", "2")
    assert_one_line_error(proc, str(img))
    artifacts = [p.name for p in out.iterdir()] if out.exists() else []
    assert set(artifacts) <= {"tf.log"}, artifacts


def test_cli_refuses_non_empty_out(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    proc = run_module("legacy.run", "--out", str(tmp_path), "--steps", "2")
    assert_one_line_error(proc, str(tmp_path), "not empty")
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_cli_bad_flag_is_one_line_exit_2(tmp_path):
    proc = run_module("legacy.run", "--out", str(tmp_path / "o"), "--steps", "zero")
    assert_one_line_error(proc, "steps")
    assert not (tmp_path / "o").exists()
