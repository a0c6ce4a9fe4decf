"""``compare.migrate --emit`` + ``--check`` on real TF1 scripts with data made here: the CIFAR-10
binary tutorial, the fully-connected TFRecord reader tutorial, the seed on a JPEG, and held-out
scripts the emitter was fixed on (resnet's CIFAR input in both modes, magenta's padded
SequenceExample batches, cloudml's census CSV without shuffling). Each port runs, gives the
original's structure, and the check passes and writes its report (slow: each check runs
TensorFlow in two child processes)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_module
from tests.migrate_data import census_csv, cifar_files, sequence_examples

FIX = Path(__file__).resolve().parent / "fixtures"
REAL = FIX / "real_scripts"
pytestmark = pytest.mark.slow


def check(tmp_path: Path, script: Path, call: str, *extra: str, cwd: Path | None = None,
          batches: int = 2):
    out = tmp_path / "report"
    tmp_path.mkdir(exist_ok=True)
    r = run_module("compare.migrate", str(script), "--emit", str(tmp_path / "port.py"),
                   "--check", "--call", call, "--out", str(out), "--batches", str(batches),
                   *extra, cwd=cwd, timeout=600)
    return r, out


def assert_report(out: Path) -> dict:
    for name in ("report.md", "report.json", "merged_trace.json.gz", "stages.png",
                 "check.json", "original/timeline.json"):
        assert (out / name).is_file(), name
    assert list((out / "port").glob("plugins/profile/*/*.xplane.pb"))
    assert "## The port checked against the original" in (out / "report.md").read_text()
    assert json.loads((out / "report.json").read_text())["order"] == ["original", "port"]
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


def test_resnet_cifar_both_modes(tmp_path):
    """A QueueRunner with 16 enqueue ops (train) runs one on the original side, so both give the
    records in file order."""
    cifar_files(tmp_path, records=5, files=2)
    pattern = str(tmp_path / "data_batch_*.bin")
    for mode in ("train", "eval"):
        r, out = check(tmp_path / mode, REAL / "resnet_cifar_input.py",
                       f"build_input('cifar10', {pattern!r}, 4, {mode!r})", batches=3)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "(4, 32, 32, 3)" in r.stdout and "(4, 10)" in r.stdout
        assert assert_report(out)["ok"]


def test_magenta_padded_batches_compared_batch_by_batch(tmp_path):
    sequence_examples(tmp_path / "seq.tfrecord", [3, 5, 4, 7, 2, 6, 3, 8, 4, 4, 5, 3])
    r, out = check(tmp_path, REAL / "magenta_sequence_example_lib.py",
                   f"get_padded_batch([{str(tmp_path / 'seq.tfrecord')!r}], 4, 4, None, 4, True)",
                   batches=3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "per batch: (4, 7, 4), (4, 8, 4), (4, 5, 4)" in r.stdout  # shapes differ by batch
    assert assert_report(out)["ok"]


def test_cloudml_census_without_shuffle_in_file_order(tmp_path):
    """shuffle=False: the original reads the CSV in order (its label table initialised), and so
    must the port."""
    census_csv(tmp_path / "adult.csv", 20)
    r, out = check(tmp_path, REAL / "cloudml_census_estimator_model.py",
                   f"input_fn([{str(tmp_path / 'adult.csv')!r}], None, False, 0, 5)", batches=3)
    assert r.returncode == 0, r.stdout + r.stderr
    result = assert_report(out)
    assert result["ok"]
    values = [row for row in result["rows"] if row["what"].endswith("values")]
    assert len(values) == 14 and all(row["ok"] for row in values)  # 13 columns and the label


def assert_final_paths(out: Path) -> None:
    """report.md and report.json name the sides where --check left them (issue 30)."""
    md = (out / "report.md").read_text()
    assert ".check-" not in md and f"`{out / 'original' / 'timeline.json'}`" in md
    assert ".check-" not in (out / "report.json").read_text()
    assert "side A (" not in md and "the original built by --call" in md


def test_queue_runner_over_a_random_op_checks(tmp_path):
    """The TF1 book's QueueRunner([enqueue_op] * 5) of tf.random_normal([1]): the port draws
    each element anew, with the queue's shape [1]; nothing to read, nothing to make."""
    r, out = check(tmp_path, REAL / "caicloud_queue_runner.ipynb", "pipeline()", batches=3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "'tensor'" in r.stdout and "(1,)" in r.stdout and "check passed" in r.stdout
    assert assert_report(out)["ok"]
    assert_final_paths(out)


def test_tf_docs_queue_runner_fed_by_an_iterator_checks(tmp_path):
    """TensorFlow's threading guide: 100 numbers through a RandomShuffleQueue filled by four
    enqueue threads; the snippet never imports tf (read as if it did). Its data ends after 10
    batches, so the timing takes what there is."""
    r, out = check(tmp_path, REAL / "tf_docs_simple_shuffle_batch.py", "pipeline()", batches=3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(10,)" in r.stdout and "0 .. 29" in r.stdout and "check passed" in r.stdout
    assert assert_report(out)["ok"]
    assert_final_paths(out)


SESSION_SCRIPT = '''import tensorflow as tf


def inputs(n, sess=None):
    q = tf.FIFOQueue(100, [tf.float32], shapes=[[3]])
    op = q.enqueue_many([tf.reshape(tf.range(30, dtype=tf.float32), [10, 3])])
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [op]))
    threads = tf.train.start_queue_runners(sess=sess)
    return q.dequeue_many(n)
'''


@pytest.mark.parametrize("call", ["inputs(4)", "inputs(4, sess)"])
def test_a_function_that_starts_its_queue_runners_gets_a_session(tmp_path, call):
    """start_queue_runners(sess=sess) with the session it is given: None (the default session
    then) or ``sess`` in --call; the check provides one, no --setup needed."""
    (tmp_path / "feeder.py").write_text(SESSION_SCRIPT)
    r, out = check(tmp_path, tmp_path / "feeder.py", call, batches=2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(4, 3)" in r.stdout and "check passed" in r.stdout
