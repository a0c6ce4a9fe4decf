"""The benchmark runs end to end and writes the JSON its readers expect (timings not checked)."""
from __future__ import annotations

import json

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
    assert set(result["first_output_s"]) == {"legacy", "modern"}
    assert all(v > 0 for v in result["first_output_s"].values())
    assert result["image_set"]["count"] == 3 and len(result["image_set"]["sizes_hw"]) == 3
    assert result["machine"]["cpus"] >= 1
    for name in pipelines:  # the printed table names every pipeline
        assert name in proc.stdout
