"""The few protobuf messages we read from TensorBoard profiles, declared here so that reading a
profile never imports TensorFlow (``import tensorflow`` alone takes seconds).

Only the fields we read are declared, with the field numbers of the real definitions
(``tsl/profiler/protobuf/xplane.proto`` and ``xla/service/hlo.proto`` / ``xla/xla_data.proto``);
protobuf skips the fields a message does not declare, so a real ``XSpace`` or ``HloProto``
parses into these classes unchanged. The messages live in a private descriptor pool, so they
never clash with TensorFlow's own classes of the same names when both are loaded.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_TYPES = {"int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64, "string": _F.TYPE_STRING,
          "bytes": _F.TYPE_BYTES}

#: message -> [(field, number, type or message name, repeated)]: the subset we read.
_XPLANE = {
    "XSpace": [("planes", 1, "XPlane", True), ("hostnames", 4, "string", True)],
    "XPlane": [("id", 1, "int64", False), ("name", 2, "string", False),
               ("event_metadata", 4, "XPlane.EventMetadataEntry", True),
               ("stat_metadata", 5, "XPlane.StatMetadataEntry", True)],
    "XPlane.EventMetadataEntry": [("key", 1, "int64", False),
                                  ("value", 2, "XEventMetadata", False)],
    "XPlane.StatMetadataEntry": [("key", 1, "int64", False),
                                 ("value", 2, "XStatMetadata", False)],
    "XEventMetadata": [("id", 1, "int64", False), ("name", 2, "string", False),
                       ("stats", 5, "XStat", True)],
    "XStatMetadata": [("id", 1, "int64", False), ("name", 2, "string", False)],
    "XStat": [("metadata_id", 1, "int64", False), ("str_value", 5, "string", False),
              ("bytes_value", 6, "bytes", False)],
}
#: The same XSpace with its lines and events (what the memory events' stats record).
_XPLANE_EVENTS = {
    "XSpace": [("planes", 1, "XPlane", True)],
    "XPlane": [("name", 2, "string", False), ("lines", 3, "XLine", True),
               ("event_metadata", 4, "XPlane.EventMetadataEntry", True),
               ("stat_metadata", 5, "XPlane.StatMetadataEntry", True)],
    "XPlane.EventMetadataEntry": [("key", 1, "int64", False),
                                  ("value", 2, "XEventMetadata", False)],
    "XPlane.StatMetadataEntry": [("key", 1, "int64", False),
                                 ("value", 2, "XStatMetadata", False)],
    "XLine": [("name", 2, "string", False), ("events", 4, "XEvent", True)],
    "XEvent": [("metadata_id", 1, "int64", False), ("stats", 4, "XStat", True)],
    "XEventMetadata": [("id", 1, "int64", False), ("name", 2, "string", False)],
    "XStatMetadata": [("id", 1, "int64", False), ("name", 2, "string", False)],
    "XStat": [("metadata_id", 1, "int64", False), ("uint64_value", 3, "uint64", False),
              ("int64_value", 4, "int64", False), ("str_value", 5, "string", False),
              ("ref_value", 7, "uint64", False)],
}
_HLO = {
    "HloProto": [("hlo_module", 1, "HloModuleProto", False)],
    "HloModuleProto": [("name", 1, "string", False), ("entry_computation_name", 2, "string", False),
                       ("computations", 3, "HloComputationProto", True),
                       ("entry_computation_id", 6, "int64", False)],
    "HloComputationProto": [("name", 1, "string", False),
                            ("instructions", 2, "HloInstructionProto", True),
                            ("id", 5, "int64", False)],
    "HloInstructionProto": [("name", 1, "string", False), ("opcode", 2, "string", False),
                            ("shape", 3, "ShapeProto", False), ("metadata", 7, "OpMetadata", False),
                            ("called_computation_ids", 38, "int64", True)],
    "ShapeProto": [("dimensions", 3, "int64", True), ("tuple_shapes", 4, "ShapeProto", True)],
    "OpMetadata": [("op_type", 1, "string", False), ("op_name", 2, "string", False)],
}


def _file(name: str, package: str, messages: dict) -> descriptor_pb2.FileDescriptorProto:
    f = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
    made: dict[str, descriptor_pb2.DescriptorProto] = {}
    for full in messages:  # parents are listed before their nested map entries
        outer, _, inner = full.partition(".")
        msg = made[outer].nested_type.add(name=inner) if inner else f.message_type.add(name=outer)
        if inner:
            msg.options.map_entry = True
        made[full] = msg
        for field, number, kind, repeated in messages[full]:
            fd = msg.field.add(name=field, number=number,
                               label=_REPEATED if repeated else _OPTIONAL)
            if kind in _TYPES:
                fd.type = _TYPES[kind]
            else:
                fd.type, fd.type_name = _F.TYPE_MESSAGE, f".{package}.{kind}"
    return f


def _classes() -> dict[str, type]:
    pool = descriptor_pool.DescriptorPool()
    out = {}
    for fname, package, messages in (("compare_xplane_subset.proto", "xplane_subset", _XPLANE),
                                     ("compare_xplane_events.proto", "xplane_events",
                                      _XPLANE_EVENTS),
                                     ("compare_hlo_subset.proto", "hlo_subset", _HLO)):
        pool.Add(_file(fname, package, messages))
        for name in messages:
            if "." not in name:
                out[f"{package}.{name}"] = message_factory.GetMessageClass(
                    pool.FindMessageTypeByName(f"{package}.{name}"))
    return out


_CLASSES = _classes()
#: A profile's ``XSpace`` (planes, their event and stat metadata; no lines or events).
XSpace = _CLASSES["xplane_subset.XSpace"]
#: The same ``XSpace`` with its lines, events and their stats (stat values by id).
XSpaceEvents = _CLASSES["xplane_events.XSpace"]
#: XLA's ``HloProto``: the module, its computations and instructions with TF op metadata.
HloProto = _CLASSES["hlo_subset.HloProto"]
