"""``compare.migrate --emit``: the port's text, from real TF1 scripts (no TensorFlow run here:
the slow tests in test_migrate_check.py run the ports), and the CLI's refusals."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from common.errors import InputError
from compare.migrate import analyze_file
from compare.migration.check import compare_batches
from compare.migration.checkrun import parse_call
from compare.migration.emit import TODO, emit
from tests.conftest import run_module

FIX = Path(__file__).resolve().parent / "fixtures"
REAL = FIX / "real_scripts"
ALL = sorted(REAL.glob("*.py")) + sorted(REAL.glob("*.ipynb")) + [FIX / "seed_pipeline.py"]


def port(path: Path):
    return emit(analyze_file(path))


def function(text: str, name: str) -> ast.FunctionDef:
    tree = ast.parse(text)
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, [getattr(n, "name", None) for n in tree.body]
    return found[0]


def tf_names(text: str) -> set[str]:
    """Every ``tf.a.b`` the port's code uses (comments and docstrings aside)."""
    out = set()
    for n in ast.walk(ast.parse(text)):
        if isinstance(n, ast.Attribute) and ast.unparse(n).startswith("tf.") and "(" not in \
                ast.unparse(n):
            out.add(ast.unparse(n))
    return out


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_real_script_gives_a_module_that_parses(path):
    e = port(path)
    ast.parse(e.text)  # imports and runs nothing: the slow tests run it
    assert len(e.todos) == e.text.count(TODO)
    names = tf_names(e.text)
    for name in names:  # tf.compat.v1 only where a TODO says what to do instead
        if name.startswith("tf.compat.v1.") and name.count(".") > 3:
            assert any(name in what for _, what in e.todos), name
    assert not {n for n in names if n.startswith(("tf.train.", "tf.Session"))
                and not n.startswith(("tf.train.Example", "tf.train.Feature"))}


def test_cifar10_both_pipelines_keep_their_names_parameters_and_arguments():
    e = port(REAL / "cifar10_input.py")
    assert [(p.name, p.params, p.complete, p.returns) for p in e.pipelines] == [
        ("distorted_inputs", ("data_dir", "batch_size"), True, True),
        ("inputs", ("eval_data", "data_dir", "batch_size"), True, True)]
    src = ast.unparse(function(e.text, "distorted_inputs"))
    assert "FixedLengthRecordDataset(f, 3073)" in src
    assert "ds.shuffle(min_queue_examples)" in src  # min_after_dequeue is the buffer
    assert "num_parallel_calls=cpu_count()" in src  # num_threads
    assert "batch(batch_size, drop_remainder=True)" in src
    # per example: the script's decoding and augmentation, stateless, one seed per draw
    for call in ("tf.io.decode_raw", "tf.image.stateless_random_crop",
                 "tf.image.stateless_random_flip_left_right",
                 "tf.image.stateless_random_brightness", "tf.image.per_image_standardization"):
        assert call in src, call
    assert src.count("_draws.seed()") == 4
    # per batch: the helper's reshape of the labels to (batch,)
    assert "tf.reshape(label_batch, [batch_size])" in src
    evaluation = ast.unparse(function(e.text, "inputs"))
    assert "resize_with_crop_or_pad" in evaluation and "random" not in evaluation
    assert "ds.shuffle(min_queue_examples)" not in evaluation  # tf.train.batch: no shuffle
    assert [what for _, what in e.todos] == [
        "dropped tf.summary.image('images', images): write input summaries in the training "
        "loop (a tf.summary writer and a step)"] * 2


def test_fully_connected_reader_reads_tfrecords_and_keeps_the_removed_mnist_constant():
    e = port(REAL / "fully_connected_reader.py")
    src = ast.unparse(function(e.text, "inputs"))
    assert "tf.data.TFRecordDataset" in src and "tf.io.parse_single_example" in src
    assert "set_shape([784])" in src  # mnist.IMAGE_PIXELS: the module is gone from TF 2
    assert "ds.repeat(num_epochs)" in src and "ds.shuffle(1000)" in src
    assert "FLAGS.train_dir" in src and "FLAGS = None" in e.text
    assert not e.todos


def test_seed_becomes_pipeline_with_its_helpers_copied():
    e = port(FIX / "seed_pipeline.py")
    assert [(p.name, p.original, p.output) for p in e.pipelines] == [
        ("pipeline", "<module>", "augmented")]
    assert function(e.text, "pipeline").args.args == []
    for helper in ("augmentbody", "coloraugment", "resize_image", "aspect1", "aspect2"):
        function(e.text, helper)
    assert "jit_scope" not in e.text and "matplotlib" not in e.text
    assert "_resize_images_v1(image, newsize)" in e.text  # TF1's pixel centres kept
    assert "stateless_shuffle" in e.text
    assert not e.todos


def test_a_seed_the_script_shares_stays_shared():
    """pix2pix flips and crops input and target with one seed: one seed per example for all."""
    e = port(REAL / "pix2pix.py")
    assert "_draws.seed(seed)" in e.text
    transform = next(n for n in ast.walk(ast.parse(e.text))
                     if isinstance(n, ast.FunctionDef) and n.name == "transform")
    assert "_draws.seed()" not in ast.unparse(transform)
    assert "with _draws.example(seed):" in e.text  # the map function gives each example a seed


def test_an_unknown_source_is_a_todo_and_raises_when_called():
    e = port(REAL / "im2txt_inputs.py")
    first = e.pipelines[0]
    assert not first.complete
    src = ast.unparse(function(e.text, first.name))
    assert "raise NotImplementedError" in src
    assert any("made outside this file" in what for _, what in e.todos)


def test_a_method_pipeline_becomes_a_method_of_a_class_of_the_same_name():
    """cyclegan's Reader.feed reads self.reader (made in __init__) and calls self._preprocess:
    the port's Reader keeps __init__ without the TF1 reader, feed as a tf.data method, and
    _preprocess copied."""
    e = port(REAL / "cyclegan_reader.py")
    assert [(p.name, p.complete) for p in e.pipelines] == [("Reader.feed", True)]
    tree = ast.parse(e.text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Reader")
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    assert set(methods) == {"__init__", "feed", "_preprocess"}
    assert "TFRecordReader" not in ast.unparse(methods["__init__"])
    assert "self.min_queue_examples = min_queue_examples" in ast.unparse(methods["__init__"])
    feed = ast.unparse(methods["feed"])
    assert "self._preprocess(image)" in feed and "ds.shuffle(self.min_queue_examples)" in feed


# -- held-out real scripts (the evaluation's problems, fixed) ----------------------------------

def inner_fn(f: ast.FunctionDef, name: str) -> str:
    return ast.unparse(next(n for n in ast.walk(f) if isinstance(n, ast.FunctionDef)
                            and n.name == name))


def test_resnet_cifar_binds_the_record_and_returns_what_it_enqueued():
    """dequeue_many(batch_size) of a queue filled with [image, label]: the map takes the record,
    returns (image, label); train and eval (if mode == 'train') are one function."""
    e = port(REAL / "resnet_cifar_input.py")
    assert [(p.name, p.complete, p.returns) for p in e.pipelines] == [("build_input", True, True)]
    build = function(e.text, "build_input")
    example = inner_fn(build, "build_input_example")
    assert "value = example" in example and "return (image, label)" in example
    assert "return batch_size" not in ast.unparse(build)
    src = ast.unparse(build)
    assert "if mode == 'train':" in src and "ds.shuffle(8 * batch_size)" in src
    assert "tf.compat.v1.sparse_to_dense" in inner_fn(build, "build_input_batch")


def test_magenta_padded_batch_binds_every_name_before_use():
    e = port(REAL / "magenta_sequence_example_lib.py")
    assert [p.name for p in e.pipelines] == ["get_padded_batch"] and e.pipelines[0].complete
    build = function(e.text, "get_padded_batch")
    src = ast.unparse(build)
    assert "raise ValueError('`num_enqueuing_threads` must be at least 2" in src
    assert "ds.shuffle(min_after_dequeue)" in src and "padded_batch(batch_size" in src
    for example in (n for n in ast.walk(build) if isinstance(n, ast.FunctionDef)
                    and n.name == "get_padded_batch_example"):
        body = ast.unparse(example)
        assert "serialized_example = example" in body and "dequeue" not in body
        assert body.index("input_tensors = [") < body.index("logging.info(input_tensors)")


def test_cloudml_census_is_one_input_fn_whose_shuffle_follows_its_argument():
    e = port(REAL / "cloudml_census_estimator_model.py")
    assert [(p.name, p.complete) for p in e.pipelines] == [("input_fn", True)]
    assert "input_fn_2" not in e.text
    tree = function(e.text, "input_fn")
    shuffles = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                and ast.unparse(n.func) == "ds.shuffle"]
    assert [ast.unparse(n.args[0]) for n in shuffles] == ["ds.cardinality()",
                                                          "2 * batch_size + 1"]
    guarded = {id(c) for n in ast.walk(tree) if isinstance(n, ast.If)
               and ast.unparse(n.test) == "shuffle" for c in ast.walk(n)}
    assert all(id(n) in guarded for n in shuffles)  # shuffle=False reads in file order
    assert "_index_table_from_tensor(" in e.text  # the label table, on TF 2's tables


def test_began_per_batch_resize_and_transpose_after_the_batch():
    e = port(REAL / "began_data_loader.py")
    (p,) = e.pipelines
    assert p.complete and p.returns and not e.todos
    batch = inner_fn(function(e.text, "get_loader"), "get_loader_batch")
    assert "_resize_images_v1(queue, [scale_size, scale_size], method='nearest')" in batch
    assert "tf.transpose(queue, [0, 3, 1, 2])" in batch


def test_facenet_triplet_copies_are_one_and_the_batch_stops_before_the_model():
    e = port(REAL / "facenet_train_tripletloss.py")
    main = function(e.text, "main")
    example, batch = inner_fn(main, "main_example"), inner_fn(main, "main_batch")
    assert "images_and_labels" not in ast.unparse(main)
    assert example.rstrip().endswith("return (images, label)")
    assert "filenames, label = example" in example
    assert batch.rstrip().endswith("return (image_batch, labels_batch)")
    for consumer in ("network.inference", "Saver", "FileWriter", "triplet_loss", "sess"):
        assert consumer not in ast.unparse(main), consumer
    assert not e.pipelines[0].complete  # fed from Python: the generator is to be written


def test_py2_resnet_keeps_its_star_import_and_one_copy():
    e = port(REAL / "py2_resnet_train_imagenet.py")
    assert "from synset import *" in e.text  # load_data reads synset_map from it
    assert "import absl.flags" in e.text and "FLAGS = absl.flags.FLAGS" in e.text
    assert "absl.flags.DEFINE_string('data_dir'" in e.text
    example = inner_fn(function(e.text, "distorted_inputs"), "distorted_inputs_example")
    assert "for thread_id" not in example and "thread_id = 0" in example
    assert example.rstrip().endswith("return (image, label_index)")


def test_notebook_dataset_keeps_its_chain_without_leftover_statements():
    e = port(REAL / "aymericdamien_tensorflow_dataset_api.ipynb")
    (p,) = e.pipelines
    assert p.complete and not e.todos and p.output == "(X, Y)"
    src = ast.unparse(function(e.text, "pipeline"))
    assert "dataset" not in src.replace("read_data_sets", "")
    assert "_mnist_read_data_sets('/tmp/data/', one_hot=True)" in src
    assert "ds.prefetch(batch_size)" in src


def test_pipeline_methods_become_classes_of_the_same_name():
    e = port(REAL / "tf_cnn_benchmarks_preprocessing.py")
    cifar = next(p for p in e.pipelines if p.name == "Cifar10ImagePreprocessor.minibatch")
    assert cifar.complete
    tree = ast.parse(e.text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef)
               and n.name == "Cifar10ImagePreprocessor")
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    assert {"__init__", "minibatch", "preprocess"} <= methods
    minibatch = next(n for n in cls.body if isinstance(n, ast.FunctionDef)
                     and n.name == "minibatch")
    batch = inner_fn(minibatch, "minibatch_batch")
    assert "self.preprocess(raw_image)" in batch and batch.rstrip().endswith(
        "return (images, labels)")
    test = next(n for n in tree.body if isinstance(n, ast.ClassDef)
                and n.name == "TestImagePreprocessor")
    assert "set_fake_data" in {n.name for n in test.body if isinstance(n, ast.FunctionDef)}
    record = next(p for p in e.pipelines if p.name == "RecordInputImagePreprocessor.minibatch")
    assert not record.complete  # its RecordInput branch's per-record code is not lifted
    sfm = port(REAL / "sfmlearner_data_loader.py")
    cls = next(n for n in ast.parse(sfm.text).body if isinstance(n, ast.ClassDef)
               and n.name == "DataLoader")
    assert {"__init__", "load_train_batch", "unpack_image_sequence", "data_augmentation",
            "get_multi_scale_intrinsics"} <= {n.name for n in cls.body
                                               if isinstance(n, ast.FunctionDef)}


# -- the CLI ----------------------------------------------------------------------------------

def test_emit_writes_the_port_and_keeps_an_existing_file(tmp_path):
    out = tmp_path / "port.py"
    r = run_module("compare.migrate", str(REAL / "cifar10_input.py"), "--emit", str(out))
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stdout and "2 TODO(migrate)" in r.stdout
    assert out.read_text().startswith('"""tf.data port')
    out.write_text("# mine\n")
    r = run_module("compare.migrate", str(REAL / "cifar10_input.py"), "--emit", str(out))
    assert r.returncode == 2 and r.stderr.strip().endswith("exists; pass --overwrite to replace it")
    assert len(r.stderr.strip().splitlines()) == 1 and out.read_text() == "# mine\n"
    r = run_module("compare.migrate", str(REAL / "cifar10_input.py"), "--emit", str(out),
                   "--overwrite")
    assert r.returncode == 0 and "def distorted_inputs" in out.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["port.py"]  # no temp file left


def test_emit_refuses_the_script_itself_and_a_non_py_name(tmp_path):
    script = tmp_path / "s.py"
    script.write_bytes((REAL / "cifar10_input.py").read_bytes())
    for target in (script, tmp_path / "port.txt"):
        r = run_module("compare.migrate", str(script), "--emit", str(target))
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert script.read_bytes() == (REAL / "cifar10_input.py").read_bytes()


@pytest.mark.parametrize("args, message", [
    (["--check"], "--check needs --call"),
    (["--check", "--call", "nosuch(1)"], "nosuch is not a pipeline function of the port (it "
                                         "has: distorted_inputs, inputs)"),
    (["--check", "--call", "inputs(x, 1)"], "arguments must be literals"),
    (["--check", "--call", "inputs"], "write it as FUNC(ARGS)"),
])
def test_check_refuses_a_bad_call_before_running_anything(tmp_path, args, message):
    r = run_module("compare.migrate", str(REAL / "cifar10_input.py"), *args, "--out",
                   str(tmp_path / "rep"))
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "rep").exists()


def test_parse_call():
    assert parse_call("inputs(True, 8, num_epochs=None)") == ("inputs", [True, 8],
                                                              {"num_epochs": None})
    with pytest.raises(InputError):
        parse_call("inputs(FLAGS.x)")


# -- comparing batches ------------------------------------------------------------------------

def side(structure, *components):
    comps = [{"shape": list(c.shape), "dtype": str(c.dtype)} for c in components]
    return {"structure": structure, "components": comps}, [list(components)]


def test_compare_batches_passes_equal_batches_and_names_each_difference():
    img = np.linspace(0, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    lab = np.array([1, 2], np.int32)
    rows = compare_batches(side("(t, t)", img, lab), side("(t, t)", img + 1e-6, lab))
    assert all(r.ok for r in rows), rows
    rows = compare_batches(side("(t, t)", img, lab), side("(t, t)", img, lab.astype(np.int64)))
    assert [r.what for r in rows if not r.ok] == ["[1] dtype"]
    rows = compare_batches(side("(t, t)", img, lab), side("(t, t)", img * 2, lab))
    assert [r.what for r in rows if not r.ok] == ["[0] value range", "[0] values"]
    rows = compare_batches(side("(t, t)", img, lab), side("t", img))
    assert [r.what for r in rows if not r.ok] == ["element structure"]


def test_compare_batches_takes_padded_batches_one_by_one():
    """dynamic_pad batches differ in length from batch to batch: compared batch by batch, the
    shape row gives each batch's shape, and no exception."""
    def padded(*lengths, off=0.0):
        batches = [[np.full((2, t, 3), float(t) + off, np.float32)] for t in lengths]
        side = {"structure": "'tensor'", "components": [{"shape": [2, lengths[0], 3],
                                                         "dtype": "float32"}]}
        return side, batches
    rows = compare_batches(padded(4, 7, 5), padded(4, 7, 5))
    assert all(r.ok for r in rows)
    shape = next(r for r in rows if r.what == "[0] shape")
    assert shape.original == "per batch: (2, 4, 3), (2, 7, 3), (2, 5, 3)"
    rows = compare_batches(padded(4, 7, 5), padded(4, 6, 5))
    assert [r.what for r in rows if not r.ok] == ["[0] shape"]
    rows = compare_batches(padded(4, 7), padded(4, 7, off=1.0))
    assert [r.what for r in rows if not r.ok] == ["[0] value range", "[0] values"]


def test_check_table_writes_long_cells_in_full():
    from compare.migration.check import CheckResult, Row
    why = "NameError in a traced function: NameError: name 'value' is not defined"
    table = CheckResult([Row("port runs", "yes", why, False)], {}, Path(".")).table()
    assert f"  port: {why}" in table and "(below)" in table.splitlines()[1]
