"""``compare.migrate``'s plans on small scripts written here, one rule per test: how data reaches
a batch call (dicts, zip, several producers, helpers, other modules), where a tf.data chain
starts, which calls are TF1-only, and what the plan says about them. Fast: nothing is run."""
from __future__ import annotations

import pytest

from compare.migrate import analyze_source
from tests.test_migrate_plan import only, plan

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


# -- constructs TF 2 dropped ----------------------------------------------------------------------

def rules(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.rule.id) for f in analyze_source(source, "t.py").findings]


@pytest.mark.parametrize("code,rule", [
    ("tf.estimator.inputs.numpy_input_fn(x={'a': a}, y=y, shuffle=True)", "numpy_input_fn"),
    ("tf.compat.v1.estimator.inputs.pandas_input_fn(df, y, shuffle=False)", "pandas_input_fn"),
    ("tf.contrib.learn.io.numpy_input_fn(x, y)", "numpy_input_fn"),
    ("tf.contrib.training.bucket_by_sequence_length(n, t, 4, [10, 20])",
     "bucket_by_sequence_length"),
    ("tf.contrib.lookup.index_table_from_tensor(tf.constant(['a']))", "lookup_table"),
    ("tf.estimator.Estimator(model_fn)", "estimator"),
    ("tf.estimator.DNNClassifier([8], cols)", "estimator"),
    ("tf.tables_initializer()", "variables_initializer"),
])
def test_tf1_only_constructs_are_found(code, rule):
    assert rules(HEAD + f"x = {code}\n") == [(2, rule)]


def test_record_input_and_its_yield_op_are_found():
    assert rules("from tensorflow.python.ops import data_flow_ops\n"
                 "r = data_flow_ops.RecordInput(file_pattern='x*', batch_size=8)\n"
                 "records = r.get_yield_op()\n") == [(2, "record_input"),
                                                    (3, "record_input.get_yield_op")]


def test_lookup_table_replacement_names_the_tf2_tables():
    (f,) = analyze_source(HEAD + "t = tf.contrib.lookup.index_table_from_tensor(k)\n",
                          "t.py").findings
    assert "tf.lookup.StaticHashTable" in f.rule.replacement
    assert "tf.lookup.StaticVocabularyTable" in f.rule.replacement


def test_a_tensorflow_lookalike_imported_as_tf_is_read_as_tensorflow_with_a_note():
    source = ("import sugarlib as tf\n"
              "q = tf.train.string_input_producer(['a'])\n"
              "b = tf.train.batch([q.dequeue()], 2)\n")
    report = analyze_source(source, "t.py")
    assert [(f.line, f.rule.id) for f in report.findings][:2] == [
        (2, "string_input_producer"), (3, "batch")]
    assert any("sugarlib as tf" in n and "not TensorFlow" in n for n in report.notes)
    plain = analyze_source("import mathlib as tf\nx = tf.sqrt(2)\n", "t.py")
    assert plain.findings == [] and plain.notes == []


# -- data through dicts, lists and zip ------------------------------------------------------------

READ = (HEAD + "def get(files, n, noise):\n"
        "    q = tf.train.string_input_producer(files)\n"
        "    _, v = tf.FixedLengthRecordReader(record_bytes=8).read(q)\n"
        "    x = tf.decode_raw(v, tf.float32)\n")


@pytest.mark.parametrize("tail", [
    # the hand3d pattern: a dict filled key by key, batched through zip(*d.items())
    ("    d = dict()\n"
     "    d['x'] = x\n"
     "    d['y'] = tf.reshape(x, [2, 4]) + tf.truncated_normal([2, 4])\n"
     "    names, tensors = zip(*d.items())\n"
     "    out = tf.train.shuffle_batch_join([tensors], n, 100, 50)\n"
     "    return dict(zip(names, out))\n"),
    ("    d = {'x': x}\n"
     "    d.update({'y': tf.reshape(x, [2, 4]) + tf.truncated_normal([2, 4])})\n"
     "    return tf.train.shuffle_batch(d, n, 100, 50)\n"),
    ("    parts = [x]\n"
     "    parts.append(tf.reshape(x, [2, 4]) + tf.truncated_normal([2, 4]))\n"
     "    keys = ['x', 'y']\n"
     "    d = dict(zip(keys, parts))\n"
     "    return tf.train.shuffle_batch(list(d.values()), n, 100, 50)\n"),
])
def test_tensors_through_dicts_and_zip_belong_to_the_pipeline_that_made_them(tail):
    p = only(READ + tail)
    (v,) = p.variants
    assert v.source.kind == "files" and v.source.data.text == "files"
    assert [u.what for u in p.unresolved] == []
    steps = {s.line for s in v.maps()[0].steps}
    assert 5 in steps  # tf.decode_raw
    assert any("tf.random.stateless_truncated_normal" == d.stateless for d in v.maps()[0].random)
    assert "ds.shuffle(50)" in p.chain and "..." not in p.chain


def test_a_dict_entry_popped_and_looked_up():
    p = only(READ + "    d = {'x': x, 'unused': v}\n"
             "    d.pop('unused')\n"
             "    y = d.get('x')\n"
             "    z = tf.reshape(y, [8])\n"
             "    return tf.train.batch([z], n)\n")
    assert {s.line for s in p.variants[0].maps()[0].steps} >= {5, 9}


def test_an_estimator_is_not_said_to_just_go():
    report = analyze_source(HEAD + "m = tf.estimator.Estimator(model_fn)\n"
                            "with tf.Session() as s:\n    pass\n", "t.py")
    assert "tf.estimator is gone" in report.plan and "Keras model" in report.plan
    assert "tf.Session goes" in report.plan and "tf.estimator.Estimator goes" not in report.plan


# -- other modules, placeholders, generators ------------------------------------------------------

def test_a_reader_object_from_elsewhere_reading_the_filename_queue():
    """yt8m: ``reader.prepare_reader(filename_queue)`` copies batched together."""
    p = only(HEAD + "def get(reader, files, n, readers):\n"
             "    q = tf.train.string_input_producer(files, shuffle=True)\n"
             "    data = [reader.prepare_reader(q) for _ in range(readers)]\n"
             "    return tf.train.shuffle_batch_join(data, n, 5 * n, n, enqueue_many=True)\n")
    (v,) = p.variants
    assert v.source.kind == "files" and v.source.data.text == "files"
    read = v.stages[0]
    assert read.external and read.readers.text == "readers" and read.read.line == 4
    assert "ds.interleave(..., cycle_length=readers" in p.chain and "ds.unbatch()" in p.chain
    (u,) = p.unresolved
    assert u.line == 4 and "reader.prepare_reader(q)" in u.what
    assert "TFRecordDataset(" not in p.chain


def test_a_queue_handed_to_another_module_ends_the_pipeline_there():
    """facenet: the queue filled here is dequeued and batched by another module's function."""
    report = plan(HEAD + "import helpers\n"
                  "def main(n):\n"
                  "    paths = tf.placeholder(tf.string, shape=(None, 1))\n"
                  "    q = tf.FIFOQueue(100, dtypes=[tf.string], shapes=[(1,)])\n"
                  "    op = q.enqueue_many([paths])\n"
                  "    images = helpers.make_batches(q, n)\n"
                  "    with tf.Session() as sess:\n"
                  "        sess.run(op, feed_dict={paths: files()})\n")
    (p,) = report.pipelines
    assert p.line == 7 and p.end.construct == "helpers.make_batches"
    assert any(u.line == 7 and "helpers.make_batches(q, ...)" in u.what for u in p.unresolved)
    assert any("(the generator)" in u.what for u in p.unresolved)
    assert p.chain.split("\n")[1] == "ds = ds.unbatch()"  # enqueue_many: rows are elements
    assert "another module" in p.chain.split("\n")[2]


def test_a_placeholder_batch_size_is_unresolved():
    p = only(HEAD + "def main(files):\n"
             "    size = tf.placeholder(tf.int32)\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    _, v = tf.TFRecordReader().read(q)\n"
             "    b = tf.train.batch([v], size)\n"
             "    with tf.Session() as sess:\n"
             "        sess.run(b, feed_dict={size: 32})\n")
    (u,) = p.unresolved
    assert u.line == 6 and "batch_size=size" in u.what and "line 8" in u.why


def test_batched_tensors_made_by_another_module_name_the_call():
    p = only(HEAD + "def input_fn(pipeline, n):\n"
             "    feats = pipeline.read(pipeline.provider())\n"
             "    return tf.train.batch(feats, n, dynamic_pad=True)\n")
    (u,) = p.unresolved
    assert "made by pipeline.read(pipeline.provider()) at line 3" in u.what
    assert p.chain.startswith("ds = ...  # unresolved")


# -- helpers given per-example tensors ------------------------------------------------------------

SHUFFLE_HELPER = (HEAD + "def _shuffle(tensors, capacity, keep, threads):\n"
                  "    q = tf.RandomShuffleQueue(capacity, keep, dtypes=[t.dtype for t in tensors])\n"
                  "    op = q.enqueue(tensors)\n"
                  "    tf.train.add_queue_runner(tf.train.QueueRunner(q, [op] * threads))\n"
                  "    out = q.dequeue()\n"
                  "    for i in range(len(tensors)):\n"
                  "        out[i].set_shape(tensors[i].shape)\n"
                  "    return out\n")


def test_a_helper_given_per_example_tensors_is_part_of_its_callers_pipeline():
    """magenta: _shuffle_inputs gets one example's tensors; it is not a pipeline of its own."""
    report = plan(SHUFFLE_HELPER +
                  "def get(files, n, shuffle):\n"
                  "    q = tf.train.string_input_producer(files)\n"
                  "    _, v = tf.TFRecordReader().read(q)\n"
                  "    x = [tf.parse_single_example(v, F)]\n"
                  "    if shuffle:\n"
                  "        x = _shuffle(x, 100, 10, 2)\n"
                  "    return tf.train.batch(x, n, dynamic_pad=True)\n")
    (p,) = report.pipelines
    assert p.function == "get" and "from_tensor_slices(files)" in p.chain
    assert "if shuffle:" in p.chain and "ds.shuffle(10)" in p.chain
    assert "from_tensor_slices(tensors)" not in p.chain


def test_a_helper_nobody_here_calls_has_its_parameter_as_unresolved_source():
    (p,) = plan(SHUFFLE_HELPER).pipelines
    assert p.function == "_shuffle" and p.variants[0].source.kind == "unknown"
    assert any("tensors (a parameter of _shuffle)" in u.what for u in p.unresolved)
    assert "from_tensor_slices" not in p.chain


def test_arrays_a_function_is_given_and_enqueues_many_of_are_its_rows():
    (p,) = plan(HEAD + "def inputs(images, labels, n):\n"
                "    q = tf.FIFOQueue(100, [tf.float32, tf.int32])\n"
                "    op = q.enqueue_many([images, labels])\n"
                "    tf.train.add_queue_runner(tf.train.QueueRunner(q, [op]))\n"
                "    return q.dequeue_many(n)\n").pipelines
    assert p.chain.startswith("ds = tf.data.Dataset.from_tensor_slices((images, labels))")


# -- one pipeline per choice of batch call --------------------------------------------------------

def test_batch_calls_the_script_chooses_between_are_one_pipeline():
    """cloudml / hand3d: ``if shuffle: shuffle_batch(...) else: batch(...)`` on one source."""
    (p,) = plan(READ + "    if noise:\n"
                "        return tf.train.shuffle_batch([x], n, 100, 50)\n"
                "    else:\n"
                "        return tf.train.batch([x], n)\n").pipelines
    assert [e.line for e in p.ends] == [7, 9] and p.line == 7
    assert sorted(v.when for v in p.variants) == [(("noise", False),), (("noise", True),)]
    assert "if noise:\n    ds = ds.shuffle(50)\nds = ds.batch(n, drop_remainder=True)" in p.chain
    legend = "\n".join(p.legend)
    assert legend.index("source:") < legend.index("when noise:") < legend.index("when not noise:")


def test_two_batch_calls_of_one_run_stay_two_pipelines():
    report = plan(READ + "    a = tf.train.batch([x], n)\n"
                  "    b = tf.train.batch([x], 2 * n)\n"
                  "    return a, b\n")
    assert [p.line for p in report.pipelines] == [6, 7]


# -- several producers batched together -----------------------------------------------------------

TWO = (HEAD + "def load(images, cams, n, seed, s2):\n"
       "    iq = tf.train.string_input_producer(images, seed=seed, shuffle=True)\n"
       "    cq = tf.train.string_input_producer(cams, seed={cam_seed}, shuffle=True)\n"
       "    _, data = tf.WholeFileReader().read(iq)\n"
       "    image = tf.image.decode_jpeg(data)\n"
       "    _, line = tf.TextLineReader().read(cq)\n"
       "    k = tf.reshape(tf.stack(tf.decode_csv(line, [[1.]] * 9)), [3, 3])\n"
       "    return tf.train.batch([image, k], batch_size=n)\n")


def test_producers_sharing_a_seed_are_one_source_zipped_before_one_shuffle():
    """SfMLearner: the image list and the camera-file list share seed=seed to stay paired."""
    p = only(TWO.format(cam_seed="seed"))
    (v,) = p.variants
    assert v.source.kind == "rows" and v.source.seed.text == "seed"
    lines = p.chain.split("\n")
    assert lines[:2] == ["ds = tf.data.Dataset.from_tensor_slices((images, cams))",
                         "ds = ds.shuffle(ds.cardinality(), seed=seed)"]
    assert [b.stages[0].reader for b in v.branches] == ["whole_file", "text_line"]
    assert "ds = tf.data.Dataset.zip((ds_1, ds_2))" in lines
    assert lines.index("ds = tf.data.Dataset.zip((ds_1, ds_2))") < next(
        i for i, ln in enumerate(lines) if "map(load_example" in ln)
    assert {s.line for s in v.maps()[0].steps} == {6, 8}  # both streams in one map
    assert p.unresolved == []


def test_producers_with_their_own_seeds_are_streams_of_their_own():
    p = only(TWO.format(cam_seed="s2"))
    (v,) = p.variants
    assert v.source.kind == "zip" and len(v.branches) == 2
    assert "ds_1 = tf.data.Dataset.from_tensor_slices(images)" in p.chain
    assert "ds_2 = tf.data.Dataset.from_tensor_slices(cams)" in p.chain
    assert "ds_2 = ds_2.shuffle(ds_2.cardinality(), seed=s2)" in p.chain
    assert "(images, cams)" not in p.chain


# -- tf.data chains traced back to their start ----------------------------------------------------

CNN = (HEAD + "from tensorflow.contrib.data.python.ops import batching, interleave_ops\n"
       "def minibatch(files, n, cache_data, start):\n"
       "    ds = tf.data.TFRecordDataset.list_files(files)\n"
       "    ds = ds.apply(interleave_ops.parallel_interleave(tf.data.TFRecordDataset, "
       "cycle_length=10))\n"
       "    if cache_data:\n"
       "        ds = ds.take(1).cache().repeat()\n"
       "    counter = {counter}\n"
       "    counter = counter.repeat()\n"
       "    ds = tf.data.Dataset.zip((ds, counter))\n"
       "    ds = ds.apply(batching.map_and_batch(map_func=parse, batch_size=n))\n"
       "    return ds.make_one_shot_iterator().get_next()\n")


def test_a_tf_data_chain_starts_where_its_datasets_start():
    """tf_cnn_benchmarks: the chain zips a list_files + interleave + cache branch with a
    counter; it starts at list_files, not at the zip."""
    p = only(CNN.format(counter="tf.data.Dataset.range(n)"))
    lines = p.chain.split("\n")
    assert lines[0] == "ds = tf.data.TFRecordDataset.list_files(files)"
    assert ("ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=10, "
            "num_parallel_calls=tf.data.AUTOTUNE)") in lines
    assert "if cache_data:" in lines and "counter = tf.data.Dataset.range(n)" in lines
    assert lines.index("counter = counter.repeat()") < lines.index(
        "ds = tf.data.Dataset.zip((ds, counter))")
    assert "ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)" in lines
    assert "ds = ds.batch(n)" in lines and "tf.contrib" not in p.chain
    assert p.unresolved == []


def test_a_dataset_started_elsewhere_inside_a_zip_is_unresolved():
    p = only(CNN.format(counter="start"))
    assert any("start" in u.what for u in p.unresolved)
    assert "counter = ...  # unresolved" in p.chain


def test_record_input_is_a_pipeline_of_shuffled_records_in_batches():
    p = only("from tensorflow.python.ops import data_flow_ops\nimport tensorflow as tf\n"
             "def minibatch(pattern, n):\n"
             "    r = data_flow_ops.RecordInput(file_pattern=pattern, seed=301, parallelism=64,\n"
             "                                  buffer_size=10000, batch_size=n)\n"
             "    records = tf.split(r.get_yield_op(), n, 0)\n"
             "    records = [tf.reshape(x, []) for x in records]\n"
             "    images = [[] for _ in range(2)]\n"
             "    for idx in range(n):\n"
             "        image = tf.image.decode_jpeg(records[idx])\n"
             "        images[idx % 2].append(image)\n"
             "    return [tf.parallel_stack(im) for im in images]\n")
    lines = p.chain.split("\n")
    assert lines[0] == "ds = tf.data.Dataset.list_files(pattern, shuffle=True, seed=301)"
    assert ("ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=64, "
            "num_parallel_calls=tf.data.AUTOTUNE)") in lines
    assert "ds = ds.shuffle(10000, seed=301)" in lines
    assert lines[-2] == "ds = ds.batch(n, drop_remainder=True)"
    steps = {s.line for s in p.variants[0].maps()[0].steps}
    assert 10 in steps and 12 not in steps  # decode per record; the restack is per batch
    assert any("loop over the batch" in u.what for u in p.unresolved)


def test_unrelated_alternatives_of_one_function_do_not_interleave_their_lines():
    p = only(HEAD + "def f(use_data, files, n):\n"
             "    if use_data:\n"
             "        ds = tf.data.TFRecordDataset(files).repeat().batch(n)\n"
             "        return ds.make_one_shot_iterator().get_next()\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    _, v = tf.TFRecordReader().read(q)\n"
             "    return tf.train.batch([v], n)\n")
    lines = p.chain.split("\n")
    assert lines[0] == "if use_data:" and lines.count("else:") == 1
    body = lines[1:lines.index("else:")]
    assert all(ln.startswith("    ") for ln in body) and "ds = ds.repeat()" in [
        ln.strip() for ln in body]


# -- pipelines no longer missed -------------------------------------------------------------------

def test_an_input_fn_a_factory_returns_is_planned_with_its_buckets():
    """seq2seq: create_input_fn returns input_fn, which batches what another module reads."""
    p = only(HEAD + "def create_input_fn(pipeline, batch_size, bounds=None, small=False):\n"
             "    def input_fn():\n"
             "        feats = pipeline.read_from_data_provider(pipeline.make_data_provider())\n"
             "        if bounds:\n"
             "            _, b = tf.contrib.training.bucket_by_sequence_length(\n"
             "                input_length=feats['len'], bucket_boundaries=bounds, tensors=feats,\n"
             "                batch_size=batch_size, keep_input=feats['len'] >= 1,\n"
             "                dynamic_pad=True, allow_smaller_final_batch=small)\n"
             "        else:\n"
             "            b = tf.train.batch(tensors=feats, batch_size=batch_size,\n"
             "                               dynamic_pad=True, allow_smaller_final_batch=small)\n"
             "        return b\n"
             "    return input_fn\n")
    assert p.function == "create_input_fn.input_fn" and [e.line for e in p.ends] == [6, 11]
    assert "ds.bucket_by_sequence_length(lambda *example: ..., bounds, [batch_size] * " \
           "(len(bounds) + 1), drop_remainder=not small)" in p.chain
    assert "ds.filter(lambda *example: ...)" in p.chain
    assert "ds.padded_batch(batch_size, drop_remainder=not small)" in p.chain
    whats = [u.what for u in p.unresolved]
    assert any("pipeline.read_from_data_provider" in w for w in whats)
    assert any(w.startswith("input_length=feats['len']") for w in whats)
    assert any("create_input_fn" in n for n in p.notes)


@pytest.mark.parametrize("args,expect,absent", [
    ("x={'images': x}, y=y, batch_size=32, num_epochs=None, shuffle=True",
     ["ds = tf.data.Dataset.from_tensor_slices(({'images': x}, y))", "ds = ds.repeat()",
      "ds = ds.shuffle(250)", "ds = ds.batch(32, drop_remainder=True)"], []),
    ("x, y, shuffle=False", ["ds = ds.batch(128, drop_remainder=False)"],
     [".shuffle(", ".repeat("]),
    ("x, y, shuffle=flag, queue_capacity=400, num_epochs=3",
     ["ds = ds.repeat(3)", "if flag:\n    ds = ds.shuffle(100)"], []),
])
def test_numpy_input_fn_is_a_pipeline(args, expect, absent):
    p = only(HEAD + f"fn = tf.estimator.inputs.numpy_input_fn({args})\n")
    for e in expect:
        assert e in p.chain
    for a in absent:
        assert a not in p.chain


def test_pandas_input_fn_slices_the_frame_as_a_dict():
    p = only(HEAD + "fn = tf.estimator.inputs.pandas_input_fn(df, df.pop('y'), shuffle=False)\n")
    assert p.chain.startswith("ds = tf.data.Dataset.from_tensor_slices((dict(df), df.pop('y')))")


def test_a_function_called_through_a_changing_decorator_is_not_followed():
    """speech-to-text-wavenet: @tf.sg_producer_func makes the call a py_func behind a queue."""
    p = only(HEAD + "import lib\n"
             "@lib.producer_func\n"
             "def _load(src):\n"
             "    return np.load(src[1])\n"
             "def corpus(labels, files, n):\n"
             "    l, f = tf.train.slice_input_producer([labels, files], shuffle=True)\n"
             "    l, m = _load(source=[l, f], num_threads=8)\n"
             "    return tf.train.batch([l, m], n, shapes=[(None,), (20, None)],\n"
             "                          dynamic_pad=True)\n")
    (u,) = p.unresolved
    assert u.line == 8 and "@lib.producer_func" in u.what and "line 4" in u.why
    assert "padded_shapes=((None,), (20, None))" in p.chain


# -- slim's DatasetDataProvider ------------------------------------------------------------------

@pytest.mark.parametrize("args,expect,absent", [
    ("dataset, num_readers=4, common_queue_capacity=200, common_queue_min=100, shuffle=True",
     ["list_files(dataset.data_sources, shuffle=True)", "interleave(..., cycle_length=4",
      "ds = ds.shuffle(100)\nds = ds.map(...)  # unresolved: dataset.decoder"], []),
    ("dataset", ["ds = ds.shuffle(128)", "ds.flat_map(...)"], []),  # slim's defaults
    ("dataset, shuffle=False", ["list_files(dataset.data_sources, shuffle=False)"],
     ["ds.shuffle("]),
    ("dataset, shuffle=flag, common_queue_min=64", ["if flag:\n    ds = ds.shuffle(64)"], []),
])
def test_dataset_data_provider_shuffles_its_records_and_reads_in_parallel(args, expect, absent):
    p = only(HEAD + "import tf_slim as slim\n"
             "def main(dataset, n, flag):\n"
             f"    provider = slim.dataset_data_provider.DatasetDataProvider({args})\n"
             "    image, label = provider.get(['image', 'label'])\n"
             "    return tf.train.batch([image, label], n)\n")
    for e in expect:
        assert e in p.chain
    for a in absent:
        assert a not in p.chain
    assert "TFRecordDataset" not in p.chain


def test_a_method_of_an_object_from_elsewhere_on_each_example_is_listed():
    p = only(HEAD + "import nets\n"
             "def main(files, n):\n"
             "    net = nets.get_network('ssd')(params)\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    _, v = tf.TFRecordReader().read(q)\n"
             "    boxes = net.bboxes_encode(v)\n"
             "    return tf.train.batch([boxes], n)\n")
    assert [(u.line, u.what) for u in p.unresolved] == [
        (7, "net.bboxes_encode (called on each example)")]


# -- per-batch code -------------------------------------------------------------------------------

def test_code_after_the_batch_that_makes_the_result_is_a_per_batch_map():
    """BEGAN / SfMLearner: resize, transpose, one augmentation draw per batch after batching."""
    p = only(READ + "    img = tf.reshape(x, [2, 2, 2])\n"
             "    batch = tf.train.batch([img], n)\n"
             "    batch = tf.image.resize_nearest_neighbor(batch, [4, 4])\n"
             "    scale = tf.random_uniform([2], 1, 1.15)\n"
             "    batch = batch * scale[0]\n"
             "    unused = tf.reduce_sum(batch)\n"
             "    return tf.to_float(batch)\n")
    (v,) = p.variants
    b = v.batch()
    assert [s.line for s in b.after] == [8, 9, 10, 12] and b.after_name == "get_batch"
    assert [d.line for d in b.after_random] == [9]
    lines = p.chain.split("\n")
    assert lines[-3:] == ["ds = tf.data.Dataset.zip((ds, tf.data.Dataset.random(seed=None)."
                          "batch(2)))", "ds = ds.map(get_batch, num_parallel_calls="
                          "tf.data.AUTOTUNE)", "ds = ds.prefetch(tf.data.AUTOTUNE)"]
    assert 6 not in {s.line for s in b.after}


def test_a_function_that_uses_its_batches_itself_has_no_per_batch_map():
    """facenet: the model and the training loop after batch_join are not input pipeline."""
    p = only(READ + "    images = tf.train.batch([x], n)\n"
             "    logits = tf.layers.dense(images, 10)\n"
             "    loss = tf.reduce_mean(logits)\n"
             "    with tf.Session() as sess:\n"
             "        sess.run(loss)\n")
    assert p.variants[0].batch().after == [] and "_batch," not in p.chain


def test_a_batch_taken_apart_and_processed_per_element_is_flagged():
    """tf_cnn_benchmarks' CIFAR-10: unstack the batch, preprocess each image in a loop."""
    p = only(READ + "    images = tf.train.batch([x], n)\n"
             "    parts = tf.unstack(images, axis=0)\n"
             "    out = []\n"
             "    for i in range(n):\n"
             "        out.append(tf.image.random_flip_left_right(parts[i]))\n"
             "    return tf.parallel_stack(out)\n")
    assert any("per-example code" in note and "line 7" in note for note in p.notes)


# -- methods --------------------------------------------------------------------------------------

def test_a_method_pipeline_names_the_attributes_its_class_sets():
    """SfMLearner / nsynth: the plan of Class.method keeps its parameters and says where the
    self.x it uses are set."""
    report = plan(HEAD + "class Loader(object):\n"
                  "    def __init__(self, files, batch_size, threads=4):\n"
                  "        self.files = files\n"
                  "        self.batch_size = batch_size\n"
                  "        self.threads = threads\n"
                  "    def load(self, shuffle):\n"
                  "        q = tf.train.string_input_producer(self.files, shuffle=shuffle)\n"
                  "        _, v = tf.TFRecordReader().read(q)\n"
                  "        x = tf.parse_single_example(v, F)\n"
                  "        return tf.train.batch([x], self.batch_size, num_threads=self.threads)\n")
    (p,) = report.pipelines
    assert p.function == "Loader.load" and p.params == ("self", "shuffle")
    assert "from_tensor_slices(self.files)" in p.chain and "if shuffle:" in p.chain
    got = {(a.name, a.function, a.line, a.value) for a in p.attributes}
    assert got == {("self.files", "Loader.__init__", 4, "files"),
                   ("self.batch_size", "Loader.__init__", 5, "batch_size"),
                   ("self.threads", "Loader.__init__", 6, "threads")}
    assert any("self.batch_size = batch_size (Loader.__init__ line 5)" in ln for ln in p.legend)


def test_datasets_a_zip_takes_from_the_caller_are_unresolved_but_stay_parameters():
    p = only(HEAD + "def get_iterator(src, tgt, n):\n"
             "    ds = tf.data.Dataset.zip((src, tgt)).batch(n)\n"
             "    return ds.make_initializable_iterator()\n")
    assert p.chain.startswith("ds = tf.data.Dataset.zip((src, tgt))")
    assert {u.what for u in p.unresolved} == {"src (a parameter of get_iterator)",
                                              "tgt (a parameter of get_iterator)"}
    assert all(u.line == 3 for u in p.unresolved)


def test_graph_bookkeeping_is_not_per_example_code():
    p = only(READ + "    tf.add_to_collection('examples', x)\n"
             "    tf.summary.histogram('x', x)\n"
             "    return tf.train.batch([x], n)\n")
    assert [s.line for s in p.variants[0].maps()[0].steps] == [5]


def test_batches_only_put_into_a_record_need_no_per_batch_map():
    """pix2pix: ``return Examples(paths=..., inputs=..., count=len(paths))``."""
    p = only(HEAD + "import collections\n"
             "Examples = collections.namedtuple('Examples', 'inputs, count')\n"
             "def get(files, n):\n"
             "    q = tf.train.string_input_producer(files)\n"
             "    _, v = tf.TFRecordReader().read(q)\n"
             "    x = tf.parse_single_example(v, F)\n"
             "    batch = tf.train.batch([x], n)\n"
             "    return Examples(inputs=batch, count=len(files))\n")
    assert p.variants[0].batch().after == [] and p.unresolved == []


KEY_IN_HELPER = HEAD + """
def read_image(q):
    reader = tf.WholeFileReader()
    key, value = reader.read(q)
    image = tf.image.decode_jpeg(value, channels=3)
    label = tf.strings.length(key)
    return image, label

def inputs(files, n):
    q = tf.train.string_input_producer(files)
    image, label = read_image(q)
    return tf.train.shuffle_batch([image, label], batch_size=n, capacity=200,
                                  min_after_dequeue=100)
"""


@pytest.mark.parametrize("source", [KEY_IN_HELPER, KEY_IN_HELPER.replace(
    "tf.strings.length(key)", "tf.py_func(label_of, [key], tf.float32)")])
def test_a_reader_key_used_by_computation_keeps_the_file_name(source):
    """A label computed from the reader's key (the file name; Cat-GAN's py_func on it) makes
    the read hand out the path with the file: the key was only noticed when batched as it
    was, so the port dropped the label with 'unresolved: none'."""
    assert "map(lambda path: (path, tf.io.read_file(path))" in only(source).chain


COPIES_OVER_FILES = HEAD + """
def load(name):
    q = tf.train.string_input_producer([name], num_epochs=1)
    _, line = tf.TextLineReader().read(q)
    return tf.decode_csv(line, [[0.0], [0]])

def test_records(names, n):
    tensors = []
    for f in names:
        feat, label = load(f)
        tensors.append((feat, label))
    return tf.train.batch_join(tensors, batch_size=n, allow_smaller_final_batch=True)
"""


def test_copies_made_by_a_loop_over_files_read_every_file():
    """batch_join's copies made by ``for f in names`` each read their own file (a held-out
    bird-audio script): the source is ``names``, not the first copy's ``[f]``, and a queue of
    one file shuffled nothing."""
    (p,) = [p for p in plan(COPIES_OVER_FILES).pipelines if p.function == "test_records"]
    assert "from_tensor_slices(names)" in p.chain and "[f]" not in p.chain
    assert "shuffle(" not in p.chain and "cycle_length=len(names)" in p.chain
