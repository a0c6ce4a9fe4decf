"""The bottleneck verdict (compare/analysis/verdict.py): :func:`judge`'s thresholds and lead
rules on constructed facts, and :func:`assess` measuring those facts on small synthetic traces
(through :func:`compare.analysis.explanation.explain`, as ``compare.explain`` runs it). Fast."""
from __future__ import annotations

import pytest

from compare.analysis import verdict
from compare.analysis.explanation import explain
from compare.output import verdict_words
from compare.vocabulary import thresholds as th
from compare.vocabulary.thresholds import (
    COMPILE_MIN_US,
    GETNEXT_OK_US,
    TINY_CLUSTER_US,
    TINY_CLUSTERS_NOTABLE,
)
from tests.synthetic import CPU, GPU, GPU_ALL, HOST, PYTHON, trace

# --------------------------------------------------------------------------------------------
# judge: thresholds on constructed facts


def test_the_thresholds_are_the_documented_ones():
    """The numbers the verdict's docstring and explain's words state (TensorBoard's input
    lines; our XLA measurements): changing one is a decision, not a refactoring."""
    assert (th.INPUT_MODERATE, th.INPUT_HIGH, th.GETNEXT_OK_US) == (0.05, 0.20, 50.0)
    assert (th.COMPILE_DOMINATES, th.COMPILE_NOTABLE, th.COMPILE_MIN_US) == (0.5, 0.1, 3000.0)
    assert (th.IDLE_NOTABLE, th.IDLE_BOUND) == (0.10, 0.30)
    assert (th.SERIAL_BUSY, th.SERIAL_OTHERS) == (0.70, 0.20)
    assert (th.TIMELINE_SERIAL_BUSY, th.TIMELINE_SERIAL_PARALLELISM, th.OFF_PATH) == \
        (0.50, 1.10, 0.20)
    assert th.GPU_IDLE == 0.50
    assert (th.COMPUTE_NOTABLE, th.COMPUTE_DOMINATES) == (0.20, 0.50)
    assert (th.TINY_CLUSTER_US, th.TINY_CLUSTERS_NOTABLE) == (100.0, 10)


def facts(**kw) -> verdict.Facts:
    return verdict.Facts(wall_us=kw.pop("wall_us", 10_000.0), **kw)


def kinds(v: verdict.Verdict) -> dict[str, str]:
    return {x.kind: x.level for x in v.findings}


@pytest.mark.parametrize("share,expected", [
    (0.0, "not input-bound"), (0.049, "not input-bound"), (0.05, "moderately input-bound"),
    (0.199, "moderately input-bound"), (0.20, "highly input-bound"), (0.9, "highly input-bound"),
])
def test_input_share_thresholds(share, expected):
    f = facts(input_wait_us=share * 10_000, input_ops=["QueueDequeueV2"])
    assert verdict.input_class(f) == expected
    v = verdict.judge(f)
    assert v.input_class == expected
    assert kinds(v)["input"] == {"not input-bound": "low", "moderately input-bound": "moderate",
                                 "highly input-bound": "high"}[expected]
    if expected == "highly input-bound":
        assert v.bottleneck == "input"


@pytest.mark.parametrize("get_next,expected", [
    (GETNEXT_OK_US, "not input-bound"), (GETNEXT_OK_US + 1, "highly input-bound")])
def test_get_next_of_50us_or_less_is_not_the_bottleneck(get_next, expected):
    f = facts(wall_us=150.0, input_wait_us=get_next, get_next_us=get_next,
              input_ops=["IteratorGetNext"])
    assert verdict.input_class(f) == expected  # a third of a tiny step, yet <= 50 µs is fine


def test_a_short_get_next_does_not_excuse_a_long_queue_wait():
    f = facts(wall_us=1000.0, input_wait_us=500.0, get_next_us=10.0,
              input_ops=["IteratorGetNext", "QueueDequeueManyV2"])
    assert verdict.input_class(f) == "highly input-bound"


@pytest.mark.parametrize("share,level", [(0.5, "high"), (0.49, "moderate"), (0.1, "moderate"),
                                         (0.05, "info"), (0.0, None)])
def test_compile_thresholds(share, level):
    v = verdict.judge(facts(compile_us=share * 10_000))
    assert kinds(v).get("compile") == level
    assert (v.bottleneck == "compile") == (level in ("high", "moderate"))


@pytest.mark.parametrize("share,level", [(0.3, "high"), (0.29, "moderate"), (0.1, "moderate"),
                                         (0.09, None)])
def test_idle_thresholds(share, level):
    v = verdict.judge(facts(idle_us=share * 10_000, gaps=[
        {"start_us": 0.0, "dur_us": share * 10_000, "after": "a", "before": "b"}]))
    assert kinds(v).get("idle") == level


@pytest.mark.parametrize("busiest,others,rows,serial", [
    (0.7, 0.19, 3, True), (0.7, 0.2, 3, False), (0.69, 0.0, 3, False), (0.9, 0.0, 1, False)])
def test_one_thread_serialising_while_others_idle(busiest, others, rows, serial):
    v = verdict.judge(facts(tids_are="threads", busiest_row="t", busiest_share=busiest,
                            others_share=others, worker_rows=rows))
    assert ("serialised" in kinds(v)) == serial


@pytest.mark.parametrize("busy,par,critical,serial", [
    (0.8, 1.05, 0.3, True),    # busy, one op at a time, half of it off the critical path
    (0.8, 1.05, 0.8, False),   # one dependency chain: nothing could overlap
    (0.8, 1.5, 0.3, False),    # ops overlapped
    (0.4, 1.0, 0.1, False),    # mostly not busy
])
def test_timeline_serialisation_needs_work_off_the_critical_path(busy, par, critical, serial):
    v = verdict.judge(facts(tids_are="lanes", busiest_row="/cpu:0", busiest_share=busy,
                            parallelism=par, critical_share=critical))
    assert ("serialised" in kinds(v)) == serial


@pytest.mark.parametrize("gpu,level", [(0.24, "high"), (0.25, "moderate"), (0.49, "moderate"),
                                       (0.5, None), (None, None)])
def test_gpu_idle_threshold(gpu, level):
    assert kinds(verdict.judge(facts(gpu_busy_share=gpu))).get("gpu_idle") == level


@pytest.mark.parametrize("tiny,flagged", [(TINY_CLUSTERS_NOTABLE - 1, False),
                                          (TINY_CLUSTERS_NOTABLE, True)])
def test_tiny_clusters_threshold(tiny, flagged):
    v = verdict.judge(facts(tiny_clusters=tiny, xla_overhead_us=500.0))
    assert ("xla_overhead" in kinds(v)) == flagged


def test_recompilation_is_a_finding():
    assert "recompile" in kinds(verdict.judge(facts(recompiled=["cluster_3"])))
    assert "recompile" not in kinds(verdict.judge(facts()))


@pytest.mark.parametrize("share,level", [(0.5, "high"), (0.49, "info")])
def test_compute_threshold(share, level):
    v = verdict.judge(facts(top_op="DecodeJpeg", top_op_where="host", top_op_share=share,
                            top_op_name="decode", top_op_count=1))
    assert kinds(v)["compute"] == level
    assert v.bottleneck == "compute"


def test_a_dominant_op_is_the_verdict_and_mixed_causes_are_named():
    v = verdict.judge(facts(top_op="_XlaRun", top_op_where="host", top_op_share=0.6,
                            top_op_category="xla_run", top_op_name="cluster_3_1/xla_run",
                            top_op_count=1))
    assert v.bottleneck == "compute" and v.lead == "lead"
    assert v.findings[v.leader].case == "xla" and "_XlaRun" in verdict_words.headline(v)
    v = verdict.judge(facts(top_op="DecodeJpeg", top_op_where="host", top_op_share=0.3,
                            top_op_name="decode", top_op_count=1, idle_us=1500.0,
                            input_wait_us=1000.0, input_ops=["ReaderReadV2"]))
    assert v.lead == "several" and "idle" in [v.findings[i].kind for i in v.named]
    said = verdict_words.headline(v)
    assert said.startswith("No single bottleneck") and "idle gaps 15%" in said
    assert v.bottleneck == "compute"


@pytest.mark.parametrize("kw,lead", [
    # several high: a compile, then an input wait, cause the rest
    (dict(compile_us=6000, input_wait_us=3000, idle_us=4000), "compile"),
    (dict(input_wait_us=2500, idle_us=4000, gpu_busy_share=0.1), "input"),
    # else the largest share among the high ones
    (dict(idle_us=3500, gpu_busy_share=0.2), "gpu_idle"),
    (dict(idle_us=9000, gpu_busy_share=0.2), "idle"),
    # only moderate ones: the largest
    (dict(idle_us=1500, input_wait_us=1000), "idle"),
    (dict(idle_us=1000, input_wait_us=1500), "input"),
    # nothing at all
    (dict(), "none"),
])
def test_which_finding_leads(kw, lead):
    v = verdict.judge(facts(input_ops=["IteratorGetNext"] if "input_wait_us" in kw else [],
                            **kw))
    assert v.bottleneck == lead


# --------------------------------------------------------------------------------------------
# assess: the facts measured on a trace

def explained(events, fmt="timeline", steps=(0,)):
    tr = trace(events, format=fmt, steps=steps)
    return tr, explain(tr)


def _work(t0: float, t1: float, lane: int = 1) -> list[tuple]:
    """DecodeJpeg ops on a timeline lane covering [t0, t1) in 1 ms pieces."""
    out, t = [], t0
    while t < t1:
        d = min(1000.0, t1 - t)
        out.append((CPU, lane, t, d, "DecodeJpeg", f"decode/DecodeJpeg_{int(t)}"))
        t += d
    return out


@pytest.mark.parametrize("op,wait,expected", [
    ("QueueDequeueManyV2", 300, "not input-bound"),
    ("QueueDequeueManyV2", 1000, "moderately input-bound"),
    ("QueueDequeueManyV2", 2500, "highly input-bound"),
    ("ReaderReadV2", 2500, "highly input-bound"),        # a TF1 read inside the step
    ("IteratorGetNext", 2500, "highly input-bound"),
])
def test_input_share_measured(op, wait, expected):
    tr, e = explained([(CPU, 0, 0, wait, op, f"input/{op}")] + _work(wait, 10_000))
    f = e.verdict.facts
    assert e.choice.step.dur == 10_000
    assert f.input_wait_us == pytest.approx(wait)
    assert f.input_ops == [op]
    assert e.verdict.input_class == expected
    assert (f.get_next_us is not None) == (op == "IteratorGetNext")


@pytest.mark.parametrize("wait,expected", [(GETNEXT_OK_US, "not input-bound"),
                                           (GETNEXT_OK_US + 1, "highly input-bound")])
def test_a_tiny_step_with_a_short_get_next(wait, expected):
    tr, e = explained([(CPU, 0, 0, wait, "IteratorGetNext", "IteratorGetNext"),
                       (CPU, 0, wait, 100, "DecodeJpeg", "decode/DecodeJpeg")])
    assert e.verdict.facts.get_next_us == pytest.approx(wait)
    assert e.verdict.input_class == expected


def test_input_waits_overlapping_count_once():
    tr, e = explained([(CPU, 0, 0, 2000, "QueueDequeueManyV2", "batch"),
                       (CPU, 2, 1000, 2000, "ReaderReadV2", "read/ReaderReadV2")]
                      + _work(0, 10_000))
    assert e.verdict.facts.input_wait_us == pytest.approx(3000)
    assert e.verdict.facts.input_ops == ["QueueDequeueManyV2", "ReaderReadV2"]


@pytest.mark.parametrize("dur,compiled", [(COMPILE_MIN_US, True), (COMPILE_MIN_US - 1, False)])
def test_timeline_compile_or_cache_lookup(dur, compiled):
    tr, e = explained([(CPU, 0, 0, dur, "_XlaCompile", "cluster_0_1/xla_compile"),
                       (CPU, 0, dur, 2000, "_XlaRun", "cluster_0_1/xla_run")])
    f = e.verdict.facts
    assert f.compile_us == pytest.approx(dur if compiled else 0.0)
    # 60 % of the step when it compiled: a high compile finding, and as the trace's only step
    # is a first run, the one-time work leads (issue 15)
    assert any(x.kind == "compile" and x.level == "high" for x in e.verdict.findings) == compiled
    assert (e.verdict.bottleneck == "one_time") == compiled


@pytest.mark.parametrize("nested,compiled", [(True, True), (False, False)])
def test_xprof_compile_is_a_compile_op_with_compiler_work_inside(nested, compiled):
    w = "tf_Compute/1"
    events = [(HOST, w, 0, 500, "_XlaCompile", "cluster_0_1/xla_compile"),
              (HOST, w, 500, 300, "_XlaRun", "cluster_0_1/xla_run")]
    if nested:
        events.append((HOST, w, 10, 480, "CpuCompiler::RunBackend"))
    tr, e = explained(events, "xprof", steps=[(0, 1000)])
    assert e.verdict.facts.compile_us == pytest.approx(500 if compiled else 0.0)
    assert (e.verdict.bottleneck == "compile") == compiled


def test_idle_gaps_measured_with_the_ops_around_them():
    tr, e = explained(_work(0, 2000) + [(CPU, 1, 6000, 4000, "ResizeBilinear", "resize/R")])
    f = e.verdict.facts
    assert f.idle_us == pytest.approx(4000)
    assert f.gaps[0] == {"start_us": 2000, "dur_us": 4000, "after": "decode/DecodeJpeg_1000",
                         "before": "resize/R", "next_step": False}
    assert kinds(e.verdict)["idle"] == "high"


@pytest.mark.parametrize("other_us,serial", [(500, True), (4000, False)])
def test_one_busy_thread_serialises_the_step(other_us, serial):
    events = [(HOST, "tf_Compute/1", 0, 8000, "DecodeJpeg", "decode/DecodeJpeg"),
              (HOST, "tf_Compute/2", 0, other_us, "ResizeBilinear", "resize/R"),
              (HOST, "tf_Compute/3", 0, 500, "ReverseV2", "flip/R")]
    tr, e = explained(events, "xprof", steps=[(0, 10_000)])
    f = e.verdict.facts
    [tid] = [t for (_, t), name in tr.lanes.items() if name == "tf_Compute/1"]
    assert f.busiest_row == f"/host:CPU tf_Compute (tid {tid})"
    assert f.busiest_share == pytest.approx(0.8)
    assert f.others_share == pytest.approx((other_us + 500) / 2 / 10_000)
    assert f.worker_rows == 3
    assert ("serialised" in kinds(e.verdict)) == serial


def test_a_long_wait_for_input_is_no_serial_work():
    events = [(HOST, "tf_Compute/1", 0, 8000, "QueueDequeueManyV2", "batch"),
              (HOST, "tf_Compute/2", 0, 1000, "ResizeBilinear", "resize/R"),
              (HOST, "tf_Compute/3", 0, 500, "ReverseV2", "flip/R")]
    tr, e = explained(events, "xprof", steps=[(0, 10_000)])
    f = e.verdict.facts
    assert f.busiest_share == pytest.approx(0.1)
    assert "serialised" not in kinds(e.verdict)
    assert e.verdict.bottleneck == "input"


@pytest.mark.parametrize("chain,serial", [(False, True), (True, False)])
def test_timeline_ops_one_at_a_time_serialise_unless_they_are_a_chain(chain, serial):
    names = [f"aug/Op_{k}" for k in range(4)]
    events = [(CPU, 0, 2000 * k, 2000, "AdjustContrastv2", names[k],
               [names[k - 1]] if chain and k else []) for k in range(4)]
    events.append((CPU, 0, 9000, 1000, "NoOp", "done", names if not chain else [names[-1]]))
    tr, e = explained(events)
    f = e.verdict.facts
    assert f.tids_are == "lanes" and f.parallelism == pytest.approx(1.0)
    assert f.busiest_share == pytest.approx(0.8)  # the NoOp computes nothing: not work
    assert ("serialised" in kinds(e.verdict)) == serial


@pytest.mark.parametrize("kernels_us,level", [(2000, "high"), (3000, "moderate"), (6000, None)])
def test_gpu_idle_measured_on_the_stream_rows(kernels_us, level):
    events = [(GPU, 0, 0, 10_000, "MatMul", "dense/MatMul"),
              (GPU_ALL, 0, 1000, kernels_us, "MatMul", "dense/MatMul")]
    tr, e = explained(events)
    assert e.verdict.facts.gpu_busy_share == pytest.approx(kernels_us / 10_000)
    assert kinds(e.verdict).get("gpu_idle") == level


def test_no_gpu_rows_no_gpu_finding():
    tr, e = explained(_work(0, 10_000))
    assert e.verdict.facts.gpu_busy_share is None


def test_the_largest_op_by_self_time_is_the_compute_finding():
    w = "tf_Compute/1"
    events = [(HOST, w, 0, 7000, "ExecutorState::Process"),
              (HOST, w, 100, 6000, "DecodeJpeg", "decode/DecodeJpeg"),
              (HOST, w, 7000, 2000, "ResizeBilinear", "resize/ResizeBilinear")]
    tr, e = explained(events, "xprof", steps=[(0, 10_000)])
    f = e.verdict.facts
    assert (f.top_op, f.top_op_where, f.top_op_count) == ("DecodeJpeg", "host", 1)
    assert f.top_op_share == pytest.approx(0.6)
    assert f.top_op_name == "decode/DecodeJpeg"
    assert e.verdict.bottleneck == "compute" and kinds(e.verdict)["compute"] == "high"


def test_input_waits_are_never_the_compute_finding():
    tr, e = explained([(CPU, 0, 0, 6000, "QueueDequeueManyV2", "batch")] + _work(6000, 10_000))
    assert e.verdict.facts.top_op == "DecodeJpeg"
    assert e.verdict.bottleneck == "input"


@pytest.mark.parametrize("clusters,flagged", [(TINY_CLUSTERS_NOTABLE, True),
                                              (TINY_CLUSTERS_NOTABLE - 1, False)])
def test_tiny_xla_clusters(clusters, flagged):
    run = TINY_CLUSTER_US / 2
    events = []
    for k in range(clusters):
        t = 300 * k
        events += [(CPU, 0, t, 20, "_XlaCompile", f"cluster_{k}_1/xla_compile"),
                   (CPU, 0, t + 20, run, "_XlaRun", f"cluster_{k}_1/xla_run"),
                   (CPU, 0, t + 20 + run, 5, "_XlaMerge", f"cluster_{k}_1/merge")]
    events += _work(300 * clusters, 300 * clusters + 1000)
    tr, e = explained(events)
    f = e.verdict.facts
    assert f.tiny_clusters == clusters
    assert f.xla_overhead_us == pytest.approx(clusters * (20 + run + 5))
    assert ("xla_overhead" in kinds(e.verdict)) == flagged


def test_waiting_for_input_on_the_steps_own_thread_counts():
    """An eager ``next(iterator)``: the step's Python thread waits in ``IteratorGetNext``."""
    events = [(HOST, PYTHON, 0, 3000, "IteratorGetNext", "IteratorGetNext"),
              (HOST, "tf_Compute/1", 3000, 7000, "DecodeJpeg", "decode/DecodeJpeg")]
    tr, e = explained(events, "xprof", steps=[(0, 10_000)])
    assert e.verdict.facts.input_wait_us == pytest.approx(3000)
    assert e.verdict.facts.input_ops == ["IteratorGetNext"]
    assert e.verdict.input_class == "highly input-bound"
    assert e.verdict.facts.idle_us == pytest.approx(0.0)   # waiting for input is not idle
