"""Op by op, one trace against another: which TF ops changed, appeared, vanished or were fused.

Per side, each TF op's time per steady step (mean over the steady steps), host and device
apart: host = its events on host/executor rows (for a GPU op: its launch), device = its
kernels and copies on the GPU's rows (a timeline's stream rows; an xprof trace's stream kernels,
each joined to its TF op by :mod:`compare.analysis.kernels`); an XLA kernel's time is split among
the TF ops fused into it by the output elements of their HLO instructions (the HLO metadata of
its cluster or compiled function). An op's ``us`` is host + device. Events nested in another
counted event are not counted twice (self time).

Matching, as HTA's and TraceLens's TraceDiff do it, in passes: (1) the node name with XLA
cluster and function-call prefixes removed (``cluster_2_1/``, ``StatefulPartitionedCall/``),
copy edge numbers and Send/Recv suffixes dropped, and the op type; (1b) a Grappler remapper
fusion on one side only (``_FusedConv2D`` against the Conv2D, BiasAdd and Relu of its scope on
the other: *unfused* or *fused*); (2) what is left, by the name with TF's uniquifying ``_N``
suffixes removed from every scope (``crop_3/Slice_1`` -> ``crop/Slice``), all nodes of a
name together, first with the same op type, then with any (an oneDNN ``_Mkl`` variant);
(3) what is still left, by op type. Then XLA: ops that vanished
from one side while the other runs XLA clusters the first does not are *fused* into them —
into the cluster whose HLO or membership lists them, or, when a timeline says nothing of what a
cluster holds, into the clusters that appeared — reported as one entry per cluster with the
ops' former time.
"""
from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict

import numpy as np

from compare.analysis.analyse import TraceAnalysis
from compare.analysis.groups import GroupMap
from compare.analysis.kernels import kernel_ops
from compare.analysis.rows import on_gpu, work_mask
from compare.model.events import CAT
from compare.model.intervals import union_per_group
from compare.vocabulary import ops as tfops
from compare.vocabulary.groups import COPY_NAME, GROUPS, RUNTIME_OPS, strip_wrappers
from compare.vocabulary.labels import GRAD_SCOPE_SUFFIX, SCOPE_SUFFIX
from compare.vocabulary.thresholds import (
    CLUSTERS_NAMED,
    OP_SAME_SHARE,
    OP_SAME_US,
    TYPE_ROWS_KEPT,
)

STATUSES = ("same", "changed", "added", "removed", "fused", "unfused")
#: Categories whose events are ops (or compiled code running ops).
_OP_CATEGORIES = [CAT[c] for c in ("op", "queue", "tf_data", "xla_run", "xla_compile",
                                   "xla_kernel")]
#: Ops XLA's auto-clustering never takes into a cluster: graph plumbing, variables, feeds,
#: input, communication and copies; they stay outside when the rest is fused.
_UNCLUSTERABLE_GROUPS = frozenset({"input", "communication", "copy", "runtime", "xla_compile",
                                   "xla_run"})


@dataclasses.dataclass
class OpStat:
    """One op on one side, per steady step."""

    type: str
    host_us: float = 0.0
    device_us: float = 0.0
    count: float = 0.0
    unit: str = ""                  # the XLA cluster/function it ran inside, if any
    group: str = ""                 # its group in the generic view
    key: tuple[str, str] = ("", "")  # (normalised node name, op type)

    @property
    def us(self) -> float:
        return self.host_us + self.device_us


@dataclasses.dataclass
class OpDiff:
    """One row of ``ops_diff``: per steady step, ``a`` = legacy side, ``b`` = modern side."""

    op: str
    type: str
    a_us: float
    b_us: float
    a_count: float
    b_count: float
    status: str
    match: str                      # "name", "scope", "type", "xla" or "" (added/removed)
    group: str = ""
    a_host_us: float = 0.0
    a_device_us: float = 0.0
    b_host_us: float = 0.0
    b_device_us: float = 0.0
    members: list[str] = dataclasses.field(default_factory=list)   # fused: the ops it holds
    into: str = ""                  # fused: the side ("legacy"/"modern") whose cluster holds them
    keys: dict[str, list[tuple[str, str]]] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def delta_us(self) -> float:
        return self.b_us - self.a_us


# --------------------------------------------------------------------------------------------
# per side: op -> time per steady step

def normalise(tf_name: str) -> str:
    """Pass 1's key: wrappers, copy edge numbers and Send/Recv suffixes dropped."""
    name = strip_wrappers(tf_name)
    m = tfops.COPY_EDGE.match(name)
    if m:
        name = "edge_" + m.group(1)
    return tfops.SEND_RECV_SUFFIX.sub("", name)


def scope_key(name: str) -> str:
    """Pass 2's key: TF's ``_N`` uniquifying suffixes dropped from every part, also where a
    gradient's scope repeats its op's (``gradients_3/MatMul_3_grad/MatMul_1`` ->
    ``gradients/MatMul_grad/MatMul``)."""
    return "/".join(SCOPE_SUFFIX.sub("", GRAD_SCOPE_SUFFIX.sub("", p)) for p in name.split("/"))


def _type_key(op_type: str) -> str:
    """An op type without the number of a function call (``__inference_step_123``)."""
    return SCOPE_SUFFIX.sub("", op_type) if op_type.startswith(tfops.FUNCTION_OP_PREFIX) else op_type


Key = tuple[str, str]   # (normalised node name, op type)


@dataclasses.dataclass
class SideOps:
    """One side's ops (``ops``: (name, type) -> time per steady step) and, per op type, the
    wall time some op of that type ran per steady step (``type_wall_us``: overlapping ops,
    such as asynchronous all-reduces waiting together, counted once)."""

    ops: dict[Key, OpStat]
    type_wall_us: dict[str, float]


def op_table(a: TraceAnalysis, gmap: GroupMap) -> SideOps:
    """Every op of one side with its host and device time per steady step."""
    tr, ev, names = a.trace, a.trace.events, a.trace.strings.names
    steady = {st.num for st in a.attribution.steady}
    n_steps = max(1, len(steady))
    kops = kernel_ops(tr)
    joined = np.zeros(len(ev), bool)
    joined[list(kops.op_of)] = True
    copies = np.array([bool(COPY_NAME.match(s)) for s in names])[ev.name]
    counted = work_mask(tr) & np.isin(ev.step, list(steady)) & (
        (np.isin(ev.category, _OP_CATEGORIES) & ((ev.op_type > 0) | (ev.hlo_op > 0)))
        | joined | (copies & on_gpu(tr))) & ~kops.launches
    idx = np.flatnonzero(counted)
    own = tr.self_time(idx) / n_steps
    gpu = on_gpu(tr)[idx]
    src = _sources(idx, kops.op_of)        # an xprof kernel counts for its TF op
    uniq, inv = _name_groups(ev, src)
    host = np.bincount(inv, own * ~gpu, minlength=len(uniq))
    dev = np.bincount(inv, own * gpu, minlength=len(uniq))
    count = np.bincount(inv, minlength=len(uniq)) / n_steps
    out: dict[Key, OpStat] = {}
    weights = _XlaWeights(a)
    whole: dict[int, str] = {}               # name group -> op type, when one op has it all
    for g, rep in enumerate(uniq.tolist()):
        keys = _keys(a, rep, weights, names)
        for name, op_type, frac, unit in keys:
            st = out.get((name, op_type))
            if st is None:
                st = out[(name, op_type)] = OpStat(op_type, unit=unit,
                                                   group=GROUPS[gmap.group[rep]],
                                                   key=(name, op_type))
            st.host_us += float(host[g]) * frac
            st.device_us += float(dev[g]) * frac
            st.count += float(count[g])
        if len(keys) == 1:
            whole[g] = keys[0][1]
    return SideOps(out, _type_wall(ev, idx, inv, whole, n_steps))


def _sources(idx: np.ndarray, op_of: dict[int, int]) -> np.ndarray:
    """Per event of ``idx``, the event that names its op (itself, or an xprof kernel's TF
    op)."""
    src = idx.copy()
    if op_of:
        pos = {int(i): k for k, i in enumerate(idx.tolist())}
        for k, op in op_of.items():
            if k in pos:
                src[pos[k]] = op
    return src


def _name_groups(ev, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a representative event per distinct name tuple, each event's group): the keys are
    decided once per group."""
    if not len(src):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cols = np.stack([getattr(ev, c)[src].astype(np.int64) for c in
                     ("name", "op_type", "tf_name", "category", "hlo_module", "hlo_op")], axis=1)
    _, first, inv = np.unique(cols, axis=0, return_index=True, return_inverse=True)
    return src[first], inv.reshape(-1)


def _type_wall(ev, idx: np.ndarray, inv: np.ndarray, whole: dict[int, str],
               n_steps: int) -> dict[str, float]:
    """Per op type, the union of its events' intervals per steady step (all types with one
    sort: a trace of many distinct types is not one pass over its events per type)."""
    if not whole:
        return {}
    types = list(dict.fromkeys(whole.values()))
    tid = {t: k for k, t in enumerate(types)}
    of_group = np.full(int(inv.max()) + 1, -1, np.int64)
    for g, t in whole.items():
        of_group[g] = tid[t]
    per = of_group[inv]
    keep = per >= 0
    sel = idx[keep]
    wall = union_per_group(per[keep], ev.ts[sel], ev.ts[sel] + ev.dur[sel], -np.inf, np.inf,
                           len(types))
    return {t: float(wall[k]) / n_steps for t, k in tid.items()}


def event_keys(a: TraceAnalysis) -> dict[int, tuple[str, str]]:
    """Event -> the (name, type) key of the op it ran (an XLA kernel: its largest TF op; an
    xprof kernel: its TF op), for every event that names one."""
    tr, ev, names = a.trace, a.trace.events, a.trace.strings.names
    kops = kernel_ops(tr)
    idx = np.flatnonzero((ev.op_type > 0) | (ev.hlo_op > 0))
    idx = np.union1d(idx, np.fromiter(kops.op_of, np.int64, len(kops.op_of)))
    src = _sources(idx, kops.op_of)
    uniq, inv = _name_groups(ev, src)
    weights = _XlaWeights(a)
    per = [max(_keys(a, rep, weights, names), key=lambda k: k[2])[:2] for rep in uniq.tolist()]
    return {int(i): per[g] for i, g in zip(idx.tolist(), inv.tolist())}


class _XlaWeights:
    """Per (module, HLO op): the TF ops it computes and each one's share of its time."""

    def __init__(self, a: TraceAnalysis) -> None:
        self.hlo, self.units = a.trace.hlo, a.smap
        self.cache: dict[tuple[int, int], list[tuple[str, str, float]]] = {}

    def of(self, module: str, hlo_op: str, key: tuple[int, int]):
        if key not in self.cache:
            mod = self.hlo.get(module)
            w = {k: e for k, (_, e) in (mod.tf_op_weights(hlo_op) if mod else {}).items()
                 if k[1] not in tfops.XLA_ARG_OPS}
            total = float(sum(w.values()))
            self.cache[key] = [(t, n, e / total if total else 1.0 / len(w))
                               for (t, n), e in w.items()]
        return self.cache[key]


def _keys(a: TraceAnalysis, i: int, weights: _XlaWeights, names: list[str]):
    """(key, op type, fraction, unit) of what event ``i`` ran."""
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
    return [(name, _type_key(op_type) or names[ev.name[i]], 1.0, "")]


# --------------------------------------------------------------------------------------------
# matching

def diff(a: dict[Key, OpStat], b: dict[Key, OpStat], units: dict[str, dict[str, set[str]]]
         ) -> list[OpDiff]:
    """Every op of either side matched and classified, largest |delta| first. ``units``: per
    side, XLA unit -> the normalised names of the TF ops it holds, where known."""
    rows: list[OpDiff] = []
    left_a, left_b = dict(a), dict(b)
    for key in sorted(set(a) & set(b)):                                     # pass 1
        rows.append(_row(key[0], [left_a.pop(key)], [left_b.pop(key)], "name"))
    rows += _remapped(left_a, left_b)
    for keyf, match in ((_scope_and_type, "scope"), (scope_key, "scope"), (None, "type")):
        ga, gb = _by(left_a, keyf), _by(left_b, keyf)                       # passes 2, 3
        for key in sorted(set(ga) & set(gb)):
            ka, kb = ga[key], gb[key]
            rows.append(_row(key.partition("\0")[0], [left_a.pop(k) for k in ka],
                             [left_b.pop(k) for k in kb], match,
                             members=sorted({k[0] for k in ka + kb})))
    rows += _fused(left_a, left_b, units)
    rows += [_row(k[0], [s], [], "") for k, s in left_a.items()]
    rows += [_row(k[0], [], [s], "") for k, s in left_b.items()]
    rows.sort(key=lambda r: (-abs(r.delta_us), r.op))
    return rows


def _scope_and_type(name: str, op_type: str) -> str:
    """Pass 2's key, type included: the same op under another copy of its scope."""
    return f"{scope_key(name)}\0{op_type}"


def _by(side: dict[Key, OpStat], keyf) -> dict[str, list[Key]]:
    out: dict[str, list[Key]] = defaultdict(list)
    for k, st in side.items():
        if st.type in tfops.XLA_OPS:  # clusters match by name or fuse, never by type
            continue
        if keyf is _scope_and_type:
            out[keyf(k[0], st.type)].append(k)
        else:
            out[keyf(k[0]) if keyf else st.type].append(k)
    return out


def _remapped(left_a: dict[Key, OpStat], left_b: dict[Key, OpStat]) -> list[OpDiff]:
    """Grappler's remapper fusions on one side only: a ``_Fused*`` op (named after the last
    op it absorbed) against the ops of its scope on the other side (``sequential/conv2d/``'s
    Conv2D, BiasAdd and Relu), one row per fused op. Status ``unfused`` when the modern side
    runs the pieces apart, ``fused`` when it fuses them (``into`` the side holding the fused
    op)."""
    rows = []
    for fused_side, pieces_side, into in ((left_a, left_b, "legacy"),
                                          (left_b, left_a, "modern")):
        for key, st in sorted(fused_side.items()):
            if key not in fused_side or not tfops.FUSED_OP.match(st.type):
                continue
            scope = key[0].rpartition("/")[0]
            parts = [k for k, p in pieces_side.items() if k[0].rpartition("/")[0] == scope
                     and not tfops.FUSED_OP.match(p.type) and p.type not in RUNTIME_OPS
                     and p.group in ("compute", "preprocessing")]
            if not parts or not (len({pieces_side[k].type for k in parts}) >= 2 or
                                 any(k[0] == key[0] for k in parts)):
                continue
            fused = [fused_side.pop(key)]
            pieces = [pieces_side.pop(k) for k in parts]
            a, b = (fused, pieces) if into == "legacy" else (pieces, fused)
            row = _row(key[0], a, b, "name", members=sorted(k[0] for k in parts))
            row.status, row.into = ("unfused" if into == "legacy" else "fused"), into
            row.type = st.type
            rows.append(row)
    return rows


def _row(op: str, a: list[OpStat], b: list[OpStat], match: str,
         members: list[str] | None = None) -> OpDiff:
    def tot(stats, attr):
        return round(sum(getattr(s, attr) for s in stats), 1)

    src = (a or b)[0]
    row = OpDiff(op, src.type, tot(a, "us"), tot(b, "us"), round(sum(s.count for s in a), 2),
                 round(sum(s.count for s in b), 2), "", match, src.group,
                 tot(a, "host_us"), tot(a, "device_us"), tot(b, "host_us"), tot(b, "device_us"),
                 members or [])
    row.status = _status(row.a_us, row.b_us) if a and b else ("removed" if a else "added")
    row.keys = {"legacy": [s.key for s in a], "modern": [s.key for s in b]}
    return row


def describe(r: OpDiff) -> str:
    """A row's name for a table: rows that share an op type stay apart (a type match lists
    its nodes, a scope match its nodes on both sides, a fusion its pieces)."""
    if r.status == "fused" and r.match == "xla":
        return f"{r.op} ({r.type}) <- {len(r.members)} ops"
    if r.status in ("fused", "unfused"):
        arrow = "<-" if r.status == "fused" else "->"
        return f"{r.op} ({r.type}) {arrow} " + " + ".join(m.rpartition("/")[2] for m in r.members)
    if r.match == "type":
        return f"{r.type} x{len(r.members)} by type: " + ", ".join(r.members[:3]) + \
            ("…" if len(r.members) > 3 else "")
    if r.match == "scope" and r.members and r.members != [r.op]:
        return f"{r.op} ({r.type}; " + ", ".join(r.members[:3]) + \
            ("…" if len(r.members) > 3 else "") + ")"
    return r.op if r.op == r.type else f"{r.op} ({r.type})"


def _status(a_us: float, b_us: float) -> str:
    big = max(a_us, b_us)
    return "same" if abs(b_us - a_us) <= max(OP_SAME_US, OP_SAME_SHARE * big) else "changed"


def _fused(left_a: dict[Key, OpStat], left_b: dict[Key, OpStat],
           units: dict[str, dict[str, set[str]]]) -> list[OpDiff]:
    """Ops left on one side that the other side's new XLA clusters hold: one row per cluster
    (or per set of clusters when the trace does not say which holds what)."""
    rows = []
    for gone, new, side_new in ((left_a, left_b, "modern"), (left_b, left_a, "legacy")):
        clusters = [k for k, s in new.items() if s.type in tfops.XLA_RUN_OPS]
        if not clusters:
            continue
        owners, joint = _cluster_owners(clusters, units.get(side_new, {}))
        claimed: dict[str, list[Key]] = defaultdict(list)
        loose = [k for k, s in gone.items() if s.group not in _UNCLUSTERABLE_GROUPS
                 and s.type not in RUNTIME_OPS and s.type not in tfops.XLA_OPS]
        for k in loose:
            owner = owners.get(k[0], joint)
            if owner:
                claimed[owner].append(k)
        by_name = {c[0]: [c] for c in clusters}
        by_name[joint] = clusters
        for owner, ops in claimed.items():
            runs = [new.pop(c) for c in by_name[owner]]
            former = [gone.pop(k) for k in ops]
            a, b = (former, runs) if side_new == "modern" else (runs, former)
            row = _row(owner, a, b, "xla", members=sorted(k[0] for k in ops))
            row.type, row.status, row.group, row.into = runs[0].type, "fused", "xla_run", \
                side_new
            rows.append(row)
    return rows


def _cluster_owners(clusters: list[Key], members: dict[str, set[str]]
                    ) -> tuple[dict[str, str], str]:
    """(op name -> the first cluster holding it, the name of all clusters as one owner): the
    joint owner ("" unless no cluster says what it holds) takes every op."""
    owners: dict[str, str] = {}
    for c in clusters:
        for m in members.get(c[0], ()):
            owners.setdefault(m, c[0])
    if any(members.get(c[0]) for c in clusters):
        return owners, ""
    names = sorted(c[0] for c in clusters)
    joint = "+".join(names) if len(names) <= CLUSTERS_NAMED else \
        "+".join(names[:CLUSTERS_NAMED]) + f"+... ({len(names):,} clusters)"
    return owners, joint


@dataclasses.dataclass
class TypeDiff:
    """One op type on both sides: its summed op time (``a_us``, ``b_us``), the wall time some
    op of it ran (``a_wall_us``, ``b_wall_us``: overlapping ops once), nodes per side."""

    type: str
    a_us: float
    b_us: float
    a_wall_us: float
    b_wall_us: float
    a_nodes: int
    b_nodes: int

    @property
    def delta_us(self) -> float:
        return self.b_us - self.a_us

    @property
    def wall_delta_us(self) -> float:
        return self.b_wall_us - self.a_wall_us


def by_type(a: SideOps, b: SideOps) -> list[TypeDiff]:
    """Per op type, every node of a type together, largest |wall delta| first."""
    ta, tb = _totals(a.ops), _totals(b.ops)
    rows = [TypeDiff(t, round(sum(s.us for s in ta.get(t, [])), 1),
                     round(sum(s.us for s in tb.get(t, [])), 1),
                     round(a.type_wall_us.get(t, 0.0), 1), round(b.type_wall_us.get(t, 0.0), 1),
                     len(ta.get(t, [])), len(tb.get(t, []))) for t in set(ta) | set(tb)]
    rows.sort(key=lambda r: (-abs(r.wall_delta_us), r.type))
    rest = rows[TYPE_ROWS_KEPT:]
    if rest:  # bounded whatever the trace: the smallest changes as one row
        rows = rows[:TYPE_ROWS_KEPT] + [TypeDiff(
            f"({len(rest)} more types)", *(round(sum(getattr(r, f) for r in rest), 1)
                                          for f in ("a_us", "b_us", "a_wall_us", "b_wall_us")),
            sum(r.a_nodes for r in rest), sum(r.b_nodes for r in rest))]
    return rows


def _totals(side: dict[Key, OpStat]) -> dict[str, list[OpStat]]:
    out: dict[str, list[OpStat]] = defaultdict(list)
    for st in side.values():
        out[st.type].append(st)
    return out


def unit_members(a: TraceAnalysis) -> dict[str, set[str]]:
    """XLA unit -> the normalised names of the TF ops it holds (HLO or xla_clusters.json)."""
    return {u: {normalise(n) for _, n in c.ops} for u, c in a.smap.units.items()}


def scopes_of(members: list[str], n: int = 4) -> str:
    """``softmax_cross_entropy/ x12, gradients/ x30``: the top scopes of a set of ops."""
    c = Counter(m.split("/", 1)[0] + ("/" if "/" in m else "") for m in members)
    return ", ".join(f"{s} x{k}" if k > 1 else s for s, k in c.most_common(n))
