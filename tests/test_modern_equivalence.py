"""The modern port computes what the legacy pipeline computes.

For the same decoded + resized image and the same explicit draws (``common.augment_spec.Draws``),
legacy's own ops (its graph, XLA off, draws fed in) and the modern XLA-compiled function give the
same pixels; the modern resize equals legacy's; the modern output has the seed's structure; a
seed reproduces a run.
"""
from __future__ import annotations

import numpy as np
import pytest

from common.augment_spec import (
    ASSEMBLY_ORDER,
    BRIGHTNESS_MAX_DELTA,
    CONTRAST_RANGE,
    OUTPUT_SHAPE,
    SATURATION_RANGE,
    Draws,
)

pytestmark = pytest.mark.slow

TOL = 1e-5


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """Six JPEGs: grace_hopper itself plus portrait, landscape, square and extreme-ish aspects."""
    from benchmarks.images import make_image_set
    from common.inputs import default_image

    sizes = [(300, 420), (700, 257), (256, 256), (640, 480), (333, 900)]
    made = make_image_set(tmp_path_factory.mktemp("eq_jpegs"), sizes, seed=11)
    return [default_image()] + made


def _legacy_resized(path: str) -> np.ndarray:
    """Legacy's decoded + resized image for ``path`` (its graph, XLA off, queue runners)."""
    import tensorflow as tf

    from legacy import pipeline

    v1 = tf.compat.v1
    g = pipeline.build([path], xla=False, seed=0)
    with v1.Session(graph=g.graph, config=pipeline.session_config(False)) as sess:
        coord = v1.train.Coordinator()
        threads = v1.train.start_queue_runners(sess=sess, coord=coord)
        resized = sess.run(g.resized)
        coord.request_stop()
        coord.join(threads)
    return resized


def test_modern_resize_equals_legacy_resize(images):
    from modern import pipeline

    for path in images:
        legacy = _legacy_resized(path)
        modern = pipeline.load(path).numpy()
        assert modern.shape == legacy.shape, path
        assert min(modern.shape[:2]) == 256
        np.testing.assert_array_equal(modern, legacy, err_msg=path)


def test_to_float_equals_convert_image_dtype_for_every_uint8_value():
    """The one-pass uint8 -> float conversion gives legacy's floats bit for bit: elementwise,
    so checking all 256 values checks every image."""
    import tensorflow as tf

    from modern.pipeline import to_float

    values = tf.reshape(tf.range(256, dtype=tf.int32), (16, 16, 1))
    image = tf.cast(tf.tile(values, (1, 1, 3)), tf.uint8)
    expected = tf.image.convert_image_dtype(image, tf.float32).numpy()
    got = to_float(image).numpy()
    assert got.dtype == np.float32
    assert got.tobytes() == expected.tobytes()


@pytest.fixture(scope="module")
def legacy_graph():
    """The legacy graph (XLA off) with a Session; images and draws are fed into it."""
    import tensorflow as tf

    from common.inputs import default_image
    from legacy import pipeline

    g = pipeline.build([default_image()], xla=False, seed=0)
    sess = tf.compat.v1.Session(graph=g.graph, config=pipeline.session_config(False))
    yield g, sess
    sess.close()


def _legacy_output(legacy_graph, resized: np.ndarray, d: Draws) -> np.ndarray:
    """Legacy's ops on ``resized`` with draws ``d``; the shuffle applied as ``d.permutation``
    (RandomShuffle takes no explicit permutation, so its input is fetched and permuted)."""
    from legacy import pipeline

    g, sess = legacy_graph
    feed = pipeline.draws_feed(g, d)
    feed[g.resized] = resized
    assembled = sess.run(g.assembled, feed_dict=feed)
    return assembled[d.permutation]


def test_same_draws_give_the_same_pixels(images, legacy_graph):
    import tensorflow as tf

    from modern import augment, pipeline

    fn = augment.make_augment(jit=True)
    rng = np.random.default_rng(2024)
    worst = 0.0
    for path in images:
        resized = pipeline.load(path).numpy()
        for _ in range(3):
            d = Draws.sample(rng, resized.shape[:2])
            expected = _legacy_output(legacy_graph, resized, d)
            crops = pipeline.cut_crops(tf.constant(resized), tf.constant(d.crop_offsets))
            got = fn(crops, d.brightness, d.saturation, d.contrast, d.permutation).numpy()
            assert got.shape == expected.shape == OUTPUT_SHAPE
            diff = float(np.abs(got - expected).max())
            worst = max(worst, diff)
            assert diff <= TOL, (path, d, diff)
            # Rows that are crop 0 (plain) or its mirror are copies: exactly equal.
            plain = [j for j, k in enumerate(d.permutation) if ASSEMBLY_ORDER[k] == 0]
            assert len(plain) == 2
            np.testing.assert_array_equal(got[plain], expected[plain])
    print(f"worst max abs diff over {len(images)} images x 3 draws: {worst:.2e}")


def test_saturation_in_rgb_matches_adjust_saturation_on_edge_cases():
    """Grey, black, white, saturated and nearly grey pixels, factors across the whole range."""
    import tensorflow as tf

    from modern.augment import _saturation

    rng = np.random.default_rng(5)
    special = np.array([[0, 0, 0], [1, 1, 1], [0.5, 0.5, 0.5], [1, 0, 0], [0, 1, 0], [0, 0, 1],
                        [1, 1, 0], [0.3, 0.3, 0.30001], [1e-7, 0, 0], [1, 1, 0.9999999],
                        [0.2, 0.7, 0.7], [0.9, 0.1, 0.9]], np.float32)
    pixels = np.concatenate([special, rng.uniform(0, 1, (4000, 3)).astype(np.float32)])
    image = pixels.reshape(1, -1, 3)
    for factor in (0.2, 0.5, 0.99, 1.0, 1.01, 1.7, 2.0):
        expected = tf.image.adjust_saturation(image, factor).numpy()
        got = tf.function(lambda x: _saturation(x, tf.constant(factor)), jit_compile=True)(image)
        assert float(np.abs(got.numpy() - expected).max()) <= TOL, factor


def test_jit_and_nojit_agree(images):
    import tensorflow as tf

    from modern import augment, pipeline

    rng = np.random.default_rng(7)
    resized = pipeline.load(images[2]).numpy()
    d = Draws.sample(rng, resized.shape[:2])
    crops = pipeline.cut_crops(tf.constant(resized), tf.constant(d.crop_offsets))
    args = (crops, d.brightness, d.saturation, d.contrast, d.permutation)
    jit = augment.make_augment(jit=True)(*args).numpy()
    nojit = augment.make_augment(jit=False)(*args).numpy()
    assert float(np.abs(jit - nojit).max()) <= TOL


def _mirror_pairs(x: np.ndarray) -> list[tuple[int, int]]:
    return [(i, j) for i in range(len(x)) for j in range(len(x))
            if i < j and np.array_equal(x[i][:, ::-1], x[j])]


def test_modern_output_is_one_plain_crop_and_four_jittered_with_mirrors(images):
    from modern import augment, pipeline

    paths = images[:3]
    it = iter(pipeline.build(paths, seed=3, shuffle_files=False))
    fn = augment.make_augment(jit=True)
    for step in range(len(paths)):
        e = next(it)
        out = fn(e["crops"], e["brightness"], e["saturation"], e["contrast"],
                 e["permutation"]).numpy()
        assert out.shape == OUTPUT_SHAPE and out.dtype == np.float32
        assert out.min() >= 0.0 and out.max() <= 1.0
        resized = pipeline.load(e["path"]).numpy()
        assert tuple(e["resized_hw"].numpy()) == resized.shape[:2]
        windows = [resized[r:r + 221, c:c + 221] for r, c in e["crop_offsets"].numpy()]
        pairs = _mirror_pairs(out)
        assert len(pairs) == 5 and len({i for p in pairs for i in p}) == 10
        raw = [p for p in pairs if any(np.array_equal(out[i], windows[0]) for i in p)]
        assert len(raw) == 1, "exactly one pair is the plain crop 0"
        jittered = [p for p in pairs if p not in raw]
        for i, j in jittered:
            assert min(np.abs(out[i] - w).max() for w in windows[1:]) > 1e-3
        # the permutation is applied as drawn: row j holds assembled row permutation[j]
        perm = e["permutation"].numpy()
        assert sorted(perm.tolist()) == list(range(10))
        for j, k in enumerate(perm):
            if ASSEMBLY_ORDER[k] == 0:
                expect = windows[0] if k % 2 == 0 else windows[0][:, ::-1]
                np.testing.assert_array_equal(out[j], expect)


def test_draws_follow_the_seed_distributions():
    import tensorflow as tf

    from modern import augment

    n = 400
    ds = [augment.draw(tf.constant([s, 9], tf.int64), tf.constant(300), tf.constant(257))
          for s in range(n)]
    b = np.stack([d["brightness"].numpy() for d in ds])
    s = np.stack([d["saturation"].numpy() for d in ds])
    c = np.stack([d["contrast"].numpy() for d in ds])
    off = np.stack([d["crop_offsets"].numpy() for d in ds])
    perms = np.stack([d["permutation"].numpy() for d in ds])
    for x, (lo, hi) in ((b, (-BRIGHTNESS_MAX_DELTA, BRIGHTNESS_MAX_DELTA)),
                        (s, SATURATION_RANGE), (c, CONTRAST_RANGE)):
        assert x.shape == (n, 4) and x.min() >= lo and x.max() < hi
        assert x.min() < lo + 0.05 * (hi - lo) and x.max() > hi - 0.05 * (hi - lo)
        assert abs(x.mean() - (lo + hi) / 2) < 0.05 * (hi - lo)
    assert off.shape == (n, 5, 2) and off.min() == 0
    assert off[..., 0].max() == 300 - 221 and off[..., 1].max() == 257 - 221
    assert all(sorted(p.tolist()) == list(range(10)) for p in perms)
    assert len({p.tobytes() for p in perms}) > n * 0.95
    # independent streams: brightness and saturation draws are not the same numbers rescaled
    assert abs(np.corrcoef(b.ravel(), s.ravel())[0, 1]) < 0.2


def _first_outputs(paths, seed, n=3):
    from modern import augment, pipeline

    it = iter(pipeline.build(paths, seed=seed))
    fn = augment.make_augment(jit=True)
    outs = []
    for _ in range(n):
        e = next(it)
        outs.append((e["path"].numpy(),
                     fn(e["crops"], e["brightness"], e["saturation"], e["contrast"],
                        e["permutation"]).numpy()))
    return outs


def test_seed_reproduces_a_run_and_another_seed_differs(images):
    a = _first_outputs(images, seed=5)
    b = _first_outputs(images, seed=5)
    c = _first_outputs(images, seed=6)
    for (pa, xa), (pb, xb) in zip(a, b):
        assert pa == pb
        np.testing.assert_array_equal(xa, xb)
    assert any(pa != pc or not np.array_equal(xa, xc) for (pa, xa), (pc, xc) in zip(a, c))
