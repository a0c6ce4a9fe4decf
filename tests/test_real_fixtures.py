"""The independent accounting behind the real fixtures (tests/fixtures/trace_windows.py, issue 24)
and the fixtures of issue 24's round: known answers planted in small traces built here, the
pair folders whole and small, and expected.json what facts.py computes from the files.

Nothing here asserts what ``compare.run`` or ``compare.explain`` say about the fixtures: those
assertions come with issue 24's accounting. This file guards the facts they will be held to.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import trace_windows as tw  # noqa: E402  (a fixture helper, not a package)

PAIRS_DIR = FIXTURES / "real_pairs"
MAX_BYTES = 1_500_000
ROUND = "issue 24"


# --------------------------------------------------------------------------------------------
# small traces, written as the tools write them

def _meta(pid, name, tid=None, thread=None):
    out = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}]
    if thread is not None:
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": thread}})
    return out


def _x(pid, tid, ts, dur, event, **args):
    return {"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": event, "args": args}


def _tf1_gpu(conv_us: int = 300) -> list[dict]:
    """One session run: a GPU launch row, a kernel drawn on stream:all and stream:7, a copy
    drawn on memcpy and stream:14, and a ConcatV2 device copy on memcpy and stream:7."""
    launch, s_all, s7, s14, mem = 1, 2, 3, 4, 5
    ev = (_meta(launch, "/job:localhost/replica:0/task:0/device:GPU:0 Compute")
          + _meta(s_all, "/device:GPU:0/stream:all Compute")
          + _meta(s7, "/device:GPU:0/stream:7 Compute")
          + _meta(s14, "/device:GPU:0/stream:14 Compute")
          + _meta(mem, "/device:GPU:0/memcpy Compute"))
    ev += [_x(launch, 0, 0, 10, "NoOp", name="_SOURCE", op="NoOp"),
           _x(launch, 0, 20, 40, "Conv2D", name="conv", op="Conv2D"),
           _x(launch, 0, 70, 5, "ConcatV2", name="concat", op="ConcatV2")]
    for pid in (s_all, s7):
        ev.append(_x(pid, 0, 100, conv_us, "Conv2D", name="conv", op="Conv2D"))
    for pid in (mem, s14):
        ev.append(_x(pid, 0, 30, 50, "MEMCPYHtoD", name="edge_1_x", op="MEMCPYHtoD"))
    for pid in (mem, s7):
        ev.append(_x(pid, 0, 500, 4, "ConcatV2", name="concat", op="ConcatV2"))
    return ev


def _xprof(extra: list[dict], steps=((0, 1000), (1000, 2000), (2000, 3000))) -> list[dict]:
    """A TF2 host with a Python thread (step marks) and a compute thread, plus `extra`."""
    ev = _meta(701, "/host:CPU", 1, "python") + _meta(701, "/host:CPU", 2, "tf_Compute/1")
    ev.append({"ph": "M", "name": "thread_name", "pid": 701, "tid": 3,
               "args": {"name": "tf_data_iterator_get_next/9"}})
    for i, (a, b) in enumerate(steps):
        ev.append(_x(701, 1, a, b - a, f"train {i}", step_num=str(i), _r="1"))
    return ev + extra


def _op(tid, ts, dur, node, type_, **args):
    return _x(701, tid, ts, dur, type_, long_name=f"{node}:{type_}", **args)


# --------------------------------------------------------------------------------------------
# known answers: steps, windows, clipping, nesting, copies

def test_tf1_kernels_and_copies_drawn_twice_count_once():
    f = tw.single(_tf1_gpu())
    assert f["steps"] == 1 and f["steps_from"] == "one session run"
    assert f["step_us"] == [504.0]  # the run's first event start to its last event end
    device = dict(map(tuple, f["views"]["device"]["top_ops"]))
    assert device == {"conv": 300.0}  # not 600: stream:all repeats stream:7
    assert f["copies"]["count_per_step"] == 2 and f["copies"]["transfer_us"] == 54.0
    assert dict(map(tuple, f["copies"]["by_type"])) == {"MEMCPYHtoD": 50.0, "ConcatV2": 4.0}
    host = dict(map(tuple, f["views"]["host"]["top_ops"]))
    assert host == {"conv": 40.0, "_SOURCE": 10.0, "concat": 5.0}  # the launch row: host time
    assert f["union_per_step_us"]["device_kernels"] == 300.0


def test_tf1_merged_runs_are_steps_and_the_first_is_not_steady():
    one = _tf1_gpu()
    later = [dict(e, ts=e["ts"] + 10_000) for e in _tf1_gpu(conv_us=100) if e["ph"] == "X"]
    third = [dict(e, ts=e["ts"] + 20_000) for e in _tf1_gpu(conv_us=200) if e["ph"] == "X"]
    f = tw.single(one + later + third)
    assert f["steps"] == 3 and f["steady_steps"] == 2 and "session runs" in f["steps_from"]
    assert dict(map(tuple, f["views"]["device"]["top_ops"]))["conv"] == 150.0  # (100 + 200) / 2


def test_an_op_straddling_a_step_edge_counts_its_part_inside_each_window():
    # op X runs 800..1400 across the edge between step 0 and step 1 (steady: steps 1 and 2)
    f = tw.single(_xprof([_op(2, 800, 600, "x", "MatMul"), _op(2, 2100, 100, "y", "Relu")]))
    ops = dict(map(tuple, f["views"]["host"]["top_ops"]))
    assert ops == {"x": 200.0, "y": 50.0}  # 400 us inside step 1, over two steady steps
    straddle = f["views"]["host"]["straddling"]
    assert straddle == [{"node": "x", "type": "MatMul", "ts": 800.0, "dur_us": 600.0,
                         "inside_us": 400.0, "window": [1000.0, 2000.0]}]


def test_nested_events_count_once():
    extra = [
        # a runtime event around an op: the op keeps its time, the runtime event the rest
        _x(701, 2, 1100, 500, "ExecutorState::Process"),
        _op(2, 1200, 200, "a", "MatMul"),
        # a host copy inside an op (_Send): the op gives the copy's time up
        _op(2, 2100, 400, "IteratorGetNext/_1", "_Send"),
        _x(701, 2, 2200, 250, "MemcpyH2D", correlation_id="5"),
        # a compiled function with runtime events and kernels inside it keeps all of it
        _op(1, 1050, 600, "__inference_f_1", "__inference_f_1"),
        _x(701, 1, 1100, 300, "BlockUntilReady"),
        _x(701, 1, 1150, 100, "fusion.1"),
    ]
    f = tw.single(_xprof(extra))
    host = dict(map(tuple, f["views"]["host"]["top_ops"]))
    assert host == {"__inference_f_1": 300.0, "a": 100.0, "IteratorGetNext/_1": 75.0}
    runtime = dict(map(tuple, f["views"]["runtime"]["top_ops"]))
    assert runtime["ExecutorState::Process"] == 150.0  # (500 - 200) over two steady steps
    assert runtime["BlockUntilReady"] == 100.0 and runtime["fusion.1"] == 50.0
    assert f["copies"]["host_only_us"] == 125.0 and f["copies"]["transfer_us"] == 0.0


def test_xprof_copies_on_host_and_device_rows_are_one_transfer():
    gpu = _meta(1, "/device:GPU:0", 10, "Stream #14(MemcpyH2D)")
    extra = gpu + [
        _x(701, 2, 1100, 80, "MemcpyH2D", correlation_id="7"),     # the API call
        _x(1, 10, 1150, 30, "MemcpyH2D", correlation_id="7"),      # the transfer
        _x(701, 2, 2100, 40, "MemcpyD2H", correlation_id="8"),     # no device record
    ]
    c = tw.single(_xprof(extra))["copies"]
    assert c["count_per_step"] == 1.0  # two copies over two steady steps: the transfer, the D2H
    assert (c["transfer_us"], c["host_call_us"], c["host_only_us"]) == (15.0, 40.0, 20.0)


def test_device_steps_rows_win_over_host_marks_and_input_wait_is_the_step_threads():
    gpu = _meta(1, "/device:GPU:0", 11, "Steps")
    steps = [_x(1, 11, a, 900, str(i)) for i, a in enumerate((100, 1100, 2100))]
    waits = [_x(701, 1, 1150, 100, "IteratorGetNextOp::DoCompute"),
             _x(701, 1, 1160, 80, "Iterator::Prefetch", long_name="Iterator::Root::Prefetch"),
             _x(701, 3, 1150, 700, "Iterator::Map", long_name="Iterator::Root::Prefetch::Map")]
    f = tw.single(_xprof(gpu + steps + waits))
    assert f["steps_from"] == "device Steps row" and f["step_us"] == [900.0] * 3
    assert f["input_wait"]["per_step_us"] == [100.0, 0.0]  # the tf.data thread's map is not
    assert f["input_wait"]["us"] == 50.0


def test_without_host_marks_the_input_wait_is_on_the_lanes_that_call_iterator_get_next():
    gpu = _meta(1, "/device:GPU:0", 11, "Steps")
    steps = [_x(1, 11, a, 1000, str(i)) for i, a in enumerate((0, 1000, 2000))]
    ev = _meta(701, "/host:CPU", 2, "tf_Compute/1") + _meta(701, "/host:CPU", 3, "tf_data/9")
    ev += [_op(2, a + 100, 300, "IteratorGetNext", "IteratorGetNext") for a in (0, 1000, 2000)]
    ev += [_x(701, 3, a + 100, 800, "Iterator::Map", long_name="Iterator::Model::Map")
           for a in (0, 1000, 2000)]
    f = tw.single(gpu + steps + ev)
    assert f["input_wait"]["per_step_us"] == [300.0, 300.0]


def test_a_pair_names_the_planted_change_and_the_step_difference():
    base = [_op(2, a + 100, 300, "conv", "Conv2D") for a in (0, 1000, 2000)]
    slower = [_op(2, a + 100, 450, "conv", "Conv2D") for a in (0, 1000, 2200)]
    new = [_op(2, a + 600, 50, "extra", "Cast") for a in (0, 1000, 2200)]
    r = tw.pair(_xprof(base), _xprof(slower + new, steps=((0, 1000), (1000, 2200), (2200, 3400))))
    top = r["diff"]["host"]["top_ops"]
    assert (top[0]["name"], top[0]["delta_us"], top[0]["status"]) == ("conv", 150.0, "changed")
    assert (top[1]["name"], top[1]["delta_us"], top[1]["status"]) == ("extra", 50.0, "added")
    assert top[0]["a_per_step"] == [300.0, 300.0] and top[0]["b_per_step"] == [450.0, 450.0]
    assert r["steady_step_delta_us"] == 200.0 and r["steady_step_a_over_b"] == pytest.approx(
        1000 / 1200, abs=1e-3)


def test_compile_time_is_the_first_steps():
    extra = [_x(701, 1, 100, 700, "CpuCompiler::RunBackend"),
             _x(701, 1, 1100, 5, "XlaCompilationCache::Compile")]
    c = tw.single(_xprof(extra))["compile"]
    assert c["first_step_us"] == 700.0 and c["steady_mean_us"] == 2.5


# --------------------------------------------------------------------------------------------
# the fixtures of this round

def _round_pairs() -> dict:
    spec = json.loads((PAIRS_DIR / "pairs.json").read_text())
    return {k: v for k, v in spec.items() if not k.startswith("_") and v.get("round") == ROUND}


@pytest.mark.parametrize("pair", sorted(_round_pairs()))
def test_round_pair_is_whole_small_and_named(pair):
    entry = _round_pairs()[pair]
    folder = PAIRS_DIR / pair
    readme = (PAIRS_DIR / "README.md").read_text()
    assert f"`{pair}`" in readme
    for side in ("a", "b"):
        files = sorted(folder.glob(f"{side}.*"))
        assert files and all(p.suffix == ".gz" for p in files), files
        for p in files:
            assert p.stat().st_size < MAX_BYTES, p
            with gzip.open(p) as f:
                json.loads(f.read())
        assert entry["source"]["stored_as"][side] == " ".join(p.name for p in files)
    human = entry["human"]
    for key in ("verdict", "named_op", "named_type", "like_for_like", "caveats", "first_run",
                "top_change_is_noise"):
        assert key in human, key
    if entry["source"]["repo"].startswith("made here"):
        assert entry["source"]["generator"] == "tests/fixtures/real_pairs/make_tf2_pairs.py"
    else:
        assert entry["source"]["repo"] in readme
        for side in ("a", "b"):
            assert len(entry["source"][side]["commit"]) == 40


def test_the_generator_makes_exactly_the_made_here_pairs():
    sys.path.insert(0, str(PAIRS_DIR))
    import make_tf2_pairs

    made = {k: v for k, v in _round_pairs().items() if v["source"]["repo"].startswith("made")}
    assert set(make_tf2_pairs.PAIRS) == set(made)
    for name, (a, b) in make_tf2_pairs.PAIRS.items():
        src = made[name]["source"]
        assert (src["a"]["run"], src["a"]["window"]) == a
        assert (src["b"]["run"], src["b"]["window"]) == b


@pytest.mark.slow
def test_real_pairs_expected_json_is_what_facts_py_computes():
    result = subprocess.run([sys.executable, str(PAIRS_DIR / "facts.py"), "--check"],
                            capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stdout + result.stderr
