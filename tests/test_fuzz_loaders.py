"""Property-based fuzzing of the trace loaders: whatever bytes come in, ``compare.load.load``
either raises our one clean error (:class:`compare.load.LoadError`, an InputError) or returns
a consistent :class:`compare.model.events.Trace`.

Inputs: random JSON shaped like traces (every ``ph``, odd pids, NaN/Infinity, huge numbers,
nested junk), arbitrary bytes, and real traces of our own legacy run (timeline.py JSON, xprof's
trace JSON and the .xplane.pb), mutated (truncated, bytes flipped, inserted, deleted,
duplicated) and re-wrapped in gzip (whole, truncated, several members, trailing junk).

``FUZZ_EXAMPLES`` sets the examples per JSON test (default 500: 2,000 JSON/bytes cases and 20
xplanes, about half a minute in CI); the long campaign recorded in BUILD.md ran with
``FUZZ_EXAMPLES=3000``. Under CI (``CI`` set) the runs are derandomized, so CI is
reproducible; locally each run explores new cases.
"""
from __future__ import annotations

import gzip
import json
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compare.load import LoadError, load
from compare.model.events import CATEGORIES, EVENT_COLUMNS, STRING_COLUMNS

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "500"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                derandomize=bool(os.environ.get("CI")),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

# --- the property ----------------------------------------------------------------------------


def check_trace(tr) -> None:
    """Everything an analysis may rely on in a loaded trace."""
    ev = tr.events
    n = len(ev)
    for col, dt in EVENT_COLUMNS.items():
        a = getattr(ev, col)
        assert a.dtype == dt and a.shape == (n,), col
    assert len(ev.input_ptr) == n + 1 and ev.input_ptr[0] == 0
    assert (np.diff(ev.input_ptr) >= 0).all() and ev.input_ptr[-1] == len(ev.input_ids)
    nstr = len(tr.strings)
    for col in STRING_COLUMNS:
        a = getattr(ev, col)
        assert ((a >= 0) & (a < nstr)).all(), col
    assert ((ev.input_ids >= 0) & (ev.input_ids < nstr)).all()
    assert ((ev.category >= 0) & (ev.category < len(CATEGORIES))).all()
    assert np.isfinite(ev.ts).all() and np.isfinite(ev.dur).all()
    assert (ev.dur >= 0).all()
    assert set(np.unique(ev.pid).tolist()) <= set(tr.processes)
    assert n or len(tr.counters.ts)
    c, f = tr.counters, tr.flows
    assert len(c.pid) == len(c.name) == len(c.ts) == len(c.value)
    assert len(f.id) == len(f.phase) == len(f.pid) == len(f.tid) == len(f.ts) == len(f.name)
    starts = [s.ts for s in tr.steps]
    assert starts == sorted(starts)
    assert all(math.isfinite(s.ts) and math.isfinite(s.dur) and s.dur >= 0 for s in tr.steps)
    assert set(np.unique(ev.step).tolist()) <= {s.num for s in tr.steps} | {-1}
    assert all(isinstance(w, str) and "\n" not in w for w in tr.warnings)
    assert tr.format in ("timeline", "xprof", "chrome")
    tr.self_time()  # the nesting walk must cope with whatever was loaded


def load_or_clean_error(path) -> None:
    try:
        tr = load(path)
    except LoadError as e:
        msg = str(e)
        assert msg and "\n" not in msg and str(path) in msg, msg
        event(f"LoadError: {msg[len(str(path)) + 2:].split(';')[0].split('(')[0][:40].strip()}")
        return
    check_trace(tr)
    event(f"loaded {'with' if tr.warnings else 'without'} warnings, "
          f"{'no' if not len(tr.events) else 'some'} events")


# --- inputs ----------------------------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
_junk = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
#: numbers at the edges: JSON allows any magnitude, orjson reads up to 2**64-1, Python's json
#: (the salvage path) reads NaN, Infinity and 1e999 too
_edge = st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -1e308, 2 ** 31, 2 ** 53 + 1,
                         2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 2 ** 64, -(2 ** 63) - 1, 10 ** 30])
_small_int = st.integers(-2, 6)
_time = st.one_of(st.integers(0, 10 ** 7), st.floats(-1e3, 1e9), st.integers(-5, 5))
_dur = st.one_of(st.integers(0, 10 ** 5), st.floats(0, 1e5), st.integers(-5, 5))
_names = st.sampled_from(["_SOURCE", "DecodeJpeg", "_XlaCompile", "_XlaRun", "process_name",
                          "thread_name", "process_sort_index", "SessionRun", "Iterator::Map",
                          "QueueDequeueV2", "$python", "legacy", "fusion.3", ""])
_args = st.fixed_dictionaries({}, optional={
    "name": st.one_of(_names, st.text(max_size=8)), "op": _names,
    "input0": st.sampled_from(["a:0", "^b", "c", "", "DecodeJpeg"]), "input1": _junk,
    "long_name": st.sampled_from(["a/b:Add", ":", "x", "s/DecodeJpeg:DecodeJpeg", "a:b:c"]),
    "hlo_op": st.sampled_from(["fusion.1", ""]), "hlo_module": st.sampled_from(["m", ""]),
    "group_id": st.one_of(_small_int, _edge, st.sampled_from(["3", "x", None])),
    "step_num": st.one_of(_small_int, _edge, st.sampled_from(["1", "x", None, 2.5])),
    "step_name": _names, "sort_index": _small_int,
})
_PHASES = ["X"] * 16 + list("BEMCstfNODiIbenRPSTFc") + ["", "XX"]


@st.composite
def _event(draw) -> dict:
    """A plausible event (mostly ``ph: X`` with the fields it needs; a number at the edges one
    time in ten), then up to three fields dropped or replaced by junk of any JSON type."""
    def num(valid):
        return draw(_edge) if draw(st.integers(0, 9)) == 0 else draw(valid)

    e = {"ph": draw(st.sampled_from(_PHASES)), "pid": num(_small_int),
         "tid": num(_small_int), "ts": num(_time), "dur": num(_dur),
         "name": draw(_names), "args": draw(_args)}
    if e["ph"] in "stf":
        e["id"] = draw(st.one_of(_small_int, st.sampled_from(["0x1f", "x", ""])))
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(sorted(e) + ["cat", "bp"]))
        if draw(st.booleans()):
            e.pop(key, None)
        else:
            e[key] = draw(_junk)
    return e


_doc = st.one_of(
    st.fixed_dictionaries({"traceEvents": st.lists(_event(), min_size=1, max_size=30)},
                          optional={"displayTimeUnit": _scalars, "metadata": _junk}),
    st.fixed_dictionaries({"traceEvents": st.lists(_event(), min_size=1, max_size=30)}),
    st.lists(_event(), min_size=1, max_size=30),
    _junk,
)


@st.composite
def _well_formed(draw) -> list:
    """A timeline.py-shaped event list where every event is well-formed (so the loader's
    typed fast path takes it), with one number in ten at the edges."""
    def num(valid):
        return draw(_edge) if draw(st.integers(0, 9)) == 0 else draw(valid)

    def event(ph):
        base = {"ph": ph, "pid": num(st.integers(0, 3)), "ts": num(st.integers(0, 10 ** 6))}
        if ph == "X":
            return dict(base, tid=num(st.integers(0, 3)), dur=num(st.integers(0, 1000)),
                        name=draw(_names), args={"name": "s/op", "op": draw(_names),
                                                 "input0": "a:0"})
        if ph == "C":
            return dict(base, name="cpu", args={"cpu": num(st.integers(0, 10 ** 9))})
        if ph in "stf":
            return dict(base, tid=num(st.integers(0, 3)), id=num(st.integers(0, 50)), name="f")
        if ph == "N":
            return {"ph": "N", "pid": num(st.integers(0, 3)), "id": "0x1", "ts": 1}
        return {"ph": "M", "pid": num(st.integers(0, 3)), "name": "process_name",
                "args": {"name": "/job:localhost/replica:0/task:0/device:CPU:0 Compute"}}

    return [event(ph) for ph in draw(st.lists(st.sampled_from(list("XXXXCstfNM")),
                                              min_size=1, max_size=40))]


@st.composite
def _mutated(draw, data: bytes) -> bytes:
    """``data`` with a few random edits: truncation, byte flips, insertions, deletions,
    duplicated ranges."""
    buf = bytearray(data)
    for op in draw(st.lists(st.sampled_from(["cut", "flip", "insert", "delete", "dup"]),
                            max_size=4)):
        n = len(buf)
        i = draw(st.integers(0, n))
        if op == "cut":
            del buf[i:]
        elif op == "flip" and n:
            buf[min(i, n - 1)] = draw(st.integers(0, 255))
        elif op == "insert":
            buf[i:i] = draw(st.binary(max_size=8) | st.sampled_from(
                [b"{", b"}", b"]", b",", b'"', b"\\", b"\xff", b"\x00", b"NaN", b"1e999"]))
        elif op == "delete":
            del buf[i:i + draw(st.integers(1, 64))]
        elif op == "dup":
            j = draw(st.integers(i, min(n, i + 200)))
            buf[j:j] = buf[i:j]
    return bytes(buf)


@st.composite
def _wrapped(draw, data: bytes) -> bytes:
    """Plain, or gzip in one of the ways gzip files really come: whole, cut short, several
    members, trailing junk."""
    how = draw(st.sampled_from(["plain", "plain", "gzip", "gzip_cut", "members", "junk"]))
    if how == "plain":
        return data
    z = gzip.compress(data, mtime=0)
    if how == "gzip":
        return z
    if how == "gzip_cut":
        return z[:draw(st.integers(0, len(z)))]
    if how == "members":
        k = draw(st.integers(0, len(data)))
        return gzip.compress(data[:k], mtime=0) + gzip.compress(data[k:], mtime=0)
    return z + draw(st.binary(min_size=1, max_size=16))


@pytest.fixture(scope="session")
def fuzz_seeds(legacy_run):
    """Small slices of real traces of our legacy run: the timeline.py JSON of the first
    (compiling) step and xprof's trace_viewer JSON, each as its metadata events, 50 complete
    events from the start or the middle, and a few events of every other kind it has."""
    from common.profiling import xplane_files, xplane_to_trace_json

    out, _ = legacy_run
    seeds = []
    for doc in (json.loads((out / "timeline_first.json").read_text()),
                json.loads(xplane_to_trace_json(xplane_files(out)))):
        events = doc["traceEvents"]
        by_ph: dict = {}
        for e in events:
            by_ph.setdefault(e.get("ph"), []).append(e)
        meta, xs = by_ph.pop("M", [])[:12], by_ph.pop("X")
        others = [e for group in by_ph.values() for e in group[:8]]  # flows, counters, ...
        for start in (0, len(xs) // 2):
            part = dict(doc, traceEvents=meta + xs[start:start + 50] + others)
            seeds.append(json.dumps(part).encode())
    return seeds


@pytest.fixture(scope="session")
def fuzz_file(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz") / "trace.bin"


# --- the tests -------------------------------------------------------------------------------

@FUZZ
@given(doc=_doc, indent=st.sampled_from([None, 1]), data=st.data())
def test_generated_trace_json(fuzz_file, doc, indent, data):
    raw = json.dumps(doc, indent=indent, allow_nan=True, ensure_ascii=data.draw(st.booleans()))
    fuzz_file.write_bytes(data.draw(_wrapped(raw.encode("utf-8", "surrogatepass"))))
    load_or_clean_error(fuzz_file)


def test_found_by_fuzzing_object_event_with_a_list_pid(fuzz_file):
    # an object event whose pid is a list crashed the typed path (unhashable), not a LoadError
    fuzz_file.write_text(json.dumps({"traceEvents": [
        {"ph": "N", "pid": 1e308, "tid": 1, "ts": 0, "name": "_SOURCE", "args": {}},
        {"ph": "N", "pid": [], "tid": 1, "ts": 0, "name": "_SOURCE", "args": {}}]}))
    with pytest.raises(LoadError, match="no usable trace events"):
        load(fuzz_file)


@FUZZ
@given(events=_well_formed(), wrap=st.booleans())
def test_well_formed_timelines_with_edge_numbers(fuzz_file, events, wrap):
    doc = {"traceEvents": events} if wrap else events
    fuzz_file.write_bytes(json.dumps(doc, allow_nan=True).encode())
    load_or_clean_error(fuzz_file)


@FUZZ
@given(data=st.data())
def test_mutated_real_traces(fuzz_seeds, fuzz_file, data):
    seed = data.draw(st.sampled_from(fuzz_seeds))
    fuzz_file.write_bytes(data.draw(_wrapped(data.draw(_mutated(seed)))))
    load_or_clean_error(fuzz_file)


@FUZZ
@given(raw=st.binary(max_size=300), data=st.data())
def test_arbitrary_bytes(fuzz_file, raw, data):
    prefix = data.draw(st.sampled_from([b"", b"{", b"[", b' {"traceEvents": [', b"\x1f\x8b"]))
    fuzz_file.write_bytes(data.draw(_wrapped(prefix + raw)))
    load_or_clean_error(fuzz_file)


def test_real_seeds_load_cleanly(fuzz_seeds, fuzz_file):
    """The seeds themselves are good traces: the fuzz starts from something that loads."""
    for seed in fuzz_seeds:
        fuzz_file.write_bytes(seed)
        tr = load(fuzz_file)
        check_trace(tr)
        assert len(tr.events) > 20 and not tr.warnings


@settings(FUZZ, max_examples=max(EXAMPLES // 25, 20))
@given(data=st.data())
def test_mutated_real_xplane(legacy_run, fuzz_file, data):
    """The real .xplane.pb with bytes flipped or cut, through the protobuf parser and xprof's
    C++ converter (fewer examples: each conversion takes a fraction of a second)."""
    from common.profiling import xplane_files

    (xp,) = xplane_files(legacy_run[0])
    raw = bytearray(open(xp, "rb").read())
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del raw[data.draw(st.integers(1, len(raw))):]
    path = fuzz_file.with_name("fuzz.xplane.pb")
    path.write_bytes(bytes(raw))
    load_or_clean_error(path)
