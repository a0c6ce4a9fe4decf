"""Chrome-trace JSON (timeline.py, xprof's trace viewer, any other tool) into a
:class:`compare.model.events.Trace`; a big plain timeline is parsed on two cores."""
from __future__ import annotations

import gc
import os
import time
from pathlib import Path

from compare.load import chrome_json, forked, sidecar
from compare.load.builder import Builder
from compare.load.errors import FORMATS_WE_READ, LoadError
from compare.load.gzip_safe import Truncated, gunzip
from compare.model.events import Strings, Trace

#: From this size of event list up, a timeline.py trace is parsed on two cores (the second half
#: in a forked child, :func:`_add_in_halves`); below it a fork costs more than it saves.
#: ``COMPARE_TWO_CORES=0`` turns it off.
TWO_CORES_MIN_BYTES = 32 << 20
#: How long the first half waits for the child at least (then 4x its own time); past that
#: the child is killed and this process parses the second half too.
TWO_CORES_MIN_WAIT_S = 30.0


def load_json_file(p: Path) -> Trace:
    """A JSON trace file, plain or gzip; a timeline gets its cluster sidecar when present."""
    with open(p, "rb") as f:
        head = f.read(2)
    if head == b"\x1f\x8b":
        return load_json_bytes(gunzip(p), str(p))
    trace = load_json_bytes(p.read_bytes(), str(p))
    if trace.format == "timeline":
        sidecar.attach(trace, p)
    return trace


def load_json_bytes(buf: bytes, source: str) -> Trace:
    try:
        return _load_json_bytes(buf, source, exact=False)
    except chrome_json.ListEndsEarly:
        # the list closed before the end guessed for it (another list follows, a key
        # repeats): read again on the document's exact structure
        return _load_json_bytes(buf, source, exact=True)


def _load_json_bytes(buf: bytes, source: str, exact: bool) -> Trace:
    warnings: list[str] = []
    if isinstance(buf, Truncated):
        warnings.append(buf.note)
    try:
        rest, start, end, guessed = chrome_json.split_document(buf, warnings, exact)
    except chrome_json.TraceFormatError as e:
        raise LoadError(f"{source}: {e}; we read {FORMATS_WE_READ}") from None
    strings = Strings()
    b = Builder(strings, warnings)
    # Millions of short-lived objects, none in a cycle: the cyclic GC would only rescan them.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        halves = _add_in_halves(buf, start, end) if _two_cores(buf, start, end) else None
        if halves is not None:
            b = halves
            b.warnings = warnings  # split_document's (the halves warned of nothing)
        else:
            for chunk in chrome_json.iter_chunks(buf, start, end, warnings,
                                                 parse=chrome_json.parse_typed,
                                                 guessed=guessed):
                b.add(chunk)
    except chrome_json.TraceFormatError as e:
        raise LoadError(f"{source}: {e}") from None
    finally:
        if gc_was_on:
            gc.enable()
    empty = 0 <= end - start < 64 and not buf[start:end].strip()
    del buf
    trace = b.finish(source, rest)
    if not len(trace.events) and not len(trace.counters.ts):
        if empty:
            raise LoadError(f"{source}: its 'traceEvents' list is empty; we read "
                            f"{FORMATS_WE_READ}")
        detail = f" ({'; '.join(trace.warnings)})" if trace.warnings else ""
        raise LoadError(f"{source}: no usable trace events{detail}; we read {FORMATS_WE_READ}")
    return trace


def _two_cores(buf: bytes, start: int, end: int) -> bool:
    return (end - start >= TWO_CORES_MIN_BYTES and not isinstance(buf, Truncated)
            and os.environ.get("COMPARE_TWO_CORES", "1") != "0" and (os.cpu_count() or 1) > 1)


def _add_typed_only(b: "Builder", chunk) -> bool:
    """Add ``chunk`` to ``b`` if it takes the typed fast path whole; else change nothing."""
    return isinstance(chunk, chrome_json.TypedChunk) and b._add_typed(chunk, other_tools=False)


def _typed_half(buf: bytes, start: int, end: int) -> "Builder | None":
    """A builder holding ``buf[start:end]``'s events if every chunk of it is plain
    timeline.py (the typed path) and nothing was skipped or warned about; else None."""
    b = Builder(Strings(), [])
    for chunk in chrome_json.iter_chunks(buf, start, end, b.warnings,
                                         parse=chrome_json.parse_typed):
        if not _add_typed_only(b, chunk):
            return None
    return b if b.is_plain() else None


def _export(b: "Builder | None") -> dict | None:
    return b.export() if b is not None else None


def _add_in_halves(buf: bytes, start: int, end: int) -> "Builder | None":
    """Parse a big event list on two cores: the first half here, the second in a forked child
    (:mod:`compare.load.forked`, which shares the buffer without a copy), then merge the child's
    columns in (:meth:`_Builder.absorb`). Only for traces whose every chunk takes the typed
    fast path with nothing skipped: that path keeps no state across chunks (no open ``B``/``E``
    pairs, no steps), so two halves merged equal one pass (a test compares every column).

    Returns None when that does not hold, or the child fails or overruns: the caller then
    loads the whole list on one core, so the result never depends on this path. The child adds
    its own peak memory; speed and memory: BENCHMARKS.md."""
    cut = None
    for m in chrome_json._BETWEEN.finditer(buf, (start + end) // 2, end):
        cut = m.start() + 1  # just after an event's '}'; both halves must then parse whole,
        break                # which a cut inside a string or a nested value cannot
    if cut is None:
        return None
    # a first look decides before forking: xprof's and other tools' traces take the dict path
    first = next(chrome_json.iter_chunks(buf, start, cut, [], chunk_bytes=1 << 16,
                                         parse=chrome_json.parse_typed), None)
    if not _add_typed_only(Builder(Strings(), []), first):
        return None
    child = forked.start(lambda: _export(_typed_half(buf, cut, end)))
    if child is None:
        return None
    try:
        t0 = time.monotonic()
        mine = _typed_half(buf, start, cut)
        if mine is None:
            return None
        # the child did as much work at the same time: allow it a generous overrun
        theirs = child.result(timeout_s=max(TWO_CORES_MIN_WAIT_S, 4 * (time.monotonic() - t0)))
        if theirs is None:
            return None
        try:
            mine.absorb(theirs)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            return None  # not a payload _export made: one core then (mine is dropped)
        return mine
    finally:
        child.close()
