"""Big traces (issue 25): the vectorised helpers against brute force, and the merged trace's
rows bounded (the busiest kept, the rest summed in one row, said in words)."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from compare.model.lanes import unique_pairs
from compare.model.nesting import Nesting
from compare.output import merged_trace


@pytest.mark.parametrize("seed", range(20))
def test_unique_pairs_equals_numpys_row_unique(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    big = seed % 2 == 0   # spans too wide for one int64 key: the lexsort path
    hi = (1 << 62) if big else 50
    a = rng.integers(-hi, hi, n)
    b = rng.integers(-5, 5, n) if seed % 3 else rng.integers(-hi, hi, n)
    pairs, inv, counts = unique_pairs(a, b)
    want, want_inv, want_counts = np.unique(np.stack([a, b], axis=1), axis=0,
                                            return_inverse=True, return_counts=True)
    assert (pairs == want).all() and (inv == want_inv.reshape(-1)).all()
    assert (counts == want_counts).all()


def test_unique_pairs_empty():
    pairs, inv, counts = unique_pairs(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert pairs.shape == (0, 2) and not len(inv) and not len(counts)


def _outermost_by_walking(parent, flags):
    out = []
    for i in range(len(parent)):
        best, j = -1, i
        while j >= 0:
            best = j if flags[j] else best
            j = parent[j]
        out.append(best)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_outermost_flagged_ancestor_equals_walking_up(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    parent = np.array([-1 if i == 0 or rng.random() < 0.1 else int(rng.integers(0, i))
                       for i in range(n)])
    flags = rng.random(n) < 0.3
    nest = Nesting(parent, parent * 0.0, parent >= -1, parent * 0, np.arange(n))
    assert nest.outermost(flags).tolist() == _outermost_by_walking(parent, flags)


def test_outermost_on_a_chain_deeper_than_any_level_loop():
    n = 100_000   # each event inside the one before: 17 doubling passes, not 100,000 levels
    parent = np.arange(-1, n - 1)
    flags = np.zeros(n, bool)
    flags[[7, 500, 99_000]] = True
    nest = Nesting(parent, parent * 0.0, parent >= -1, parent * 0, np.arange(n))
    out = nest.outermost(flags)
    assert (out[:7] == -1).all() and (out[7:] == 7).all()


def _trace_with_processes(tmp_path, n_pids: int, busiest: list[int]):
    """A timeline with ``n_pids`` processes of one op each; those in ``busiest`` run 100x
    longer than the others."""
    events = []
    for p in range(n_pids):
        events.append({"ph": "M", "name": "process_name", "pid": p,
                       "args": {"name": f"/job:w/replica:0/task:{p}/device:CPU:0 Compute"}})
        events.append({"ph": "X", "pid": p, "tid": 0, "ts": 1000 + p, "name": "MatMul",
                       "dur": 500.0 if p in busiest else 5.0,
                       "args": {"name": f"layer/MatMul_{p}", "op": "MatMul"}})
    path = tmp_path / "many.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _merged(tmp_path, path):
    from compare.analysis.analyse import analyse
    from compare.load import load

    att = analyse(load(path)).attribution
    out = tmp_path / "merged.json.gz"
    summary = merged_trace.write(out, {"legacy": att}, labels={"legacy": "A"})
    return summary, json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]


def test_merged_trace_folds_processes_past_the_limit(tmp_path):
    n = merged_trace.MAX_PROCESSES_SHOWN + 36
    busiest = list(range(30, 30 + merged_trace.MAX_PROCESSES_SHOWN))
    summary, events = _merged(tmp_path, _trace_with_processes(tmp_path, n, busiest))
    names = [e["args"]["name"] for e in events if e["name"] == "process_name"]
    kept = [nm for nm in names if "Compute" in nm]
    assert len(kept) == merged_trace.MAX_PROCESSES_SHOWN
    assert {int(nm.split("task:")[1].split("/")[0]) for nm in kept} == set(busiest)
    want = f"{n} processes: the {merged_trace.MAX_PROCESSES_SHOWN} busiest shown, the rest " \
           f"summed in one row"
    assert summary["folded"] == {"A": want}
    assert f"merged:A {want}" in names
    ops = [e for e in events if e["ph"] == "X" and e.get("cat") != "step"
           and "stage" in e["args"] and "stage_basis" in e["args"]]
    assert len(ops) == merged_trace.MAX_PROCESSES_SHOWN   # folded ops not written one by one
    fold_pid = next(e["pid"] for e in events if e["name"] == "process_name"
                    and e["args"]["name"].startswith("merged:A 100"))
    band = [e for e in events if e["ph"] == "X" and e["pid"] == fold_pid]
    # the folded processes' ops (pids 0-29 and 94-99, 5 us each, one per us) in one row:
    # their busy time, [1000, 1034) and [1094, 1104)
    assert sum(e["dur"] for e in band) == pytest.approx(34 + 10)


def test_merged_trace_under_the_limit_folds_nothing(tmp_path):
    summary, events = _merged(tmp_path, _trace_with_processes(tmp_path, 5, [1]))
    assert "folded" not in summary
    assert sum(e["name"] == "process_name" for e in events) == 5


def test_repeated_runs_drop_their_empty_rows_too(tmp_path):
    """A run written 3 times: each copy a Compute row with events and a Tensors row without;
    the 2 later copies of both are dropped (4 rows), the distinct processes kept."""
    from compare.load import load

    events = []
    for copy in range(3):
        base = 10 * copy
        for pid, name in ((base + 1, "/cpu:0 Compute"), (base + 2, "/cpu:0 Tensors")):
            events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
        events += [{"ph": "X", "pid": base + 1, "tid": 0, "ts": 100 + k * 10, "dur": 5,
                    "name": "MatMul", "args": {"name": f"m{k}", "op": "MatMul"}}
                   for k in range(3)]
    events.append({"ph": "M", "name": "process_name", "pid": 99, "args": {"name": "other"}})
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    tr = load(path)
    assert sorted(tr.processes) == [1, 2, 99]
    assert any("3 times" in w and "the 4 repeated rows" in w for w in tr.warnings)


def test_inputs_of_all_is_every_events_inputs_in_order():
    from compare.model.events import Events

    rng = np.random.default_rng(1)
    for _ in range(100):
        n = int(rng.integers(1, 30))
        ev = Events(n)
        lens = rng.integers(0, 4, n)
        ev.input_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        ev.input_ids = rng.integers(0, 100, int(lens.sum())).astype(np.int32)
        idx = rng.integers(0, n, int(rng.integers(0, 10)))
        want = [x for i in idx for x in ev.inputs_of(int(i)).tolist()]
        assert ev.inputs_of_all(idx).tolist() == want
