"""Code the port carries for TF1 behaviour TF 2 has no call for: per-example seeds for the
stateless draws, TF1's resize pixel centres, the MNIST tutorial reader TF 2 removed, TF1's
vocabulary-table constructor. The rewriter (:mod:`.rewrite`) turns a call of the TF1 name into a
call of the helper (:data:`REPLACED`); the emitter writes each helper used, once, with the
imports it needs. ``--check`` serves the MNIST reader to the original too, so both sides read the
same files the same way.
"""
from __future__ import annotations

import collections
import gzip
import os
from typing import Any

import numpy

#: The per-example seed helper in the port.
DRAWS = "_draws"
RESIZE_V1 = "_resize_images_v1"
MNIST = "_mnist_read_data_sets"
INDEX_TABLE = "_index_table_from_tensor"
TF1_ELEMENT = "_tf1_element"

DRAWS_HELPER = f'''
class _ExampleDraws:
    """Seeds for the stateless random ops that replace the script's stateful ones. Each example
    carries a seed of its own (shape [2], zipped to it from tf.data.Dataset.random); its n-th
    draw takes tf.random.experimental.stateless_fold_in(seed, n), and a draw the script gave a
    seed of its own takes the one seed per example that every draw with that seed shares."""

    def __init__(self):
        self._examples = []

    @contextlib.contextmanager
    def example(self, seed):
        self._examples.append([seed, 0, {{}}])
        try:
            yield
        finally:
            self._examples.pop()

    def seed(self, shared=None):
        if not self._examples:
            raise RuntimeError("a random draw outside the per-example map of a pipeline")
        example = self._examples[-1]
        key = shared if isinstance(shared, (int, str)) else id(shared)
        if shared is not None and key in example[2]:
            return example[2][key]
        example[1] += 1
        value = tf.random.experimental.stateless_fold_in(example[0], example[1])
        if shared is not None:
            example[2][key] = value
        return value


{DRAWS} = _ExampleDraws()
'''

RESIZE_HELPER = f'''
def {RESIZE_V1}(images, size, method="bilinear", align_corners=False,
                      preserve_aspect_ratio=False, name=None):
    """TF 1's tf.image.resize_images (and resize_bilinear & co.): the same kernels with TF 1's
    pixel centres, so the port's values match the script's (tf.image.resize moved the centres
    by half a pixel). preserve_aspect_ratio is not supported."""
    if preserve_aspect_ratio:
        raise NotImplementedError("preserve_aspect_ratio: resize with tf.image.resize")
    kind = {{0: "bilinear", 1: "nearest", 2: "bicubic", 3: "area"}}.get(method, method)
    kind = getattr(kind, "value", kind)
    images = tf.convert_to_tensor(images)
    batch = images if images.shape.rank == 4 else images[tf.newaxis]
    if kind == "area":
        out = tf.raw_ops.ResizeArea(images=batch, size=size, align_corners=align_corners)
    else:
        op = {{"bilinear": tf.raw_ops.ResizeBilinear, "nearest": tf.raw_ops.ResizeNearestNeighbor,
              "bicubic": tf.raw_ops.ResizeBicubic}}[kind]
        out = op(images=batch, size=size, align_corners=align_corners, half_pixel_centers=False)
    return out if images.shape.rank == 4 else out[0]
'''

MNIST_HELPER = f'''
class _MnistDataSet:
    """One split of TF 1's MNIST tutorial data (tensorflow.examples.tutorials.mnist), as its
    DataSet held it: images [n, 784] float32 in [0, 1] (reshape=True), labels uint8 or one-hot
    float64, and next_batch with its shuffling."""

    def __init__(self, images, labels, dtype, reshape):
        if reshape:
            images = images.reshape(images.shape[0], images.shape[1] * images.shape[2])
        if tf.as_dtype(dtype) == tf.float32:
            images = numpy.multiply(images.astype(numpy.float32), 1.0 / 255.0)
        self.images, self.labels = images, labels
        self.num_examples = images.shape[0]
        self.epochs_completed, self._index = 0, 0

    def next_batch(self, batch_size, fake_data=False, shuffle=True):
        start = self._index
        if self.epochs_completed == 0 and start == 0 and shuffle:
            perm = numpy.arange(self.num_examples)
            numpy.random.shuffle(perm)
            self.images, self.labels = self.images[perm], self.labels[perm]
        if start + batch_size <= self.num_examples:
            self._index += batch_size
            return self.images[start:self._index], self.labels[start:self._index]
        self.epochs_completed += 1
        rest_images, rest_labels = self.images[start:], self.labels[start:]
        if shuffle:
            perm = numpy.arange(self.num_examples)
            numpy.random.shuffle(perm)
            self.images, self.labels = self.images[perm], self.labels[perm]
        self._index = batch_size - (self.num_examples - start)
        return (numpy.concatenate((rest_images, self.images[:self._index]), axis=0),
                numpy.concatenate((rest_labels, self.labels[:self._index]), axis=0))


def {MNIST}(train_dir, fake_data=False, one_hot=False, dtype=tf.float32, reshape=True,
                          validation_size=5000, seed=None, source_url=None):
    """TF 1's input_data.read_data_sets (removed in TF 2) on the four MNIST files in train_dir
    (train-images-idx3-ubyte.gz, ...; TF 1 downloaded them when missing, this does not): the
    same splits, dtypes and scaling."""
    def read(name, magic):
        path = os.path.join(train_dir, name)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{{path}}: the MNIST file TF 1 downloaded; put it there "
                                    "(https://storage.googleapis.com/cvdf-datasets/mnist/)")
        with gzip.open(path, "rb") as f:
            head = numpy.frombuffer(f.read(4), numpy.dtype(">u4"))[0]
            if head != magic:
                raise ValueError(f"{{path}}: not an MNIST file (magic {{head}})")
            dims = numpy.frombuffer(f.read(4 * (magic % 256)), numpy.dtype(">u4"))
            return numpy.frombuffer(f.read(int(numpy.prod(dims))), numpy.uint8).reshape(
                [int(d) for d in dims])

    def labels(name):
        dense = read(name, 2049)
        if not one_hot:
            return dense
        out = numpy.zeros((dense.shape[0], 10))
        out.flat[numpy.arange(dense.shape[0]) * 10 + dense.ravel()] = 1
        return out

    images = read("train-images-idx3-ubyte.gz", 2051)[..., None]
    train_labels = labels("train-labels-idx1-ubyte.gz")
    test = _MnistDataSet(read("t10k-images-idx3-ubyte.gz", 2051)[..., None],
                         labels("t10k-labels-idx1-ubyte.gz"), dtype, reshape)
    validation = _MnistDataSet(images[:validation_size], train_labels[:validation_size], dtype,
                               reshape)
    train = _MnistDataSet(images[validation_size:], train_labels[validation_size:], dtype,
                          reshape)
    return collections.namedtuple("Datasets", ["train", "validation", "test"])(
        train, validation, test)
'''

INDEX_TABLE_HELPER = f'''
def {INDEX_TABLE}(vocabulary_list, num_oov_buckets=0, vocab_size=None, default_value=-1,
                             hasher_spec=None, dtype=tf.string, name=None):
    """TF 1's tf.contrib.lookup.index_table_from_tensor on TF 2's tables: each key maps to its
    position in vocabulary_list (int64); other keys to default_value, or to one of
    num_oov_buckets hash buckets after the vocabulary."""
    keys = tf.convert_to_tensor(vocabulary_list, dtype=dtype)
    if vocab_size is not None:
        keys = keys[:vocab_size]
    init = tf.lookup.KeyValueTensorInitializer(keys, tf.range(tf.size(keys, out_type=tf.int64)))
    if num_oov_buckets:
        return tf.lookup.StaticVocabularyTable(init, num_oov_buckets)
    return tf.lookup.StaticHashTable(init, default_value)
'''

TF1_ELEMENT_HELPER = f'''
def {TF1_ELEMENT}(tensors):
    """An element as TF1's queues and batchers hand it out: a list or tuple of one tensor as
    that tensor, of several as a tuple, a dict as a dict."""
    if isinstance(tensors, (list, tuple)) and len(tensors) == 1:
        return tensors[0]
    return tuple(tensors) if isinstance(tensors, list) else tensors
'''

#: TF1 functions the port calls a helper for instead (canonical name -> helper).
REPLACED: dict[str, str] = {
    "tensorflow.examples.tutorials.mnist.input_data.read_data_sets": MNIST,
    "tensorflow.contrib.learn.datasets.mnist.read_data_sets": MNIST,
    "tensorflow.contrib.lookup.index_table_from_tensor": INDEX_TABLE,
    "tensorflow.lookup.index_table_from_tensor": INDEX_TABLE,
}
#: Each helper's code and the imports it needs, in the order the port writes them.
_HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    RESIZE_V1: (RESIZE_HELPER, ()),
    MNIST: (MNIST_HELPER, ("import collections", "import gzip", "import os", "import numpy")),
    INDEX_TABLE: (INDEX_TABLE_HELPER, ()),
    TF1_ELEMENT: (TF1_ELEMENT_HELPER, ()),
}
NAMES = frozenset(_HELPERS) | {DRAWS}


def texts(used: set[str]) -> list[str]:
    """The code of the helpers used, in a fixed order."""
    return [_HELPERS[n][0].strip("\n") for n in _HELPERS if n in used]


def imports(used: set[str]) -> list[str]:
    return list(dict.fromkeys(i for n in _HELPERS if n in used for i in _HELPERS[n][1]))


def mnist_module_namespace(tf: Any) -> dict[str, Any]:
    """The MNIST reader as a module namespace (``input_data``), for ``--check``'s TF1 side."""
    namespace = {"tf": tf, "collections": collections, "gzip": gzip, "os": os, "numpy": numpy}
    exec(compile(MNIST_HELPER, "<mnist reader>", "exec"), namespace)  # noqa: S102 - our code
    namespace["read_data_sets"] = namespace[MNIST]
    return namespace


__all__ = ["DRAWS", "INDEX_TABLE", "MNIST", "NAMES", "REPLACED", "RESIZE_V1", "TF1_ELEMENT",
           "imports",
           "mnist_module_namespace", "texts"]
