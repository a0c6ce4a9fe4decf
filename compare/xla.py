"""XLA in a trace: compile and run time, compile counts per cluster or function, first call
versus steady cost, and whether anything recompiled.

What the ops are:
- ``_XlaLaunch`` (TF1): runs a whole compiled cluster in one op; its first call includes the
  compile, so first-call minus steady-call time estimates the compile.
- ``_XlaCompile`` (TF2 auto-clustering): compiles the cluster, or on later steps only looks the
  executable up in a cache (tens of microseconds). A real compile shows nested compiler events
  (``CpuCompiler::RunBackend``, ``HLO passes ...``) in an xprof trace; in a timeline.py trace,
  which does not nest, a call longer than :data:`COMPILE_MIN_US` counts as a compile.
- ``_XlaRun``: executes the compiled cluster; XLA:CPU adds one event per kernel inside it
  (named by HLO instruction, args ``hlo_module`` / ``hlo_op``).
- ``_XlaMerge``: joins the compiled path with the fallback path; negligible time.
- A ``tf.function(jit_compile=True)`` call (TF2): one op named ``__inference_<fn>_<N>`` whose
  module is ``a_inference_<fn>_<N>__...``; its kernels run inside it, and a call that compiles
  has the compiler's events nested inside it (first call minus a steady call is the compile).
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np

from compare.events import CATEGORIES, Trace

#: A timeline ``_XlaCompile`` longer than this is a compile, not a cache lookup.
COMPILE_MIN_US = 1000.0
_COMPILER_EVENT = re.compile(r"(Compiler::|^HLO passes|^XlaCompilationCache::Compile|"
                             r"^DeviceCompiler::Compile|^Compile$)")
_CLUSTER_OF = re.compile(r"(cluster_\d+)(?:_\d+)?/")


@dataclasses.dataclass
class XlaUnit:
    """One compiled cluster (TF auto-clustering) or function (``jit_compile=True``)."""

    name: str
    compiles: int = 0
    compile_us: float = 0.0
    first_compile_us: float = 0.0
    runs: int = 0
    run_us: float = 0.0
    launch_first_us: float = 0.0      # _XlaLaunch only: first call (includes compile)
    launch_steady_us: float = 0.0     # _XlaLaunch only: median of later calls
    members: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (op_type, op_name)


@dataclasses.dataclass
class XlaSummary:
    units: dict[str, XlaUnit]
    compile_us: float
    run_us: float
    compiles: int
    recompiled: list[str]          # units compiled more than once
    launch_style: str              # "launch" (TF1 _XlaLaunch), "compile+run" (TF2), or "none"

    def as_dict(self) -> dict:
        return {"compile_us": self.compile_us, "run_us": self.run_us, "compiles": self.compiles,
                "recompiled": self.recompiled, "launch_style": self.launch_style,
                "units": {k: dataclasses.asdict(v) for k, v in self.units.items()}}


def unit_name(tf_name: str, fallback: str) -> str:
    """``cluster_3`` from ``cluster_3_1/xla_run``; otherwise the node name itself."""
    m = _CLUSTER_OF.match(tf_name or "")
    return m.group(1) if m else (tf_name or fallback)


def summarize(trace: Trace) -> XlaSummary:
    ev = trace.events
    names = trace.strings.names
    cat = ev.category
    units: dict[str, XlaUnit] = {}

    def unit(i: int) -> XlaUnit:
        tf_name = names[ev.tf_name[i]]
        key = unit_name(tf_name, names[ev.name[i]])
        return units.setdefault(key, XlaUnit(key))

    compile_idx = np.flatnonzero(cat == CATEGORIES.index("xla_compile"))
    nested_compile = _has_nested_compiler_work(trace, compile_idx)
    for i in compile_idx:
        u = unit(i)
        real = nested_compile[i] if nested_compile is not None else ev.dur[i] >= COMPILE_MIN_US
        if real:
            u.compiles += 1
            u.compile_us += float(ev.dur[i])
            if u.compiles == 1:
                u.first_compile_us = float(ev.dur[i])

    launches: dict[str, list[float]] = {}
    run_idx = np.flatnonzero(cat == CATEGORIES.index("xla_run"))
    launch_ops = {trace.strings.lookup(n) for n in ("_XlaLaunch", "XlaLaunch", "XlaLaunchV2")}
    for i in run_idx:
        u = unit(i)
        u.runs += 1
        u.run_us += float(ev.dur[i])
        if ev.op_type[i] in launch_ops or ev.name[i] in launch_ops:
            launches.setdefault(u.name, []).append(float(ev.dur[i]))
    for name, durs in launches.items():
        u = units[name]
        u.launch_first_us = durs[0]
        if len(durs) > 1:
            u.launch_steady_us = float(np.median(durs[1:]))
            if durs[0] - u.launch_steady_us >= COMPILE_MIN_US and u.compiles == 0:
                u.compiles = 1
                u.first_compile_us = u.compile_us = durs[0] - u.launch_steady_us

    for key, members in trace.meta.get("xla_members", {}).items():
        units.setdefault(key, XlaUnit(key)).members = list(members)
    for mod in trace.hlo.values():
        key = mod.cluster
        target = units.get(key) or next((u for k, u in units.items() if key in k), None)
        if target is None:
            target = units.setdefault(key, XlaUnit(key))
        target.members = mod.all_tf_ops()

    functions = _function_units(trace, units)
    style = "launch" if launches else "compile+run" if len(compile_idx) else (
        "compile+run" if len(run_idx) else "function" if functions else "none")
    return XlaSummary(
        units=units,
        compile_us=float(sum(u.compile_us for u in units.values())),
        run_us=float(sum(u.run_us for u in units.values())),
        compiles=int(sum(u.compiles for u in units.values())),
        recompiled=sorted(u.name for u in units.values() if u.compiles > 1),
        launch_style=style)


def _has_nested_compiler_work(trace: Trace, compile_idx: np.ndarray) -> np.ndarray | None:
    """For each compile op, whether compiler events run nested inside it (xprof traces only)."""
    ev = trace.events
    names = trace.strings.names
    compiler_ids = [i for i, n in enumerate(names) if _COMPILER_EVENT.search(n)]
    if not compiler_ids or not len(compile_idx):
        return None
    comp = np.flatnonzero(np.isin(ev.name, compiler_ids))
    out = np.zeros(len(ev), dtype=bool)
    for i in compile_idx:
        inside = comp[(ev.pid[comp] == ev.pid[i]) & (ev.tid[comp] == ev.tid[i]) &
                      (ev.ts[comp] >= ev.ts[i]) & (ev.ts[comp] < ev.ts[i] + ev.dur[i])]
        out[i] = len(inside) > 0
    return out


#: Events around compiled kernels that belong to XLA's runtime or to a worker thread, not to
#: the op that launched the compiled code.
_NOT_A_LAUNCH = re.compile(r"^(CpuExecutable::|ThunkExecutor::|ThreadpoolListener::|Populate |"
                           r"end: |BlockUntilReady)")


def _function_units(trace: Trace, units: dict[str, XlaUnit]) -> bool:
    """Add one unit per compiled ``jit_compile`` function module (see
    :func:`compare.hlo.unit_names`); returns whether any ran.

    A launch of a function is the innermost event around its kernels that is not XLA's own
    runtime: the ``__inference_<fn>_<N>`` op of an eager call, or the executor's
    ``ExecutorState::ProcessAsync::Start`` when another function calls it. A launch with the
    compiler's events nested inside compiled; its compile time is its excess over a launch
    that did not compile.
    """
    from compare.hlo import unit_names

    modules = {name: (unit, trace.hlo[name]) for name, (unit, kind) in
               unit_names(trace.hlo).items() if kind == "function"}
    if not modules:
        return False
    ev = trace.events
    names = trace.strings.names
    kernel_cat = CATEGORIES.index("xla_kernel")
    launches: dict[str, set[int]] = {}
    for pid, tid, idx in trace.iter_lanes():
        kern = idx[(ev.category[idx] == kernel_cat)]
        kern = kern[[names[ev.hlo_module[k]] in modules for k in kern]]
        if not len(kern):
            continue
        cand = idx[ev.category[idx] != kernel_cat]
        runtime = np.array([bool(_NOT_A_LAUNCH.match(names[ev.name[c]])) for c in cand], bool)
        c_ts, c_end = ev.ts[cand], ev.ts[cand] + ev.dur[cand]
        for k in kern:
            inside = (c_ts <= ev.ts[k]) & (c_end >= ev.ts[k] + ev.dur[k])
            # the launching op; else (its event lost when the profile stopped) XLA's own
            # execution event, which still counts the run
            pick = np.flatnonzero(inside & ~runtime)
            if not len(pick):
                pick = np.flatnonzero(inside & np.array([names[ev.name[c]].startswith(
                    "CpuExecutable::") for c in cand], bool))
            if len(pick):
                j = cand[pick[np.argmax(c_ts[pick])]]
                fn = modules[names[ev.hlo_module[k]]][0]
                launches.setdefault(fn, set()).add(int(j))
    all_launches = np.array(sorted(i for s in launches.values() for i in s), dtype=np.int64)
    nested = _has_nested_compiler_work(trace, all_launches)
    for name, (fn, mod) in modules.items():
        units.pop(mod.cluster, None)  # added above under the module's own name
        u = units.setdefault(fn, XlaUnit(fn))
        u.members = mod.all_tf_ops()
        idx = np.array(sorted(launches.get(fn, ())), dtype=np.int64)
        if not len(idx):
            continue
        idx = idx[np.argsort(ev.ts[idx])]
        durs = ev.dur[idx]
        compiled = nested[idx] if nested is not None else np.zeros(len(idx), bool)
        steady = float(np.median(durs[~compiled])) if (~compiled).any() else 0.0
        u.runs = len(idx)
        u.launch_first_us = float(durs[0])
        u.launch_steady_us = steady
        u.compiles, u.compile_us = 0, 0.0
        for d in durs[compiled]:
            c = max(float(d) - steady, 0.0)
            u.compiles += 1
            u.compile_us += c
            if u.compiles == 1:
                u.first_compile_us = c
        u.run_us = float(durs.sum()) - u.compile_us
    return bool(launches)
