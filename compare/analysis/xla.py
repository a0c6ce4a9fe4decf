"""XLA in a trace: compile and run time, compile counts per cluster or function, first call
versus steady cost, and whether anything recompiled.

What the ops are:
- ``_XlaLaunch`` (TF1): runs a whole compiled cluster in one op; its first call includes the
  compile, so first-call minus steady-call time estimates the compile (and a later call that
  takes far longer than the steady one compiled again, e.g. for a new input shape).
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
from typing import Any

import numpy as np

from common.hlo import CLUSTER_MODULE, strip_instance, unit_names
from compare.model.events import CAT, Events, Trace
from compare.model.lanes import keys
from compare.vocabulary import ops as tfops
from compare.vocabulary.rows import gpu_of, is_stream_all
from compare.vocabulary.thresholds import COMPILE_LAUNCH_FACTOR, COMPILE_MIN_US


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
    calls: int = 0                    # _XlaCompile (TF2) or _XlaLaunch (TF1) calls
    lookup_us: float = 0.0            # median _XlaCompile call that did not compile (cache hit)
    run_first_us: float = 0.0         # first _XlaRun / _XlaLaunch call
    run_steady_us: float = 0.0        # median of later calls
    first_call_us: float = 0.0        # first call in all: compile op + run, or the first launch
    steady_call_us: float = 0.0       # a later call in all (median), 0 if called once
    compile_steps: list[int] = dataclasses.field(default_factory=list)  # step of each compile
    device_us: float = 0.0            # its kernels on the GPU (timeline stream rows)


@dataclasses.dataclass
class XlaSummary:
    units: dict[str, XlaUnit]
    compile_us: float
    run_us: float
    compiles: int
    recompiled: list[str]          # units compiled more than once (only units the trace names:
                                   # with no node names, all compiles share the op's name)
    launch_style: str              # "launch" (TF1 _XlaLaunch), "compile+run" (TF2), or "none"
    #: (event index, unit, compile µs) of every call that compiled, in time order; for
    #: _XlaLaunch the compile is the call's excess over the steady call.
    compile_calls: list[tuple[int, str, float]] = dataclasses.field(default_factory=list)
    #: indices of the events that ran compiled code: _XlaRun / _XlaLaunch calls and the
    #: launches of jit_compile functions (their compile, if any, is in ``compile_calls``)
    run_events: list[int] = dataclasses.field(default_factory=list)
    #: indices of the _XlaCompile calls that only looked their program up in the cache
    lookup_events: list[int] = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"compile_us": self.compile_us, "run_us": self.run_us, "compiles": self.compiles,
                "recompiled": self.recompiled, "launch_style": self.launch_style,
                "units": {k: _unit_dict(v) for k, v in self.units.items()}}


def _unit_dict(u: XlaUnit) -> dict[str, Any]:
    """``dataclasses.asdict`` without its deep copies (thousands of units in a big trace)."""
    d = {f.name: getattr(u, f.name) for f in dataclasses.fields(u)}
    d["members"] = [tuple(m) for m in u.members]
    d["compile_steps"] = list(u.compile_steps)
    return d


class _Units:
    """The units of a trace, found by name as its XLA events are read."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.units: dict[str, XlaUnit] = {}
        self.compile_calls: list[tuple[int, str, float]] = []
        self.lookup_events: list[int] = []
        self.anonymous: set[str] = set()   # named by their op only: the trace names no node
        self._keys: dict[tuple[int, int], str] = {}

    def of(self, i: int) -> XlaUnit:
        ev = self.trace.events
        return self.named(int(ev.tf_name[i]), int(ev.name[i]))

    def named(self, tf_name: int, name: int) -> XlaUnit:
        """The unit of an event with these string ids (node name, event name)."""
        names = self.trace.strings.names
        ids = (tf_name, name)
        key = self._keys.get(ids)
        if key is None:
            key = self._keys[ids] = tfops.cluster_of(names[ids[0]], names[ids[1]])
            if not ids[0]:
                self.anonymous.add(key)
        u = self.units.get(key)
        if u is None:
            u = self.units[key] = XlaUnit(key)
        return u

    def compiled(self, u: XlaUnit, i: int, us: float) -> None:
        u.compiles += 1
        u.compile_us += us
        if u.compiles == 1:
            u.first_compile_us = us
        self.compile_calls.append((int(i), u.name, us))


def summarize(trace: Trace) -> XlaSummary:
    """Every XLA unit of the trace: compiles, runs, first and steady calls, members."""
    ev = trace.events
    found = _Units(trace)
    # GPU trace rows (stream, memcpy) repeat a cluster's name on each of its kernels: those are
    # the kernels of one call, not calls.
    calls = ~np.isin(ev.pid, [p.pid for p in trace.processes.values()
                              if p.kind in ("stream", "memcpy")])
    compile_idx = _by_time(ev, np.flatnonzero((ev.category == CAT["xla_compile"]) & calls))
    run_idx = _by_time(ev, np.flatnonzero((ev.category == CAT["xla_run"]) & calls))
    first_compile_op = _compile_ops(found, compile_idx)
    launches = _run_ops(found, run_idx)
    launched_by = kernel_launches(trace)
    for i in np.flatnonzero(device_kernels(trace)):
        found.of(launched_by.get(int(i), int(i))).device_us += float(ev.dur[i])
    _launch_compiles(found, launches)
    _call_costs(found.units, launches, first_compile_op)
    _members(trace, found.units)
    function_launches = _function_units(trace, found.units, found.compile_calls)
    found.compile_calls.sort(key=lambda c: ev.ts[c[0]])
    for call, name, _ in found.compile_calls:
        found.units[name].compile_steps.append(int(ev.step[call]))
    style = "launch" if launches else "compile+run" if len(compile_idx) or len(run_idx) else (
        "function" if function_launches else "none")
    units = found.units
    return XlaSummary(
        units=units,
        compile_us=float(sum(u.compile_us for u in units.values())),
        run_us=float(sum(u.run_us for u in units.values())),
        compiles=int(sum(u.compiles for u in units.values())),
        recompiled=sorted(u.name for u in units.values()
                          if u.compiles > 1 and u.name not in found.anonymous),
        launch_style=style,
        compile_calls=found.compile_calls,
        run_events=sorted(int(i) for i in run_idx) + sorted(function_launches),
        lookup_events=sorted(found.lookup_events))


def _by_time(ev: Events, idx: np.ndarray) -> np.ndarray:
    return idx[np.argsort(ev.ts[idx], kind="stable")]


def _compile_ops(found: _Units, compile_idx: np.ndarray) -> dict[str, float]:
    """Count ``_XlaCompile`` calls, compiles and cache lookups; returns each unit's first
    compile op's duration. A call compiled when the compiler's events nest inside it (xprof)
    or, in a timeline that cannot show them, when it took :data:`COMPILE_MIN_US` or more."""
    ev = found.trace.events
    nested = _has_nested_compiler_work(found.trace, compile_idx)
    lookups: dict[str, list[float]] = {}
    first: dict[str, float] = {}
    is_compile = nested[compile_idx] if nested is not None else \
        ev.dur[compile_idx] >= COMPILE_MIN_US
    for i, tf, name, dur, compiled in zip(compile_idx.tolist(), ev.tf_name[compile_idx].tolist(),
                                          ev.name[compile_idx].tolist(),
                                          ev.dur[compile_idx].tolist(), is_compile.tolist()):
        u = found.named(tf, name)
        u.calls += 1
        first.setdefault(u.name, dur)
        if compiled:
            found.compiled(u, i, dur)
        else:
            lookups.setdefault(u.name, []).append(dur)
            found.lookup_events.append(i)
    for name, durs in lookups.items():
        found.units[name].lookup_us = _median(durs)
    return first


def _run_ops(found: _Units, run_idx: np.ndarray) -> dict[str, list[int]]:
    """Count ``_XlaRun``/``_XlaLaunch`` calls and time; returns the launches per unit."""
    tr = found.trace
    ev = tr.events
    launch_ops = {tr.strings.lookup(n) for n in tfops.XLA_LAUNCH_OPS}
    launches: dict[str, list[int]] = {}
    runs: dict[str, list[float]] = {}
    for i, tf, name, op, dur in zip(run_idx.tolist(), ev.tf_name[run_idx].tolist(),
                                    ev.name[run_idx].tolist(), ev.op_type[run_idx].tolist(),
                                    ev.dur[run_idx].tolist()):
        u = found.named(tf, name)
        u.runs += 1
        u.run_us += dur
        runs.setdefault(u.name, []).append(dur)
        if op in launch_ops or name in launch_ops:
            launches.setdefault(u.name, []).append(i)
    for name, durs in runs.items():
        u = found.units[name]
        u.run_first_us = durs[0]
        u.run_steady_us = _median(durs[1:]) if len(durs) > 1 else 0.0
    return launches


def _launch_compiles(found: _Units, launches: dict[str, list[int]]) -> None:
    """TF1's ``_XlaLaunch`` compiles inside its call: a call far longer than the steady one
    (first call, new input shape) compiled for its excess."""
    ev = found.trace.events
    for name, idx in launches.items():
        u = found.units[name]
        durs = [float(ev.dur[i]) for i in idx]
        u.calls = max(u.calls, len(durs))
        u.launch_first_us = durs[0]
        if len(durs) < 2 or u.compiles:
            continue
        u.launch_steady_us = steady = _median(durs[1:])
        for k, i in enumerate(idx):
            extra = durs[k] - steady
            if extra >= COMPILE_MIN_US and durs[k] >= COMPILE_LAUNCH_FACTOR * steady:
                found.compiled(u, i, extra)


def _call_costs(units: dict[str, XlaUnit], launches: dict[str, Any],
                first_compile_op: dict[str, Any]) -> None:
    """A unit's first and steady call in all: the launch, or the compile op plus the run."""
    for u in units.values():
        if u.name in launches:
            u.first_call_us = u.launch_first_us
            u.steady_call_us = u.launch_steady_us
        else:
            u.first_call_us = first_compile_op.get(u.name, 0.0) + u.run_first_us
            u.steady_call_us = u.lookup_us + u.run_steady_us if u.run_steady_us else 0.0


def _members(trace: Trace, units: dict[str, XlaUnit]) -> None:
    """The TF ops each unit holds: from our legacy runs' sidecar, or the xplane's HLO."""
    for key, members in trace.meta.get("xla_members", {}).items():
        units.setdefault(key, XlaUnit(key)).members = list(members)
    for mod in trace.hlo.values():
        key = mod.cluster
        target = units.get(key) or next((u for k, u in units.items() if key in k), None)
        if target is None:
            target = units.setdefault(key, XlaUnit(key))
        target.members = mod.all_tf_ops()


def _median(values: list[float]) -> float:
    """``np.median`` of a short Python list, without numpy's per-call overhead."""
    v = sorted(values)
    n = len(v)
    return float(v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)


def device_kernels(trace: Trace) -> np.ndarray:
    """Mask of the GPU kernels of XLA clusters in a timeline (the GPU tracer names each kernel
    after the ``_XlaRun`` that launched it, or TF 1.x's XLA:GPU under the op type ``XLA op``):
    on ``stream:all``, else on every stream row."""
    ev = trace.events
    streams = [p for p in trace.processes.values() if p.kind == "stream"]
    rows = [p.pid for p in streams if is_stream_all(p.name)] or [p.pid for p in streams]
    if not rows:
        return np.zeros(len(ev), dtype=bool)
    cats = [CAT["xla_run"], CAT["xla_compile"]]
    gpu_op = trace.strings.lookup(tfops.XLA_GPU_KERNEL_OP)
    return np.isin(ev.pid, rows) & (np.isin(ev.category, cats) |
                                     (ev.op_type == gpu_op if gpu_op is not None else False))


def kernel_launches(trace: Trace) -> dict[int, int]:
    """TF 1.x XLA:GPU kernels (op type ``XLA op``, named by their HLO rather than by the op that
    launched them) -> the XLA launch op on the same GPU that started last before each (a
    launch enqueues its cluster's kernels; they run after it starts). Empty when the trace has
    no such kernels."""
    ev = trace.events
    gpu_op = trace.strings.lookup(tfops.XLA_GPU_KERNEL_OP)
    if gpu_op is None:
        return {}
    kern = np.flatnonzero((ev.op_type == gpu_op) & np.isin(
        ev.pid, [p.pid for p in trace.processes.values() if p.kind == "stream"]))
    run_ids = [i for i in (trace.strings.lookup(n) for n in tfops.XLA_RUN_OPS) if i is not None]
    launch = np.flatnonzero(np.isin(ev.op_type, run_ids) & np.isin(
        ev.pid, [p.pid for p in trace.processes.values() if p.kind == "compute"]))
    if not len(kern) or not len(launch):
        return {}
    out: dict[int, int] = {}
    gpu = {pid: gpu_of(p.name) for pid, p in trace.processes.items()}
    for g in {gpu[int(p)] for p in np.unique(ev.pid[launch])}:
        mine = launch[[gpu[int(p)] == g for p in ev.pid[launch]]]
        mine = mine[np.argsort(ev.ts[mine], kind="stable")]
        ks = kern[[gpu[int(p)] == g for p in ev.pid[kern]]]
        at = np.searchsorted(ev.ts[mine], ev.ts[ks], side="right") - 1
        out.update((int(k), int(mine[a])) for k, a in zip(ks, at) if a >= 0)
    return out


def _has_nested_compiler_work(trace: Trace, compile_idx: np.ndarray) -> np.ndarray | None:
    """For each compile op, whether compiler events run nested inside it (xprof traces only)."""
    ev = trace.events
    names = trace.strings.names
    compiler_ids = [int(i) for i in np.unique(ev.name) if tfops.is_compiler_event(names[i])]
    if not compiler_ids or not len(compile_idx):
        return None
    comp = np.flatnonzero(np.isin(ev.name, compiler_ids))
    out = np.zeros(len(ev), dtype=bool)
    # compiler events by lane, then start: each compile op's window is one binary search
    # (not a pass over every compiler event per op)
    mine, theirs = keys(ev.pid[compile_idx], ev.tid[compile_idx], (ev.pid[comp], ev.tid[comp]))
    order = np.lexsort((ev.ts[comp], theirs))
    lane, start = theirs[order], ev.ts[comp][order]
    lo = np.searchsorted(lane, mine, side="left")
    hi = np.searchsorted(lane, mine, side="right")
    for k, i in enumerate(compile_idx):
        a = lo[k] + np.searchsorted(start[lo[k]:hi[k]], ev.ts[i], side="left")
        out[i] = a < hi[k] and start[a] < ev.ts[i] + ev.dur[i]
    return out


class _NamedOnly:
    """A compiled module known by name only: its kernels name it (``hlo_module``), the trace
    carries no HLO (a trace viewer JSON, not the xplane)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def cluster(self) -> str:
        m = CLUSTER_MODULE.match(self.name)
        return m.group(1) if m else strip_instance(self.name)


def _kernel_modules(trace: Trace) -> dict[str, Any]:
    """The trace's HLO modules, and the modules its XLA kernels name that it holds no HLO
    for (by name only), so a ``jit_compile`` function is one unit in either format."""
    ev, names = trace.events, trace.strings.names
    out: dict[str, Any] = dict(trace.hlo)
    for m in np.unique(ev.hlo_module[ev.category == CAT["xla_kernel"]]).tolist():
        if m and names[m] not in out:
            out[names[m]] = _NamedOnly(names[m])
    return out


def _function_units(trace: Trace, units: dict[str, XlaUnit],
                    compile_calls: list[tuple[int, str, float]]) -> list[int]:
    """Add one unit per compiled ``jit_compile`` function module (see
    :func:`common.hlo.unit_names`); returns the indices of the launch events that ran one.

    A launch of a function is the innermost event around its kernels that is not XLA's own
    runtime: the ``__inference_<fn>_<N>`` op of an eager call, or the executor's
    ``ExecutorState::ProcessAsync::Start`` when another function calls it. A launch with the
    compiler's events nested inside compiled; its compile time is its excess over a launch
    that did not compile.
    """
    ev = trace.events
    names = trace.strings.names
    kernel_cat = CAT["xla_kernel"]
    modules = {name: (unit, trace.hlo.get(name)) for name, (unit, kind) in
               unit_names(_kernel_modules(trace)).items() if kind == "function"}
    if not modules:
        return []
    launches: dict[str, set[int]] = {}
    for pid, tid, idx in trace.iter_lanes():
        kern = idx[(ev.category[idx] == kernel_cat)]
        kern = kern[[names[ev.hlo_module[k]] in modules for k in kern]]
        if not len(kern):
            continue
        cand = idx[ev.category[idx] != kernel_cat]
        runtime = np.array([bool(names[ev.name[c]].startswith(tfops.NOT_A_LAUNCH_PREFIXES)) for c in cand], bool)
        c_ts, c_end = ev.ts[cand], ev.ts[cand] + ev.dur[cand]
        for k in kern:
            inside = (c_ts <= ev.ts[k]) & (c_end >= ev.ts[k] + ev.dur[k])
            # the launching op; else (its event lost when the profile stopped) XLA's own
            # execution event, which still counts the run
            pick = np.flatnonzero(inside & ~runtime)
            if not len(pick):
                pick = np.flatnonzero(inside & np.array([names[ev.name[c]].startswith(
                    tfops.XLA_EXECUTE_PREFIX) for c in cand], bool))
            if len(pick):
                j = cand[pick[np.argmax(c_ts[pick])]]
                fn = modules[names[ev.hlo_module[k]]][0]
                launches.setdefault(fn, set()).add(int(j))
    all_launches = np.array(sorted(i for s in launches.values() for i in s), dtype=np.int64)
    nested = _has_nested_compiler_work(trace, all_launches)
    for name, (fn, mod) in modules.items():
        if mod is not None:
            units.pop(mod.cluster, None)  # added above under the module's own name
        u = units.setdefault(fn, XlaUnit(fn))
        u.members = mod.all_tf_ops() if mod is not None else []
        idx = np.array(sorted(launches.get(fn, ())), dtype=np.int64)
        if not len(idx):
            continue
        idx = idx[np.argsort(ev.ts[idx])]
        durs = ev.dur[idx]
        compiled = nested[idx] if nested is not None else np.zeros(len(idx), bool)
        steady = float(np.median(durs[~compiled])) if (~compiled).any() else 0.0
        u.runs = u.calls = len(idx)
        u.launch_first_us = u.first_call_us = float(durs[0])
        u.launch_steady_us = u.steady_call_us = steady
        u.compiles, u.compile_us = 0, 0.0
        for i, d in zip(idx[compiled], durs[compiled]):
            c = max(float(d) - steady, 0.0)
            u.compiles += 1
            u.compile_us += c
            if u.compiles == 1:
                u.first_compile_us = c
            compile_calls.append((int(i), fn, c))
        u.run_us = float(durs.sum()) - u.compile_us
        u.run_first_us = float(durs[0]) - (u.first_compile_us if compiled[0] else 0.0)
        u.run_steady_us = steady
    return [int(i) for i in all_launches]
