"""The comparison's rules for any two traces (issue 14, second round), each on small synthetic
traces or tables built here: a first run needs one-time evidence; a dtype change is not a
batch change; recorded shapes decide the batch; a thread waiting in its step function takes no
wall share; the seed's stages only for an image pipeline (the generic groups everywhere else);
idle time explaining a step's change; a trace that is a window of a longer run; remapper
fusions in the op diff; scope suffixes. Fast: no TensorFlow, no subprocess."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from common.protos import XSpaceEvents
from compare.analysis import comparison, workload
from compare.analysis.compare_verdict import first_op
from compare.analysis.comparison import scope_aliases
from compare.analysis.opdiff import OpStat, diff, scope_key
from compare.api import compare_traces
from compare.load import load
from compare.load.xplane import op_shapes
from compare.output import caveat_words, compare_words, step_words
from compare.output.tables import describe
from tests.synthetic import CPU, HOST, PYTHON, document, trace, write

W1, W2 = "tf_Compute/1", "tf_Compute/2"

#: A small model as an xprof trace writes its ops: (node, type, start, duration) on W1.
MODEL = [("model/dense/MatMul", "MatMul", 0, 1000), ("model/dense/BiasAdd", "BiasAdd", 1000, 200),
         ("model/dense_1/MatMul", "MatMul", 1200, 800), ("loss/Mean", "Mean", 2000, 100),
         ("gradient_tape/model/dense/MatMul", "MatMul", 2100, 900),
         ("gradient_tape/model/dense_1/MatMul", "MatMul", 3000, 700),
         ("Adam/update/ResourceApplyAdam", "ResourceApplyAdam", 3700, 300)]


def _xprof(ops, scale: float = 1.0, extra=(), steps: int = 3, first_num: int = 0,
           gap: float = 0.0):
    """``steps`` steps of ``ops`` (times scaled), numbered from ``first_num`` by Keras-style
    markers on the python thread; ``extra`` (node, type, us) ops appended to each step."""
    events, t = [], 0.0
    length = (max(s + d for _, _, s, d in ops) * scale + sum(us for *_, us in extra) + gap)
    for k in range(steps):
        # the python thread as Keras leaves it: the step marker, the train_function call and
        # the function's execution, blocked until its ops (on W1) are done
        events.append((HOST, PYTHON, t, length, "train",
                       {"step_num": first_num + k, "step_name": "train",
                        "group_id": k}))
        events += _blocked_call(t, length)
        for node, op, s, d in ops:
            events.append((HOST, W1, t + s * scale, d * scale, op, node))
        at = t + max(s + d for _, _, s, d in ops) * scale
        for node, op, us in extra:
            events.append((HOST, W1, at, us, op, node))
            at += us
        t += length
    return trace(events, format="xprof")


def _blocked_call(t: float, length: float) -> list[tuple]:
    return [(HOST, PYTHON, t, length, "train_function"),
            (HOST, PYTHON, t, length, "EagerLocalExecute: __inference_train_function_9"),
            (HOST, PYTHON, t, length, "EagerKernelExecute")]


def _compare(a, b):
    return comparison.compare(comparison.side("legacy", a), comparison.side("modern", b))


def _text(c) -> str:
    return compare_words.comparison_text(c)


# --- precision and batch ----------------------------------------------------------------------

MIXED = [(f"model/dense/Cast_{k}", "Cast", 5) for k in range(20)] + \
    [(f"IsFinite_{k}", "IsFinite", 2) for k in range(4)] + \
    [(f"All_{k}", "All", 2) for k in range(4)]


def test_a_uniform_slowdown_with_dtype_evidence_is_a_precision_change():
    c = _compare(_xprof(MODEL), _xprof(MODEL, scale=10, extra=MIXED))
    kinds = {x.kind: x for x in c.parity.caveats}
    assert "batch" not in kinds and c.parity.like_for_like
    x = kinds["precision"]
    assert not x.breaks and x.facts["side"] == "b"
    assert x.facts["casts"] == {"a": 0, "b": 20}
    assert x.facts["loss_scale"] == {"a": 0, "b": 4}
    scale = x.detail["scale"]
    assert scale is not None and scale.scaled == scale.matched and scale.factor == 10.0
    text = caveat_words.text(x, c.labels)
    assert " all take " not in text           # counted, never "all"
    assert "of the op time matched by name" in text


def test_a_uniform_slowdown_without_dtype_evidence_suggests_the_batch():
    c = _compare(_xprof(MODEL), _xprof(MODEL, scale=10))
    kinds = {x.kind: x for x in c.parity.caveats}
    assert "precision" not in kinds
    assert kinds["batch"].breaks and kinds["batch"].facts["from"] == "times"


def test_a_few_more_casts_alone_are_no_precision_change():
    few = [(f"Cast_{k}", "Cast", 5) for k in range(5)]
    c = _compare(_xprof(MODEL, extra=few[:2]), _xprof(MODEL, scale=10, extra=few))
    assert "precision" not in {x.kind for x in c.parity.caveats}


def _with_shapes(tr, batch: int):
    tr.meta["op_shapes"] = {node: [["float32", f"[{batch},16]"]] for node, *_ in MODEL}
    tr.meta["op_shapes"]["model/dense/kernel"] = [["float32", "[16,16]"]]
    return tr


def test_recorded_shapes_decide_the_batch():
    c = _compare(_with_shapes(_xprof(MODEL), 64), _with_shapes(_xprof(MODEL, scale=1.5), 32))
    x = next(x for x in c.parity.caveats if x.kind == "batch")
    assert x.breaks and x.facts == {"a": 64, "b": 32, "from": "shapes"}
    per = x.detail["per_example"]
    assert per["b"] / per["a"] == pytest.approx(1.5 * 64 / 32, rel=0.05)
    assert "per example" in caveat_words.text(x, c.labels)


def test_equal_recorded_shapes_rule_the_batch_out():
    c = _compare(_with_shapes(_xprof(MODEL), 64), _with_shapes(_xprof(MODEL, scale=10), 64))
    assert "batch" not in {x.kind for x in c.parity.caveats}


@pytest.mark.parametrize("a, b, compared, differ", [
    ({"x/MatMul": [["float32", "[64,16]"]]}, {"x/MatMul": [["float32", "[32,16]"]]}, 1,
     {(64, 32): 1}),
    ({"x/MatMul": [["float32", "[64,16]"]]}, {"x/MatMul": [["float32", "[64,16]"]]}, 1, {}),
    ({"x/MatMul": [["float32", "[64,16]"]]}, {"y/MatMul": [["float32", "[32,16]"]]}, 0, {}),
    ({"x/W": [["float32", "[3,3,16,32]"]]}, {"x/W": [["float32", "[3,3,16,64]"]]}, 0, {}),
    ({"StatefulPartitionedCall/x/Relu": [["float32", "[8,4]"]]},
     {"x/Relu": [["float16", "[16,4]"]]}, 1, {(8, 16): 1}),
])
def test_compare_shapes(a, b, compared, differ):
    sh = workload.compare_shapes(a, b)
    assert (sh.compared, sh.differ) == (compared, differ)


def test_xplane_allocation_events_give_op_shapes():
    space = XSpaceEvents()
    plane = space.planes.add(name="/host:CPU")
    plane.event_metadata[1].name = "MemoryAllocation"
    plane.event_metadata[2].name = "MatMul"
    for k, name in enumerate(("tf_op", "shape", "data_type", "region_type", "output",
                              "model/dense/MatMul"), start=1):
        plane.stat_metadata[k].name = name
    line = plane.lines.add(name="tf_Compute/1")
    for region in (5, 99):          # an output, then a temporary buffer (left out)
        e = line.events.add(metadata_id=1)
        e.stats.add(metadata_id=1, ref_value=6)
        e.stats.add(metadata_id=2, str_value="[64,16]" if region == 5 else "[7]")
        e.stats.add(metadata_id=3, int64_value=19)
        e.stats.add(metadata_id=4, ref_value=region if region == 5 else 0,
                    str_value="" if region == 5 else "temp")
    line.events.add(metadata_id=2)
    assert op_shapes([space.SerializeToString()]) == {
        "model/dense/MatMul": [["float16", "[64,16]"]]}
    assert op_shapes([b"no allocation events here"]) == {}


def _timeline_with_snapshots(path, batch: int, scale: float = 1.0):
    """A timeline.py trace written with memory (``show_memory``): each op's output tensor as
    an object snapshot carrying its TensorDescription."""
    events = [(CPU, 0, s * scale, d * scale, t, n) for n, t, s, d in MODEL]
    doc = document(events, steps=[0])
    for k, (node, *_rest) in enumerate(MODEL):
        desc = ("dtype: DT_FLOAT\nshape {\n  dim {\n    size: %d\n  }\n  dim {\n    size: 16\n"
                "  }\n}\nallocation_description {\n  requested_bytes: 4\n}\n" % batch)
        doc["traceEvents"] += [
            {"ph": "N", "cat": "Tensor", "name": node, "pid": 1, "tid": 0, "ts": k, "id": k},
            {"ph": "O", "cat": "Tensor", "name": node if k else f"{node}:0", "pid": 1, "tid": 0,
             "ts": k + 1, "id": k, "args": {"snapshot": {"tensor_description": desc}}}]
    path.write_text(json.dumps(doc))
    return load(path)


def test_timeline_snapshots_give_op_shapes_and_the_batch(tmp_path):
    a = _timeline_with_snapshots(tmp_path / "a.json", 32)
    assert a.meta["op_shapes"]["model/dense/MatMul"] == [["float32", "[32,16]"]]
    b = _timeline_with_snapshots(tmp_path / "b.json", 512, scale=8)
    c = _compare(a, b)
    x = next(x for x in c.parity.caveats if x.kind == "batch")
    assert x.facts == {"a": 32, "b": 512, "from": "shapes"}


# --- first runs -------------------------------------------------------------------------------

def test_a_long_input_wait_is_input_bound_not_a_first_run():
    wait = [("IteratorGetNext", "IteratorGetNext", 0, 5000)] + \
        [(n, t, s + 5000, d) for n, t, s, d in MODEL]
    ready = [("IteratorGetNext", "IteratorGetNext", 0, 20)] + \
        [(n, t, s + 20, d) for n, t, s, d in MODEL]
    c = _compare(_xprof(wait, steps=1), _xprof(ready, steps=1))
    assert "first_run" not in {x.kind for x in c.parity.caveats}
    assert first_op(c, c.verdict) == "IteratorGetNext"


def test_one_call_far_longer_than_its_others_is_one_time_work():
    first = [(n, t, s, d * 100 if n == "model/dense/MatMul" else d) for n, t, s, d in MODEL]
    first = [(n, t, s + (99_000 if s >= 1000 else 0), d) for n, t, s, d in first]
    c = _compare(_xprof(first, steps=1), _xprof(MODEL, steps=1))
    x = next(x for x in c.parity.caveats if x.kind == "first_run")
    assert x.breaks and set(x.facts) == {"a"} and x.facts["a"] > 0.5
    o = x.detail["signs"]["a"]
    assert "outlier" in o.signs and o.one_time.outlier_node == "model/dense/MatMul"
    assert "model/dense/MatMul" in caveat_words.text(x, c.labels)


# --- a thread waiting inside its step function ------------------------------------------------

def _function_call(kernel_parent: bool):
    """One step: the python thread runs train_function, blocked in the function's kernel
    execution, while the op runs on an inter-op thread."""
    events = [(HOST, PYTHON, 0, 1000, "train", {"step_num": 0, "step_name": "train",
                                                "group_id": 0}),
              (HOST, PYTHON, 0, 1000, "train_function")]
    if kernel_parent:
        events.append((HOST, PYTHON, 0, 1000, "EagerLocalExecute: __inference_train_function_9"))
    events += [(HOST, PYTHON, 0, 1000, "EagerKernelExecute"),
               (HOST, W1, 0, 1000, "MatMul", "model/dense/MatMul")]
    return trace(events, format="xprof")


def test_a_thread_blocked_in_its_step_function_takes_no_wall_share():
    c = _compare(_function_call(True), _function_call(True))
    rows = {r.key: r.cells["a"].us for r in c.groups}
    assert rows["compute: model"] == pytest.approx(1000, abs=1)
    assert rows.get("runtime", 0.0) < 1.0


def test_eager_work_outside_a_function_call_still_counts():
    c = _compare(_function_call(False), _function_call(False))
    rows = {r.key: r.cells["a"].us for r in c.groups}
    assert rows["runtime"] == pytest.approx(500, abs=1)   # shared with the op


# --- views ------------------------------------------------------------------------------------

def test_other_programs_get_the_generic_view_in_every_artifact(tmp_path):
    a = write(tmp_path / "a.json", _blocked_call(0, 4100) +
              [(HOST, W1, s, d, t, n) for n, t, s, d in MODEL] +
              [(HOST, W1, 4000, 50, "ConcatV2", "concat"),
               (HOST, W1, 4050, 10, "Minimum", "clip_by_value_3/Minimum")], format="xprof",
              steps=[(0, 4100)])
    r = compare_traces(a, a, out=tmp_path / "out", labels={"a": "legacy", "b": "modern"})
    c = r.comparison
    assert c.view == "groups" and not c.has_pipeline()
    doc = json.loads((r.out / "report.json").read_text())
    assert doc["view"]["shown"] == "groups"
    assert doc["view"]["unmapped_share"]["legacy"]["groups"] == \
        doc["groups"]["unmapped_share"]["legacy"]
    assert "unmapped (generic groups)" in r.words["comparison"]
    assert "time goes to compute: model" in r.words["sides"]["a"]
    with gzip.open(r.out / "merged_trace.json.gz") as f:
        merged = json.load(f)
    rows = [e["args"]["name"] for e in merged["traceEvents"]
            if e.get("ph") == "M" and e["name"] == "thread_name"]
    assert any(n.endswith("· groups") for n in rows)
    assert not any(n.endswith("· stages") for n in rows)
    assert (r.out / "stages.png").stat().st_size > 0


def test_an_image_pipeline_keeps_the_seed_stages(tmp_path):
    a = write(tmp_path / "a.json", [(CPU, 0, 0, 100, "DecodeJpeg", "decode/DecodeJpeg"),
                                    (CPU, 0, 100, 50, "ConcatV2", "concat")], steps=[0])
    r = compare_traces(a, a, out=tmp_path / "out", labels={"a": "one", "b": "two"})
    c = r.comparison
    assert c.view == "stages" and c.row("assemble").cells["a"].us == 50
    assert "unmapped (seed stages)" in r.words["comparison"]


# --- the verdict: idle time, first steps ------------------------------------------------------

def _session_run(scale: float, gap: float):
    """One TF1 session run of MODEL's ops, each ``gap`` µs after the last (nothing traced)."""
    events, t = [], 0.0
    for node, op, _, d in MODEL:
        events.append((CPU, 0, t, d * scale, op, node))
        t += d * scale + gap
    return trace(events, steps=[0])


def test_a_speed_up_made_of_idle_time_is_said_to_be_so():
    """The shorter step's ops all take longer; the gain is the gaps between them."""
    c = _compare(_session_run(1.0, 1000), _session_run(1.2, 10))
    assert c.verdict.significant and c.sides["b"].steps.mean_us < c.sides["a"].steps.mean_us
    assert c.verdict.named[0].op == "idle"
    assert "the other way" in _text(c)
    assert "one traced step per side" in _text(c)


def test_a_change_the_ops_account_for_is_named_by_op():
    c = _compare(_session_run(1.0, 10), _session_run(2.0, 10))
    assert c.verdict.named[0].op not in ("idle", "runtime")


@pytest.mark.parametrize("first_num, kind", [(0, "program"), (500, "window")])
def test_first_step_only_when_it_is_the_programs(first_num, kind):
    c = _compare(_xprof(MODEL, first_num=first_num), _xprof(MODEL, first_num=first_num))
    st = c.sides["a"].steps
    assert (st.first_kind, st.first_num, st.last_num) == (kind, first_num, first_num + 2)
    assert ("first step:" in _text(c)) == (kind == "program")


def test_train_function_calls_outside_the_marked_steps_are_counted():
    tr = _xprof(MODEL, first_num=500)
    end = max(s.ts + s.dur for s in tr.steps)
    events = [(HOST, PYTHON, s.ts + 1, s.dur - 2, "train_function") for s in tr.steps]
    events += [(HOST, PYTHON, end + 10, 100, "train_function")]
    events += [(HOST, PYTHON, s.ts, s.dur, "train", {"step_num": 500 + k, "step_name": "train",
                                                      "group_id": k})
               for k, s in enumerate(tr.steps)]
    tr2 = trace(events + [(HOST, W1, end + 20, 50, "MatMul", "m/MatMul")], format="xprof")
    assert comparison.unmarked_calls(tr2) == 1


# --- the op diff ------------------------------------------------------------------------------

def _stats(**ops) -> dict:
    return {(name, t): OpStat(t, host_us=us, count=1, group=g, key=(name, t))
            for name, (t, us, g) in ops.items()}


FUSED = {"seq/conv/Relu": ("_FusedConv2D", 100, "compute")}
PIECES = {"seq/conv/Conv2D": ("Conv2D", 300, "compute"),
          "seq/conv/BiasAdd": ("BiasAdd", 40, "compute"),
          "seq/conv/Relu": ("Relu", 30, "compute")}


@pytest.mark.parametrize("a, b, status, into", [
    (FUSED, PIECES, "unfused", "a"), (PIECES, FUSED, "fused", "b")])
def test_a_remapper_fusion_on_one_side_is_fused_or_unfused(a, b, status, into):
    rows = diff(_stats(**a), _stats(**b), {})
    assert len(rows) == 1
    r = rows[0]
    assert (r.op, r.type, r.status, r.into) == ("seq/conv/Relu", "_FusedConv2D", status, into)
    assert r.members == ["seq/conv/BiasAdd", "seq/conv/Conv2D", "seq/conv/Relu"]
    assert {r.a_us, r.b_us} == {100, 370}
    assert "Conv2D" in describe(r)


def test_rows_that_share_a_type_stay_apart():
    a = _stats(**{"MatMul": ("MatMul", 96, "compute"),
                  "x/MatMul_grad/MatMul": ("MatMul", 180, "compute"),
                  "y/MatMul": ("MatMul", 180, "compute")})
    b = _stats(**{"MatMul_3": ("MatMul", 214, "compute"),
                  "x_3/MatMul_3_grad/MatMul": ("MatMul", 90, "compute"),
                  "z/MatMul": ("MatMul", 80, "compute")})
    rows = {r.match: r for r in diff(a, b, {})}
    assert rows["scope"].op in ("MatMul", "x/MatMul_grad/MatMul")
    labels = [describe(r) for r in diff(a, b, {})]
    assert len(set(labels)) == len(labels)
    assert any("by type: y/MatMul, z/MatMul" in x for x in labels)


@pytest.mark.parametrize("name, key", [
    ("gradients_3/MatMul_3_grad/MatMul_1", "gradients/MatMul_grad/MatMul"),
    ("gradients/MatMul_grad/MatMul", "gradients/MatMul_grad/MatMul"),
    ("blk5_1/FusedBatchNorm", "blk5/FusedBatchNorm"),
])
def test_scope_key_drops_uniquifying_suffixes(name, key):
    assert scope_key(name) == key


def test_group_rows_pair_scopes_that_differ_by_a_suffix():
    alias = scope_aliases({
        "a": {"compute: gradients", "compute: layer_1", "compute: layer_2", "runtime"},
        "b": {"compute: gradients_3", "compute: layer_1", "compute: layer_2"}})
    assert alias["b"] == {"compute: gradients_3": "compute: gradients"}
    assert alias["a"] == {}
    many = scope_aliases({"a": {f"compute: clip_by_value_{k}" for k in range(6)},
                          "b": {"compute: clip_by_value"}})
    assert set(many["a"].values()) == {"compute: clip_by_value_*"}
    assert many["b"] == {"compute: clip_by_value": "compute: clip_by_value_*"}


def test_explain_does_not_call_a_windows_first_step_a_first_run():
    from compare.analysis.steps import choose

    c = choose(_xprof(MODEL, first_num=500))
    assert c.why == "steady" and c.window_of_run and c.first_num == 500
    assert "window of a longer run" in step_words.reason(c)
    c = choose(_xprof(MODEL, first_num=0))
    assert not c.window_of_run and "one-time work" in step_words.reason(c)


def test_untraced_edges_of_each_step_equal_a_mask_per_step():
    """A step's untraced edges (the account's ``untraced`` time: before its first segment and
    after its last, clipped to the step) equal what a mask per step finds, on random
    timelines with gaps, overlaps and steps without events."""
    from compare.analysis.attribution import attribute, segments
    from compare.analysis.mapping import map_stages

    rng = np.random.default_rng(5)
    for _ in range(60):
        n = int(rng.integers(1, 30))
        events = [(CPU, int(rng.integers(0, 3)), float(rng.integers(0, 400)),
                   float(rng.integers(1, 60)), "MatMul", f"m/MatMul_{k}") for k in range(n)]
        starts = sorted({0, *rng.integers(1, 400, int(rng.integers(1, 5))).tolist()})
        tr = trace(events, steps=starts)
        att = attribute(tr, map_stages(tr))
        e, t0, t1 = segments(tr)
        for st in att.steps:
            lo, hi = st.ts, st.ts + st.dur
            inside = (t1 > lo) & (t0 < hi)
            want = st.dur if not inside.any() else \
                (max(0.0, t0[inside].min() - lo) + max(0.0, hi - t1[inside].max()))
            assert st.untraced_us == pytest.approx(want)


def test_the_same_events_on_both_sides_are_said_first(tmp_path):
    """Two copies of one profile (tensorflow/profiler's multi-worker demo ships two hosts'
    byte-identical xplanes) are like for like, trivially, and that is said first; a trace
    whose one op differs by a microsecond is compared as usual."""
    events = [(CPU, 0, 10 + 100 * s, 50, "MatMul", "dense/MatMul") for s in range(3)]
    a = write(tmp_path / "a" / "timeline.json", events, steps=[0, 100, 200])
    b = write(tmp_path / "b" / "timeline.json", events, steps=[0, 100, 200])
    rep = compare_traces(a, b, out=tmp_path / "out")
    kinds = [c.kind for c in rep.comparison.parity.caveats]
    assert kinds[:1] == ["identical"] and rep.comparison.parity.like_for_like
    assert rep.words["comparison"].startswith("a/timeline.json and b/timeline.json "
                                              "hold the same 6 events")
    other = write(tmp_path / "c" / "timeline.json", events[:-1] + [
        (CPU, 0, 210, 51, "MatMul", "dense/MatMul")], steps=[0, 100, 200])
    rep = compare_traces(a, other, out=tmp_path / "out2")
    assert "identical" not in [c.kind for c in rep.comparison.parity.caveats]


# --- what the traces hold: ops at all, a tf.data service's input (issue 26) -------------------

def test_traces_without_a_tensorflow_op_are_not_like_for_like(tmp_path):
    """Two traces of other tools' events (no op type, no node), 10 s against 10 us: nothing
    shows they run one program, and the empty op table says why it is empty."""
    def doc(name: str, dur: float) -> dict:
        return {"traceEvents": [{"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": 0,
                                 "dur": dur}]}

    (tmp_path / "a.json").write_text(json.dumps(doc("alpha", 10_000_000)))
    (tmp_path / "b.json").write_text(json.dumps(doc("beta", 10)))
    r = compare_traces(tmp_path / "a.json", tmp_path / "b.json", out=tmp_path / "out")
    c = r.comparison
    (program,) = [x for x in c.parity.caveats if x.kind == "program"]
    assert program.breaks and not c.parity.like_for_like
    assert program.facts["no_ops"] == ["a", "b"] and not c.ops_diff
    assert r.words["comparison"].startswith("Not like for like: a.json and b.json hold no "
                                            "TensorFlow op")
    md = (r.out / "report.md").read_text()
    section = md.split("## Op by op", 1)[1].split("##", 1)[0]
    assert "No op to compare: a.json and b.json hold no TensorFlow op" in section
    # one side with ops, the other without: that side is named
    b2 = write(tmp_path / "c.json", [(CPU, 0, 0, 100, "MatMul", "dense/MatMul")], steps=[0])
    c2 = compare_traces(tmp_path / "a.json", b2, out=tmp_path / "out2").comparison
    (program,) = [x for x in c2.parity.caveats if x.kind == "program"]
    assert program.facts["no_ops"] == ["a"] and program.breaks


#: The seed pipeline's augmentation, the same on both sides: (node, type, us).
AUGMENT = [("saturation/AdjustSaturation", "AdjustSaturation", 300),
           ("contrast/AdjustContrastv2", "AdjustContrastv2", 200),
           ("flip/ReverseV2", "ReverseV2", 100), ("assemble/concat", "ConcatV2", 100)]
#: What the legacy side does in its own process and a tf.data service run hands the workers.
HANDED = [("decode/DecodeJpeg", "DecodeJpeg", 3000), ("resize/ResizeBilinear", "ResizeBilinear",
                                                    2000)]


def _pipeline_trace(served: bool, steps: int = 4):
    """An image pipeline's steps on W1; ``served``: read, decode and resize on tf.data service
    workers (not in the trace), the client fetching their elements on a tf.data thread."""
    ops = AUGMENT if served else HANDED + AUGMENT
    length = sum(us for *_, us in ops) + (50 if served else 0)
    events, t = [], 0.0
    for k in range(steps):
        events.append((HOST, PYTHON, t, length, "train", {"step_num": k, "step_name": "train",
                                                            "group_id": k}))
        events += _blocked_call(t, length)
        at = t
        if served:
            events.append((HOST, W1, at, 50, "IteratorGetNextOp::DoCompute"))
            events.append((HOST, W1, at, 40, "Iterator::DataService"))
            events.append((HOST, "tf_data_private_threadpool/3", t, length * 0.8,
                           "GetDataServiceElement"))
            at += 50
        for node, op, us in ops:
            events.append((HOST, W1, at, us, op, node))
            at += us
        t += length
    return trace(events, format="xprof")


def test_a_tf_data_service_run_says_what_moved_to_the_workers():
    """Same pipeline, B's read, decode and resize handed to tf.data service workers: not like
    for like for that reason (not 'different programs'); the stages with no time in B are
    named, the workers counted when the run says how many; the client's fetches are input in
    both views."""
    a = comparison.side("legacy", _pipeline_trace(False))
    b = comparison.side("modern", _pipeline_trace(True))
    b.service_workers = 2
    c = comparison.compare(a, b, {"a": "legacy", "b": "modern"})
    kinds = [x.kind for x in c.parity.caveats]
    assert "program" not in kinds and not c.parity.like_for_like
    (svc,) = [x for x in c.parity.caveats if x.kind == "data_service"]
    assert svc.breaks and svc.facts == {"side": "b", "moved": ["decode", "resize"],
                                        "workers": 2}
    assert svc.detail["events"]["b"] == 8 and svc.detail["moved_us"] == pytest.approx(5000)
    assert caveat_words.text(svc, c.labels).startswith("modern's input came from 2 tf.data service workers (8 events "
                               "of the service's client in its trace): its decode, resize have "
                               "no time in its trace (legacy spends 5.0 ms a step in them)")
    assert _text(c).startswith("Not like for like: modern's input came from 2 tf.data service")
    names = b.trace.strings.names
    fetch = [i for i, n in enumerate(b.trace.events.name.tolist())
             if names[n] == "GetDataServiceElement"]
    from compare.vocabulary.groups import GROUPS
    from compare.vocabulary.labels import LABELS
    assert {GROUPS[b.groups.group[i]] for i in fetch} == {"input"}
    assert {LABELS[b.smap.label[i]] for i in fetch} == {"input_wait"}
    # without the run's record the count is not guessed
    b.service_workers = None
    c = comparison.compare(a, b, {"a": "legacy", "b": "modern"})
    (svc,) = [x for x in c.parity.caveats if x.kind == "data_service"]
    assert svc.facts["workers"] is None
    assert "tf.data service workers (how many, its trace does not show)" in \
        caveat_words.text(svc, c.labels)
