"""Give every event of a trace a stage of the shared vocabulary, or an overhead category.

Rules, first match wins (the basis of each event's label is kept, so a report can say where a
number came from and which numbers are estimates). Names any program uses (generic op types
such as ``ConcatV2``/``StridedSlice``, generic API scopes such as ``clip_by_value``, tf.data
kinds, TF1 reader threads) count for a stage only in a trace that shows an image pipeline
(:func:`pipeline_evidence`); elsewhere they are left to the generic view
(:mod:`compare.analysis.groups`).

1. Overhead op types: ``_XlaCompile`` and compiler work -> ``xla_compile``; ``_XlaRun`` /
   ``_XlaLaunch`` / a ``jit_compile`` function call -> ``xla_run`` (their own time: what kernel
   events inside do not cover); ``IteratorGetNext`` / ``QueueDequeue*`` -> ``input_wait``.
2. XLA kernels (xprof, category ``xla_kernel``, args ``hlo_module``/``hlo_op``): through the HLO
   module (:mod:`common.hlo`) to the TF ops fused into the kernel, then rules 3-5 on each. A
   kernel holding ops of several stages is split among them in proportion to the output elements
   of its HLO instructions per stage (an estimate, labelled ``hlo_split``).
3. Our name scopes (:func:`common.stages.stage_of_scope`), also under cluster/function prefixes.
4. TensorFlow's own API scopes (``adjust_saturation/``, ``random_crop/``, ``clip_by_value/``...),
   so a user's graph built with ``tf.image`` maps without our scopes.
5. Op types (``DecodeJpeg`` -> decode, ``ReverseV2`` -> flip, ...); when the trace has dataflow
   (timeline.py's ``input0..N``): ``Minimum``/``Maximum`` fed by a jitter -> clip, a gather fed by
   a shuffle -> shuffle, and an op whose consumers all belong to one stage (the random draw of a
   jitter) -> that stage.
6. tf.data ``Iterator::*`` events: the dataset's stage (``Shuffle`` -> shuffle, ``Batch`` ->
   assemble, file sources -> read), else the stage of the work nested in them, else runtime;
   asynchronous ones (``Prefetch``, ``ParallelMap``...) only wait.
7. A timeline's ``_XlaRun`` of a cluster whose members are known (``xla_clusters.json``): the
   members' stage when they are all of one (estimate, ``cluster_members``), a split measured on
   a reference profile of the same run when given (estimate, ``cluster_profile``), else xla_run.
8. Threads named for their work: a TF1 reader's ``tf_reader_thread_*`` -> read, XLA's
   ``xla-cpu-codegen`` threads -> xla_compile.
9. Executor, eager and Python dispatch events -> ``runtime``; events nested in an op inherit the
   op's stage. An Eigen worker's ``ThreadpoolListener::Region`` with nothing inside runs shards of
   whatever op is running on another thread: :mod:`compare.analysis.attribution` gives its time to the
   ops running concurrently (estimate, ``concurrent_op``).

Anything else stays ``unmapped`` and is shown as such.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from common import hlo
from common.stages import PIPELINE_STAGES, stage_of_scope
from compare.analysis import inputs
from compare.model.events import CAT, Trace
from compare.model.lanes import in_lanes
from compare.vocabulary import ops as tfops
from compare.vocabulary.groups import is_model_side, strip_wrappers
from compare.vocabulary.labels import (
    API_SCOPES,
    BASES,
    BASIS,
    CLIP_OPS,
    COMPILER_THREAD_MARKS,
    FIXED_OP_TYPES,
    GATHER_OPS,
    GENERIC_API_SCOPES,
    GENERIC_OP_TYPES,
    GRAPPLER_REWRITE,
    JITTER,
    LABEL,
    LABELS,
    OP_TYPE_LABEL,
    PIPELINE,
    READER_THREAD_PREFIX,
    SCOPE_SUFFIX,
    UNMAPPED,
)

#: What a mapping rule gives an event: (label, basis, wait, generic, unit, split, ops).
Rule = tuple[int, int, bool, bool, "str | None", "list[tuple[int, float]] | None",
             "list[tuple[str, str]] | None"]
#: What the kernel rule gives an XLA kernel: (label, basis, split, ops, unit).
KernelRule = tuple[int, int, "list[tuple[int, float]] | None", "list[tuple[str, str]] | None",
                   str]

@dataclasses.dataclass
class StageMap:
    """The mapper's result for one trace (the trace itself is left as it was).

    ``label``: per event, index into :data:`LABELS` (0 = unmapped) — for split events the
    largest share; ``basis``: index into :data:`BASES`; ``wait``: the event's own time is a
    thread blocked on others (SessionRun, IteratorGetNext, an async tf.data iterator...), not
    work; ``orphan``: a worker region whose time goes to the concurrent ops; ``input``: the
    event is the step waiting for or reading its input, or runs inside such an op
    (:mod:`compare.analysis.inputs`); ``parent``: the
    enclosing event on the same lane (-1 if none); ``splits``: event -> [(label, fraction)];
    ``ops``: event -> the TF ops it computed (op_type, op_name) for XLA kernels and cluster runs;
    ``unit``: event -> XLA cluster/function name for compiled work; ``units``: what each XLA
    cluster or compiled function holds.
    """

    trace: Trace
    label: np.ndarray
    basis: np.ndarray
    wait: np.ndarray
    orphan: np.ndarray
    input: np.ndarray
    parent: np.ndarray
    splits: dict[int, list[tuple[int, float]]]
    ops: dict[int, list[tuple[str, str]]]
    unit: dict[int, str]
    units: dict[str, "UnitContents"]

    def fractions(self, i: int) -> list[tuple[int, float]]:
        """[(label, fraction)] of event ``i``'s own time."""
        return self.splits.get(i) or [(int(self.label[i]), 1.0)]

    def single_label(self, idx: np.ndarray) -> np.ndarray:
        """Per event of ``idx``: its label when all its time is in it, else -1 (split)."""
        out = self.label[idx].astype(np.int64)
        if self.splits:
            split = np.fromiter(self.splits, np.int64, len(self.splits))
            out[np.isin(idx, split)] = -1
        return np.asarray(out)

    def label_name(self, i: int) -> str:
        return str(LABELS[self.label[i]])

    def basis_name(self, i: int) -> str:
        return str(BASES[self.basis[i]])

    def display_name(self, i: int) -> str:
        """What to call event ``i`` in a list of ops: the TF op type, ``unit/hlo_op`` for an
        XLA kernel, ``_XlaRun cluster_N`` for a cluster run; an event that inherited its stage
        is named for the op it ran inside, one on a dedicated thread for the thread."""
        tr, ev = self.trace, self.trace.events
        inherited = BASIS["inherited"]
        while self.basis[i] == inherited and self.parent[i] >= 0:
            i = int(self.parent[i])
        if self.basis[i] == BASIS["lane"]:
            base = tr.lane_name(int(ev.pid[i]), int(ev.tid[i])).split("/")[0]
            if base.startswith(READER_THREAD_PREFIX):  # named for the reader op it serves
                return base[len(READER_THREAD_PREFIX):] + " (reader thread)"
            return base + " thread"
        if ev.category[i] == CAT["xla_kernel"]:
            return f"{self.unit.get(i, '?')}/{hlo.strip_instance(tr.s(ev.hlo_op[i]))}"
        op_type = tr.s(ev.op_type[i])
        if i in self.unit and op_type:
            return f"{op_type} {self.unit[i]}"
        if i in self.unit and self.label[i] in (LABEL["xla_run"], LABEL["xla_compile"]):
            return f"{tr.s(ev.name[i])} ({self.unit[i]})"
        if ev.category[i] == CAT["step"]:
            return "Python (step)"
        return op_type or tr.s(ev.name[i])


@dataclasses.dataclass
class UnitContents:
    """One XLA cluster (auto-clustering) or compiled function: its TF ops and their stages."""

    name: str
    kind: str                                # "cluster" or "function"
    ops: list[tuple[str, str]]               # (op_type, op_name), without XLA_Args/Retvals
    stages: dict[str, int]                   # stage -> number of TF ops

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "stages": self.stages,
                "ops": [f"{name} ({t})" if t else name for t, name in self.ops]}


def stage_of_op(op_type: str, op_name: str, weak_ok: bool = True) -> str | None:
    """The stage or overhead category of one TF op from its name and type (rules 3-5, without
    dataflow), or None. ``weak_ok``: the trace shows an image pipeline, so generic op types
    (:data:`GENERIC_OP_TYPES`) may count as a stage's work."""
    return _op_rule(op_type, op_name, weak_ok)[0]


def _api_scope(op_name: str, weak_ok: bool = True) -> str | None:
    """The stage named by a TensorFlow API scope in ``op_name`` (outermost first), also when
    it is the op's own name (``clip_by_value``) or survives in a Grappler rewrite's name; a
    scope any program opens (:data:`GENERIC_API_SCOPES`) only when ``weak_ok``."""
    if not op_name:
        return None
    for part in op_name.split("/"):
        for cand in (part, GRAPPLER_REWRITE.sub("", part)):
            for key in (cand, SCOPE_SUFFIX.sub("", cand)):
                if key in API_SCOPES and (weak_ok or key not in GENERIC_API_SCOPES):
                    return API_SCOPES[key]
    return None


def _op_rule(op_type: str, op_name: str, weak_ok: bool = True) -> tuple[str | None, str]:
    """(stage, basis) of a TF op by rules 1, 3-5. A node under a backward-pass or optimizer
    scope is never a pipeline stage's by API scope or op type; a generic op type is one only
    when ``weak_ok`` (the trace shows an image pipeline)."""
    if op_type in FIXED_OP_TYPES:
        return OP_TYPE_LABEL[op_type], "op_type"
    s = _our_scope(op_name)
    if s:
        return s, "scope"
    model_side = is_model_side(op_name) if op_name else False
    s = None if model_side else _api_scope(op_name, weak_ok)
    if s:
        return s, "api_scope"
    s = OP_TYPE_LABEL.get(op_type)
    if s in PIPELINE_STAGES and (model_side or op_type in GENERIC_OP_TYPES and not weak_ok):
        s = None
    return (s, "op_type") if s else (None, "unmapped")


def _our_scope(op_name: str) -> str | None:
    """The stage our own scopes name (:func:`common.stages.stage_of_scope`); a ``read`` scope
    only outermost, since TF names every variable's snapshot ``<variable>/read``."""
    s = stage_of_scope(op_name) if op_name else None
    if s == "read" and not stage_of_scope(strip_wrappers(op_name).split("/", 1)[0] + "/x"):
        return None
    return s


def _snake(op_type: str) -> str:
    """``stateless_shuffle`` from ``StatelessShuffle``: the scope TF's Python wrapper of an op
    opens around it."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", op_type).lower()


def _plain(op_type: str, op_name: str) -> bool:
    """Every scope of ``op_name`` (wrappers aside) is ours, a TF API scope of the pipeline's,
    or the op's own wrapper: nothing says the node belongs to something else (the consumers'
    stage rule pulls in only such nodes, or those of the consumers' own block)."""
    own = _snake(op_type)
    for part in strip_wrappers(op_name or "").split("/")[:-1]:
        base = SCOPE_SUFFIX.sub("", GRAPPLER_REWRITE.sub("", part))
        if not (stage_of_scope(part + "/x") or base in API_SCOPES or part in API_SCOPES
                or base == own):
            return False
    return True


def _same_block(node: str, users: list[str]) -> bool:
    """The node sits in the same enclosing scope as every op that consumes it (one block of
    the program: a random draw beside the jitter it feeds)."""
    parent = node.rpartition("/")[0]
    return bool(parent) and all(u.rpartition("/")[0] == parent for u in users)


def pipeline_evidence(trace: Trace) -> bool:
    """The trace shows an image pipeline: some op (an event's or one inside an XLA unit) is a
    pipeline stage's by our scopes, a ``tf.image`` API scope or an image op type. Generic op
    types, API scopes and tf.data kinds (slicing, concatenating, clipping, batching,
    shuffling, reading files) are not evidence: any program has them."""
    ev = trace.events
    pairs: set[tuple[str, str]] = set()
    if len(ev):
        uniq = np.unique(np.stack([ev.op_type, ev.tf_name], axis=1), axis=0)
        names = trace.strings.names
        pairs = {(names[t], names[n]) for t, n in uniq.tolist()}
    for mod in trace.hlo.values():
        pairs.update((o[0], o[1]) for o in mod.all_tf_ops())
    for ops in trace.meta.get("xla_members", {}).values():
        pairs.update((o[0], o[1]) for o in ops)
    return any(_op_rule(t, n, weak_ok=False)[0] in PIPELINE_STAGES for t, n in pairs)


def units_of(trace: Trace, weak_ok: bool = True) -> dict[str, UnitContents]:
    """Which TF ops each XLA cluster and compiled function of the trace holds (from its HLO, or
    for a timeline from the ``xla_clusters.json`` sidecar)."""
    out: dict[str, UnitContents] = {}

    def add(name: str, kind: str, ops: Iterable[Sequence[str]]) -> None:
        kept = [(o[0], o[1]) for o in ops if o[1] not in tfops.XLA_ARG_OPS]
        stages = Counter(stage_of_op(t, n, weak_ok) or "unmapped" for t, n in kept)
        out[name] = UnitContents(name, kind, kept, dict(stages.most_common()))

    for mname, (name, kind) in hlo.unit_names(trace.hlo).items():
        add(name, kind, trace.hlo[mname].all_tf_ops())
    for name, ops in trace.meta.get("xla_members", {}).items():
        if name not in out:
            add(name, "cluster", ops)
    return out


class _Mapper:
    def __init__(self, trace: Trace, reference: StageMap | None) -> None:
        self.tr = trace
        self.ev = trace.events
        self.names = trace.strings.names
        self.reference = _cluster_profile(reference) if reference is not None else {}
        self.weak_ok = pipeline_evidence(trace)
        self.units = units_of(trace, self.weak_ok)
        self.module_unit = {m: u for m, (u, _) in hlo.unit_names(trace.hlo).items()}
        self.function_ops = {re.sub(r"\[\d+\]$", "", u) for u, c in self.units.items()
                             if c.kind == "function"}
        n = len(self.ev)
        self.label = np.zeros(n, np.int16)
        self.basis = np.zeros(n, np.int8)
        self.wait = np.zeros(n, bool)
        self.orphan = np.zeros(n, bool)
        self.parent = np.full(n, -1, np.int64)
        self.splits: dict[int, list[tuple[int, float]]] = {}
        self.ops: dict[int, list[tuple[str, str]]] = {}
        self.unit: dict[int, str] = {}
        self.step_lanes = {(int(self.ev.pid[i]), int(self.ev.tid[i]))
                           for i in np.flatnonzero(self.ev.category == CAT["step"])}
        self.codegen_lanes = {k for k, v in trace.lanes.items()
                              if any(m in v.lower() for m in COMPILER_THREAD_MARKS)}
        # a TF1 reader op runs its reading on a thread of its own, named for it
        self.reader_lanes = {k for k, v in trace.lanes.items() if v.startswith(READER_THREAD_PREFIX)}

    # --- per event, without context ----------------------------------------------------

    def own(self) -> np.ndarray:
        """Rules 1-8 that need no parent: label/basis per event; returns a mask of events
        whose label is generic (may be refined by an enclosing event)."""
        ev, names = self.ev, self.names
        generic = np.zeros(len(ev), bool)
        kernel = ev.category == CAT["xla_kernel"]
        # the rules read names only: decide once per distinct name tuple, then spread back
        for key, idx in _groups(ev.hlo_module, ev.hlo_op, mask=kernel):
            klab, kbas, ksplit, kops, kunit = self._kernel(names[key[0]], names[key[1]])
            self.label[idx], self.basis[idx] = klab, kbas
            self._attach(idx, kunit, ksplit, kops)
        for key, idx in _groups(ev.category, ev.name, ev.op_type, ev.tf_name, mask=~kernel):
            cat, name, op_type, tf_name = key
            lab, bas, wait, gen, unit, split, ops = self._event(
                cat, names[name], names[op_type], names[tf_name])
            self.label[idx], self.basis[idx], self.wait[idx], generic[idx] = lab, bas, wait, gen
            self._attach(idx, unit, split, ops)
        lanes_step = self.step_lanes
        if lanes_step:
            # unknown events on the step (Python) thread are Python-side work: runtime
            unk = (self.label == UNMAPPED) & (ev.category == CAT["other"]) & \
                in_lanes(ev.pid, ev.tid, lanes_step)
            self.label[unk], self.basis[unk] = LABEL["runtime"], BASIS["runtime"]
            generic[unk] = True
        # a reader thread is the seed's read stage only in a trace of an image pipeline (the
        # generic view calls it input either way)
        reader = self.reader_lanes if self.weak_ok else set()
        for lanes, stage in ((self.codegen_lanes, "xla_compile"), (reader, "read")):
            if lanes:  # XLA's compiler threads; TF1 reader threads
                on = in_lanes(ev.pid, ev.tid, lanes)
                self.label[on], self.basis[on], generic[on] = LABEL[stage], BASIS["lane"], False
        return generic

    def _attach(self, idx: np.ndarray, unit: str | None,
                split: list[tuple[int, float]] | None, ops: list[tuple[str, str]] | None
                ) -> None:
        """Record a group's XLA unit, stage split and TF ops per event (only when present)."""
        for attr, value in (("unit", unit), ("splits", split), ("ops", ops)):
            if value:
                getattr(self, attr).update(dict.fromkeys(idx.tolist(), value))

    def _event(self, cat: int, name: str, op_type: str, tf_name: str) -> Rule:
        """(label, basis, wait, generic, unit, split, ops) of a non-kernel event."""
        L, B = LABEL, BASIS
        if cat == CAT["step"]:
            return L["runtime"], B["runtime"], False, True, None, None, None
        if cat == CAT["xla_compile"] or tfops.is_compiler_event(name):
            unit = tfops.cluster_of(tf_name, name) if cat == CAT["xla_compile"] else None
            return L["xla_compile"], B["op_type"], False, False, unit, None, None
        if cat == CAT["xla_run"]:
            unit = tfops.cluster_of(tf_name, name)
            if self.tr.format == "timeline":
                return self._cluster_run(unit)
            return L["xla_run"], B["op_type"], False, False, unit, None, None
        if tfops.is_input_wait(op_type, name):
            return L["input_wait"], B["op_type"], True, False, None, None, None
        if name.startswith(tfops.MAKE_ITERATOR_PREFIX):  # tf.data building an iterator (each epoch)
            return L["runtime"], B["tf_data"], False, False, None, None, None
        if name in tfops.DATA_SERVICE_FETCH_EVENTS:  # waiting on a tf.data service worker
            return L["input_wait"], B["tf_data"], True, False, None, None, None
        if name.startswith(tfops.TFDATA_ITERATOR_PREFIX):
            kind = tfops.tfdata_kind(name)
            if tfops.is_tfdata_async(name):
                return L["input_wait"], B["tf_data"], True, False, None, None, None
            if kind in tfops.TFDATA_KIND_STAGE and self.weak_ok:  # any program batches
                return L[tfops.TFDATA_KIND_STAGE[kind]], B["tf_data"], False, False, None, None, None
            # generic: the stage of the work nested inside, else runtime (see _tfdata_fill)
            return L["runtime"], B["tf_data"], False, True, None, None, None
        if op_type and (op_type in self.function_ops or op_type.startswith(tfops.FUNCTION_OP_PREFIX)):
            if op_type in self.function_ops:  # the unit is known from the kernels inside
                return L["xla_run"], B["op_type"], False, False, None, None, None
            return L["runtime"], B["runtime"], False, False, None, None, None
        if op_type or cat == CAT["op"] or cat == CAT["queue"] or cat == CAT["tf_data"]:
            stage, basis = _op_rule(op_type or name, tf_name, self.weak_ok)
            if stage:
                gen = basis == "op_type" and stage == "runtime"
                return L[stage], B[basis], False, gen, None, None, None
            if cat in (CAT["op"], CAT["queue"]):
                return UNMAPPED, B["unmapped"], False, True, None, None, None
        if name.startswith(tfops.XLA_RUNTIME_PREFIXES):
            return (L["xla_run"], B["runtime"], name.startswith(tfops.WAIT_EVENT_PREFIXES), False,
                    None, None,
                    None)
        if name.startswith(tfops.WAIT_EVENT_PREFIXES):
            return L["runtime"], B["runtime"], True, True, None, None, None
        if cat in (CAT["runtime"], CAT["python"]) or name.startswith(tfops.RUNTIME_PREFIXES):
            return L["runtime"], B["runtime"], False, True, None, None, None
        return UNMAPPED, B["unmapped"], False, True, None, None, None

    def _cluster_run(self, unit: str) -> Rule:
        """A timeline's _XlaRun (no kernel events inside): rule 7."""
        L, B = LABEL, BASIS
        ref = self.reference.get(_cluster_key(unit, self.tr.meta.get("xla_aliases", {})))
        members = self.units.get(unit)
        ops = members.ops if members else None
        if ref:
            split = sorted(ref.items(), key=lambda kv: -kv[1])
            if len(split) == 1:
                return split[0][0], B["cluster_profile"], False, False, unit, None, ops
            return split[0][0], B["cluster_profile"], False, False, unit, split, ops
        if members:
            stages = {s for s in members.stages if s in PIPELINE_STAGES}
            if len(stages) == 1 and set(members.stages) <= stages | {"runtime", "unmapped"}:
                return L[stages.pop()], B["cluster_members"], False, False, unit, None, ops
        return L["xla_run"], B["op_type"], False, False, unit, None, ops

    def _kernel(self, module: str, hlo_op: str) -> KernelRule:
        """An XLA kernel event: (label, basis, split, ops, unit) through the HLO (rule 2)."""
        L, B = LABEL, BASIS
        mod = self.tr.hlo.get(module)
        if mod is None:
            return L["xla_run"], B["op_type"], None, None, _unit_guess(module)
        unit = self.module_unit[module]
        weights = mod.tf_op_weights(hlo_op)
        ops = [o for o in weights if o[1] not in tfops.XLA_ARG_OPS]
        per: dict[int, float] = defaultdict(float)
        for (t, n), (_, elems) in weights.items():
            if n in tfops.XLA_ARG_OPS:
                continue
            s = stage_of_op(t, n, self.weak_ok)
            per[L[s] if s and s in PIPELINE_STAGES else L["xla_run"]] += elems
        if not per:
            # no TF op behind this kernel (copies, layout changes): the unit's stage if it has
            # only one, else time inside the cluster that cannot be split
            stages = {s for s in self.units[unit].stages if s in PIPELINE_STAGES}
            if len(stages) == 1:
                return L[stages.pop()], B["hlo"], None, ops, unit
            return L["xla_run"], B["op_type"], None, ops, unit
        if len(per) == 1:
            return next(iter(per)), B["hlo"], None, ops, unit
        total = sum(per.values())
        split = sorted(((lab, w / total) for lab, w in per.items()), key=lambda kv: -kv[1])
        return split[0][0], B["hlo_split"], split, ops, unit

    # --- context: nesting, dataflow ----------------------------------------------------

    def nest(self, generic: np.ndarray) -> None:
        """Parents per lane; launches of compiled code and compiles found from what they hold;
        generic events inherit the stage of the op they run inside."""
        ev = self.ev
        nest = self.tr.nesting
        self.parent = nest.parent
        walk = nest.walk()   # parents before their children
        end_marks = [i for i, n in enumerate(self.names) if n.startswith(tfops.XLA_KERNEL_END_MARK)]
        real_child = walk[~np.isin(ev.name[walk], end_marks)]
        has_child = np.zeros(len(ev), bool)   # a child that is not just an "end: <kernel>" mark
        has_child[self.parent[real_child]] = True
        walk = walk.tolist()
        # Launches of compiled code: an executor or function-call event holding XLA's runtime
        # directly runs compiled code (xla_run); holding compiler work directly, it compiled
        # first (xla_compile). Kernels tell which unit it launched.
        comp, run = LABEL["xla_compile"], LABEL["xla_run"]
        rt, b_rt = LABEL["runtime"], BASIS["runtime"]
        xla_rt = (self.label == run) & (self.basis == b_rt)
        own_compile = (self.label == comp) & (ev.category != CAT["xla_compile"]) & \
            (self.basis == BASIS["op_type"])   # the compiler's own events, not _XlaCompile
        direct_xla, direct_comp = np.zeros(len(ev), bool), np.zeros(len(ev), bool)
        for i in reversed(walk):
            p = int(self.parent[i])
            direct_xla[p] |= bool(xla_rt[i]) or ev.category[i] == CAT["xla_kernel"]
            direct_comp[p] |= bool(own_compile[i])
            if i in self.unit and p not in self.unit and self.label[p] in (rt, run):
                self.unit[p] = self.unit[i]
        region = self.tr.strings.lookup(tfops.WORKER_REGION)
        launch = generic & (self.label == rt) & (self.basis == b_rt) & ~self.wait & \
            (ev.name != (region if region is not None else -1))
        self.label[launch & direct_xla] = run
        self.label[(launch | (self.label == run)) & direct_comp] = comp
        generic[launch & (direct_xla | direct_comp)] = False
        self._function_waits()
        inherit = frozenset(PIPELINE) | {run, comp, LABEL["input_wait"]}
        for i in walk:
            p = int(self.parent[i])
            if generic[i] and self.label[p] in inherit and i not in self.splits:
                self.label[i] = self.label[p]
                self.basis[i] = BASIS["inherited"]
                self.wait[i] = self.wait[i] or self.wait[p]
                if p in self.splits:
                    self.splits[i] = self.splits[p]
                if p in self.unit:
                    self.unit[i] = self.unit[p]
        if region is not None:
            # a worker region with no work inside (at most the "end: <kernel>" mark XLA:CPU
            # leaves where a kernel's parallel partition finished) ran shards of other ops
            self.orphan = (ev.name == region) & ~has_child & (self.parent < 0) & \
                (self.label == LABEL["runtime"]) & (self.basis == BASIS["runtime"])
            self.basis[self.orphan] = BASIS["concurrent_op"]
        self._tfdata_fill(has_child)

    def _function_waits(self) -> None:
        """The calling thread's kernel execution of a ``tf.function`` (an
        ``EagerKernelExecute`` inside ``EagerLocalExecute: __inference_*``) is that thread
        waiting for the function's ops on the inter-op threads, not runtime work of its own:
        counted as working, it took a share of every instant from the ops."""
        ev, names = self.ev, self.names
        kern = [i for i, n in enumerate(names) if n.startswith(tfops.FUNCTION_KERNEL_EXECUTE)]
        calls = {i for i, n in enumerate(names) if tfops.FUNCTION_CALL_EVENT.match(n)}
        if not kern or not calls:
            return
        cand = np.flatnonzero(np.isin(ev.name, kern) & (self.label == LABEL["runtime"]) &
                              (self.basis == BASIS["runtime"]) & ~self.wait)
        for i in cand.tolist():
            p = int(self.parent[i])
            while p >= 0 and int(ev.name[p]) not in calls:
                p = int(self.parent[p])
            if p >= 0:
                self.wait[i] = True

    def _tfdata_fill(self, has_child: np.ndarray) -> None:
        """Generic ``Iterator::*`` events take the stage of the work nested in them."""
        ev = self.ev
        cand = np.flatnonzero((self.basis == BASIS["tf_data"]) & (self.label == LABEL["runtime"])
                              & has_child)
        if not len(cand):
            return
        cset = set(cand.tolist())
        acc: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        for j in np.flatnonzero(np.isin(self.parent, cand)):
            if self.label[j] in PIPELINE:
                acc[int(self.parent[j])][int(self.label[j])] += float(ev.dur[j])
        for p in cset:
            if acc.get(p):   # the label with the most time (the first such, on a tie)
                self.label[p] = max(acc[p].items(), key=lambda kv: kv[1])[0]

    def dataflow(self) -> None:
        """Timeline dataflow (``input0..N``): Minimum/Maximum fed by a jitter -> clip; a gather
        fed by a shuffle -> shuffle; an op still unmapped whose consumers all belong to one
        stage (a random draw feeding a jitter) -> that stage."""
        ev = self.ev
        if not len(ev.input_ids):
            return
        label_of_node: dict[int, int] = {}
        for i in np.flatnonzero(ev.tf_name > 0):
            label_of_node.setdefault(int(ev.tf_name[i]), int(self.label[i]))
        lookup = self.tr.strings.lookup
        clip_types = {lookup(t) for t in CLIP_OPS} - {None}
        gather_types = {lookup(t) for t in GATHER_OPS} - {None}
        consumers: dict[int, list[int]] = defaultdict(list)   # node -> consumer events
        producers: dict[int, list[int]] = defaultdict(list)   # node -> its events
        ptr, ids = ev.input_ptr, ev.input_ids
        for i in np.flatnonzero(np.diff(ptr) > 0):
            for x in ids[ptr[i]:ptr[i + 1]]:
                consumers[int(x)].append(int(i))
        for i in np.flatnonzero(ev.tf_name > 0):
            producers[int(ev.tf_name[i])].append(int(i))
        # the labels of each node's consumer events, counted (a node may run thousands of
        # times in a trace: its consumers are counted once, not read again per event)
        consumer_labels: dict[int, Counter[int]] = defaultdict(Counter)
        for node, js in consumers.items():
            consumer_labels[node].update(int(self.label[j]) for j in js)
        same_block: dict[int, bool] = {}   # node -> _same_block with its consumers, once
        # worklists: when an op gets a stage, its producers and consumers are looked at again
        # (those whose facts changed); the rules that follow a jitter or a shuffle first, the
        # consumers' stage after them
        # an op of the backward pass or an optimizer is never pulled into a pipeline stage;
        # by its consumers only an op whose scopes are all the pipeline's
        names = self.names
        model_side = {t for t in np.unique(ev.tf_name[ev.tf_name > 0]).tolist()
                      if is_model_side(names[t])}
        for by_consumers in (False, True):
            todo = [int(i) for i in np.flatnonzero(self.label == UNMAPPED)
                    if int(ev.tf_name[i]) not in model_side]
            queued = set(todo)
            while todo:
                k = todo.pop()
                queued.discard(k)
                if self.label[k] != UNMAPPED:
                    continue
                node = int(ev.tf_name[k])
                src = {label_of_node.get(int(x), UNMAPPED) for x in ev.inputs_of(k)}
                if ev.op_type[k] in clip_types and src & JITTER:
                    new = LABEL["clip"]
                elif ev.op_type[k] in gather_types and LABEL["shuffle"] in src:
                    new = LABEL["shuffle"]
                else:
                    dst = {lab for lab, n in consumer_labels.get(node, {}).items() if n > 0}
                    if node not in same_block:
                        users = {names[ev.tf_name[j]] for j in consumers.get(node, ())}
                        same_block[node] = _same_block(names[node], list(users))
                    if not (by_consumers and len(dst) == 1 and dst <= PIPELINE and (
                            _plain(names[ev.op_type[k]], names[node]) or same_block[node])):
                        continue
                    new = dst.pop()
                self.label[k], self.basis[k] = new, BASIS["dataflow"]
                again = list(consumers.get(node, ())) if label_of_node.get(node) != new else []
                label_of_node[node] = new
                for x in ev.inputs_of(k):
                    c = consumer_labels[int(x)]
                    c[UNMAPPED] -= 1
                    c[new] += 1
                    if c[UNMAPPED] == 0 or c[new] == 1:  # its consumers' labels changed
                        again.extend(producers.get(int(x), ()))
                for j in again:
                    if j not in queued and self.label[j] == UNMAPPED and \
                            int(ev.tf_name[j]) not in model_side:
                        queued.add(j)
                        todo.append(j)


def _groups(*cols: np.ndarray, mask: np.ndarray
            ) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
    """(key tuple, event indices) for every distinct combination of ``cols`` among ``mask``."""
    idx = np.flatnonzero(mask)
    if not len(idx):
        return
    keys = np.stack([c[idx].astype(np.int64) for c in cols], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    cuts = np.flatnonzero(np.diff(inv[order])) + 1
    for k, members in zip(uniq, np.split(idx[order], cuts)):
        yield tuple(int(x) for x in k), members


def _unit_guess(module: str) -> str:
    m = tfops.FUNCTION_MODULE.match(module)
    return "_" + m.group(1) if m else re.sub(r"__XlaCompiledKernel.*$", "", module)


def _cluster_key(unit: str, aliases: dict[str, str]) -> str:
    return str(aliases.get(unit, unit))


def _cluster_profile(ref: StageMap) -> dict[str, dict[int, float]]:
    """Per cluster of a profile: the fraction of its kernel time per label."""
    ev = ref.trace.events
    acc: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for i in np.flatnonzero(ev.category == CAT["xla_kernel"]):
        unit = ref.unit.get(int(i))
        if not unit:
            continue
        for lab, frac in ref.fractions(int(i)):
            acc[unit][lab] += frac * float(ev.dur[i])
    out = {}
    for unit, c in acc.items():
        total = sum(c.values())
        if total > 0:
            out[unit] = {lab: v / total for lab, v in c.items() if v > 0}
    return out


def map_stages(trace: Trace, reference: StageMap | None = None,
               lookups: list[int] | None = None) -> StageMap:
    """Label every event of ``trace`` (see the module docstring); the trace is not changed.
    ``reference``: the StageMap of a
    profile of the same run, used to split a timeline's cluster runs (rule 7). ``lookups``:
    the ``_XlaCompile`` calls that only looked their program up in the cache (the XLA
    summary decides, :attr:`compare.analysis.xla.XlaSummary.lookup_events`): XLA's dispatch
    plumbing, runtime, not compilation."""
    m = _Mapper(trace, reference)
    generic = m.own()
    if lookups:
        m.label[lookups], m.basis[lookups] = LABEL["runtime"], BASIS["op_type"]
    m.nest(generic)
    m.dataflow()
    return StageMap(trace=trace, label=m.label, basis=m.basis, wait=m.wait, orphan=m.orphan,
                    input=inputs.inside_input(trace),
                    parent=m.parent, splits=m.splits, ops=m.ops, unit=m.unit, units=m.units)
