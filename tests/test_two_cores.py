"""Loading a big timeline on two cores (:func:`compare.load.json_trace._add_in_halves`) gives exactly
what one core gives, and anything odd (a failing or hanging child, a trace the fast path does
not take whole) falls back to one core with the same result.

The threshold is lowered so that small generated traces take the two-core path; the
benchmark (``benchmarks/analysis.py``) measures it at full size."""
from __future__ import annotations

import json
import os
import time

import pytest

from benchmarks.analysis import generate
from compare.load import forked, load
from compare.load import json_trace as loaders
from tests.test_explain import GPU, _same_trace


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A timeline.py-style trace (CPU and GPU rows, counters, flows, tensor objects), ~3 MB."""
    path = tmp_path_factory.mktemp("two_cores") / "trace.json"
    generate(path, 20_000)
    return path


def _one_core(path, monkeypatch):
    monkeypatch.setenv("COMPARE_TWO_CORES", "0")
    try:
        return load(path)
    finally:
        monkeypatch.delenv("COMPARE_TWO_CORES")


@pytest.fixture
def low_threshold(monkeypatch):
    monkeypatch.setattr(loaders, "TWO_CORES_MIN_BYTES", 1 << 16)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    children = []
    real_start = forked.start

    def spy(fn):
        child = real_start(fn)
        children.append(child)
        return child

    monkeypatch.setattr(forked, "start", spy)
    return children


def test_two_cores_load_exactly_what_one_core_loads(big, monkeypatch, low_threshold):
    halves = []
    real = loaders._add_in_halves
    monkeypatch.setattr(loaders, "_add_in_halves", lambda *a: halves.append(real(*a)) or halves[-1])
    two = load(big)
    assert len(low_threshold) == 1 and halves[0] is not None  # the two-core path was taken
    assert low_threshold[0].pid is None and low_threshold[0].fd is None  # child reaped
    one = _one_core(big, monkeypatch)
    assert len(one.events) > 3000 and len(one.counters.ts) and len(one.flows.ts)
    _same_trace(one, two)
    assert len(one.steps) > 3 and one.steps == two.steps


@pytest.mark.parametrize("child_fn", [lambda: 1 / 0, lambda: os._exit(0),
                                      lambda: {"names": "not what absorb expects"}])
def test_a_failing_child_falls_back_to_one_core(big, monkeypatch, low_threshold, child_fn):
    real_start = forked.start
    monkeypatch.setattr(forked, "start", lambda fn: real_start(child_fn))
    t = load(big)
    _same_trace(_one_core(big, monkeypatch), t)


def test_a_hanging_child_is_killed_and_the_parent_does_its_half(big, monkeypatch,
                                                                   low_threshold):
    monkeypatch.setattr(loaders, "TWO_CORES_MIN_WAIT_S", 0.5)
    real_start = forked.start
    started = []

    def hanging(fn):
        child = real_start(lambda: time.sleep(600))
        started.append(child)
        return child

    monkeypatch.setattr(forked, "start", hanging)
    t0 = time.monotonic()
    t = load(big)
    assert time.monotonic() - t0 < 30
    child = started[0]
    assert child.pid is None  # killed and reaped
    _same_trace(_one_core(big, monkeypatch), t)


def test_traces_the_fast_path_does_not_take_whole_load_on_one_core(big, tmp_path, monkeypatch,
                                                                   low_threshold):
    """B/E pairs across the middle, and an xprof-style trace: no child, or its work dropped;
    the result is one core's."""
    doc = json.loads(big.read_text())
    ev = doc["traceEvents"]
    mid = len(ev) // 2
    ev.insert(mid - 3, {"ph": "B", "pid": 1, "tid": 9, "ts": ev[mid]["ts"], "name": "span"})
    ev.append({"ph": "E", "pid": 1, "tid": 9, "ts": ev[-1].get("ts", 0) + 5})
    paired = tmp_path / "paired.json"
    paired.write_text(json.dumps(doc))
    t = load(paired)
    assert any(t.s(n) == "span" for n in t.events.name)
    _same_trace(_one_core(paired, monkeypatch), t)

    xprof_like = tmp_path / "xprof_like.json"
    events = [{"ph": "M", "pid": 7, "name": "process_name", "args": {"name": "/host:CPU"}}]
    events += [{"ph": "X", "pid": 7, "tid": 1, "ts": i, "dur": 1, "name": f"op{i % 50}",
                "args": {"group_id": i // 100}} for i in range(6000)]
    xprof_like.write_text(json.dumps({"traceEvents": events}))
    before = len(low_threshold)
    t = load(xprof_like)
    assert len(low_threshold) == before  # decided from the first look: no fork
    _same_trace(_one_core(xprof_like, monkeypatch), t)


def test_small_traces_never_fork(monkeypatch):
    calls = []
    monkeypatch.setattr(forked, "start", lambda fn: calls.append(fn))
    load(GPU)
    assert calls == []


def test_forked_returns_the_childs_value_or_none():
    assert forked.start(lambda: {"a": [1, 2]}).result(10) == {"a": [1, 2]}
    assert forked.start(lambda: 1 / 0).result(10) is None
    child = forked.start(lambda: time.sleep(600))
    assert child.result(0.2) is None and child.pid is None
