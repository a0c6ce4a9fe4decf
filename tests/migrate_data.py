"""Small data in the formats real TF1 input pipelines read, made by the tests themselves, for
the tests that run emitted ports and ``--check`` (CIFAR-10 binary records, SequenceExample and
Example TFRecords, CSV lines, JPEGs, the MNIST tutorial's gzipped idx files), and a helper that
runs a snippet against a port in a child Python (ports define absl flags and import the
script's own modules: kept out of the test process)."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def cifar_files(folder: Path, records: int = 6, files: int = 5) -> list[Path]:
    """data_batch_1..N.bin in CIFAR-10's record format: 1 label byte + 3072 image bytes."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(1, files + 1):
        recs = [bytes([(i * records + j) % 10]) + rng.integers(0, 256, 3072, np.uint8).tobytes()
                for j in range(records)]
        path = folder / f"data_batch_{i}.bin"
        path.write_bytes(b"".join(recs))
        out.append(path)
    return out


def sequence_examples(path: Path, lengths: list[int], input_size: int = 4) -> None:
    """SequenceExamples of ``inputs`` [T, input_size] float and ``labels`` [T] int64."""
    import tensorflow as tf  # lazy: TensorFlow only for the tests that write records
    rng = np.random.default_rng(1)
    with tf.io.TFRecordWriter(str(path)) as w:
        for t in lengths:
            inputs = [tf.train.Feature(float_list=tf.train.FloatList(
                value=rng.random(input_size).tolist())) for _ in range(t)]
            labels = [tf.train.Feature(int64_list=tf.train.Int64List(value=[k % 5]))
                      for k in range(t)]
            ex = tf.train.SequenceExample(feature_lists=tf.train.FeatureLists(feature_list={
                "inputs": tf.train.FeatureList(feature=inputs),
                "labels": tf.train.FeatureList(feature=labels)}))
            w.write(ex.SerializeToString())


def census_csv(path: Path, rows: int) -> None:
    """Rows in the census (adult.data) format: 15 columns, the label last."""
    lines = [", ".join([str(20 + i), "Private", str(100000 + i), "Bachelors", "13",
                        "Never-married", "Adm-clerical", "Not-in-family", "White",
                        "Male" if i % 2 else "Female", "0", "0", "40", "United-States",
                        ">50K" if i % 3 == 0 else "<=50K"]) for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")


def jpegs(folder: Path, n: int, size=(20, 24), name="{:03d}.jpg") -> list[Path]:
    """``n`` JPEGs of random pixels (each its own seed)."""
    import tensorflow as tf  # lazy: TensorFlow only for the tests that encode images
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        img = np.random.default_rng(i).integers(0, 256, (*size, 3), np.uint8)
        path = folder / name.format(i)
        path.write_bytes(tf.io.encode_jpeg(img).numpy())
        out.append(path)
    return out


def mnist_files(folder: Path, train: int, test: int) -> None:
    """The four gzipped idx files TF 1's MNIST tutorial reader read."""
    rng = np.random.default_rng(2)
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", train), ("t10k", test)):
        images = rng.integers(0, 256, (n, 28, 28), np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        head = np.array([2051, n, 28, 28], ">u4").tobytes()
        with gzip.open(folder / f"{prefix}-images-idx3-ubyte.gz", "wb") as f:
            f.write(head + images.tobytes())
        with gzip.open(folder / f"{prefix}-labels-idx1-ubyte.gz", "wb") as f:
            f.write(np.array([2049, n], ">u4").tobytes() + labels.tobytes())


def run_port(port: Path, snippet: str, cwd: Path, timeout: float = 300) -> str:
    """Import ``port`` as module ``port`` in a child Python (``cwd`` first on its path, for the
    script's own modules) and run ``snippet`` there; its stdout. A failure fails the test with
    the child's stderr."""
    code = (f"import sys, importlib.util\nsys.path.insert(0, {str(cwd)!r})\n"
            f"spec = importlib.util.spec_from_file_location('port', {str(port)!r})\n"
            "port = importlib.util.module_from_spec(spec)\nsys.modules['port'] = port\n"
            "spec.loader.exec_module(port)\n"
            "import tensorflow as tf\n" + textwrap.dedent(snippet))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


__all__ = ["census_csv", "cifar_files", "jpegs", "mnist_files", "run_port", "sequence_examples"]
