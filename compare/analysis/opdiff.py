"""Op by op, one trace against another: which TF ops changed, appeared, vanished or were fused.

Per side, each TF op's time per steady step (mean over the steady steps), from the side's
account (:mod:`compare.analysis.account`: each event clipped to its step window, its own time,
each kernel and copy once): ``host_us`` on host rows (for a GPU op: its launch), ``device_us``
on a GPU's rows (kernels and copies), ``us`` = host + device; ``wall_us``: its share of the
step's wall time, which is what the step difference (:mod:`compare.analysis.step_delta`) adds
up. What each event ran: :mod:`compare.analysis.opkeys`.

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
from typing import Callable

import numpy as np

from compare.analysis.account import Account
from compare.analysis.analyse import TraceAnalysis
from compare.analysis.noise import Test
from compare.analysis.opkeys import Key, normalise
from compare.vocabulary import ops as tfops
from compare.vocabulary.groups import RUNTIME_OPS
from compare.vocabulary.labels import GRAD_SCOPE_SUFFIX, SCOPE_SUFFIX
from compare.vocabulary.thresholds import (
    CLUSTERS_NAMED,
    OP_SAME_SHARE,
    OP_SAME_US,
    TYPE_ROWS_KEPT,
)

STATUSES = ("same", "changed", "added", "removed", "fused", "unfused")
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
    wall_us: float = 0.0            # its share of the step's wall time (see account)

    @property
    def us(self) -> float:
        return self.host_us + self.device_us


@dataclasses.dataclass
class OpDiff:
    """One row of ``ops_diff``: per steady step, ``a`` = side a, ``b`` = side b; ``us`` is op
    time (host + device), ``wall_us`` its share of the step's wall time."""

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
    into: str = ""                  # fused: the side ("a"/"b") whose cluster holds them
    a_wall_us: float = 0.0
    b_wall_us: float = 0.0
    test: "Test | None" = None      # the change against the step-to-step spread
    units: int = 0                  # fused by XLA: the compiled units (clusters, functions)
    keys: dict[str, list[tuple[str, str]]] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def delta_us(self) -> float:
        return self.b_us - self.a_us


# --------------------------------------------------------------------------------------------
# per side: op -> time per steady step, from the side's account

def scope_key(name: str) -> str:
    """Pass 2's key: TF's ``_N`` uniquifying suffixes dropped from every part, also where a
    gradient's scope repeats its op's (``gradients_3/MatMul_3_grad/MatMul_1`` ->
    ``gradients/MatMul_grad/MatMul``)."""
    return "/".join(SCOPE_SUFFIX.sub("", GRAD_SCOPE_SUFFIX.sub("", p)) for p in name.split("/"))


@dataclasses.dataclass
class SideOps:
    """One side's ops (``ops``: (name, type) -> time per steady step) and, per op type, its
    ops' wall time per steady step (``type_wall_us``: their share of the step, so overlapping
    ops, such as asynchronous all-reduces waiting together, share their instants)."""

    ops: dict[Key, OpStat]
    type_wall_us: dict[str, float]
    samples: dict[Key, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)


def op_table(acc: Account) -> SideOps:
    """Every op of one side with its host and device time (busy) and its wall share, mean per
    steady step, from the side's account (:mod:`compare.analysis.account`)."""
    n_ops = len(acc.ops)
    op = np.array([c.op for c in acc.cells], np.int64)
    dev = np.array([c.device for c in acc.cells], bool)
    # ids: 2 * op + device, for cells that hold an op
    ids = np.where(op >= 0, 2 * op + dev, 2 * n_ops)
    busy = acc.mean("busy", ids, 2 * n_ops + 1)
    wall = acc.mean("wall", ids, 2 * n_ops + 1)
    count = acc.mean("count", ids, 2 * n_ops + 1)
    group = _op_groups(acc, n_ops)
    out: dict[Key, OpStat] = {}
    for k, info in enumerate(acc.ops):
        host, device = float(busy[2 * k]), float(busy[2 * k + 1])
        n = float(count[2 * k] + count[2 * k + 1])
        if not (host or device or n):
            continue
        out[info.key] = OpStat(info.key[1], host, device, n, info.unit, group[k], info.key,
                               float(wall[2 * k] + wall[2 * k + 1]))
    return SideOps(out, _type_wall(out), {})


def _op_groups(acc: Account, n_ops: int) -> list[str]:
    """Each op's group: that of the cell holding most of its time (over all steps)."""
    best = [("", -1.0)] * n_ops
    totals = np.zeros(len(acc.cells))
    for st in acc.steps:
        np.add.at(totals, st.cells, st.busy + st.wall)
    for cid, c in enumerate(acc.cells):
        if c.op >= 0 and totals[cid] > best[c.op][1]:
            best[c.op] = (c.group, float(totals[cid]))
    return [g for g, _ in best]


def _type_wall(ops: dict[Key, OpStat]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for st in ops.values():
        out[st.type] += st.wall_us
    return dict(out)


def op_samples(acc: Account, keys: list[Key], what: str = "busy") -> dict[Key, np.ndarray]:
    """Per op of ``keys``: its ``what`` in each steady step (for the noise tests)."""
    index = {info.key: k for k, info in enumerate(acc.ops)}
    want = {index[k]: j for j, k in enumerate(keys) if k in index}
    ids = np.array([want.get(c.op, len(keys)) if c.op >= 0 else len(keys)
                    for c in acc.cells], np.int64)
    m = acc.per_step(what, ids, len(keys) + 1)
    return {k: m[j] for j, k in enumerate(keys) if k in index}


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
        for gkey in sorted(set(ga) & set(gb)):
            ka, kb = ga[gkey], gb[gkey]
            rows.append(_row(gkey.partition("\0")[0], [left_a.pop(k) for k in ka],
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


def _by(side: dict[Key, OpStat], keyf: Callable[..., str] | None) -> dict[str, list[Key]]:
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
    Conv2D, BiasAdd and Relu), one row per fused op. Status ``unfused`` when side b
    runs the pieces apart, ``fused`` when it fuses them (``into`` the side holding the fused
    op)."""
    rows = []
    for fused_side, pieces_side, into in ((left_a, left_b, "a"),
                                          (left_b, left_a, "b")):
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
            a, b = (fused, pieces) if into == "a" else (pieces, fused)
            row = _row(key[0], a, b, "name", members=sorted(k[0] for k in parts))
            row.status, row.into = ("unfused" if into == "a" else "fused"), into
            row.type = st.type
            rows.append(row)
    return rows


def _row(op: str, a: list[OpStat], b: list[OpStat], match: str,
         members: list[str] | None = None) -> OpDiff:
    def tot(stats: list[OpStat], attr: str) -> float:
        return round(sum(float(getattr(s, attr)) for s in stats), 1)

    src = (a or b)[0]
    row = OpDiff(op, src.type, tot(a, "us"), tot(b, "us"), round(sum(s.count for s in a), 2),
                 round(sum(s.count for s in b), 2), "", match, src.group,
                 tot(a, "host_us"), tot(a, "device_us"), tot(b, "host_us"), tot(b, "device_us"),
                 members or [])
    row.status = _status(row.a_us, row.b_us) if a and b else ("removed" if a else "added")
    row.keys = {"a": [s.key for s in a], "b": [s.key for s in b]}
    row.a_wall_us, row.b_wall_us = tot(a, "wall_us"), tot(b, "wall_us")
    return row


def _status(a_us: float, b_us: float) -> str:
    big = max(a_us, b_us)
    return "same" if abs(b_us - a_us) <= max(OP_SAME_US, OP_SAME_SHARE * big) else "changed"


def _compiled_units(side: dict[Key, OpStat]) -> dict[str, list[Key]]:
    """A side's compiled units left unmatched, each with its rows: an XLA cluster's run
    (``_XlaRun``, ``_XlaLaunch``: named by its cluster), and a ``jit_compile`` function's call
    and the kernels no HLO splits into TF ops (by the unit they ran inside)."""
    out: dict[str, list[Key]] = defaultdict(list)
    for k, st in side.items():
        if st.type in tfops.XLA_RUN_OPS:
            out[k[0]].append(k)
        elif st.unit and (st.type == XLA_KERNEL or st.type.startswith(tfops.FUNCTION_OP_PREFIX)
                          or k[1].startswith(tfops.FUNCTION_OP_PREFIX)):
            out[st.unit].append(k)
    return dict(out)


#: The op type of an XLA kernel no HLO splits into TF ops (:func:`compare.analysis.opkeys.
#: keys_of`).
XLA_KERNEL = "xla kernel"


def _fused(left_a: dict[Key, OpStat], left_b: dict[Key, OpStat],
           units: dict[str, dict[str, set[str]]]) -> list[OpDiff]:
    """Ops left on one side that the other side's new XLA units (clusters, compiled
    functions) hold: one row per unit (or per set of units when the trace does not say which
    holds what)."""
    rows = []
    for gone, new, side_new in ((left_a, left_b, "b"), (left_b, left_a, "a")):
        compiled = _compiled_units(new)
        if not compiled:
            continue
        owners, joint = _cluster_owners(sorted(compiled), units.get(side_new, {}))
        claimed: dict[str, list[Key]] = defaultdict(list)
        loose = [k for k, s in gone.items() if s.group not in _UNCLUSTERABLE_GROUPS
                 and s.type not in RUNTIME_OPS and s.type not in tfops.XLA_OPS]
        for k in loose:
            owner = owners.get(k[0], joint)
            if owner:
                claimed[owner].append(k)
        by_name = {u: keys for u, keys in compiled.items()}
        by_name[joint] = [k for keys in compiled.values() for k in keys]
        for owner, ops in claimed.items():
            runs = [new.pop(c) for c in by_name[owner] if c in new]
            former = [gone.pop(k) for k in ops]
            a, b = (former, runs) if side_new == "b" else (runs, former)
            row = _row(owner, a, b, "xla", members=sorted(k[0] for k in ops))
            lead = max(runs, key=lambda st: st.us)
            row.type = next((st.type for st in runs if st.type in tfops.XLA_RUN_OPS or
                             st.type.startswith(tfops.FUNCTION_OP_PREFIX)), lead.type)
            row.status, row.group, row.into = "fused", "xla_run", side_new
            row.units = len(compiled) if owner == joint else 1
            rows.append(row)
    return rows


def _cluster_owners(units: list[str], members: dict[str, set[str]]
                    ) -> tuple[dict[str, str], str]:
    """(op name -> the first unit holding it, the name of all units as one owner): the
    joint owner ("" unless no unit says what it holds) takes every op."""
    owners: dict[str, str] = {}
    for u in units:
        for m in members.get(u, ()):
            owners.setdefault(m, u)
    if any(members.get(u) for u in units):
        return owners, ""
    names = sorted(units)
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
        def total(attr: str) -> float:
            return round(sum(float(getattr(r, attr)) for r in rest), 1)

        rows = rows[:TYPE_ROWS_KEPT] + [TypeDiff(
            f"({len(rest)} more types)", total("a_us"), total("b_us"), total("a_wall_us"),
            total("b_wall_us"), sum(r.a_nodes for r in rest), sum(r.b_nodes for r in rest))]
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
