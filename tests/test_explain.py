"""``compare.explain`` answers the seed's four questions on every format we read: TF-written
TF1-era timelines (CPU, GPU, TF2 GPU; tests/fixtures/make_timelines.py), our own legacy run's
timelines, its TensorBoard profile (logdir, .xplane.pb, trace JSON), and damaged files."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from compare.analysis import sequence, steps, verdict, xla
from compare.analysis.explanation import explain
from compare.load import load
from compare.output import (
    explain_json,
    explain_text,
    legend_words,
    sequence_words,
    step_words,
    verdict_words,
)
from tests.conftest import assert_one_line_error, run_module

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GPU = FIXTURES / "tf1_gpu.timeline.json"
CPU_XLA = FIXTURES / "tf1_cpu_xla.timeline.json"
TF2_GPU = FIXTURES / "tf2_gpu_xla.timeline.json"
HEADINGS = list(explain_text.QUESTIONS.values())


def check_critical_path(trace, e) -> None:
    """The critical path is a path of the dependency graph, consistent with time, no longer
    than the step, and its length is the sum of its ops' durations inside the step."""
    sq, c = e.sequence, e.choice
    edges = {tuple(x) for x in sq.edges.tolist()}
    path = [o.index for o in sq.critical]
    assert path, "no critical path"
    ev = trace.events
    for u, v in zip(path, path[1:]):
        assert (u, v) in edges
        assert ev.ts[u] + ev.dur[u] <= ev.ts[v] + sequence.EPS_US
    weights = [max(0.0, min(ev.ts[i] + ev.dur[i], c.hi) - max(ev.ts[i], c.lo)) for i in path]
    assert sq.critical_us == pytest.approx(sum(weights))
    assert 0 < sq.critical_us <= c.step.dur + 1e-6
    assert all(ev.step[i] == c.step.num for i in path)


def explained(path, step=None):
    trace = load(path)
    return trace, explain(trace, step)


# --------------------------------------------------------------------------------------------
# fixtures are TensorFlow's own output

@pytest.mark.slow
def test_fixtures_are_exactly_what_tensorflow_timeline_writes(tmp_path):
    from tests.fixtures.make_timelines import FIXTURES as MADE
    from tests.fixtures.make_timelines import make_all

    made = make_all(tmp_path)
    assert set(made) == set(MADE)
    for name, path in made.items():
        assert json.loads(path.read_text()) == json.loads((FIXTURES / name).read_text()), name


def test_every_session_run_is_one_step_even_with_a_source_node_per_device():
    tr = load(GPU)  # _SOURCE on /cpu:0 and on /gpu:0 in each of three runs
    assert [s.num for s in tr.steps] == [0, 1, 2]
    assert all(s.dur > 10_000 for s in tr.steps)
    assert len(load(TF2_GPU).steps) == 4 and len(load(CPU_XLA).steps) == 4


# --------------------------------------------------------------------------------------------
# the GPU fixture: launch rows vs stream rows

def test_gpu_rows_are_named_launch_on_the_host_and_execution_on_the_streams():
    trace, e = explained(GPU)
    procs = {p.name: p for p in e.legend.processes}
    launch = procs["/job:localhost/replica:0/task:0/gpu:0 Compute"]
    assert launch.role == "gpu_launch"
    said = legend_words.process(launch)
    assert launch.has_streams and "launched" in said and "not the GPU running them" in said
    every = procs["/gpu:0/stream:all Compute"]
    assert every.role == "gpu_stream_all" and "actually ran" in legend_words.process(every)
    s14 = procs["/gpu:0/stream:14 Compute"]
    said = legend_words.process(s14)
    assert s14.role == "gpu_stream" and "GPU kernels" in said and "not launch" in said
    assert procs["/gpu:0/stream:15 Compute"].copies_only
    assert "copies" in legend_words.process(procs["/gpu:0/stream:15 Compute"])
    assert procs["/gpu:0/memcpy Compute"].role == "gpu_memcpy"
    assert procs["/job:localhost/replica:0/task:0/cpu:0 Compute"].role == "cpu_ops"
    assert "empty" in legend_words.process(procs["/gpu:0/stream:all Tensors"])
    assert procs["/job:localhost/replica:0/task:0/gpu:0 Tensors"].tensors > 0
    assert procs["Allocators"].role == "allocator"
    assert {m.allocator for m in e.legend.memory} == {"gpu_bfc", "cpu"}
    assert all(m.peak_bytes > 0 for m in e.legend.memory)
    assert e.legend.tids_are == "lanes" and "not a thread" in legend_words.tids_words(e.legend)
    # busy shares are unions of the rows' own boxes in the step
    ev, c = trace.events, e.choice
    for p in (launch, every, s14):
        k = (ev.pid == p.pid) & (ev.step == c.step.num)
        order = np.argsort(ev.ts[k])
        ts, end = ev.ts[k][order], (ev.ts[k] + ev.dur[k])[order]
        assert np.all(ts[1:] >= end[:-1])  # these rows do not overlap: union = sum
        assert p.busy_us == pytest.approx(float(np.sum(np.minimum(end, c.hi) -
                                                       np.maximum(ts, c.lo))))
    # the GPU ran longer than the host took to launch
    assert every.busy_us > 10 * launch.busy_us
    assert s14.busy_us == pytest.approx(every.busy_us)


def test_gpu_top_ops_count_each_kernel_once_and_say_where_it_ran():
    _, e = explained(GPU)
    by = {(t.op, t.where): t for t in e.legend.top_ops}
    # the executor's row of the GPU is the host launching ops, said as such
    conv_gpu, conv_host = by[("Conv2D", "GPU")], by[("Conv2D", "GPU launch row")]
    assert conv_gpu.count == 2  # conv1 + conv2 kernels; not repeated from stream:all
    assert conv_gpu.self_us == pytest.approx(1240 + 1710)
    # the two kernels do not overlap: wall time equals the summed GPU time here
    assert conv_gpu.wall_us == pytest.approx(1240 + 1710)
    assert conv_host.self_us == pytest.approx(2 * 27)
    assert by[("MEMCPYHtoD", "GPU")].count == 1  # on memcpy and stream:15, counted once


def test_gpu_sequence_follows_data_through_copies_and_streams():
    trace, e = explained(GPU)
    check_critical_path(trace, e)
    sq = e.sequence
    assert sq.inputs_recorded
    assert {"input", "launch", "copy", "send/recv"} <= set(sq.edge_counts)
    assert {"stream order", "gpu data"} & set(sq.edge_counts)
    crit = [(o.op, o.row) for o in sq.critical]
    assert crit[1][0] == "QueueDequeueManyV2" or crit[0][0] == "QueueDequeueManyV2"
    assert ("MEMCPYHtoD", "/gpu:0/stream:15 lane 0") in crit
    convs = [row for op, row in crit if op == "Conv2D"]
    assert convs and all("/stream:14" in r for r in convs)  # kernels, not launches
    # dataflow order: every op comes after the ops it depends on
    pos = {o.index: k for k, o in enumerate(sq.ops)}
    for u, v in sq.edges.tolist():
        assert pos[u] < pos[v]


def test_gpu_verdict_is_input_bound_with_an_underused_gpu():
    _, e = explained(GPU)
    v = e.verdict
    assert v.input_class == "highly input-bound" and v.bottleneck == "input"
    kinds = {f.kind: f for f in v.findings}
    # the idle GPU is the input wait's effect: said so, not judged as a cause of its own
    assert kinds["gpu_idle"].level == "info" and kinds["gpu_idle"].cause == "input"
    assert "input" in verdict_words.text(v, kinds["gpu_idle"])
    assert v.facts.gpu_busy_share == pytest.approx(
        next(p.busy_share for p in e.legend.processes if p.role == "gpu_stream_all"))
    assert "QueueDequeueManyV2" in v.facts.input_ops
    assert "QueueDequeueManyV2" in verdict_words.text(v, kinds["input"])
    assert kinds["input"].detail["advice"] == "queues"
    assert "tf.data" in verdict_words.try_next(v, kinds["input"])


def test_gpu_text_answers_the_four_questions():
    _, e = explained(GPU)
    text = explain_text.to_text(e)
    for h in HEADINGS:
        assert h in text
    assert "the host side of gpu:0" in text and "what gpu:0 actually ran" in text
    assert "highly input-bound" in text and "What to try next" in text
    assert "step 1 (session run 1)" in text and "steady step" in text


# --------------------------------------------------------------------------------------------
# XLA fixtures

def test_tf1_xla_launch_first_call_versus_steady():
    trace, e = explained(CPU_XLA)
    x = e.xla
    assert x.launch_style == "launch" and set(x.units) == {"cluster_0", "cluster_1"}
    ev = trace.events
    for name, u in x.units.items():
        durs = ev.dur[trace.mask(op_type="_XlaLaunch") & (ev.tf_name == trace.strings.lookup(name))]
        assert u.calls == u.runs == len(durs) == 4
        assert u.launch_first_us == durs[0]
        assert u.launch_steady_us == pytest.approx(np.median(durs[1:]))
        assert u.compiles == 1 and u.compile_steps == [0]
        assert u.first_compile_us == pytest.approx(durs[0] - np.median(durs[1:]))
    assert x.compiles == 2 and not x.recompiled
    assert e.choice.step.num != 0  # a steady step by default
    text = explain_text.to_text(e)
    assert "_XlaLaunch: TF 1.x: one op that runs a whole XLA cluster" in text
    assert "(not in this trace)" not in text.split("_XlaLaunch")[1][:40]
    assert "first _XlaLaunch took" in text and "Recompilation: none" in text


def test_tf1_xla_first_step_is_a_first_run_that_compiles():
    trace, e = explained(CPU_XLA, step=0)
    assert e.choice.why == "asked" and step_words.reason(e.choice) == "you asked for step 0"
    v = e.verdict
    # the first step's compile is one-time work: the first-run finding leads, with the compile
    # as its evidence and the compile finding beside it
    assert v.bottleneck == "one_time"
    lead = next(f for f in v.findings if f.kind == "one_time")
    assert "compile" in lead.detail["signs"] and lead.level == "high"
    assert "XLA compilation" in verdict_words.text(v, lead)
    assert any(f.kind == "compile" and f.level == "high" for f in v.findings)
    assert v.facts.compile_us / e.choice.step.dur >= verdict.COMPILE_DOMINATES
    assert e.xla_step.compile_us == pytest.approx(v.facts.compile_us)
    check_critical_path(trace, e)


def test_tf2_xla_recompilation_and_gpu_kernels():
    trace, e = explained(TF2_GPU)
    x = e.xla
    assert x.launch_style == "compile+run"
    u = x.units["cluster_0"]
    assert u.compiles == 2 and u.compile_steps == [0, 2] and x.recompiled == ["cluster_0"]
    assert u.runs == 4  # host _XlaRun calls; the kernels on stream rows are not calls
    kernels = trace.events.dur[xla.device_kernels(trace)]
    assert u.device_us == pytest.approx(kernels.sum()) and u.device_us > 10 * u.run_us
    assert 0 < u.lookup_us < xla.COMPILE_MIN_US
    assert set(e.ops_present) == {"_XlaCompile", "_XlaRun", "_XlaMerge"}
    v = e.verdict
    assert v.input_class == "not input-bound"
    assert v.facts.get_next_us is not None and v.facts.get_next_us <= verdict.GETNEXT_OK_US
    assert "recompile" in {f.kind for f in v.findings}
    text = " ".join(explain_text.to_text(e).split())  # wrapping apart
    assert "Recompilation: yes, cluster_0" in text and "_XlaRun on the host only launches" in text
    check_critical_path(trace, e)
    # the recompiling step is compile-bound
    assert explain(trace, 2).verdict.bottleneck == "compile"


# --------------------------------------------------------------------------------------------
# our own legacy run: timelines and the TensorBoard profile in every form

@pytest.mark.slow
def test_legacy_timelines_explained(legacy_run):
    out, _ = legacy_run
    trace, e = explained(out / "timeline.json")
    check_critical_path(trace, e)
    assert e.legend.tids_are == "lanes" and e.sequence.inputs_recorded
    roles = {p.role for p in e.legend.processes}
    assert {"allocator", "cpu_ops", "tensors"} <= roles
    assert e.legend.memory and e.legend.memory[0].peak_bytes > 0
    assert e.xla.launch_style == "compile+run" and e.xla.compiles == 0
    assert any(u.members for u in e.xla.units.values())  # from xla_clusters.json
    crit_ops = [o.op for o in e.sequence.critical]
    assert "DecodeJpeg" in crit_ops and "RandomShuffle" in crit_ops
    text = explain_text.to_text(e)
    for h in HEADINGS:
        assert h in text
    assert "holds" in text and "TF ops" in text
    first, ef = explained(out / "timeline_first.json")
    check_critical_path(first, ef)
    # the first session run compiles: a first run, its compile the one-time work (issue 15)
    assert ef.xla.compiles >= 1 and ef.verdict.bottleneck == "one_time"
    assert any(f.kind == "compile" and f.level == "high" for f in ef.verdict.findings)


@pytest.mark.slow
def test_legacy_profile_explained_in_every_form(legacy_run, tmp_path):
    from common.profiling import xplane_files, xplane_to_trace_json

    out, run = legacy_run
    (xp,) = xplane_files(out)
    gz = tmp_path / "trace.json.gz"
    gz.write_bytes(gzip.compress(xplane_to_trace_json([xp]).encode()))
    results = {}
    for label, path in (("logdir", out), ("xplane", xp), ("trace json", gz)):
        trace, e = explained(path)
        check_critical_path(trace, e)
        assert e.legend.tids_are == "threads" and not e.sequence.inputs_recorded
        assert not e.sequence.timeline and "per-thread order" in sequence_words.basis(e.sequence)
        assert e.choice.count == run["steps"] and e.choice.step.num != 0
        lanes = {ln.role for p in e.legend.processes for ln in p.lanes}
        assert {"python", "inter_op", "eigen"} <= lanes
        host = next(p for p in e.legend.processes if p.name == "/host:CPU")
        assert host.role == "host"
        text = explain_text.to_text(e)
        assert "Ops of step" in text and "in time order" in text
        results[label] = (e.choice.step.num, e.xla.compiles)
    assert len(set(results.values())) == 1, results
    # the xplane carries HLO: cluster members come from it
    _, e = explained(xp)
    assert any(u.members for u in e.xla.units.values()) and e.xla.compiles >= 1
    assert any("XLA kernel of cluster_" in t.largest for t in e.legend.top_ops)


@pytest.mark.slow
def test_a_chrome_trace_without_tf_args_is_explained_from_its_rows(legacy_run, tmp_path):
    """The profile as another tool would write it: B/E pairs, no args, a process of its own
    name. Nothing TF-specific is left but the event and thread names."""
    from common.profiling import xplane_files, xplane_to_trace_json

    out, _ = legacy_run
    doc = json.loads(xplane_to_trace_json(xplane_files(out)))
    events = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            events.append(dict(e, args={"name": "renderer"}))
        elif e.get("ph") == "X":
            events.append({"ph": "B", "pid": e["pid"], "tid": e["tid"], "ts": e["ts"],
                           "name": e["name"]})
            events.append({"ph": "E", "pid": e["pid"], "tid": e["tid"], "ts": e["ts"] + e["dur"]})
        elif e:
            events.append(e)
    path = tmp_path / "other_tool.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace, e = explained(path)
    assert trace.format == "chrome" and not trace.warnings
    assert e.legend.processes[0].role == "other" and e.legend.tids_are == "threads"
    assert not e.sequence.inputs_recorded
    check_critical_path(trace, e)
    assert e.xla.compiles >= 1 and e.xla.recompiled == []  # no node names: no claim
    assert all(h in explain_text.to_text(e) for h in HEADINGS)


# --------------------------------------------------------------------------------------------
# the CLI, as a user runs it

def test_cli_text_and_json(tmp_path):
    p = run_module("compare.explain", str(GPU))
    assert p.returncode == 0, p.stderr
    for h in HEADINGS:
        assert h in p.stdout
    assert "Traceback" not in p.stderr
    j = run_module("compare.explain", str(CPU_XLA), "--json", "--step", "2")
    assert j.returncode == 0, j.stderr
    doc = json.loads(j.stdout)
    assert set(doc) == {"schema", "trace", "warnings", "questions", "step", "pids", "xla",
                        "sequence", "verdict"}
    assert doc["schema"] == explain_json.SCHEMA and doc["step"]["num"] == 2
    assert doc["xla"]["units"]["cluster_1"]["compiles"] == 1
    assert doc["verdict"]["input_class"] in ("not input-bound", "moderately input-bound",
                                             "highly input-bound")
    assert doc["sequence"]["critical_us"] <= doc["step"]["wall_us"]
    assert "_XlaLaunch" in doc["xla"]["ops_explained"]


@pytest.mark.parametrize("name,content,needle", [
    ("empty.json", b"", "empty file"),
    ("garbage.json", b"\x00\x01\x02 not a trace", "not JSON"),
    ("schema.json", json.dumps({"traceEvents": [{"foo": 1}]}).encode(), "no usable trace events"),
    ("noevents.json", json.dumps({"displayTimeUnit": "ns"}).encode(), "traceEvents"),
    ("unclosed.json", json.dumps([{"ph": "B", "pid": 1, "tid": 0, "ts": 1, "name": "a"},
                                  {"ph": "X", "pid": 1, "tid": 0, "ts": 2, "dur": -5,
                                   "name": "b"}]).encode(), "never closed by an E"),
    ("counters.json", json.dumps([{"ph": "C", "pid": 0, "ts": 1, "name": "m",
                                   "args": {"m": 1}}]).encode(), "no op events"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, name, content, needle):
    p = tmp_path / name
    p.write_bytes(content)
    assert_one_line_error(run_module("compare.explain", str(p)), str(p), needle)


@pytest.mark.slow  # five CLI processes, one reading a 32 MB gzip bomb
def test_cli_refuses_a_gzip_bomb_and_a_missing_step(tmp_path):
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b" " * (32 << 20) + b"]"))
    assert_one_line_error(run_module("compare.explain", str(bomb),
                                     env={"COMPARE_MAX_TRACE_BYTES": str(4 << 20)}), "gzip bomb")
    assert_one_line_error(run_module("compare.explain", str(GPU), "--step", "7"), "no step 7")
    assert_one_line_error(run_module("compare.explain", str(tmp_path / "nope.json")),
                          "no such file")
    assert_one_line_error(run_module("compare.explain"), "usage")
    assert_one_line_error(run_module("compare.explain", str(GPU), "--stepp", "1"), "stepp")


@pytest.mark.slow  # three CLI processes over damaged copies of a GPU timeline
def test_cli_damaged_input_reports_what_was_skipped(tmp_path):
    doc = json.loads(GPU.read_text())
    events = doc["traceEvents"]
    events.append({"ph": "X", "pid": 1, "tid": 0, "ts": events[-1].get("ts", 0), "dur": -4,
                   "name": "neg"})
    events.append({"ph": "B", "pid": 1, "tid": 0, "ts": 1, "name": "never ends"})
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(doc))
    p = run_module("compare.explain", str(damaged))
    assert p.returncode == 0, p.stderr
    assert "Warnings" in p.stdout and "negative dur" in p.stdout and "never closed" in p.stdout
    text = GPU.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: int(len(text) * 0.6)])
    p = run_module("compare.explain", str(cut), "--json")
    assert p.returncode == 0, p.stderr
    assert any("truncated" in w or "never closes" in w for w in json.loads(p.stdout)["warnings"])
    latin = tmp_path / "latin.json"
    latin.write_bytes(text.replace(b'"conv1/Conv2D"', b'"conv1/Conv\xff2D"', 1))
    p = run_module("compare.explain", str(latin), env={"LC_ALL": "C"})  # an ASCII pipe
    assert p.returncode == 0 and "non-UTF-8" in p.stdout, p.stderr


def test_step_choice_is_a_steady_median_step():
    """A timeline's session runs are taken by their traced span (first event to last: the
    time between runs is Python the trace does not show), the median one after the first."""
    tr = load(CPU_XLA)
    c = steps.choose(tr)
    spans = steps.traced_spans(tr, sorted(tr.steps, key=lambda s: s.ts))
    later = sorted(s.dur for s in spans[1:])
    assert c.step.dur == later[len(later) // 2] and c.step.num != 0
    assert all(s.dur <= t.dur for s, t in zip(spans, sorted(tr.steps, key=lambda s: s.ts)))
    assert c.why == "steady" and "median" in step_words.reason(c)
    with pytest.raises(steps.InputError, match="no step 9"):
        steps.choose(tr, 9)


# --------------------------------------------------------------------------------------------
# the loader's fast path changes nothing

def _same_trace(a, b) -> None:
    from compare.model.events import EVENT_COLUMNS, STRING_COLUMNS

    assert a.format == b.format and a.warnings == b.warnings and a.objects == b.objects
    assert {p: (q.name, q.kind) for p, q in a.processes.items()} == \
        {p: (q.name, q.kind) for p, q in b.processes.items()}
    assert a.lanes == b.lanes and a.steps == b.steps
    for col in EVENT_COLUMNS:
        x, y = getattr(a.events, col), getattr(b.events, col)
        if col in STRING_COLUMNS:
            x, y = [a.s(i) for i in x], [b.s(i) for i in y]
            assert x == y, col
        else:
            np.testing.assert_array_equal(x, y, err_msg=col)
    assert [[a.s(i) for i in a.events.inputs_of(k)] for k in range(len(a.events))] == \
        [[b.s(i) for i in b.events.inputs_of(k)] for k in range(len(b.events))]
    for part in ("counters", "flows"):
        for col, x in vars(getattr(a, part)).items():
            y = getattr(getattr(b, part), col)
            if col == "name":
                x, y = [a.s(i) for i in x], [b.s(i) for i in y]
                assert x == y
            else:
                np.testing.assert_array_equal(x, y, err_msg=f"{part}.{col}")


@pytest.mark.parametrize("path", [GPU, CPU_XLA, TF2_GPU])
def test_fast_path_loads_exactly_what_the_dict_path_loads(path, monkeypatch, tmp_path):
    from compare.load import chrome_json

    fast = load(path)
    damaged = tmp_path / "damaged.json"
    doc = json.loads(path.read_text())
    doc["traceEvents"].insert(5, {"ph": "X", "pid": "one", "tid": 0, "ts": 1, "dur": 1,
                                  "name": "bad"})
    damaged.write_text(json.dumps(doc))
    fast_damaged = load(damaged)
    monkeypatch.setattr(chrome_json, "parse_typed", chrome_json._loads)
    _same_trace(fast, load(path))
    _same_trace(fast_damaged, load(damaged))
    assert any("pid is a string, not an integer (traceEvents[5])" in w for w in fast_damaged.warnings)


def test_fast_path_on_the_benchmark_trace_in_many_chunks(tmp_path, monkeypatch):
    """Small chunks, one of them damaged: that chunk goes the dict way, the others fast."""
    import functools

    from benchmarks.analysis import generate
    from compare.load import chrome_json

    path = tmp_path / "timeline.json"
    generate(path, 20_000)
    text = path.read_bytes()
    middle = text.index(b'{"ph":"X"', len(text) // 2)
    path.write_bytes(text[:middle] + b'{"ph":"X","pid":1,"tid":0,"ts":5,"dur":-1,"name":"n"},'
                     + text[middle:])
    monkeypatch.setattr(chrome_json, "iter_chunks",
                        functools.partial(chrome_json.iter_chunks, chunk_bytes=1 << 16))
    fast = load(path)
    assert len(fast.events) > 3000 and len(fast.counters.ts) and len(fast.flows.ts)
    assert len(fast.warnings) == 1
    assert fast.warnings[0].startswith("skipped 1 complete events with negative dur (traceEvents[")
    monkeypatch.setattr(chrome_json, "parse_typed", chrome_json._loads)
    _same_trace(fast, load(path))


def test_benchmark_smoke(tmp_path):
    out = tmp_path / "bench.json"
    p = run_module("benchmarks.analysis", "--events", "3000", "--json", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    for key in ("mb_per_s", "peak_rss_over_file", "vs_json_load", "events", "file_bytes",
                "load_s", "explain_s", "json_load_s", "loadavg"):
        assert key in doc, key
    assert doc["events"] >= 3000 and doc["loaded_events"] > 0 and not doc["warnings"]
    assert 0 < doc["peak_rss_over_file"] <= doc["peak_rss_summed_over_file"]


def test_busy_time_is_a_union_and_gaps_are_its_complement():
    from compare.model import intervals

    rng = np.random.default_rng(0)
    for _ in range(50):
        ts = rng.integers(0, 100, 12).astype(float)
        end = ts + rng.integers(0, 30, 12)
        lo, hi = 10.0, 90.0
        grid = np.arange(lo, hi) + 0.5  # unit cells of [lo, hi)
        covered = ((grid[:, None] >= ts) & (grid[:, None] < end)).any(axis=1)
        assert intervals.union_us(ts, end, lo, hi) == covered.sum()
        gs, ge = intervals.gaps(ts, end, lo, hi)
        assert (ge - gs).sum() == (~covered).sum()
        assert np.all(ge > gs) and np.all(gs[1:] >= ge[:-1])


@pytest.mark.slow
def test_modern_profile_explains_jit_functions(modern_run):
    """A tf.function(jit_compile=True) has no _XlaRun op: its calls are found around its
    kernels, so a steady step shows compiled code running, and the members name our stages."""
    from common.stages import ALL_STAGES

    out, _ = modern_run
    trace, e = explained(out)
    assert e.xla.launch_style == "function" and e.xla.compiles >= 1
    assert e.xla_step.run_us > 0 or e.xla_step.compile_us > 0
    # compiling happens on the first calls only: a later step holds compile time only where a
    # compile that began in an earlier step is still running (a tf.data map's function compiles
    # on tf.data's threads while the next step starts); some later step holds none and runs
    from compare.analysis.mapping import LABEL, map_stages
    labels = map_stages(trace).label
    ev = trace.events
    compiling = np.flatnonzero(labels == LABEL["xla_compile"])
    runs_only = 0
    for st in sorted(trace.steps, key=lambda s: s.ts)[1:]:
        x = explain(trace, st.num).xla_step
        if x.compile_us > 0:
            spill = compiling[(ev.ts[compiling] < st.ts) & (ev.end[compiling] > st.ts)]
            assert len(spill), (st.num, x)
        runs_only += x.compile_us == 0 and x.run_us > 0
    assert runs_only >= 1
    assert e.xla.run_events
    text = explain_text.to_text(e)
    assert "jit_compile=True" in text and "No XLA in this trace" not in text
    for line in text.splitlines():
        if line.strip().startswith("holds "):
            named = line.split(" from ", 1)[1].split(";")[0].split(" (and")[0]
            assert set(named.split(", ")) <= set(ALL_STAGES), line


def test_a_compiling_call_that_ends_inside_the_step_brings_only_its_run():
    """Known answer: a jit call from 0 to 1,400 us that compiled for 1,000 us (so ran compiled
    code from 1,000 to 1,400), then a call from 1,500 to 1,800 that only ran, explained in the
    step [1,000, 2,000). The step ran compiled code 400 + 300 us and compiled none of it.
    Subtracting the first call's whole compile had made it 0."""
    from compare.analysis.explanation import xla_in_step
    from compare.analysis.steps import StepChoice
    from compare.analysis.xla import XlaSummary
    from compare.model.events import Step
    from tests.synthetic import trace

    tr = trace([("/host:CPU", "tf_Compute/1", 0, 1400, "__inference_f_1", "f"),
                ("/host:CPU", "tf_Compute/1", 1500, 300, "__inference_f_1", "f")], format="xprof")
    ev, names = tr.events, tr.strings.names
    first, second = sorted((i for i in range(len(ev)) if names[ev.name[i]] == "__inference_f_1"),
                           key=lambda i: ev.ts[i])
    summary = XlaSummary(units={}, compile_us=1000.0, run_us=700.0, compiles=1, recompiled=[],
                         launch_style="function", compile_calls=[(first, "f", 1000.0)],
                         run_events=[first, second])
    lo = float(ev.ts[first]) + 1000.0
    choice = StepChoice(Step(1, lo, 1000.0), "asked", 2, 1400.0, 1000.0, 1000.0, 1400.0)
    x = xla_in_step(tr, summary, choice)
    assert x.run_us == pytest.approx(700.0)
    assert x.run_share == pytest.approx(0.7)
