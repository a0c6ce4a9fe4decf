"""Emitted ports of real TF1 scripts, imported and run on data made here (slow: each port runs
TensorFlow in a child Python): the element structure, shapes and dtypes the script's queues
delivered, and the order a pipeline without shuffling keeps."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from compare.migrate import analyze_file
from compare.migration.emit import emit
from tests.migrate_data import (
    census_csv,
    cifar_files,
    jpegs,
    mnist_files,
    run_port,
    sequence_examples,
)

REAL = Path(__file__).resolve().parent / "fixtures" / "real_scripts"
pytestmark = pytest.mark.slow


def write_port(name: str, tmp_path: Path) -> Path:
    e = emit(analyze_file(REAL / name))
    out = tmp_path / (Path(name).stem + "_tfdata.py")
    out.write_text(e.text)
    return out


SHAPES = '''
def shapes(ds, n):
    out = []
    for el in ds.take(n):
        out.append(tf.nest.map_structure(lambda t: [list(t.shape), t.dtype.name], el))
    return out
'''


def test_resnet_cifar_train_and_eval(tmp_path):
    cifar_files(tmp_path, records=5, files=2)
    port = write_port("resnet_cifar_input.py", tmp_path)
    out = run_port(port, SHAPES + f'''
import json
for mode in ("train", "eval"):
    ds = port.build_input("cifar10", {str(tmp_path / "data_batch_*.bin")!r}, 4, mode)
    images, labels = next(iter(ds))
    assert abs(float(tf.reduce_sum(labels)) - 4.0) < 1e-6  # one-hot rows
    print(json.dumps(shapes(ds, 2)))
''', tmp_path)
    train, evaluation = (json.loads(ln) for ln in out.splitlines())
    for batches in (train, evaluation):
        assert batches == [[[[4, 32, 32, 3], "float32"], [[4, 10], "float32"]]] * 2


def test_magenta_pads_each_batch_to_its_longest_sequence(tmp_path):
    sequence_examples(tmp_path / "seq.tfrecord", [3, 5, 4, 7, 2, 6, 3, 8])
    port = write_port("magenta_sequence_example_lib.py", tmp_path)
    out = run_port(port, f'''
import json
for shuffle in (False, True):
    ds = port.get_padded_batch([{str(tmp_path / "seq.tfrecord")!r}], 4, 4, None, 4, shuffle)
    rows = []
    for inputs, labels, lengths in ds.take(2):
        rows.append([list(inputs.shape), list(labels.shape), lengths.numpy().tolist()])
    print(json.dumps(rows))
''', tmp_path)
    ordered, shuffled = (json.loads(ln) for ln in out.splitlines())
    # file order (the file list is one file): lengths 3 5 4 7 | 2 6 3 8
    assert ordered == [[[4, 7, 4], [4, 7], [3, 5, 4, 7]], [[4, 8, 4], [4, 8], [2, 6, 3, 8]]]
    for inputs, labels, lengths in shuffled:
        assert inputs == [4, max(lengths), 4] and labels == [4, max(lengths)]


def test_cloudml_census_keeps_file_order_without_shuffle(tmp_path):
    census_csv(tmp_path / "adult.csv", 12)
    port = write_port("cloudml_census_estimator_model.py", tmp_path)
    out = run_port(port, f'''
import json
ds = port.input_fn([{str(tmp_path / "adult.csv")!r}], 1, False, 0, 5)
ages, labels = [], []
for features, label in ds:
    ages.append(features["age"].numpy().ravel().tolist())
    labels.append(label.numpy().ravel().tolist())
shuffled = sorted(a for f, _ in port.input_fn([{str(tmp_path / "adult.csv")!r}], 1, True, 0, 5)
                  for a in f["age"].numpy().ravel().tolist())
print(json.dumps([ages, labels, shuffled]))
''', tmp_path)
    ages, labels, shuffled = json.loads(out)
    assert ages == [[20, 21, 22, 23, 24], [25, 26, 27, 28, 29], [30, 31]]  # the last is short
    assert labels[0] == [1, 0, 0, 1, 0]  # ' >50K' is index 1 of LABELS
    assert shuffled == list(range(20, 32))


def test_began_loader_resizes_and_transposes_each_batch(tmp_path):
    jpegs(tmp_path / "imgs", 6)
    port = write_port("began_data_loader.py", tmp_path)
    out = run_port(port, SHAPES + f'''
import json
for fmt in ("NHWC", "NCHW"):
    print(json.dumps(shapes(port.get_loader({str(tmp_path / "imgs")!r}, 3, 16, fmt), 1)))
''', tmp_path)
    nhwc, nchw = (json.loads(ln) for ln in out.splitlines())
    assert nhwc == [[[3, 16, 16, 3], "float32"]] and nchw == [[[3, 3, 16, 16], "float32"]]


def test_py2_resnet_with_its_own_modules(tmp_path):
    """The port imports the script's modules (image_processing, synset via its star import) and
    defines its absl flag; batch_size and input_size come from another module of the project
    (resnet_train), so the run defines them."""
    (tmp_path / "image_processing.py").write_text(
        "import tensorflow as tf\n"
        "def image_preprocessing(buf, bbox, train, thread_id):\n"
        "    return tf.image.resize(tf.image.decode_jpeg(buf, channels=3), [8, 8])\n")
    (tmp_path / "synset.py").write_text(
        'synset_map = {"n01": {"index": 0}, "n02": {"index": 1}}\nsynset = ["a", "b"]\n')
    data = tmp_path / "train"
    for cls in ("n01", "n02"):
        jpegs(data / cls, 2, name=cls + "_{:d}.JPEG")
    (tmp_path / "train.txt").write_text("".join(
        f"{cls}/{cls}_{i}.JPEG\n" for cls in ("n01", "n02") for i in range(2)))
    port = write_port("py2_resnet_train_imagenet.py", tmp_path)
    out = run_port(port, SHAPES + f'''
import absl.flags, json
absl.flags.DEFINE_integer("batch_size", 2, "")
absl.flags.DEFINE_integer("input_size", 8, "")
port.FLAGS(["train", "--data_dir={data}"])
print(json.dumps(shapes(port.distorted_inputs(), 2)))
''', tmp_path)
    assert "listing files in" in out  # load_data's Python 2 prints, now calls
    assert json.loads(out.splitlines()[-1]) == [[[[2, 8, 8, 3], "float32"], [[2], "int32"]]] * 2


def test_notebooks(tmp_path):
    """aymericdamien's tf.data notebook (MNIST tutorial data through the port's reader; the
    notebook names /tmp/data/, the run points it here) and its slice_input_producer one."""
    mnist_files(tmp_path / "mnist", train=5010, test=3)
    for cls in ("cats", "dogs"):
        jpegs(tmp_path / "images" / cls, 3)
    dataset_api = write_port("aymericdamien_tensorflow_dataset_api.ipynb", tmp_path)
    images = write_port("build_an_image_dataset.ipynb", tmp_path)
    out = run_port(dataset_api, SHAPES + f'''
import json
read = port._mnist_read_data_sets
port._mnist_read_data_sets = lambda d, **k: read({str(tmp_path / "mnist")!r}, **k)
print(json.dumps(shapes(port.pipeline(), 2)))
''', tmp_path)
    assert json.loads(out) == [[[[128, 784], "float32"], [[128, 10], "float64"]]] * 2
    out = run_port(images, SHAPES + f'''
import json
print(json.dumps(shapes(port.read_images({str(tmp_path / "images")!r}, "folder", 4), 1)))
''', tmp_path)
    assert json.loads(out) == [[[[4, 64, 64, 3], "float32"], [[4], "int32"]]]


def test_a_method_pipeline_runs_as_a_method_of_its_class(tmp_path):
    """cyclegan's Reader.feed: the port's Reader(...).feed() (its own `utils` module here)."""
    import tensorflow as tf
    (tmp_path / "utils.py").write_text(
        "import tensorflow as tf\n"
        "def convert2float(image):\n"
        "    return tf.image.convert_image_dtype(image, tf.float32) / 127.5 - 1.0\n")
    with tf.io.TFRecordWriter(str(tmp_path / "a.tfrecords")) as w:
        for path in jpegs(tmp_path / "imgs", 3):
            feature = {"image/file_name": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[path.name.encode()])),
                "image/encoded_image": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[path.read_bytes()]))}
            w.write(tf.train.Example(features=tf.train.Features(
                feature=feature)).SerializeToString())
    port = write_port("cyclegan_reader.py", tmp_path)
    assert any(isinstance(n, ast.ClassDef) and n.name == "Reader"
               for n in ast.parse(port.read_text()).body)
    out = run_port(port, SHAPES + f'''
import json
reader = port.Reader({str(tmp_path / "a.tfrecords")!r}, image_size=16, min_queue_examples=2,
                     batch_size=2)
print(json.dumps(shapes(reader.feed(), 2)))
''', tmp_path)
    assert json.loads(out) == [[[2, 16, 16, 3], "float32"]] * 2


def test_sfmlearner_zips_images_with_their_camera_files(tmp_path):
    """Two producers shared one seed: the port zips the image and camera-file lists and reads
    each stream in one map (DataLoader.load_train_batch), then augments each batch with a seed
    per batch."""
    data = tmp_path / "data"
    jpegs(data / "seq1", 4, size=(8, 36), name="{:06d}.jpg")
    for i in range(4):
        (data / "seq1" / f"{i:06d}_cam.txt").write_text(",".join(str(float(10 * i + k))
                                                                 for k in range(9)))
    (data / "train.txt").write_text("".join(f"seq1 {i:06d}\n" for i in range(4)))
    port = write_port("sfmlearner_data_loader.py", tmp_path)
    out = run_port(port, SHAPES + f'''
import json
loader = port.DataLoader({str(data)!r}, batch_size=2, img_height=8, img_width=12,
                         num_source=2, num_scales=4)
ds = loader.load_train_batch()
print(json.dumps(shapes(ds, 2)))
''', tmp_path)
    assert json.loads(out) == [[[[2, 8, 12, 3], "uint8"], [[2, 8, 12, 6], "uint8"],
                                [[2, 4, 3, 3], "float32"]]] * 2


def test_tf_cnn_benchmarks_preprocessor_classes(tmp_path):
    """Cifar10ImagePreprocessor.minibatch (per-image preprocessing in a loop after the batch,
    split in num_splits lists) and TestImagePreprocessor.minibatch (its data set by
    set_fake_data, which the port keeps)."""
    (tmp_path / "cnn_util.py").write_text("def tensorflow_version():\n    return 21\n")
    port = write_port("tf_cnn_benchmarks_preprocessing.py", tmp_path)
    out = run_port(port, SHAPES + '''
import json, types
import numpy as np
images = np.random.default_rng(0).integers(0, 256, (8, 3072), np.uint8)
data = types.SimpleNamespace(read_data_files=lambda subset: (images, np.arange(8) % 10),
                             num_examples_per_epoch=lambda subset: 8, depth=3, height=32,
                             width=32)
cifar = port.Cifar10ImagePreprocessor(32, 32, 4, 2, tf.float32, True, True, None, 0)
print(json.dumps(shapes(cifar.minibatch(data, "train", False, False), 1)))
test = port.TestImagePreprocessor(8, 8, 4, 2, tf.float32)
test.set_fake_data(np.zeros((8, 8, 8, 3), np.float32), np.arange(8, dtype=np.int32))
print(json.dumps(shapes(test.minibatch(None, "train", False, False), 1)))
''', tmp_path)
    cifar, test = (json.loads(ln) for ln in out.splitlines()[-2:])
    assert cifar == [[[[2, 2, 32, 32, 3], "float32"], [[2, 2], "int32"]]]
    assert test == [[[[2, 2, 8, 8, 3], "float32"], [[2, 2], "int32"]]]


def _own_modules(path: Path) -> set[str]:
    """The top-level modules a script imports that this environment does not have (its
    project's own, ``utils``, ``facenet``): the original cannot be imported without them
    either."""
    import importlib.util

    from compare.migration.source import parse
    tree = parse(path.read_text(encoding="utf-8"), str(path), path.suffix == ".ipynb").tree
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
             for a in n.names} | {n.module.split(".")[0] for n in ast.walk(tree)
                                  if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    return {n for n in names if importlib.util.find_spec(n) is None}


def test_every_port_imports_on_its_own(tmp_path):
    """Every real script's port imports in a fresh Python without --setup: module-level
    definitions its functions and their defaults read are carried (FLAGS stays unread until a
    pipeline is called, the command line unparsed). The only failure allowed is a module of
    the script's own project, which the original needs as much."""
    ports, allowed = [], {}
    for path in sorted(REAL.glob("*.py")) + sorted(REAL.glob("*.ipynb")):
        e = emit(analyze_file(path))
        if e.pipelines:
            out = tmp_path / (path.stem + "_tfdata.py")
            out.write_text(e.text)
            ports.append(str(out))
            allowed[str(out)] = sorted(_own_modules(path))
    report = run_port(Path(ports[0]), f"""
        import json, importlib.util, sys
        sys.argv = ["port"]
        out = {{}}
        for path, allowed in {allowed!r}.items():
            spec = importlib.util.spec_from_file_location("p" + str(len(out)), path)
            try:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
                out[path] = "ok"
            except ModuleNotFoundError as e:
                out[path] = "ok" if e.name.split(".")[0] in allowed else repr(e)
            except BaseException as e:
                out[path] = repr(e)
        print(json.dumps(out))
        """, tmp_path)
    result = json.loads(report.strip().splitlines()[-1])
    assert {Path(k).name: v for k, v in result.items() if v != "ok"} == {}
    assert len(result) == len(ports) > 30
