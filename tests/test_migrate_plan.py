"""``compare.migrate``'s per-pipeline plans and the input it now reads, on small scripts written
here: every batching argument honoured, per-example augmentation and shared seeds kept, nothing
invented, notebooks, Python 2, snippets, the size limit, and the new constructs."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from compare.migrate import analyze_file, analyze_source
from compare.migration import pipelines
from compare.migration.flow import Budget
from compare.migration.scan import scan
from compare.migration.source import python2_rewrite
from compare.migration.values import Module
from tests.conftest import assert_one_line_error, run_module


def plan(source: str):
    report = analyze_source(source, "t.py")
    for p in report.pipelines:
        ast.parse(p.chain)
    return report


def only(source: str):
    (p,) = plan(source).pipelines
    return p


def rules(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.rule.id) for f in analyze_source(source, "t.py").findings]


READ = ("import tensorflow as tf\n"
        "def inputs(files, training, n, flag):\n"
        "    q = tf.train.string_input_producer(files, {producer})\n"
        "    r = tf.TFRecordReader()\n"
        "    _, rec = r.read(q)\n"
        "    x = tf.parse_single_example(rec, FEATURES)\n"
        "    return {batch}\n")


def pipe(producer: str = "", batch: str = "tf.train.batch([x], n)"):
    return only(READ.format(producer=producer, batch=batch))


# -- every argument honoured ------------------------------------------------------------------

@pytest.mark.parametrize("producer,expect,absent", [
    ("", ["ds = ds.shuffle(ds.cardinality())\nds = ds.repeat()"], []),
    ("shuffle=False, num_epochs=3", ["ds = ds.repeat(3)"], [".shuffle("]),
    ("shuffle=training, seed=7",
     ["if training:\n    ds = ds.shuffle(ds.cardinality(), seed=7)\nds = ds.repeat()"], []),
    ("num_epochs=n", ["ds = ds.repeat(n)"], []),
])
def test_producer_shuffle_and_epochs(producer, expect, absent):
    chain = pipe(producer).chain
    for e in expect:
        assert e in chain
    for a in absent:
        assert a not in chain


@pytest.mark.parametrize("batch,expect", [
    ("tf.train.batch([x], n)", "ds = ds.batch(n, drop_remainder=True)"),
    ("tf.train.batch([x], n, allow_smaller_final_batch=True)",
     "ds = ds.batch(n, drop_remainder=False)"),
    ("tf.train.batch([x], n, allow_smaller_final_batch=flag)",
     "ds = ds.batch(n, drop_remainder=not flag)"),
    ("tf.train.batch([x], n, dynamic_pad=True)", "ds = ds.padded_batch(n, drop_remainder=True)"),
    ("tf.train.batch([x], n, dynamic_pad=flag)",
     "if flag:\n    ds = ds.padded_batch(n, drop_remainder=True)\nelse:\n"
     "    ds = ds.batch(n, drop_remainder=True)"),
    ("tf.train.batch([x], n, enqueue_many=True)",
     "ds = ds.unbatch()\nds = ds.batch(n, drop_remainder=True)"),
    ("tf.train.batch([x], n, num_threads=6)", "ds = ds.map(inputs_example, num_parallel_calls=6)"),
    ("tf.train.shuffle_batch([x], n, capacity=500, min_after_dequeue=100, seed=3)",
     "ds = ds.shuffle(100, seed=3)\nds = ds.batch(n, drop_remainder=True)"),
    ("tf.train.maybe_batch([x], keep_input=flag, batch_size=n)", "ds = ds.filter("),
])
def test_batch_arguments(batch, expect):
    assert expect in pipe(batch=batch).chain


def test_batch_join_over_copies_is_one_parallel_map():
    p = only("import tensorflow as tf\n"
             "def inputs(files, n, threads):\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    r = tf.TFRecordReader()\n"
             "    _, rec = r.read(q)\n"
             "    pairs = []\n"
             "    for i in range(threads):\n"
             "        image = tf.image.decode_jpeg(rec)\n"
             "        pairs.append([image])\n"
             "    return tf.train.batch_join(pairs, n)\n")
    assert "ds = ds.map(inputs_example, num_parallel_calls=threads)" in p.chain
    assert "interleave" not in p.chain
    assert p.variants[0].batch().copies.text == "threads"


def test_augmentation_stays_per_example_and_shared_seeds_stay_shared():
    p = only("import tensorflow as tf\n"
             "def inputs(files, n, s):\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    r = tf.WholeFileReader()\n"
             "    _, data = r.read(q)\n"
             "    image = tf.image.decode_png(data)\n"
             "    mask = tf.image.decode_png(data)\n"
             "    image = tf.image.random_flip_left_right(image, seed=s)\n"    # 8
             "    mask = tf.image.random_flip_left_right(mask, seed=s)\n"      # 9
             "    image = tf.image.random_brightness(image, 0.2)\n"            # 10
             "    return tf.train.shuffle_batch([image, mask], n, 100, 50)\n")
    chain = p.chain.split("\n")
    map_at = next(i for i, ln in enumerate(chain) if "map(inputs_example" in ln)
    batch_at = next(i for i, ln in enumerate(chain) if ".batch(" in ln and "random" not in ln)
    assert map_at < batch_at  # the draws happen in the per-example map, before batching
    draws = {d.line: d for d in p.variants[0].maps()[0].random}
    assert set(draws) == {8, 9, 10}
    assert draws[8].shares_seed_with == (9,) and draws[9].shares_seed_with == (8,)
    assert draws[10].seed is None and draws[10].shares_seed_with == ()
    assert "tf.data.Dataset.random(seed=None).batch(2)" in p.chain


def test_each_pipeline_on_its_own_in_the_callers_names():
    report = plan("import tensorflow as tf\n"
                  "def batcher(image, n, shuffle):\n"
                  "    if shuffle:\n"
                  "        return tf.train.shuffle_batch([image], n, 100, 10)\n"
                  "    return tf.train.batch([image], n)\n"
                  "def read(queue):\n"
                  "    r = tf.WholeFileReader()\n"
                  "    _, v = r.read(queue)\n"
                  "    return tf.image.decode_jpeg(v)\n"
                  "def train_input(data_files, n):\n"
                  "    image = read(tf.train.string_input_producer(data_files))\n"
                  "    image = tf.random_crop(image, [24, 24, 3])\n"
                  "    return batcher(image, n, shuffle=True)\n"
                  "def eval_input(data_files, n):\n"
                  "    image = read(tf.train.string_input_producer(data_files, shuffle=False))\n"
                  "    image = tf.image.resize_image_with_crop_or_pad(image, 24, 24)\n"
                  "    return batcher(image, n, shuffle=False)\n"
                  "def main():\n"
                  "    return train_input(['a'], 2), eval_input(['b'], 2)\n")
    by_fn = {p.function: p for p in report.pipelines}
    assert set(by_fn) == {"train_input", "eval_input"}  # main and the helpers own none
    train, evaluation = by_fn["train_input"], by_fn["eval_input"]
    assert train.line == 4 and evaluation.line == 5
    assert "from_tensor_slices(data_files)" in train.chain  # the script's own name
    assert "shuffle(10)" in train.chain and "shuffle(10)" not in evaluation.chain
    train_calls = {c for s in train.variants[0].maps()[0].steps for c in s.calls}
    eval_calls = {c for s in evaluation.variants[0].maps()[0].steps for c in s.calls}
    assert "tensorflow.random_crop" in train_calls - eval_calls
    assert "tensorflow.image.resize_image_with_crop_or_pad" in eval_calls - train_calls


# -- nothing invented ---------------------------------------------------------------------------

def test_unknown_reader_is_unresolved_not_guessed():
    p = only("import tensorflow as tf\n"
             "def inputs(reader, files, n):\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    _, v = reader.read(q)\n"
             "    return tf.train.batch([v], n)\n")
    (u,) = p.unresolved
    assert u.line == 4 and "reader" in u.what and u.why
    assert "TFRecordDataset" not in p.chain and "ds.flat_map(...)" in p.chain


def test_no_input_pipeline_no_chain():
    report = plan("import tensorflow as tf\n"
                  "x = tf.placeholder(tf.float32, [None, 3])\n"
                  "with tf.Session() as sess:\n"
                  "    sess.run(x * 2, feed_dict={x: [[1, 2, 3]]})\n")
    assert report.pipelines == []
    assert "feed_dict" in report.plan and "ds = " not in report.to_text()
    assert [r for _, r in rules(
        "import tensorflow as tf\nx = tf.placeholder(tf.float32)\nwith tf.Session() as s:\n"
        "    s.run(x, feed_dict={x: 1})\n")] == ["placeholder", "session", "feed_dict"]


def test_a_budget_that_runs_out_says_so():
    tree = ast.parse(READ.format(producer="", batch="tf.train.batch([x], n)"))
    mod = Module(tree, scan(tree, READ))
    found, notes = pipelines.build(mod, Budget(2))
    assert found == [] and "stopped early" in notes[0]


# -- new constructs -------------------------------------------------------------------------------

@pytest.mark.parametrize("call,rule", [
    ("tf.random_normal([2])", "random_normal"), ("tf.random.normal([2])", "random_normal"),
    ("tf.truncated_normal([2])", "truncated_normal"), ("tf.multinomial(l, 2)", "multinomial"),
    ("tf.random.categorical(l, 2)", "categorical"), ("tf.random_gamma([2], 1.)", "random_gamma"),
    ("tf.random.poisson(1., [2])", "random_poisson"), ("tf.set_random_seed(1)", "set_random_seed"),
    ("tf.contrib.data.TFRecordDataset(f)", "contrib_data"),
    ("tf.compat.v1.data.make_one_shot_iterator(d)", "make_iterator"),
    ("d.make_initializable_iterator()", "make_iterator"),
])
def test_new_constructs_are_found(call, rule):
    assert rules(f"import tensorflow as tf\nx = {call}\n") == [(2, rule)]


def test_tf_contrib_data_pipeline_becomes_tf_data():
    p = only("import tensorflow as tf\n"
             "def inputs(files):\n"
             "    d = tf.contrib.data.TFRecordDataset(files)\n"
             "    d = d.map(parse, num_threads=4, output_buffer_size=100)\n"
             "    d = d.batch(32)\n"
             "    return d.make_one_shot_iterator().get_next()\n")
    assert p.kind == "tf.data" and p.line == 5
    assert p.chain.split("\n")[:4] == ["ds = tf.data.TFRecordDataset(files)",
                                       "ds = ds.map(parse, num_parallel_calls=4)",
                                       "ds = ds.prefetch(100)", "ds = ds.batch(32)"]


def test_feeder_thread_becomes_from_generator():
    source = ("import threading\nimport tensorflow as tf\n"
              "class Feeder(object):\n"
              "    def __init__(self):\n"
              "        self.x = tf.placeholder(tf.float32, shape=[3])\n"
              "        self.q = tf.FIFOQueue(10, [tf.float32], shapes=[[3]])\n"
              "        self.op = self.q.enqueue([self.x])\n"
              "    def loop(self, sess):\n"
              "        for row in rows():\n"
              "            sess.run(self.op, feed_dict={self.x: row})\n"
              "    def start(self, sess):\n"
              "        threading.Thread(target=self.loop, args=(sess,)).start()\n"
              "    def batch(self, n):\n"
              "        return self.q.dequeue_many(n)\n")
    report = plan(source)
    assert (12, "feeder_thread") in [(f.line, f.rule.id) for f in report.findings]
    (p,) = report.pipelines
    assert p.function == "Feeder.batch" and p.kind == "feeding"
    feeder = p.variants[0].source.feeder
    assert feeder.function == "Feeder.loop" and feeder.thread and feeder.feeds == [(10, "row")]
    assert p.chain.startswith("ds = tf.data.Dataset.from_generator(loop_x, output_signature="
                              "tf.TensorSpec(shape=[3], dtype=tf.float32))")


def test_readers_from_attributes_and_parameters_are_found():
    assert rules("import tensorflow as tf\n"
                 "class R:\n"
                 "    def __init__(self):\n"
                 "        self.reader = tf.TFRecordReader()\n"
                 "    def feed(self, q):\n"
                 "        return self.reader.read(q)\n") == [(4, "tfrecord_reader"),
                                                            (6, "reader.read")]
    assert rules("import tensorflow as tf\n"
                 "def f(dataset, files):\n"
                 "    q = tf.train.string_input_producer(files)\n"
                 "    return dataset.reader().read(q)\n") == [(3, "string_input_producer"),
                                                             (4, "reader.read")]


# -- what is read: Python 2, notebooks, snippets, size --------------------------------------------

PY2 = ("import tensorflow as tf\n"
       "q = tf.train.string_input_producer(files)\n"
       "print 'queue', q\n"
       "try:\n"
       "    x = 1\n"
       "except ValueError, e:\n"
       "    print >>sys.stderr, `e`\n"
       "mode = 0777 + 10L\n"
       "s = ur'raw'\n"
       "exec 'y = 1'\n"
       "if a <> b: print 'ne'\n"
       "raise ValueError, 'no'\n"
       "r = tf.TFRecordReader()\n")


def test_python2_syntax_is_rewritten_in_place():
    text, done = python2_rewrite(PY2)
    assert text.count("\n") == PY2.count("\n")
    ast.parse(text)
    assert done == {"print statement": 3, "except E, e": 1, "backtick repr": 1,
                    "octal literal": 1, "long literal": 1, "ur'' string": 1, "exec statement": 1,
                    "<> operator": 1, "raise E, message": 1}
    report = analyze_source(PY2, "py2.py")
    assert [(f.line, f.rule.id) for f in report.findings] == [(2, "string_input_producer"),
                                                              (13, "tfrecord_reader")]
    assert "Python 2" in report.notes[0] and "print statement x3" in report.notes[0]


def test_python2_except_without_a_space_after_the_comma():
    """``except Exception,e:`` (no space, as a real script wrote it) and a parenthesised
    tuple of exceptions both become ``except ... as e``."""
    text, done = python2_rewrite("try:\n    x = 1\nexcept Exception,e:\n    pass\n"
                                 "try:\n    x = 1\nexcept (KeyError,ValueError),err:\n"
                                 "    print err\n")
    ast.parse(text)
    assert "except Exception as e:" in text and "except (KeyError,ValueError) as err:" in text
    assert done["except E, e"] == 2


def test_python2_tabs_mixed_with_spaces():
    source = ("import tensorflow as tf\nif x:\n        y = 1\n\tz = tf.train.batch(a, 2)\n")
    assert [(f.line, f.rule.id) for f in analyze_source(source, "t.py").findings] == [
        (4, "batch")]


def _notebook(tmp_path: Path, cells: list) -> Path:
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 2,
                                "metadata": {}}))
    return path


def _code(src: str) -> dict:
    return {"cell_type": "code", "source": src.splitlines(True), "metadata": {}, "outputs": []}


def test_notebook_code_cells_with_magics(tmp_path):
    path = _notebook(tmp_path, [
        {"cell_type": "markdown", "source": ["# tf.train.batch in prose\n"], "metadata": {}},
        _code("%matplotlib inline\n!pip install x\nimport tensorflow as tf\n"),
        _code("%%bash\necho tf.train.batch\n"),
        _code("files = ['a.jpg']\nq = tf.train.string_input_producer(files)\n"
              "r = tf.WholeFileReader()\n_, v = r.read(q)\n"
              "x = tf.train.batch([tf.image.decode_jpeg(v)], 4)\n")])
    report = analyze_file(path)
    assert [(f.cell, f.line, f.rule.id) for f in report.findings] == [
        (4, 2, "string_input_producer"), (4, 3, "whole_file_reader"), (4, 4, "reader.read"),
        (4, 5, "batch")]
    (p,) = report.pipelines
    assert (p.cell, p.line) == (4, 5)
    assert "c4:2" in report.to_text()
    doc = json.loads(run_module("compare.migrate", str(path), "--json", timeout=60).stdout)
    assert doc["pipelines"][0]["cell"] == 4 and doc["findings"][0]["cell"] == 4


@pytest.mark.parametrize("content,needle", [
    ("{not json", "not a notebook"),
    (json.dumps({"cells": [{"cell_type": "markdown", "source": "x"}]}), "no code cells"),
    (json.dumps([1, 2]), "not a notebook"),
])
def test_bad_notebooks_are_one_line_errors(tmp_path, content, needle):
    path = tmp_path / "bad.ipynb"
    path.write_text(content)
    assert_one_line_error(run_module("compare.migrate", str(path), timeout=60), "bad.ipynb",
                          needle)


def test_a_snippet_without_import_is_read_as_tensorflow():
    report = analyze_source("q = tf.train.string_input_producer(['a'])\n"
                            "b = tf.train.batch([q.dequeue()], 2)\n", "snippet.py")
    assert [f.rule.id for f in report.findings] == ["string_input_producer", "batch",
                                                     "queue.method"]
    assert any("import tensorflow as tf" in n for n in report.notes)
    assert analyze_source("def f(tf):\n    return tf.train.batch(x, 4)\n", "t.py").findings == []


def test_size_limit_message_shows_the_size(tmp_path):
    path = tmp_path / "huge.py"
    with open(path, "wb") as f:  # sparse: 20 MiB and 10 KiB of nothing
        f.truncate(20 * 2**20 + 10 * 1024)
    line = assert_one_line_error(run_module("compare.migrate", str(path), timeout=60), "huge.py")
    assert "20.1 MiB is too large for a script (limit 20 MiB)" in line


def test_pitfalls_only_for_constructs_present():
    plain = analyze_source("import tensorflow as tf\nx = tf.random_crop(y, [2])\n", "t.py")
    assert plain.findings[0].pitfalls == ()  # no XLA: the XLA seed pitfall does not apply
    text = plain.to_text()
    assert "pitfalls we measured" not in text and text.count("See also:") == 1


def test_the_scan_benchmark_runs():
    """Only that it runs and reports every kind; its timings are read by people, not asserted."""
    proc = run_module("benchmarks.migrate_scan", "--sizes", "5", timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [ln.split() for ln in proc.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == ["pipelines", "long_string", "small_functions"]
    assert all(float(r[3]) >= 0 for r in rows)


def test_readers_made_in_a_comprehension_read_in_parallel():
    """The TF1 reading guide's pattern: one reader per copy, all on one filename queue."""
    p = only("import tensorflow as tf\n"
             "def read(q):\n"
             "    _, line = tf.TextLineReader().read(q)\n"
             "    return tf.decode_csv(line, record_defaults=[[0.]])\n"
             "def inputs(files, n, threads):\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    copies = [read(q) for _ in range(threads)]\n"
             "    return tf.train.shuffle_batch_join(copies, n, 200, 100)\n")
    assert ("ds = ds.interleave(tf.data.TextLineDataset, cycle_length=threads, "
            "num_parallel_calls=tf.data.AUTOTUNE)") in p.chain
    assert "ds = ds.map(inputs_example, num_parallel_calls=threads)" in p.chain


def test_read_up_to_and_compressed_records():
    p = only("import tensorflow as tf\n"
             "q = tf.train.string_input_producer(files)\n"
             "r = tf.TFRecordReader(options=tf.python_io.TFRecordOptions(\n"
             "    tf.python_io.TFRecordCompressionType.GZIP))\n"
             "_, s = r.read_up_to(q, 64)\n"
             "b = tf.train.batch([s], 32, enqueue_many=True)\n")
    assert ('ds = ds.flat_map(lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"))\n'
            "ds = ds.batch(64)\nds = ds.unbatch()\nds = ds.batch(32, drop_remainder=True)"
            ) in p.chain
    unknown = only("import tensorflow as tf\n"
                   "q = tf.train.string_input_producer(files)\n"
                   "_, s = tf.TFRecordReader(options=opts).read(q)\n"
                   "b = tf.train.batch([s], 32)\n")
    assert [u.line for u in unknown.unresolved] == [3]


def test_a_producer_queue_dequeued_directly():
    """The PTB reader: a range producer's dequeue indexes a tensor made once, outside the map."""
    p = only("import tensorflow as tf\n"
             "def producer(raw, batch_size, steps):\n"
             "    data = tf.reshape(tf.convert_to_tensor(raw), [batch_size, -1])\n"
             "    i = tf.train.range_input_producer(10, shuffle=False).dequeue()\n"
             "    x = tf.strided_slice(data, [0, i * steps], [batch_size, (i + 1) * steps])\n"
             "    return x\n")
    assert p.chain.split("\n")[:3] == ["ds = tf.data.Dataset.range(10)", "ds = ds.repeat()",
                                       "ds = ds.map(producer_example, "
                                       "num_parallel_calls=tf.data.AUTOTUNE)"]
    assert [s.line for s in p.variants[0].maps()[0].steps] == [5]


def test_a_planner_failure_is_a_note_not_a_crash(monkeypatch):
    def boom(*args, **kwargs):
        raise KeyError("unforeseen")
    monkeypatch.setattr(pipelines, "build", boom)
    report = analyze_source(READ.format(producer="", batch="tf.train.batch([x], n)"), "t.py")
    assert report.pipelines == [] and report.findings
    assert "Planning the pipelines failed" in report.notes[-1] and "KeyError" in report.notes[-1]
