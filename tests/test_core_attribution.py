"""Per-step attribution (compare/analysis/attribution.py) and lane nesting
(compare/model/nesting.py) on small hand-built traces whose right answers are worked out by
hand: wall shares, waits, idle, CPU time, own time, input and compile time, blocked runtime,
worker regions,
first and steady steps; parents, clipped ends, self time and segments. Fast: no TensorFlow."""
from __future__ import annotations

import numpy as np
import pytest

from compare.analysis.attribution import attribute, segments
from compare.analysis.mapping import map_stages
from compare.model import nesting
from compare.vocabulary.labels import LABEL, LABELS
from compare.vocabulary.thresholds import BLOCKED_MIN_US
from tests.synthetic import CPU, HOST, PYTHON, trace

W, W2 = "tf_Compute/1", "tf_Compute/2"      # inter-op threads
EIGEN = "tf_intra_op/1"                      # an intra-op (Eigen) worker
DATA = "tf_data_private_threadpool/1"        # a tf.data thread


def attributed(events, fmt="xprof", steps=()):
    tr = trace(events, format=fmt, steps=steps)
    smap = map_stages(tr)
    return tr, smap, attribute(tr, smap)


def by_label(arr: np.ndarray) -> dict[str, float]:
    return {LABELS[i]: pytest.approx(float(v), abs=1e-6) for i, v in enumerate(arr) if v > 1e-9}


# --------------------------------------------------------------------------------------------
# wall and CPU time of one step: (events, step, expected wall, expected cpu)

STEP = [(0, 200)]
WALL = [
    pytest.param([(HOST, W, 0, 100, "DecodeJpeg", "d/DecodeJpeg")], STEP,
                 {"decode": 50, "runtime": 150}, {"decode": 100, "runtime": 200},
                 id="the_step_marker_alone_is_python_work"),
    pytest.param([(HOST, PYTHON, 0, 200, "SessionRun"),
                  (HOST, W, 0, 100, "DecodeJpeg", "d/DecodeJpeg"),
                  (HOST, W2, 0, 100, "ResizeBilinear", "r/ResizeBilinear")], STEP,
                 {"decode": 50, "resize": 50, "idle": 100}, {"decode": 100, "resize": 100},
                 id="two_threads_at_once_share_the_wall"),
    pytest.param([(HOST, PYTHON, 0, 200, "SessionRun"),
                  (HOST, W, 0, 100, "DecodeJpeg", "d/DecodeJpeg"),
                  (HOST, W2, 50, 100, "ResizeBilinear", "r/ResizeBilinear")], STEP,
                 {"decode": 75, "resize": 75, "idle": 50}, {"decode": 100, "resize": 100},
                 id="partly_overlapping"),
    pytest.param([(HOST, PYTHON, 0, 200, "SessionRun"),
                  (HOST, W, 50, 50, "DecodeJpeg", "d/DecodeJpeg")], STEP,
                 {"decode": 50, "idle": 150}, {"decode": 50},
                 id="a_session_waiting_holds_no_time_nothing_traced_runs_is_idle"),
    # while the step waits for its input, the instant is the input's, shared among what runs
    # then: the wait alone 0-20 and 60-100, the wait and the decode producing it 20-60
    pytest.param([(HOST, PYTHON, 0, 100, "IteratorGetNext", "IteratorGetNext"),
                  (HOST, DATA, 20, 40, "DecodeJpeg", "d/DecodeJpeg")], STEP,
                 {"input_wait": 80, "decode": 20, "runtime": 100}, {"decode": 40, "runtime": 100},
                 id="get_next_waits_in_input_wait"),
    pytest.param([(HOST, PYTHON, 0, 100, "Iterator::Prefetch", "Iterator::Model::Prefetch"),
                  (HOST, W, 0, 50, "DecodeJpeg", "d/DecodeJpeg")], STEP,
                 {"input_wait": 75, "decode": 25, "runtime": 100}, {"decode": 50, "runtime": 100},
                 id="an_async_iterator_waits"),
    pytest.param([(CPU, 0, 0, 100, "DecodeJpeg", "d/DecodeJpeg"),
                  (CPU, 0, 150, 50, "ResizeBilinear", "r/ResizeBilinear"),
                  (CPU, 0, 300, 10, "Pack", "next/Pack")], [0, 300],
                 {"decode": 100, "resize": 50, "idle": 150}, {"decode": 100, "resize": 50},
                 id="idle_when_nothing_is_traced"),
    pytest.param([(CPU, 0, 0, 100, "DecodeJpeg", "d/DecodeJpeg"),
                  (CPU, 1, 50, 100, "ResizeBilinear", "r/ResizeBilinear"),
                  (CPU, 2, 50, 50, "ReverseV2", "f/ReverseV2"),
                  (CPU, 0, 300, 10, "Pack", "next/Pack")], [0, 300],
                 {"decode": 50 + 50 / 3, "resize": 50 / 3 + 50, "flip": 50 / 3, "idle": 150},
                 {"decode": 100, "resize": 100, "flip": 50},
                 id="three_timeline_lanes"),
]


@pytest.mark.parametrize("events,steps,wall,cpu", WALL)
def test_wall_and_cpu_of_a_step(events, steps, wall, cpu):
    fmt = "timeline" if events[0][0] == CPU else "xprof"
    tr, smap, att = attributed(events, fmt, steps)
    st = att.steps[0]
    assert by_label(st.wall) == wall
    assert by_label(st.cpu) == cpu
    assert st.wall.sum() == pytest.approx(st.dur, abs=1e-9)
    # the input's part of the wall is every instant the step waited for or read its input
    assert st.ev_input.sum() == pytest.approx(st.input_us, abs=1e-9)
    # own time: every segment's time in the step, once, whatever the waits
    e, t0, t1 = segments(tr)
    inside = np.clip(t1, st.ts, st.ts + st.dur) - np.clip(t0, st.ts, st.ts + st.dur)
    assert st.ev_self.sum() == pytest.approx(inside.sum(), abs=1e-9)
    # per event: what each got adds up to its label's total
    per_label = np.zeros(len(LABELS))
    for i, w in st.by_event_wall.items():
        per_label[smap.label[i]] += w
    per_label[LABEL["idle"]] += st.wall[LABEL["idle"]]
    np.testing.assert_allclose(per_label, st.wall, atol=1e-9)


def test_cpu_time_is_busy_thread_time():
    """CPU per label is the sum of the threads' busy (not waiting) innermost time."""
    events = [(HOST, PYTHON, 0, 1000, "SessionRun"),
              (HOST, W, 0, 300, "ExecutorState::Process"),
              (HOST, W, 10, 200, "DecodeJpeg", "d/DecodeJpeg"),
              (HOST, W2, 100, 400, "ResizeBilinear", "r/ResizeBilinear"),
              (HOST, DATA, 50, 600, "ReverseV2", "f/ReverseV2")]
    tr, smap, att = attributed(events, steps=[(0, 1000)])
    st = att.steps[0]
    assert by_label(st.cpu) == {"decode": 200, "resize": 400, "flip": 600,
                                "runtime": 10 + 90}   # the executor around DecodeJpeg
    assert st.cpu.sum() == pytest.approx(1300)
    assert st.wall.sum() == pytest.approx(1000)


# --------------------------------------------------------------------------------------------
# how long the step read or waited for input, and how long some thread compiled

def test_input_and_compile_time_of_a_step():
    # step 0 runs 0..500 (step 1 starts at 500); worked out instant by instant:
    #   0-100   a reader's read on lane 0 while lane 1 decodes: input
    #   200-220 a dequeue while _XlaCompile runs: input (and compiling)
    #   200-260 _XlaCompile: compiling
    tr, smap, att = attributed([
        (CPU, 0, 0, 100, "ReaderReadV2", "r/ReaderReadV2"),
        (CPU, 1, 50, 100, "DecodeJpeg", "d/DecodeJpeg"),
        (CPU, 0, 200, 60, "_XlaCompile", "cluster_0_1/xla_compile"),
        (CPU, 2, 200, 20, "QueueDequeueManyV2", "batch"),
        (CPU, 1, 230, 70, "ResizeBilinear", "s/ResizeBilinear"),
        (CPU, 0, 320, 30, "Identity", "x/Identity"),
        (CPU, 1, 340, 20, "DecodeJpeg", "d/DecodeJpeg_1"),
        (CPU, 0, 600, 10, "Pack", "next/Pack"),
    ], "timeline", steps=[0, 500])
    st = att.steps[0]
    assert st.dur == 500
    assert (st.input_us, st.compile_us) == pytest.approx((120, 60))
    # nothing before the first event, 140 us after the last: the untraced edges
    assert st.untraced_us == pytest.approx(140)


@pytest.mark.parametrize("events,input_us,compile_us", [
    pytest.param([(HOST, PYTHON, 0, 200, "SessionRun"),
                  (HOST, W, 0, 100, "DecodeJpeg", "d/DecodeJpeg")], 0, 0,
                 id="a_wait_in_runtime_is_no_input"),
    pytest.param([(HOST, PYTHON, 0, 200, "IteratorGetNext", "IteratorGetNext"),
                  (HOST, DATA, 0, 100, "DecodeJpeg", "d/DecodeJpeg")], 200, 0,
                 id="the_step_waiting_for_input_is_input"),
    pytest.param([(HOST, PYTHON, 0, 200, "SessionRun"),
                  (HOST, W, 0, 200, "BlockUntilReady")], 0, 0,
                 id="waiting_for_compiled_code"),
    pytest.param([(HOST, PYTHON, 0, 200, "SessionRun"),
                  (HOST, W, 0, 50, "CpuCompiler::RunBackend"),
                  (HOST, W2, 0, 150, "ExecutorState::Process")], 0, 50,
                 id="compile_then_runtime"),
])
def test_input_and_compile_time_of_waits(events, input_us, compile_us):
    tr, smap, att = attributed(events, steps=STEP)
    st = att.steps[0]
    assert (st.input_us, st.compile_us) == pytest.approx((input_us, compile_us))


# --------------------------------------------------------------------------------------------
# TF's runtime with no op inside, long enough, on a TF thread: blocked (waiting), not work

@pytest.mark.parametrize("gap,lane,blocked", [
    (50.0, W, False),
    (BLOCKED_MIN_US - 0.5, W, False),
    (BLOCKED_MIN_US, W, True),
    (250.0, W, True),
    (250.0, PYTHON, False),       # the step's own thread: Python-side work, not a wait
])
def test_blocked_runtime(gap, lane, blocked):
    events = [(HOST, PYTHON, 0, 1000, "SessionRun"),
              (HOST, lane, 0, 50 + gap, "ExecutorState::Process"),
              (HOST, lane, 0, 50, "DecodeJpeg", "d/DecodeJpeg"),
              (HOST, W2, 0, 1000, "ResizeBilinear", "r/ResizeBilinear")]
    tr, smap, att = attributed(events, steps=[(0, 1000)])
    st = att.steps[0]
    assert st.blocked_us == pytest.approx(gap if blocked else 0.0)
    assert att.median_blocked_us() == pytest.approx(gap if blocked else 0.0)
    # blocked time is no CPU time and takes no wall share from the working thread
    executor = int(np.flatnonzero(tr.mask(name="ExecutorState::Process"))[0])
    assert st.by_event_cpu.get(executor, 0.0) == pytest.approx(0.0 if blocked else gap)
    if lane == W:
        resize_wall = 1000 - 50 / 2 - (0 if blocked else gap / 2)
        assert st.wall[LABEL["resize"]] == pytest.approx(resize_wall)
    assert st.wall.sum() == pytest.approx(1000)


# --------------------------------------------------------------------------------------------
# an Eigen worker's region with nothing inside: credited to the ops running then

@pytest.mark.parametrize("events,wall,estimated,credited", [
    pytest.param([(HOST, EIGEN, 0, 100, "ThreadpoolListener::Region"),
                  (HOST, W, 0, 100, "DecodeJpeg", "d/DecodeJpeg")],
                 {"decode": 100}, {"decode": 50}, 50, id="one_op"),
    pytest.param([(HOST, EIGEN, 0, 100, "ThreadpoolListener::Region"),
                  (HOST, W, 0, 100, "DecodeJpeg", "d/DecodeJpeg"),
                  (HOST, W2, 0, 100, "ResizeBilinear", "r/ResizeBilinear")],
                 {"decode": 50, "resize": 50}, {"decode": 100 / 6, "resize": 100 / 6}, 100 / 3,
                 id="two_ops_share_it"),
    pytest.param([(HOST, EIGEN, 0, 100, "ThreadpoolListener::Region")],
                 {"runtime": 100}, {}, 0, id="no_op_then_runtime"),
    pytest.param([(HOST, EIGEN, 0, 100, "ThreadpoolListener::Region"),
                  (HOST, EIGEN, 10, 80, "DecodeJpeg", "d/DecodeJpeg")],
                 {"decode": 80, "runtime": 20}, {}, 0, id="a_region_with_work_is_no_orphan"),
])
def test_worker_regions_are_credited_to_concurrent_ops(events, wall, estimated, credited):
    # the step runs 0..100 (a timeline-like step with no marker: session run 0 of one event)
    tr = trace(events, format="xprof")
    smap = map_stages(tr)
    att = attribute(tr, smap)
    st = att.steps[0]
    assert (st.ts, st.dur) == (0, 100)
    assert by_label(st.wall) == wall
    assert by_label(st.wall_estimated) == estimated
    assert st.credited_us == pytest.approx(credited)


# --------------------------------------------------------------------------------------------
# the first step apart; medians over the steady ones

def test_first_step_apart_and_steady_medians():
    # runs start at 0, 1000, 1300, 1800; the last ends at 2200: 1000, 300, 500, 400 us
    decode = [600, 100, 300, 200]
    starts = [0, 1000, 1300, 1800]
    events = [(CPU, 0, t, d, "DecodeJpeg", "d/DecodeJpeg") for t, d in zip(starts, decode)]
    events.append((CPU, 1, 2100, 100, "Pack", "p/Pack"))
    tr, smap, att = attributed(events, "timeline", steps=starts)
    assert [s.dur for s in att.steps] == [1000, 300, 500, 400]
    assert att.first.num == 0
    assert [s.num for s in att.steady] == [1, 2, 3]
    assert att.median_step_us() == 400
    assert att.representative().num == 3
    assert att.median("wall")[LABEL["decode"]] == pytest.approx(200)    # of 100, 300, 200
    assert att.first.wall[LABEL["decode"]] == pytest.approx(600)


def test_the_representative_step_is_one_that_compiles_nothing():
    # steady steps 1..5 of 300, 400, 450 (it compiles), 500, 650 us: the median, 450 us, is
    # the compiling step's; the drawn step is the closest of the others (400 before 500)
    starts = [0, 1000, 1300, 1700, 2150, 2650]
    events = [(CPU, 0, t, 50, "DecodeJpeg", f"d/DecodeJpeg_{i}") for i, t in enumerate(starts)]
    events.append((CPU, 0, 3250, 50, "Pack", "p/Pack"))
    events.append((CPU, 1, 1750, 100, "_XlaCompile", "cluster_0_1/xla_compile"))
    tr, smap, att = attributed(events, "timeline", steps=starts)
    assert [s.dur for s in att.steady] == [300, 400, 450, 500, 650]
    assert att.steady[2].wall[LABEL["xla_compile"]] > 0
    assert att.representative().num == 2
    # were every step compiling, the one closest to the median would still be drawn
    every = [(CPU, 1, t + 10, 20, "_XlaCompile", f"c_{i}/xla_compile")
             for i, t in enumerate(starts[1:])]
    tr, smap, att = attributed(events + every, "timeline", steps=starts)
    assert att.representative().num == 3


def test_a_single_step_is_its_own_steady_step():
    tr, smap, att = attributed([(CPU, 0, 0, 100, "DecodeJpeg", "d/DecodeJpeg")], "timeline")
    assert att.first is None and len(att.steady) == 1
    assert att.median_step_us() == 100


# --------------------------------------------------------------------------------------------
# nesting: (pid, tid, ts, dur) per event -> parent, clipped end, contained, depth

NESTS = [
    pytest.param([(0, 0, 0, 100), (0, 0, 10, 40), (0, 0, 60, 30)],
                 [-1, 0, 0], [100, 50, 90], [True, True, True], [0, 1, 1], id="two_children"),
    pytest.param([(0, 0, 0, 100), (0, 0, 10, 80), (0, 0, 20, 10)],
                 [-1, 0, 1], [100, 90, 30], [True, True, True], [0, 1, 2], id="grandchild"),
    pytest.param([(0, 0, 0, 100), (0, 0, 50, 100)],
                 [-1, 0], [100, 100], [True, False], [0, 1], id="partial_overlap_is_clipped"),
    pytest.param([(0, 0, 0, 100), (0, 0, 10, 80), (0, 0, 50, 100)],
                 [-1, 0, 1], [100, 90, 90], [True, True, False], [0, 1, 2],
                 id="clipped_to_the_clipped_parent"),
    pytest.param([(0, 0, 0, 100), (0, 0, 100, 50), (0, 0, 110, 10)],
                 [-1, -1, 1], [100, 150, 120], [True, True, True], [0, 0, 1],
                 id="touching_is_not_nested"),
    pytest.param([(0, 0, 0, 50), (0, 0, 0, 100)],
                 [1, -1], [50, 100], [True, True], [1, 0], id="same_start_longer_is_parent"),
    pytest.param([(0, 0, 0, 100), (0, 1, 10, 50), (1, 0, 10, 50)],
                 [-1, -1, -1], [100, 60, 60], [True, True, True], [0, 0, 0],
                 id="other_lanes_never_nest"),
]


@pytest.mark.parametrize("events,parent,end,contained,depth", NESTS)
def test_nesting(events, parent, end, contained, depth):
    pid, tid, ts, dur = (np.array(c, dtype=float if k >= 2 else np.int64)
                         for k, c in enumerate(zip(*events)))
    n = nesting.build(pid, tid, ts, dur)
    assert n.parent.tolist() == parent
    assert n.end.tolist() == end
    assert n.contained.tolist() == contained
    assert n.depth.tolist() == depth
    walk = n.walk().tolist()
    assert sorted(walk) == [i for i, p in enumerate(parent) if p >= 0]
    assert all(walk.index(parent[i]) < walk.index(i) for i in walk if parent[i] in walk)


def test_nearest_ancestor_among_a_subset():
    n = nesting.build(np.zeros(4, np.int64), np.zeros(4, np.int64),
                      np.array([0.0, 10, 20, 30]), np.array([100.0, 80, 60, 10]))
    assert n.parent.tolist() == [-1, 0, 1, 2]
    assert n.nearest_in(np.array([0, 3])).tolist() == [-1, 0]
    assert n.nearest_in(np.array([1, 2, 3])).tolist() == [-1, 1, 2]


def _lane_trace(events):
    return trace([(HOST, W, ts, dur, name) for ts, dur, name in events], format="xprof")


@pytest.mark.parametrize("events,self_us", [
    pytest.param([(0, 100, "A"), (10, 40, "B"), (60, 30, "C")], [30, 40, 30], id="children"),
    pytest.param([(0, 100, "A"), (50, 100, "B")], [50, 100], id="partial_overlap"),
    pytest.param([(0, 100, "A"), (10, 80, "B"), (20, 10, "C")], [20, 70, 10], id="grandchild"),
])
def test_self_time(events, self_us):
    tr = _lane_trace(events)
    order = [int(np.flatnonzero(tr.mask(name=name))[0]) for _, _, name in events]
    assert tr.self_time()[order].tolist() == self_us
    # only the events given count: without B, A's self time loses C's time (not B's)
    if len(events) == 3:
        a, c = order[0], order[2]
        assert tr.self_time(np.array([a, c])).tolist() == [100 - events[2][1], events[2][1]]


@pytest.mark.parametrize("events,segs", [
    pytest.param([(0, 100, "A"), (10, 40, "B"), (60, 30, "C")],
                 [("A", 0, 10), ("B", 10, 50), ("A", 50, 60), ("C", 60, 90), ("A", 90, 100)],
                 id="children"),
    pytest.param([(0, 100, "A"), (50, 100, "B")], [("A", 0, 50), ("B", 50, 100)],
                 id="partial_overlap_clipped"),
    pytest.param([(0, 100, "A"), (0, 100, "B")], [("B", 0, 100)], id="same_extent"),
])
def test_segments_are_the_innermost_event_over_time(events, segs):
    tr = _lane_trace(events)
    e, t0, t1 = segments(tr)
    got = [(tr.s(tr.events.name[i]), a, b) for i, a, b in zip(e, t0, t1)]
    assert got == segs
