"""TensorBoard profiles: an ``.xplane.pb``, a profile session folder or a logdir.

Each host's xplane goes through xprof's own trace-viewer converter on its own (xprof converts
one XSpace to trace events; given several it returns nothing), and the hosts are merged into
one trace, one process group per host (:mod:`compare.load.hosts`). Steps are xprof's own: the
step database its input-pipeline tool computes (``op_stats.step_db``, what ``xprof
get_step_trace`` reports), over all hosts at once. xprof caches that database as
``ALL_HOSTS.op_stats_v2.pb`` beside the files it is given, so it is given the bytes with file
names in a private temporary folder: the user's folder is never written to.

A TF 2.2/2.3 logdir holding ``<host>.trace.json.gz`` (the trace viewer's JSON, written by the
profiler itself) and no xplane loads as that JSON, several hosts merged the same way.
HLO modules come from the xplane's ``/host:metadata`` plane (:mod:`common.hlo`).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from xprof.protobuf import op_stats_pb2, trace_events_old_pb2

from common import atomic, hlo
from common.errors import InputError
from common.protos import XSpaceEvents
from compare.load import budget, hosts
from compare.load.builder import Builder, assign_steps
from compare.load.errors import FORMATS_WE_READ, LoadError
from compare.load.json_trace import load_json_file
from compare.model.events import WHOLE_TRACE, Step, Strings, Trace
from compare.vocabulary import ops as tfops
from compare.vocabulary.rows import HOST_PLANE_PREFIX

XPLANE_SUFFIX = ".xplane.pb"
#: What TF 2.2/2.3 wrote beside (or instead of) the xplane: the trace viewer's JSON per host.
HOST_TRACE_SUFFIX = ".trace.json.gz"
#: Files a folder may hold instead of a profile (our runs, timeline.py users).
TIMELINE_NAMES = ("timeline.json", "trace.json.gz")


def load_dir(p: Path, max_memory: int | None = None) -> Trace:
    """A session folder (``<host>.xplane.pb`` or ``<host>.trace.json.gz`` per host), a folder
    above one (``plugins/profile``, ``plugins``, the run folder or a logdir holding one run;
    with several sessions the latest is read and a warning names the others), or a folder
    with a timeline. Refused before reading when it would not fit (:mod:`budget`,
    ``max_memory`` bytes)."""
    session, others = _session(p)
    if session is None:
        timelines = [t for t in TIMELINE_NAMES if (p / t).is_file()]
        if timelines:
            budget.check([p / timelines[0]], str(p), max_memory)
            return load_json_file(p / timelines[0])
        raise LoadError(f"{p}: folder holds no .xplane.pb or <host>.trace.json.gz profile (and "
                        f"no timeline.json); we read {FORMATS_WE_READ}")
    trace = _load_session(session, p, max_memory)
    if others:
        trace.warnings.append(
            f"{p} holds {len(others) + 1} profile sessions ({', '.join(o.name for o in others)}, "
            f"{session.name}); this report explains the latest, {session.name}. To explain "
            f"another, pass its folder ({os.path.relpath(others[-1], p)} in the folder given)")
        trace.meta["sessions"] = [str(o) for o in others] + [str(session)]
    return trace


def _load_session(session: Path, source: Path, max_memory: int | None = None) -> Trace:
    xplanes = sorted(session.glob("*" + XPLANE_SUFFIX))
    budget.check(xplanes or sorted(session.glob("*" + HOST_TRACE_SUFFIX)), str(source),
                 max_memory)
    if xplanes:
        return load_xplanes([str(x) for x in xplanes], str(source))
    files = sorted(session.glob("*" + HOST_TRACE_SUFFIX))
    loaded = [(f.name[: -len(HOST_TRACE_SUFFIX)], load_json_file(f)) for f in files]
    return loaded[0][1] if len(loaded) == 1 else hosts.merge(loaded, str(source))


#: Where profile sessions sit below a folder the user may name: the ``profile`` folder (sessions
#: are its children), ``plugins``, and any run folder or logdir above them.
SESSION_PATTERNS = ("*/", "profile/*/", "**/plugins/profile/*/")


def _session(p: Path) -> tuple[Path | None, list[Path]]:
    """The profile session folder ``p`` is or holds (None if none), and the run's other
    sessions (older first; session folders are named by the time they were written)."""
    if any(p.glob("*" + XPLANE_SUFFIX)) or any(p.glob("*" + HOST_TRACE_SUFFIX)):
        return p, []
    sessions = sorted({x.parent for pattern in SESSION_PATTERNS
                       for suffix in (XPLANE_SUFFIX, HOST_TRACE_SUFFIX)
                       for x in p.glob(pattern + "*" + suffix)})
    if not sessions:
        return None, []
    runs = sorted({str(_run_of(s)) for s in sessions})
    if len(runs) > 1:
        names = ", ".join(os.path.relpath(r, p) for r in runs)
        raise LoadError(f"{p}: holds several runs ({names}); pass one of them")
    return sessions[-1], sessions[:-1]


def _run_of(session: Path) -> Path:
    """The run folder of a session: ``<run>/plugins/profile/<session>``, else its parent."""
    up = session.parent
    if up.name == "profile" and up.parent.name == "plugins":
        return up.parent.parent
    return up


def host_name(path: str) -> str:
    name = os.path.basename(path)
    return name[: -len(XPLANE_SUFFIX)] if name.endswith(XPLANE_SUFFIX) else name


def load_xplanes(paths: list[str], source: str) -> Trace:
    """One or several hosts' xplanes as one trace, with xprof's steps."""
    try:  # also validates the files are XSpaces
        modules = hlo.modules_from_xplanes(paths, source)
    except InputError as e:
        raise LoadError(f"{e}; we read {FORMATS_WE_READ}" if "not JSON" in str(e) else str(e)) from None
    blobs = [_read(p) for p in paths]
    for path, blob in zip(paths, blobs):
        planes = plane_count(blob)
        if planes > MAX_PLANES:
            raise LoadError(f"{path}: holds {planes:,} planes (one per device and other row "
                            f"group of a host); we read up to {MAX_PLANES:,}: xprof's converter "
                            f"takes minutes past that")
    same = _identical_hosts(paths, blobs)
    with tempfile.TemporaryDirectory(prefix="compare-xprof-") as tmp:
        names = _private_copies(paths, blobs, tmp)
        per_host = [(host_name(p), _host_trace(n, p)) for p, n in zip(paths, names)]
        step_db = _step_db(names, tmp)
    for k, (_, trace) in enumerate(per_host):
        _use_step_db(trace, step_db, k)
    trace = per_host[0][1] if len(per_host) == 1 else hosts.merge(per_host, source)
    trace.source = source
    trace.format = "xprof"
    trace.hlo = modules
    trace.meta["xplane_files"] = paths
    if same:
        trace.warnings.append(
            f"hosts {', '.join(same)} hold byte-identical profiles (the same events at the same "
            f"times): most likely one host's profile saved under several names; each is shown "
            f"as a host of its own, as given")
    shapes = op_shapes(blobs)
    if shapes:
        trace.meta["op_shapes"] = shapes
    return trace


#: Planes one host's xplane may hold: a host plane, its devices (a GPU or TPU host has at
#: most a few dozen), metadata and tracer planes. xprof's converters grow faster than the
#: plane count (BENCHMARKS.md "Hostile traces"), so more is refused before converting.
MAX_PLANES = 1024


def plane_count(blob: bytes) -> int:
    """How many planes an XSpace's bytes hold (its top-level field 1), from the wire format
    alone, without parsing them; stops at bytes that are no protobuf (the converter then
    says so)."""
    n = pos = 0
    end = len(blob)
    while pos < end:
        key, pos = _varint(blob, pos)
        wire = key & 7
        if wire == 2:
            length, pos = _varint(blob, pos)
            pos += length
            n += key >> 3 == 1
        elif wire == 0:
            pos = _varint(blob, pos)[1]
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            break
    return n


def _varint(blob: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(blob) and shift < 64:
        b = blob[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    return value, len(blob) + 1   # cut or overlong: ends the walk


#: Tensors kept per op, and ops kept per trace, of the allocation events' shapes.
SHAPES_PER_OP, SHAPES_OPS = 4, 50_000


def op_shapes(blobs: list[bytes]) -> dict[str, list[list[str]]]:
    """Per TF op (node name), the ``[dtype, shape]`` of the tensors it allocated as outputs,
    from the host planes' allocation events (xprof's trace viewer drops them); {} when the
    profile records none (TF 2.3 and older, or memory not profiled)."""
    out: dict[str, list[list[str]]] = {}
    for blob in blobs:
        if tfops.MEMORY_ALLOCATION_EVENT.encode() not in blob or b"shape" not in blob:
            continue   # no allocation event: skip the full parse
        space = XSpaceEvents()
        try:
            space.ParseFromString(blob)
        except Exception:  # noqa: BLE001 - already read once by the converter; shapes are extra
            continue
        for plane in space.planes:
            if plane.name.startswith(HOST_PLANE_PREFIX):
                _plane_shapes(plane, out)
    return out


def _plane_shapes(plane, out: dict[str, list[list[str]]]) -> None:
    stat = {k: v.name for k, v in plane.stat_metadata.items()}
    alloc = {k for k, v in plane.event_metadata.items()
             if v.name == tfops.MEMORY_ALLOCATION_EVENT}
    if not alloc:
        return
    for line in plane.lines:
        for e in line.events:
            if e.metadata_id not in alloc:
                continue
            st = {stat.get(x.metadata_id): x for x in e.stats}
            op, shape = _stat_str(st.get("tf_op"), stat), _stat_str(st.get("shape"), stat)
            region = _stat_str(st.get("region_type"), stat)
            if not op or not shape or region not in ("", tfops.ALLOCATION_OUTPUT):
                continue
            dt = st.get("data_type")
            dtype = tfops.DTYPE_NAMES.get(int(dt.int64_value or dt.uint64_value), "") \
                if dt is not None else ""
            have = out.get(op)
            if have is None:
                if len(out) >= SHAPES_OPS:
                    continue
                have = out[op] = []
            if len(have) < SHAPES_PER_OP and [dtype, shape] not in have:
                have.append([dtype, shape])


def _stat_str(x, stat: dict[int, str]) -> str:
    """A stat's text: its string, or the name its reference points at."""
    if x is None:
        return ""
    return x.str_value or (stat.get(x.ref_value, "") if x.ref_value else "")


def _identical_hosts(paths: list[str], blobs: list[bytes]) -> list[str]:
    """Host names whose xplane bytes equal another host's (a copy under another name)."""
    seen: dict[bytes, list[str]] = {}
    for path, blob in zip(paths, blobs):
        seen.setdefault(hashlib.blake2b(blob, digest_size=16).digest(), []).append(
            host_name(path))
    return [h for hs in seen.values() if len(hs) > 1 for h in hs]


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise LoadError(f"{path}: cannot read ({e.strerror})") from None


def _private_copies(paths: list[str], blobs: list[bytes], tmp: str) -> list[str]:
    """The xplanes copied into ``tmp`` under their own names (xprof names hosts after files):
    whatever xprof writes beside them stays there."""
    out: list[str] = []
    for k, (path, blob) in enumerate(zip(paths, blobs)):
        folder = os.path.join(tmp, "hosts") if k == 0 or os.path.basename(path) not in {
            os.path.basename(o) for o in out} else os.path.join(tmp, f"hosts{k}")
        os.makedirs(folder, exist_ok=True)
        name = os.path.join(folder, os.path.basename(path))
        atomic.write_bytes(Path(name), blob)
        out.append(name)
    return out


def _convert(names: list[str], tool: str, source: str) -> bytes:
    from xprof.convert import _pywrap_profiler_plugin as xprof  # lazy: its native library

    try:
        data, ok = xprof.xspace_to_tools_data(names, tool, {"use_saved_result": False})
    except Exception as e:  # xprof raises assorted types; any of them means unusable input
        raise LoadError(f"{source}: xprof could not convert it "
                        f"({str(e).splitlines()[0][:200] if str(e) else type(e).__name__})"
                        ) from None
    return data if ok else b""


def _host_trace(name: str, path: str) -> Trace:
    """One host's xplane through xprof's trace viewer, read from its trace proto directly (the
    JSON xprof would make of it says the same, at several times the cost)."""
    raw = _convert([name], "trace_viewer", path)
    proto = trace_events_old_pb2.Trace()
    try:
        proto.ParseFromString(raw)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise LoadError(f"{path}: xprof's trace viewer output is unreadable") from None
    if not len(proto.trace_events):
        raise LoadError(f"{path}: xprof produced no trace events")
    b = Builder(Strings(), [])
    b.add(_metadata(proto))
    events = proto.trace_events
    for start in range(0, len(events), 50_000):
        b.add([_event(e) for e in events[start:start + 50_000]])
    return b.finish(path, {})


def _metadata(proto) -> list[dict]:
    out = []
    for did, device in sorted(proto.devices.items()):
        if device.name:
            out.append({"ph": "M", "pid": did, "name": "process_name",
                        "args": {"name": device.name}})
        out.append({"ph": "M", "pid": did, "name": "process_sort_index",
                    "args": {"sort_index": did}})
        for rid, resource in sorted(device.resources.items()):
            if resource.name:
                out.append({"ph": "M", "pid": did, "tid": rid, "name": "thread_name",
                            "args": {"name": resource.name}})
    return out


def _event(e) -> dict:
    d = {"pid": e.device_id, "tid": e.resource_id, "name": e.name,
         "ts": e.timestamp_ps / 1e6, "dur": e.duration_ps / 1e6, "ph": "X" if e.duration_ps else "i"}
    if e.args:
        d["args"] = dict(e.args)
    return d


def _step_db(names: list[str], tmp: str):
    """xprof's step database over every host (``OpStats.step_db``), or None."""
    _convert(names, "input_pipeline_analyzer", names[0])
    cached = sorted(Path(tmp).glob("**/*op_stats*.pb"))
    if not cached:
        return None
    stats = op_stats_pb2.OpStats()
    try:
        stats.ParseFromString(cached[0].read_bytes())
    except Exception:  # noqa: BLE001
        return None
    return stats


def _use_step_db(trace: Trace, stats, host: int) -> None:
    """Replace ``trace``'s steps by xprof's (host ``host``'s cores): each step's window from the
    step database, numbered and named as the trace's own marks name its group."""
    if stats is None or not len(stats.step_db.step_sequence):
        return
    known_num = trace.meta.get("group_step", {})
    by_num = {s.num: s for s in trace.steps}
    steps, group_step, numbered = [], {}, bool(trace.meta.get("steps_numbered"))
    for seq in stats.step_db.step_sequence:
        cores = [c for c in sorted(seq.step_info_per_core) if _host_of(stats, c) == host]
        if not cores:
            continue
        info = seq.step_info_per_core[cores[0]]
        group = int(seq.step_num)
        known = by_num.get(known_num[group]) if group in known_num else None
        num = known.num if known else group
        numbered = numbered and known is not None
        name = known.name if known else (info.step_name or str(num))
        steps.append(Step(num, info.begin_ps / 1e6, info.duration_ps / 1e6, name))
        group_step[group] = num
    if not steps:
        return
    # xprof leaves out steps it deems incomplete (often the first and the last, even when the
    # trace marks them whole); the first step is the one that compiles, so the trace's own
    # marks keep those, where no step of xprof's overlaps them
    kept = [s for s in trace.steps if s.num not in {x.num for x in steps} and
            trace.steps[0].name != WHOLE_TRACE and
            not any(s.ts < x.ts + x.dur and x.ts < s.ts + s.dur for x in steps)]
    trace.steps = sorted(steps + kept, key=lambda s: s.ts)
    trace.meta["steps_from"] = "xprof's step database (its step-trace tool's steps)" + (
        f", and {len(kept)} step(s) it left out as incomplete, from the trace's own marks"
        if kept else "")
    trace.meta["group_step"] = {**{g: n for g, n in trace.meta.get("group_step", {}).items()
                                   if n in {s.num for s in kept}}, **group_step}
    trace.meta["steps_numbered"] = numbered
    assign_steps(trace, group_step, list(trace.meta.get("per_device_steps", {})))


def _host_of(stats, core: int) -> int:
    """The host index of a step database core: xprof numbers the cores of host k from k*1000."""
    return int(core) // 1000
