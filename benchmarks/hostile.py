"""``python -m benchmarks.hostile [--rows 10000,100000,1000000] [--cases ...] [--tool compare]
[--json FILE]``: how fast ``compare.explain`` (or ``compare.run`` with the trace on one side)
gets through traces of hostile *structure*, row counts growing tenfold, to show the time grows
linearly with the trace (issue 19).

Each case is a generator of a legal (or refused) Chrome-trace JSON document of about N rows:
every event on its own pid, or on its own thread of one pid; N distinct names; N flow arrows;
N steps; N named threads; a timeline whose nodes repeat with dataflow inputs; one huge event
name; nesting far beyond any parser's depth limit; fields of the wrong JSON type. The same
generators make the structure cases of the bad-input corpus (``tests/corpus/make_corpus.py``)
and of the loader fuzzing, at small sizes.

Each measurement runs ``python -m compare.explain FILE`` (``--tool compare``: ``python -m
compare.run --legacy FILE --modern`` a small TF1 timeline fixture) in a fresh subprocess and
reports the
wall time, events per second, peak RSS and the exit code; the growth ratio per tenfold row
count is printed beside it (10 means linear).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from common import atomic

ROOT = Path(__file__).resolve().parent.parent


def _doc(events: Iterator[str], head: str = '{"traceEvents":[', tail: str = "]}") -> Iterator[str]:
    yield head
    first = True
    for e in events:
        yield e if first else "," + e
        first = False
    yield tail


def _x(pid, tid, ts, dur, name, args: str | None = None) -> str:
    a = f',"args":{args}' if args is not None else ""
    return (f'{{"ph":"X","pid":{pid},"tid":{tid},"ts":{ts},"dur":{dur},'
            f'"name":{json.dumps(name)}{a}}}')


def _meta(what: str, pid: int, name: str, tid: int | None = None) -> str:
    t = f',"tid":{tid}' if tid is not None else ""
    return f'{{"ph":"M","name":"{what}","pid":{pid}{t},"args":{{"name":{json.dumps(name)}}}}}'


# --- the cases: each yields the document's text in pieces ---------------------------------

def many_pids(n: int) -> Iterator[str]:
    """``n`` events, each on a process of its own, every process named."""
    def events():
        for i in range(n):
            yield _meta("process_name", i, f"/host:worker_{i}")
            yield _x(i, 1, i * 10, 5, "op")
    return _doc(events())


def many_tids(n: int) -> Iterator[str]:
    """``n`` events on one process, each on a thread of its own, threads named by role
    (python, tf_data, reader, XLA codegen, eigen: the names the analyses look for)."""
    roles = ("python", "tf_data_iterator", "tf_reader_thread_ReaderReadV2", "xla-cpu-codegen",
             "tf_Compute", "Eigen")
    def events():
        yield _meta("process_name", 1, "/host:CPU")
        for i in range(n):
            yield _meta("thread_name", 1, f"{roles[i % len(roles)]}/{i}", i)
            yield _x(1, i, i * 10, 5, "ExecutorState::Process" if i % 2 else "MatMul",
                     '{"long_name":"m/MatMul:MatMul"}' if i % 2 == 0 else None)
    return _doc(events())


def many_names(n: int) -> Iterator[str]:
    """``n`` events on a handful of threads, every one with a name (and op) of its own."""
    def events():
        for i in range(n):
            yield _x(1, i % 4, i * 10, 8, f"op_{i}", f'{{"long_name":"scope_{i}/op_{i}:Op{i}"}}')
    return _doc(events())


def many_steps(n: int) -> Iterator[str]:
    """``n`` marked steps (xprof's step markers), each with an op and an input wait inside,
    plus one event spanning them all on every one of 50 threads."""
    def events():
        yield _meta("process_name", 1, "/host:CPU")
        for t in range(50):
            yield _x(1, 100 + t, 0, n * 100, "ExecutorState::Process")
        for i in range(n):
            yield _x(1, 1, i * 100, 90, "train",
                     f'{{"step_num":{i},"step_name":"{i}","group_id":{i}}}')
            yield _x(1, 2, i * 100 + 5, 40, "IteratorGetNext",
                     f'{{"long_name":"it:IteratorGetNext","group_id":{i}}}')
            yield _x(1, 2, i * 100 + 50, 30, "MatMul", f'{{"long_name":"m:MatMul","group_id":{i}}}')
    return _doc(events())


def flow_storm(n: int) -> Iterator[str]:
    """``n`` flow arrows between ops on two threads (every op the end of one), plus ``n``
    arrows sharing a single id."""
    def events():
        for i in range(n):
            yield _x(1, 1, i * 10, 5, "producer")
            yield _x(1, 2, i * 10 + 6, 3, "consumer")
            yield f'{{"ph":"s","pid":1,"tid":1,"ts":{i * 10 + 5},"id":{i},"name":"f"}}'
            yield f'{{"ph":"f","bp":"e","pid":1,"tid":2,"ts":{i * 10 + 6},"id":{i},"name":"f"}}'
            yield f'{{"ph":"t","pid":1,"tid":2,"ts":{i * 10 + 7},"id":-1,"name":"same"}}'
    return _doc(events())


def timeline_storm(n: int) -> Iterator[str]:
    """A timeline.py trace (``args {name, op, input0..}``) of one session run whose few nodes
    repeat ``n`` times over: a producer consumed by everything, Send/Recv pairs, GPU copies and
    kernels, so the dataflow has hot nodes with ``n`` events each."""
    cpu = "/job:localhost/replica:0/task:0/device:CPU:0"
    gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
    def events():
        for pid, name in enumerate((f"{cpu} Compute", f"{gpu} Compute",
                                    f"{gpu}/stream:7 Compute", f"{gpu}/memcpy Compute")):
            yield _meta("process_name", pid, name)
        yield _x(0, 0, 0, 1, "NoOp", '{"name":"_SOURCE","op":"NoOp"}')
        for i in range(n):
            t = 10 + i * 10
            k = i % 5
            if k == 0:
                yield _x(0, 0, t, 4, "RandomUniform", '{"name":"src","op":"RandomUniform"}')
            elif k == 1:
                yield _x(0, 1, t, 4, "Mul", '{"name":"mul","op":"Mul","input0":"src",'
                                            '"input1":"^src","input2":"mul:1"}')
            elif k == 2:
                yield _x(0, 0, t, 2, "_Send", '{"name":"send/_1","op":"_Send","input0":"mul"}')
            elif k == 3:
                yield _x(1, 0, t, 2, "_Recv", '{"name":"send/_2","op":"_Recv"}')
                yield _x(2, 0, t + 1, 3, "MatMul", '{"name":"mm","op":"MatMul"}')
            else:
                yield _x(1, 0, t, 3, "MatMul", '{"name":"mm","op":"MatMul","input0":"send/_2",'
                                               '"input1":"edge_1_mul"}')
                yield _x(3, 0, t + 1, 2, "MEMCPYHtoD", '{"name":"edge_1_mul","op":"MEMCPYHtoD"}')
    return _doc(events())


def long_name(n_bytes: int) -> Iterator[str]:
    """A few events, one of them named by a string of ``n_bytes`` characters without a
    space; its process and thread named by strings of a fiftieth of that (at least 5,000)."""
    big = "x" * n_bytes
    row = "y" * max(n_bytes // 50, 5000)
    def events():
        yield _meta("process_name", 1, "/host:" + row)
        yield _meta("thread_name", 1, row, 1)
        yield _x(1, 1, 0, 50, big)
        yield _x(1, 1, 60, 10, "small")
    return _doc(events())


def nested_lists(depth: int) -> Iterator[str]:
    """``traceEvents`` holding ``depth`` nested empty lists (a 200,000-deep one is 400 KB)."""
    yield '{"traceEvents":'
    yield "[" * depth
    yield "]" * depth
    yield "}"


def nested_args(depth: int) -> Iterator[str]:
    """Good events around one whose ``args`` nest ``depth`` objects deep."""
    def events():
        yield _x(1, 1, 0, 10, "before")
        yield _x(1, 1, 20, 10, "deep", '{"a":' * depth + "1" + "}" * depth)
        yield _x(1, 1, 40, 10, "after")
    return _doc(events())


#: field -> a wrong value for it (what a buggy exporter writes)
WRONG_TYPES = {"name": {"a": 1}, "pid": "1", "tid": [1], "ts": "0", "dur": [5], "args": [1, 2],
               "ph": ["X"]}


def wrong_type(field: str, n: int = 3) -> Iterator[str]:
    """``n`` complete events whose ``field`` has the wrong JSON type (see
    :data:`WRONG_TYPES`), and nothing else."""
    def events():
        for i in range(n):
            e = {"ph": "X", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5, "name": "op"}
            e[field] = WRONG_TYPES[field]
            yield json.dumps(e)
    return _doc(events())


# --- the held-back structures (round 2) ---------------------------------------------------

_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def _tl(pid, tid, ts, dur, op, node, inputs=()) -> str:
    """A timeline.py complete event: args ``{name, op, input0..}``."""
    a = {"name": node, "op": op, **{f"input{k}": v for k, v in enumerate(inputs)}}
    return json.dumps({"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": op,
                       "args": a})


def _tl_rows() -> Iterator[str]:
    yield _meta("process_name", 0, "Allocators")
    yield _meta("process_name", 1, f"{_CPU} Compute")
    yield _tl(1, 0, 0, 1, "NoOp", "_SOURCE")


def deep_nest(n: int) -> Iterator[str]:
    """``n`` events on one thread, each inside the one before (nesting ``n`` deep)."""
    def events():
        yield _meta("process_name", 1, "/host:CPU")
        for i in range(n):
            yield _x(1, 1, i, 2 * (n - i), f"op{i % 10}", f'{{"long_name":"s{i % 10}:Op{i % 10}"}}')
    return _doc(events())


def dataflow(n: int) -> Iterator[str]:
    """A timeline whose dataflow is hostile: a third of the rows feed one node (fan-in: one
    event with ``n/3`` inputs), one node feeds a third (fan-out), the last third is one
    dependency cycle, every node of it also its own input."""
    k = max(n // 3, 1)
    def events():
        yield from _tl_rows()
        for i in range(k):
            yield _tl(1, 1 + i % 4, 10 + i, 1, "Const", f"c{i}")
        yield _tl(1, 0, 20 + k, 50, "AddN", "sum", [f"c{i}" for i in range(k)])
        yield _tl(1, 0, 80 + k, 5, "RandomUniform", "src")
        for i in range(k):
            yield _tl(1, 1 + i % 4, 90 + k + i, 1, "Mul", f"m{i}", ["src", "src:1", "^src"])
        for i in range(k):
            yield _tl(1, 5, 100 + 2 * k + i, 1, "Add", f"ring{i}",
                      [f"ring{(i + 1) % k}", f"ring{i}"])
    return _doc(events())


def be_storm(n: int) -> Iterator[str]:
    """B/E events: half of the rows ``B`` then ``E`` nested ``n/4`` deep on one thread, a
    quarter ``E`` with no ``B``, a quarter ``B`` never closed."""
    k = max(n // 4, 1)
    def events():
        yield _meta("process_name", 1, "/host:CPU")
        for i in range(k):
            yield f'{{"ph":"B","pid":1,"tid":1,"ts":{i},"name":"b{i % 10}","args":{{"k":{i}}}}}'
        for i in range(k):
            yield f'{{"ph":"E","pid":1,"tid":1,"ts":{k + i},"args":{{"e":{i}}}}}'
        for i in range(k):
            yield f'{{"ph":"E","pid":1,"tid":{2 + i % 7},"ts":{i}}}'
            yield f'{{"ph":"B","pid":1,"tid":9,"ts":{i},"name":"open{i % 10}"}}'
    return _doc(events())


def meta_storm(n: int) -> Iterator[str]:
    """Metadata storm: one process and one thread renamed ``n/4`` times each, their sort
    indexes rewritten as often, ``n/4`` more processes that hold nothing but a name."""
    k = max(n // 4, 1)
    def events():
        for i in range(k):
            yield _meta("process_name", 1, f"/host:CPU v{i}")
            yield _meta("thread_name", 1, f"tf_Compute/{i}", 1)
            yield f'{{"ph":"M","name":"process_sort_index","pid":1,"args":{{"sort_index":{-i}}}}}'
        for i in range(k):
            yield _meta("process_name", 1000 + i, f"empty process {i}")
        yield _x(1, 1, 0, 100, "MatMul", '{"long_name":"m:MatMul"}')
        yield _x(1, 1, 200, 100, "MatMul", '{"long_name":"m:MatMul"}')
    return _doc(events())


def counter_series(n: int) -> Iterator[str]:
    """Memory counters of a timeline: three samples whose args hold ``n/3`` keys each (``n``
    series), beside a few ops."""
    keys = ",".join(f'"alloc_{i}":{i + 1}' for i in range(max(n // 3, 1)))
    def events():
        yield from _tl_rows()
        yield _tl(1, 0, 10, 50, "MatMul", "mm")
        for t in range(3):
            yield f'{{"ph":"C","name":"mem","pid":0,"ts":{t * 20},"args":{{{keys}}}}}'
    return _doc(events())


def xla_clusters(n: int) -> Iterator[str]:
    """A timeline running ``n/2`` distinct XLA clusters twice each (the first call long)."""
    def events():
        yield from _tl_rows()
        for i in range(max(n // 2, 1)):
            yield _tl(1, 0, 10 + i * 100, 80, "_XlaLaunch", f"cluster_{i}", ["x"])
            yield _tl(1, 1, 100 + i * 100, 5, "_XlaLaunch", f"cluster_{i}", ["x"])
    return _doc(events())


#: Names no output may show as they are (escape sequences, NUL, newline, bidi overrides,
#: a lone surrogate, C1 controls), and printable ones that must stay (emoji, RTL letters).
UNSHOWABLE = ["\x1b[2J\x1b[31mred", "a\x00b", "new\nline", "\u202eevil\u202c", "\udc80lone",
              "c1\x85\x9b", "\U0001F600 \u05e9\u05dc\u05d5\u05dd", "e" + "\u0301" * 30]


def unshowable_names(n: int) -> Iterator[str]:
    """``n`` events whose names, long names, processes, threads and step names mix the
    :data:`UNSHOWABLE` strings (written as JSON escapes, as any tool would)."""
    def events():
        for p, w in enumerate(UNSHOWABLE):
            yield json.dumps({"ph": "M", "name": "process_name", "pid": p,
                              "args": {"name": w + " Compute"}})
            yield json.dumps({"ph": "M", "name": "thread_name", "pid": p, "tid": 1,
                              "args": {"name": w}})
        for i in range(n):
            w = UNSHOWABLE[i % len(UNSHOWABLE)] + str(i % 100)
            yield json.dumps({"ph": "X", "pid": i % len(UNSHOWABLE), "tid": 1, "ts": i * 10,
                              "dur": 8, "name": w, "args": {"long_name": f"{w}/x:{w}"}})
    return _doc(events())


def key_decoys(n: int) -> Iterator[str]:
    """``n`` events in a document whose events list is hard to find: a key holding
    ``"traceEvents":[`` inside a string, a nested ``traceEvents`` list, a first top-level list
    repeated by a second (JSON parsers keep the last: the ``n`` real events), and a list of
    other events after it."""
    def events(name, k):
        for i in range(k):
            yield _x(1, 1 + i % 4, i * 10, 8, name)
    head = ('{"a\\"traceEvents":[1],"meta":{"traceEvents":[' + _x(9, 9, 0, 1, "decoy")
            + "]}," + "".join(_doc(events("first", 100), '"traceEvents":[', "],"))
            + '"traceEvents":[')
    return _doc(events("real", n), head,
                '],"otherEvents":[' + ",".join(_x(2, 1, i, 1, "other") for i in range(100))
                + "]}")


def empty_beside(n: int) -> Iterator[str]:
    """An empty ``traceEvents`` list, ``n`` events under another key after it."""
    return _doc((_x(1, 1, i * 10, 8, "op") for i in range(n)),
                '{"traceEvents":[],"systemTraceEvents":[', "]}")


def many_planes(planes: int) -> bytes:
    """An ``.xplane.pb`` (the declared subset of XSpace) of one host plane and ``planes - 1``
    GPU planes, one kernel each."""
    from common.protos import XSpaceEvents  # lazy: protobuf, only for this case

    sp = XSpaceEvents()
    for p in range(planes):
        pl = sp.planes.add(name="/host:CPU" if p == 0 else f"/device:GPU:{p - 1}")
        pl.event_metadata[1].name = "MatMul" if p == 0 else f"kernel{p}"
        pl.lines.add(name="tf_Compute" if p == 0 else "Stream #1").events.add(metadata_id=1)
    return sp.SerializeToString()


#: case -> (generator of N rows, what N means); the row cases of the benchmark.
ROW_CASES: dict[str, Callable[[int], Iterator[str]]] = {
    "many_pids": many_pids, "many_tids": many_tids, "many_names": many_names,
    "many_steps": many_steps, "flow_storm": flow_storm, "timeline_storm": timeline_storm,
    "deep_nest": deep_nest, "dataflow": dataflow, "be_storm": be_storm,
    "meta_storm": meta_storm, "counter_series": counter_series, "xla_clusters": xla_clusters,
    "unshowable_names": unshowable_names, "key_decoys": key_decoys,
}


def write(path: Path, pieces: Iterator[str]) -> int:
    """Write a generated document as it is generated (atomically; never held whole, so this
    process stays small: a child's peak RSS starts from its parent's); return its size."""
    with atomic.atomic_open(path, "w") as f:
        for p in pieces:
            f.write(p)
    return path.stat().st_size


# --- measuring -----------------------------------------------------------------------------

#: The small real-shaped trace compare.run sets against the hostile one (``--tool compare``).
OTHER_SIDE = ROOT / "tests" / "fixtures" / "tf1_cpu_xla.timeline.json"


def _command(tool: str, path: Path, out: Path) -> list[str]:
    if tool == "explain":
        return ["-m", "compare.explain", str(path)]
    return ["-m", "compare.run", "--legacy", str(path), "--modern", str(OTHER_SIDE),
            "--out", str(out)]


def _measure(tool: str, path: Path, timeout: float) -> dict:
    """``python -m compare.explain path`` (or ``compare.run`` with it on one side) in a fresh
    process: wall s, peak RSS (``wait4``), exit code, the last line of stderr; killed after
    ``timeout`` s."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    with tempfile.TemporaryDirectory(prefix="bench-hostile-out-") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *_command(tool, path, Path(out) / "run")],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        killer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if wall >= timeout:
        return {"wall_s": None, "timeout_s": timeout, "exit": None}
    last = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
    return {"wall_s": wall, "exit": proc.returncode, "peak_rss_bytes": usage.ru_maxrss * 1024.0,
            "cpu_s": usage.ru_utime + usage.ru_stime, "stderr": last[0][:300]}


def run(cases: list[str], rows: list[int], folder: Path, timeout: float,
        tool: str = "explain") -> dict:
    out: dict[str, list[dict]] = {}
    for case in cases:
        out[case] = []
        for n in rows:
            path = folder / f"{case}_{n}.json"
            size = write(path, ROW_CASES[case](n))
            r = _measure(tool, path, timeout)
            r.update(rows=n, file_bytes=size)
            r["events_per_s"] = n / r["wall_s"] if r["wall_s"] else None
            if r["wall_s"]:   # the cost per 10^5 rows: flat across sizes means linear
                r["s_per_1e5_rows"] = r["wall_s"] * 1e5 / n
                r["cpu_s_per_1e5_rows"] = r["cpu_s"] * 1e5 / n
                r["rss_per_1e5_rows_bytes"] = r["peak_rss_bytes"] * 1e5 / n
                r["rss_over_file"] = r["peak_rss_bytes"] / size
            out[case].append(r)
            path.unlink()
            print(_line(case, r, out[case]), flush=True)
    return out


def _line(case: str, r: dict, done: list[dict]) -> str:
    if r["wall_s"] is None:
        return f"{case:>15} {r['rows']:>9,} rows: still running after {r['timeout_s']:.0f} s"
    prev = done[-2] if len(done) > 1 and done[-2]["wall_s"] else None
    growth = (f", x{r['wall_s'] / prev['wall_s']:.1f} the time of {prev['rows']:,} rows"
              if prev else "")
    return (f"{case:>15} {r['rows']:>9,} rows, {r['file_bytes'] / 1e6:6.1f} MB: "
            f"{r['wall_s']:6.2f} s (CPU {r['cpu_s']:.2f} s), {r['events_per_s']:>9,.0f} rows/s, "
            f"peak RSS {r['peak_rss_bytes'] / 1e6:5.0f} MB ({r['rss_over_file']:.1f}x the file); "
            f"per 10^5 rows {r['s_per_1e5_rows']:.2f} s (CPU {r['cpu_s_per_1e5_rows']:.2f} s) "
            f"and {r['rss_per_1e5_rows_bytes'] / 1e6:.0f} MB; exit {r['exit']}{growth}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.hostile", description=(
        "How fast compare.explain (or compare.run, with the trace on one side) gets through "
        "generated traces of hostile structure, row counts growing tenfold, to show that "
        "the time grows linearly with the trace."))
    ap.add_argument("--rows", default="10000,100000,1000000",
                    help="row counts, comma separated")
    ap.add_argument("--cases", default=",".join(ROW_CASES), help="cases, comma separated")
    ap.add_argument("--tool", choices=("explain", "compare"), default="explain",
                    help="compare.explain on the trace, or compare.run with it on one side")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--json", dest="json_out", help="also write the numbers to this file")
    a = ap.parse_args(argv)
    cases = [c for c in a.cases.split(",") if c]
    unknown = set(cases) - set(ROW_CASES)
    if unknown:
        ap.error(f"unknown case(s) {', '.join(sorted(unknown))}; cases: {', '.join(ROW_CASES)}")
    rows = [int(x) for x in a.rows.split(",") if x]
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as d:
        r = run(cases, rows, Path(d), a.timeout, a.tool)
    result = {"tool": a.tool, "cases": r, "loadavg": os.getloadavg(), "cpus": os.cpu_count()}
    if a.json_out:
        atomic.write_text(a.json_out, json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
