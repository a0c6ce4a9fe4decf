"""``compare.migrate``'s plans on small scripts written here, one rule per test: how data reaches
a batch call (dicts, zip, several producers, helpers, other modules), where a tf.data chain
starts, which calls are TF1-only, and what the plan says about them. Fast: nothing is run."""
from __future__ import annotations

import ast

import pytest

from compare.migrate import analyze_source


def plan(source: str):
    report = analyze_source(source, "t.py")
    for p in report.pipelines:
        ast.parse(p.chain)
    return report


def only(source: str):
    (p,) = plan(source).pipelines
    return p


HEAD = "import tensorflow as tf\n"


# -- small plan texts ---------------------------------------------------------------------------

@pytest.mark.parametrize("many,says", [
    ("", None), ("enqueue_many=False", None),
    ("enqueue_many=True", "unbatched first"),
    ("enqueue_many=flag", "when true"),
])
def test_enqueue_many_is_only_explained_when_it_unbatches(many, says):
    p = only(HEAD + "def f(files, n, flag):\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    _, v = tf.TFRecordReader().read(q)\n"
             f"    return tf.train.batch([v], n, {many})\n")
    text = "\n".join(p.legend)
    if says is None:
        assert "enqueue_many" not in text and "unbatch" not in p.chain
    else:
        assert says in text


def test_python_builtins_are_not_defined_outside_this_file():
    p = only(HEAD + "COLS = ['a', 'b']\n"
             "def f(files, n):\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    _, v = tf.TextLineReader().read(q)\n"
             "    cols = tf.decode_csv(v, [[0.], [0.]])\n"
             "    feats = dict(zip(COLS, cols))\n"
             "    n_cols = len(cols)\n"
             "    other = helper_elsewhere(cols)\n"
             "    return tf.train.batch([feats, other], n)\n")
    whats = [u.what for u in p.unresolved]
    assert whats == ["helper_elsewhere (called on each example)"]


def test_a_builtin_name_the_script_rebinds_is_its_own():
    p = only(HEAD + "def f(files, n, zip):\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    _, v = tf.TextLineReader().read(q)\n"
             "    return tf.train.batch([zip(v)], n)\n")
    assert [u.what for u in p.unresolved] == ["zip (called on each example)"]


@pytest.mark.parametrize("producer,head,shuffle", [
    ("tf.train.input_producer([path], shuffle=True)",
     "ds = tf.data.Dataset.from_tensor_slices([path])", False),
    ("tf.train.input_producer([a, b])", "ds = tf.data.Dataset.from_tensor_slices([a, b])", True),
    ("tf.train.input_producer(paths)", "ds = tf.data.Dataset.from_tensor_slices(paths)", True),
])
def test_input_producer_slices_its_one_tensor_as_it_is(producer, head, shuffle):
    p = only(HEAD + "def f(path, a, b, paths, n):\n"
             f"    q = {producer}\n"
             "    _, v = tf.TFRecordReader().read(q)\n"
             "    return tf.train.batch([v], n)\n")
    assert p.chain.split("\n")[0] == head
    assert ("ds.shuffle(" in p.chain) == shuffle
    assert p.variants[0].source.columns is False
