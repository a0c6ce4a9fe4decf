"""Read a Chrome-trace JSON document in bounded chunks.

``json.load`` of a 150 MB trace builds ~1 GB of Python objects. Here the ``traceEvents`` array is
cut at event boundaries into chunks of about a megabyte, each parsed with orjson and handed to
the caller, who turns it into columns and drops it; so peak memory is the file plus one chunk.

Damaged input is handled here, not by the caller: non-UTF-8 bytes are replaced (with a warning),
a truncated array yields every complete event before the cut (with a warning), and text that
is not a trace raises :class:`TraceFormatError`.

Fast path: :func:`parse_typed` decodes a chunk with msgspec straight into typed structs, one
class per phase, that keep only the fields the loader reads, check their types, and leave
``args`` as raw JSON decoded only for the events that need it (a timeline's tensor snapshots
are never decoded). A chunk it cannot take exactly (an entry that is not a well-formed event,
B/E pairs, unknown phases, non-UTF-8 bytes) is parsed the plain way into dicts, so every
warning about damaged input comes from the same place as before.
"""
from __future__ import annotations

import json
import re
from typing import Annotated, Any, Iterator, Union

import msgspec
import orjson

CHUNK_BYTES = 1 << 20
_BETWEEN = re.compile(rb"\}\s*,\s*\{")
_LAST = re.compile(rb"\}\s*\]")
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_NEXT_EVENT = re.compile(r"\}\s*,\s*(?=\{)")


class TraceFormatError(ValueError):
    """The bytes are not a Chrome trace (the message says why, without the file name)."""


def _loads(data: bytes, warnings: list[str]):
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            fixed = data.decode("utf-8", "replace").encode("utf-8")
            value = orjson.loads(fixed)  # raises again if still not JSON
            msg = "non-UTF-8 bytes were replaced with U+FFFD"
            if msg not in warnings:
                warnings.append(msg)
            return value
        raise


#: Timestamps and durations beyond this many µs (31,700 years; trace clocks count µs since
#: 1970, ~1.8e15) are damage: the loader skips them, so every ts + dur stays finite.
MAX_TIME_US = 1e18
# Typed fields hold only what the loader's int64/float64 columns can: anything else (2**63 and
# up, NaN, 1e999, absurd times) fails validation here, in C, and the chunk takes the dict path,
# which skips those events and says so.
_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
_Time = Annotated[float, msgspec.Meta(ge=-MAX_TIME_US, le=MAX_TIME_US)]
_NonNegative = Annotated[float, msgspec.Meta(ge=0, le=MAX_TIME_US)]
_Value = Union[_Int64, Annotated[float, msgspec.Meta(ge=-1e308, le=1e308)]]


class XEvent(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """A complete event, well-formed: integer pid/tid, a time, a duration of 0 or more."""

    pid: _Int64
    tid: _Int64
    ts: _Time
    dur: _NonNegative
    name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)


class CEvent(msgspec.Struct, gc=False, tag_field="ph", tag="C"):
    """A counter sample with numeric values (timeline.py: bytes in use per allocator)."""

    pid: _Int64
    ts: _Time
    name: str
    args: dict[str, _Value]


class MEvent(msgspec.Struct, gc=False, tag_field="ph", tag="M"):
    pid: Any = None
    tid: Any = None
    name: Any = None
    args: Any = None


class NEvent(msgspec.Struct, gc=False, tag_field="ph", tag="N"):
    pid: Any = None


def _flow(ph: str):
    return msgspec.defstruct(f"Flow_{ph}", [("pid", _Int64), ("tid", _Int64), ("ts", _Time),
                                            ("id", _Int64), ("name", str)],
                             gc=False, tag_field="ph", tag=ph)


def _ignored(ph: str):
    return msgspec.defstruct(f"Ignored_{ord(ph)}", [], gc=False, tag_field="ph", tag=ph)


#: Flow phases s (start), t (step), f (end): classes by phase.
FLOWS = {ph: _flow(ph) for ph in "stf"}
#: Phases no analysis reads (tensor snapshots and deletions, instants, async and sample
#: events): decoded without a single field.
IGNORED = tuple(_ignored(ph) for ph in "ODiIRPbenSTFc")
_UNION = Union[(XEvent, CEvent, MEvent, NEvent, *FLOWS.values(), *IGNORED)]


class TypedChunk(list):
    """A chunk of typed events (:class:`XEvent` ...); ``text`` is its JSON, to parse the plain
    way if needed."""

    text: bytes = b""


_TYPED = msgspec.json.Decoder(list[_UNION])


def parse_typed(data: bytes, warnings: list[str]):
    """A :class:`TypedChunk` when every entry is a well-formed event of a phase typed above
    and the bytes are UTF-8; else the plain parse (dicts: the loader's checks then say what
    was wrong); raises like orjson on text that is not JSON."""
    if data.isascii() or _is_utf8(data):
        try:
            out = TypedChunk(_TYPED.decode(data))
        except msgspec.ValidationError:
            return _loads(data, warnings)
        except msgspec.DecodeError:
            return _loads(data, warnings)  # raises orjson's error on text that is not JSON
        out.text = data
        return out
    return _loads(data, warnings)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _first_char(buf: bytes) -> int:
    for i in range(min(len(buf), 4096)):
        if buf[i] not in b" \t\r\n":
            return i
    return -1


def split_document(buf: bytes, warnings: list[str]) -> tuple[dict, int, int]:
    """Find the events array: return (the rest of the document as a dict, start, end) where
    ``buf[start:end]`` is the text between the array's brackets. ``end`` is -1 when the array
    never closes (a truncated file)."""
    i = _first_char(buf)
    if i < 0:
        raise TraceFormatError("empty file" if not buf.strip() else "no JSON found")
    if buf[i:i + 1] == b"[":  # the array form of the Chrome trace format
        return {}, i + 1, _array_end(buf, i + 1)
    if buf[i:i + 1] != b"{":
        raise TraceFormatError("not JSON (does not start with '{' or '[')")
    m = _KEY.search(buf, i)
    if not m:
        # small documents: parse whole to give a precise reason
        try:
            doc = _loads(buf, warnings)
        except orjson.JSONDecodeError as e:
            raise TraceFormatError(f"not valid JSON ({e})") from None
        raise TraceFormatError("JSON without a 'traceEvents' list"
                               if isinstance(doc, dict) else "JSON that is not a trace")
    start = m.end()
    end = _array_end(buf, start)
    rest: dict = {}
    if end >= 0:
        try:
            rest = _loads(buf[:m.start()] + b'"traceEvents":[]' + buf[end + 1:], warnings)
        except orjson.JSONDecodeError:
            warnings.append("the document around traceEvents is damaged; metadata ignored")
            rest = {}
    else:
        warnings.append("the traceEvents list never closes (truncated file?)")
    return rest if isinstance(rest, dict) else {}, start, end


def _array_end(buf: bytes, start: int) -> int:
    """Index of the ``]`` closing the events array, found from the right; -1 if none fits."""
    # Candidates are '}' + ws + ']' (or an empty array); verify by parsing the last event.
    pos = len(buf)
    while pos > start and buf[pos - 1] in b" \t\r\n\x0b\x0c":
        pos -= 1  # like buf.rstrip(), without copying a big buffer
    for _ in range(64):
        j = buf.rfind(b"]", start - 1, pos)
        if j < 0:
            return -1
        k = j - 1
        while k >= start and buf[k] in b" \t\r\n":
            k -= 1
        if k < start:  # empty array
            return j
        if buf[k:k + 1] == b"}":
            # the text after ']' must close the document plausibly
            after = buf[j + 1:].strip()
            if after == b"" or after[:1] in (b"}", b","):
                return j
        pos = j
    return -1


def iter_chunks(buf: bytes, start: int, end: int, warnings: list[str],
                chunk_bytes: int = CHUNK_BYTES, parse=None) -> Iterator[list]:
    """Yield lists of event objects parsed from ``buf[start:end]`` in order (dicts; or what
    ``parse(text, warnings)`` returns, e.g. :func:`parse_typed`)."""
    parse = parse or _loads
    stop = end if end >= 0 else len(buf)
    pos = start
    while pos < stop:
        # skip separators
        while pos < stop and buf[pos] in b" \t\r\n,":
            pos += 1
        if pos >= stop:
            break
        target = pos + chunk_bytes
        parsed = None
        if target < stop:
            for m in _BETWEEN.finditer(buf, target, stop):
                cut = m.start() + 1
                try:
                    parsed = parse(b"[" + buf[pos:cut] + b"]", warnings)
                except orjson.JSONDecodeError:
                    if m.start() - target > 8 * chunk_bytes:
                        break
                    continue
                yield parsed
                pos = cut
                break
            if parsed is not None:
                continue
        # the last chunk (or no clean cut found): the whole remainder
        try:
            parsed = parse(b"[" + buf[pos:stop] + b"]", warnings)
        except orjson.JSONDecodeError:
            parsed = None
        if parsed is not None:
            yield parsed
            return
        yield from _salvage(buf, pos, stop, warnings)
        return


def _salvage(buf: bytes, pos: int, stop: int, warnings: list[str]) -> Iterator[list]:
    """Parse event by event (truncated or damaged files): a damaged stretch is skipped up to
    the next ``}, {`` event boundary; a damaged end is dropped."""
    text = buf[pos:stop].decode("utf-8", "replace")
    dec = json.JSONDecoder()
    i, n, got, batch = 0, len(text), 0, []
    damaged = damaged_chars = 0
    while i < n:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n or text[i] == "]":
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            m = _NEXT_EVENT.search(text, i + 1)
            if m is None:
                warnings.append(f"skipped the last {n - i} bytes of the event list: not "
                                f"complete JSON (truncated mid-event?)")
                break
            damaged, damaged_chars = damaged + 1, damaged_chars + m.end() - i
            i = m.end()
            continue
        batch.append(obj)
        got += 1
        if len(batch) >= 10000:
            yield batch
            batch = []
    if damaged:
        warnings.append(f"skipped {damaged} damaged stretch(es) of the event list "
                        f"({damaged_chars} characters) and read on after each")
    if batch:
        yield batch
