"""A real TensorBoard over a real run folder, checked through the profile plugin's HTTP API:
both runs listed under readable names, the tools a user needs, steps on the overview page,
events in the trace viewer; and the server always stopped."""
from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from common.stages import stage_of_scope
from compare.viewers.tensorboard import (
    MERGED_TRACE_HOWTO,
    TensorBoard,
    TensorBoardError,
    command,
    open_instructions,
    profile_runs,
)

# The TensorBoard runs of the profile_logdir fixture (tests/conftest.py).
PIPELINES = ("legacy", "modern")
NEEDED_TOOLS = ("overview_page", "input_pipeline_analyzer", "framework_op_stats")
SESSION_RE = re.compile(r"\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d")  # the profiler's session folder
# Stages whose ops TensorBoard's framework op stats must show by name: those outside XLA
# (legacy's clusters hold most of the augmentation; modern compiles all of it into one
# function and keeps read, decode and resize in tf.data).
STAGES_IN_OP_STATS = {"legacy": {"read", "decode", "shuffle"},
                      "modern": {"read", "decode", "resize"}}


@pytest.fixture(scope="module")
def tb(profile_logdir, tmp_path_factory):
    """One TensorBoard over the run folder for this module; stopped and checked afterwards."""
    logdir, _ = profile_logdir
    server = TensorBoard(logdir, log_path=tmp_path_factory.mktemp("tb") / "tensorboard.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        assert server.leftover_pids() == [], "TensorBoard left processes behind"


def _session(tb, pipeline: str) -> str:
    (name,) = [r for r in tb.runs() if r.split("/")[0] == pipeline]
    return name


def _table(tables: list[dict], col_id: str) -> tuple[list[str], list[dict]]:
    """The Google-Charts DataTable (of a tool's list) that has column ``col_id``, as
    (column ids, rows as dicts)."""
    for t in tables:
        ids = [c["id"] for c in t.get("cols", [])]
        if col_id in ids:
            return ids, [dict(zip(ids, (c.get("v") if c else None for c in r["c"])))
                         for r in t["rows"]]
    raise AssertionError(f"no table with column {col_id!r}")


def test_command_is_what_a_user_types():
    assert command(Path("runs/20261129-1200")) == "tensorboard --logdir runs/20261129-1200"
    assert command("runs/my run") == "tensorboard --logdir 'runs/my run'"


@pytest.mark.slow
def test_open_instructions_name_the_sessions_and_the_merged_trace(profile_logdir):
    logdir, runs = profile_logdir
    text = open_instructions(logdir)
    assert command(logdir) in text and MERGED_TRACE_HOWTO in text
    for name in profile_runs(logdir):
        assert f"`{name}`" in text
    assert len(profile_runs(logdir)) == len(runs)


def test_a_missing_logdir_is_one_clean_error(tmp_path):
    with pytest.raises(TensorBoardError, match="not a folder"):
        TensorBoard(tmp_path / "nope")


@pytest.mark.slow
def test_both_runs_listed_by_pipeline_and_session(tb, profile_logdir):
    logdir, runs = profile_logdir
    listed = tb.runs()
    # The plugin names each session <TensorBoard run>/<profiler session>, newest name first.
    assert listed == profile_runs(logdir)
    assert sorted(r.split("/")[0] for r in listed) == sorted(runs) == sorted(PIPELINES)
    for name in listed:
        pipeline, session = name.split("/")
        assert SESSION_RE.fullmatch(session), name
        assert (logdir / pipeline / "plugins" / "profile" / session).is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_each_run_has_the_tools_a_user_needs(tb, pipeline):
    tools = tb.tools(_session(tb, pipeline))
    assert {"trace_viewer", "trace_viewer@"} & set(tools), tools
    for tool in NEEDED_TOOLS:
        assert tool in tools, (tool, tools)


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_overview_reports_every_marked_step(tb, profile_logdir, pipeline):
    _, runs = profile_logdir
    run = runs[pipeline]
    session = _session(tb, pipeline)
    (host,) = tb.hosts(session, "overview_page")
    tables = tb.tool_data(session, "overview_page", host)
    assert "No step marker observed" not in str(tables)
    _, steps = _table(tables, "stepnum")
    marked = [f"{run['step_name']} {i}" for i in range(run["steps"])]
    # xprof drops the first and the last step as possibly incomplete when it has more than 5
    # (kDropIncompleteStepThreshold in step_events_to_steps_db.cc); the trace viewer keeps them.
    shown = marked[1:-1] if len(marked) > 5 else marked
    assert [s["stepnum"] for s in steps] == shown
    # The step times TensorBoard shows are the steps we ran: positive, and within the wall
    # time we measured around each of them.
    for s in steps:
        wall_ms = run["step_wall_s"][marked.index(s["stepnum"])] * 1e3
        assert 0 < s["stepTimeMs"] <= wall_ms * 1.05 + 1, (s["stepnum"], s["stepTimeMs"], wall_ms)
    # The input-pipeline page sees the same steps.
    _, ip_steps = _table(tb.tool_data(session, "input_pipeline_analyzer", host), "stepnum")
    assert [s["stepnum"] for s in ip_steps] == [s["stepnum"] for s in steps]


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_trace_viewer_returns_events_with_the_steps(tb, profile_logdir, pipeline):
    _, runs = profile_logdir
    run = runs[pipeline]
    session = _session(tb, pipeline)
    tool = "trace_viewer@" if "trace_viewer@" in tb.tools(session) else "trace_viewer"
    (host,) = tb.hosts(session, tool)
    trace = tb.tool_data(session, tool, host)
    complete = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert len(complete) > 1000
    assert all({"pid", "tid", "ts", "dur", "name"} <= e.keys() for e in complete)
    processes = {e["args"]["name"] for e in trace["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert any(p.endswith("/host:CPU") for p in processes), processes
    names = {e["name"] for e in complete}
    assert {f"{run['step_name']} {i}" for i in range(run["steps"])} <= names


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_framework_op_stats_show_our_stages(tb, pipeline):
    session = _session(tb, pipeline)
    (host,) = tb.hosts(session, "framework_op_stats")
    _, ops = _table(tb.tool_data(session, "framework_op_stats", host), "operation")
    stages = {stage_of_scope(op["operation"]) for op in ops} - {None}
    assert STAGES_IN_OP_STATS[pipeline] <= stages, stages


@pytest.mark.slow
def test_server_is_stopped_even_when_the_caller_fails(profile_logdir, tmp_path):
    logdir, _ = profile_logdir
    server = TensorBoard(logdir, log_path=tmp_path / "tensorboard.log")
    with pytest.raises(RuntimeError, match="caller failed"):
        with server:
            url = server.url
            assert server.runs()
            raise RuntimeError("caller failed")
    assert server.proc is None and server.leftover_pids() == []
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/data/plugins_listing", timeout=5)
    assert "TensorBoard" in (tmp_path / "tensorboard.log").read_text()


@pytest.mark.slow
def test_a_port_taken_before_tensorboard_binds_it_is_retried(profile_logdir, tmp_path,
                                                             monkeypatch):
    import socket

    from compare.viewers import tensorboard

    logdir, runs = profile_logdir
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = [taken.getsockname()[1]]
        real_free_port = tensorboard.free_port
        monkeypatch.setattr(tensorboard, "free_port",
                            lambda: ports.pop() if ports else real_free_port())
        with TensorBoard(logdir, log_path=tmp_path / "tensorboard.log") as server:
            assert server.port != taken.getsockname()[1]
            assert len(server.runs()) == len(runs)
    assert "could not bind" in (tmp_path / "tensorboard.log").read_text()
    assert server.leftover_pids() == []
