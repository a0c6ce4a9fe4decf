"""The emitter's rules on small synthetic TF1 scripts written here (no TensorFlow run): what the
map function binds and returns, copy loops, where per-batch code stops, one function for
pipelines built under a run-time condition, setup pruning, binding order, methods as classes,
and the name-binding check itself."""
from __future__ import annotations

import ast
import textwrap

import pytest

from compare.migrate import analyze_source
from compare.migration.bindings import reads_unbound
from compare.migration.emit import TODO, emit


def port(src: str):
    return emit(analyze_source(textwrap.dedent(src), "synthetic.py"))


def fn(text: str, name: str, cls: str = "") -> ast.FunctionDef:
    body = ast.parse(text).body
    if cls:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    found = [n for n in body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, [getattr(n, "name", None) for n in body]
    return found[0]


def inner(f: ast.FunctionDef, name: str) -> str:
    return ast.unparse(next(n for n in ast.walk(f) if isinstance(n, ast.FunctionDef)
                            and n.name == name))


# -- the name-binding check -------------------------------------------------------------------

@pytest.mark.parametrize("code, bound, missing", [
    ("y = x + 1", set(), {"x"}),
    ("y = x + 1", {"x"}, set()),
    ("if c:\n    x = 1\nz = x", {"c"}, set()),  # either branch binds it
    ("for i in range(3):\n    a = i\nb = a", set(), set()),
    ("x += 1", set(), {"x"}),
    ("f = lambda v: v + w", set(), {"w"}),
    ("ys = [v * 2 for v in xs]", {"xs"}, set()),
    ("def g():\n    return later", set(), set()),  # read when called, not here
    ("with open(p) as fh:\n    t = fh.read()", {"p"}, set()),
    ("x[i] = 1", {"x"}, {"i"}),
])
def test_reads_unbound(code, bound, missing):
    stmt = ast.parse(code).body
    got = set()
    b = set(bound) | {"range", "open"}  # builtins: the emitter asks only about its locals
    for s in stmt:
        got |= reads_unbound(s, b)
        b |= {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(
            n.ctx, ast.Store)}
    assert got == missing


# -- the element ------------------------------------------------------------------------------

def test_dequeue_many_returns_what_was_enqueued_not_its_batch_size():
    e = port('''
        import tensorflow as tf
        def build(files, batch_size):
            q = tf.train.string_input_producer(files)
            _, value = tf.FixedLengthRecordReader(record_bytes=4).read(q)
            rec = tf.decode_raw(value, tf.uint8)
            label = tf.cast(rec[0], tf.int32)
            example_queue = tf.FIFOQueue(100, dtypes=[tf.uint8, tf.int32], shapes=[[4], []])
            op = example_queue.enqueue([rec, label])
            tf.train.add_queue_runner(tf.train.QueueRunner(example_queue, [op] * 4))
            images, labels = example_queue.dequeue_many(batch_size)
            return images, labels
    ''')
    (p,) = e.pipelines
    assert p.complete and p.returns
    src = inner(fn(e.text, "build"), "build_example")
    assert "value = example" in src and "return (rec, label)" in src
    assert "batch_size" not in src
    assert "ds.batch(batch_size, drop_remainder=True)" in ast.unparse(fn(e.text, "build"))


def test_a_queue_between_two_parts_passes_the_element_on():
    """A helper puts the parsed example through a shuffle queue of its own: the dequeued names
    take what was enqueued; the chain shuffles."""
    e = port('''
        import tensorflow as tf
        def _shuffle(tensors, min_after):
            sq = tf.RandomShuffleQueue(100, min_after, dtypes=[t.dtype for t in tensors])
            tf.train.add_queue_runner(tf.train.QueueRunner(sq, [sq.enqueue(tensors)] * 2))
            return sq.dequeue()
        def get(files, batch_size):
            q = tf.train.string_input_producer(files)
            _, serialized = tf.TFRecordReader().read(q)
            x = tf.parse_single_example(serialized, {"x": tf.FixedLenFeature([2], tf.float32)})
            tensors = [x["x"], tf.shape(x["x"])[0]]
            tensors = _shuffle(tensors, 10)
            return tf.train.batch(tensors, batch_size=batch_size)
    ''')
    get = fn(e.text, "get")
    src = inner(get, "get_example")
    assert "serialized = example" in src and "dequeue" not in src
    assert "ds.shuffle(10)" in ast.unparse(get)


def test_copy_loops_become_one_copy_and_the_loop_variable_its_first_value():
    e = port('''
        import tensorflow as tf
        def distorted(filenames, labels, batch_size):
            filename, label = tf.train.slice_input_producer([filenames, labels])
            images_and_labels = []
            for thread_id in range(4):
                image = tf.image.decode_jpeg(tf.read_file(filename))
                image = tf.image.resize_images(image, [8 + thread_id, 8])
                images_and_labels.append([image, label])
            return tf.train.batch_join(images_and_labels, batch_size=batch_size)
    ''')
    src = inner(fn(e.text, "distorted"), "distorted_example")
    assert "for thread_id" not in src and "thread_id = 0" in src
    assert "images_and_labels" not in src and src.rstrip().endswith("return (image, label)")
    assert any("copies differ by thread_id" in what for _, what in e.todos)


# -- per-batch code -----------------------------------------------------------------------------

def test_per_batch_code_stops_at_the_model():
    e = port('''
        import tensorflow as tf
        import network
        def main(files, batch_size):
            q = tf.train.string_input_producer(files)
            _, v = tf.WholeFileReader().read(q)
            image = tf.image.resize_images(tf.image.decode_jpeg(v), [8, 8])
            images = tf.train.shuffle_batch([image], batch_size, 100, 10)
            images = tf.identity(images, "input")
            logits = network.inference(images)
            saver = tf.train.Saver()
            with tf.Session() as sess:
                sess.run(logits)
            return "done"
    ''')
    (p,) = e.pipelines
    assert not p.returns  # main does not return its batches
    main = fn(e.text, "main")
    batch = inner(main, "main_batch")
    assert "tf.identity(images, 'input')" in batch and batch.rstrip().endswith("return images")
    assert "network" not in ast.unparse(main) and "Saver" not in ast.unparse(main)


def test_per_batch_code_keeps_what_it_needs_and_script_helpers_that_only_compute():
    e = port('''
        import tensorflow as tf
        def onehot(labels, n):
            return tf.one_hot(labels, n)
        def inputs(files, batch_size, n):
            q = tf.train.string_input_producer(files)
            _, v = tf.TextLineReader().read(q)
            label = tf.string_to_number(v, tf.int32)
            labels = tf.train.batch([label], batch_size)
            idx = tf.range(batch_size)
            labels = onehot(labels + 0 * idx, n)
            return labels
    ''')
    (p,) = e.pipelines
    assert p.returns and p.complete
    batch = inner(fn(e.text, "inputs"), "inputs_batch")
    assert "idx = tf.range(batch_size)" in batch and "onehot(" in batch
    fn(e.text, "onehot")  # copied


# -- conditions, setup, binding order -------------------------------------------------------------

def test_pipelines_under_a_run_time_condition_are_one_function():
    e = port('''
        import tensorflow as tf
        def input_fn(files, shuffle=True, batch_size=8):
            q = tf.train.string_input_producer(files, shuffle=shuffle)
            _, rows = tf.TextLineReader().read(q)
            cols = tf.decode_csv(rows, record_defaults=[[0], [0]])
            if shuffle:
                batch = tf.train.shuffle_batch(cols, batch_size, 100, 2 * batch_size + 1)
            else:
                batch = tf.train.batch(cols, batch_size)
            return batch
    ''')
    assert [p.name for p in e.pipelines] == ["input_fn"]
    src = ast.unparse(fn(e.text, "input_fn"))
    assert "input_fn_2" not in e.text
    assert src.count("def input_fn_example") == 1  # the same map in both ways: written once
    tree = fn(e.text, "input_fn")
    ifs = [n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test) == "shuffle"]
    assert any("ds.shuffle(2 * batch_size + 1)" in ast.unparse(n) for n in ifs)


def test_setup_keeps_what_the_pipeline_needs_and_its_checks():
    e = port('''
        import os
        import tensorflow as tf
        def main(args):
            log_dir = os.path.join(args.logs, "run")
            if not os.path.isdir(log_dir):
                os.makedirs(log_dir)
            files = [os.path.join(args.data, f) for f in os.listdir(args.data)]
            if not files:
                raise ValueError("no data")
            q = tf.train.string_input_producer(files)
            _, v = tf.WholeFileReader().read(q)
            image = tf.image.decode_png(v)
            batch = tf.train.batch([image], args.batch_size, dynamic_pad=True)
            print(log_dir)
    ''')
    src = ast.unparse(fn(e.text, "main"))
    assert "makedirs" not in src and "log_dir" not in src
    assert "raise ValueError('no data')" in src and "os.listdir(args.data)" in src
    assert "padded_batch(args.batch_size" in src


def test_a_statement_reading_what_only_tf1_code_bound_is_left_out_with_a_todo():
    e = port('''
        import tensorflow as tf
        def inputs(files, batch_size):
            q = tf.train.string_input_producer(files)
            reader = tf.TFRecordReader()
            _, v = reader.read(q)
            count = reader.num_records_produced()
            x = tf.parse_single_example(v, {"x": tf.FixedLenFeature([1], tf.int64)})["x"]
            tf.logging.info(x)
            x = x + tf.cast(count, tf.int64)
            return tf.train.batch([x], batch_size)
    ''')
    src = ast.unparse(fn(e.text, "inputs"))
    assert "num_records_produced" not in src and "count" not in src
    assert any("left out `x = x + tf.cast(count, tf.int64)`: it reads count" in w
               for _, w in e.todos)
    example = inner(fn(e.text, "inputs"), "inputs_example")
    assert "logging.info(x)" in example  # it reads the example: it runs per example
    compile(e.text, "port.py", "exec")


# -- methods -------------------------------------------------------------------------------------

def test_a_pipeline_method_is_a_method_with_init_and_the_methods_it_calls():
    e = port('''
        import tensorflow as tf
        class Loader(object):
            SIZE = 8
            def __init__(self, files, batch_size):
                self.files = files
                self.batch_size = batch_size
                self.reader = tf.WholeFileReader()
            def decode(self, v):
                return tf.image.resize_images(tf.image.decode_jpeg(v), [self.SIZE, self.SIZE])
            def flip(self, images):
                return tf.image.random_flip_left_right(images)
            def unused(self):
                return 1
            def batch(self):
                q = tf.train.string_input_producer(self.files)
                _, v = self.reader.read(q)
                image = self.decode(v)
                images = tf.train.batch([image], self.batch_size)
                return self.flip(images)
    ''')
    assert [(p.name, p.complete) for p in e.pipelines] == [("Loader.batch", True)]
    tree = ast.parse(e.text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Loader")
    names = [n.name for n in cls.body if isinstance(n, ast.FunctionDef)]
    assert set(names) == {"__init__", "batch", "decode", "flip"}
    assert "SIZE = 8" in ast.unparse(cls)
    assert "WholeFileReader" not in ast.unparse(fn(e.text, "__init__", "Loader"))
    batch = fn(e.text, "batch", "Loader")
    assert "def batch_batch(batch, seed)" in ast.unparse(batch)  # the flip draws per batch
    assert "tf.data.Dataset.random(seed=None).batch(2)" in ast.unparse(batch)


def test_what_is_not_ported_says_why():
    e = port('''
        import tensorflow as tf
        class Corpus(object):
            def __init__(self, files, batch_size):
                q = tf.train.string_input_producer(files)
                _, v = tf.WholeFileReader().read(q)
                self.images = tf.train.batch([tf.image.decode_png(v)], batch_size,
                                             dynamic_pad=True)
    ''')
    (p,) = e.pipelines
    assert not p.complete
    assert any("constructor" in what and "cannot return a dataset" in what for _, what in e.todos)
    assert e.text.count(TODO) == len(e.todos)


# -- ports import on their own (issue 30) -------------------------------------------------------

def test_defaults_that_read_flags_are_read_when_called_and_classes_are_carried():
    """``def inputs(data_dir=FLAGS.data_dir, config=Config())``: the port would read FLAGS
    (parsed only when the program runs) when imported: None until called; the class is
    carried; an undefined name in a default is a TODO naming it."""
    text = port("""
        import tensorflow as tf
        flags = tf.app.flags
        flags.DEFINE_string("data_dir", "/tmp/data", "data")
        FLAGS = flags.FLAGS
        class Config(object):
            capacity = 100
        def inputs(data_dir=FLAGS.data_dir, config=Config(), size=SIZE, n=32):
            q = tf.train.string_input_producer(tf.gfile.Glob(data_dir + "/*"))
            _, v = tf.TFRecordReader().read(q)
            return tf.train.batch([v], n, capacity=config.capacity)
        """).text
    f = fn(text, "inputs")
    assert ast.unparse(f.args) == "data_dir=None, config=Config(), size=None, n=32"
    body = ast.unparse(f)
    assert "if data_dir is None:\n        data_dir = FLAGS.data_dir" in body
    assert "if size is None:\n        size = SIZE" in body
    assert f"{TODO}the default of size reads SIZE, which this script does not define" in text
    names = {n.name for n in ast.parse(text).body if isinstance(n, ast.ClassDef)}
    assert "Config" in names and "FLAGS = flags.FLAGS" in text


def test_a_command_line_parsed_at_the_top_is_not_parsed_on_import():
    text = port("""
        import argparse
        import tensorflow as tf
        parser = argparse.ArgumentParser()
        parser.add_argument("--input_dir")
        a = parser.parse_args()
        def load():
            q = tf.train.string_input_producer(tf.gfile.Glob(a.input_dir + "/*.jpg"))
            _, v = tf.WholeFileReader().read(q)
            return tf.train.batch([tf.image.decode_jpeg(v)], 2)
        """).text
    tree = ast.parse(text)
    assert not any("parse_args" in ast.unparse(s) for s in tree.body)
    assert f"{TODO}a = parser.parse_args() (line 6) reads the command line" in text
    assert "parser.add_argument('--input_dir')" in text  # the parser itself is carried


@pytest.mark.parametrize("tensors,returns", [
    ("[image]", "return image"),
    ("parts", "return _tf1_element(parts)"),
    ("{'image': image}", "return {'image': image}"),
])
def test_a_batch_keeps_tf1_s_structure(tensors, returns):
    """TF1 batches a one-tensor list to the tensor itself and a dict to a dict; a list the
    script built by name is made so when the port runs (_tf1_element)."""
    text = port(f"""
        import tensorflow as tf
        def f(files, n):
            q = tf.train.string_input_producer(files)
            _, v = tf.TextLineReader().read(q)
            image = tf.strings.to_number(v)
            parts = [image]
            return tf.train.batch({tensors}, n)
        """).text
    example = inner(fn(text, "f"), "f_example")
    assert example.rstrip().endswith(returns)
    assert ("def _tf1_element(tensors):" in text) == ("_tf1_element(parts)" in returns)


def test_categorical_s_third_argument_is_its_dtype_not_a_seed():
    """tf.random.categorical(logits, n, dtype): the stateless draw keeps dtype and takes the
    example's seed (the rules test found the shared parameter list of multinomial wrong)."""
    text = port("""
        import tensorflow as tf
        def f(files, n):
            q = tf.train.string_input_producer(files)
            _, v = tf.TextLineReader().read(q)
            c = tf.random.categorical(tf.reshape(tf.strings.to_number(v), [1, 1]), 2, tf.int64)
            return tf.train.batch([c], n)
        """).text
    assert "tf.random.stateless_categorical(logits=" in text
    assert "dtype=tf.int64, seed=_draws.seed())" in text
