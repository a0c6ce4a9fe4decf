"""The modern input pipeline: tf.data from file names to fixed-shape crops and explicit draws.

files -> ``read_file`` -> ``decode_jpeg(channels=3)`` -> aspect-preserving resize to short side
256 (the seed's float32 size math, legacy's uint8 -> float values (:func:`to_float`) and
``ResizeBilinear`` with ``align_corners=False``, ``half_pixel_centers=False``, exactly as legacy) -> the five 221x221 crops -> prefetch, all in one
parallel ``Dataset.map`` (``num_parallel_calls=AUTOTUNE``, deterministic order).

Everything whose shape depends on the image (decode, resize, crop offsets) stays here; what
leaves tf.data always has the same shapes -- five (221, 221, 3) float32 crops plus the random
draws -- so the compiled augmentation (:mod:`modern.augment`) is compiled once for every image
size. Random numbers are stateless: each image's seed is ``stateless_fold_in(root, index)``
where ``root`` comes from ``--seed`` and ``index`` counts images read, so a run is reproducible.

The stream starts from one splittable source, ``Dataset.range``: element ``index`` names its own
file (epoch ``index // n``, position ``index % n`` through a stateless permutation of the files
per epoch), so an element's identity and random draws depend on its index alone, never on which
process made it or in what order. That is what lets tf.data service split the stream across
workers (``distributed_epoch``: the dispatcher hands out indices) and still produce, for every
index, exactly the element a local run produces. ``enumerate()`` after a ``shuffle`` would not:
under ``distributed_epoch`` each worker counts its own elements, and indices repeat.
"""
from __future__ import annotations

import tensorflow as tf

from common.stages import CROP_SIZE, NUM_CROPS, SHORT_SIDE, scope
from modern import augment
from modern.data_service import distribute

AUTOTUNE = tf.data.AUTOTUNE
#: The length of an "endless" stream: more images than any run reads.
ENDLESS = tf.int64.max


def resized_size(height: tf.Tensor, width: tf.Tensor) -> tf.Tensor:
    """The seed's new (height, width): short side 256, float32 math, truncating int32 casts.

    h <= w: (256, int(256 / (h / w))); else (int(256 * (h / w)), 256) -- the seed's aspect1 and
    aspect2, op for op, so the size matches legacy to the pixel.
    """
    h = tf.cast(height, tf.float32)
    w = tf.cast(width, tf.float32)
    aspectratio = tf.divide(h, w)
    fixed = tf.constant(SHORT_SIDE, dtype=tf.float32)
    wide = tf.stack([fixed, tf.divide(fixed, aspectratio)], axis=0)
    tall = tf.stack([tf.multiply(fixed, aspectratio), fixed], axis=0)
    return tf.cast(tf.where(tf.less_equal(h, w), wide, tall), tf.int32)

def to_float(image: tf.Tensor) -> tf.Tensor:
    """uint8 image -> float32 in [0, 1], the same floats as ``convert_image_dtype`` in one pass.

    ``convert_image_dtype`` is a Cast and then a Mul by float32(1/255): two passes over the
    full image writing 3.7 MB each (grace_hopper.jpg). ``Dequantize`` in MIN_COMBINED mode over
    [0, 1] computes ``float(u) * (1.0f / 255)`` in one; the result is identical for all 256
    values (``tests/test_modern_equivalence.py`` checks every one), so for every image.
    """
    return tf.quantization.dequantize(tf.bitcast(image, tf.quint8), 0.0, 1.0,
                                      mode="MIN_COMBINED")

def decode_and_resize(contents: tf.Tensor) -> tf.Tensor:
    """JPEG bytes -> float32 image in [0, 1], short side 256, as legacy computes it."""
    with tf.name_scope(scope("decode")):
        image = tf.io.decode_jpeg(contents, channels=3)
    with tf.name_scope(scope("resize")):
        shape = tf.shape(image)
        newsize = resized_size(shape[0], shape[1])
        # tf.compat.v1's resize_images is ResizeBilinear(align_corners=False,
        # half_pixel_centers=False); tf.image.resize (v2) uses half-pixel centres: other pixels.
        return tf.compat.v1.image.resize_images(to_float(image), newsize)

def load(path: tf.Tensor) -> tf.Tensor:
    """read + decode + resize of one file (the floor the benchmark compares against)."""
    with tf.name_scope(scope("read")):
        contents = tf.io.read_file(path)
    return decode_and_resize(contents)

def cut_crops(image: tf.Tensor, offsets: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """The five 221x221 windows at ``offsets`` (int32 [5, 2], row/col): a tuple of five
    [221, 221, 3] tensors, crop 0 first.

    Each is a 2-D slice of the image viewed as [H, W*3] (a block copy of 221 rows). They stay
    five tensors: joined into one [5, 221, 221, 3] tensor they cost a second copy of all 2.9 MB
    per image, while the compiled augmentation reads five inputs as cheaply as one.
    """
    ch, cw, cc = CROP_SIZE
    flat = tf.reshape(image, tf.stack([tf.shape(image)[0], tf.shape(image)[1] * cc]))
    crops = []
    for i in range(NUM_CROPS):
        with tf.name_scope(scope("crop", i)):
            window = tf.slice(flat, tf.stack([offsets[i, 0], offsets[i, 1] * cc]), [ch, cw * cc])
            crops.append(tf.reshape(window, CROP_SIZE))
    return tuple(crops)


def root_seed(seed: int) -> tf.Tensor:
    """The run's root seed (shape [2], int64) from ``--seed``."""
    return tf.constant([seed, 0x6D6F6465], dtype=tf.int64)

def image_seed(root: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """The stateless seed of the ``index``-th image read."""
    return tf.random.experimental.stateless_fold_in(root, tf.cast(index, tf.int64))

def element(index: tf.Tensor, path: tf.Tensor, root: tf.Tensor) -> dict:
    """One dataset element: the crops, the draws for the compiled augmentation, and provenance
    (``index`` in the image stream and ``path``: what identifies the element wherever it was made)."""
    image = load(path)
    shape = tf.shape(image)
    draws = augment.draw(image_seed(root, index), shape[0], shape[1])
    return {"crops": cut_crops(image, draws["crop_offsets"]), "path": path, "index": index,
            "resized_hw": shape[:2], **draws}

def file_order_seed(seed: int) -> tf.Tensor:
    """The root of the per-epoch file permutations (shape [2], int64), apart from the draws'."""
    return tf.constant([seed, 0x66696C65], dtype=tf.int64)

def file_dataset(paths: list[str], seed: int, shuffle_files: bool = True,
                 count: int | None = None, indices: list[int] | None = None) -> tf.data.Dataset:
    """The image stream: ``(index, path)`` for index 0, 1, ... (``count`` of them, or endless),
    or for the given ``indices`` only (the same pairs as at those places in the stream).

    Each epoch of ``len(paths)`` indices visits every file once, in an order reshuffled every
    epoch (as ``string_input_producer(shuffle=True)``) by ``index_shuffle``, a stateless
    permutation computed per index; ``shuffle_files=False`` keeps the given order.
    """
    n = len(paths)
    table = tf.constant(paths, dtype=tf.string)
    order = file_order_seed(seed)
    # Dataset.range, never Dataset.counter(): counter is from_tensors().repeat().scan(), which
    # tf.data service cannot split -- under distributed_epoch every worker would make the whole
    # stream, each index once per worker.
    if indices is not None:
        ds = tf.data.Dataset.from_tensor_slices(
            tf.constant(indices, dtype=tf.int64, shape=[len(indices)]))
    else:
        ds = tf.data.Dataset.range(ENDLESS if count is None else count)

    def pick(index):
        position = index % n
        if shuffle_files and n > 1:
            epoch_seed = tf.random.experimental.stateless_fold_in(order, index // n)
            position = tf.random.experimental.index_shuffle(position, epoch_seed, n - 1)
        return index, tf.gather(table, position)

    return ds.map(_no_autograph(pick))

def build(paths: list[str], seed: int = 0, shuffle_files: bool = True, count: int | None = None,
          data_service: str | None = None, indices: list[int] | None = None) -> tf.data.Dataset:
    """The modern input pipeline: a dataset of :func:`element` dicts (``count`` of them, or
    endless, or those of the given stream ``indices``: what a lost tf.data service worker held,
    made again), prefetched.

    With ``data_service`` (a dispatcher's ``grpc://host:port``) everything up to here runs on
    tf.data service workers in ``distributed_epoch`` mode (each index processed once, by some
    worker; elements arrive in the order workers finish them) and this process only receives
    the elements.
    """
    root = root_seed(seed)
    ds = file_dataset(paths, seed, shuffle_files, count, indices)
    ds = ds.map(_no_autograph(lambda i, p: element(i, p, root)), num_parallel_calls=AUTOTUNE,
                deterministic=True)
    if data_service:

        ds = distribute(ds.prefetch(AUTOTUNE), data_service)
    return ds.prefetch(AUTOTUNE)

def build_floor(paths: list[str], seed: int = 0) -> tf.data.Dataset:
    """read + decode + resize only, with the same parallelism: the benchmark's floor."""
    ds = file_dataset(paths, seed).map(_no_autograph(lambda i, p: load(p)),
                                       num_parallel_calls=AUTOTUNE, deterministic=True)
    return ds.prefetch(AUTOTUNE)


def _no_autograph(fn):
    # Straight-line TF code: autograph's conversion only adds time before the first image.
    return tf.autograph.experimental.do_not_convert(fn)
