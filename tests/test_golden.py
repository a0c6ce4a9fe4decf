"""The words, exactly: explain's text for small TF1 and TF2 timelines, every finding and
headline of the verdict on constructed facts, every caveat of the parity checks, and the
one-screen summary of a synthetic pair, against the expected text in ``tests/golden/``.
``pytest --update-golden`` rewrites those files from what the code says now (review the diff).
The other tests check the same behaviour as data; these catch any change of wording. Fast."""
from __future__ import annotations

import dataclasses

import pytest

from compare.analysis import comparison, verdict
from compare.analysis.evidence import (
    HOST_LAUNCH_THREADS,
    Communication,
    Copies,
    Launch,
    OneTime,
    RunStart,
)
from compare.analysis.explanation import explain
from compare.analysis.result import Caveat, PrecisionSign, Scale
from compare.analysis.workload import OneTimeSigns
from compare.load import load
from compare.output import caveat_words, verdict_words
from compare.output import report as report_mod
from compare.output.explain_text import to_text
from compare.output.summary import summary
from tests.conftest import ROOT
from tests.test_core_comparison import LEGACY, MODERN, _trace

FIXTURES = ROOT / "tests" / "fixtures"


@pytest.mark.parametrize("name", ["tf1_gpu.timeline.json", "tf2_gpu_xla.timeline.json"])
def test_explain_text(golden, name):
    e = explain(load(FIXTURES / name))
    golden(f"explain_{name.split('.')[0]}.txt",
           to_text(e).replace(str(FIXTURES), "tests/fixtures"))


# --------------------------------------------------------------------------------------------
# the verdict: one constructed step per finding kind (and the contexts that reword a finding)

def _facts(**kw) -> verdict.Facts:
    return verdict.Facts(wall_us=kw.pop("wall_us", 10_000.0), **kw)


ONE_TIME = OneTime(first_step=True, only_step=True, steps=1, autotune_node="conv/Conv2D",
                   autotune_kernels=40, autotune_nodes=1, kernels=60, kernel_ops=5,
                   autotune_share=0.5, outlier_node="m/MatMul", outlier_op="MatMul",
                   outlier_us=4000.0, outlier_others_us=50.0, outlier_share=0.4,
                   source_us=12_000.0, launch_setup=[("m/MatMul", 900.0, 20.0)],
                   iterators=["IteratorV2"])

STEPS = {
    "input_tfdata": _facts(input_wait_us=6000.0, input_ops=["IteratorGetNext"],
                           get_next_us=6000.0, input_waits_on=["Prefetch"],
                           input_producers="not recorded"),
    "input_queues": _facts(input_wait_us=1000.0, input_ops=["QueueDequeueManyV2"],
                           input_inline_us=800.0, gpu_busy_share=0.1),
    "input_ready": _facts(input_wait_us=20.0, input_ops=["IteratorGetNext"], get_next_us=20.0),
    "input_feed_dict": _facts(feeds=["_arg_x_0_0"], idle_us=6000.0,
                              gaps=[{"start_us": 100.0, "dur_us": 5000.0, "after": "",
                                     "before": "", "next_step": True}]),
    "first_run": _facts(one_time=ONE_TIME, compile_us=4000.0, gpu_busy_share=0.2,
                        launch=Launch(row=HOST_LAUNCH_THREADS, busy_share=0.9, kernels=200,
                                      kernel_median_us=5.0, host_ops=300, host_ops_short=250),
                        rest=_facts(wall_us=4000.0, window="rest", gpu_busy_share=0.3,
                                    launch=Launch(row=HOST_LAUNCH_THREADS, busy_share=0.8,
                                                  kernels=200, kernel_median_us=5.0))),
    "later_step": _facts(one_time=OneTime(first_over_rest=12.0), compile_us=600.0,
                         recompiled=["cluster_0"]),
    "run_start": _facts(wall_us=2000.0, run_start=RunStart(us=1500.0, share=0.75,
                                                           row="/job:localhost/cpu:0")),
    "serial_threads": _facts(busiest_row="host tf_Compute", busiest_share=0.9,
                             others_share=0.05, worker_rows=4, seed_pipeline=True),
    "serial_lanes": _facts(tids_are="lanes", busiest_row="/cpu:0", busiest_share=0.6,
                           parallelism=1.02, critical_share=0.3, idle_us=1500.0,
                           gaps=[{"start_us": 10.0, "dur_us": 900.0, "after": "a/MatMul",
                                  "before": "b/Add", "next_step": False}]),
    "communication": _facts(gpu_busy_share=0.6, device_bound=True, top_op="NcclAllReduce",
                            top_op_where="GPU", top_op_share=0.3, top_op_count=8,
                            top_op_name="allreduce/x", top_op_name_share=0.05,
                            gpu_busiest="/gpu:1", gpus_recorded=2, gpu_rows=2,
                            communication=Communication(count=8, ops=["NcclAllReduce"],
                                                        share=0.4, summed_us=5000.0,
                                                        exposed_share=0.3)),
    "copies": _facts(gpu_busy_share=0.2, copies=Copies(
        count=3, by_direction={"HtoD": 2, "DtoH": 1}, share=0.6, exposed_share=0.55,
        largest="fc/weights/read", largest_us=4000.0, largest_direction="host to device",
        largest_source="host", host_us=900.0)),
    "xla_compute": _facts(top_op="_XlaRun", top_op_where="host", top_op_share=0.6,
                          top_op_category="xla_run", top_op_name="cluster_3_1/xla_run",
                          top_op_count=1, compute_share=0.7, critical_share=0.65,
                          tiny_clusters=12, xla_overhead_us=700.0),
    "const_op": _facts(top_op="MatMul", top_op_where="host", top_op_share=0.3,
                       top_op_name="w/MatMul", top_op_count=3, top_op_name_share=0.12,
                       top_op_cpu_us=3500.0, top_op_const_inputs=True, compute_share=0.35,
                       input_wait_us=600.0, input_ops=["ReaderReadV2"]),
    "no_gpu_data": _facts(silent_rows=["/device:GPU:0", "/device:GPU:0/stream:all"],
                          gpu_rows=1, gpus_recorded=0),
    "idle_mostly": _facts(idle_us=7000.0),
}


def _said(v: verdict.Verdict) -> str:
    lines = [f"headline: {verdict_words.headline(v)}"]
    for x in v.findings:
        lines.append(f"[{x.kind}/{x.level}] {verdict_words.text(v, x)}")
        advice = verdict_words.try_next(v, x)
        if advice:
            lines.append(f"    try: {advice}")
    return "\n".join(lines)


def test_verdict_words(golden):
    text = "\n\n".join(f"== {name}\n{_said(verdict.judge(f))}" for name, f in STEPS.items())
    golden("verdict_words.txt", text + "\n")


# --------------------------------------------------------------------------------------------
# caveats: every kind and case

def _signs(keys: list[str], share: float) -> OneTimeSigns:
    return OneTimeSigns(1, keys, share, ONE_TIME, compile_us=5000.0, made_us=1200.0)


SCALE = Scale(factor=2.1, scaled=9, matched=10, share=0.9, device=True)
CAVEATS = [
    Caveat("identical", False, {}, "", {"events": 12_345}),
    Caveat("first_run", False, {"a": 0.7, "b": 0.6}, "both",
           {"signs": {"a": _signs(["compile", "autotune"], 0.7),
                      "b": _signs(["outlier", "source", "iterators"], 0.6)}}),
    Caveat("first_run", True, {"a": 0.7}, "one", {"side": "a", "signs": {"a": _signs(
        ["compile"], 0.7)}}),
    Caveat("first_run", False, {"b": 0.1}, "some", {"side": "b", "signs": {"b": _signs(
        ["source"], 0.1)}}),
    Caveat("feed_dict", True, {}, "feeds", {"side": "a", "other": "b", "other_input_us": 900.0}),
    Caveat("feed_dict", True, {}, "unread", {"side": "b", "other": "a",
                                             "other_input_us": 1500.0}),
    Caveat("single_step", False, {}, "", {"noise": 0.15}),
    Caveat("steps", True, {}, "", {"one": "a", "many": "b", "steps": 20}),
    Caveat("untraced", False, {}, "", {"side": "a", "untraced_us": 3000.0, "traced_us": 7000.0}),
    Caveat("program", True, {"no_ops": ["a", "b"]}, "no_ops"),
    Caveat("program", True, {}, "names", {"matched": {"a": 0.1, "b": 0.2}}),
    Caveat("data_service", False, {"sides": ["a", "b"]}, "both",
           {"events": {"a": 10, "b": 12}}),
    Caveat("data_service", True, {"side": "b", "moved": ["decode"], "workers": 1}, "one",
           {"events": {"b": 8}, "other": "a", "moved_us": 2000.0}),
    Caveat("batch", True, {"a": 64, "b": 32, "from": "shapes"}, "shapes",
           {"differ": 7, "compared": 9, "example": ["dense/MatMul", "[64,16]", "[32,16]"],
            "per_example": {"a": 100.0, "b": 150.0}}),
    Caveat("batch", True, {"from": "times", "factor": 2.1}, "times", {"scale": SCALE}),
    Caveat("precision", False, {"side": "b", "casts": {"a": 0, "b": 20},
                                "loss_scale": {"a": 0, "b": 4}}, "",
           {"other": "a", "signs": [PrecisionSign("loss_scale", 4),
                                    PrecisionSign("named", names=["mixed_float16"]),
                                    PrecisionSign("half", 30), PrecisionSign("casts", 20, 0)],
            "scale": dataclasses.replace(SCALE, share=0.97, device=False),
            "same_shapes": 9}),
    Caveat("devices", False, {}, "", {"gpus": {"a": 0, "b": 2}}),
    Caveat("host_masks", False, {}, "masks", {"side": "b", "gain_us": 3000.0,
                                              "device_us": {"a": 5000.0, "b": 2000.0},
                                              "step_gain_us": 500.0, "busy": 0.2}),
    Caveat("host_masks", False, {}, "follows", {"side": "a", "gain_us": 3000.0,
                                                "device_us": {"a": 2000.0, "b": 5000.0},
                                                "step_gain_us": 2800.0, "busy": 0.6}),
]


def test_caveat_words(golden):
    labels = {"a": "legacy", "b": "modern"}
    text = "\n".join(f"[{x.kind}/{x.case}] {caveat_words.text(x, labels)}" for x in CAVEATS)
    golden("caveat_words.txt", text + "\n")


def test_summary_of_a_synthetic_pair(golden):
    sides = {"a": comparison.side("legacy", _trace(LEGACY), "legacy test trace"),
             "b": comparison.side("modern", _trace(MODERN), "modern test trace")}
    c = comparison.compare(sides["a"], sides["b"], {"a": "old", "b": "new"})
    golden("summary_synthetic_pair.md", "\n".join(summary(report_mod.build(c, sides))) + "\n")
