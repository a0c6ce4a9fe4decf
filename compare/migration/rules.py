"""What ``compare.migrate`` recognises in a TF1 script, and what it recommends instead.

Every construct is a :class:`Rule` keyed by canonical qualified names (``tensorflow.train.batch``):
the scanner resolves the script's import aliases and spellings (``tf.compat.v1.train.batch``,
``from tensorflow.python.training import input``) to those names with :func:`canonical`, so a
user's own function called ``batch`` never matches. Methods on objects a recognised call returned
(``reader.read``, ``coord.join``) are :class:`MethodRule` s keyed by the kind of object.

The pitfalls are the ones measured on TF 2.21 CPU while porting the seed script (BENCHMARKS.md,
"XLA:CPU: what it did to the port, and what we changed"); the pointers name the files of our own
port.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

#: The report's categories, in the order the report lists them.
CATEGORIES: tuple[str, ...] = (
    "queue_input", "reader", "batching", "tf_data_v1", "feeding", "queue_runner",
    "stateful_random", "xla_jit", "tracing", "session", "tf1_only",
)

CATEGORY_TITLES: dict[str, str] = {
    "queue_input": "Queue-based input producers and queues",
    "reader": "File readers",
    "batching": "Queue batching",
    "tf_data_v1": "TF1-style tf.data: iterators and tf.contrib.data",
    "feeding": "Feeding from Python: placeholders, feed_dict and feeder threads",
    "queue_runner": "Queue runners and their coordinator",
    "stateful_random": "Stateful random ops",
    "xla_jit": "XLA through jit_scope / auto-clustering",
    "tracing": "Tracing with FULL_TRACE and timeline.py",
    "session": "Session and its configuration",
    "tf1_only": "Other APIs TF 2 removed (tf.contrib lookup tables)",
}

#: Advice that holds for every construct of a category; the report says it once per category.
CATEGORY_NOTES: dict[str, str] = {
    "stateful_random": (
        "Seeds: keep one root seed and split it with tf.random.experimental.stateless_split("
        "root, num=n) into one shape-[2] seed per draw, so every run repeats exactly."),
}

#: Pitfalls we measured (TF 2.21, CPU, 2 cores), by id.
PITFALLS: dict[str, str] = {
    "map_recompile": (
        "A tf.function(jit_compile=True) called inside Dataset.map recompiled on every element "
        "when input shapes varied: 7.2 s per image. Keep the compiled function's input shapes "
        "static (or call it outside the map) so it compiles once per shape."),
    "resize_static": (
        "XLA's ResizeBilinear needs its output size at compile time, so an aspect-preserving "
        "resize cannot live in the compiled function: decode and resize stay in tf.data."),
    "stateful_seeds": (
        "Stateful tf.image.random_* / tf.random_* ops under XLA ignore their seeds, so runs do "
        "not repeat; stateless ops with seeds split from one root make them reproducible."),
    "autocluster_rng": (
        "Auto-clustering (jit_scope, global_jit_level) never clusters stateful RNG ops: the "
        "random draws stay outside the XLA clusters and cut the graph into pieces."),
    "trace_exclusive": (
        "FULL_TRACE (RunOptions + timeline.py) and the TF2 profiler cannot run at once "
        "(\"Another profiling session active\"): use the profiler, or trace in a separate run."),
}

#: Where our port does the same job: (path, what it holds). Paths only: line numbers drift.
PORT: dict[str, tuple[str, str]] = {
    "modern/pipeline.py": ("modern/pipeline.py", "tf.data input: read, decode, resize, crops"),
    "modern/augment.py": ("modern/augment.py",
                          "the jit-compiled augmentation with stateless draws from one root seed"),
    "modern/runner.py": ("modern/runner.py",
                         "the step loop over the dataset, profiled with per-step Trace markers"),
    "legacy/pipeline.py": ("legacy/pipeline.py",
                           "the same construct kept running on tf.compat.v1 (graph side)"),
    "legacy/runner.py": ("legacy/runner.py",
                         "the same construct kept running on tf.compat.v1 (session, queue "
                         "runners, FULL_TRACE + timeline)"),
}

_CATEGORY_DEFAULTS: dict[str, dict[str, Any]] = {
    "queue_input": dict(pitfalls=(), modern="modern/pipeline.py", legacy="legacy/pipeline.py"),
    "reader": dict(pitfalls=("resize_static",), modern="modern/pipeline.py",
                   legacy="legacy/pipeline.py"),
    "batching": dict(pitfalls=(), modern="modern/pipeline.py", legacy=None),
    "tf_data_v1": dict(pitfalls=(), modern="modern/pipeline.py", legacy=None),
    "feeding": dict(pitfalls=(), modern="modern/pipeline.py", legacy=None),
    "queue_runner": dict(pitfalls=(), modern="modern/runner.py", legacy="legacy/runner.py"),
    "stateful_random": dict(pitfalls=("stateful_seeds", "autocluster_rng"),
                            modern="modern/augment.py", legacy="legacy/pipeline.py"),
    "xla_jit": dict(pitfalls=("map_recompile", "resize_static", "autocluster_rng"),
                    modern="modern/augment.py", legacy="legacy/pipeline.py"),
    "tracing": dict(pitfalls=("trace_exclusive",), modern="modern/runner.py",
                    legacy="legacy/runner.py"),
    "session": dict(pitfalls=(), modern="modern/runner.py", legacy="legacy/runner.py"),
    "tf1_only": dict(pitfalls=(), modern=None, legacy=None),
}

#: The one "see also" line of the report: where our own port does these jobs.
SEE_ALSO = ("our own port of a TF1 pipeline: modern/pipeline.py (tf.data input), "
            "modern/augment.py (stateless draws from one root seed, jit-compiled), "
            "modern/runner.py (the loop, profiled), legacy/ (the TF1 original on tf.compat.v1)")

#: How ``tf_upgrade_v2`` (TF 2.21) treats a construct, checked against its rename tables.
UPGRADE: dict[str, str] = {
    "compat_v1": "renamed to tf.compat.v1 (still a queue runner / session at run time)",
    "renamed_same": "renamed to a TF2 name that does the same thing (still stateful or a queue)",
    "contrib_error": "not converted: tf.contrib is gone, reported as an error",
    "unchanged": "left as it is",
    "already_compat_v1": "already spelled tf.compat.v1: left as it is",
}


@dataclasses.dataclass(frozen=True)
class Rule:
    """One legacy construct: the names it goes by, and how to migrate it.

    ``paths``: canonical qualified names (see :func:`canonical`). ``returns``: the kind of object
    a call returns (``reader``, ``queue``, ...), so methods on it can be recognised; ``params``:
    positional parameter names, to report the call's arguments by name; ``upgrade``: a key of
    :data:`UPGRADE`.
    """

    id: str
    category: str
    paths: tuple[str, ...]
    replacement: str
    upgrade: str = "compat_v1"
    returns: str | None = None
    params: tuple[str, ...] = ()
    pitfalls: tuple[str, ...] | None = None
    modern: str | None = "default"
    legacy: str | None = "default"
    #: What TF 2 calls instead, in a few words, for listings of the script's own code.
    tf2: str = ""

    def full_replacement(self) -> str:
        """The replacement, with its category's note (see :data:`CATEGORY_NOTES`)."""
        note = CATEGORY_NOTES.get(self.category)
        return f"{self.replacement}. {note}" if note else self.replacement

    def pitfall_ids(self) -> tuple[str, ...]:
        """The rule's pitfalls, or its category's."""
        if self.pitfalls is not None:
            return self.pitfalls
        pitfalls: tuple[str, ...] = _CATEGORY_DEFAULTS[self.category]["pitfalls"]
        return pitfalls

    def port(self) -> dict[str, dict[str, str] | None]:
        """``{"modern": {path, what}, "legacy": {path, what} | None}`` for this construct."""
        out = {}
        for side in ("modern", "legacy"):
            key = getattr(self, side)
            if key == "default":
                key = _CATEGORY_DEFAULTS[self.category][side]
            out[side] = None if key is None else dict(zip(("path", "what"), PORT[key]))
        return out


@dataclasses.dataclass(frozen=True)
class MethodRule(Rule):
    """A method (or attribute) used on an object of kind ``kind`` that a recognised call made."""

    kind: str = ""
    methods: tuple[str, ...] = ()


def _tf(*names: str) -> tuple[str, ...]:
    return tuple(f"tensorflow.{n}" for n in names)


_PRODUCER = ("(shuffle=True is the default: add .shuffle(n) before .repeat; num_epochs=None "
             "means .repeat() forever)")
_BATCH_TAIL = ("drop_remainder=True matches allow_smaller_final_batch=False (the default) and "
               "keeps the batch dimension static, dynamic_pad=True becomes .padded_batch, "
               "enqueue_many=True adds .unbatch() first; num_threads becomes num_parallel_calls "
               "of the per-example map before it; capacity only bounded the queue "
               "(.prefetch(tf.data.AUTOTUNE) is the buffer now)")

RULES: tuple[Rule, ...] = (
    # -- queue_input -------------------------------------------------------------------------
    Rule("string_input_producer", "queue_input", _tf("train.string_input_producer"),
         "tf.data.Dataset.from_tensor_slices(filenames), or tf.data.Dataset.list_files(pattern) "
         "for a glob " + _PRODUCER, returns="queue",
         params=("string_tensor", "num_epochs", "shuffle", "seed", "capacity")),
    Rule("slice_input_producer", "queue_input", _tf("train.slice_input_producer"),
         "tf.data.Dataset.from_tensor_slices((t1, t2, ...)): one element per row of the tensors "
         + _PRODUCER, params=("tensor_list", "num_epochs", "shuffle", "seed", "capacity")),
    Rule("range_input_producer", "queue_input", _tf("train.range_input_producer"),
         "tf.data.Dataset.range(limit) " + _PRODUCER, returns="queue",
         params=("limit", "num_epochs", "shuffle", "seed", "capacity")),
    Rule("input_producer", "queue_input", _tf("train.input_producer"),
         "tf.data.Dataset.from_tensor_slices(input_tensor) " + _PRODUCER, returns="queue",
         params=("input_tensor", "element_shape", "num_epochs", "shuffle", "seed", "capacity")),
    Rule("slim_provider", "queue_input",
         ("tensorflow.contrib.slim.dataset_data_provider.DatasetDataProvider",),
         "tf.data over the dataset's files: list_files(dataset.data_sources, shuffle=shuffle)"
         ".interleave(<record dataset for dataset.reader>, cycle_length=num_readers), "
         ".repeat(num_epochs), then .map(dataset.decoder.decode) for the items provider.get "
         "asks for", upgrade="unchanged", returns="provider",
         params=("dataset", "num_readers", "reader_kwargs", "shuffle", "num_epochs",
                 "common_queue_capacity", "common_queue_min", "record_key", "seed", "scope")),
    Rule("slim_reader", "queue_input",
         ("tensorflow.contrib.slim.parallel_reader.parallel_read",
          "tensorflow.contrib.slim.parallel_reader.ParallelReader",
          "tensorflow.contrib.slim.prefetch_queue.prefetch_queue"),
         "parallel_read: list_files(...).interleave(<record dataset>, cycle_length=num_readers); "
         "prefetch_queue: .prefetch(tf.data.AUTOTUNE)", upgrade="unchanged"),
    *(Rule(rid, "queue_input", paths,
           "an input_fn returning tf.data.Dataset.from_tensor_slices(" + data + ") with "
           ".repeat(num_epochs) (num_epochs=1 by default), .shuffle(queue_capacity // 4) when "
           "shuffle=True (its RandomShuffleQueue kept a quarter of queue_capacity, 1000 by "
           "default) and .batch(batch_size) (128 by default): the TF1 function fed a queue "
           "from Python threads. tf.estimator itself is gone in TF 2.21",
           params=params)
      for rid, paths, data, params in (
          ("numpy_input_fn", _tf("estimator.inputs.numpy_input_fn",
                                 "contrib.learn.io.numpy_input_fn"), "(x, y)",
           ("x", "y", "batch_size", "num_epochs", "shuffle", "queue_capacity", "num_threads")),
          ("pandas_input_fn", _tf("estimator.inputs.pandas_input_fn",
                                  "contrib.learn.io.pandas_input_fn"), "(dict(x), y)",
           ("x", "y", "batch_size", "num_epochs", "shuffle", "queue_capacity", "num_threads",
            "target_column")))),
    Rule("record_input", "queue_input", _tf("RecordInput"),
         "tf.data.Dataset.list_files(file_pattern, seed=seed).interleave(tf.data.TFRecordDataset, "
         "cycle_length=parallelism, num_parallel_calls=tf.data.AUTOTUNE).shuffle(buffer_size, "
         "seed=seed), then .batch(batch_size) where the script uses the records together "
         "(get_yield_op gave batch_size records at a time)", upgrade="unchanged",
         returns="record_input",
         params=("file_pattern", "batch_size", "buffer_size", "parallelism", "shift_ratio",
                 "seed", "name", "batches", "compression_type")),
    Rule("limit_epochs", "queue_input", _tf("train.limit_epochs"),
         ".repeat(num_epochs) on the dataset", params=("tensor", "num_epochs")),
    Rule("match_filenames_once", "queue_input",
         _tf("train.match_filenames_once", "io.match_filenames_once"),
         "tf.data.Dataset.list_files(pattern) (or tf.io.gfile.glob(pattern) for a Python list)",
         upgrade="renamed_same", params=("pattern",)),
    Rule("random_shuffle_queue", "queue_input", _tf("RandomShuffleQueue", "io.RandomShuffleQueue"),
         "dataset.shuffle(min_after_dequeue): tf.data keeps the shuffle buffer",
         upgrade="renamed_same", returns="queue"),
    Rule("padding_fifo_queue", "queue_input", _tf("PaddingFIFOQueue", "io.PaddingFIFOQueue"),
         "dataset.padded_batch(batch_size, padded_shapes=...)", upgrade="renamed_same",
         returns="queue"),
    Rule("queue", "queue_input",
         _tf("FIFOQueue", "io.FIFOQueue", "PriorityQueue", "io.PriorityQueue", "QueueBase",
             "io.QueueBase"),
         "a tf.data.Dataset: what was enqueued becomes a dataset transformation, and "
         ".prefetch(tf.data.AUTOTUNE) is the buffer between producer and consumer",
         upgrade="renamed_same", returns="queue"),
    # -- reader ------------------------------------------------------------------------------
    Rule("whole_file_reader", "reader", _tf("WholeFileReader"),
         "filenames.map(tf.io.read_file, num_parallel_calls=tf.data.AUTOTUNE): one element per "
         "file's bytes", returns="reader"),
    Rule("tfrecord_reader", "reader", _tf("TFRecordReader"),
         "tf.data.TFRecordDataset(filenames) (many files: filenames.interleave("
         "tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE)), then "
         ".map(parse) with tf.io.parse_single_example", returns="reader",
         params=("name", "options")),
    Rule("text_line_reader", "reader", _tf("TextLineReader"),
         "tf.data.TextLineDataset(filenames) (skip_header_lines=n becomes .skip(n) per file)",
         returns="reader", params=("skip_header_lines",)),
    Rule("fixed_length_record_reader", "reader", _tf("FixedLengthRecordReader"),
         "tf.data.FixedLengthRecordDataset(filenames, record_bytes, header_bytes, footer_bytes)",
         returns="reader", params=("record_bytes", "header_bytes", "footer_bytes", "hop_bytes")),
    Rule("other_reader", "reader", _tf("IdentityReader", "LMDBReader", "ReaderBase"),
         "a tf.data source dataset (tf.data.Dataset.from_generator for a format tf.data has no "
         "reader for)", returns="reader"),
    # -- batching ----------------------------------------------------------------------------
    Rule("batch", "batching", _tf("train.batch"),
         ".batch(batch_size, drop_remainder=True) at the end of the dataset; " + _BATCH_TAIL,
         params=("tensors", "batch_size", "num_threads", "capacity", "enqueue_many", "shapes",
                 "dynamic_pad", "allow_smaller_final_batch", "shared_name", "name")),
    Rule("shuffle_batch", "batching", _tf("train.shuffle_batch"),
         ".shuffle(min_after_dequeue, seed=seed).batch(batch_size, drop_remainder=True); "
         + _BATCH_TAIL,
         params=("tensors", "batch_size", "capacity", "min_after_dequeue", "num_threads", "seed",
                 "enqueue_many", "shapes", "allow_smaller_final_batch", "shared_name", "name")),
    Rule("batch_join", "batching", _tf("train.batch_join"),
         "N copies of one preprocessing become one .map(preprocess, num_parallel_calls=N), "
         "then .batch(batch_size, drop_remainder=True) (.padded_batch for dynamic_pad=True)",
         params=("tensors_list", "batch_size", "capacity", "enqueue_many", "shapes", "dynamic_pad",
                 "allow_smaller_final_batch", "shared_name", "name")),
    Rule("shuffle_batch_join", "batching", _tf("train.shuffle_batch_join"),
         "N copies of one preprocessing become one .map(preprocess, num_parallel_calls=N), then "
         ".shuffle(min_after_dequeue, seed=seed).batch(batch_size, drop_remainder=True)",
         params=("tensors_list", "batch_size", "capacity", "min_after_dequeue", "seed",
                 "enqueue_many", "shapes", "allow_smaller_final_batch", "shared_name", "name")),
    Rule("maybe_batch", "batching",
         _tf("train.maybe_batch", "train.maybe_shuffle_batch", "train.maybe_batch_join",
             "train.maybe_shuffle_batch_join"),
         ".filter(keep_input) before the .shuffle/.batch that replaces the matching tf.train "
         "batch function (keep_input=True: no filter)"),
    Rule("bucket_by_sequence_length", "batching",
         _tf("contrib.training.bucket_by_sequence_length"),
         "dataset.bucket_by_sequence_length(element_length_func, bucket_boundaries, "
         "bucket_batch_sizes=[batch_size] * (len(bucket_boundaries) + 1), drop_remainder=not "
         "allow_smaller_final_batch): a Dataset method that pads each batch to its longest "
         "element; keep_input becomes a .filter before it",
         params=("input_length", "tensors", "batch_size", "bucket_boundaries", "num_threads",
                 "capacity", "bucket_capacities", "shapes", "dynamic_pad",
                 "allow_smaller_final_batch", "keep_input", "shared_name", "name")),
    Rule("bucket", "batching", _tf("contrib.training.bucket"),
         "dataset.group_by_window(key_func=<which_bucket per example>, reduce_func=lambda _, w: "
         "w.padded_batch(batch_size), window_size=batch_size)",
         params=("tensors", "which_bucket", "batch_size", "num_buckets", "num_threads",
                 "capacity", "bucket_capacities", "shapes", "dynamic_pad",
                 "allow_smaller_final_batch", "keep_input", "shared_name", "name")),
    # -- tf_data_v1 --------------------------------------------------------------------------
    Rule("make_iterator", "tf_data_v1",
         _tf("data.make_one_shot_iterator", "data.make_initializable_iterator",
             "data.Iterator", "data.Iterator.from_structure", "data.Iterator.from_string_handle"),
         "iterate the dataset itself (for batch in dataset:, or iter(dataset)); an initializable "
         "iterator's re-initialisation becomes a new for loop over the dataset",
         upgrade="compat_v1", returns="iterator"),
    Rule("contrib_data", "tf_data_v1", ("tensorflow.contrib.data",),
         "the same transformation in tf.data (tf.contrib.data.X -> tf.data.X or a Dataset "
         "method: map_and_batch -> .map().batch(), parallel_interleave -> .interleave("
         "num_parallel_calls=...), shuffle_and_repeat -> .shuffle().repeat(), group_by_window "
         "-> .group_by_window(), batch_and_drop_remainder -> .batch(drop_remainder=True))",
         upgrade="contrib_error"),
    # -- feeding -----------------------------------------------------------------------------
    Rule("placeholder", "feeding", _tf("placeholder", "placeholder_with_default",
                                       "sparse_placeholder"),
         "no placeholders in TF 2: the data arrives as dataset elements (or tf.function "
         "arguments with a tf.TensorSpec(shape, dtype))", returns="placeholder",
         params=("dtype", "shape", "name")),
    Rule("feed_dict", "feeding", (),
         "feed the model from a tf.data.Dataset: from_tensor_slices for arrays in memory, "
         "from_generator for data a Python loop makes", upgrade="unchanged"),
    Rule("feeder_thread", "feeding", (),
         "tf.data.Dataset.from_generator(<the thread's loop, yielding what it enqueued>, "
         "output_signature=...): tf.data runs the generator; no thread, queue or placeholder",
         upgrade="unchanged"),
    # -- queue_runner ------------------------------------------------------------------------
    Rule("queue_runner", "queue_runner", _tf("train.QueueRunner"),
         "delete: tf.data runs its own threads (num_parallel_calls=tf.data.AUTOTUNE, "
         ".prefetch(tf.data.AUTOTUNE))", returns="queue_runner",
         params=("queue", "enqueue_ops", "close_op", "cancel_op")),
    Rule("add_queue_runner", "queue_runner", _tf("train.add_queue_runner"),
         "delete: nothing to register, the dataset is the pipeline"),
    Rule("start_queue_runners", "queue_runner", _tf("train.start_queue_runners"),
         "delete: iterate the dataset (for element in dataset:); its threads start and stop with "
         "the iterator", params=("sess", "coord", "daemon", "start", "collection")),
    Rule("coordinator", "queue_runner", _tf("train.Coordinator"),
         "delete: a Python for loop over the dataset ends when the data does (no OutOfRangeError "
         "to catch, no threads to stop)", upgrade="unchanged", returns="coordinator"),
    # -- stateful_random ---------------------------------------------------------------------
    Rule("random_crop", "stateful_random", _tf("random_crop", "image.random_crop"),
         "tf.image.stateless_random_crop(value, size, seed=seed)",
         upgrade="renamed_same", params=("value", "size", "seed")),
    *(Rule(f"image.{op}", "stateful_random", _tf(f"image.{op}"),
           f"tf.image.stateless_{op}(image, ..., seed=seed)", upgrade="unchanged",
           params=params)
      for op, params in (
          ("random_brightness", ("image", "max_delta", "seed")),
          ("random_contrast", ("image", "lower", "upper", "seed")),
          ("random_saturation", ("image", "lower", "upper", "seed")),
          ("random_hue", ("image", "max_delta", "seed")),
          ("random_flip_left_right", ("image", "seed")),
          ("random_flip_up_down", ("image", "seed")),
          ("random_jpeg_quality", ("image", "min_jpeg_quality", "max_jpeg_quality", "seed")))),
    Rule("sample_distorted_bounding_box", "stateful_random",
         _tf("image.sample_distorted_bounding_box"),
         "tf.image.stateless_sample_distorted_bounding_box(..., seed=seed)",
         upgrade="unchanged"),
    Rule("random_shuffle", "stateful_random", _tf("random_shuffle", "random.shuffle"),
         "tf.random.experimental.stateless_shuffle(value, seed=seed)",
         upgrade="renamed_same", params=("value", "seed")),
    Rule("random_uniform", "stateful_random", _tf("random_uniform", "random.uniform"),
         "tf.random.stateless_uniform(shape, seed=seed, minval=..., maxval=...)",
         upgrade="renamed_same", params=("shape", "minval", "maxval", "dtype", "seed")),
    *(Rule(rid, "stateful_random", _tf(*names), repl, upgrade="renamed_same", params=params)
      for rid, names, repl, params in (
          ("random_normal", ("random_normal", "random.normal"),
           "tf.random.stateless_normal(shape, seed=seed, mean=..., stddev=...)",
           ("shape", "mean", "stddev", "dtype", "seed")),
          ("truncated_normal", ("truncated_normal", "random.truncated_normal"),
           "tf.random.stateless_truncated_normal(shape, seed=seed, mean=..., stddev=...)",
           ("shape", "mean", "stddev", "dtype", "seed")),
          ("multinomial", ("multinomial", "random.multinomial"),
           "tf.random.stateless_categorical(logits, num_samples, seed=seed)",
           ("logits", "num_samples", "seed")),
          ("categorical", ("random.categorical",),
           "tf.random.stateless_categorical(logits, num_samples, seed=seed)",
           ("logits", "num_samples", "dtype", "seed")),
          ("random_gamma", ("random_gamma", "random.gamma"),
           "tf.random.stateless_gamma(shape, seed=seed, alpha=...)",
           ("shape", "alpha", "beta", "dtype", "seed")),
          ("random_poisson", ("random_poisson", "random.poisson"),
           "tf.random.stateless_poisson(shape, seed=seed, lam=...)",
           ("lam", "shape", "dtype", "seed")),
          ("dropout", ("nn.dropout",),
           "tf.nn.experimental.stateless_dropout(x, rate, seed=seed) (rate = 1 - keep_prob), or "
           "a Keras Dropout layer", ("x", "keep_prob", "noise_shape", "seed")))),
    Rule("set_random_seed", "stateful_random",
         _tf("set_random_seed", "random.set_random_seed", "random.set_seed"),
         "tf.random.set_seed(seed) for the global seed; the stateless ops take theirs explicitly, "
         "split from one root", params=("seed",)),
    # -- xla_jit -----------------------------------------------------------------------------
    Rule("jit_scope", "xla_jit",
         _tf("contrib.compiler.jit.experimental_jit_scope", "xla.experimental.jit_scope"),
         "@tf.function(jit_compile=True) on the augmentation function, fed static shapes and "
         "called on dataset elements outside Dataset.map", upgrade="contrib_error"),
    Rule("xla_compile", "xla_jit",
         _tf("contrib.compiler.xla.compile", "xla.experimental.compile"),
         "@tf.function(jit_compile=True) on the function", upgrade="contrib_error"),
    Rule("global_jit_level", "xla_jit", (),
         "delete: auto-clustering of the whole graph goes; put jit_compile=True on the function "
         "to compile (tf.config.optimizer.set_jit is the TF2 auto-clustering switch, not needed)",
         upgrade="compat_v1"),
    Rule("jit_level_value", "xla_jit",
         _tf("OptimizerOptions.ON_1", "OptimizerOptions.ON_2"),
         "delete with the global_jit_level it sets; use tf.function(jit_compile=True)"),
    Rule("experimental_compile", "xla_jit", (),
         "tf.function(jit_compile=True): experimental_compile is the pre-2.5 name",
         upgrade="unchanged"),
    # -- tracing -----------------------------------------------------------------------------
    Rule("run_options", "tracing", _tf("RunOptions"),
         "tf.profiler.experimental.start(logdir) before the loop, "
         "tf.profiler.experimental.Trace(\"step\", step_num=i, _r=1) around each step, "
         "tf.profiler.experimental.stop() after it; read it in TensorBoard's Profile tab",
         returns="run_options"),
    Rule("trace_level", "tracing",
         _tf("RunOptions.FULL_TRACE", "RunOptions.SOFTWARE_TRACE", "RunOptions.HARDWARE_TRACE"),
         "the profiler records ops, tf.data iterators and XLA kernels without a trace level: "
         "tf.profiler.experimental.start/stop"),
    Rule("run_metadata", "tracing", _tf("RunMetadata"),
         "delete: the profiler keeps the step statistics (logdir/plugins/profile/<run>/"
         "*.xplane.pb)", returns="run_metadata"),
    Rule("traced_run", "tracing", (),
         "call the step inside tf.profiler.experimental.Trace(\"step\", step_num=i, _r=1) so "
         "TensorBoard's Profile tab sees steps", upgrade="unchanged"),
    Rule("timeline", "tracing", ("tensorflow.python.client.timeline.Timeline",),
         "delete: TensorBoard's Profile tab (trace viewer, input-pipeline analyzer) reads the "
         "profiler's xplane.pb; no timeline.json to write", upgrade="unchanged",
         returns="timeline"),
    Rule("profiler_hook", "tracing", _tf("train.ProfilerHook"),
         "tf.profiler.experimental.start/stop with per-step Trace markers"),
    Rule("tf1_profiler", "tracing",
         _tf("profiler.profile", "profiler.Profiler", "profiler.advise",
             "profiler.ProfileOptionBuilder"),
         "tf.profiler.experimental.start/stop, then TensorBoard's Profile tab"),
    Rule("slim_queue_runners", "queue_runner",
         ("tensorflow.contrib.slim.queues.QueueRunners",
          "tensorflow.contrib.slim.evaluation.evaluate_once",
          "tensorflow.contrib.slim.evaluation.evaluation_loop",
          "tensorflow.contrib.slim.learning.train"),
         "a loop over the dataset (metrics updated per batch, or Keras fit / evaluate): these "
         "slim helpers start the queue runners themselves", upgrade="unchanged"),
    # -- session -----------------------------------------------------------------------------
    Rule("session", "session", _tf("Session", "InteractiveSession"),
         "eager TF2: call the tf.function directly and iterate the dataset with a for loop",
         returns="session"),
    Rule("monitored_session", "session",
         _tf("train.MonitoredTrainingSession", "train.MonitoredSession",
             "train.SingularMonitoredSession"),
         "a plain training loop over the dataset (or Keras fit); these sessions also start the "
         "queue runners for you, so nothing replaces that part", returns="session"),
    Rule("supervisor", "session", _tf("train.Supervisor"),
         "a plain training loop over the dataset (tf.train.Checkpoint / CheckpointManager for "
         "saving); the Supervisor also starts the queue runners, so nothing replaces that part",
         returns="supervisor"),
    Rule("config_proto", "session", _tf("ConfigProto", "GraphOptions", "OptimizerOptions"),
         "tf.config.threading.set_intra_op_parallelism_threads / "
         "set_inter_op_parallelism_threads and tf.config.set_soft_device_placement; nothing "
         "for XLA (jit_compile=True per function)", returns="config"),
    Rule("variables_initializer", "session",
         _tf("global_variables_initializer", "local_variables_initializer",
             "initialize_all_variables", "initialize_local_variables", "tables_initializer"),
         "delete: TF2 variables are initialised when created (and tf.data needs no local "
         "epoch counters)"),
)

RULES += (
    Rule("estimator", "session",
         _tf("estimator.Estimator", "estimator.train_and_evaluate", "contrib.learn.Estimator",
             "contrib.learn.Experiment",
             *(f"estimator.{kind}{task}" for kind in ("DNN", "Linear", "DNNLinearCombined",
                                                     "BoostedTrees", "Baseline")
               for task in ("Classifier", "Regressor"))),
         "tf.estimator is gone in TF 2.21 (removed in 2.16): a Keras model trained with "
         "model.fit(dataset), or a plain loop over the dataset (tf.GradientTape); the input_fn "
         "becomes the function that returns the dataset", upgrade="unchanged"),
    # -- tf1_only ----------------------------------------------------------------------------
    Rule("lookup_table", "tf1_only",
         _tf("contrib.lookup.index_table_from_tensor", "contrib.lookup.index_table_from_file",
             "contrib.lookup.index_to_string_table_from_tensor",
             "contrib.lookup.index_to_string_table_from_file", "contrib.lookup.HashTable",
             "contrib.lookup.string_to_index", "contrib.lookup.index_to_string",
             "contrib.lookup.MutableHashTable", "contrib.lookup.MutableDenseHashTable"),
         "tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, "
         "tf.range(tf.size(keys, out_type=tf.int64))), default_value=-1) for "
         "index_table_from_tensor without OOV buckets, tf.lookup.StaticVocabularyTable(..., "
         "num_oov_buckets=n) with them, tf.lookup.TextFileInitializer for a vocabulary file "
         "(index_to_string: keys and values swapped; MutableHashTable: "
         "tf.lookup.experimental.MutableHashTable); TF 2 tables are ready when made, no "
         "tables_initializer",
         tf2="tf.lookup.StaticHashTable, or StaticVocabularyTable with OOV buckets"),
)

METHOD_RULES: tuple[MethodRule, ...] = (
    MethodRule("queue.method", "queue_input", (), "iterate the dataset; the queue is gone",
               upgrade="unchanged", kind="queue",
               methods=("enqueue", "enqueue_many", "dequeue", "dequeue_many", "dequeue_up_to",
                        "close", "size")),
    MethodRule("reader.read", "reader", (),
               "delete: each dataset element already is one record (read_up_to(q, n) becomes "
               ".batch(n))", upgrade="unchanged", kind="reader",
               methods=("read", "read_up_to")),
    MethodRule("provider.get", "queue_input", (),
               "the tensors come from the map that decodes each record "
               "(dataset.decoder.decode with the same item names)",
               upgrade="unchanged", kind="provider", methods=("get",)),
    MethodRule("record_input.get_yield_op", "queue_input", (),
               "delete: the records are the dataset's elements (batch_size of them at a time "
               "after .batch(batch_size))", upgrade="unchanged", kind="record_input",
               methods=("get_yield_op",)),
    MethodRule("queue_runner.method", "queue_runner", (), "delete with the QueueRunner",
               upgrade="unchanged", kind="queue_runner", methods=("create_threads",)),
    MethodRule("coordinator.method", "queue_runner", (),
               "delete: the loop over the dataset ends on its own; no threads to stop or join",
               upgrade="unchanged", kind="coordinator",
               methods=("request_stop", "join", "should_stop", "stop_on_exception",
                        "wait_for_stop", "register_thread", "clear_stop",
                        "raise_requested_exception")),
    MethodRule("session.should_stop", "session", (),
               "delete: a for loop over the dataset stops when the data ends",
               upgrade="unchanged", kind="session", methods=("should_stop",)),
    MethodRule("supervisor.method", "session", (),
               "delete with the Supervisor: iterate the dataset in a plain loop",
               upgrade="unchanged", kind="supervisor",
               methods=("managed_session", "prepare_or_wait_for_session", "should_stop",
                        "request_stop", "stop", "start_queue_runners")),
    MethodRule("timeline.method", "tracing", (),
               "delete: the profiler writes the trace (xplane.pb) and TensorBoard's trace viewer "
               "shows it", upgrade="unchanged", kind="timeline",
               methods=("generate_chrome_trace_format", "analyze_step_stats")),
)

def applicable_pitfalls(categories: set[str], called: set[str]) -> frozenset[str]:
    """The pitfalls that concern a script with findings in ``categories`` that calls the
    (canonical) TensorFlow functions ``called``: each only when the script has its construct
    (the XLA ones only when it compiles with XLA, the resize one only if it also resizes)."""
    out = set()
    if "tracing" in categories:
        out.add("trace_exclusive")
    if "xla_jit" in categories:
        out.add("map_recompile")
        if "stateful_random" in categories:
            out.update(("autocluster_rng", "stateful_seeds"))
        if any(c.startswith("tensorflow.image.resize") for c in called):
            out.add("resize_static")
    return frozenset(out)


RULES_BY_ID: dict[str, Rule] = {r.id: r for r in RULES + METHOD_RULES}

_PRODUCER_DEFAULTS: Mapping[str, object] = {"num_epochs": None, "shuffle": True, "seed": None,
                                         "capacity": 32}
_INPUT_FN_DEFAULTS: Mapping[str, object] = {"batch_size": 128, "num_epochs": 1, "shuffle": None,
                                         "queue_capacity": 1000, "num_threads": 1}
#: TF1's defaults of the arguments a plan may state though the script does not give them, by
#: rule id and parameter: TF 1.15's signatures (``tests/test_migrate_rules.py`` checks those
#: still in ``tf.compat.v1`` against it). A plan shows such a value only marked as the default.
TF1_DEFAULTS: dict[str, Mapping[str, object]] = {
    "string_input_producer": _PRODUCER_DEFAULTS,
    "slice_input_producer": _PRODUCER_DEFAULTS,
    "range_input_producer": _PRODUCER_DEFAULTS,
    "input_producer": _PRODUCER_DEFAULTS,
    "batch": {"num_threads": 1, "capacity": 32, "enqueue_many": False, "shapes": None,
              "dynamic_pad": False, "allow_smaller_final_batch": False},
    "shuffle_batch": {"num_threads": 1, "seed": None, "enqueue_many": False, "shapes": None,
                      "allow_smaller_final_batch": False},
    "batch_join": {"capacity": 32, "enqueue_many": False, "shapes": None, "dynamic_pad": False,
                   "allow_smaller_final_batch": False},
    "shuffle_batch_join": {"seed": None, "enqueue_many": False, "shapes": None,
                           "allow_smaller_final_batch": False},
    "record_input": {"batch_size": 1, "buffer_size": 1, "parallelism": 1, "shift_ratio": 0,
                     "seed": 0},
    # tf.contrib.slim's DatasetDataProvider (TF 1.15; not in tf.compat.v1)
    "slim_provider": {"num_readers": 1, "shuffle": True, "num_epochs": None,
                      "common_queue_capacity": 256, "common_queue_min": 128, "seed": None},
    # tf.estimator.inputs (TF 1.15; tf.estimator is gone from TF 2.21)
    "numpy_input_fn": _INPUT_FN_DEFAULTS,
    "pandas_input_fn": _INPUT_FN_DEFAULTS,
}
_BY_PATH: dict[str, Rule] = {p: r for r in RULES for p in r.paths}

# Module spellings that are the same API under another path. Applied until nothing changes.
_MODULE_ALIASES: tuple[tuple[str, str], ...] = (
    ("tensorflow.compat.v1", "tensorflow"),
    ("tensorflow.compat.v2", "tensorflow"),
    ("tensorflow.core.protobuf.config_pb2", "tensorflow"),
    ("tensorflow.python.training.input", "tensorflow.train"),
    ("tensorflow.python.training.queue_runner_impl", "tensorflow.train"),
    ("tensorflow.python.training.queue_runner", "tensorflow.train"),
    ("tensorflow.python.training.coordinator", "tensorflow.train"),
    ("tensorflow.python.training.monitored_session", "tensorflow.train"),
    ("tensorflow.python.ops.io_ops", "tensorflow"),
    ("tensorflow.python.ops.data_flow_ops", "tensorflow"),
    ("tensorflow.python.ops.random_ops", "tensorflow"),
    ("tensorflow.python.ops.image_ops_impl", "tensorflow.image"),
    ("tensorflow.python.ops.image_ops", "tensorflow.image"),
    ("tensorflow.python.compiler.xla.jit", "tensorflow.contrib.compiler.jit"),
    ("tensorflow.python.client.session", "tensorflow"),
    ("tensorflow.train.queue_runner", "tensorflow.train"),
    ("tensorflow.queue", "tensorflow"),
    ("tensorflow.python.data.ops.dataset_ops", "tensorflow.data"),
    ("tensorflow.python.data.ops.iterator_ops", "tensorflow.data"),
    ("tensorflow.compat.v1.data", "tensorflow.data"),
    ("tf_slim", "tensorflow.contrib.slim"),
    ("tensorflow.contrib.slim.python.slim.data", "tensorflow.contrib.slim"),
    ("tensorflow.contrib.slim.python.slim", "tensorflow.contrib.slim"),
    ("tensorflow.contrib.slim.data", "tensorflow.contrib.slim"),
    ("tensorflow.contrib.data.python.ops", "tensorflow.contrib.data"),
    ("tensorflow.contrib.training.python.training.bucket_ops", "tensorflow.contrib.training"),
    ("tensorflow.contrib.training.python.training", "tensorflow.contrib.training"),
    ("tensorflow.python.estimator.inputs.numpy_io", "tensorflow.estimator.inputs"),
    ("tensorflow.python.estimator.inputs.pandas_io", "tensorflow.estimator.inputs"),
    ("tensorflow.python.estimator.inputs", "tensorflow.estimator.inputs"),
    ("tensorflow_estimator.python.estimator.inputs.numpy_io", "tensorflow.estimator.inputs"),
    ("tensorflow_estimator.python.estimator.inputs.pandas_io", "tensorflow.estimator.inputs"),
    ("tensorflow_estimator.python.estimator.inputs", "tensorflow.estimator.inputs"),
    ("tensorflow_estimator", "tensorflow.estimator"),
    ("tensorflow.contrib.learn.python.learn.learn_io", "tensorflow.contrib.learn.io"),
    ("tensorflow.contrib.lookup.lookup_ops", "tensorflow.contrib.lookup"),
)


@functools.lru_cache(maxsize=1 << 16)
def canonical(qualname: str) -> str:
    """The one spelling rules use for a resolved name: ``tensorflow.compat.v1.train.batch`` and
    ``tensorflow.python.training.input.batch`` both become ``tensorflow.train.batch``."""
    for _ in range(4):
        before = qualname
        for old, new in _MODULE_ALIASES:
            if qualname == old or qualname.startswith(old + "."):
                qualname = new + qualname[len(old):]
        if qualname == before:
            break
    return qualname


@functools.lru_cache(maxsize=1 << 16)
def rule_for(qualname: str) -> Rule | None:
    """The rule for a resolved (not yet canonical) qualified name, or None. Anything under
    ``tensorflow.contrib.data`` is one rule."""
    name = canonical(qualname)
    rule = _BY_PATH.get(name)
    if rule is None and name.startswith("tensorflow.contrib.data."):
        return RULES_BY_ID["contrib_data"]
    return rule


#: Method names so particular to TF1 datasets that any object's use of them is a finding.
ITERATOR_METHODS = ("make_one_shot_iterator", "make_initializable_iterator")


def method_rule(kind: str, attr: str) -> MethodRule | None:
    """The rule for ``obj.attr`` where ``obj`` is of ``kind``, or None."""
    for r in METHOD_RULES:
        if r.kind == kind and attr in r.methods:
            return r
    return None
