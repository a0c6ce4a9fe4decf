"""Turns chunks of trace events into the columns of one :class:`compare.model.events.Trace`,
knowing each tool's dialect (timeline.py args, xprof's long names, groups and step markers);
infers steps when the trace marks none."""
from __future__ import annotations

import re
from collections import Counter
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any

import msgspec
import numpy as np
import orjson

from common.hlo import short_instruction
from compare.load import chrome_json, step_marks
from compare.load.duplicates import drop_repeated_runs
from compare.model.events import (
    CAT,
    MAX_NAME_CHARS,
    STRING_COLUMNS,
    WHOLE_TRACE,
    Counters,
    EventBuilder,
    Flows,
    Process,
    Step,
    Strings,
    Trace,
)
from compare.vocabulary.ops import (
    CUDA_CALL_ARG,
    SOURCE_NODE,
    TENSOR_DIM,
    TENSOR_DTYPE,
    XLA_GPU_KERNEL_OP,
    XLA_OPS,
    category_of,
    kernel_op,
    node_and_type,
)
from compare.vocabulary.rows import HOST_PLANE_PREFIX, process_kind

#: Integers the int64 columns hold; pid, tid, ids and groups outside are skipped or dropped.
_I64 = 1 << 63
#: Unknown phases named one by one in the warnings; more are counted together.
_UNKNOWN_PH_NAMED = 5
#: Tensors whose shape a timeline's snapshots give, kept per trace (one per tensor).
TENSOR_SHAPES_MAX = 50_000
#: ``DT_FLOAT`` -> ``float32``: a snapshot's dtype in the words allocation events use.
_DTYPE_WORDS = {"FLOAT": "float32", "DOUBLE": "float64", "HALF": "float16",
                "BFLOAT16": "bfloat16", "INT32": "int32", "INT64": "int64", "BOOL": "bool",
                "UINT8": "uint8", "STRING": "string"}
#: Timestamps and durations beyond this many µs are damage, skipped (see chrome_json).
MAX_TIME_US = chrome_json.MAX_TIME_US


#: The fields the typed path reads of each kind of event, read at C speed.
_X_FIELDS = attrgetter("pid", "tid", "ts", "dur", "name", "args")
_C_FIELDS = attrgetter("pid", "ts", "name", "args")
_FLOW_FIELDS = attrgetter("id", "pid", "tid", "ts", "name")
_PID, _NAME, _ARGS = attrgetter("pid"), attrgetter("name"), attrgetter("args")


class _Snapshot(msgspec.Struct):
    tensor_description: Any


class _SnapshotArgs(msgspec.Struct):
    """A tensor object snapshot's args as timeline.py writes them; only the description is
    decoded."""

    snapshot: _Snapshot


_SNAPSHOT = msgspec.json.Decoder(_SnapshotArgs)


def _timeline_inputs(args: tuple) -> tuple[np.ndarray, list[str]]:
    """(inputs per event, the producer node of each input in order) of timeline.py args
    ``{name, op, input0..N}`` (see :func:`_input_name`)."""
    pairs = [(j, v) for j, a in enumerate(args) if len(a) > 2
             for k, v in a.items() if k[:5] == "input" and type(v) is str]
    if not pairs:
        return np.zeros(len(args), dtype=np.int64), []
    owner, values = zip(*pairs)
    lengths = np.bincount(np.asarray(owner), minlength=len(args))
    joined = "\n".join(values)
    if "^" in joined or joined.count("\n") != len(values) - 1:   # control inputs, odd names
        return lengths, list(map(_input_name, values))
    return lengths, _PORT.sub("", joined).split("\n")   # a/b:1 -> a/b, all at once


#: An input's output port (``:1``) up to the end of its line in a joined list of inputs.
_PORT = re.compile(":[^\n]*")


def _int_in(value, bound: int, default):
    """``value`` as an int in [-bound, bound), else ``default``."""
    if value is None:
        return default
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return n if -bound <= n < bound else default


def _input_name(v: str) -> str:
    """The producer node of a timeline input: ``a/b`` from ``a/b:1``; ``^a/b`` is a control
    input from ``a/b``."""
    return v.split(":", 1)[0] if ":" in v and not v.startswith("^") else v.lstrip("^")


def _is_int(v) -> bool:
    """A JSON integer (``true`` is no pid)."""
    return isinstance(v, int) and type(v) is not bool


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and type(v) is not bool


#: The fields of a complete event the columns read, and the JSON type each must have.
_FIELD_TYPES = (("pid", _is_int, "an integer"), ("tid", _is_int, "an integer"),
                ("ts", _is_number, "a number"), ("dur", _is_number, "a number"))


def _wrong_type(e: dict) -> str:
    """Why a complete event cannot be read when a field has the wrong JSON type (a string
    pid, a list tid, an object as its name), naming the field and the type; else ""."""
    for field, ok, want in _FIELD_TYPES:
        v = e.get(field)
        if v is not None and not ok(v):
            return f"complete events whose {field} is {chrome_json.json_kind(v)}, not {want}"
    name = e.get("name")
    if isinstance(name, (dict, list, bool)):
        return f"complete events whose name is {chrome_json.json_kind(name)}, not a string"
    return ""


class Builder:
    """Turns chunks of raw event dicts into columns; knows the dialect quirks."""

    def __init__(self, strings: Strings, warnings: list[str]) -> None:
        self.s = strings
        self.warnings = warnings
        self.ev = EventBuilder()
        self.proc_names: dict[int, str] = {}
        self.proc_sort: dict[int, int] = {}
        self.lanes: dict[tuple[int, int], str] = {}
        self.counters: list[tuple] = []   # rows of the current chunk, then flushed into:
        self.counter_chunks: list[tuple] = []
        self.flows: list[tuple] = []
        self.flow_chunks: list[tuple] = []
        self.objects: dict[int, int] = {}
        self.tensor_shapes: dict[str, list[list[str]]] = {}   # timeline.py snapshots
        self.described: dict[str, list[str]] = {}   # a description's head -> [dtype, shape]
        self.pair_category: dict[int, int] = {}      # (name id, op id) key -> category
        self.open_b: dict[tuple[int, int], list[dict]] = {}
        self.skipped: dict[str, int] = {}
        self.first_skipped: dict[str, int] = {}   # reason -> index of its first event
        self.seen = 0                             # entries of the event list read so far
        self.marks = step_marks.Marks()
        self.timeline_style = False
        self.xprof_style = False

    def is_plain(self) -> bool:
        """Nothing here depends on events outside this builder's own: no open B/E pairs, no
        steps or groups, nothing skipped or warned about (see :func:`_add_in_halves`)."""
        return not (self.open_b or self.marks or self.skipped
                    or self.warnings or self.counters or self.flows or self.xprof_style
                    or self.s.cut)

    def export(self) -> dict:
        """This builder's columns and tables, to be :meth:`absorb` ed by another process."""
        self._flush()
        return {"names": self.s.names, "chunks": self.ev.chunks,
                "input_lengths": self.ev.input_lengths, "input_ids": self.ev.input_ids,
                "proc_names": self.proc_names, "proc_sort": self.proc_sort, "lanes": self.lanes,
                "counter_chunks": self.counter_chunks, "flow_chunks": self.flow_chunks,
                "objects": self.objects, "timeline_style": self.timeline_style,
                "tensor_shapes": self.tensor_shapes}

    def absorb(self, other: dict) -> None:
        """Append the events of an :meth:`export` ed builder that read the events after ours,
        as if this builder had read them itself (its string ids mapped onto ours)."""
        remap = np.asarray(self.s.ids(other["names"]), dtype=np.int32)
        for col, parts in other["chunks"].items():
            if col in STRING_COLUMNS:
                parts = [remap[p] for p in parts]
            self.ev.chunks[col].extend(parts)
        self.ev.input_lengths.extend(other["input_lengths"])
        self.ev.input_ids.extend(remap[p] for p in other["input_ids"])
        self.counter_chunks.extend((pid, remap[name], ts, value)
                                   for pid, name, ts, value in other["counter_chunks"])
        self.flow_chunks.extend((*f[:5], remap[f[5]]) for f in other["flow_chunks"])
        self.proc_names.update(other["proc_names"])
        self.proc_sort.update(other["proc_sort"])
        self.lanes.update(other["lanes"])
        for pid, n in other["objects"].items():
            self.objects[pid] = self.objects.get(pid, 0) + n
        self.timeline_style = self.timeline_style or other["timeline_style"]
        for name, shapes in other["tensor_shapes"].items():
            self.tensor_shapes.setdefault(name, shapes)

    def skip(self, why: str, n: int = 1, at: int | None = None) -> None:
        """Count ``n`` events skipped for ``why``; ``at``: the index of one in the event list
        (the first is named in the warning)."""
        self.skipped[why] = self.skipped.get(why, 0) + n
        if at is not None:
            self.first_skipped.setdefault(why, at)

    def add(self, events: list) -> None:
        if isinstance(events, chrome_json.TypedChunk):
            if self._add_typed(events):
                self.seen += len(events)
                return
            events = chrome_json.dicts(events, self.warnings)
        self._add_dicts(events)
        self.seen += len(events)
        self._flush()

    def _add_dicts(self, events: list) -> None:
        xs, bs = [], []
        for k, e in enumerate(events, self.seen):
            if type(e) is not dict:
                self.skip("entries that are not JSON objects", at=k)
                continue
            if not e:
                continue  # xprof ends its list with an empty object
            ph = e.get("ph")
            if ph == "X":
                xs.append((k, e))
            elif ph in ("B", "E"):
                bs.append((k, e))
            elif ph == "M":
                self._meta(e, k)
            elif ph == "C":
                self._counter(e, k)
            elif ph in ("s", "t", "f"):
                self._flow(e, k)
            elif ph in ("N", "O", "D"):
                pid = e.get("pid")
                if isinstance(pid, int) and ph == "N":
                    self.objects[pid] = self.objects.get(pid, 0) + 1
                name = e.get("name")
                if ph == "O" and isinstance(name, str) and name not in self.tensor_shapes:
                    self._snapshot(name, lambda e=e: e.get("args"))
            elif ph in ("i", "I", "R", "P", "b", "e", "n", "S", "T", "F", "c"):
                pass  # instants, marks, async and sample events: not used by our analyses
            elif isinstance(ph, (list, dict)):
                self.skip(f"events whose ph is {chrome_json.json_kind(ph)}, not a phase letter",
                          at=k)
            else:
                self.skip(self._unknown_ph(ph), at=k)
        if bs:
            xs.extend(self._close_pairs(bs))
        if xs:
            self._complete(xs)

    def _snapshot(self, name: str, args) -> None:
        """A tensor snapshot's dtype and shape (``args.snapshot.tensor_description``, a text
        proto), kept once per tensor under its node's name (``node:1`` is output 1)."""
        if len(self.tensor_shapes) >= TENSOR_SHAPES_MAX:
            return
        try:
            desc = args()["snapshot"]["tensor_description"]
        except (TypeError, KeyError, ValueError, orjson.JSONDecodeError):
            return
        self._shape_of(name, desc)

    def _shape_of(self, name: str, desc) -> None:
        """Keep the dtype and shape a snapshot's ``tensor_description`` gives for tensor
        ``name``. The text before ``allocation_description`` (dtype and shape: the proto's
        text format writes fields in field order) is read once per distinct text."""
        if not isinstance(desc, str):
            return
        head = desc.partition(" allocation_description")[0]
        shape = self.described.get(head)
        if shape is None:
            dtype = TENSOR_DTYPE.search(head)
            dims = TENSOR_DIM.findall(head)
            shape = [_DTYPE_WORDS.get(dtype.group(1), dtype.group(1).lower()) if dtype else "",
                     "[" + ",".join(dims) + "]"] if dims else []
            if len(self.described) < TENSOR_SHAPES_MAX:
                self.described[head] = shape
        node = self.s.short(name.rsplit(":", 1)[0] if name.rpartition(":")[2].isdigit() else name)
        if shape and node not in self.tensor_shapes:
            self.tensor_shapes[node] = [list(shape)]

    def _unknown_ph(self, ph) -> str:
        """Why an event of an unknown phase is skipped: each of the first few phases on a line
        of its own, the rest together (a trace may hold thousands of made-up phases)."""
        why = f"events with unknown ph {str(ph)[:10]!r}"
        if why in self.skipped or sum(w.startswith("events with unknown ph")
                                      for w in self.skipped) < _UNKNOWN_PH_NAMED:
            return why
        return "events with other unknown ph values"

    def _flush(self) -> None:
        """Move counter and flow rows gathered one by one into numpy chunks (small memory)."""
        if self.counters:
            c = self.counters
            self.counter_chunks.append((np.array([x[0] for x in c], np.int64),
                                        np.array([x[1] for x in c], np.int32),
                                        np.array([x[2] for x in c], np.float64),
                                        np.array([x[3] for x in c], np.float64)))
            self.counters = []
        if self.flows:
            f = self.flows
            self.flow_chunks.append((np.array([x[0] for x in f], np.int64),
                                     np.array([x[1] for x in f], np.int8),
                                     np.array([x[2] for x in f], np.int64),
                                     np.array([x[3] for x in f], np.int64),
                                     np.array([x[4] for x in f], np.float64),
                                     np.array([x[5] for x in f], np.int32)))
            self.flows = []

    # --- the fast path -------------------------------------------------------------------

    def _add_typed(self, chunk: list, other_tools: bool = True) -> bool:
        """Take a chunk of typed events (see :mod:`compare.load.chrome_json`) in bulk. Every
        field is read by C-level maps over the chunk, not a Python loop per event: this is
        the loader's cost per event (BENCHMARKS.md). Complete events that are not all
        timeline.py's (xprof and other tools) go through the dialect rules of
        :meth:`_complete` from their typed fields (no second parse); with ``other_tools``
        False such a chunk is refused instead (False, nothing changed)."""
        cj = chrome_json
        types = list(map(type, chunk))
        present = set(types)

        def of(*classes) -> list:
            if not present.intersection(classes):
                return []
            if len(present) == 1:
                return chunk
            if len(classes) == 1:  # C-level selection: map(is_) then compress
                return list(compress(chunk, map(is_, types, repeat(classes[0]))))
            return [e for e, t in zip(chunk, types) if t in classes]   # in their order

        xs = of(cj.XEvent)
        x_cols = self._typed_complete(xs) if xs else None
        if xs and x_cols is None and not other_tools:
            return False
        # commit from here on: nothing above changed the builder
        for e in of(cj.MEvent):
            self._meta({"pid": e.pid, "tid": e.tid, "name": e.name, "args": e.args})
        if xs and x_cols is None:   # checked by their types: every one is usable
            self._complete([(0, {"ph": "X", "pid": e.pid, "tid": e.tid, "ts": e.ts,
                                 "dur": e.dur, "name": e.name, "args": e.args}) for e in xs],
                           checked=True)
        self._typed_objects(of(cj.NEvent))
        if len(self.tensor_shapes) < TENSOR_SHAPES_MAX:
            self._typed_snapshots(of(cj.OEvent))
        cs = of(cj.CEvent)
        if cs:
            self._typed_counters(cs)
        self._typed_flows(of(*cj.FLOWS.values()))
        if x_cols is not None:
            self.timeline_style = True
            self.ev.extend(**x_cols)
        return True

    def _typed_objects(self, ns: list) -> None:
        """Count tensor objects (``N`` events) per pid; an object event's pid may be any JSON
        value (a list is unhashable): ints only."""
        if not ns:
            return
        pids = list(map(_PID, ns))
        if set(map(type, pids)) != {int}:
            pids = [p for p in pids if type(p) is int]
        for pid, n in Counter(pids).items():
            self.objects[pid] = self.objects.get(pid, 0) + n

    def _typed_snapshots(self, os_: list) -> None:
        """Dtype and shape of the tensors whose first snapshot is in ``os_`` (see
        :meth:`_snapshot`), decoded by a typed decoder that reads only the description."""
        for name, raw in zip(map(_NAME, os_), map(_ARGS, os_)):
            if len(self.tensor_shapes) >= TENSOR_SHAPES_MAX:
                return
            if type(name) is str and name not in self.tensor_shapes:
                try:
                    desc = _SNAPSHOT.decode(raw).snapshot.tensor_description
                except (msgspec.ValidationError, msgspec.DecodeError):
                    continue
                self._shape_of(name, desc)

    def _typed_flows(self, fl: list) -> None:
        if not fl:
            return
        self._flush()   # keep the order of rows gathered before
        phase = {cls: k for k, cls in enumerate(chrome_json.FLOWS.values())}
        ids, pids, tids, ts, names = zip(*map(_FLOW_FIELDS, fl))
        self.flow_chunks.append((np.array(ids, np.int64),
                                 np.array(list(map(phase.__getitem__, map(type, fl))), np.int8),
                                 np.array(pids, np.int64), np.array(tids, np.int64),
                                 np.array(ts, np.float64),
                                 np.array(self.s.ids(list(names)), np.int32)))

    def _typed_complete(self, xs: list) -> dict | None:
        """Columns of timeline.py complete events (args ``{name, op, input0..}``), or None
        when any event's args are not timeline.py's."""
        pids, tids, ts, dur, names, args = zip(*map(_X_FIELDS, xs))
        ops = list(map(dict.get, args, repeat("op")))
        if set(map(type, ops)) != {str}:
            return None  # not every event is timeline.py's (xprof, other tools): dict path
        pid, tid = np.array(pids), np.array(tids)
        if pid.dtype.kind not in "iu" or tid.dtype.kind not in "iu":
            return None  # beyond 64 bits
        tf_names = list(map(dict.get, args, repeat("name")))
        if set(map(type, tf_names)) != {str}:
            tf_names = [n if type(n) is str else "" for n in tf_names]
        if XLA_GPU_KERNEL_OP in ops:  # TF1 XLA:GPU kernels: named by a whole HLO program
            tf_names = [short_instruction(n) if o == XLA_GPU_KERNEL_OP else n
                        for n, o in zip(tf_names, ops)]
        lengths, inputs = _timeline_inputs(args)
        sid = self.s.ids
        name_ids, op_ids = sid(list(names)), sid(ops)
        return dict(pid=pid.astype(np.int64), tid=tid.astype(np.int64),
                    ts=np.array(ts, np.float64), dur=np.array(dur, np.float64),
                    name=name_ids, op_type=op_ids, tf_name=sid(tf_names),
                    category=self._categories(name_ids, op_ids), input_lengths=lengths,
                    input_ids=sid(inputs))

    def _typed_counters(self, cs: list) -> None:
        pids, ts, names, args = zip(*map(_C_FIELDS, cs))
        vals = list(map(dict.get, args, names))
        if set(map(len, args)) == {1} and None not in vals:
            # timeline.py: one value per event, keyed by the allocator that names the series
            self._flush()  # keep the order of rows gathered before
            self.counter_chunks.append((
                np.array(pids, np.int64), np.array(self.s.ids(list(names)), np.int32),
                np.array(ts, np.float64), np.array(vals, np.float64)))
            return
        sid = self.s.id
        for pid, t, name, a in zip(pids, ts, names, args):
            for k, v in a.items():
                series = name if k == name else f"{name}.{k}" if name else k
                self.counters.append((pid, sid(series), t, float(v)))

    def _categories(self, name_ids: list[int], op_ids: list[int]) -> np.ndarray:
        """``category_of`` per distinct (name, op type) pair, spread back over the events;
        each pair decided once per trace."""
        key = np.asarray(name_ids, np.int64) * (1 << 31) + np.asarray(op_ids, np.int64)
        uniq, inv = np.unique(key, return_inverse=True)
        names, known = self.s.names, self.pair_category
        cats = np.empty(len(uniq), np.int8)
        for j, k in enumerate(uniq.tolist()):
            c = known.get(k)
            if c is None:
                c = known[k] = category_of(names[k >> 31], names[k & ((1 << 31) - 1)], "",
                                           False)
            cats[j] = c
        return cats[inv]

    # --- event kinds ---------------------------------------------------------------------

    def _meta(self, e: dict, at: int | None = None) -> None:
        pid, name, args = e.get("pid"), e.get("name"), e.get("args") or {}
        if not _is_int(pid) or not -_I64 <= pid < _I64 or not isinstance(args, dict):
            self.skip("metadata events without pid", at=at)
            return
        if name not in ("process_name", "thread_name"):
            if name == "process_sort_index" and _is_int(args.get("sort_index")):
                self.proc_sort[pid] = args["sort_index"]
            return
        label = args.get("name")
        if not isinstance(label, (str, int, float)) and label is not None:
            self.skip(f"{name} events whose args.name is {chrome_json.json_kind(label)}, not a "
                      f"string", at=at)
        elif name == "process_name":
            self.proc_names[pid] = self.s.short(str(pid if label is None else label))
        elif _is_int(e.get("tid")) and -_I64 <= e["tid"] < _I64:
            self.lanes[(pid, e["tid"])] = self.s.short(str(e["tid"] if label is None else label))

    def _counter(self, e: dict, at: int | None = None) -> None:
        pid, ts, args = e.get("pid"), e.get("ts"), e.get("args")
        if not _is_int(pid) or not _is_number(ts) or not isinstance(args, dict):
            self.skip("counter events without pid/ts/args", at=at)
            return
        if not (-_I64 <= pid < _I64 and -MAX_TIME_US <= ts <= MAX_TIME_US):
            self.skip("counter events with pid or ts out of range", at=at)
            return
        name = e.get("name", "")
        if not isinstance(name, (str, int, float)) and name is not None:
            self.skip(f"counter events whose name is {chrome_json.json_kind(name)}, not a "
                      f"string", at=at)
            return
        base = str(name if name is not None else "")
        for k, v in args.items():
            if isinstance(v, (int, float)) and -1e308 <= v <= 1e308:
                series = base if k == base else f"{base}.{k}" if base else k
                self.counters.append((pid, self.s.id(series), float(ts), float(v)))

    def _flow(self, e: dict, at: int | None = None) -> None:
        pid, tid, ts = e.get("pid"), e.get("tid"), e.get("ts")
        fid = e.get("id")
        if not (_is_int(pid) and _is_int(tid) and _is_number(ts)
                and -_I64 <= pid < _I64 and -_I64 <= tid < _I64
                and -MAX_TIME_US <= ts <= MAX_TIME_US):
            self.skip("flow events without pid/tid/ts", at=at)
            return
        if isinstance(fid, str):
            try:
                fid = int(fid, 0)
            except ValueError:
                fid = hash(fid)
        if not _is_int(fid):
            self.skip("flow events without id", at=at)
            return
        if not -_I64 <= fid < _I64:
            fid = hash(fid)
        name = e.get("name")
        self.flows.append((fid, "stf".index(e["ph"]), pid, tid, float(ts),
                           self.s.id(name if isinstance(name, str) else "")))

    def _close_pairs(self, bs: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
        """Complete events (with the index of their B) from B/E pairs, per lane in time order."""
        out = []
        for k, e in sorted(bs, key=lambda ke: ke[1].get("ts") if _is_number(ke[1].get("ts"))
                           else 0):
            key = (e.get("pid"), e.get("tid"))
            if not _is_int(key[0]) or not _is_int(key[1]) or not _is_number(e.get("ts")):
                self.skip("B/E events without pid/tid/ts", at=k)
                continue
            stack = self.open_b.setdefault(key, [])
            if e["ph"] == "B":
                stack.append((k, e))
            elif stack:
                kb, b = stack.pop()
                x = dict(b)
                x["ph"] = "X"
                x["dur"] = e["ts"] - b["ts"]
                if isinstance(e.get("args"), dict) and isinstance(b.get("args") or {}, dict):
                    x["args"] = {**(b.get("args") or {}), **e["args"]}
                out.append((kb, x))
            else:
                self.skip("E events without a matching B", at=k)
        return out

    def _complete(self, xs: list[tuple[int, dict]], checked: bool = False) -> None:
        """Complete events (with their index in the list) into columns; ``checked``: their
        fields are known usable (the typed path validated them)."""
        good = [e for _, e in xs] if checked else [e for k, e in xs if self._usable(e, k)]
        if not good:
            return
        names, op_types, tf_names, groups, hmods, hops, cats = [], [], [], [], [], [], []
        in_lengths, in_ids = [], []
        for e in good:
            name = e.get("name")
            name = name if isinstance(name, str) else "" if name is None else str(name)
            name = self.s.short(name)   # cut before any rule reads it
            args = e.get("args")
            op_type = tf_name = hlo_op = hlo_mod = kernel_type = ""
            group, n_in, step_marker = -1, 0, False
            if type(args) is dict and args:
                if isinstance(args.get("op"), str):  # timeline.py: args {name, op, input0..N}
                    op_type, tf_name, n_in = self._timeline_args(args, in_ids)
                else:
                    op_type, tf_name, hlo_op, hlo_mod, group = self._xprof_args(args, name)
                    step_marker = self.marks.add(e, args, name, group)
                    if not op_type and not hlo_op:  # a GPU kernel names its TF op in its args
                        tf_name, kernel_type = kernel_op(args, name)
            elif name.startswith(step_marks.NAME_MARK_PREFIXES):
                self.marks.add(e, {}, name, group)
            names.append(name)
            op_types.append(op_type or kernel_type)
            tf_names.append(tf_name)
            groups.append(group)
            hmods.append(hlo_mod)
            hops.append(hlo_op)
            # a kernel that names its TF op is that op's work ("op"), never a call of an XLA
            # op: the XLA summary counts _XlaRun calls on the host, not their kernels
            cat = category_of(name, op_type, hlo_op, step_marker) if not kernel_type else \
                CAT["op"] if kernel_type not in XLA_OPS else category_of(name, "", "", False)
            if not op_type and not kernel_type and type(args) is dict and CUDA_CALL_ARG in args \
                    and self.proc_names.get(e["pid"], "").startswith(HOST_PLANE_PREFIX):
                cat = CAT["runtime"]  # the GPU tracer's record of a CUDA call on a host thread
            cats.append(cat)
            in_lengths.append(n_in)
        self.ev.extend(
            pid=[e["pid"] for e in good], tid=[e["tid"] for e in good],
            ts=[float(e["ts"]) for e in good], dur=[float(e["dur"]) for e in good],
            name=self.s.ids(names), op_type=self.s.ids(op_types), tf_name=self.s.ids(tf_names),
            category=cats, group=groups, hlo_module=self.s.ids(hmods), hlo_op=self.s.ids(hops),
            input_lengths=in_lengths, input_ids=in_ids)

    def _usable(self, e: dict, at: int | None = None) -> bool:
        """A complete event whose pid, tid, ts, dur and name fit the columns; else counted as
        why (a field of the wrong JSON type is named, with its type)."""
        pid, tid, ts, dur = e.get("pid"), e.get("tid"), e.get("ts"), e.get("dur")
        wrong = _wrong_type(e)
        if wrong:
            self.skip(wrong, at=at)
        elif pid is None or tid is None:
            self.skip("complete events without integer pid/tid", at=at)
        elif not (-_I64 <= pid < _I64 and -_I64 <= tid < _I64):
            self.skip("complete events with pid/tid beyond 64 bits", at=at)
        elif ts is None:
            self.skip("complete events without ts", at=at)
        elif dur is None:
            self.skip("complete events without dur", at=at)
        elif not (-MAX_TIME_US <= ts <= MAX_TIME_US and dur <= MAX_TIME_US):
            self.skip("complete events with ts/dur not finite or beyond 1e18 us", at=at)
        elif dur < 0:
            self.skip("complete events with negative dur", at=at)
        else:
            return True
        return False

    def _timeline_args(self, args: dict, in_ids: list[int]) -> tuple[str, str, int]:
        """(op type, node name, number of inputs) of a timeline.py event; its inputs'
        producer names are appended to ``in_ids``."""
        self.timeline_style = True
        tf_name = args.get("name") if isinstance(args.get("name"), str) else ""
        if args["op"] == XLA_GPU_KERNEL_OP:  # TF1 XLA:GPU kernels: named by a whole HLO program
            tf_name = short_instruction(tf_name)
        n_in = 0
        for k, v in args.items():
            if k.startswith("input") and isinstance(v, str):
                in_ids.append(self.s.id(_input_name(v)))
                n_in += 1
        return args["op"], tf_name, n_in

    def _xprof_args(self, args: dict, name: str) -> tuple[str, str, str, str, int]:
        """(op type, node name, HLO op, HLO module, group id) of an xprof event."""
        op_type = tf_name = hlo_op = hlo_mod = ""
        ln = args.get("long_name")
        if isinstance(ln, str):  # xprof: "tf/node/name:OpType"
            self.xprof_style = True
            pair = node_and_type(ln)
            if pair:
                tf_name, op_type = pair
            elif ":" not in ln:
                tf_name, op_type = ln, name
            # else a tf.data iterator's path (Iterator::Model::...::Prefetch): no node, no type
        ho = args.get("hlo_op")
        if isinstance(ho, str):
            hlo_op = ho
            hm = args.get("hlo_module")
            hlo_mod = hm if isinstance(hm, str) else ""
        return op_type, tf_name, hlo_op, hlo_mod, _int_in(args.get("group_id"), _I64, -1)

    # --- finish --------------------------------------------------------------------------

    def finish(self, source: str, rest: dict) -> Trace:
        unclosed = sum(len(v) for v in self.open_b.values())
        if unclosed:
            self.skip("B events never closed by an E", unclosed)
        if self.s.cut:
            n = self.s.cut
            self.warnings.append(f"cut {n} name{'' if n == 1 else 's'} longer than "
                                 f"{MAX_NAME_CHARS:,} characters to that length (the longest "
                                 f"had {self.s.longest:,})")
        for why, n in sorted(self.skipped.items()):
            at = self.first_skipped.get(why)
            where = "" if at is None else f" (the first: traceEvents[{at}])" if n > 1 \
                else f" (traceEvents[{at}])"
            self.warnings.append(f"skipped {n} {why}{where}")
        events = self.ev.freeze()
        pids = set(self.proc_names) | {int(p) for p in np.unique(events.pid)}
        processes = {p: Process(p, self.proc_names.get(p, f"pid {p}"),
                                process_kind(self.proc_names.get(p, "")), self.proc_sort.get(p))
                     for p in sorted(pids)}
        fmt = "timeline" if self.timeline_style else "xprof" if (
            self.xprof_style or any(p.kind == "host" for p in processes.values())) else "chrome"
        self._flush()
        if self.counter_chunks:
            counters = Counters(*(np.concatenate(col) for col in zip(*self.counter_chunks)))
        else:
            counters = Counters.empty()
        if self.flow_chunks:
            flows = Flows(*(np.concatenate(col) for col in zip(*self.flow_chunks)))
        else:
            flows = Flows.empty()
        meta = {k: v for k, v in rest.items() if k != "traceEvents" and not isinstance(v, (list, dict))}
        if self.tensor_shapes:
            meta["op_shapes"] = self.tensor_shapes
        trace = Trace(source=source, format=fmt, strings=self.s, processes=processes,
                      lanes=dict(self.lanes), events=events, counters=counters, flows=flows,
                      objects=self.objects, warnings=self.warnings, meta=meta)
        drop_repeated_runs(trace)
        found = self.marks.steps(trace.processes, trace.lanes)
        trace.steps = found.steps or _infer_steps(trace)
        trace.meta["steps_from"] = found.source if found.steps else (
            "TF1 session runs (each starts with its _SOURCE node)" if len(trace.steps) > 1
            else "nothing: the trace marks no steps" if trace.steps and
            trace.steps[0].name == WHOLE_TRACE else "one TF1 session run (the whole file)")
        trace.meta["group_step"] = found.group_step
        trace.meta["steps_numbered"] = found.numbered   # the numbers are the program's own
        if found.per_device:
            trace.meta["per_device_steps"] = found.per_device
        assign_steps(trace, found.group_step, found.other_devices)
        return trace


def _infer_steps(trace: Trace) -> list[Step]:
    """Steps when the trace marks none: each ``_SOURCE`` node of a timeline starts a session run
    (TF's executor runs it first); otherwise the whole trace is one step. Every device's
    executor runs its own ``_SOURCE`` (a GPU run has one on the CPU and one on the GPU), so a
    new run starts only at a ``_SOURCE`` of a device already seen in the current run."""
    ev = trace.events
    if not len(ev):
        return []
    src = trace.strings.lookup(SOURCE_NODE)
    starts = np.zeros(0)
    if src is not None:
        hit = np.flatnonzero(ev.tf_name == src)
        hit = hit[np.lexsort((ev.pid[hit], ev.ts[hit]))]
        firsts, seen = [], set()
        for i in hit:
            pid = int(ev.pid[i])
            if not firsts or pid in seen:
                firsts.append(float(ev.ts[i]))
                seen = set()
            seen.add(pid)
        starts = np.array(firsts)
    t0, t1 = float(ev.ts.min()), float(ev.end.max())
    if len(starts) <= 1:  # one session run (a timeline is one), or nothing marks steps
        return [Step(0, t0, t1 - t0, "session run" if len(starts) else WHOLE_TRACE)]
    bounds = list(starts) + [t1]
    bounds[0] = min(bounds[0], t0)
    return [Step(i, float(bounds[i]), float(bounds[i + 1] - bounds[i]), f"session run {i}")
            for i in range(len(starts))]


def assign_steps(trace: Trace, group_step: dict[int, int],
                 other_devices: list[int] | tuple = ()) -> None:
    """Each event's step: the step whose window holds its start, or the step of its xprof
    group (host work of a step may start before the device's step row does); events of
    ``other_devices`` (devices whose own step rows were not chosen) go by time only."""
    ev = trace.events
    ev.step = trace.step_of(ev.ts)
    if group_step:
        groups = np.array(list(group_step.keys()), dtype=np.int64)
        nums = np.array(list(group_step.values()), dtype=np.int32)
        order = np.argsort(groups)
        groups, nums = groups[order], nums[order]
        pos = np.searchsorted(groups, ev.group)
        pos = np.clip(pos, 0, len(groups) - 1)
        hit = groups[pos] == ev.group
        if len(other_devices):
            hit &= ~np.isin(ev.pid, list(other_devices))
        ev.step[hit] = nums[pos[hit]]
