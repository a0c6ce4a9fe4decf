"""The benchmark runs end to end and writes the JSON its readers expect (timings not checked)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import run_module

pytestmark = pytest.mark.slow


def test_benchmark_smoke_writes_json_keys(tmp_path):
    out = tmp_path / "bench.json"
    proc = run_module("benchmarks.pipelines", "--images", "3", "--rounds", "1", "--batch", "2",
                      "--warmup", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads(out.read_text())
    pipelines = {"legacy", "modern", "modern_nojit", "floor"}
    assert set(result["images_per_s"]) == pipelines
    assert all(v > 0 for v in result["images_per_s"].values())
    assert set(result["ratios"]) == {"modern_vs_legacy", "jit_vs_nojit", "modern_vs_floor"}
    ips = result["images_per_s"]
    assert result["ratios"]["modern_vs_legacy"] == pytest.approx(ips["modern"] / ips["legacy"])
    assert set(result["cpu_ms_per_image"]) == pipelines
    assert all(v > 0 for v in result["cpu_ms_per_image"].values())
    assert set(result["ratios_cpu"]) == set(result["ratios"])
    assert all(len(v) == 1 for v in result["per_round_cpu_ms_per_image"].values())
    assert set(result["first_output_s"]) == {"legacy", "modern"}
    assert all(v > 0 for v in result["first_output_s"].values())
    assert result["image_set"]["count"] == 3 and len(result["image_set"]["sizes_hw"]) == 3
    assert result["machine"]["cpus"] >= 1
    for name in pipelines:  # the printed table names every pipeline
        assert name in proc.stdout


def test_xla_designs_all_compute_the_seed_output_shape():
    """Every design in BUILD.md's table runs and returns the seed's (10, 221, 221, 3) output;
    the measurement returns a positive time for each (design 1 under XLA is left out: its
    compile alone takes ~9 s, which is the point it makes)."""
    import tensorflow as tf

    from benchmarks import xla_designs
    from common.augment_spec import OUTPUT_SHAPE
    from modern import augment

    for key, (body, args) in xla_designs._bodies().items():
        fn = augment.make_augment(False) if body is None else tf.function(body, autograph=False)
        out = fn(*args)
        assert tuple(out.shape) == OUTPUT_SHAPE, key
        assert 0.0 <= float(tf.reduce_min(out)) and float(tf.reduce_max(out)) <= 1.0, key
    result = xla_designs.measure(["2", "3", "4"], rounds=1, calls=1)
    assert set(result) == {"2", "3", "4"}
    for r in result.values():
        assert r["xla"] > 0 and r["no_xla"] > 0 and r["first_xla_s"] > 0


@pytest.mark.service
@pytest.mark.needs("cc")
def test_benchmark_data_service_reports_local_and_one_and_two_workers(tmp_path):
    """``--data_service`` starts two local clusters (1 and 2 worker processes), times the modern
    pipeline locally and through each, and stops the servers cleanly (a server that does not
    exit 0 fails the run)."""
    out = tmp_path / "bench.json"
    proc = run_module("benchmarks.pipelines", "--data_service", "--images", "3", "--rounds", "1",
                      "--batch", "2", "--warmup", "1", "--json", str(out), timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads(out.read_text())
    assert set(result["images_per_s"]) == {"modern", "service_1", "service_2"}
    svc = result["data_service"]
    assert svc["local"] == result["images_per_s"]["modern"] > 0
    assert svc["workers_1"] == result["images_per_s"]["service_1"] > 0
    assert svc["workers_2"] == result["images_per_s"]["service_2"] > 0
    assert svc["ratios"]["workers_2_vs_1"] == pytest.approx(svc["workers_2"] / svc["workers_1"])
    assert svc["processing_mode"] == "distributed_epoch"
    # CPU per image: the client always, the server processes for the service runs only
    assert svc["cpu_ms_per_image"]["local"]["servers"] is None
    for key in ("workers_1", "workers_2"):
        assert svc["cpu_ms_per_image"][key]["client"] > 0
        assert svc["cpu_ms_per_image"][key]["servers"] > 0
    assert "1 worker" in proc.stdout and "2 workers" in proc.stdout


def test_hostile_benchmark_smoke_writes_json(tmp_path):
    """``benchmarks.hostile`` runs every case at two sizes and writes its numbers (speeds
    are measured there, not checked here)."""
    from benchmarks.hostile import ROW_CASES

    out = tmp_path / "hostile.json"
    proc = run_module("benchmarks.hostile", "--rows", "300,3000", "--json", str(out))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    result = json.loads(out.read_text())
    assert set(result["cases"]) == set(ROW_CASES)
    for case, runs in result["cases"].items():
        assert [r["rows"] for r in runs] == [300, 3000], case
        assert all(r["exit"] == 0 and r["events_per_s"] > 0 and r["peak_rss_bytes"] > 0
                   for r in runs), (case, runs)
        assert case in proc.stdout


def test_hostile_benchmark_runs_compare_run_too(tmp_path):
    """``--tool compare`` times ``compare.run`` with the hostile trace on one side."""
    out = tmp_path / "hostile.json"
    proc = run_module("benchmarks.hostile", "--rows", "300", "--cases", "many_names",
                      "--tool", "compare", "--json", str(out))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    result = json.loads(out.read_text())
    assert result["tool"] == "compare"
    (run,) = result["cases"]["many_names"]
    assert run["exit"] == 0 and run["wall_s"] > 0, run


_PLANTED = '''# planted by the test: every trace is loaded twice (a 2x slowdown of the loader)
import compare.load.json_trace as jt
_real = jt._load_json_bytes
def _twice(*a, **k):
    _real(*a, **k)
    return _real(*a, **k)
jt._load_json_bytes = _twice
'''


def test_loader_ratio_check_fails_on_a_planted_2x_slowdown(tmp_path):
    """The CI check (``benchmarks.analysis --max-ratio``) passes on our loader and fails when
    the loader is made twice as slow (a sitecustomize on the children's path), in one sitting."""
    from tests.conftest import ROOT

    plant = tmp_path / "plant"
    plant.mkdir()
    (plant / "sitecustomize.py").write_text(_PLANTED)

    def bench(*args: str, planted: bool = False) -> subprocess.CompletedProcess:
        path = f"{ROOT}{os.pathsep}{plant}" if planted else str(ROOT)
        return subprocess.run([sys.executable, "-m", "benchmarks.analysis", "--events",
                               "100000", "--rounds", "3", *args], capture_output=True,
                              text=True, timeout=600, cwd=ROOT,
                              env=dict(os.environ, PYTHONPATH=path))

    ours = bench("--json", str(tmp_path / "ours.json"))
    slow = bench("--json", str(tmp_path / "slow.json"), planted=True)
    assert ours.returncode == 0 and slow.returncode == 0, ours.stderr + slow.stderr
    ratio = json.loads((tmp_path / "ours.json").read_text())["ratio_cpu_median"]
    planted = json.loads((tmp_path / "slow.json").read_text())["ratio_cpu_median"]
    assert planted > 1.4 * ratio, (ratio, planted)
    bound = f"{(ratio * planted) ** 0.5:.3f}"   # between them
    check = bench("--max-ratio", bound, planted=True)
    assert check.returncode == 1 and "FAIL" in check.stdout, check.stdout + check.stderr
    passes = bench("--max-ratio", f"{planted * 1.5:.3f}")
    assert passes.returncode == 0 and ": ok" in passes.stdout, passes.stdout + passes.stderr
