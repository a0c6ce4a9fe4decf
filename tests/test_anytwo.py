"""Comparing any two traces (issue 14): the generic vocabulary, the seed stages' evidence rules,
op matching and the parity checks, on tables of names and small synthetic timelines built here.
"""
from __future__ import annotations

import json

import pytest

from compare.analysis.compare_verdict import first_op
from compare.analysis.mapping import stage_of_op
from compare.analysis.opdiff import OpStat, diff, scope_key
from compare.analysis.opkeys import normalise
from compare.output import caveat_words
from compare.vocabulary.groups import group_of_op, is_model_side, strip_wrappers, top_scope

# --- the generic vocabulary -----------------------------------------------------------------

@pytest.mark.parametrize("op_type, tf_name, name, group", [
    ("ApplyAdam", "Adam/update_w/ApplyAdam", "", "optimizer"),
    ("ResourceApplyGradientDescent", "SGD/update/ResourceApplyGradientDescent", "", "optimizer"),
    ("ResourceSparseApplyAdagrad", "x/ResourceSparseApplyAdagrad", "", "optimizer"),
    ("Unique", "Adam/update_word_embeddings/Unique", "", "optimizer"),
    ("Mul", "GradientDescent/update_layer_1/mul", "", "optimizer"),
    ("NcclAllReduce", "NcclAllReduce_3", "", "communication"),
    ("CollectiveReduceV2", "CollectiveReduceV2", "", "communication"),
    ("_Send", "edge_12_x", "", "communication"),
    ("_Recv", "_recv_Placeholder_0", "", "input"),
    ("_Arg", "_arg_images_0_0", "", "input"),
    ("", "", "MEMCPYHtoD", "copy"),
    ("", "", "MemcpyD2H", "copy"),
    ("IteratorGetNext", "IteratorGetNext", "", "input"),
    ("QueueDequeueManyV2", "input/shuffle_batch", "", "input"),
    ("TFRecordDataset", "TFRecordDataset", "", "input"),
    ("ReaderReadV2", "ReaderReadV2", "", "input"),
    ("DecodeJpeg", "decode/DecodeJpeg", "", "preprocessing"),
    ("ParseExampleV2", "ParseExample/ParseExampleV2", "", "preprocessing"),
    ("LookupTableFindV2", "hash_table_Lookup", "", "preprocessing"),
    ("ResizeBilinear", "resize/ResizeBilinear", "", "preprocessing"),
    ("ResizeBilinearGrad", "gradients/ResizeBilinear_grad/ResizeBilinearGrad", "", "compute"),
    ("MatMul", "layer_1/MatMul", "", "compute"),
    ("VariableV2", "layer_1/weights", "", "runtime"),
    ("_Retval", "_retval_loss_0_0", "", "runtime"),
    ("", "", "cuLaunchKernel", "runtime"),
    ("_XlaCompile", "cluster_1_1/xla_compile", "", "xla_compile"),
    ("_XlaLaunch", "cluster_0/_0/_1", "", "xla_run"),
    ("", "", "SomethingUnknown", None),
])
def test_group_of_op(op_type, tf_name, name, group):
    assert group_of_op(op_type, tf_name, name) == group


@pytest.mark.parametrize("tf_name, stripped, scope", [
    ("layer_1/fully_connected/MatMul", "layer_1/fully_connected/MatMul", "layer_1"),
    ("cluster_2_1/conv1/Conv2D", "conv1/Conv2D", "conv1"),
    ("StatefulPartitionedCall/model/dense/MatMul", "model/dense/MatMul", "model"),
    ("__inference_train_function_123/gradient_tape/x", "gradient_tape/x", "gradient_tape"),
    ("MatMul", "MatMul", "(top level)"),
])
def test_scopes(tf_name, stripped, scope):
    assert strip_wrappers(tf_name) == stripped
    assert top_scope(tf_name) == scope


@pytest.mark.parametrize("tf_name, model_side", [
    ("gradients/concat_1", True), ("gradients_1/x/y", True), ("gradient_tape/model/x", True),
    ("Adam/update_w/strided_slice", True), ("SGD/Assign", True),
    ("crop_3/Slice", False), ("stack", False), ("input/shuffle_batch", False),
])
def test_model_side(tf_name, model_side):
    assert is_model_side(tf_name) == model_side


# --- the seed's stages: only on the pipeline's own evidence ----------------------------------

@pytest.mark.parametrize("op_type, op_name, weak_ok, stage", [
    ("StridedSlice", "Adam/update_word_embeddings/strided_slice", True, None),
    ("ConcatV2", "gradients/concat_1", True, None),
    ("Transpose", "gradients/x/Conv2DBackpropInput-0-0-TransposeNCHWToNHWC", True, None),
    ("StridedSlice", "strided_slice_3", True, "crop"),     # unscoped, in an image pipeline
    ("StridedSlice", "strided_slice_3", False, None),      # a trace with no image pipeline
    ("Pack", "stack", True, "assemble"),
    ("StatelessShuffle", "stateless_shuffle/StatelessShuffle", True, "shuffle"),
    ("Pack", "gradients/stack", True, None),               # the backward pass's
    ("Slice", "crop_3/Slice", False, "crop"),              # our scope is evidence itself
    ("AdjustSaturation", "x/AdjustSaturation", False, "saturation"),  # an image op type
    ("RefSwitch", "global_step/cond/read/Switch", True, None),  # a variable's read/
    ("ReaderReadV2", "read/ReaderReadV2", False, "read"),
    ("Minimum", "clip_by_value/Minimum", True, "clip"),     # in an image pipeline
    ("Minimum", "clip_by_value_49/Minimum", False, None),   # gradient clipping in a model
    ("Minimum", "gradients/clip_by_value/Minimum", False, None),
    ("ConcatV2", "concat", False, None),                    # any program concatenates
    ("ReaderReadV2", "ReaderReadV2", False, None),          # reading alone is no image
    ("DecodeJpeg", "DecodeJpeg", False, "decode"),          # an image op type is evidence
    ("Identity", "gradients/x/Identity", False, "runtime"),  # overheads stay what they are
    ("IteratorGetNext", "IteratorGetNext", False, "input_wait"),
])
def test_stage_of_op_needs_the_pipelines_evidence(op_type, op_name, weak_ok, stage):
    assert stage_of_op(op_type, op_name, weak_ok) == stage


# --- small synthetic timelines --------------------------------------------------------------

CPU = "/job:localhost/replica:0/task:0/device:CPU:0 Compute"


def timeline(path, ops, runs: int = 1, gap: float = 0.0) -> str:
    """A timeline.py-style trace: ``ops`` = [(name, type, start, dur, [inputs])], repeated
    ``runs`` times (each run starts with a ``_SOURCE`` NoOp), ``gap`` µs untraced between runs."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": CPU}}]
    t = 0.0
    for _ in range(runs):
        events.append({"ph": "X", "pid": 1, "tid": 0, "ts": t, "dur": 1, "name": "NoOp",
                       "args": {"name": "_SOURCE", "op": "NoOp"}})
        end = t
        for name, op, start, dur, inputs in ops:
            args = {"name": name, "op": op}
            args.update({f"input{k}": x for k, x in enumerate(inputs)})
            events.append({"ph": "X", "pid": 1, "tid": 0, "ts": t + 1 + start, "dur": dur,
                           "name": op, "args": args})
            end = max(end, t + 1 + start + dur)
        t = end + gap
    with open(path, "w") as f:
        json.dump({"traceEvents": events}, f)
    return str(path)


def _compare(tmp_path, a_ops, b_ops, a_runs=1, b_runs=1, b_gap=0.0, labels=None):
    from compare.api import compare_traces

    a = timeline(tmp_path / "before.json", a_ops, a_runs)
    b = timeline(tmp_path / "after.json", b_ops, b_runs, b_gap)
    return compare_traces(a, b, out=tmp_path / "out", labels=labels)


MODEL = [("layer_1/MatMul", "MatMul", 0, 1000, []),
         ("layer_1/Relu", "Relu", 1000, 100, ["layer_1/MatMul"]),
         ("gradients/layer_1/MatMul_grad/MatMul", "MatMul", 1100, 900, ["layer_1/Relu"]),
         ("GradientDescent/update_layer_1/ApplyGradientDescent", "ApplyGradientDescent", 2000,
          200, ["gradients/layer_1/MatMul_grad/MatMul"])]


def test_dataflow_never_pulls_an_optimizer_op_into_a_stage(tmp_path):
    from compare.analysis.analyse import analyse
    from compare.load import load

    ops = [("decode/DecodeJpeg", "DecodeJpeg", 0, 100, []),
           ("random_uniform", "RandomUniform", 100, 10, []),
           ("Adam/update_w/Unique", "Unique", 110, 50, []),
           ("crop_1/Slice", "Slice", 160, 30, ["decode/DecodeJpeg", "random_uniform",
                                                "Adam/update_w/Unique"])]
    a = analyse(load(timeline(tmp_path / "t.json", ops)))
    names = a.trace.col_str("tf_name")
    label = {n: a.smap.label_name(i) for i, n in enumerate(names)}
    assert label["random_uniform"] == "crop"           # a draw feeding the crop: pulled in
    assert label["Adam/update_w/Unique"] == "unmapped"  # an optimizer's op: never


def test_groups_place_a_model_and_the_step_adds_up(tmp_path):
    r = _compare(tmp_path, MODEL, MODEL)
    c = r.comparison
    keys = {row.key for row in c.groups}
    assert {"compute: layer_1", "compute: gradients", "optimizer"} <= keys
    for k in ("a", "b"):
        assert c.group_unmapped_us(k) == 0
        total = sum(row.cells[k].us for row in c.groups)
        assert total == pytest.approx(c.sides[k].steps.mean_us, abs=0.5)   # rows are rounded


def test_op_diff_names_the_op_that_changed_and_labels_default_to_file_names(tmp_path):
    faster = [op if op[0] != "layer_1/MatMul" else ("layer_1/MatMul", "MatMul", 0, 200, [])
              for op in MODEL]
    faster = [(n, t, s - 800 if s >= 1000 else s, d, i) for n, t, s, d, i in faster]
    r = _compare(tmp_path, MODEL, faster)
    c = r.comparison
    top = c.ops_diff[0]
    assert (top.op, top.status, top.match) == ("layer_1/MatMul", "changed", "name")
    assert top.delta_us == pytest.approx(-800, abs=1)
    assert first_op(c, c.verdict) == "layer_1/MatMul"
    assert c.labels == {"a": "before.json", "b": "after.json"}
    assert "after.json is" in r.words["comparison"]
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["order"] == ["before.json", "after.json"]
    assert doc["ops_diff"][0]["op"] == "layer_1/MatMul"
    assert {"a_us", "b_us", "delta_us", "a_count", "b_count",
            "status"} <= set(doc["ops_diff"][0])


def test_labels_name_the_sides_everywhere(tmp_path):
    r = _compare(tmp_path, MODEL, MODEL, labels={"legacy": "base", "modern": "mkl"})
    md = (tmp_path / "out" / "report.md").read_text()
    assert md.startswith("# base vs mkl")
    assert "base" in r.words["sides"]["a"]
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["order"] == ["base", "mkl"] and set(doc["steps"]) == {"base", "mkl"}


def test_same_model_twice_is_no_significant_change(tmp_path):
    c = _compare(tmp_path, MODEL, MODEL).comparison
    assert not c.verdict.significant and c.parity.like_for_like
    assert all(r.status == "same" for r in c.ops_diff)


def test_one_step_against_many_is_said_first(tmp_path):
    r = _compare(tmp_path, MODEL, MODEL, b_runs=4, b_gap=1500)
    c = r.comparison
    kinds = {x.kind for x in c.parity.caveats}
    assert {"steps", "untraced"} <= kinds and not c.parity.like_for_like
    assert r.words["comparison"].startswith("Not like for like")
    assert not c.verdict.significant   # compared on traced spans, not the gaps


def test_feed_dict_against_traced_input_is_not_like_for_like(tmp_path):
    fed = [("_arg_images_0_0", "_Arg", 0, 5, [])] + MODEL
    queued = [("input/batch", "QueueDequeueManyV2", 0, 3000, [])] + [
        (n, t, s + 3000, d, i) for n, t, s, d, i in MODEL]
    c = _compare(tmp_path, fed, queued).comparison
    assert [x.kind for x in c.parity.caveats if x.breaks] == ["feed_dict"]
    assert c.ops_diff[0].op == "input/batch" and c.ops_diff[0].status == "added"


#: MODEL with a third MatMul: one call of a type far longer than its others is a first call
#: setting its library up (the evidence explain's first-run finding reads too).
MODEL3 = MODEL + [("gradients/layer_1/MatMul_grad/MatMul_1", "MatMul", 2200, 900,
                   ["layer_1/Relu"])]


def test_first_run_against_a_steady_step(tmp_path):
    first = [(n, t, s, d * 200 if n == "layer_1/MatMul" else d, i) for n, t, s, d, i in MODEL3]
    first = [(n, t, s + (199_000 if s >= 1000 else 0), d, i) for n, t, s, d, i in first]
    c = _compare(tmp_path, first, MODEL3).comparison
    assert [x.kind for x in c.parity.caveats if x.breaks] == ["first_run"]
    x = next(x for x in c.parity.caveats if x.kind == "first_run")
    assert x.detail["signs"]["a"].one_time.outlier_node == "layer_1/MatMul"
    assert "layer_1/MatMul" in caveat_words.text(x, c.labels)
    assert c.ops_diff[0].op == "layer_1/MatMul"


def test_a_long_input_wait_in_a_steady_step_is_no_first_run(tmp_path):
    """One step waiting 60 % of its time on IteratorGetNext against a side that waits
    little: input-bound, not one-time work (no compile, autotuning or first-call set-up)."""
    wait = [("IteratorGetNext", "IteratorGetNext", 0, 4000, [])] + [
        (n, t, s + 4000, d, i) for n, t, s, d, i in MODEL3]
    ready = [("IteratorGetNext", "IteratorGetNext", 0, 20, [])] + [
        (n, t, s + 20, d, i) for n, t, s, d, i in MODEL3]
    c = _compare(tmp_path, wait, ready).comparison
    assert not [x for x in c.parity.caveats if x.kind == "first_run"]
    assert c.parity.like_for_like
    assert first_op(c, c.verdict) == "IteratorGetNext"


# --- op matching: the passes, on tables -----------------------------------------------------

def _stats(**ops) -> dict:
    return {(name, t): OpStat(t, host_us=us, count=1, group=g, key=(name, t))
            for name, (t, us, g) in ops.items()}


def test_matching_passes_name_scope_type_and_fused():
    a = _stats(**{"dense/MatMul": ("MatMul", 100, "compute"),
                  "conv_1/Conv2D": ("Conv2D", 50, "compute"),
                  "old/Conv2DBackpropFilter": ("Conv2DBackpropFilter", 30, "compute"),
                  "loss/Mul": ("Mul", 40, "compute"),
                  "gone/Relu": ("Relu", 5, "compute")})
    b = _stats(**{"dense/MatMul": ("MatMul", 100, "compute"),
                  "conv_2/Conv2D": ("Conv2D", 20, "compute"),
                  "new/Conv2DBackpropFilter": ("Conv2DBackpropFilter", 90, "compute"),
                  "cluster_0": ("_XlaLaunch", 25, "xla_run")})
    rows = {r.op: r for r in diff(a, b, {})}
    assert (rows["dense/MatMul"].status, rows["dense/MatMul"].match) == ("same", "name")
    assert (rows["conv/Conv2D"].match, rows["conv/Conv2D"].delta_us) == ("scope", -30)
    assert rows["Conv2DBackpropFilter"].match == "type"
    fused = rows["cluster_0"]
    assert fused.status == "fused" and fused.into == "b"
    assert sorted(fused.members) == ["gone/Relu", "loss/Mul"]
    assert fused.a_us == 45 and fused.b_us == 25


def test_fused_only_into_the_cluster_that_holds_the_op():
    a = _stats(**{"x/Mul": ("Mul", 40, "compute"), "y/Add": ("Add", 10, "compute")})
    b = _stats(cluster_1=("_XlaLaunch", 20, "xla_run"), cluster_2=("_XlaLaunch", 5, "xla_run"))
    rows = {r.op: r for r in diff(a, b, {"b": {"cluster_1": {"x/Mul"},
                                                    "cluster_2": {"other"}}})}
    assert rows["cluster_1"].members == ["x/Mul"] and rows["cluster_1"].status == "fused"
    assert rows["y/Add"].status == "removed" and rows["cluster_2"].status == "added"


@pytest.mark.parametrize("name, normal, scoped", [
    ("cluster_3_1/brightness_2/add", "brightness_2/add", "brightness/add"),
    ("edge_123_input/DecodeRaw", "edge_input/DecodeRaw", "edge_input/DecodeRaw"),
    ("IteratorGetNext/_4", "IteratorGetNext", "IteratorGetNext"),
    ("StatefulPartitionedCall/model/conv2d_1/Conv2D", "model/conv2d_1/Conv2D",
     "model/conv2d/Conv2D"),
])
def test_name_normalisation(name, normal, scoped):
    assert normalise(name) == normal and scope_key(normal) == scoped


def test_noise_is_the_uncertainty_of_the_medians_not_the_spread_of_steps():
    # 19 steady steps each side varying by an interquartile range of 50 % (a loaded machine):
    # a 4x speed-up is far beyond what that spread makes uncertain
    from compare.analysis.parity import noise_share
    from compare.analysis.result import StepBasis

    noisy = noise_share([StepBasis(16_800, 0.5, 19, 0.0), StepBasis(4_100, 0.5, 19, 0.0)])
    assert 0.05 <= noisy < 0.25
    assert abs(16_800 - 4_100) > noisy * 16_800
    # few steps: the same spread cannot be told apart as finely
    assert noise_share([StepBasis(16_800, 0.5, 3, 0.0), StepBasis(4_100, 0.5, 3, 0.0)]) > noisy
    # a single steady step on a side: at least the single-step floor
    assert noise_share([StepBasis(1_000, 0.0, 1, 0.0), StepBasis(1_000, 0.0, 5, 0.0)]) >= 0.10
