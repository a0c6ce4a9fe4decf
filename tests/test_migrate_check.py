"""``compare.migrate --emit`` + ``--check`` on real TF1 scripts with data made here: the CIFAR-10
binary tutorial, the fully-connected TFRecord reader tutorial and the seed on a JPEG. Each port
runs, gives the original's structure, and the check passes and writes its report (slow: each
check runs TensorFlow in two child processes)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_module

FIX = Path(__file__).resolve().parent / "fixtures"
REAL = FIX / "real_scripts"
pytestmark = pytest.mark.slow


def cifar_files(folder: Path, records: int = 6) -> None:
    """data_batch_1..5.bin in CIFAR-10's record format: 1 label byte + 3072 image bytes."""
    rng = np.random.default_rng(0)
    for i in range(1, 6):
        recs = [bytes([(i * records + j) % 10]) + rng.integers(0, 256, 3072, np.uint8).tobytes()
                for j in range(records)]
        (folder / f"data_batch_{i}.bin").write_bytes(b"".join(recs))


def check(tmp_path: Path, script: Path, call: str, *extra: str, cwd: Path | None = None):
    out = tmp_path / "report"
    r = run_module("compare.migrate", str(script), "--emit", str(tmp_path / "port.py"),
                   "--check", "--call", call, "--out", str(out), "--batches", "2", *extra,
                   cwd=cwd, timeout=600)
    return r, out


def assert_report(out: Path) -> dict:
    for name in ("report.md", "report.json", "merged_trace.json.gz", "stages.png",
                 "check.json", "original/timeline.json"):
        assert (out / name).is_file(), name
    assert list((out / "port").glob("plugins/profile/*/*.xplane.pb"))
    assert "## The port checked against the original" in (out / "report.md").read_text()
    assert json.loads((out / "report.json").read_text())["labels"] == {
        "legacy": "original", "modern": "port"}
    return json.loads((out / "check.json").read_text())


def test_cifar10_distorted_inputs(tmp_path):
    cifar_files(tmp_path)
    r, out = check(tmp_path, REAL / "cifar10_input.py", f"distorted_inputs({str(tmp_path)!r}, 4)")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check passed" in r.stdout
    assert "(4, 24, 24, 3)" in r.stdout and "float32" in r.stdout and "int32" in r.stdout
    result = assert_report(out)
    assert result["ok"] and all(v for v in result["batches_per_s"].values())
    # a port that no longer matches: named, exit 1
    port = tmp_path / "port.py"
    port.write_text(port.read_text().replace("tf.reshape(label_batch, [batch_size])",
                                             "tf.cast(tf.reshape(label_batch, [batch_size]), "
                                             "tf.int64)"))
    r = run_module("compare.migrate", str(REAL / "cifar10_input.py"), "--check", "--call",
                   f"distorted_inputs({str(tmp_path)!r}, 4)", "--port", str(port), "--out",
                   str(tmp_path / "again"), "--batches", "1", timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "check FAILED: [1] dtype: int32 vs int64" in r.stdout


def test_fully_connected_reader_tfrecords(tmp_path):
    import tensorflow as tf
    with tf.io.TFRecordWriter(str(tmp_path / "train.tfrecords")) as w:
        for i in range(12):
            image = np.full(784, i * 20, np.uint8).tobytes()
            ex = tf.train.Example(features=tf.train.Features(feature={
                "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10]))}))
            w.write(ex.SerializeToString())
    setup = f"import types; FLAGS = types.SimpleNamespace(train_dir={str(tmp_path)!r})"
    r, out = check(tmp_path, REAL / "fully_connected_reader.py", "inputs(True, 5, None)",
                   "--setup", setup)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(5, 784)" in r.stdout and "check passed" in r.stdout
    assert assert_report(out)["ok"]


def test_seed_on_a_jpeg(tmp_path):
    import tensorflow as tf
    img = (np.indices((240, 320)).sum(0) % 256).astype(np.uint8)
    tf.io.write_file(str(tmp_path / "Lena.jpg"), tf.io.encode_jpeg(np.stack([img] * 3, -1)))
    r, out = check(tmp_path, FIX / "seed_pipeline.py", "pipeline()", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(10, 221, 221, 3)" in r.stdout and "check passed" in r.stdout
    assert assert_report(out)["ok"]


def test_missing_data_is_one_line_and_exit_2(tmp_path):
    r, out = check(tmp_path, REAL / "cifar10_input.py", f"inputs(True, {str(tmp_path)!r}, 4)")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(
        "compare.migrate: error: the original pipeline failed: ValueError: Failed to find file")
    assert not out.exists() or not any(out.iterdir())
