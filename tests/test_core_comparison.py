"""One trace against another (compare/analysis/comparison.py): stage rows, ratios, unmapped
time, step statistics and the verdict on two small synthetic traces whose numbers are known;
report.json against its schema; and ``compare.api.compare_traces`` end to end on two tiny
JSON traces (all five artifacts). Fast: no TensorFlow, no subprocess."""
from __future__ import annotations

import gzip
import json
import re
import sys

import jsonschema
import numpy as np
import pytest

from common.stages import ALL_STAGES, PIPELINE_STAGES
from compare.analysis import comparison
from compare.analysis.explanation import explain
from compare.analysis.mapping import stage_of_op
from compare.api import compare_traces
from compare.model.events import CAT
from compare.output import compare_words, report_json
from compare.output import report as report_mod
from compare.vocabulary.ops import is_input_op
from tests import schema
from tests.synthetic import CPU, HOST, PYTHON, hlo_module, trace, write

# Per steady step (us): legacy waits on a queue and decodes slowly; modern waits little.
# The first step of each runs decode twice as long (start-up).
LEGACY = {"input": ("QueueDequeueManyV2", "batch", 2000), "decode": 3000, "resize": 1000,
          "unmapped": 500, "step": 10_000}
MODERN = {"input": ("IteratorGetNext", "IteratorGetNext", 100), "decode": 1000, "resize": 900,
          "unmapped": 500, "step": 4000}
STEPS = 4


def _events(p: dict) -> tuple[list[tuple], list[float]]:
    """Four session runs, one after another on lane 0, the last closed by a zero-length op."""
    events, starts = [], []
    op, node, wait = p["input"]
    for k in range(STEPS):
        t = k * p["step"]
        starts.append(t)
        decode = p["decode"] * (2 if k == 0 else 1)
        for name, tf_name, dur in ((op, node, wait),
                                   ("DecodeJpeg", "decode/DecodeJpeg", decode),
                                   ("ResizeBilinear", "resize/ResizeBilinear", p["resize"]),
                                   ("MatMul", "dense/MatMul", p["unmapped"])):
            events.append((CPU, 0, t, dur, name, tf_name))
            t += dur
    events.append((CPU, 0, STEPS * p["step"], 0, "NoOp", "end"))
    return events, starts


def _trace(p: dict):
    events, starts = _events(p)
    return trace(events, steps=starts)


@pytest.fixture(scope="module")
def compared():
    sides = {"legacy": comparison.side("legacy", _trace(LEGACY), "legacy test trace"),
             "modern": comparison.side("modern", _trace(MODERN), "modern test trace")}
    return comparison.compare(sides["legacy"], sides["modern"]), sides


def test_stage_rows(compared):
    c, _ = compared
    assert [r.stage for r in c.stages] == list(ALL_STAGES)
    assert {r.stage for r in c.stages if r.kind == "pipeline"} == set(PIPELINE_STAGES)
    for stage, lkey in (("decode", "decode"), ("resize", "resize")):
        row = c.row(stage)
        assert row.cells["a"].us == LEGACY[lkey]
        assert row.cells["b"].us == MODERN[lkey]
        assert row.cells["a"].cpu_us == LEGACY[lkey]
        assert row.cells["a"].first_us == LEGACY[lkey] * (2 if stage == "decode" else 1)
        assert row.ratio == pytest.approx(LEGACY[lkey] / MODERN[lkey], abs=1e-3)
    wait = c.row("input_wait")
    assert (wait.cells["a"].us, wait.cells["b"].us) == (2000, 100)
    assert wait.cells["a"].ops == ["QueueDequeueManyV2"]
    assert wait.cells["b"].ops == ["IteratorGetNext"]
    assert c.row("decode").cells["a"].ops == ["DecodeJpeg"]
    assert c.row("decode").cells["a"].op_us[0].us == LEGACY["decode"]
    # the idle rest of each step
    idle = LEGACY["step"] - 2000 - LEGACY["decode"] - LEGACY["resize"] - LEGACY["unmapped"]
    assert c.row("idle").cells["a"].us == idle
    # no time: no ratio against zero, no ops
    assert c.row("flip").ratio is None and c.row("flip").cells["a"].ops == []
    for k in ("a", "b"):
        assert sum(r.cells[k].us for r in c.stages) + c.sides[k].unmapped_us == \
            pytest.approx({"a": LEGACY, "b": MODERN}[k]["step"])


def test_unmapped_and_coverage(compared):
    c, _ = compared
    for k, p in (("a", LEGACY), ("b", MODERN)):
        s = c.sides[k]
        assert s.unmapped_us == p["unmapped"]
        assert [(o.op, o.us) for o in s.unmapped_ops] == [("MatMul", p["unmapped"])]
        assert s.coverage.unmapped_share == pytest.approx(p["unmapped"] / p["step"])
        assert s.coverage.stages_with_time == ["decode", "resize"]
        assert s.estimates_used == []


def test_step_statistics(compared):
    c, _ = compared
    for k, p in (("a", LEGACY), ("b", MODERN)):
        st = c.sides[k].steps
        assert (st.count, st.steady_count) == (STEPS, STEPS - 1)
        assert st.median_us == st.mean_us == st.min_us == st.max_us == p["step"]
        assert st.first_us == p["step"]
        assert st.representative.stages_us["decode"] == p["decode"]
        assert st.split_us["input"] == p["input"][2] == st.input_us
        assert st.split_us["compute"] == p["decode"] + p["resize"] + p["unmapped"]
        assert st.first_split_us["compute"] == 2 * p["decode"] + p["resize"] + p["unmapped"]
        assert sum(st.split_us.values()) == pytest.approx(p["step"])


def test_verdict_names_the_stage_that_changed_most_first(compared):
    c, _ = compared
    changes = sorted(((r.cells["a"].us - r.cells["b"].us, r.stage)
                      for r in c.stages if r.stage != "idle"), reverse=True)
    most = changes[0][1]
    assert most == "decode"  # 2000 us less, before input_wait's 1900
    text = compare_words.comparison_text(c)
    named = [m.group(0) for m in re.finditer("|".join(sorted(ALL_STAGES, key=len, reverse=True)),
                                             text)]
    assert named and named[0] == most, text
    # each side's verdict gives its input class from the step split
    assert "highly input-bound" in compare_words.side_text(c, "a")      # 2 ms of 10 ms
    assert "not input-bound" in compare_words.side_text(c, "b")         # 0.1 ms of 4 ms


def test_report_json_matches_the_schema(compared):
    c, sides = compared
    r = report_mod.build(c, sides)
    doc = report_json.to_json(r)
    schema.validate(doc)
    json.dumps(doc)  # plain data
    row = next(x for x in doc["stages"] if x["stage"] == "decode")
    assert (row["a_us"], row["b_us"], row["ratio"]) == (3000, 1000, 3.0)
    assert doc["order"] == ["a", "b"]
    assert doc["steps"]["a"]["median_us"] == LEGACY["step"]
    assert set(doc["answers"]["a"]) >= {"summary", "pids", "xla", "sequence", "interpret"}
    # the schema can fail: a row without its ratio is refused
    del row["ratio"]
    with pytest.raises(jsonschema.ValidationError, match="ratio"):
        schema.validate(doc)


def test_compare_traces_writes_every_artifact(tmp_path):
    tf_before = "tensorflow" in sys.modules
    paths = {}
    for k, p in (("legacy", LEGACY), ("modern", MODERN)):
        events, starts = _events(p)
        paths[k] = write(tmp_path / k / "timeline.json", events, steps=starts)
    out = tmp_path / "out"
    rep = compare_traces(paths["legacy"], paths["modern"], out=out,
                         labels={"a": "legacy", "b": "modern"})
    assert rep.out == out
    for name in report_mod.FILES.values():
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    doc = json.loads((out / "report.json").read_text())
    schema.validate(doc)
    assert doc["sources"]["legacy"]["path"] == str(paths["legacy"])
    assert doc["steps"]["modern"]["median_us"] == MODERN["step"]
    assert doc["order"] == ["legacy", "modern"]
    assert doc["verdict"]["comparison"] == rep.words["comparison"]
    merged = json.loads(gzip.decompress((out / "merged_trace.json.gz").read_bytes()))
    assert merged["traceEvents"]
    assert (out / "stages.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "decode" in (out / "report.md").read_text()
    assert not list(out.glob(".report-staging-*"))
    if not tf_before:
        assert "tensorflow" not in sys.modules, "comparing two traces imported TensorFlow"


# --------------------------------------------------------------------------------------------
# explain and compare classify each op of a trace the same way (issue 13, item 2)

W1, W2 = "tf_Compute/1", "tf_Compute/2"
MODULE = "cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false__.3"
HLO = {MODULE: hlo_module(MODULE, {"fusion.1": [("Slice", "crop_1/Slice", 100),
                                                ("ReverseV2", "flip_1/ReverseV2", 300)]})}


def _mixed_trace():
    """Three 10 ms steps of a TF1-style session with XLA: a queue dequeue, a reader's read (a
    TraceMe inside it), an iterator's GetNext, a compile in the first step (compiler work
    inside), a cluster run with its kernel, a merge, and pipeline ops on two threads."""
    events, steps = [], []
    for k in range(3):
        t = k * 10_000
        steps.append((t, 10_000))
        events += [
            (HOST, PYTHON, t + 10, 9980, "SessionRun"),
            (HOST, W1, t + 100, 1000, "QueueDequeueManyV2", "batch"),
            (HOST, W1, t + 4300, 2000, "_XlaRun", "cluster_0_1/xla_run"),
            (HOST, W1, t + 4350, 1900, "fusion.1", "", {"hlo_module": MODULE,
                                                         "hlo_op": "fusion.1"}),
            (HOST, W1, t + 6400, 5, "_XlaMerge", "cluster_0_1/merge"),
            (HOST, W1, t + 6500, 3000, "DecodeJpeg", "decode/DecodeJpeg"),
            (HOST, W2, t + 200, 600, "ReaderReadV2", "input_producer/ReaderReadV2"),
            (HOST, W2, t + 300, 400, "FileRead"),
            (HOST, W2, t + 900, 500, "IteratorGetNext", "IteratorGetNext"),
            (HOST, W2, t + 2000, 1500, "ResizeBilinear", "resize/ResizeBilinear"),
        ]
        if k == 0:
            events += [(HOST, W1, t + 1500, 2700, "_XlaCompile", "cluster_0_1/xla_compile"),
                       (HOST, W1, t + 1510, 2680, "CpuCompiler::RunBackend")]
    return trace(events, format="xprof", steps=steps, hlo=HLO)


def test_explain_and_compare_classify_each_op_alike():
    tr = _mixed_trace()
    side = comparison.side("legacy", tr)
    smap, att, ev = side.smap, side.attribution, tr.events
    c = comparison.compare(side, comparison.side("modern", _mixed_trace()))
    rows_of = {}   # op (display name) -> the comparison's stage rows that list it
    for r in c.stages:
        for op in r.cells["a"].ops:
            rows_of.setdefault(op, set()).add(r.stage)
    for st in att.steps:
        e = explain(tr, st.num, xla=side.xla)
        mine = np.flatnonzero(ev.step == st.num)
        # input: the verdict's input ops are the ops whose events StageMap.input marks (those
        # not inside another input op), and both count the same wall time
        roots = [i for i in mine if smap.input[i] and not
                 (smap.parent[i] >= 0 and smap.input[smap.parent[i]])]
        assert e.verdict.facts.input_ops == sorted({smap.display_name(i) for i in roots})
        assert e.verdict.facts.input_ops == ["IteratorGetNext", "QueueDequeueManyV2",
                                             "ReaderReadV2"]
        assert e.verdict.facts.input_wait_us == pytest.approx(st.input_us)
        # XLA: what explain calls compiling and running compiled code, the mapper labels so,
        # and the step split's compile time is explain's
        compiled = {i for i, _, _ in e.xla.compile_calls}
        ran = set(e.xla.run_events)
        for i in mine:
            lab = smap.label_name(i)
            if ev.category[i] in (CAT["xla_compile"], CAT["xla_run"]):
                assert (lab == "xla_compile") == (i in compiled), tr.s(ev.name[i])
                assert (lab == "xla_run") == (i in ran), tr.s(ev.name[i])
        assert e.xla_step.compile_us == pytest.approx(st.compile_us)
        assert set(e.ops_present) == {"_XlaCompile", "_XlaRun", "_XlaMerge"}
        # the ops explain lists: an input op sits in the input rows (input_wait, or read for a
        # TF1 reader's read), never in a row of other work; the largest cost is no input wait
        # and no compile in the comparison either
        for t in e.legend.top_ops:
            idx = [i for i in mine if tr.s(ev.op_type[i] or ev.name[i]) == t.op]
            labels = {smap.label_name(i) for i in idx}
            if is_input_op(t.op, t.op):
                assert all(smap.input[i] for i in idx)
                assert labels <= {"input_wait", "read"}, (t.op, labels)
            elif t.category == "op":
                assert rows_of[t.op] == labels, t.op
        top = e.verdict.facts.top_op
        assert not rows_of.get(top, set()) & {"input_wait", "xla_compile"}, top
    # the stages explain names for a cluster's ops are the comparison's
    members = side.xla.units["cluster_0"].members
    assert {stage_of_op(t, n) for t, n in members} == \
        set(c.sides["a"].xla.units["cluster_0"].stages) == {"crop", "flip"}
    # one steady step, one input class
    e = explain(tr, xla=side.xla)
    assert e.verdict.input_class in compare_words.side_text(c, "a")


def test_a_cache_lookup_is_no_compile_in_either():
    # an _XlaCompile that only looked its program up in the cache is XLA's dispatch plumbing
    # for explain (no compile in the step) and for the mapper and the step split alike
    events, steps = [], []
    for k in range(3):
        t = k * 1000
        steps.append((t, 1000))
        events += [(HOST, W1, t, 30, "_XlaCompile", "cluster_0_1/xla_compile"),
                   (HOST, W1, t + 30, 900, "_XlaRun", "cluster_0_1/xla_run")]
    tr = trace(events, format="xprof", steps=steps)
    side = comparison.side("legacy", tr)
    for st in side.attribution.steps:
        e = explain(tr, st.num, xla=side.xla)
        assert e.xla_step.compile_us == 0 and not e.xla.compile_calls
        assert st.compile_us == pytest.approx(e.xla_step.compile_us)
    lookups = side.xla.lookup_events
    assert len(lookups) == 3 and {side.smap.label_name(i) for i in lookups} == {"runtime"}


def test_op_names_in_the_printed_table_lose_their_middle_not_their_end():
    """Two gradients of one layer differ only in their last scope: the printed op column
    keeps the top scope and the end, drops the middle, and an op named after its type does
    not say the type twice."""
    from compare.analysis.opdiff import OpDiff
    from compare.output.tables import _fit_path, _op_cell

    names = [f"gradient_tape/sequential/conv2d_1/Conv2D/Conv2DBackprop{k}" for k in
             ("Filter", "Input")]
    cells = [_op_cell(OpDiff(n, n.rpartition("/")[2], 1.0, 2.0, 1, 1, "changed", "name"), 52)
             for n in names]
    assert cells == ["gradient_tape/…/conv2d_1/Conv2D/Conv2DBackpropFilter",
                     "gradient_tape/…/conv2d_1/Conv2D/Conv2DBackpropInput"]
    short = OpDiff("dense/MatMul_1", "MatMul", 1.0, 2.0, 1, 1, "changed", "name")
    assert _op_cell(short, 52) == "dense/MatMul_1 (MatMul)"
    assert _fit_path("a/" * 40 + "end", 20).endswith("/end") and len(_fit_path("a/" * 40 + "end", 20)) <= 20
    assert _fit_path("x" * 80, 20) == "x" * 19 + "…"
