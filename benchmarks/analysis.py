"""``python -m benchmarks.analysis [--events N] [--json FILE]``: how fast ``compare.explain``
loads and explains a big timeline, against a bare ``json.load`` of the same file.

Generates a timeline.py-style trace of N events (default 1,000,000, about 150 MB) into a temp
folder: per op a complete event with ``args {name, op, input0..}``, the tensor object events
(``N``/``O``/``D``), allocator counters, dataflow arrows (``s``/``t``), ``_SOURCE`` nodes that
start each session run, on a CPU device and a GPU with its stream rows. Then, each in a fresh
subprocess (so the peak RSS is that of the work alone: ``getrusage`` in the child, plus
the peak of the loader's forked second-core helper; ``os.wait4`` for ``json.load``):

- ``load + explain``: ``compare.load.load`` then ``compare.analysis.explanation.explain`` and both
  renderings; the child reports its own load and explain times;
- ``json.load``: the standard library parsing the same file, nothing else.

Targets (issue 5): 100 MB/s or more for load + explain, peak RSS at most 3x the file.
``--json FILE`` writes the numbers (at least ``mb_per_s``, ``peak_rss_over_file``,
``vs_json_load`` = our load+explain time / json.load's time, below 1 means faster). CPU
times are reported beside wall times: on a shared machine the wall time of a child includes
waiting for a core.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import atomic

ROOT = Path(__file__).resolve().parent.parent
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"
OPS = ["Conv2D", "BiasAdd", "Relu", "MatMul", "Add", "Mul", "Reshape", "Cast", "Slice",
       "ConcatV2", "Transpose", "Sum", "Mean", "RandomUniform", "_XlaRun", "_XlaCompile"]


def generate(path: Path, n_events: int, seed: int = 0) -> int:
    """Write a timeline.py-style trace with about ``n_events`` events; return the count."""
    rnd = random.Random(seed)
    pids = {"Allocators": 0, f"{CPU} Compute": 1, f"{CPU} Tensors": 2, f"{GPU} Compute": 3,
            f"{GPU} Tensors": 4, "/device:GPU:0/stream:all Compute": 5,
            "/device:GPU:0/stream:7 Compute": 6}
    count = 0
    with atomic.atomic_open(path, "w") as f:  # a kept trace is never half written
        f.write('{"traceEvents":[\n')
        first = True

        def put(line: str) -> None:
            nonlocal first, count
            f.write(line if first else ",\n" + line)
            first = False
            count += 1

        for name, pid in pids.items():
            put(f'{{"name":"process_name","ph":"M","pid":{pid},"args":{{"name":"{name}"}}}}')
        t, op_id, flow_id, obj_id = 1_600_000_000_000_000, 0, 0, 0
        mem = {"cpu": 0, "GPU_0_bfc": 0}
        recent: list[str] = []
        lanes_end = [0, 0, 0, 0]
        ops_per_step = 900
        while count < n_events:
            if op_id % ops_per_step == 0:
                t += 400
                for pid in (1, 3):
                    put(f'{{"ph":"X","cat":"Op","name":"NoOp","pid":{pid},"tid":0,"ts":{t},'
                        f'"dur":3,"args":{{"name":"_SOURCE","op":"NoOp"}}}}')
                recent.clear()
            op_id += 1
            op = rnd.choice(OPS)
            gpu = op in ("Conv2D", "BiasAdd", "Relu", "MatMul") and rnd.random() < 0.7
            pid, tpid = (3, 4) if gpu else (1, 2)
            node = f"block_{op_id % 97}/layer_{op_id % 13}/{op}_{op_id}"
            start = t + rnd.randint(1, 30)
            dur = rnd.randint(5, 60) if gpu else int(rnd.expovariate(1 / 120)) + 2
            lane = next((k for k, e in enumerate(lanes_end) if e <= start), 0)
            lanes_end[lane] = start + dur
            inputs = rnd.sample(recent, min(len(recent), rnd.randint(0, 3)))
            args = "".join(f',"input{k}":"{name}{":1" if k == 2 else ""}"'
                           for k, name in enumerate(inputs))
            put(f'{{"ph":"X","cat":"Op","name":"{op}","pid":{pid},"tid":{lane},"ts":{start},'
                f'"dur":{dur},"args":{{"name":"{node}","op":"{op}"{args}}}}}')
            if gpu:
                k0 = start + dur + rnd.randint(2, 40)
                kd = rnd.randint(20, 900)
                for spid in (5, 6):
                    put(f'{{"ph":"X","cat":"Op","name":"{op}","pid":{spid},"tid":0,"ts":{k0},'
                        f'"dur":{kd},"args":{{"name":"{node}","op":"{op}"}}}}')
            if inputs and rnd.random() < 0.25:
                put(f'{{"ph":"s","cat":"DataFlow","name":"{inputs[0]}","pid":1,"tid":0,'
                    f'"ts":{start - 1},"id":{flow_id}}}')
                put(f'{{"ph":"t","cat":"DataFlow","name":"{inputs[0]}","pid":{pid},'
                    f'"tid":{lane},"ts":{start},"id":{flow_id}}}')
                flow_id += 1
            obj_id += 1
            nbytes = rnd.choice((4, 256, 4096, 65536, 1048576))
            alloc = "GPU_0_bfc" if gpu else "cpu"
            put(f'{{"ph":"N","cat":"Tensor","name":"{node}","pid":{tpid},"tid":{lane},'
                f'"ts":{start},"id":{obj_id}}}')
            put(f'{{"ph":"O","cat":"Tensor","name":"{node}","pid":{tpid},"tid":{lane},'
                f'"ts":{start + dur - 1},"id":{obj_id},"args":{{"snapshot":{{"tensor_description":'
                f'"dtype: DT_FLOAT shape {{ dim {{ size: {nbytes // 4} }} }} allocation_description '
                f'{{ requested_bytes: {nbytes} allocator_name: \\"{alloc}\\" }}"}}}}}}')
            put(f'{{"ph":"D","cat":"Tensor","name":"{node}","pid":{tpid},"tid":0,'
                f'"ts":{start + dur + 50},"id":{obj_id}}}')
            mem[alloc] += nbytes
            put(f'{{"ph":"C","cat":"Memory","name":"{alloc}","pid":0,"ts":{start},'
                f'"args":{{"{alloc}":{mem[alloc]}}}}}')
            mem[alloc] -= nbytes
            put(f'{{"ph":"C","cat":"Memory","name":"{alloc}","pid":0,"ts":{start + dur + 50},'
                f'"args":{{"{alloc}":{mem[alloc]}}}}}')
            recent = (recent + [node])[-8:]
            t = start + max(1, dur // 3)
        f.write("\n]}\n")
    return count


# --------------------------------------------------------------------------------------------
# measuring, each in its own process

def _child_explain(path: str) -> None:
    clock, cpu = time.perf_counter, time.process_time
    t0 = clock()
    # lazy: the child's import time is part of what this measures
    from compare.analysis.explanation import explain
    from compare.load import load
    from compare.output.explain_json import to_json
    from compare.output.explain_text import to_text

    def children_cpu() -> float:  # the loader's forked helper, once reaped
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    t1, c1, k1 = clock(), cpu(), children_cpu()
    trace = load(path)
    t2, c2, k2 = clock(), cpu(), children_cpu()
    e = explain(trace)
    json.dumps(to_json(e))
    to_text(e)
    t3, c3 = clock(), cpu()
    print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "explain_s": t3 - t2,
                      "load_cpu_s": c2 - c1 + k2 - k1, "load_helper_cpu_s": k2 - k1,
                      "explain_cpu_s": c3 - c2,
                      "self_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0,
                      "helper_maxrss_bytes":
                          resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024.0,
                      "events": len(trace.events), "warnings": trace.warnings}))


def _child_json_load(path: str) -> None:
    t0, c0 = time.perf_counter(), time.process_time()
    with open(path, "rb") as f:
        json.load(f)
    print(json.dumps({"json_load_s": time.perf_counter() - t0,
                      "json_load_cpu_s": time.process_time() - c0}))


def _pss_bytes(pid: int) -> int:
    """Proportional set size of ``pid`` and its descendants (Linux; 0 where unreadable): each
    shared page counted once across them, split among its sharers."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            total += next(int(line.split()[1]) for line in f if line.startswith("Pss:")) * 1024
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(k) for k in f.read().split()]
    except (OSError, StopIteration, ValueError):
        return total
    return total + sum(_pss_bytes(k) for k in kids)


def _measure(args: list[str], sample_pss: bool = False, root: Path = ROOT
             ) -> tuple[dict, float, float, float]:
    """Run ``python -m benchmarks.analysis <args>``; return (its JSON line, wall s, peak RSS
    in bytes of that child (with its own waited-for children: the larger of the two), and if
    ``sample_pss`` the peak PSS of the child and its descendants together, sampled every 10 ms,
    else 0). Sampling walks the child's page tables, which slows its own memory growth a
    little: only for our loader, whose helper process needs it."""
    # our code first; a PYTHONPATH given stays after it (a test plants a slowdown that way)
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="2")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.analysis", *args], cwd=root,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak_pss = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.010):
            peak_pss[0] = max(peak_pss[0], _pss_bytes(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    if sample_pss:
        sampler.start()
    out = proc.stdout.read()
    err = proc.stderr.read()
    done.set()
    if sample_pss:
        sampler.join()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"benchmark child failed ({proc.returncode}): {err.decode()[-2000:]}")
    return (json.loads(out.decode().strip().splitlines()[-1]), wall, usage.ru_maxrss * 1024.0,
            float(peak_pss[0]))


def _cpu(ours: dict) -> float:
    return ours["load_cpu_s"] + ours["explain_cpu_s"]


def run(n_events: int, folder: Path, rounds: int = 1, also: tuple[Path, ...] = ()) -> dict:
    """Generate the trace, then measure ours and ``json.load`` alternately ``rounds`` times;
    each side's numbers are those of its round of least CPU time (the one other jobs on the
    machine disturbed least), and ``ratios_cpu`` lists every round's own ratio. ``also``:
    other checkouts of this project (e.g. ``git worktree add DIR COMMIT``) measured in the
    same rounds on the same file, each with its own ``benchmarks.analysis`` child."""
    path = folder / "timeline.json"
    t0 = time.perf_counter()
    count = generate(path, n_events)
    gen_s = time.perf_counter() - t0
    size = path.stat().st_size
    mine, theirs, others = [], [], {str(r): [] for r in also}
    for _ in range(rounds):
        mine.append(_measure(["--child-explain", str(path)], sample_pss=True))
        theirs.append(_measure(["--child-json-load", str(path)]))
        for r in also:
            others[str(r)].append(_measure(["--child-explain", str(path)], root=Path(r))[0])
    ratios = [_cpu(m[0]) / t[0]["json_load_cpu_s"] for m, t in zip(mine, theirs)]
    ours, ours_wall, _, ours_pss = min(mine, key=lambda m: _cpu(m[0]))
    # The loader parses a big trace's second half in a forked helper (compare.load.forked) that
    # shares the file's buffer with it. Peak RSS summed over both counts the shared pages twice
    # (an upper bound); their peak PSS together counts every page once (what the target means).
    ours_rss = ours["self_maxrss_bytes"] + ours["helper_maxrss_bytes"]
    base, base_wall, base_rss, _ = min(theirs, key=lambda t: t[0]["json_load_cpu_s"])
    work = ours["load_s"] + ours["explain_s"]
    return {
        "events": count, "file_bytes": size, "file_mb": size / 1e6, "generate_s": gen_s,
        "load_s": ours["load_s"], "explain_s": ours["explain_s"], "import_s": ours["import_s"],
        "process_wall_s": ours_wall,
        "mb_per_s": size / 1e6 / work,
        "mb_per_s_cpu": size / 1e6 / (ours["load_cpu_s"] + ours["explain_cpu_s"]),
        "load_cpu_s": ours["load_cpu_s"], "explain_cpu_s": ours["explain_cpu_s"],
        "mb_per_s_whole_process": size / 1e6 / ours_wall,
        "peak_rss_bytes": ours_pss or ours_rss, "peak_rss_over_file": (ours_pss or ours_rss) / size,
        "peak_rss_measure": "peak PSS of the process and its loader helper together, sampled "
                            "every 10 ms" if ours_pss else "peak RSS of both summed (no /proc)",
        "peak_rss_summed_bytes": ours_rss, "peak_rss_summed_over_file": ours_rss / size,
        "peak_rss_helper_bytes": ours["helper_maxrss_bytes"],
        "load_helper_cpu_s": ours["load_helper_cpu_s"],
        "json_load_s": base["json_load_s"], "json_load_cpu_s": base["json_load_cpu_s"],
        "json_load_process_wall_s": base_wall,
        "json_load_peak_rss_bytes": base_rss, "json_load_rss_over_file": base_rss / size,
        "vs_json_load": work / base["json_load_s"],
        "vs_json_load_cpu": (ours["load_cpu_s"] + ours["explain_cpu_s"]) / base["json_load_cpu_s"],
        "loaded_events": ours["events"], "warnings": ours["warnings"],
        "rounds": rounds, "ratios_cpu": ratios, "ratio_cpu_median": statistics.median(ratios),
        "also": {r: {"load_cpu_s": best["load_cpu_s"], "explain_cpu_s": best["explain_cpu_s"],
                     "vs_json_load_cpu": _cpu(best) / base["json_load_cpu_s"]}
                 for r, runs in others.items() for best in [min(runs, key=_cpu)]},
        "loadavg": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.analysis", description=(
        "How fast compare.explain loads and explains a big generated timeline.py trace, "
        "against a bare json.load of the same file: seconds and peak memory of each, in "
        "fresh processes."))
    ap.add_argument("--events", type=int, default=1_000_000, help="events to generate")
    ap.add_argument("--json", dest="json_out", help="also write the numbers to this file")
    ap.add_argument("--keep", help="write the trace into this folder and keep it")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure both sides this many times, alternately; each side's best "
                         "(least CPU) round is reported")
    ap.add_argument("--also", default="",
                    help="other checkouts of this project (folders, comma separated) measured "
                         "in the same rounds on the same file")
    ap.add_argument("--max-ratio", type=float, default=None,
                    help="exit 1 when load + explain takes more than this many times "
                         "json.load's CPU time (the regression check .ci/run makes)")
    ap.add_argument("--child-explain", help=argparse.SUPPRESS)
    ap.add_argument("--child-json-load", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child_explain:
        _child_explain(a.child_explain)
        return 0
    if a.child_json_load:
        _child_json_load(a.child_json_load)
        return 0
    if a.events < 100:
        ap.error("--events must be at least 100")
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    also = tuple(Path(x) for x in a.also.split(",") if x)
    missing = [str(x) for x in also if not (x / "benchmarks" / "analysis.py").is_file()]
    if missing:
        ap.error(f"--also: not a checkout of this project: {', '.join(missing)}")
    if a.keep:
        Path(a.keep).mkdir(parents=True, exist_ok=True)
        r = run(a.events, Path(a.keep), a.rounds, also)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-analysis-") as d:
            r = run(a.events, Path(d), a.rounds, also)
    print(f"trace: {r['events']:,} events, {r['file_mb']:.1f} MB (generated in "
          f"{r['generate_s']:.1f} s)")
    print(f"load + explain: {r['load_s']:.2f} s + {r['explain_s']:.2f} s = "
          f"{r['mb_per_s']:.0f} MB/s wall, {r['mb_per_s_cpu']:.0f} MB/s of CPU time (CPU "
          f"{r['load_cpu_s']:.2f} s + {r['explain_cpu_s']:.2f} s, of which the loader's "
          f"second-core helper {r['load_helper_cpu_s']:.2f} s; whole process with imports: "
          f"{r['process_wall_s']:.2f} s, "
          f"{r['mb_per_s_whole_process']:.0f} MB/s); peak memory {r['peak_rss_bytes'] / 1e6:.0f} MB"
          f" = {r['peak_rss_over_file']:.2f}x the file (PSS of the process and its helper, "
          f"sampled; their peak RSS summed, counting the shared buffer twice: "
          f"{r['peak_rss_summed_over_file']:.2f}x, the helper's {r['peak_rss_helper_bytes'] / 1e6:.0f}"
          f" MB)")
    print(f"json.load alone: {r['json_load_s']:.2f} s (CPU {r['json_load_cpu_s']:.2f} s), peak RSS "
          f"{r['json_load_peak_rss_bytes'] / 1e6:.0f} MB = {r['json_load_rss_over_file']:.2f}x; "
          f"load + explain takes {r['vs_json_load']:.2f}x json.load's time "
          f"({r['vs_json_load_cpu']:.2f}x its CPU time)")
    print(f"targets: >= 100 MB/s ({'met' if r['mb_per_s'] >= 100 else 'NOT met'}), peak RSS "
          f"<= 3x file ({'met' if r['peak_rss_over_file'] <= 3 else 'NOT met'}); load average "
          f"{' '.join(f'{x:.2f}' for x in r['loadavg'])}")
    for root, o in r["also"].items():
        print(f"also {root}: CPU {o['load_cpu_s']:.2f} s + {o['explain_cpu_s']:.2f} s = "
              f"{o['vs_json_load_cpu']:.2f}x json.load's CPU time (its least-CPU round)")
    if a.rounds > 1:
        print(f"{a.rounds} rounds; CPU ratio of each: "
              f"{', '.join(f'{x:.2f}x' for x in r['ratios_cpu'])}")
    if a.json_out:
        atomic.write_text(a.json_out, json.dumps(r, indent=1) + "\n")
    if a.max_ratio is not None:
        # The median of the rounds' own ratios: each round's two sides ran one after the
        # other, so a round another job disturbed moves one ratio, not the check (the best
        # rounds of each side can come from different moments of the machine).
        verdict = "FAIL" if r["ratio_cpu_median"] > a.max_ratio else "ok"
        print(f"check: load + explain at {r['ratio_cpu_median']:.2f}x json.load's CPU time "
              f"(median of {a.rounds} rounds), bound {a.max_ratio:.2f}x: {verdict}")
        return 1 if verdict == "FAIL" else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
