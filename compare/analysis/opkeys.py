"""Which TF op each event ran, as the key both traces are matched by: (normalised node name, op
type). An xprof GPU kernel counts for the TF op it ran inside (:mod:`compare.analysis.kernels`);
an XLA kernel is split among the TF ops fused into it by the output elements of their HLO
instructions (the HLO metadata of its cluster or compiled function); a cluster run is its
cluster. Copies are ops of their own (``MemcpyH2D``), on the host's side of a transfer too.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from compare.analysis.analyse import TraceAnalysis
from compare.analysis.kernels import kernel_ops
from compare.analysis.rows import work_mask
from compare.model.events import CAT, Events, Trace
from compare.vocabulary import ops as tfops
from compare.vocabulary.groups import COPY_NAME, strip_wrappers
from compare.vocabulary.labels import SCOPE_SUFFIX

Key = tuple[str, str]   # (normalised node name, op type)

#: Categories whose events are ops (or compiled code running ops).
OP_CATEGORIES = [CAT[c] for c in ("op", "queue", "tf_data", "xla_run", "xla_compile",
                                  "xla_kernel")]


def normalise(tf_name: str) -> str:
    """The matching key's name: wrappers, copy edge numbers and Send/Recv suffixes dropped."""
    name = strip_wrappers(tf_name)
    m = tfops.COPY_EDGE.match(name)
    if m:
        name = "edge_" + m.group(1)
    return tfops.SEND_RECV_SUFFIX.sub("", name)


def type_key(op_type: str) -> str:
    """An op type without the number of a function call (``__inference_step_123``)."""
    return SCOPE_SUFFIX.sub("", op_type) if op_type.startswith(tfops.FUNCTION_OP_PREFIX) \
        else op_type


def copy_mask(trace: Trace) -> np.ndarray:
    """Per event: a copy or memset (by its name), on a device row or a host row."""
    names = trace.strings.names
    return np.array([bool(COPY_NAME.match(s)) for s in names], bool)[trace.events.name] \
        if len(trace.events) else np.zeros(0, bool)


@dataclasses.dataclass
class EventOps:
    """The op events of a trace and what each ran: ``idx`` (event ids, ascending), per event
    its entries ``ptr[k]:ptr[k+1]`` into ``keys`` (indices into ``names``) and ``fracs`` (the
    share of its time each op gets: 1.0 but for XLA kernels), ``units`` per key (the XLA
    cluster or function it ran inside, if any)."""

    idx: np.ndarray
    ptr: np.ndarray
    keys: np.ndarray
    fracs: np.ndarray
    names: list[Key]
    units: list[str]


def op_events(a: TraceAnalysis) -> EventOps:
    """Every event that runs an op (each piece of work once: duplicate rows and kernel
    launches left out) with the op keys it ran."""
    tr, ev = a.trace, a.trace.events
    kops = kernel_ops(tr)
    joined = np.zeros(len(ev), bool)
    joined[list(kops.op_of)] = True
    counted = work_mask(tr) & (
        (np.isin(ev.category, OP_CATEGORIES) & ((ev.op_type > 0) | (ev.hlo_op > 0)))
        | joined | copy_mask(tr)) & ~kops.launches
    idx = np.flatnonzero(counted)
    src = sources(idx, kops.op_of)
    uniq, inv = name_groups(ev, src)
    weights = XlaWeights(a)
    names = tr.strings.names
    key_id: dict[Key, int] = {}
    units: list[str] = []
    per_group: list[list[tuple[int, float]]] = []
    for rep in uniq.tolist():
        entries = []
        for name, op_type, frac, unit in keys_of(a, rep, weights, names):
            k = key_id.get((name, op_type))
            if k is None:
                k = key_id[(name, op_type)] = len(units)
                units.append(unit)
            entries.append((k, frac))
        per_group.append(entries)
    sizes = np.array([len(e) for e in per_group], np.int64)
    n = sizes[inv] if len(inv) else np.zeros(0, np.int64)
    ptr = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
    flat_k = [np.array([k for k, _ in e], np.int64) for e in per_group]
    flat_f = [np.array([f for _, f in e], np.float64) for e in per_group]
    if len(inv) and (sizes == 1).all():
        keys = np.array([e[0][0] for e in per_group], np.int64)[inv]
        fracs = np.array([e[0][1] for e in per_group], np.float64)[inv]
    elif len(inv):
        keys = np.concatenate([flat_k[g] for g in inv.tolist()])
        fracs = np.concatenate([flat_f[g] for g in inv.tolist()])
    else:
        keys, fracs = np.zeros(0, np.int64), np.zeros(0)
    return EventOps(idx, ptr, keys, fracs, list(key_id), units)


def sources(idx: np.ndarray, op_of: dict[int, int]) -> np.ndarray:
    """Per event of ``idx``, the event that names its op (itself, or an xprof kernel's TF
    op)."""
    src = idx.copy()
    if op_of:
        pos = {int(i): k for k, i in enumerate(idx.tolist())}
        for k, op in op_of.items():
            if k in pos:
                src[pos[k]] = op
    return np.asarray(src)


def name_groups(ev: Events, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a representative event per distinct name tuple, each event's group): the keys are
    decided once per group."""
    if not len(src):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cols = np.stack([getattr(ev, c)[src].astype(np.int64) for c in
                     ("name", "op_type", "tf_name", "category", "hlo_module", "hlo_op")], axis=1)
    _, first, inv = np.unique(cols, axis=0, return_index=True, return_inverse=True)
    return src[first], inv.reshape(-1)


class XlaWeights:
    """Per (module, HLO op): the TF ops it computes and each one's share of its time."""

    def __init__(self, a: TraceAnalysis) -> None:
        self.hlo, self.units = a.trace.hlo, a.smap
        self.cache: dict[tuple[int, int], list[tuple[str, str, float]]] = {}

    def of(self, module: str, hlo_op: str, key: tuple[int, int]
           ) -> list[tuple[str, str, float]]:
        if key not in self.cache:
            mod = self.hlo.get(module)
            w = {k: e for k, (_, e) in (mod.tf_op_weights(hlo_op) if mod else {}).items()
                 if k[1] not in tfops.XLA_ARG_OPS}
            total = float(sum(w.values()))
            self.cache[key] = [(t, n, e / total if total else 1.0 / len(w))
                               for (t, n), e in w.items()]
        return self.cache[key]


def keys_of(a: TraceAnalysis, i: int, weights: XlaWeights, names: list[str]
            ) -> list[tuple[str, str, float, str]]:
    """(key name, op type, fraction, unit) of what event ``i`` ran."""
    ev = a.trace.events
    op_type, tf_name = names[ev.op_type[i]], names[ev.tf_name[i]]
    if ev.category[i] == CAT["xla_kernel"]:
        unit = a.smap.unit.get(i, "")
        parts = weights.of(names[ev.hlo_module[i]], names[ev.hlo_op[i]],
                           (int(ev.hlo_module[i]), int(ev.hlo_op[i])))
        if parts:
            return [(normalise(n), t, f, unit) for t, n, f in parts]
        return [(f"{unit}/{names[ev.hlo_op[i]]}", "xla kernel", 1.0, unit)]
    if op_type in tfops.XLA_OPS:
        unit = tfops.cluster_of(tf_name, names[ev.name[i]])
        return [(unit, op_type, 1.0, unit)]
    name = normalise(tf_name) if tf_name else names[ev.name[i]]
    # the call of a jit_compile function: its own unit (its kernels run inside it)
    unit = op_type if op_type.startswith(tfops.FUNCTION_OP_PREFIX) and \
        op_type in a.xla.units else ""
    return [(name, type_key(op_type) or names[ev.name[i]], 1.0, unit)]


def event_keys(a: TraceAnalysis) -> dict[int, Key]:
    """Event -> the (name, type) key of the op it ran (an XLA kernel: its largest TF op; an
    xprof kernel: its TF op), for every event that names one."""
    tr, ev, names = a.trace, a.trace.events, a.trace.strings.names
    kops = kernel_ops(tr)
    idx = np.flatnonzero((ev.op_type > 0) | (ev.hlo_op > 0))
    idx = np.union1d(idx, np.fromiter(kops.op_of, np.int64, len(kops.op_of)))
    src = sources(idx, kops.op_of)
    uniq, inv = name_groups(ev, src)
    weights = XlaWeights(a)
    per = [max(keys_of(a, rep, weights, names), key=lambda k: k[2])[:2] for rep in uniq.tolist()]
    return {int(i): per[g] for i, g in zip(idx.tolist(), inv.tolist())}
