"""The rules added after the held-out evaluation of ``compare.explain`` (issue 15), each on a
small synthetic trace written as TensorFlow's tools write it (tests/synthetic.py) or on
constructed facts. Fast. The same rules on real traces: tests/test_explain_real.py.

- a thread that only waits (tf.data's consumer blocked on a Prefetch buffer) is waiting, not
  serial work; tf.data's iterator paths are not ``node:Type``;
- advice names the seed's structure only for the seed's own traces;
- a long ``_SOURCE`` is first-run evidence only on a GPU; on a CPU it is per-run overhead;
- a first run's other findings are judged without its one-time work;
- a TF2 step's window includes the host's train_function around the device's step;
- GPU copies are copies (their own finding), never the device-bound step's top "kernel";
- one run written N times into N identical process groups counts once;
- profile folders load from ``plugins/profile`` and ``plugins``; several sessions: the latest,
  with a warning naming the others;
- TF 1.x XLA:GPU kernels (``XLA op``, named by whole HLO text) get short names and follow the
  ``XlaLaunch`` that enqueued them;
- shorter text: one Python main thread, empty Allocators said empty, the busy table sorted,
  no ``--step`` hint with one step, no XLA words without XLA."""
from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from common.hlo import short_instruction
from compare.analysis import verdict
from compare.analysis.evidence import OneTime
from compare.analysis.explanation import explain
from compare.load import load
from compare.output import legend_words, step_words, verdict_words
from compare.output.explain_text import to_text
from compare.output.legend_words import LANE_WORDS
from tests.synthetic import CPU, GPU, GPU_ALL, HOST, PYTHON, document, trace

GET_NEXT = "tf_data_iterator_get_next"
STREAM = "/device:GPU:0/stream:14 Compute"
GPU_PLANE = "/device:GPU:0"


def kinds(e) -> dict[str, verdict.Finding]:
    return {f.kind: f for f in e.verdict.findings}


def _blocked_consumer(producer: bool) -> list[tuple]:
    """A 10 ms step whose IteratorGetNext waits 9.6 ms in tf.data's Prefetch frames on its
    own thread; ``producer``: a tf.data thread records producing elements meanwhile."""
    events = [
        (HOST, GET_NEXT, 200, 9600, "IteratorGetNextOp::DoCompute", "", {"group_id": 0}),
        (HOST, GET_NEXT, 210, 9580, "Iterator::Model", "", {"group_id": 0}),
        (HOST, GET_NEXT, 220, 9560, "Iterator::MaxIntraOpParallelism", "",
         {"long_name": "Iterator::Model::MaxIntraOpParallelism", "group_id": 0}),
        (HOST, GET_NEXT, 230, 9540, "Iterator::Prefetch", "",
         {"long_name": "Iterator::Model::MaxIntraOpParallelism::Prefetch", "group_id": 0}),
        (HOST, "tf_Compute/1", 9850, 100, "MatMul", "dense/MatMul", {"group_id": 0}),
        (HOST, "tf_Compute/2", 9860, 50, "AddV2", "dense/add", {"group_id": 0}),
    ]
    if producer:
        events.append((HOST, "tf_data_iterator_resource", 300, 9000, "Iterator::ParallelMapV2",
                       "", {"long_name": "Iterator::Model::Prefetch::ParallelMapV2"}))
    return events


# --------------------------------------------------------------------------------------------
# waiting threads, tf.data names

def test_a_tfdata_iterator_path_is_not_node_and_type():
    tr = trace(_blocked_consumer(False), "xprof", steps=[(0, 10_000)])
    names, ev = tr.strings.names, tr.events
    types = {names[ev.name[i]]: names[ev.op_type[i]] for i in range(len(ev))}
    assert types["Iterator::Prefetch"] == "" and types["Iterator::MaxIntraOpParallelism"] == ""
    assert types["MatMul"] == "MatMul"


@pytest.mark.parametrize("producer,recorded", [(False, "not recorded"), (True, "recorded")])
def test_a_consumer_blocked_on_prefetch_waits_and_is_not_serial_work(producer, recorded):
    e = explain(trace(_blocked_consumer(producer), "xprof", steps=[(0, 10_000)]))
    f = e.verdict.facts
    assert e.verdict.bottleneck == "input" and f.input_wait_us == pytest.approx(9600)
    assert f.input_waits_on == ["Prefetch"] and f.input_producers == recorded
    # the waiting thread is never the busy row; a producer thread busy alone may be
    assert GET_NEXT not in f.busiest_row
    assert ("serialised" in kinds(e)) == producer
    top = e.legend.top_ops[0]
    assert top.wait and top.op == "IteratorGetNextOp::DoCompute" and top.share > 0.9
    # the consumer's frames count for its wait, not as rows of their own
    assert not {"Iterator::Model", "Iterator::MaxIntraOpParallelism", "Iterator::Prefetch"} & {
        t.op for t in e.legend.top_ops}
    assert f.top_op in ("MatMul", "AddV2")


@pytest.mark.parametrize("blocking", ["BlockUntilReady", "cuStreamSynchronize"])
def test_events_known_to_block_are_not_a_busy_row(blocking):
    events = [(HOST, "tf_Compute/1", 0, 9000, blocking, ""),
              (HOST, "tf_Compute/2", 0, 1000, "MatMul", "m/MatMul"),
              (HOST, "tf_Compute/3", 1000, 1000, "MatMul", "m/MatMul_1")]
    e = explain(trace(events, "xprof", steps=[(0, 10_000)]))
    assert e.verdict.facts.busiest_share == pytest.approx(0.1)
    assert "serialised" not in kinds(e)


# --------------------------------------------------------------------------------------------
# advice for the seed only when the trace is the seed's

@pytest.mark.parametrize("scopes,seed", [(("aug", "aug", "aug", "aug"), False),
                                         (("crop_0", "crop_1", "flip_0", "brightness_0"), True)])
def test_the_seeds_advice_only_in_the_seeds_trace(scopes, seed):
    names = [f"{s}/Op_{k}" for k, s in enumerate(scopes)]
    events = [(CPU, 0, 2000 * k, 2000, "AdjustContrastv2", names[k]) for k in range(4)]
    events.append((CPU, 0, 9000, 1000, "AddN", "done", names))
    e = explain(trace(events, steps=(0,)))
    assert e.verdict.facts.seed_pipeline == seed
    advice = verdict_words.try_next(e.verdict, kinds(e)["serialised"])
    assert ("five crops" in advice) == seed and "inter_op_parallelism_threads" in advice


# --------------------------------------------------------------------------------------------
# first runs

def test_a_long_cpu_source_is_per_run_overhead_not_a_first_run():
    events = [(CPU, 0, 0, 1200, "NoOp", "_SOURCE"),
              (CPU, 0, 1200, 300, "MatMul", "MatMul"),
              (CPU, 0, 1500, 400, "MatMul", "MatMul_1", ["MatMul"])]
    e = explain(trace(events))
    found = kinds(e)
    assert e.verdict.bottleneck == "overhead" and "one_time" not in found
    assert e.verdict.facts.run_start.us == pytest.approx(1200)
    assert e.verdict.facts.top_op == "MatMul"   # a NoOp computes nothing
    assert not any("TF_CUDNN" in verdict_words.try_next(e.verdict, f) for f in e.verdict.findings)


@pytest.mark.parametrize("source_us,first_run", [(12_000, True), (2_000, False)])
def test_a_long_gpu_source_is_the_gpu_set_up(source_us, first_run):
    events = [(GPU, 0, 0, source_us, "NoOp", "_SOURCE"),
              (GPU, 0, source_us, 500, "MatMul", "m/MatMul"),
              (GPU_ALL, 0, source_us + 50, 400, "MatMul", "m/MatMul")]
    e = explain(trace(events))
    assert (kinds(e).get("one_time") is not None and
            kinds(e)["one_time"].level == "high") == first_run
    assert (e.verdict.facts.one_time.source_us > 0) == first_run


def test_cudnn_advice_only_for_autotuning():
    tuned = OneTime(first_step=True, only_step=True, steps=1, autotune_nodes=2,
                    autotune_kernels=600, autotune_node="c/Conv2D", kernels=700, kernel_ops=20,
                    autotune_share=0.8)
    outlier = OneTime(first_step=True, only_step=True, steps=1, outlier_node="m/MatMul",
                      outlier_op="MatMul", outlier_us=9000, outlier_others_us=50,
                      outlier_share=0.9)
    for o, advised in ((tuned, True), (outlier, False)):
        v = verdict.judge(verdict.Facts(wall_us=10_000.0, one_time=o))
        assert v.bottleneck == "one_time"
        x = next(f for f in v.findings if f.kind == "one_time")
        assert ("TF_CUDNN_USE_AUTOTUNE" in verdict_words.try_next(v, x)) == advised


def _first_run_with_outlier() -> list[tuple]:
    """A GPU run: one 200 ms first MatMul call on the launch row, then 80 tiny ops (200 us
    launches, 5 us kernels) over 20 ms."""
    events = [(GPU, 0, 0, 200_000, "MatMul", "first/MatMul"),
              (GPU_ALL, 0, 199_000, 30, "MatMul", "first/MatMul")]
    t = 200_000
    for k in range(80):
        op = "MatMul" if k % 4 == 0 else "Add"
        events += [(GPU, 0, t, 200, op, f"n{k}/{op}"), (GPU_ALL, 0, t + 150, 5, op, f"n{k}/{op}")]
        t += 250
    return events


def test_a_first_runs_other_findings_are_judged_without_its_one_time_work():
    e = explain(trace(_first_run_with_outlier()))
    v = e.verdict
    assert v.bottleneck == "one_time"
    rest = v.facts.rest
    assert rest is not None and rest.wall_us == pytest.approx(e.choice.step.dur - 200_000, rel=0.01)
    assert rest.launch.busy_share == pytest.approx(0.8, abs=0.05)  # 200 of every 250 us
    assert rest.gpu_busy_share == pytest.approx(0.02, abs=0.01)
    launch = kinds(e)["launch"]
    assert launch.level == "moderate" and launch.context == "rest" and not launch.advised
    assert "Without the one-time work" in verdict_words.text(e.verdict, launch)


# --------------------------------------------------------------------------------------------
# TF2 step windows

def _tf2_step(get_next_at: float) -> list[tuple]:
    """Keras' train_function on the Python thread from 0 to 5 ms, the GPU's step row from
    1 ms to 9 ms; an IteratorGetNext of the step at ``get_next_at``."""
    return [
        (HOST, PYTHON, 0, 5000, "train_function", ""),
        (HOST, PYTHON, 100, 4800, "EagerKernelExecute 0", "", {"step_name": "0", "group_id": 0}),
        (HOST, "tf_Compute/1", get_next_at, 300, "IteratorGetNext", "IteratorGetNext",
         {"group_id": 0}),
        (GPU_PLANE, "Steps", 1000, 8000, "0", "", {"step_name": "0", "group_id": 0}),
        (GPU_PLANE, "Stream #13(Compute)", 1000, 7000, "volta_sgemm", "",
         {"tf_op": "dense/MatMul:MatMul", "group_id": 0}),
    ]


def test_a_tf2_step_window_is_the_devices_step_with_the_hosts_call_beside_it():
    """The window is the step the profile marks (1000..9000, the device's); the host's
    train_function call began before it and is said so, and its input wait before the
    device's step is not in the step (it is in the previous step's window)."""
    e = explain(trace(_tf2_step(get_next_at=300), "xprof"))
    c = e.choice
    assert c.lo == pytest.approx(1000) and c.hi == pytest.approx(9000)
    assert c.step.dur == pytest.approx(8000)
    assert c.host_us == pytest.approx(5000) and c.host_outside == pytest.approx((1000, 0))
    assert "began 1.0 ms before it" in step_words.window(c)
    assert e.verdict.facts.input_wait_us == pytest.approx(0)


def test_a_step_whose_host_and_device_windows_agree_is_not_widened():
    events = [(HOST, PYTHON, 1000, 8000, "EagerKernelExecute 0", "",
               {"step_name": "0", "group_id": 0}),
              (GPU_PLANE, "Steps", 1000, 8000, "0", "", {"step_name": "0", "group_id": 0}),
              (GPU_PLANE, "Stream #13(Compute)", 1000, 7000, "k", "",
               {"tf_op": "d/MatMul:MatMul", "group_id": 0})]
    e = explain(trace(events, "xprof"))
    assert e.choice.host is not None and not step_words.window(e.choice)


# --------------------------------------------------------------------------------------------
# copies

def test_copies_are_not_kernels_and_have_their_own_finding():
    events = [(CPU, 0, 0, 5000, "Dequantize", "fc/weights"),
              (CPU, 0, 5000, 10, "Identity", "fc/weights/read", ["fc/weights"]),
              (STREAM, 0, 5100, 6000, "MEMCPYHtoD", "edge_7_fc/weights/read"),
              (GPU, 0, 11_200, 50, "MatMul", "fc/MatMul", ["fc/weights/read"]),
              (GPU_ALL, 0, 11_260, 500, "MatMul", "fc/MatMul")]
    e = explain(trace(events))
    c = e.verdict.facts.copies
    assert c.count == 1 and c.largest == "fc/weights/read" and c.largest_source == "host"
    assert c.exposed_share == pytest.approx(6000 / e.choice.step.dur, rel=0.01)
    copy_finding = kinds(e)["copy"]
    assert copy_finding.level == "high" and e.verdict.bottleneck == "copy"
    assert copy_finding.case == "host"
    assert "keep that tensor on the GPU" in verdict_words.try_next(e.verdict, copy_finding)
    assert not e.verdict.facts.top_op.upper().startswith("MEMCPY")
    assert next(t for t in e.legend.top_ops if t.op == "MEMCPYHtoD").copy


# --------------------------------------------------------------------------------------------
# one run written N times

def test_one_run_written_several_times_counts_once(tmp_path):
    doc = document([(CPU, 0, 0, 600, "MatMul", "MatMul"),
                    (CPU, 1, 0, 400, "RandomStandardNormal", "random_normal")])
    events = list(doc["traceEvents"])
    for k in range(1, 4):   # three more copies under fresh pids, as timeline.py allocates them
        for ev in doc["traceEvents"]:
            ev = copy.deepcopy(ev)
            ev["pid"] += 10 * k
            events.append(ev)
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps({"traceEvents": events}))
    tr = load(path)
    assert len(tr.events) == 2 and len(tr.processes) == 1
    assert any("4 times" in w for w in tr.warnings)
    e = explain(tr)
    assert next(t for t in e.legend.top_ops if t.op == "MatMul").count == 1


def test_processes_that_differ_are_kept(tmp_path):
    doc = document([(CPU, 0, 0, 600, "MatMul", "MatMul")])
    other = copy.deepcopy(doc["traceEvents"])
    for ev in other:
        ev["pid"] += 10
        if ev.get("ph") == "X":
            ev["ts"] += 1   # another run: not the same microseconds
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps({"traceEvents": doc["traceEvents"] + other}))
    tr = load(path)
    assert len(tr.events) == 2 and not tr.warnings


# --------------------------------------------------------------------------------------------
# profile folders

def _session(folder: Path, start: float) -> None:
    folder.mkdir(parents=True)
    doc = document([(HOST, "tf_Compute/1", start, 500, "MatMul", "m/MatMul")], "xprof",
                   steps=[(start, 1000)])
    (folder / "host.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))


def test_profile_folders_load_from_any_level_and_name_the_other_sessions(tmp_path):
    run = tmp_path / "run"
    _session(run / "train/plugins/profile/2020_12_22_04_37_44", 0)
    _session(run / "train/plugins/profile/2020_12_22_04_38_19", 5000)
    for path in (run, run / "train", run / "train/plugins", run / "train/plugins/profile"):
        tr = load(path)
        assert float(tr.events.ts.min()) == pytest.approx(5000)   # the latest session
        (warning,) = [w for w in tr.warnings if "profile sessions" in w]
        assert "2020_12_22_04_37_44" in warning and "latest" in warning
    one = load(run / "train/plugins/profile/2020_12_22_04_37_44")
    assert not any("profile sessions" in w for w in one.warnings)


# --------------------------------------------------------------------------------------------
# TF 1.x XLA:GPU kernels

HLO = ("f32[4096]{0} fusion(f32[9216,4096]{1,0}, f32[1,9216]{1,0}), kind=kInput, calls= {   "
       + "tmp_0 = f32[1,9216]{1,0} parameter(1)   " * 20 + "}")


@pytest.mark.parametrize("text,short", [
    (HLO, "fusion (Input) -> f32[4096]"),
    ("(f32[1]{0}, f32[1,1000]{1,0}) fusion(f32[1000]{0}), kind=kLoop, calls=x",
     "fusion (Loop) -> (f32[1], f32[1,1000])"),
    ("%fusion.3 = f32[2,3]{1,0} fusion(f32[2,3]{1,0} %p), kind=kLoop", "fusion.3"),
    ("gradients/dense/MatMul", "gradients/dense/MatMul")])
def test_hlo_text_gets_a_short_name(text, short):
    assert short_instruction(text) == short


def test_xla_gpu_kernels_are_named_short_and_follow_their_launch():
    stream13 = "/device:GPU:0/stream:13 Compute"
    events = [(GPU, 0, 0, 300, "XlaLaunch", "cluster_0/_0/_1"),
              (GPU_ALL, 0, 150, 500, "XLA op", HLO), (stream13, 0, 150, 500, "XLA op", HLO),
              (GPU_ALL, 0, 700, 100, "XLA op", HLO), (stream13, 0, 700, 100, "XLA op", HLO)]
    e = explain(trace(events))
    assert "XlaLaunch" in e.ops_present
    assert not any(len(o.name) > 60 for o in e.sequence.ops)
    launch = next(o.index for o in e.sequence.ops if o.op == "XlaLaunch")
    kernels = {o.index for o in e.sequence.ops if o.op == "XLA op"}
    assert any(u == launch and v in kernels for u, v in e.sequence.edges.tolist())
    assert e.xla.units["cluster_0"].device_us == pytest.approx(600)
    assert "(not in this trace)" not in to_text(e).split("3. How")[0].split("2. How")[1]


# --------------------------------------------------------------------------------------------
# text

def test_empty_allocators_rows_are_said_empty(tmp_path):
    doc = document([(CPU, 0, 0, 600, "MatMul", "MatMul")])
    doc["traceEvents"].insert(0, {"ph": "M", "pid": 0, "name": "process_name",
                                  "args": {"name": "Allocators"}})
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(doc))
    alloc = next(p for p in explain(load(path)).legend.processes if p.name == "Allocators")
    assert legend_words.process(alloc).startswith("empty")
    doc["traceEvents"].append({"ph": "C", "pid": 0, "ts": 10, "name": "cpu",
                               "args": {"cpu": 1024}})
    path.write_text(json.dumps(doc))
    alloc = next(p for p in explain(load(path)).legend.processes if p.name == "Allocators")
    assert legend_words.process(alloc).startswith("memory counters")


def test_one_python_main_thread(tmp_path):
    doc = document([(HOST, PYTHON, 0, 900, "MatMul", "m/MatMul", {"is_eager": "1"}),
                    (HOST, "tf_Compute/1", 0, 500, "AddV2", "a/add")], "xprof",
                   steps=[(0, 1000)])
    doc["traceEvents"].append({"ph": "M", "pid": 1, "tid": 999, "name": "thread_name",
                               "args": {"name": PYTHON}})   # a second python3, no events
    (tmp_path / "trace.json").write_text(json.dumps(doc))
    e = explain(load(tmp_path / "trace.json"))
    python = [ln for p in e.legend.processes for ln in p.lanes if ln.role == "python"]
    assert len(python) == 2
    assert [ln.main_tid is None for ln in python].count(True) == 1
    assert [legend_words.lane(ln) == LANE_WORDS["python"] for ln in python].count(True) == 1


def test_the_busy_table_is_sorted_and_one_step_needs_no_step_hint():
    events = [(CPU, 0, 0, 1000, "MatMul", "a"), (GPU, 0, 0, 300, "Add", "b"),
              (GPU_ALL, 0, 100, 600, "Add", "b")]
    text = to_text(explain(trace(events)))
    table = text.split("How busy each row was")[1].split("\n\n")[0].splitlines()[1:]
    shares = [int(line.split("%")[0]) for line in table if "%" in line.split()[0]]
    assert shares == sorted(shares, reverse=True) and len(shares) >= 2
    assert "--step N" not in text
    assert "_XlaMerge" not in text  # no XLA in this trace
    assert "XLA launch plumbing" not in text


def test_gpu_idle_caused_by_input_is_said_as_its_effect():
    f = verdict.Facts(wall_us=10_000.0, input_wait_us=8000.0, input_ops=["IteratorGetNext"],
                      get_next_us=8000.0, gpu_busy_share=0.1)
    v = verdict.judge(f)
    idle = next(x for x in v.findings if x.kind == "gpu_idle")
    assert v.bottleneck == "input" and idle.level == "info" and idle.cause == "input"
    assert not idle.advised and not verdict_words.try_next(v, idle)
    assert np.isclose(idle.share, 0.9)


def test_a_kernel_that_starts_while_its_launch_runs_stays_on_the_critical_path():
    events = [(GPU, 0, 0, 300, "MatMul", "m/MatMul"),
              (GPU_ALL, 0, 100, 5000, "MatMul", "m/MatMul"),      # starts inside its launch
              (CPU, 0, 5200, 100, "_Retval", "out", ["m/MatMul"])]
    e = explain(trace(events))
    sq = e.sequence
    assert [o.row.split(" lane")[0] for o in sq.critical] == [
        "/device:GPU:0", "/device:GPU:0/stream:all"]
    # the launch counts up to its kernel's start: the overlap is not counted twice
    assert sq.critical_us == pytest.approx(100 + 5000) and sq.time_inconsistent == 0


def test_the_new_thresholds_are_the_documented_ones():
    """verdict.py's docstring and README state these: changing one is a decision."""
    from compare.vocabulary import thresholds as th

    assert (th.COPY_NOTABLE, th.COPY_BOUND) == (0.10, 0.50)
    assert (th.RUN_START_NOTABLE, th.RUN_START_BOUND) == (0.20, 0.50)
    assert (th.SOURCE_GPU_SETUP_US, th.SOURCE_MIN_US) == (10_000.0, 1_000.0)
    assert th.COMPUTE_SHOWN == 0.05


def test_a_collective_box_on_the_launch_row_is_no_launch_time():
    """TF1's '<gpu> Compute' row draws NcclAllReduce until the collective completes (a held-out
    multi-GPU trace: 1.19 of its row's 2.2 ms): without it the row is 24% busy here, so the
    step is not launch-bound, whatever the NCCL box adds."""
    events = [(GPU, 0, 10 + 20 * i, 8, "Mul", f"mul_{i}") for i in range(30)]
    events += [(STREAM, 0, 15 + 20 * i, 3, "Mul", f"mul_{i}") for i in range(30)]
    events += [(GPU, 1, 600, 400, "NcclAllReduce", "allreduce/NcclAllReduce")]
    f = explain(trace(events, steps=[0])).verdict.facts
    assert f.launch.kernels == 30 and f.launch.busy_share < 0.3, f.launch
    assert "launch" not in {x.kind for x in verdict.judge(f).findings}
