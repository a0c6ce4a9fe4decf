"""What each XLA module holds: its HLO instructions and the TF ops they came from.

A TensorBoard profile's ``/host:metadata`` plane carries every compiled module's ``HloProto``.
Each HLO instruction (also those inside fused computations) has ``metadata.op_type`` and
``metadata.op_name`` — the TF node it was lowered from, name scopes included. XLA:CPU writes one
trace event per executed kernel with ``hlo_module`` / ``hlo_op`` args, so joining the two maps
a kernel's time to the TF ops (and so the stages) it computed. This is the bridge from a TF1 op
to the fusion that replaced it.
"""
from __future__ import annotations

import dataclasses
import re
from functools import lru_cache

from google.protobuf.message import DecodeError

from common.errors import InputError
from common.protos import HloProto, XSpace  # our own declarations: no TensorFlow import

#: The ``.N`` instance suffix XLA gives module and instruction names.
INSTANCE_SUFFIX = re.compile(r"\.\d+$")
#: An XLA module of TF auto-clustering: ``cluster_3__XlaCompiledKernel_true__...``.
CLUSTER_MODULE = re.compile(r"^(cluster_\d+)__XlaCompiledKernel")
#: An XLA module of a ``jit_compile`` function: ``a_inference_augment_123__.42``.
FUNCTION_MODULE = re.compile(r"^a?(_inference_.+?_\d+)__")


def strip_instance(name: str) -> str:
    """``fusion`` from ``fusion.3``."""
    return INSTANCE_SUFFIX.sub("", name)


#: An HLO instruction printed as text: ``[%name = ]shape opcode(operands), attributes...``; the
#: shape is an array (``f32[4096]{0}``) or a tuple of them (``(f32[1]{0}, f32[1,1000]{1,0})``).
HLO_TEXT = re.compile(r"^\s*(?:%?(?P<name>[\w.\-]+)\s*=\s*)?"
                      r"(?P<shape>\((?:[^()]|\([^()]*\))*\)|[a-z]\w*\[[\d,]*\](?:\{[\d,]*\})?)"
                      r"\s+(?P<opcode>[a-z][\w\-]*)\(")
_LAYOUT = re.compile(r"\{[^{}]*\}")
_KIND = re.compile(r"\bkind=k(\w+)")


def short_instruction(text: str) -> str:
    """A short name for an HLO instruction printed whole (TF 1.x's XLA:GPU names each kernel
    by its fused computation's full text, hundreds of characters): its name when it has one
    (``fusion.3``), else its opcode, fusion kind and result shape (``fusion (Input) ->
    f32[4096]``). Any other text is returned as it is."""
    m = HLO_TEXT.match(text)
    if not m:
        return text
    if m.group("name"):
        return m.group("name")
    kind = _KIND.search(text)
    shape = _LAYOUT.sub("", m.group("shape"))
    return f"{m.group('opcode')}{f' ({kind.group(1)})' if kind else ''} -> {shape}"


@dataclasses.dataclass
class HloInstruction:
    name: str
    opcode: str
    op_type: str
    op_name: str
    called: tuple[str, ...]
    elements: int = 1   # elements of the output shape (tuples summed): a proxy of its work


@dataclasses.dataclass
class HloModule:
    """One compiled XLA module; ``computations`` maps a computation name to its instructions."""

    name: str
    entry: str
    computations: dict[str, list[HloInstruction]]

    def __post_init__(self) -> None:
        self.by_name = {i.name: i for insts in self.computations.values() for i in insts}

    @property
    def cluster(self) -> str:
        """``cluster_N`` for a TF auto-clustering module, else the module name without ``.N``."""
        m = CLUSTER_MODULE.match(self.name)
        return m.group(1) if m else strip_instance(self.name)

    def _walk(self, instruction: str):
        """The instruction and every instruction of the computations it calls (fused bodies,
        recursively), each once, depth first in program order."""
        stack, visited = [instruction], set()
        while stack:
            inst = self.by_name.get(stack.pop())
            if inst is None or inst.name in visited:
                continue
            visited.add(inst.name)
            yield inst
            for comp in inst.called:
                stack.extend(i.name for i in reversed(self.computations.get(comp, [])))

    def tf_ops(self, instruction: str) -> list[tuple[str, str]]:
        """(op_type, op_name) of the TF ops an instruction computes, fused bodies included,
        in first-seen order without repeats."""
        return list(dict.fromkeys((i.op_type, i.op_name) for i in self._walk(instruction)
                                  if i.op_name))

    def tf_op_weights(self, instruction: str) -> dict[tuple[str, str], tuple[int, int]]:
        """For each TF op an instruction computes (fused bodies included): (number of HLO
        instructions, their total output elements). Instructions without TF metadata are left
        out; used to split a fusion's time among the TF ops fused into it."""
        out: dict[tuple[str, str], tuple[int, int]] = {}
        for inst in self._walk(instruction):
            if inst.op_name:
                n, e = out.get((inst.op_type, inst.op_name), (0, 0))
                out[(inst.op_type, inst.op_name)] = (n + 1, e + inst.elements)
        return out

    def all_tf_ops(self) -> list[tuple[str, str]]:
        """Every TF op with at least one instruction in this module, in first-seen order."""
        seen: dict[tuple[str, str], None] = {}
        for insts in self.computations.values():
            for i in insts:
                if i.op_name:
                    seen.setdefault((i.op_type, i.op_name), None)
        return list(seen)

    def entry_kernels(self) -> list[str]:
        """Names of the entry computation's instructions that run as kernels (not parameters,
        constants, tuples or bitcasts)."""
        skip = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}
        return [i.name for i in self.computations.get(self.entry, []) if i.opcode not in skip]


def unit_names(modules: dict[str, "HloModule"]) -> dict[str, tuple[str, str]]:
    """module name -> (unit name, kind) for every module: ``cluster_N`` for auto-clustering
    ("cluster"); ``__inference_<fn>_<N>`` for a ``jit_compile`` function ("function"), with
    ``[1]``, ``[2]``... when the function was compiled as several modules (an eager call and a
    call from another function compile separately)."""
    out: dict[str, tuple[str, str]] = {}
    by_fn: dict[str, list[str]] = {}
    for name, mod in modules.items():
        m = FUNCTION_MODULE.match(name)
        if m:
            by_fn.setdefault("_" + m.group(1), []).append(name)
        else:
            out[name] = (mod.cluster, "cluster")
    for fn, names in by_fn.items():
        names = sorted(names)
        for k, name in enumerate(names, 1):
            out[name] = (fn if len(names) == 1 else f"{fn}[{k}]", "function")
    return out


def _elements(shape) -> int:
    """Elements of an HLO ShapeProto (tuples: the sum over their parts; scalars: 1)."""
    if shape.tuple_shapes:
        return sum(_elements(t) for t in shape.tuple_shapes)
    n = 1
    for d in shape.dimensions:
        n *= max(int(d), 1)
    return n


def parse_hlo_proto(data: bytes) -> HloModule:
    proto = HloProto()
    proto.ParseFromString(data)
    mod = proto.hlo_module
    ids = {c.id: c.name for c in mod.computations}
    comps = {}
    for c in mod.computations:
        comps[c.name] = [HloInstruction(i.name, i.opcode, i.metadata.op_type, i.metadata.op_name,
                                        tuple(ids[k] for k in i.called_computation_ids if k in ids),
                                        _elements(i.shape))
                         for i in c.instructions]
    entry = ids.get(mod.entry_computation_id, mod.entry_computation_name)
    return HloModule(mod.name, entry, comps)


def modules_from_xplanes(paths: list[str], source: str) -> dict[str, HloModule]:
    """HLO modules from the ``/host:metadata`` plane of each xplane file.

    Raises :class:`common.errors.InputError` when a file cannot be read or is not an XSpace
    protobuf.
    """
    return dict(_modules_cached(tuple(paths), source))


@lru_cache(maxsize=16)
def _modules_cached(paths: tuple[str, ...], source: str) -> tuple:

    out: dict[str, HloModule] = {}
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InputError(f"{path}: cannot read ({e.strerror})") from None
        space = XSpace()
        try:
            space.ParseFromString(data)
        except (DecodeError, ValueError, RuntimeError):
            raise InputError(f"{path}: not JSON and not a valid .xplane.pb") from None
        if not space.planes:
            raise InputError(f"{path}: not JSON and not an .xplane.pb with planes")
        for plane in space.planes:
            if plane.name != "/host:metadata":
                continue
            names = {k: v.name for k, v in plane.stat_metadata.items()}
            for meta in plane.event_metadata.values():
                for stat in meta.stats:
                    if names.get(stat.metadata_id) == "Hlo Proto" and stat.bytes_value:
                        try:
                            m = parse_hlo_proto(stat.bytes_value)
                        except (DecodeError, ValueError):
                            continue
                        out[m.name] = m
    return tuple(out.items())
