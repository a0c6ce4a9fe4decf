"""Per-step attribution (compare/attribution.py) on real traces: wall time adds up to the step,
own time is never below a stage's CPU time, CPU time is never below a stage's wall share, and
waits are only counted when nothing works."""
from __future__ import annotations

import numpy as np
import pytest

from compare.analysis.attribution import attribute
from compare.analysis.mapping import map_stages
from compare.load import load
from compare.vocabulary.labels import LABEL, LABELS, PIPELINE

pytestmark = pytest.mark.slow


def _check(tr) -> None:
    smap = map_stages(tr)
    att = attribute(tr, smap)
    assert att.steps
    # (xla_run is left out: a thread blocked in BlockUntilReady waits in xla_run, which gets
    # wall time when nothing else works, and no CPU time)
    work = sorted(PIPELINE | {LABEL["xla_compile"]})
    for st in att.steps:
        assert st.wall.sum() == pytest.approx(st.dur, rel=1e-9)
        # own time: each segment's time inside the step, once
        e, t0, t1 = att.segments
        inside = np.clip(t1, st.ts, st.ts + st.dur) - np.clip(t0, st.ts, st.ts + st.dur)
        assert st.ev_self.sum() == pytest.approx(inside.sum(), rel=1e-9)
        assert (st.ev_self >= -1e-9).all() and 0 <= st.input_us <= st.dur + 1e-6
        assert (st.wall >= -1e-9).all() and (st.cpu >= -1e-9).all()
        # a stage's wall share never exceeds the thread time spent on it
        assert (st.cpu[work] + 1e-6 >= st.wall[work]).all(), {
            LABELS[i]: (st.cpu[i], st.wall[i]) for i in work}
        assert (st.wall_estimated <= st.wall + 1e-6).all()
        # per-event shares add up to the labels' totals
        assert sum(st.by_event_wall.values()) + st.wall[LABEL["idle"]] <= st.dur * (1 + 1e-9)


@pytest.mark.parametrize("which", ["profile", "timeline.json", "timeline_first.json"])
def test_invariants_on_the_legacy_xla_run(legacy_run, which):
    out, _ = legacy_run
    _check(load(out if which == "profile" else out / which))


def test_invariants_on_the_legacy_reference_run(legacy_run_noxla):
    _check(load(legacy_run_noxla[0]))


def test_a_session_waiting_for_its_executor_is_not_counted_as_work(legacy_run):
    out, _ = legacy_run
    tr = load(out)
    smap = map_stages(tr)
    session = tr.mask(name="SessionRun")
    assert session.any() and smap.wait[session].all()
    att = attribute(tr, smap)
    waits = set(np.flatnonzero(session).tolist())
    for st in att.steady:
        # the Python thread sits in SessionRun all step long, yet that is no work: SessionRun
        # earns no CPU time, and wall time only for instants when no other thread was working
        # (how many such instants there are depends on the machine's load, so no share is fixed)
        assert sum(st.by_event_cpu.get(i, 0.0) for i in waits) == 0.0
        assert sum(st.by_event_wall.get(i, 0.0) for i in waits) < st.dur
        assert st.wall[sorted(PIPELINE | {LABEL["xla_run"]})].sum() > 0
    # steps are marked on the thread that calls session.run: the step's own (critical) thread
    lanes = {att.critical_lane[s.num] for s in att.steps}
    runs = {(int(tr.events.pid[i]), int(tr.events.tid[i])) for i in np.flatnonzero(session)}
    assert len(lanes) == 1 and lanes <= runs


def test_input_wait_is_counted_on_the_steps_own_thread(jit_profile):
    tr = load(jit_profile)
    smap = map_stages(tr)
    att = attribute(tr, smap)
    waits = np.flatnonzero(tr.mask(name="IteratorGetNextOp::DoCompute"))
    assert len(waits) and smap.label[waits].tolist() == [LABEL["input_wait"]] * len(waits)
    assert all(st.input_us > 0 for st in att.steps)
    assert all(st.input_us < st.dur for st in att.steps)


@pytest.mark.parametrize("fixture", ["tf2_gpu_xla.timeline.json", "tf1_gpu.timeline.json"])
def test_gpu_stream_all_is_not_counted_twice(fixture):
    """timeline.py repeats every GPU kernel on ``stream:all`` and every copy on ``memcpy``; the
    per-stream rows count, each kernel and copy once."""
    from pathlib import Path

    from compare.analysis.rows import duplicate_pids

    tr = load(Path(__file__).parent / "fixtures" / fixture)
    smap = map_stages(tr)
    att = attribute(tr, smap)
    ev = tr.events
    every = [p.pid for p in tr.processes.values() if p.kind == "stream"]
    union = [p.pid for p in tr.processes.values() if p.kind == "stream" and "stream:all" in p.name]
    assert union and len(every) > len(union)
    repeats = sorted(duplicate_pids(tr))
    assert set(union) <= set(repeats)
    on_streams = np.isin(ev.pid, every) & ~np.isin(ev.pid, repeats)
    for st in att.steps:
        inside = (ev.ts >= st.ts) & (ev.ts + ev.dur <= st.ts + st.dur)
        for lab in np.unique(smap.label[inside & on_streams]):
            mine = inside & (smap.label == lab) & ~np.isin(ev.pid, repeats)
            assert st.cpu[lab] == pytest.approx(ev.dur[mine].sum(), rel=1e-9), LABELS[lab]
        assert st.wall.sum() == pytest.approx(st.dur, rel=1e-9)
