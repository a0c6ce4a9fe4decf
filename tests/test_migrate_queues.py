"""``compare.migrate``'s plans of the pipelines people built by hand, on small scripts written
here: queues fed by Python threads (wherever the queue is made), QueueRunners over enqueue ops
that compute their elements, ``enqueue_many`` followed to the tensors it enqueues, and
unresolved items that name their thing on its own line. Fast: nothing is run."""
from __future__ import annotations

import pytest

from tests.test_migrate_plan import only, plan

HEAD = "import threading\nimport numpy as np\nimport tensorflow as tf\n"


def chain(p) -> list[str]:
    return p.chain.split("\n")


# -- queues fed by Python code ------------------------------------------------------------------

MODULE_QUEUE = HEAD + (
    "x_ph = tf.placeholder(tf.float32, [28, 28])\n"              # 4
    "y_ph = tf.placeholder(tf.int32, [])\n"
    "queue = tf.FIFOQueue(100, [tf.float32, tf.int32], shapes=[[28, 28], []])\n"
    "enqueue_op = queue.enqueue([x_ph, y_ph])\n"                 # 7
    "def feeder(sess, coord):\n"
    "    for x, y in data():\n"
    "        sess.run(enqueue_op, feed_dict={x_ph: x, y_ph: y})\n"  # 10
    "def inputs(batch_size):\n"
    "    images, labels = queue.dequeue_many(batch_size)\n"    # 12
    "    return images, labels\n"
    "def main():\n"
    "    images, labels = inputs(32)\n"
    "    sess = tf.Session()\n"
    "    threading.Thread(target=feeder, args=(sess, None)).start()\n")


def test_a_queue_made_at_the_top_is_planned_in_the_function_that_dequeues_it():
    """The queue, its enqueue op and placeholders are module globals; the input function's
    dequeue_many is the pipeline, fed by the thread's loop (no pipeline for main or the
    module body)."""
    (p,) = plan(MODULE_QUEUE).pipelines
    assert (p.function, p.line, p.kind) == ("inputs", 12, "feeding")
    (v,) = p.variants
    feeder = v.source.feeder
    assert v.source.kind == "generator" and feeder.function == "feeder" and feeder.thread
    assert feeder.feeds == [(10, "x"), (10, "y")]
    assert feeder.signature == [("[28, 28]", "tf.float32"), ("[]", "tf.int32")]
    assert chain(p)[1:] == ["ds = ds.batch(batch_size, drop_remainder=True)",
                            "ds = ds.prefetch(tf.data.AUTOTUNE)"]


def test_a_queue_made_in_a_helper_and_dequeued_in_another_is_one_pipeline():
    """make_queue builds it, get_inputs dequeues it, train wires them: one pipeline (train's),
    its elements rows of what the thread feeds with enqueue_many."""
    (p,) = plan(HEAD + "def make_queue():\n"
                "    x = tf.placeholder(tf.float32, [None, 3])\n"
                "    q = tf.FIFOQueue(64, [tf.float32], shapes=[[3]])\n"
                "    op = q.enqueue_many([x])\n"                          # 7
                "    return q, op, x\n"
                "def load(sess, op, x):\n"
                "    while True:\n"
                "        sess.run(op, feed_dict={x: next_rows()})\n"
                "def get_inputs(q, n):\n"
                "    return q.dequeue_many(n)\n"
                "def train():\n"
                "    q, op, x = make_queue()\n"
                "    batch = get_inputs(q, 16)\n"
                "    threading.Thread(target=load, args=(None, op, x)).start()\n").pipelines
    assert p.function == "train"
    assert chain(p) == ["ds = tf.data.Dataset.from_generator(load_x, output_signature="
                        "tf.TensorSpec(shape=[None, 3], dtype=tf.float32))",
                        "ds = ds.unbatch()", "ds = ds.batch(16, drop_remainder=True)",
                        "ds = ds.prefetch(tf.data.AUTOTUNE)"]
    assert any("line 7 put whole batches" in ln for ln in p.legend)


@pytest.mark.parametrize("feed,line,fed", [
    ("feed_dict=dict(zip(self.phs, make_batch()))", 15,
     "make_batch() (one value per placeholder of self.phs)"),
    ("feed_dict=food", 14, "make_batch() (one value per placeholder of self.phs)"),
    ("feed_dict={p: v for p, v in zip(self.phs, make_batch())}", 15,
     "{p: v for p, v in zip(self.phs, make_batch())} (one value per placeholder of self.phs)"),
])
def test_feed_dicts_built_over_a_list_of_placeholders(feed, line, fed):
    """Tacotron's DataFeeder: a threading.Thread subclass feeding a list of placeholders with
    dict(zip(...)) (or a dict it named, or a comprehension); the queue hands out batches."""
    source = (HEAD + "class Feeder(threading.Thread):\n"
              "    def __init__(self):\n"
              "        self.phs = [tf.placeholder(tf.int32, [None, None], 'inputs'),\n"
              "                    tf.placeholder(tf.float32, [None], 'lengths')]\n"
              "        q = tf.FIFOQueue(8, [tf.int32, tf.float32])\n"
              "        self.op = q.enqueue(self.phs)\n"
              "        self.inputs, self.lengths = q.dequeue()\n"
              "    def run(self):\n"
              "        self.group()\n"
              "    def group(self):\n"
              "        food = dict(zip(self.phs, make_batch()))\n"
              f"        self.sess.run(self.op, {feed})\n")
    (p,) = plan(source).pipelines
    feeder = p.variants[0].source.feeder
    assert feeder.function == "Feeder.group" and feeder.thread
    assert feeder.feeds == [(line, fed)]
    assert chain(p)[0] == (
        "ds = tf.data.Dataset.from_generator(group_values, output_signature=("
        "tf.TensorSpec(shape=[None, None], dtype=tf.int32), "
        "tf.TensorSpec(shape=[None], dtype=tf.float32)))")
    assert "ds = ds.unbatch()" not in chain(p)  # enqueue, not enqueue_many: one batch each


# -- QueueRunners over enqueue ops that compute their elements --------------------------------

def test_a_queue_runner_over_a_random_op_draws_per_element():
    """The TF1 book's example: QueueRunner(q, [enqueue_op] * 5) of tf.random_normal([1]). Each
    element is a new draw of shape [1] (not one draw sliced to []), five at once, seeded per
    element; nothing is said to be shuffled."""
    p = only("import tensorflow as tf\n"
             "queue = tf.FIFOQueue(100, 'float')\n"
             "enqueue_op = queue.enqueue([tf.random_normal([1])])\n"
             "qr = tf.train.QueueRunner(queue, [enqueue_op] * 5)\n"
             "tf.train.add_queue_runner(qr)\n"
             "out_tensor = queue.dequeue()\n")
    assert chain(p) == ["ds = tf.data.Dataset.counter()",
                        "ds = tf.data.Dataset.zip((ds, tf.data.Dataset.random(seed=None)"
                        ".batch(2)))",
                        "ds = ds.map(pipeline_example, num_parallel_calls=5)",
                        "ds = ds.prefetch(tf.data.AUTOTUNE)"]
    (v,) = p.variants
    assert v.source.kind == "computed" and v.source.endless and v.source.shuffle is None
    (st,) = v.maps()
    assert [(s.line, s.calls) for s in st.steps] == [(3, ("tensorflow.random_normal",))]
    assert [(d.line, d.stateless) for d in st.random] == [(3, "tf.random.stateless_normal")]
    assert p.unresolved == []
    assert not any("shuffle" in ln for ln in p.legend)


def test_an_enqueue_op_the_script_runs_itself_says_how_often_is_unresolved():
    p = only("import tensorflow as tf\n"
             "q = tf.FIFOQueue(10, tf.float32)\n"
             "op = q.enqueue(tf.random_uniform([]))\n"
             "x = q.dequeue()\n")
    assert p.variants[0].source.kind == "computed" and not p.variants[0].source.endless
    (u,) = p.unresolved
    assert (u.line, u.what) == (3, "how often q.enqueue runs")


@pytest.mark.parametrize("threads,parallel", [("[enq] * 2", "2"), ("[enq]", "1")])
def test_enqueue_many_of_a_function_s_arrays_slices_their_rows(threads, parallel):
    """A batch producer over several inputs: the rows of what enqueue_many puts in (computed
    from the function's parameters once, as TF1 computed them per enqueue), repeated by the
    QueueRunner, in the queue's order."""
    p = only("import tensorflow as tf\n"
             "def batch_producer(features, labels, batch_size):\n"
             "    x = tf.convert_to_tensor(features, dtype=tf.float32) / 255.0\n"
             "    y = tf.convert_to_tensor(labels, dtype=tf.int32)\n"
             "    q = tf.FIFOQueue(1000, [tf.float32, tf.int32], shapes=[[4], []])\n"
             "    enq = q.enqueue_many([x, y])\n"
             f"    tf.train.add_queue_runner(tf.train.QueueRunner(q, {threads}))\n"
             "    return q.dequeue_many(batch_size)\n")
    assert chain(p) == ["ds = tf.data.Dataset.from_tensor_slices((x, y))", "ds = ds.repeat()",
                        "ds = ds.batch(batch_size, drop_remainder=True)",
                        "ds = ds.prefetch(tf.data.AUTOTUNE)"]
    assert p.unresolved == []
    assert "in the order enqueued" in p.legend[0] and "shuffle" not in p.legend[0]


def test_enqueue_many_of_random_draws_maps_then_unbatches():
    p = only("import tensorflow as tf\n"
             "q = tf.FIFOQueue(100, [tf.float32], shapes=[[3]])\n"
             "op = q.enqueue_many([tf.random_normal([10, 3])])\n"
             "tf.train.add_queue_runner(tf.train.QueueRunner(q, [op]))\n"
             "x = q.dequeue_many(4)\n")
    assert chain(p)[-4:] == ["ds = ds.map(pipeline_example, num_parallel_calls=1)",
                             "ds = ds.unbatch()", "ds = ds.batch(4, drop_remainder=True)",
                             "ds = ds.prefetch(tf.data.AUTOTUNE)"]


def test_batches_enqueued_again_continue_their_pipeline():
    """tf.train.batch's batches, doubled and put into a queue with enqueue_many: one pipeline
    (the queue's), the first batch its stage, the doubling a map over batches, then unbatch;
    the unresolved item of an unknown source never comes out empty."""
    report = plan("import tensorflow as tf\n"
                  "def batches(files, n):\n"
                  "    fq = tf.train.string_input_producer(files)\n"
                  "    _, line = tf.TextLineReader().read(fq)\n"
                  "    a, b = tf.decode_csv(line, [[0.0], [0]])\n"
                  "    xs, ys = tf.train.batch([a, b], 8)\n"
                  "    q = tf.FIFOQueue(100, [tf.float32, tf.int32], shapes=[[], []])\n"
                  "    enq = q.enqueue_many([xs * 2.0, ys])\n"
                  "    tf.train.add_queue_runner(tf.train.QueueRunner(q, [enq]))\n"
                  "    return q.dequeue_many(n)\n")
    (p,) = report.pipelines
    assert p.line == 10
    assert chain(p)[-5:] == ["ds = ds.batch(8, drop_remainder=True)",
                             "ds = ds.map(batches_stage2, num_parallel_calls=1)",
                             "ds = ds.unbatch()", "ds = ds.batch(n, drop_remainder=True)",
                             "ds = ds.prefetch(tf.data.AUTOTUNE)"]
    assert [s.line for s in p.variants[0].maps()[1].steps] == [8]


def test_a_helper_nothing_calls_names_its_parameter_on_its_own_line():
    p = only("import tensorflow as tf\n"
             "def get_batch(image, label, n):\n"
             "    image = tf.cast(image, tf.float32)\n"
             "    return tf.train.batch([image, label], n)\n")
    assert p.unresolved and all(u.what and not u.what.startswith(" ") for u in p.unresolved)


def test_producers_made_per_item_of_a_parameter_are_unresolved_by_name():
    """A helper nothing calls: one slice_input_producer per item of its parameter, batched
    together. Not one from_tensor_slices of the comprehension's variable: unresolved, named,
    on the producer's line."""
    p = only("import tensorflow as tf\n"
             "def batch_helper(tensor_lists, n):\n"
             "    qs = [tf.train.slice_input_producer(tl, shuffle=False) for tl in tensor_lists]\n"
             "    return tf.train.batch_join(qs, n)\n")
    assert chain(p)[0] == "ds = ...  # unresolved: tl (the loop variable over tensor_lists)"
    (u,) = p.unresolved
    assert (u.line, u.what) == (3, "tl (the loop variable over tensor_lists)")
    assert "sample_from_datasets" in u.why
