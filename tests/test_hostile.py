"""Hostile trace structure (issue 19), in process and small: nesting past the parsers' limits,
fields of the wrong JSON type, huge names, many rows, and the exact helpers that replaced
per-row loops (each checked against the plain computation it replaced). The same cases at
full size run through the CLIs in tests/test_corpus.py; their speed is measured by
``python -m benchmarks.hostile``, never here."""
from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from benchmarks import hostile
from compare.analysis.explanation import explain
from compare.load import LoadError, load, structure
from compare.load.chrome_json import MAX_DEPTH
from compare.model import intervals
from compare.model.events import MAX_NAME_CHARS, Events, Step, Strings, Trace
from compare.output.explain_json import to_json
from compare.output.explain_text import MAX_PROCESSES_SHOWN, to_text


def _write(tmp_path, pieces, name="t.json"):
    path = tmp_path / name
    hostile.write(path, pieces)
    return path


# --- nesting ---------------------------------------------------------------------------------

def test_200000_nested_lists_are_one_line_naming_the_depth(tmp_path):
    path = _write(tmp_path, hostile.nested_lists(200_000))
    assert path.stat().st_size < 500_000
    with pytest.raises(LoadError) as e:
        load(path)
    msg = str(e.value)
    assert "nested 199,999 levels deep" in msg and f"{MAX_DEPTH:,}" in msg, msg
    assert "never closes" not in msg and "\n" not in msg


def test_args_nested_100000_deep_skip_that_event_only(tmp_path):
    tr = load(_write(tmp_path, hostile.nested_args(100_000)))
    assert tr.col_str("name") == ["before", "after"]
    assert any("nested 100,001 levels deep" in w for w in tr.warnings), tr.warnings


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1])
def test_depth_at_the_limit(tmp_path, depth):
    """An event nesting up to the limit is read; one level more is skipped and named."""
    tr = load(_write(tmp_path, hostile.nested_args(depth - 1)))   # the event adds a level
    read = "deep" in tr.col_str("name")
    assert read == (depth <= MAX_DEPTH), (depth, tr.warnings)


def test_deep_args_msgspec_reads_but_orjson_refuses(tmp_path):
    """Found by fuzzing: msgspec decoded an event nested past orjson's limit, then the dict
    path (xprof-style args) re-parsed the chunk with orjson and raised."""
    deep = '{"a":' * 1024 + "1" + "}" * 1024
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":3,"dur":1,"name":"d",'
                    f'"args":{deep}}},{{"ph":"X","pid":0,"tid":1,"ts":0,"dur":5,"name":"op"}}]}}')
    tr = load(path)
    assert tr.col_str("name") == ["op"] and any("levels deep" in w for w in tr.warnings)


# --- wrong types -----------------------------------------------------------------------------

@pytest.mark.parametrize("field,words", [
    ("name", "name is an object, not a string"), ("pid", "pid is a string, not an integer"),
    ("tid", "tid is a list, not an integer"), ("ts", "ts is a string, not a number"),
    ("dur", "dur is a list, not a number"), ("ph", "ph is a list, not a phase letter")])
def test_wrong_field_types_are_named(tmp_path, field, words):
    with pytest.raises(LoadError) as e:
        load(_write(tmp_path, hostile.wrong_type(field)))
    msg = str(e.value)
    assert words in msg and "(the first: traceEvents[0])" in msg, msg
    assert "never closes" not in msg


def test_wrong_types_among_good_events_say_which_entry(tmp_path):
    path = tmp_path / "t.json"
    good = {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "name": "op"}
    path.write_text(json.dumps({"traceEvents": [good, good, dict(good, pid=True),
                                                dict(good, name=["a"])]}))
    tr = load(path)
    assert len(tr.events) == 2
    assert "skipped 1 complete events whose pid is a boolean, not an integer " \
           "(traceEvents[2])" in tr.warnings
    assert "skipped 1 complete events whose name is a list, not a string " \
           "(traceEvents[3])" in tr.warnings


@pytest.mark.parametrize("value,words", [({}, "an object"), ("x", "a string"), (3, "a number")])
def test_trace_events_of_the_wrong_type(tmp_path, value, words):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": value}))
    with pytest.raises(LoadError, match=f"'traceEvents' is {words}, not a list of events"):
        load(path)


def test_metadata_names_of_the_wrong_type_are_skipped(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": {"deep": [1]}}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "worker"}},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "name": "op"}]}))
    tr = load(path)
    assert tr.processes[1].name == "pid 1" and tr.lanes[(1, 1)] == "worker"
    assert any("process_name events whose args.name is an object" in w for w in tr.warnings)


# --- the event list's end --------------------------------------------------------------------

def test_list_whose_last_entry_is_no_object_still_closes(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":0,"dur":5,"name":"a"},'
                    '[1,[2]]],"displayTimeUnit":"ns"}')
    tr = load(path)
    assert tr.meta["displayTimeUnit"] == "ns"
    assert not any("never closes" in w for w in tr.warnings), tr.warnings
    assert any("not JSON objects" in w for w in tr.warnings)


def test_damage_in_a_big_list_costs_one_stretch(tmp_path, monkeypatch):
    """One garbled event among 20,000 read in small chunks: every other event read, one
    stretch skipped (each failed chunk used to be re-parsed at every later boundary)."""
    import functools

    from compare.load import chrome_json

    events = [json.dumps({"ph": "X", "pid": 1, "tid": 1, "ts": i, "dur": 1, "name": "op"})
              for i in range(20_000)]
    events[5000] = '{"ph": "X", "pid": 1\x00, "name": "x}, {"}'
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents":[' + ", ".join(events) + "]}")
    monkeypatch.setattr(chrome_json, "iter_chunks",
                        functools.partial(chrome_json.iter_chunks, chunk_bytes=1 << 12))
    tr = load(path)
    assert len(tr.events) == 19_999
    assert any(w.startswith("skipped 1 damaged stretch") for w in tr.warnings), tr.warnings


@pytest.mark.fuzz
@pytest.mark.parametrize("seed", range(4))
def test_top_level_values_match_a_json_parse(seed):
    """The numpy bracket scan against json: where each value ends, how deep it nests, where
    the list closes; blocks as small as one byte (strings, escapes and carries across
    blocks)."""
    rnd = random.Random(seed)

    def value(d=0):
        r = rnd.random()
        if d > 5 or r < 0.3:
            return rnd.choice([1, 'a,]}"\\', 'x\\"}, {', 2.5, None, "\\\\", "é,"])
        if r < 0.65:
            return [value(d + 1) for _ in range(rnd.randint(0, 3))]
        return {f"k{i},}}": value(d + 1) for i in range(rnd.randint(0, 3))}

    def depth(v):
        if isinstance(v, (list, dict)):
            inner = v.values() if isinstance(v, dict) else v
            return 1 + max([depth(x) for x in inner] or [0])
        return 0

    for _ in range(200):
        vals = [value() for _ in range(rnd.randint(1, 6))]
        text = ", ".join(json.dumps(v, ensure_ascii=rnd.random() < 0.5) for v in vals)
        buf = text.encode() + b"], 7"
        for block in (1, 3, 64, 1 << 20):
            structure.BLOCK_BYTES = block
            got = structure.top_level_values(buf, 0, len(buf))
            assert got.closed == len(text.encode())
            assert got.depth == [depth(v) for v in vals]
            starts = [0] + [e + 1 for e in got.ends[:-1]]
            assert [json.loads(buf[a:b]) for a, b in zip(starts, got.ends)] == vals
    structure.BLOCK_BYTES = 1 << 20


# --- long names ------------------------------------------------------------------------------

def _events(name: str, n: int) -> str:
    return ",".join(json.dumps({"ph": "X", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5,
                                "name": name}) for i in range(n))


#: Documents whose events list is not where a first look finds it: (head, tail) around a
#: list of n "real" events, and the warning the load must give (None: none).
_DOCUMENTS = {
    "a nested traceEvents key first":
        ('{"meta":{"traceEvents":[' + _events("decoy", 1) + ']},"traceEvents":[', "]}", None),
    "the key inside a string first (an escaped quote)":
        ('{"a\\"traceEvents":[1],"note":"x","traceEvents":[', "]}", None),
    "a list under another key after the events":
        ('{"traceEvents":[', '],"otherEvents":[' + _events("other", 50) + "]}", None),
    "a repeated key (JSON parsers keep the last)":
        ('{"traceEvents":[' + _events("first", 50) + '],"traceEvents":[', "]}",
         "2 top-level 'traceEvents' lists"),
    "ftrace text with brackets after the events":
        ('{"traceEvents":[', '],"systemTraceEvents":"<idle>-0 [000] d..2: x],{\\"a\\":1}"}',
         None),
}


@pytest.mark.parametrize("chunk", [1 << 20, 1 << 12])
@pytest.mark.parametrize("doc", sorted(_DOCUMENTS))
def test_the_events_list_is_the_top_level_member(tmp_path, monkeypatch, doc, chunk):
    """Only the top-level traceEvents list is read, whole, with no false damage warning,
    whether the list fits one chunk or spans many (found by the held-back hostile traces: a
    nested key was read instead of the real list, a repeated key mixed both lists)."""
    import functools

    from compare.load import chrome_json

    monkeypatch.setattr(chrome_json, "iter_chunks",
                        functools.partial(chrome_json.iter_chunks, chunk_bytes=chunk))
    head, tail, warning = _DOCUMENTS[doc]
    path = tmp_path / "t.json"
    path.write_text(head + _events("real", 2000) + tail)
    tr = load(path)
    assert tr.col_str("name") == ["real"] * 2000
    assert [w for w in tr.warnings if not warning or warning not in w] == [], tr.warnings
    assert not warning or any(warning in w for w in tr.warnings), tr.warnings


def test_an_empty_list_beside_events_elsewhere_says_it_is_empty(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents":[],"systemTraceEvents":[' + _events("x", 3000) + "]}")
    with pytest.raises(LoadError, match="its 'traceEvents' list is empty"):
        load(path)


def test_only_nested_lists_are_named_as_such(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"meta":{"traceEvents":[' + _events("x", 3) + "]}}")
    with pytest.raises(LoadError, match="all nested inside other values"):
        load(path)


def test_a_5_mb_name_is_cut_once_and_shown_short(tmp_path):
    tr = load(_write(tmp_path, hostile.long_name(5 << 20)))
    assert max(map(len, tr.strings.names)) == MAX_NAME_CHARS
    assert len(tr.processes[1].name) == MAX_NAME_CHARS and len(tr.lanes[(1, 1)]) == MAX_NAME_CHARS
    assert any(w.startswith("cut 3 names") and "5,242,880" in w for w in tr.warnings), \
        tr.warnings
    text = to_text(explain(tr))
    assert max(len(line) for line in text.splitlines()) <= 200
    assert "(5,242,880 characters)" in text and "x" * 200 not in text


def test_strings_table_cuts_in_bulk_and_one_by_one_alike():
    long = "y" * (MAX_NAME_CHARS + 10)
    a, b = Strings(), Strings()
    assert [a.names[i] for i in a.ids(["p", long, "q", long])] == \
        [b.names[b.id(s)] for s in ("p", long, "q", long)]
    assert a.cut == b.cut == 1 and a.longest == MAX_NAME_CHARS + 10


# --- many rows -------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(hostile.ROW_CASES))
def test_row_cases_explain_completely(tmp_path, case):
    tr = load(_write(tmp_path, hostile.ROW_CASES[case](3000)))
    e = explain(tr)
    text = to_text(e)
    assert max(len(line) for line in text.splitlines()) <= 200
    assert len(text) < 200_000
    json.dumps(to_json(e))


def test_many_processes_list_the_busiest_and_count_the_rest(tmp_path):
    e = explain(load(_write(tmp_path, hostile.many_pids(3000))))
    text = to_text(e)
    assert f"... and {3000 - MAX_PROCESSES_SHOWN} more processes with events" in text
    assert len(to_json(e)["pids"]["processes"]) == 3000


def test_busy_time_per_group_is_union_us_bit_for_bit():
    rng = np.random.default_rng(1)
    for _ in range(500):
        n, groups = int(rng.integers(0, 60)), int(rng.integers(1, 8))
        g = rng.integers(0, groups, n)
        ts = rng.choice([0.0, 1.0, 2.5, 3.0, 7.0], n) * rng.random() * 10 + rng.integers(0, 3, n)
        end = ts + rng.choice([0, 0.5, 1, 3, -1], n)
        lo, hi = 1.0, 9.0 + rng.random()
        want = [intervals.union_us(ts[g == k], end[g == k], lo, hi) for k in range(groups)]
        assert intervals.union_per_group(g, ts, end, lo, hi, groups).tolist() == want


def test_step_of_matches_the_per_step_masks():
    """Disjoint steps by binary search, overlapping ones by a sweep: the last listed step
    containing a time wins, as with one mask per step."""
    rng = np.random.default_rng(0)
    for _ in range(1000):
        steps = [Step(int(rng.integers(0, 5)), float(rng.integers(0, 20)),
                      float(rng.choice([0, 1, 2, 5, 10]))) for _ in range(rng.integers(0, 7))]
        tr = Trace("x", "chrome", Strings(), {}, {}, Events(0), steps=steps)
        ts = rng.integers(-2, 35, 50).astype(float) + rng.choice([0, 0.5], 50)
        want = np.full(len(ts), -1, np.int32)
        for st in steps:
            want[(ts >= st.ts) & (ts < st.ts + st.dur)] = st.num
        np.testing.assert_array_equal(tr.step_of(ts), want)


def test_copies_of_one_tensor_stay_linear(tmp_path):
    """A tensor copied 300 times with 300 readers: each reader waits for one copy (not
    90,000 copy edges); a few copies still link to every reader."""
    from compare.analysis import sequence, steps

    cpu = "/job:localhost/replica:0/task:0/device:CPU:0"
    gpu = "/job:localhost/replica:0/task:0/device:GPU:0"

    def trace(n):
        ev = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": f"{cpu} Compute"}},
              {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": f"{gpu} Compute"}},
              {"ph": "M", "name": "process_name", "pid": 2,
               "args": {"name": f"{gpu}/stream:7 Compute"}}]
        for i in range(n):
            t = i * 10
            ev += [{"ph": "X", "pid": 2, "tid": 0, "ts": t, "dur": 2, "name": "MEMCPYHtoD",
                    "args": {"name": f"edge_{i}_x", "op": "MEMCPYHtoD"}},
                   {"ph": "X", "pid": 1, "tid": 0, "ts": t + 3, "dur": 2, "name": "MatMul",
                    "args": {"name": f"mm{i}", "op": "MatMul", "input0": "x"}},
                   {"ph": "X", "pid": 2, "tid": 0, "ts": t + 6, "dur": 2, "name": "MatMul",
                    "args": {"name": f"mm{i}", "op": "MatMul"}}]
        path = tmp_path / f"copies{n}.json"
        path.write_text(json.dumps({"traceEvents": ev}))
        return load(path)

    for n, want in ((3, 9), (300, 300)):
        tr = trace(n)
        seq = sequence.build(tr, steps.choose(tr))
        assert seq.edge_counts["copy"] == want, (n, seq.edge_counts)


# --- names that are not text to show ---------------------------------------------------------

#: Names no output may show as they are: an escape sequence, NUL, a newline, a bidirectional
#: override, a lone surrogate (legal JSON: "\udc80"), C1 controls.
_UNSHOWABLE_NAMES = ["\x1b[2J\x1b[31mred", "a\x00b", "new\nline", "\u202eevil\u202c",
                     "\udc80lone", "c1\x85\x9bx", "ok \U0001F600 \u05e9\u05dc\u05d5\u05dd"]


def test_names_are_kept_showable(tmp_path):
    """Control characters, bidi overrides and lone surrogates in any name (event, args,
    process, thread, step marker) become visible escapes when loaded, so no output drives a
    terminal, breaks a table row or fails to encode (a lone surrogate crashed compare.run's
    merged trace); printable text, emoji and RTL letters included, is kept as it is."""
    import orjson

    ev = []
    for k, w in enumerate(_UNSHOWABLE_NAMES):
        ev += [{"ph": "M", "name": "process_name", "pid": k, "args": {"name": w}},
               {"ph": "M", "name": "thread_name", "pid": k, "tid": 1, "args": {"name": w}},
               {"ph": "X", "pid": k, "tid": 1, "ts": k * 10, "dur": 5, "name": w,
                "args": {"long_name": f"{w}/x:{w}", "group_id": k}},
               {"ph": "X", "pid": k, "tid": 2, "ts": k * 10, "dur": 8, "name": w,
                "args": {"step_num": k, "step_name": w, "group_id": k}}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": ev}))   # ensure_ascii: the JSON escapes
    tr = load(path)
    texts = (tr.strings.names + [p.name for p in tr.processes.values()] + list(tr.lanes.values())
             + [s.name for s in tr.steps])
    bad = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
    assert not [t for t in texts if bad.search(t)]
    orjson.dumps(texts)
    assert "\\x1b[2J\\x1b[31mred" in texts and "\\udc80lone" in texts
    assert _UNSHOWABLE_NAMES[-1] in texts
    text = to_text(explain(tr))
    assert not any(bad.search(line) for line in text.splitlines())
    assert "\\u202eevil\\u202c" in text
    orjson.dumps(to_json(explain(tr)))


# --- lists in explain's text -----------------------------------------------------------------

def _doc_of(events: list[dict]) -> list[str]:
    return ['{"traceEvents":', json.dumps(events), "}"]


def test_many_memory_series_list_the_largest(tmp_path):
    """A counter with 5,000 keys is 5,000 memory series: the largest listed, the rest
    counted (all of them were printed: 8.6 MB of text for 100,000 keys)."""
    from compare.output.explain_text import MAX_SERIES_SHOWN

    keys = {f"k{i}": i + 1 for i in range(5000)}
    tr = load(_write(tmp_path, _doc_of([
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "Allocators"}},
        {"ph": "X", "pid": 1, "tid": 0, "ts": 0, "dur": 50, "name": "MatMul",
         "args": {"name": "mm", "op": "MatMul"}},
        {"ph": "C", "pid": 0, "ts": 1, "name": "mem", "args": keys}])))
    e = explain(tr)
    text = to_text(e)
    assert text.count(": peak ") == MAX_SERIES_SHOWN and "mem.k4999: peak" in text
    assert f"... and {5000 - MAX_SERIES_SHOWN} more series" in text and len(text) < 20_000
    assert len(to_json(e)["pids"]["memory"]) == 5000


def test_many_gpus_list_the_busiest(tmp_path):
    from compare.output.explain_text import MAX_DEVICES_SHOWN

    ev = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
          {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 100, "name": "MatMul",
           "args": {"long_name": "m:MatMul"}}]
    for k in range(40):
        ev += [{"ph": "M", "name": "process_name", "pid": 10 + k,
                "args": {"name": f"/device:GPU:{k}"}},
               {"ph": "X", "pid": 10 + k, "tid": 1, "ts": k, "dur": k + 1, "name": f"kern{k}"}]
    text = to_text(explain(load(_write(tmp_path, _doc_of(ev)))))
    table = text[text.index("Per GPU"):text.index("Where the time went")]
    assert table.count(" kernels over ") == MAX_DEVICES_SHOWN
    assert "gpu:39:" in table and "gpu:0:" not in table
    assert f"... and {40 - MAX_DEVICES_SHOWN} more GPUs, each busy at most 24%" in table


def test_many_processes_without_events_are_counted(tmp_path):
    """2,000 processes whose events all fall outside the explained step, each of its own
    kind (its name is in its meaning): a few of them, the rest counted (each had lines of its
    own: 200 bytes a process, 40 MB for 200,000)."""
    from compare.output.explain_text import MAX_EMPTY_GROUPS

    ev = [{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 100, "name": "MatMul"}]
    for k in range(2000):
        ev += [{"ph": "M", "name": "process_name", "pid": 10 + k,
                "args": {"name": f"/host:worker{k}"}},
               {"ph": "X", "pid": 10 + k, "tid": 1, "ts": 500 + k, "dur": 1, "name": "late"}]
    ev.append({"ph": "X", "pid": 1, "tid": 1, "ts": 3000, "dur": 100, "name": "train",
               "args": {"step_num": 1}})
    ev.insert(0, {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 100, "name": "train",
                  "args": {"step_num": 0}})
    text = to_text(explain(load(_write(tmp_path, _doc_of(ev)))))
    assert len(text) < 30_000, len(text)
    assert len(re.findall(r"(?m)^  pid \d+  /host:worker", text)) == MAX_EMPTY_GROUPS
    assert f"... and {2000 - MAX_EMPTY_GROUPS} more processes without events in step" in text


# --- profiles --------------------------------------------------------------------------------

def _xspace(planes: int) -> bytes:
    from common.protos import XSpaceEvents

    sp = XSpaceEvents()
    for p in range(planes):
        pl = sp.planes.add(name="/host:CPU" if p == 0 else f"/device:GPU:{p}")
        pl.event_metadata[1].name = "MatMul"
        pl.lines.add(name="Stream #1").events.add(metadata_id=1)
    return sp.SerializeToString()


def test_plane_count_reads_the_wire_format():
    from common.protos import XSpace
    from compare.load.xplane import plane_count

    for n in (0, 1, 7, 300):
        blob = _xspace(n)
        sp = XSpace()
        sp.ParseFromString(blob)
        assert plane_count(blob) == len(sp.planes) == n
    assert plane_count(b"\xff" * 20) == 0 and plane_count(_xspace(3)[:-3]) == 3


def test_a_profile_with_too_many_planes_is_refused_before_converting(tmp_path):
    """xprof's converters grow faster than the planes: 6,000 took 48 s, 10,000 270 s."""
    from compare.load.xplane import MAX_PLANES

    path = tmp_path / "h.xplane.pb"
    path.write_bytes(_xspace(MAX_PLANES + 1))
    with pytest.raises(LoadError, match=f"holds {MAX_PLANES + 1:,} planes"):
        load(path)


# --- names built against our own patterns ----------------------------------------------------

def test_trailing_step_numbers_as_the_pattern_read_them():
    """Step rows' numbers from their names, read from the right (a regex search for a
    trailing number is quadratic in a long run of digits that does not end the name: 100
    such step rows took 20 s)."""
    from compare.load.step_marks import _trailing_int

    rnd = random.Random(3)
    for _ in range(3000):
        name = "".join(rnd.choice("ab 1_9#0") for _ in range(rnd.randint(0, 14)))
        m = re.search(r"(\d+)$", name)
        want = int(m.group(1)) if m and int(m.group(1)) < 1 << 31 else None
        assert _trailing_int(name) == want, name
    assert _trailing_int("1" * 4000 + "x") is None and _trailing_int("x" + "1" * 4000) is None


def test_compiler_events_by_name_as_the_one_pattern_read_them():
    from compare.vocabulary.ops import is_compiler_event

    old = re.compile(
        r"(Compiler::|^HLO passes|^XlaCompilationCache::Compile|^DeviceCompiler::Compile|"
        r"^Compile$|^JitCompiler::|^FusionCompiler::|^Lower\w*Pass$|^MlirBridge|^ConvertMlir|"
        r"^CompileGraph|^BuildXlaOps|^EncapsulateSubgraphs|^MarkForCompilation|"
        r"^XlaJitCompiled|^IrEmitter|^LLVM|^OptimizeHloModule|^RunHloPasses|^RunBackend|"
        r"^ObjectLoader|^ThunkEmitter)")
    names = ["CpuCompiler::RunBackend", "GpuCompiler::x", "xCompiler::", "Compile", "Compile\n",
             "Compiled", "LowerTFPass", "LowerPass", "Lowerx", "aLLVM", "LLVM IR", "HLO passes",
             "RunHloPasses", "MatMul", "", "(" * 4000, "Lower" + "a" * 4000]
    assert [is_compiler_event(n) for n in names] == [bool(old.search(n)) for n in names]


def test_long_and_table_breaking_names_in_report_md(tmp_path):
    """compare.run's report.md and printed verdict with ops named by 4,000 characters, a
    '|' and a backtick: every name cut (lines of 12,000 characters were written), table rows
    keep their cells, code spans close."""
    from compare.api import compare_traces
    from compare.fmt import shown_words
    from compare.output.report_md import _code

    names = ["(" * 4000, "a|b", "x`y", "grad/" * 800 + "MatMul"]
    paths = {}
    for k, scale in (("legacy", 1), ("modern", 2)):
        ev = []
        for s in range(3):
            t = s * 10_000
            ev.append({"ph": "X", "pid": 1, "tid": 1, "ts": t, "dur": 9000, "name": "train",
                       "args": {"step_num": s, "group_id": s}})
            for j, n in enumerate(names):
                ev.append({"ph": "X", "pid": 1, "tid": 2, "ts": t + 10 + j * 2000,
                           "dur": 1000 * scale, "name": n,
                           "args": {"long_name": f"{n}:MatMul", "group_id": s}})
        paths[k] = tmp_path / f"{k}.json"
        paths[k].write_text(json.dumps({"traceEvents": ev}))
    rep = compare_traces(paths["legacy"], paths["modern"], out=tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert max(len(line) for line in md.splitlines()) < 2000
    rows = [ln for ln in md.splitlines() if ln.startswith("| `")]
    assert rows and all(len(re.findall(r"(?<!\\)\|", ln)) == 9 for ln in rows), rows
    assert _code("a|b") == "`a\\|b`" and _code("x`y") == "`x'y`"
    assert "...(4,000 chars)`" in md   # cut, its code span closed
    said = " ".join([rep.words["comparison"], *rep.words["sides"].values()])
    assert max(map(len, shown_words(said).split())) < 200   # as compare.run prints it


def test_per_step_statistics_sparse_equal_dense(monkeypatch):
    """Past DENSE_CELLS_MAX the statistics come from the values present alone; they must be
    the dense matrix's, zeros for missing steps, negative values and ties included."""
    from compare.model import per_step

    rng = np.random.default_rng(3)
    for _ in range(300):
        n, width = int(rng.integers(1, 9)), int(rng.integers(1, 12))
        steps = [{k: float(rng.choice([-2.0, -0.5, 0.0, 1.0, 1.0, 3.5, 7.0]))
                  for k in rng.choice(width, int(rng.integers(0, width + 1)), replace=False)}
                 for _ in range(n)]
        keys = list(range(width))
        dense = per_step.stats(steps, keys)
        monkeypatch.setattr(per_step, "DENSE_CELLS_MAX", 0)
        sparse = per_step.stats(steps, keys)
        monkeypatch.undo()
        for d, s in zip(dense[1:], sparse[1:]):
            assert np.allclose(d, s), (steps, d, s)


def test_many_xla_clusters_fused_into_one_row_keep_its_name_short(tmp_path):
    """Ops the other side ran outside XLA, against thousands of clusters that do not say
    what they hold: one fused row, named by a few clusters and their count (the name of all
    of them joined went into every matched event of the merged trace: 232 MB at 5,000)."""
    from compare.api import compare_traces
    from tests.conftest import ROOT

    path = _write(tmp_path, hostile.xla_clusters(3000))
    rep = compare_traces(path, ROOT / "tests/fixtures/tf1_cpu_xla.timeline.json",
                         out=tmp_path / "out")
    fused = [r for r in rep.comparison.ops_diff if r.status == "fused"]
    assert fused and all(len(r.op) < 200 for r in fused), [r.op[:300] for r in fused]
    # all 1,500 but those the other side also runs by name (its cluster_0, cluster_1)
    assert any(re.search(r"\+\.\.\. \(1,4\d\d clusters\)$", r.op) for r in fused), fused
    assert (tmp_path / "out" / "merged_trace.json.gz").stat().st_size < 2_000_000


def test_cluster_owners_name_each_ops_cluster_or_all_of_them():
    from compare.analysis.opdiff import _cluster_owners

    clusters = [f"cluster_{i}" for i in range(5)]
    owners, joint = _cluster_owners(clusters, {"cluster_1": {"a", "b"}, "cluster_3": {"b"}})
    assert (owners, joint) == ({"a": "cluster_1", "b": "cluster_1"}, "")
    owners, joint = _cluster_owners(clusters, {})
    assert owners == {} and joint == "cluster_0+cluster_1+cluster_2+... (5 clusters)"
    assert _cluster_owners(clusters[:2], {})[1] == "cluster_0+cluster_1"
