"""``compare.migrate`` on real TF1-era scripts (tests/fixtures/real_scripts, sources in its
README): the findings (construct, line) and the facts of each pipeline's plan, table by table.

Every expected value was written by reading the script: lines are looked up by the text on them,
so each row says which statement it means. Facts, not wording: the chain's text is only checked
for the calls it must (or must not) make.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from compare.migrate import analyze_file
from tests.conftest import run_module

REAL = Path(__file__).resolve().parent / "fixtures" / "real_scripts"


def line_of(name: str, needle: str, nth: int = 1) -> int:
    """The 1-based line of the ``nth`` line of the fixture holding ``needle``."""
    found = [i for i, ln in enumerate((REAL / name).read_text().splitlines(), 1) if needle in ln]
    assert len(found) >= nth, (name, needle, found)
    return found[nth - 1]


def cell_line_of(name: str, needle: str) -> tuple[int, int]:
    """(cell number, line in the cell) of ``needle`` in a notebook fixture."""
    cells = json.loads((REAL / name).read_text())["cells"]
    for number, cell in enumerate(cells, 1):
        for i, ln in enumerate("".join(cell["source"]).split("\n"), 1):
            if needle in ln:
                return number, i
    raise AssertionError(needle)


_reports: dict = {}


def report(name: str):
    if name not in _reports:
        _reports[name] = analyze_file(REAL / name)
    return _reports[name]


def found(name: str) -> set[tuple[str, int]]:
    return {(f.rule.id, f.line) for f in report(name).findings}


def pipeline(name: str, function: str):
    matches = [p for p in report(name).pipelines if p.function == function]
    assert len(matches) == 1, [(p.function, p.line) for p in report(name).pipelines]
    return matches[0]


# -- findings: (rule, text on the line[, nth such line]) that must be reported ----------------

FINDINGS = {
    "cifar10_input.py": [
        ("fixed_length_record_reader", "reader = tf.FixedLengthRecordReader("),
        ("reader.read", "result.key, value = reader.read(filename_queue)"),
        ("shuffle_batch", "images, label_batch = tf.train.shuffle_batch("),
        ("batch", "images, label_batch = tf.train.batch("),
        ("string_input_producer", "filename_queue = tf.train.string_input_producer(", 1),
        ("string_input_producer", "filename_queue = tf.train.string_input_producer(", 2),
        ("random_crop", "distorted_image = tf.random_crop("),
        ("image.random_flip_left_right", "tf.image.random_flip_left_right(distorted_image)"),
        ("image.random_brightness", "tf.image.random_brightness(distorted_image"),
        ("image.random_contrast", "tf.image.random_contrast(distorted_image"),
    ],
    "fully_connected_reader.py": [
        ("tfrecord_reader", "reader = tf.TFRecordReader()"),
        ("reader.read", "_, serialized_example = reader.read(filename_queue)"),
        ("string_input_producer", "filename_queue = tf.train.string_input_producer("),
        ("shuffle_batch", "images, sparse_labels = tf.train.shuffle_batch("),
        ("coordinator", "coord = tf.train.Coordinator()"),
        ("start_queue_runners", "threads = tf.train.start_queue_runners("),
        ("coordinator.method", "while not coord.should_stop():"),
        ("session", "sess = tf.Session()"),
    ],
    "fully_connected_reader_dataset.py": [
        ("make_iterator", "iterator = dataset.make_one_shot_iterator()"),
        ("session", "with tf.Session() as sess:"),
    ],
    "im2txt_inputs.py": [
        ("string_input_producer", "filename_queue = tf.train.string_input_producer(", 1),
        ("string_input_producer", "filename_queue = tf.train.string_input_producer(", 2),
        ("random_shuffle_queue", "values_queue = tf.RandomShuffleQueue("),
        ("queue", "values_queue = tf.FIFOQueue("),
        ("reader.read", "_, value = reader.read(filename_queue)"),  # a reader passed in
        ("queue.method", "enqueue_ops.append(values_queue.enqueue([value]))"),
        ("add_queue_runner", "tf.train.queue_runner.add_queue_runner("),
        ("batch_join", "images, input_seqs, target_seqs, mask = tf.train.batch_join("),
    ],
    "inception_image_processing.py": [
        ("random_shuffle_queue", "examples_queue = tf.RandomShuffleQueue("),
        ("queue", "examples_queue = tf.FIFOQueue("),
        ("reader.read", "_, value = reader.read(filename_queue)"),  # reader = dataset.reader()
        ("reader.read", "_, example_serialized = reader.read(filename_queue)"),
        ("queue.method", "example_serialized = examples_queue.dequeue()"),
        ("batch_join", "images, label_index_batch = tf.train.batch_join("),
        ("sample_distorted_bounding_box", "sample_distorted_bounding_box = tf.image.sample_"),
        ("image.random_hue", "image = tf.image.random_hue(image, max_delta=0.2)", 1),
        ("image.random_hue", "image = tf.image.random_hue(image, max_delta=0.2)", 2),
    ],
    "pix2pix.py": [
        ("string_input_producer", "path_queue = tf.train.string_input_producer("),
        ("whole_file_reader", "reader = tf.WholeFileReader()"),
        ("reader.read", "paths, contents = reader.read(path_queue)"),
        ("batch", "paths_batch, inputs_batch, targets_batch = tf.train.batch("),
        ("image.random_flip_left_right", "r = tf.image.random_flip_left_right(r, seed=seed)"),
        ("random_uniform", "tf.random_uniform([2], 0, a.scale_size - CROP_SIZE + 1, seed=seed)"),
        ("set_random_seed", "tf.set_random_seed(a.seed)"),
        ("dropout", "output = tf.nn.dropout(output, keep_prob=1 - dropout)"),
        ("supervisor", "sv = tf.train.Supervisor("),
        ("placeholder", "input = tf.placeholder(tf.string, shape=[1])"),
    ],
    "wavenet_audio_reader.py": [
        ("placeholder", "self.sample_placeholder = tf.placeholder("),
        ("padding_fifo_queue", "self.queue = tf.PaddingFIFOQueue("),
        ("queue.method", "self.enqueue = self.queue.enqueue([self.sample_placeholder])"),
        ("queue.method", "output = self.queue.dequeue_many(num_elements)"),
        ("feed_dict", "feed_dict={self.sample_placeholder: piece})"),
        ("feeder_thread", "thread = threading.Thread(target=self.thread_main, args=(sess,))"),
    ],
    "caffe_tensorflow_dataset.py": [
        ("queue", "self.path_queue = tf.FIFOQueue("),
        ("queue", "processed_queue = tf.FIFOQueue("),
        ("queue.method", "self.enqueue_paths_op = self.path_queue.enqueue_many("),
        ("queue.method", "self.dequeue_op = processed_queue.dequeue_many(batch_size)"),
        ("queue_runner", "self.queue_runner = tf.train.QueueRunner("),
        ("queue_runner.method", "return self.queue_runner.create_threads("),
    ],
    "cyclegan_reader.py": [
        ("tfrecord_reader", "self.reader = tf.TFRecordReader()"),
        ("reader.read", "_, serialized_example = self.reader.read(filename_queue)"),
        ("shuffle_batch", "images = tf.train.shuffle_batch("),
    ],
    "mnist_softmax_xla.py": [
        ("placeholder", "x = tf.placeholder(tf.float32, [None, 784])"),
        ("jit_level_value", "jit_level = tf.OptimizerOptions.ON_1"),
        ("global_jit_level", "config.graph_options.optimizer_options.global_jit_level"),
        ("run_options", "options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)"),
        ("timeline", "trace = timeline.Timeline(step_stats=run_metadata.step_stats)"),
        ("feed_dict", "sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys})"),
        ("feed_dict", "feed_dict={x: mnist.test.images,"),
    ],
    "profiler_time_and_memory_snippet.py": [
        ("run_metadata", "run_metadata = tf.RunMetadata()"),
        ("session", "with tf.Session() as sess:"),
        ("run_options", "options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),"),
        ("tf1_profiler", "ProfileOptionBuilder = tf.profiler.ProfileOptionBuilder"),
        ("tf1_profiler", "tf.profiler.profile(", 1),
    ],
    "nmt_iterator_utils.py": [
        ("contrib_data", "tf.contrib.data.group_by_window("),
        ("make_iterator", "batched_iter = batched_dataset.make_initializable_iterator()", 1),
        ("make_iterator", "batched_iter = batched_dataset.make_initializable_iterator()", 2),
    ],
    "slim_eval_image_classifier.py": [
        ("slim_provider", "provider = slim.dataset_data_provider.DatasetDataProvider("),
        ("provider.get", "[image, label] = provider.get(['image', 'label'])"),
        ("batch", "images, labels = tf.train.batch("),
        ("slim_queue_runners", "slim.evaluation.evaluate_once("),
    ],
    "py2_tfrecord_test5.py": [
        ("string_input_producer", "filename_queue = tf.train.string_input_producer("),
        ("tfrecord_reader", "reader = tf.TFRecordReader()"),
        ("maybe_batch", "input_batch, label_batch = tf.train.maybe_shuffle_batch("),
        ("start_queue_runners", "threads = tf.train.start_queue_runners("),
    ],
    "video_prediction_input.py": [
        ("string_input_producer", "filename_queue = tf.train.string_input_producer("),
        ("tfrecord_reader", "reader = tf.TFRecordReader()"),
        ("batch", "[image_batch, action_batch, state_batch] = tf.train.batch("),
        ("batch", "image_batch = tf.train.batch("),
    ],
    # -- the held-out set of the second round (README) ------------------------------------------
    "sfmlearner_data_loader.py": [
        ("string_input_producer", "image_paths_queue = tf.train.string_input_producer("),
        ("string_input_producer", "cam_paths_queue = tf.train.string_input_producer("),
        ("whole_file_reader", "img_reader = tf.WholeFileReader()"),
        ("text_line_reader", "cam_reader = tf.TextLineReader()"),
        ("batch", "tf.train.batch([src_image_stack, tgt_image, intrinsics],"),
        ("random_uniform", "scaling = tf.random_uniform([2], 1, 1.15)"),
    ],
    "facenet_train_tripletloss.py": [
        ("queue", "input_queue = data_flow_ops.FIFOQueue(capacity=100000,"),
        ("queue.method", "filenames, label = input_queue.dequeue()"),
        ("random_crop", "image = tf.random_crop(image, [args.image_size, args.image_size, 3])"),
        ("image.random_flip_left_right", "image = tf.image.random_flip_left_right(image)"),
        ("batch_join", "image_batch, labels_batch = tf.train.batch_join("),
    ],
    "facenet_train_softmax.py": [
        ("range_input_producer", "index_queue = tf.train.range_input_producer("),
        ("queue.method", "index_dequeue_op = index_queue.dequeue_many("),
        ("queue", "input_queue = data_flow_ops.FIFOQueue(capacity=2000000,"),
    ],
    "yt8m_train.py": [
        ("string_input_producer", "filename_queue = tf.train.string_input_producer(files,"),
        ("shuffle_batch_join", "return tf.train.shuffle_batch_join(training_data,"),
    ],
    "yt8m_readers.py": [
        ("reader.read", "_, serialized_examples = reader.read_up_to(filename_queue, batch_size)"),
        ("reader.read", "_, serialized_example = reader.read(filename_queue)"),
    ],
    "began_data_loader.py": [
        ("string_input_producer", "filename_queue = tf.train.string_input_producer(list(paths)"),
        ("whole_file_reader", "reader = tf.WholeFileReader()"),
        ("shuffle_batch", "queue = tf.train.shuffle_batch("),
    ],
    "cloudml_census_estimator_model.py": [
        ("lookup_table", "table = tf.contrib.lookup.index_table_from_tensor("),
        ("string_input_producer", "filename_queue = tf.train.string_input_producer("),
        ("reader.read", "_, rows = reader.read_up_to(filename_queue, num_records=batch_size)"),
        ("shuffle_batch", "features = tf.train.shuffle_batch("),
        ("batch", "features = tf.train.batch("),
        ("estimator", "return tf.estimator.DNNLinearCombinedClassifier("),
    ],
    "seq2seq_training_utils.py": [
        ("bucket_by_sequence_length", "_, batch = tf.contrib.training.bucket_by_sequence_length("),
        ("batch", "batch = tf.train.batch("),
    ],
    "speech_wavenet_data.py": [  # import sugartensor as tf: read as TensorFlow
        ("slice_input_producer", "= tf.train.slice_input_producer([label_t, mfcc_file_t]"),
        ("batch", "batch_queue = tf.train.batch([label_q, mfcc_q], batch_size,"),
    ],
    "magenta_sequence_example_lib.py": [
        ("random_shuffle_queue", "shuffle_queue = tf.RandomShuffleQueue("),
        ("queue.method", "output_tensors = shuffle_queue.dequeue()"),
        ("string_input_producer", "file_queue = tf.train.string_input_producer(file_list)"),
        ("batch", "return tf.train.batch("),
    ],
    "nsynth_reader.py": [
        ("input_producer", "path_queue = tf.train.input_producer("),
        ("random_crop", "crop = tf.random_crop(wav, [length])"),
        ("shuffle_batch", "key, crop, pitch = tf.train.shuffle_batch(", 1),
        ("shuffle_batch", "key, crop, pitch = tf.train.shuffle_batch(", 2),
        ("batch", "instrument_source, instrument_family, qualities) = tf.train.batch("),
    ],
    "tf_cnn_benchmarks_preprocessing.py": [
        ("contrib_data", "interleave_ops.parallel_interleave("),
        ("contrib_data", "batching.map_and_batch("),
        ("make_iterator", "ds_iterator = ds.make_one_shot_iterator()"),
        ("record_input", "record_input = data_flow_ops.RecordInput("),
        ("record_input.get_yield_op", "records = record_input.get_yield_op()"),
        ("slice_input_producer", "input_image, input_label = tf.train.slice_input_producer("),
        ("shuffle_batch", "raw_images, raw_labels = tf.train.shuffle_batch("),
        ("batch", "raw_images, raw_labels = tf.train.batch("),
        ("truncated_normal", "images = tf.truncated_normal("),
    ],
    "resnet_cifar_input.py": [
        ("string_input_producer", "file_queue = tf.train.string_input_producer(data_files"),
        ("random_shuffle_queue", "example_queue = tf.RandomShuffleQueue("),
        ("queue", "example_queue = tf.FIFOQueue("),
        ("queue.method", "images, labels = example_queue.dequeue_many(batch_size)"),
        ("random_crop", "image = tf.random_crop(image, [image_size, image_size, 3])"),
    ],
    "py2_resnet_train_imagenet.py": [
        ("slice_input_producer", "filename, label_index = tf.train.slice_input_producer("),
        ("batch_join", "images, label_index_batch = tf.train.batch_join("),
    ],
    "ssd_train_ssd_network.py": [
        ("slim_provider", "provider = slim.dataset_data_provider.DatasetDataProvider("),
        ("provider.get", "[image, shape, glabels, gbboxes] = provider.get(['image', 'shape',"),
        ("batch", "r = tf.train.batch("),
    ],
    "aymericdamien_estimator_numpy_input_fn.py": [
        ("estimator", "model = tf.estimator.Estimator(model_fn)"),
        ("numpy_input_fn", "input_fn = tf.estimator.inputs.numpy_input_fn(", 1),
        ("numpy_input_fn", "input_fn = tf.estimator.inputs.numpy_input_fn(", 2),
    ],
    "aymericdamien_dcgan_feed_dict.py": [
        ("feed_dict", "feed_dict=feed_dict)"),
        ("feed_dict", "g = sess.run(gen_sample, feed_dict={noise_input: z})"),
    ],
}


@pytest.mark.parametrize("name,rule,needle,nth", [
    (name, row[0], row[1], row[2] if len(row) > 2 else 1)
    for name, rows in FINDINGS.items() for row in rows])
def test_real_script_findings(name, rule, needle, nth):
    assert (rule, line_of(name, needle, nth)) in found(name)


def test_notebook_findings_name_cell_and_line():
    name = "build_an_image_dataset.ipynb"
    got = {(f.rule.id, f.cell, f.line) for f in report(name).findings}
    for rule, needle in (("slice_input_producer", "image, label = tf.train.slice_input_producer"),
                         ("batch", "X, Y = tf.train.batch([image, label]"),
                         ("start_queue_runners", "tf.train.start_queue_runners()"),
                         ("session", "with tf.Session() as sess:")):
        assert (rule, *cell_line_of(name, needle)) in got, rule
    assert any("Notebook" in n for n in report(name).notes)


# -- plans: the facts of every pipeline --------------------------------------------------------

PIPELINE_COUNT = {
    "cifar10_input.py": 2, "fully_connected_reader.py": 1, "fully_connected_reader_dataset.py": 1,
    "im2txt_inputs.py": 2, "inception_image_processing.py": 1, "pix2pix.py": 1,
    "wavenet_audio_reader.py": 3, "caffe_tensorflow_dataset.py": 1, "cyclegan_reader.py": 1,
    "mnist_softmax_xla.py": 0, "profiler_time_and_memory_snippet.py": 0,
    "nmt_iterator_utils.py": 2, "slim_eval_image_classifier.py": 1,
    "build_an_image_dataset.ipynb": 1, "py2_tfrecord_test5.py": 1,
    "video_prediction_input.py": 1,
    "sfmlearner_data_loader.py": 1, "facenet_train_tripletloss.py": 1,
    "facenet_train_softmax.py": 2, "yt8m_train.py": 1, "yt8m_readers.py": 2,
    "began_data_loader.py": 1, "cloudml_census_estimator_model.py": 1,
    "seq2seq_training_utils.py": 1, "speech_wavenet_data.py": 1,
    "magenta_sequence_example_lib.py": 1, "nsynth_reader.py": 3,
    "tf_cnn_benchmarks_preprocessing.py": 3, "resnet_cifar_input.py": 1,
    "py2_resnet_train_imagenet.py": 1, "ssd_train_ssd_network.py": 1,
    "aymericdamien_estimator_numpy_input_fn.py": 2, "aymericdamien_dcgan_feed_dict.py": 0,
    "aymericdamien_tensorflow_dataset_api.ipynb": 1,
    "tacotron_datafeeder.py": 1, "contextual_lstm_input_pipeline.py": 1,
    "caicloud_queue_runner.ipynb": 1, "tf_docs_simple_shuffle_batch.py": 1,
    "kwaugh_multithread_generator.py": 1,
}


@pytest.mark.parametrize("name,count", sorted(PIPELINE_COUNT.items()))
def test_pipeline_count_and_valid_tf_data_code(name, count):
    pipelines = report(name).pipelines
    assert len(pipelines) == count, [(p.function, p.line) for p in pipelines]
    for p in pipelines:
        ast.parse(p.chain)  # the chain is Python, unresolved parts written as "..."
        assert ".prefetch(" in p.chain.splitlines()[-1]  # ours, or the script's own
        assert all(u.what and u.why and u.line for u in p.unresolved)


def test_scripts_without_a_pipeline_get_no_chain():
    for name in ("mnist_softmax_xla.py", "profiler_time_and_memory_snippet.py"):
        r = report(name)
        assert r.pipelines == [] and "ds = " not in r.to_text()
        assert "No " in r.plan and "pipeline" in r.plan
    assert "feed_dict" in report("mnist_softmax_xla.py").plan
    assert any("import tensorflow as tf" in n
               for n in report("profiler_time_and_memory_snippet.py").notes)


def test_cifar10_train_and_eval_are_planned_apart():
    name = "cifar10_input.py"
    train, evaluation = pipeline(name, "distorted_inputs"), pipeline(name, "inputs")
    assert train.line == line_of(name, "images, label_batch = tf.train.shuffle_batch(")
    assert evaluation.line == line_of(name, "images, label_batch = tf.train.batch(")
    (tv,), (ev,) = train.variants, evaluation.variants
    for v in (tv, ev):
        assert v.source.kind == "files" and v.source.data.text == "filenames"
        # the defaults: shuffled each epoch, repeated forever
        assert v.source.shuffle is None and v.source.num_epochs is None
        read = v.stages[0]
        assert read.reader == "fixed_length" and read.args["record_bytes"].value == 3073
        assert v.maps()[0].parallel.text == "cpu_count()"  # num_threads=num_preprocess_threads
    assert tv.batch().op == "shuffle_batch" and ev.batch().op == "batch"
    assert tv.batch().arg("min_after_dequeue").text == "min_queue_examples"
    assert "ds = ds.shuffle(min_queue_examples)" in train.chain
    assert "shuffle(min_queue_examples)" not in evaluation.chain
    assert "drop_remainder=True" in train.chain and "drop_remainder=True" in evaluation.chain
    train_calls = {c for s in tv.maps()[0].steps for c in s.calls}
    eval_calls = {c for s in ev.maps()[0].steps for c in s.calls}
    assert "tensorflow.random_crop" in train_calls and "tensorflow.random_crop" not in eval_calls
    assert "tensorflow.image.resize_image_with_crop_or_pad" in eval_calls - train_calls
    assert len(tv.maps()[0].random) == 4 and ev.maps()[0].random == []
    assert train.unresolved == [] and evaluation.unresolved == []


def test_fully_connected_reader_epochs_and_threads():
    name = "fully_connected_reader.py"
    p = pipeline(name, "inputs")
    (v,) = p.variants
    assert p.line == line_of(name, "images, sparse_labels = tf.train.shuffle_batch(")
    assert v.source.data.text == "[filename]" and v.source.num_epochs.text == "num_epochs"
    assert "ds = ds.repeat(num_epochs)" in p.chain and ".shuffle(1)" not in p.chain
    assert v.stages[0].reader == "tfrecord"
    assert v.maps()[0].parallel.value == 2
    assert v.batch().arg("min_after_dequeue").value == 1000
    assert v.batch().arg("capacity").text == "1000 + 3 * batch_size"


def test_fully_connected_reader_dataset_keeps_its_tf_data_chain():
    name = "fully_connected_reader_dataset.py"
    p = pipeline(name, "inputs")
    assert p.kind == "tf.data" and p.line == line_of(name, "dataset = dataset.batch(batch_size)")
    (v,) = p.variants
    assert v.source.kind == "dataset"
    assert [o.method for o in v.stages[0].ops] == ["map", "map", "map", "shuffle", "repeat",
                                                   "batch"]
    assert "make_one_shot_iterator" not in p.chain


def test_im2txt_dynamic_pad_and_a_reader_passed_in():
    name = "im2txt_inputs.py"
    pad = pipeline(name, "batch_with_dynamic_pad")
    assert pad.line == line_of(name, "images, input_seqs, target_seqs, mask = tf.train.batch_join(")
    (v,) = pad.variants
    batch = v.batch()
    assert batch.op == "batch_join" and batch.padded and batch.copies.text == (
        "len(images_and_captions)")
    assert "padded_batch(batch_size, drop_remainder=True)" in pad.chain
    assert "interleave" not in pad.chain
    assert v.maps()[0].parallel.text == "len(images_and_captions)"
    assert v.source.kind == "unknown"
    assert any("images_and_captions" in u.what for u in pad.unresolved)
    pre = pipeline(name, "prefetch_input_data")
    assert pre.line == line_of(name, "enqueue_ops.append(values_queue.enqueue([value]))")
    assert {w for v in pre.variants for w in v.when} == {("is_training", True),
                                                         ("is_training", False)}
    assert "if is_training:" in pre.chain and "ds.shuffle(min_queue_examples)" in pre.chain
    assert any(u.what.startswith("reader") and u.line == line_of(
        name, "_, value = reader.read(filename_queue)") for u in pre.unresolved)
    assert "TFRecordDataset" not in pre.chain  # the reader is unknown: nothing invented
    read = pre.variants[0].stages[0]
    assert read.reader == "unknown" and read.readers.text == "num_reader_threads"


def test_inception_copies_become_one_parallel_map():
    name = "inception_image_processing.py"
    p = pipeline(name, "batch_inputs")
    assert p.line == line_of(name, "images, label_index_batch = tf.train.batch_join(")
    assert len(p.variants) == 4  # train x (num_readers > 1)
    for v in p.variants:
        assert v.batch().copies.text == "num_preprocess_threads"
        assert v.maps()[-1].parallel.text == "num_preprocess_threads"
    assert "interleave(..., cycle_length=num_readers" in p.chain
    assert "if train:" in p.chain and "if num_readers > 1:" in p.chain
    whats = " ".join(u.what for u in p.unresolved)
    assert "dataset.reader()" in whats and "thread_id" in whats
    train = next(v for v in p.variants if ("train", True) in v.when)
    fns = {s.function for s in train.maps()[-1].steps}
    assert {"parse_example_proto", "decode_jpeg", "distort_image", "distort_color"} <= fns
    assert len(train.maps()[-1].random) == 10


def test_pix2pix_conditional_shuffle_and_shared_seed():
    name = "pix2pix.py"
    p = pipeline(name, "load_examples")
    assert p.line == line_of(name, "paths_batch, inputs_batch, targets_batch = tf.train.batch(")
    (v,) = p.variants
    assert v.source.shuffle.text == 'a.mode == "train"' and not v.source.shuffle.known
    assert 'if a.mode == "train":\n    ds = ds.shuffle(' in p.chain
    read = v.stages[0]
    assert read.reader == "whole_file" and read.key_used  # the paths are batched too
    draws = v.maps()[0].random
    assert {(d.line, d.uses) for d in draws} == {
        (line_of(name, "r = tf.image.random_flip_left_right(r, seed=seed)"), 2),
        (line_of(name, "tf.random_uniform([2], 0, a.scale_size"), 2)}
    assert all(d.seed.text == "seed" and len(d.shares_seed_with) == 1 for d in draws)
    assert v.root_seed.text == "a.seed"
    assert v.batch().arg("batch_size").text == "a.batch_size"
    assert p.unresolved == []


def test_wavenet_feeder_threads_become_generators():
    name = "wavenet_audio_reader.py"
    for fn, needle in (("AudioReader.dequeue", "output = self.queue.dequeue_many(num_elements)"),
                       ("AudioReader.dequeue_gc", "return self.gc_queue.dequeue_many("),
                       ("AudioReader.dequeue_lc", "return self.lc_queue.dequeue_many(")):
        p = pipeline(name, fn)
        assert p.line == line_of(name, needle) and p.kind == "feeding"
        (v,) = p.variants
        feeder = v.source.feeder
        assert v.source.kind == "generator" and feeder.function == "AudioReader.thread_main"
        assert feeder.thread and feeder.feeds
        assert v.batch().op == "dequeue_many" and v.batch().padded
        assert "from_generator(" in p.chain and "padded_batch(num_elements, drop_remainder=True)" \
            in p.chain
    assert pipeline(name, "AudioReader.dequeue").variants[0].when == ()
    assert pipeline(name, "AudioReader.dequeue_gc").variants[0].when == (
        ("self.gc_enabled", True),)


def test_caffe_explicit_queues():
    name = "caffe_tensorflow_dataset.py"
    p = pipeline(name, "ImageProducer.setup")
    assert p.line == line_of(name, "self.dequeue_op = processed_queue.dequeue_many(batch_size)")
    (v,) = p.variants
    assert v.source.kind == "rows" and not v.source.repeat  # enqueued once, then closed
    assert "indices" in v.source.data.text
    assert v.maps()[0].parallel.text == "num_concurrent"  # QueueRunner([op] * num_concurrent)
    assert v.batch().op == "dequeue_many" and "drop_remainder=True" in p.chain


def test_cyclegan_reader_kept_on_self():
    name = "cyclegan_reader.py"
    p = pipeline(name, "Reader.feed")
    (v,) = p.variants
    read = v.stages[0]
    assert read.reader == "tfrecord" and read.made.line == line_of(
        name, "self.reader = tf.TFRecordReader()")
    assert v.maps()[0].parallel.text == "self.num_threads"
    assert v.batch().arg("min_after_dequeue").text == "self.min_queue_examples"
    assert any("utils.convert2float" in u.what for u in p.unresolved)


def test_nmt_tf_contrib_data_and_iterators():
    name = "nmt_iterator_utils.py"
    infer = pipeline(name, "get_infer_iterator")
    assert any("src_dataset" in u.what for u in infer.unresolved)
    assert "if src_max_len:" in infer.chain
    it = pipeline(name, "get_iterator")
    assert "tf.contrib" not in it.chain and "make_initializable_iterator" not in it.chain
    assert "ds.group_by_window(" in it.chain and "if num_buckets > 1:" in it.chain
    assert "if skip_count is not None:" in it.chain


def test_slim_provider_is_unresolved_not_invented():
    name = "slim_eval_image_classifier.py"
    p = pipeline(name, "main")
    assert p.line == line_of(name, "images, labels = tf.train.batch(")
    (v,) = p.variants
    assert v.source.kind == "provider" and v.source.shuffle.value is False
    assert v.maps()[0].parallel.text == "FLAGS.num_preprocessing_threads"
    whats = " ".join(u.what for u in p.unresolved)
    assert "DatasetDataProvider" in whats and "image_preprocessing_fn" in whats
    assert "TFRecordDataset" not in p.chain


def test_notebook_pipeline_in_its_cell():
    name = "build_an_image_dataset.ipynb"
    p = pipeline(name, "read_images")
    assert (p.cell, p.line) == cell_line_of(name, "X, Y = tf.train.batch([image, label]")
    (v,) = p.variants
    assert v.source.kind == "rows" and v.maps()[0].parallel.value == 4
    assert "ds = ds.shuffle(ds.cardinality())" in p.chain


def test_python2_script_is_analysed_with_a_note():
    name = "py2_tfrecord_test5.py"
    r = report(name)
    assert any("Python 2" in n and "print statement" in n for n in r.notes)
    p = pipeline(name, "<module>")
    (v,) = p.variants
    assert v.batch().op == "maybe_shuffle_batch" and v.batch().arg("keep_input").value is True
    assert ".filter(" not in p.chain  # keep_input=True keeps everything
    assert v.maps()[0].parallel.text == "thread"


def test_video_prediction_two_batch_calls_under_a_flag_are_one_pipeline():
    """The script batches (image, action, state) if FLAGS.use_state, else the images alone:
    one pipeline with a variant per batch call, under the flag."""
    name = "video_prediction_input.py"
    (p,) = report(name).pipelines
    state_line = line_of(name, "[image_batch, action_batch, state_batch] = tf.train.batch(")
    plain_line = line_of(name, "image_batch = tf.train.batch(")
    assert p.function == "build_tfrecord_input" and p.line == state_line
    assert [e.line for e in p.ends] == [state_line, plain_line]
    by_when = {v.when: v for v in p.variants}
    assert by_when[(("FLAGS.use_state", True),)].batch().site.line == state_line
    assert by_when[(("FLAGS.use_state", False),)].batch().site.line == plain_line
    assert any("df['image_decoder']" in u.what for u in p.unresolved)


@pytest.mark.slow  # one CLI process per real script
def test_cli_runs_on_every_real_script():
    for path in sorted(REAL.glob("*.py")) + sorted(REAL.glob("*.ipynb")):
        proc = run_module("compare.migrate", str(path), "--json", timeout=120)
        assert proc.returncode == 0 and proc.stderr == "", (path.name, proc.stderr)
        doc = json.loads(proc.stdout)
        assert len(doc["pipelines"]) == PIPELINE_COUNT[path.name]
        for p in doc["pipelines"]:
            assert {"function", "line", "chain", "unresolved"} <= set(p)


# -- the held-out set of the second round: facts of each plan (README, hand analysis) -----------

def calls_of(steps) -> set[str]:
    return {c for st in steps for c in st.calls}


def test_sfmlearner_two_producers_with_one_seed_are_one_zipped_source():
    name = "sfmlearner_data_loader.py"
    p = pipeline(name, "DataLoader.load_train_batch")
    assert p.line == line_of(name, "tf.train.batch([src_image_stack, tgt_image, intrinsics],")
    assert "self" in p.params
    (v,) = p.variants
    assert v.source.kind == "rows" and v.source.seed.text == "seed"
    assert "file_list['image_file_list']" in v.source.data.text
    assert "file_list['cam_file_list']" in v.source.data.text
    assert [b.stages[0].reader for b in v.branches] == ["whole_file", "text_line"]
    example = calls_of(v.maps()[0].steps)
    assert {"tensorflow.image.decode_jpeg", "tensorflow.decode_csv"} <= example
    batch = v.batch()
    assert batch.arg("batch_size").text == "self.batch_size" and "drop_remainder=True" in p.chain
    assert "tensorflow.image.resize_area" in calls_of(batch.after)  # augmentation per batch
    assert {d.line for d in batch.after_random} == {
        line_of(name, "scaling = tf.random_uniform([2], 1, 1.15)"),
        line_of(name, "offset_y = tf.random_uniform("), line_of(name, "offset_x = tf.random_uniform(")}
    assert {a.name for a in p.attributes} >= {"self.batch_size"}
    assert p.unresolved == []


def test_facenet_triplet_feeding_batch_join_and_a_placeholder_batch_size():
    name = "facenet_train_tripletloss.py"
    p = pipeline(name, "main")
    assert p.line == line_of(name, "image_batch, labels_batch = tf.train.batch_join(")
    (v,) = p.variants
    assert v.source.kind == "generator" and p.kind == "feeding"
    batch = v.batch()
    assert batch.copies.text == "nrof_preprocess_threads"
    assert "ds.unbatch()" in p.chain and "drop_remainder=False" in p.chain
    assert {d.line for d in v.maps()[0].random} == {
        line_of(name, "image = tf.random_crop(image, [args.image_size"),
        line_of(name, "image = tf.image.random_flip_left_right(image)")}
    assert batch.after == []  # the model and the session loop are not input pipeline
    whats = " ".join(u.what for u in p.unresolved)
    assert "batch_size_placeholder" in whats and "(the generator)" in whats


def test_facenet_softmax_queue_batched_by_another_module():
    name = "facenet_train_softmax.py"
    index = next(p for p in report(name).pipelines if p.line == line_of(
        name, "index_dequeue_op = index_queue.dequeue_many("))
    assert index.variants[0].source.kind == "range"
    handed = next(p for p in report(name).pipelines if p.line == line_of(
        name, "image_batch, label_batch = facenet.create_input_pipeline("))
    assert handed.end.construct == "facenet.create_input_pipeline"
    assert any("facenet.create_input_pipeline" in u.what for u in handed.unresolved)


def test_yt8m_train_is_one_pipeline_through_a_reader_from_elsewhere():
    name = "yt8m_train.py"
    p = pipeline(name, "get_input_data_tensors")
    assert p.line == line_of(name, "return tf.train.shuffle_batch_join(training_data,")
    (v,) = p.variants
    assert v.source.kind == "files" and v.source.data.text == "files"
    read = v.stages[0]
    assert read.external and read.readers.text == "num_readers"
    assert "ds.unbatch()" in p.chain and "ds.shuffle(batch_size)" in p.chain
    assert "drop_remainder=False" in p.chain
    assert any(u.line == line_of(name, "reader.prepare_reader(filename_queue) for _ in range")
               for u in p.unresolved)


def test_yt8m_readers_read_a_queue_from_the_caller():
    name = "yt8m_readers.py"
    agg = pipeline(name, "YT8MAggregatedFeatureReader.prepare_reader")
    assert agg.line == line_of(name, "_, serialized_examples = reader.read_up_to(")
    assert agg.variants[0].stages[0].up_to.text == "batch_size"
    assert any("filename queue" in u.what for u in agg.unresolved)
    frame = pipeline(name, "YT8MFrameFeatureReader.prepare_reader")
    assert "tensorflow.add_to_collection" not in calls_of(agg.variants[0].maps()[0].steps)
    assert any("utils.Dequantize" in u.what for u in frame.unresolved)


def test_began_per_batch_resize_after_shuffle_batch():
    name = "began_data_loader.py"
    p = pipeline(name, "get_loader")
    assert p.line == line_of(name, "queue = tf.train.shuffle_batch(")
    (v,) = p.variants
    assert v.source.shuffle.value is False and v.maps()[0].parallel.value == 4
    assert "ds = ds.shuffle(min_after_dequeue)" in p.chain  # 5000
    after = calls_of(v.batch().after)
    assert {"tensorflow.image.resize_nearest_neighbor", "tensorflow.transpose",
            "tensorflow.to_float"} <= after


def test_cloudml_one_input_fn_with_its_shuffle_condition():
    name = "cloudml_census_estimator_model.py"
    p = pipeline(name, "input_fn")
    assert [e.line for e in p.ends] == [line_of(name, "features = tf.train.shuffle_batch("),
                                        line_of(name, "features = tf.train.batch(")]
    assert {v.when for v in p.variants} == {(("shuffle", True),), (("shuffle", False),)}
    assert "if shuffle:\n    ds = ds.shuffle(2 * batch_size + 1)" in p.chain
    assert "ds = ds.batch(batch_size)\n" in p.chain  # read_up_to(batch_size)
    assert p.unresolved == []  # zip and dict are Python's own
    after = calls_of(p.variants[0].batch().after)
    assert "tensorflow.contrib.lookup.index_table_from_tensor" in after
    assert any("tf.lookup.StaticHashTable" in ln for ln in p.legend)


def test_seq2seq_input_fn_with_buckets_on_tensors_from_elsewhere():
    name = "seq2seq_training_utils.py"
    p = pipeline(name, "create_input_fn.input_fn")
    assert [e.line for e in p.ends] == [
        line_of(name, "_, batch = tf.contrib.training.bucket_by_sequence_length("),
        line_of(name, "batch = tf.train.batch(")]
    assert "ds.bucket_by_sequence_length(" in p.chain and "ds.padded_batch(batch_size" in p.chain
    assert "drop_remainder=not allow_smaller_final_batch" in p.chain
    assert p.chain.startswith("ds = ...  # unresolved")
    assert any("pipeline.read_from_data_provider" in u.what for u in p.unresolved)


def test_speech_sugartensor_read_as_tensorflow():
    name = "speech_wavenet_data.py"
    r = report(name)
    assert any("sugartensor" in n for n in r.notes)
    p = pipeline(name, "SpeechCorpus.__init__")
    assert p.line == line_of(name, "batch_queue = tf.train.batch([label_q, mfcc_q], batch_size,")
    (v,) = p.variants
    assert v.source.kind == "rows" and v.maps()[0].parallel.value == 64
    assert "padded_batch(batch_size, padded_shapes=((None,), (20, None))" in p.chain
    assert any("_load_mfcc" in u.what and "sg_producer_func" in u.what for u in p.unresolved)


def test_magenta_shuffle_helper_is_inlined():
    name = "magenta_sequence_example_lib.py"
    p = pipeline(name, "get_padded_batch")
    assert "if shuffle:" in p.chain and "ds.shuffle(min_after_dequeue)" in p.chain
    assert "padded_batch(batch_size, drop_remainder=True)" in p.chain
    assert "from_tensor_slices(input_tensors)" not in p.chain


def test_nsynth_methods_a_list_of_one_path_and_if_else_batches():
    name = "nsynth_reader.py"
    for p in report(name).pipelines:
        assert p.chain.startswith("ds = tf.data.Dataset.from_tensor_slices([self.record_path])")
        assert "self.record_path" in {a.name for a in p.attributes}
    wave = pipeline(name, "NSynthDataset.get_wavenet_batch")
    assert [e.line for e in wave.ends] == [
        line_of(name, "key, crop, pitch = tf.train.shuffle_batch(", 1),
        line_of(name, "key, crop, pitch = tf.train.shuffle_batch(", 2)]
    train = next(v for v in wave.variants if ("self.is_training", True) in v.when)
    assert [d.line for d in train.maps()[0].random] == [line_of(name, "crop = tf.random_crop(")]
    base = pipeline(name, "NSynthDataset.get_baseline_batch")
    assert "ds.unbatch()" in base.chain and "if self.is_training:" in base.chain


def test_tf_cnn_chains_traced_back_and_record_input():
    name = "tf_cnn_benchmarks_preprocessing.py"
    rec = pipeline(name, "RecordInputImagePreprocessor.minibatch")
    assert {v.when for v in rec.variants} == {(("use_datasets", True),),
                                             (("use_datasets", False),)}
    data = next(v for v in rec.variants if v.when == (("use_datasets", True),))
    assert [b.name for b in data.branches] == ["ds", "counter"]
    assert "ds = tf.data.TFRecordDataset.list_files(file_names)" in rec.chain
    assert "cycle_length=10" in rec.chain and "if cache_data:" in rec.chain
    records = next(v for v in rec.variants if v.when == (("use_datasets", False),))
    assert records.stages[0].readers.value == 64 and "shuffle(10000, seed=301)" in rec.chain
    assert records.batch().op == "get_yield_op"
    cifar = pipeline(name, "Cifar10ImagePreprocessor.minibatch")
    assert "tensorflow.random_crop" in calls_of(cifar.variants[0].batch().after)
    assert any("per-example code" in n for n in cifar.notes)


def test_resnet_cifar_explicit_queues_by_mode():
    name = "resnet_cifar_input.py"
    p = pipeline(name, "build_input")
    assert p.line == line_of(name, "images, labels = example_queue.dequeue_many(batch_size)")
    assert "if mode == 'train':\n    ds = ds.shuffle(8 * batch_size)" in p.chain
    assert all(v.maps()[0].parallel.text == "num_threads" for v in p.variants)
    assert "tensorflow.sparse_to_dense" in calls_of(p.variants[0].batch().after)


def test_py2_resnet_copies_and_imported_preprocessing():
    name = "py2_resnet_train_imagenet.py"
    assert any("Python 2" in n for n in report(name).notes)
    p = pipeline(name, "distorted_inputs")
    (v,) = p.variants
    assert v.batch().copies.text == "num_preprocess_threads"
    whats = " ".join(u.what for u in p.unresolved)
    assert "image_preprocessing" in whats and "thread_id" in whats


def test_ssd_provider_shuffles_records_with_parallel_readers():
    name = "ssd_train_ssd_network.py"
    p = pipeline(name, "main")
    assert p.line == line_of(name, "r = tf.train.batch(")
    assert "cycle_length=FLAGS.num_readers" in p.chain
    assert "ds = ds.shuffle(10 * FLAGS.batch_size)" in p.chain  # common_queue_min
    whats = " ".join(u.what for u in p.unresolved)
    assert "ssd_net.bboxes_encode" in whats and "tf_utils.reshape_list" in whats
    assert "TFRecordDataset" not in p.chain


def test_numpy_input_fns_are_pipelines():
    name = "aymericdamien_estimator_numpy_input_fn.py"
    train, evaluation = report(name).pipelines
    assert "ds.repeat()" in train.chain and "ds.shuffle(250)" in train.chain
    assert ".shuffle(" not in evaluation.chain and ".repeat(" not in evaluation.chain
    assert "mnist.test.labels" in evaluation.chain
    assert "Keras" in report(name).plan


def test_feed_dict_gan_has_no_chain_and_the_notebook_keeps_its_own():
    assert report("aymericdamien_dcgan_feed_dict.py").pipelines == []
    nb = "aymericdamien_tensorflow_dataset_api.ipynb"
    (p,) = report(nb).pipelines
    assert p.kind == "tf.data" and p.cell is not None
    assert [o.method for o in p.variants[0].stages[0].ops] == ["repeat", "batch", "prefetch"]


# -- issue 30: pipelines built by hand (README, last rows) -----------------------------------------

def test_tacotron_feeder_thread_subclass_with_a_zipped_feed_dict():
    name = "tacotron_datafeeder.py"
    p = pipeline(name, "DataFeeder.__init__")
    assert p.line == line_of(name, "queue.dequeue()") and p.kind == "feeding"
    feeder = p.variants[0].source.feeder
    assert feeder.function == "DataFeeder._enqueue_next_group" and feeder.thread  # Thread subclass
    assert feeder.feeds == [(line_of(name, "feed_dict = dict(zip(self._placeholders"),
                             "_prepare_batch(batch, r) (one value per placeholder of "
                             "self._placeholders)")]
    assert [s for s, _ in feeder.signature] == [
        "[None, None]", "[None]", "[None, None, hparams.num_mels]", "[None, None, hparams.num_freq]"]
    assert "ds = ds.unbatch()" not in p.chain  # enqueue: each element is a whole batch
    assert p.chain.startswith("ds = tf.data.Dataset.from_generator(enqueue_next_group_values, ")


def test_contextual_lstm_feeder_thread_with_enqueue_many_then_batch():
    name = "contextual_lstm_input_pipeline.py"
    (p,) = report(name).pipelines
    assert p.line == line_of(name, "data_batch, target_batch = tf.train.batch(")
    feeder = p.variants[0].source.feeder
    assert feeder.function == "enqueue" and feeder.thread
    assert feeder.signature == [("[20, 4]", "tf.float32"), ("[20, 3]", "tf.float32")]  # chunks
    assert p.chain.split("\n")[1:3] == ["ds = ds.unbatch()",
                                        "ds = ds.batch(15, drop_remainder=True)"]


def test_caicloud_queue_runner_over_a_random_op():
    name = "caicloud_queue_runner.ipynb"
    (p,) = report(name).pipelines
    (v,) = p.variants
    assert (p.cell, p.line) == cell_line_of(name, "out_tensor = queue.dequeue()")
    assert v.source.kind == "computed" and v.source.endless
    (st,) = v.maps()
    assert st.parallel.text == "5" and [d.stateless for d in st.random] == [
        "tf.random.stateless_normal"]
    assert "shuffle" not in "\n".join(p.legend) and p.unresolved == []


def test_tf_docs_queue_runner_fed_by_a_dataset_iterator_is_one_pipeline():
    name = "tf_docs_simple_shuffle_batch.py"
    (p,) = report(name).pipelines
    assert p.function == "<module>" and p.line == line_of(name, "return queue.dequeue_many(")
    assert p.chain.split("\n") == [
        "ds = tf.data.Dataset.from_tensor_slices(input)", "ds = ds.shuffle(int(0.9 * 20))",
        "ds = ds.batch(10, drop_remainder=True)", "ds = ds.prefetch(tf.data.AUTOTUNE)"]
    assert p.unresolved == []


def test_kwaugh_queue_runner_over_py_func_in_the_constructor():
    name = "kwaugh_multithread_generator.py"
    p = pipeline(name, "AsyncRunner.get_inputs")
    (v,) = p.variants
    assert v.source.kind == "computed" and v.source.data.text == "get_data_op"
    assert calls_of(v.maps()[0].steps) == {"tensorflow.py_func"}
    # cap and min_after are the constructor's, never kept: unresolved, not self.cap
    assert "self.cap" not in p.chain + "\n".join(p.legend)
    assert [u.what for u in p.unresolved] == ["cap (a parameter of AsyncRunner.__init__)",
                                              "min_after (a parameter of AsyncRunner.__init__)"]
