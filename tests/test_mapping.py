"""Stage mapping (compare/mapping.py) on real TensorFlow traces: a plain user's graph without
our name scopes, our legacy runs with and without XLA, and a jit_compile function's profile."""
from __future__ import annotations

import numpy as np
import pytest

from compare.analysis.attribution import attribute
from compare.analysis.mapping import map_stages
from compare.load import load
from compare.vocabulary.labels import BASIS, LABEL, LABELS, PIPELINE

pytestmark = pytest.mark.slow


# --------------------------------------------------------------------------------------------
# a user's own graph: tf.image API, names of its own, no scopes of ours

def _user_graph():
    """The seed's kind of augmentation as a user writes it with tf.image (TF's own scopes),
    plus a hand-written clip (Minimum/Maximum) and a gather of a shuffled index. The file name
    is fed, so Grappler cannot fold the read, decode and resize away."""
    import tensorflow as tf

    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default(), tf.name_scope("my_input"):
        path = v1.placeholder(tf.string, [], name="file")
        data = tf.io.read_file(path)
        img = tf.image.convert_image_dtype(tf.io.decode_jpeg(data, channels=3), tf.float32)
        img = v1.image.resize_images(img, [240, 200])
        views = []
        for _ in range(3):
            c = v1.random_crop(img, [128, 128, 3])
            c = tf.image.random_brightness(c, 0.3)
            c = tf.maximum(tf.minimum(c, 1.0), 0.0)
            c = tf.image.random_saturation(c, 0.5, 1.5)
            c = tf.clip_by_value(c, 0.0, 1.0)
            c = tf.image.random_contrast(c, 0.5, 1.5)
            views.append(tf.stack([c, tf.image.flip_left_right(c)]))
        batch = tf.concat(views, 0)
        out = tf.gather(batch, tf.random.shuffle(tf.range(6)))
    return g, out, path


@pytest.fixture(scope="module")
def user_traces(tmp_path_factory):
    """A FULL_TRACE timeline.json and a TensorBoard profile of the user's graph (XLA off)."""
    import tensorflow as tf
    from tensorflow.python.client import timeline

    from common import profiling
    from common.inputs import default_image

    v1 = tf.compat.v1
    out = tmp_path_factory.mktemp("user_graph")
    g, t, path = _user_graph()
    feed = {path: default_image()}
    with v1.Session(graph=g) as sess:
        sess.run(t, feed)
        meta = v1.RunMetadata()
        sess.run(t, feed, options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE),
                 run_metadata=meta)
        (out / "timeline.json").write_text(
            timeline.Timeline(meta.step_stats, graph=g).generate_chrome_trace_format(
                show_dataflow=True))
        with profiling.tensorboard_profile(out / "logdir"):
            for i in range(3):
                with profiling.step("user", i):
                    sess.run(t, feed)
    return out / "timeline.json", out / "logdir"


def _stage_time(trace, smap) -> dict[str, float]:
    att = attribute(trace, smap)
    wall = att.median("wall")
    return {LABELS[i]: float(wall[i]) for i in range(len(LABELS))}, att.median_step_us()


@pytest.mark.parametrize("which", ["timeline", "profile"])
def test_a_users_graph_maps_without_our_scopes(user_traces, which):
    path = user_traces[0] if which == "timeline" else user_traces[1]
    tr = load(path)
    smap = map_stages(tr)
    names = tr.col_str("tf_name")
    assert all(n.startswith("my_input/") for n in names if "/" in n and not
               n.startswith(("Iterator", "_"))), "the graph carries only the user's own names"
    times, step = _stage_time(tr, smap)
    have = {s for s in ("read", "decode", "resize", "crop", "flip", "brightness", "saturation",
                        "contrast", "clip", "assemble", "shuffle") if times[s] > 0}
    assert len(have) >= 10, have
    assert times["unmapped"] <= 0.10 * step, (times["unmapped"], step)
    by_type = {}
    for i, t in enumerate(tr.col_str("op_type")):
        by_type.setdefault(t, set()).add(LABELS[smap.label[i]])
    assert by_type["DecodeJpeg"] == {"decode"}
    assert by_type["AdjustSaturation"] == {"saturation"}
    assert by_type["AdjustContrastv2"] == {"contrast"}
    assert by_type["ReverseV2"] == {"flip"}
    assert by_type["RandomShuffle"] == {"shuffle"}
    if which == "timeline":
        # dataflow: the hand-written clip follows a jitter, the gather follows the shuffle
        assert by_type["Minimum"] == {"clip"} and by_type["Maximum"] == {"clip"}
        assert by_type["GatherV2"] == {"shuffle"}
        assert (smap.basis == BASIS["dataflow"]).sum() >= 4


# --------------------------------------------------------------------------------------------
# our legacy runs

def test_xla_kernels_map_through_the_hlo_to_stages(legacy_run):
    out, _ = legacy_run
    tr = load(out)
    smap = map_stages(tr)
    kern = np.flatnonzero(tr.mask(category="xla_kernel"))
    assert len(kern) > 100
    labels = {LABELS[smap.label[i]] for i in kern}
    assert {"resize", "crop", "saturation", "contrast", "clip", "flip", "assemble"} <= labels
    assert (smap.label[kern] == 0).sum() == 0, "no kernel is left unmapped"
    # a kernel holding several stages is split, in fractions that add up to one, among
    # exactly the stages of the TF ops fused into it
    split = [i for i in kern if i in smap.splits]
    assert split
    for i in split:
        fr = smap.splits[i]
        assert abs(sum(f for _, f in fr) - 1.0) < 1e-9 and len(fr) >= 2
        assert smap.basis[i] == BASIS["hlo_split"]
        mod = tr.hlo[tr.s(tr.events.hlo_module[i])]
        from compare.analysis.mapping import stage_of_op

        stages = {stage_of_op(t, n) for t, n in mod.tf_ops(tr.s(tr.events.hlo_op[i]))
                  if n not in ("XLA_Args", "XLA_Retvals")}
        assert {LABELS[lab] for lab, _ in fr} == stages
    # the cluster holding ResizeBilinear: listed with its ops, its kernels are resize time
    resize_units = [u for u in smap.units.values()
                    if any(t == "ResizeBilinear" for t, _ in u.ops)]
    assert len(resize_units) == 1 and resize_units[0].kind == "cluster"
    unit = resize_units[0].name
    mine = [i for i in kern if smap.unit.get(int(i)) == unit]
    assert mine and all(LABELS[smap.label[i]] in ("resize", "crop") for i in mine
                        if smap.ops.get(int(i)))
    # kernels with no TF op behind them (copies) in a cluster of two stages: not split
    assert all(LABELS[smap.label[i]] == "xla_run" for i in mine if not smap.ops.get(int(i)))


def test_timeline_cluster_runs_use_members_and_the_profiles_split(legacy_run):
    out, _ = legacy_run
    profile = map_stages(load(out))
    tl = load(out / "timeline.json")
    runs = np.flatnonzero(tl.mask(category="xla_run"))
    alone = map_stages(tl)
    bases = {alone.basis_name(i) for i in runs}
    assert "cluster_members" in bases  # e.g. a crop cluster: all its ops are crop
    assert {alone.label_name(i) for i in runs
            if alone.basis_name(i) == "op_type"} == {"xla_run"}  # clusters spanning stages
    with_ref = map_stages(tl, reference=profile)
    labels = {with_ref.label_name(i) for i in runs}
    assert "xla_run" not in labels or len(labels) > 3
    big = max(runs, key=lambda i: tl.events.dur[i])
    assert with_ref.basis_name(big) == "cluster_profile"
    assert big in with_ref.splits or with_ref.label_name(big) in ("resize", "saturation")


def test_first_timeline_knows_every_cluster(legacy_run):
    """timeline_first.json comes from a second session: all its clusters alias to the
    profile's (see tests/test_xla_clusters.py for the case that once failed)."""
    import json

    out, _ = legacy_run
    side = json.loads((out / "xla_clusters.json").read_text())
    assert side["timelines"]["timeline_first.json"]["unmatched"] == 0
    tl = load(out / "timeline_first.json")
    smap = map_stages(tl)
    runs = np.flatnonzero(tl.mask(category="xla_run"))
    assert all(smap.unit[int(i)] in tl.meta["xla_members"] for i in runs)


def test_worker_shards_are_credited_to_the_ops_running_then(legacy_run_noxla):
    out, _ = legacy_run_noxla
    tr = load(out)
    smap = map_stages(tr)
    assert smap.orphan.sum() > 0
    att = attribute(tr, smap)
    assert all(s.credited_us > 0 for s in att.steady)
    est = att.median("wall_estimated")
    assert est[list(PIPELINE)].sum() > 0 and est[LABEL["runtime"]] == 0


def test_reader_thread_and_decode_traceme_map_to_their_op(legacy_run_noxla):
    out, _ = legacy_run_noxla
    tr = load(out)
    smap = map_stages(tr)
    lanes = [k for k, v in tr.lanes.items() if v.startswith("tf_reader_thread")]
    on_reader = np.isin(tr.events.tid, [t for _, t in lanes])
    assert on_reader.any() and set(smap.label[on_reader]) == {LABEL["read"]}
    jpeg = tr.mask(name="DecodeImageV2Op::JPEG")
    assert jpeg.any() and set(smap.label[jpeg]) == {LABEL["decode"]}
    assert {smap.display_name(int(i)) for i in np.flatnonzero(jpeg)} == {"DecodeJpeg"}


# --------------------------------------------------------------------------------------------
# a jit_compile function, called eagerly and from another function

def test_jit_function_compiles_once_and_its_kernels_map(jit_profile):
    from compare.analysis import xla

    tr = load(jit_profile)
    s = xla.summarize(tr)
    fns = {k: u for k, u in s.units.items() if k.startswith("__inference_jitter")}
    # the eager call and the call from outer() are two compilations of the function
    assert len(fns) == 2 and s.launch_style == "function", fns
    assert [u.compiles for u in fns.values()] == [1, 1] and not s.recompiled
    assert [u.runs for u in fns.values()] == [4, 4]
    assert all(u.members and u.compile_us > 10 * (u.run_us / u.runs) for u in fns.values())
    smap = map_stages(tr)
    kern = np.flatnonzero(tr.mask(category="xla_kernel"))
    assert {LABELS[smap.label[i]] for i in kern} <= {"brightness", "flip", "assemble"}
    att = attribute(tr, smap)
    first, steady = att.steps[0], att.steady
    assert first.wall[LABEL["xla_compile"]] > 10 * max(s.wall[LABEL["xla_compile"]]
                                                        for s in steady[-1:])
    from compare.analysis.comparison import side, split
    acc = side("jit", tr).account
    assert acc.first is not None and split(acc, acc.first)["compile"] > 0.3 * first.dur
    for st in att.steps:
        assert st.wall.sum() == pytest.approx(st.dur, rel=1e-9)


# --------------------------------------------------------------------------------------------
# the modern run: tf.data + jit_compile functions

def test_modern_profile_and_its_trace_json_load_alike_and_map(modern_run):
    from compare.analysis import xla

    out, run = modern_run
    by_dir, by_json = load(out), load(out / "trace.json.gz")
    assert by_dir.format == by_json.format == "xprof"
    assert len(by_dir.events) == len(by_json.events) > 0
    assert [s.num for s in by_dir.steps] == list(range(run["steps"]))
    s = xla.summarize(by_dir)
    # (the profile's metadata lists every module this process compiled, also for earlier tests
    # in the same pytest process: only the ones that ran here count)
    fns = [u for u in s.units.values() if u.name.startswith("__inference_") and u.runs]
    assert fns and s.launch_style == "function" and not s.recompiled
    assert all(u.compiles == 1 and u.runs == run["steps"] for u in fns)
    smap = map_stages(by_dir)
    kern = np.flatnonzero(by_dir.mask(category="xla_kernel"))
    assert len(kern) and (smap.label[kern] != 0).all()
    units = {n: u for n, u in smap.units.items() if n in {f.name for f in fns}}
    assert set(units) == {u.name for u in fns}
    held = {st for u in units.values() for st in u.stages}
    assert {"saturation", "contrast", "clip", "flip"} <= held, held
    # tf.data did the reading and decoding, on its own threads
    dec = by_dir.mask(op_type="DecodeJpeg")
    lanes = {by_dir.lane_name(int(by_dir.events.pid[i]), int(by_dir.events.tid[i]))
             for i in np.flatnonzero(dec)}
    assert dec.any() and all(ln.startswith("tf_data") for ln in lanes), lanes
    assert set(smap.label[dec]) == {LABEL["decode"]}
