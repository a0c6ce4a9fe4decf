"""The generic view: every event of any TF program in a group of
:mod:`compare.vocabulary.groups` (input, preprocessing, compute by top-level scope, optimizer,
communication, copy, XLA, runtime), beside the seed's stages of :mod:`compare.analysis.mapping`.

Rules, first match wins:

1. An event the mapper put in a pipeline stage on the pipeline's own evidence keeps it, as its
   group (read/assemble/shuffle -> input, decode...clip -> preprocessing).
2. An XLA kernel takes the group of the TF ops fused into it (from the HLO), most of them;
   xla_run when the trace carries no HLO (a trace viewer JSON of a ``jit_compile`` function).
3. The event's op type and node name (:func:`compare.vocabulary.groups.group_of_op`).
4. Its row: a ``memcpy`` row is copies; tf.data and reader threads are input; kernels on a GPU
   stream with no TF op named are compute.
5. The mapper's overhead label (input_wait -> input, xla_compile, xla_run, runtime); an
   ``_XlaCompile`` the mapper found to be a cache lookup is runtime. Running or compiling XLA
   code (the mapper's xla_run, xla_compile) and TF's own runtime events the mapper calls
   runtime take that group before the row's rule 4, so both views say the same of them.
6. Events that rules 3-5 call runtime or leave open (a CUDA launch, a Python frame) and that
   run inside another event take that event's group (a kernel launch inside ``Conv2D`` is
   ``Conv2D``'s work); TF's executor and thread-pool events stay runtime wherever they run
   (as in the stage view, so "runtime" is one number in both).

Anything else is ``unmapped``.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Sequence

import numpy as np

from compare.analysis.kernels import kernel_ops
from compare.analysis.mapping import StageMap, _groups
from compare.analysis.rows import lane_role, process_roles
from compare.model.events import CAT, Trace
from compare.vocabulary.groups import (
    GROUP,
    GROUPS,
    STAGE_GROUP,
    TOP_LEVEL,
    group_of_op,
    top_scope,
)
from compare.vocabulary.labels import LABEL, LABELS, PIPELINE
from compare.vocabulary.ops import category_of

#: Scope of device kernels whose TF op the trace does not name.
KERNELS_SCOPE = "(GPU kernels)"
#: Groups a nested event may take from the event it runs inside.
_INHERITABLE = frozenset(GROUP[g] for g in ("input", "preprocessing", "compute", "optimizer",
                                           "communication", "copy", "xla_compile", "xla_run"))

#: Groups whose events are ops' work: a worker region running an op's shards is shown as that
#: op's group (:meth:`compare.analysis.attribution.Attribution.segment_labels`).
OP_GROUPS = frozenset(GROUP[g] for g in ("input", "preprocessing", "compute", "optimizer",
                                         "communication", "copy", "xla_run", "unmapped"))


@dataclasses.dataclass
class GroupMap:
    """Per event: ``group`` (index into :data:`GROUPS`) and ``scope`` (the program's top-level
    name scope of a ``compute`` event, else "")."""

    group: np.ndarray
    scope: list[str]

    def key(self, i: int) -> str:
        """The row an event belongs to: ``compute: layer_1``, ``optimizer``, ..."""
        g = GROUPS[self.group[i]]
        return f"{g}: {self.scope[i]}" if g == "compute" else g


def _lane_group(trace: Trace, pid: int, tid: int, roles: dict[int, str]) -> str | None:
    role = roles.get(pid, "other")
    if role == "gpu_memcpy":
        return "copy"
    lrole = lane_role(trace, pid, tid)
    if lrole in ("tf_data", "reader"):
        return "input"
    if lrole == "stream" or role in ("gpu_stream", "gpu_stream_all"):
        return "compute"
    if lrole == "python":
        return "runtime"
    return None


def _kernel_group(ops: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """(group, scope) of an XLA kernel from the TF ops fused into it: the most common."""
    votes: Counter[tuple[str, str]] = Counter()
    for t, n in ops:
        g = group_of_op(t, n) or "compute"
        votes[(g, top_scope(n) if g == "compute" else "")] += 1
    return votes.most_common(1)[0][0] if votes else ("xla_run", "")


def map_groups(trace: Trace, smap: StageMap) -> GroupMap:
    """Every event's group (see the module docstring)."""
    ev, names = trace.events, trace.strings.names
    n = len(ev)
    group = np.zeros(n, np.int8)
    scope = np.zeros(n, np.int32)          # string ids until the end
    generic = np.zeros(n, bool)
    pipeline = np.isin(smap.label, sorted(PIPELINE))
    stage_group = np.array([GROUP[STAGE_GROUP.get(lab, "unmapped")] for lab in LABELS], np.int8)
    group[pipeline] = stage_group[smap.label[pipeline]]                 # rule 1
    kernel = ~pipeline & (ev.category == CAT["xla_kernel"])
    xla_ops = {i: smap.ops.get(i, ()) for i in np.flatnonzero(kernel).tolist()}
    seen: dict[int, tuple[int, int]] = {}
    for i, ops in xla_ops.items():                                   # rule 2
        if id(ops) not in seen:
            g, s = _kernel_group(ops)
            seen[id(ops)] = (GROUP[g], trace.strings.id(s))
        group[i], scope[i] = seen[id(ops)]
    lane_code = _lane_codes(trace)
    rest = ~pipeline & ~np.isin(np.arange(n), list(xla_ops))
    for key, idx in _groups(ev.name, ev.op_type, ev.tf_name, smap.label, lane_code, mask=rest):
        name, op_type, tf_name, lab, lane = key
        g, s, gen = _decide(names[name], names[op_type], names[tf_name], lab, _LANE_GROUPS[lane])
        group[idx], scope[idx], generic[idx] = GROUP[g], trace.strings.id(s), gen
    kops = kernel_ops(trace)   # xprof GPU kernels: their TF op; launches: runtime
    for k, op in kops.op_of.items():
        group[k], scope[k] = group[op], scope[op]
    group[kops.launches], generic[kops.launches] = GROUP["runtime"], False
    # an _XlaCompile the mapper found to be a cache lookup is XLA's dispatch plumbing
    lookup = (ev.category == CAT["xla_compile"]) & (smap.label == LABEL["runtime"])
    group[lookup], generic[lookup] = GROUP["runtime"], False
    _inherit(trace, group, scope, generic)
    return GroupMap(group, [names[k] for k in scope.tolist()])


#: What a lane says of its events' group (code -> group), see :func:`_lane_group`.
_LANE_GROUPS = (None, "copy", "input", "compute", "runtime")


def _lane_codes(trace: Trace) -> np.ndarray:
    """Per event, the code in :data:`_LANE_GROUPS` of what its lane says."""
    ev = trace.events
    if not len(ev):
        return np.zeros(0, np.int8)
    roles = process_roles(trace)
    lanes, inv = np.unique(np.stack([ev.pid, ev.tid], axis=1), axis=0, return_inverse=True)
    codes = np.array([_LANE_GROUPS.index(_lane_group(trace, int(p), int(t), roles))
                      for p, t in lanes], np.int8)
    return codes[inv.reshape(-1)]


def _decide(name: str, op_type: str, tf_name: str, label: int, lane: str | None
            ) -> tuple[str, str, bool]:
    """(group, scope, generic) of a non-pipeline, non-kernel event: rules 3-5. TF's own
    runtime events (the executor, its callbacks, thread pools) are runtime on any thread, a
    tf.data thread's too, as in the stage view (so "runtime" is one number in both views)."""
    if label == LABEL["runtime"] and category_of(name, op_type, "", False) == CAT["runtime"]:
        return "runtime", "", False
    if label in (LABEL["xla_run"], LABEL["xla_compile"]):   # running or compiling XLA code
        return LABELS[label], "", False
    g = group_of_op(op_type, tf_name, name)
    if lane == "copy" or (lane == "input" and g in (None, "runtime", "compute")):
        return lane, "", False
    if g == "compute":
        return g, top_scope(tf_name) if tf_name else TOP_LEVEL, False
    if g is not None and g != "runtime":
        return g, "", False
    if lane == "compute" and g is None:  # a GPU kernel the trace names no op for
        return "compute", KERNELS_SCOPE, False
    if lane == "runtime" and g is None:  # the Python thread: dispatch
        return "runtime", "", True
    fallback = STAGE_GROUP.get(LABELS[label])
    if g == "runtime" or fallback == "runtime":
        return "runtime", "", True
    if fallback:
        return fallback, "", False
    return "unmapped", "", True


def _inherit(trace: Trace, group: np.ndarray, scope: np.ndarray, generic: np.ndarray) -> None:
    """Rule 6: generic events take the group of the event they run inside."""
    nest = trace.nesting
    for i in nest.walk().tolist():
        p = int(nest.parent[i])
        if generic[i] and group[p] in _INHERITABLE:
            group[i], scope[i] = group[p], scope[p]
            generic[i] = generic[p]
