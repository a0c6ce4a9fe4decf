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

Hostile structure: a cut guessed inside a string or a nested value is replaced by the exact
one (:mod:`compare.load.structure`); a chunk that does not parse is read value by value, so a
damaged or too deeply nested event costs its own bytes, not a re-parse per guess; nothing here
recurses in Python, and values nested deeper than :data:`MAX_DEPTH` are skipped and named.
"""
from __future__ import annotations

import json
import re
from typing import Annotated, Any, Iterator, Union

import msgspec
import orjson

from compare.load import structure

CHUNK_BYTES = 1 << 20
_BETWEEN = re.compile(rb"\}\s*,\s*\{")
_LAST = re.compile(rb"\}\s*\]")
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
#: A member of the top-level object that is the events list (from just after a comma or '{').
_MEMBER = re.compile(rb'\s*("traceEvents"\s*:\s*\[)')
#: What follows a list that closes before the end guessed for it when the document goes on
#: around it: another member of the top-level object (``, "key":``).
_NEXT_MEMBER = re.compile(rb'\s*,\s*"(?:[^"\\]|\\.)*"\s*:')
_NEXT_EVENT = re.compile(r"\}\s*,\s*(?=\{)")
#: The deepest event we read (levels of nesting inside the event list; an event ``{}`` is 1):
#: orjson's limit (1024 for a whole text, which the list itself takes one of). msgspec and
#: Python's json refuse sooner (the interpreter's recursion limit), and fall back to orjson.
MAX_DEPTH = 1023


class TraceFormatError(ValueError):
    """The bytes are not a Chrome trace (the message says why, without the file name)."""


class ListEndsEarly(Exception):
    """The events list closed before the end :func:`split_document` guessed for it, and the
    document goes on with more members (another list after it, a repeated key): the caller
    reads the document again on its exact structure (``split_document(..., exact=True)``)."""


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


class OEvent(msgspec.Struct, gc=False, tag_field="ph", tag="O"):
    """A tensor snapshot (timeline.py with memory): its args kept raw, decoded only for the
    first snapshot of a tensor (its dtype and shape)."""

    name: Any = None
    args: msgspec.Raw = msgspec.Raw(b"null")


def _flow(ph: str):
    return msgspec.defstruct(f"Flow_{ph}", [("pid", _Int64), ("tid", _Int64), ("ts", _Time),
                                            ("id", _Int64), ("name", str)],
                             gc=False, tag_field="ph", tag=ph)


def _ignored(ph: str):
    return msgspec.defstruct(f"Ignored_{ord(ph)}", [], gc=False, tag_field="ph", tag=ph)


#: Flow phases s (start), t (step), f (end): classes by phase.
FLOWS = {ph: _flow(ph) for ph in "stf"}
#: Phases no analysis reads (tensor deletions, instants, async and sample events): decoded
#: without a single field.
IGNORED = tuple(_ignored(ph) for ph in "DiIRPbenSTFc")
# A union of classes made at run time, which a type checker cannot follow.
_UNION = Union[(XEvent, CEvent, MEvent, NEvent, OEvent) + tuple(FLOWS.values()) + IGNORED]  # type: ignore[valid-type]


class TypedChunk(list):
    """A chunk of typed events (:class:`XEvent` ...); ``text`` is its JSON, to parse the plain
    way if needed."""

    text: bytes = b""


_TYPED = msgspec.json.Decoder(list[_UNION])  # type: ignore[valid-type]


def parse_typed(data: bytes, warnings: list[str]):
    """A :class:`TypedChunk` when every entry is a well-formed event of a phase typed above
    and the bytes are UTF-8; else the plain parse (dicts: the loader's checks then say what
    was wrong); raises like orjson on text that is not JSON."""
    if data.isascii() or _is_utf8(data):
        try:
            out = TypedChunk(_TYPED.decode(data))
        except (msgspec.ValidationError, RecursionError):
            return _loads(data, warnings)  # not typed, or nested beyond msgspec's recursion
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


def split_document(buf: bytes, warnings: list[str], exact: bool = False
                   ) -> tuple[dict, int, int, bool]:
    """Find the events array: return (the rest of the document as a dict, start, end,
    guessed) where ``buf[start:end]`` is the text between the array's brackets. ``end`` is -1
    when the array never closes (a truncated file). ``guessed``: the end was found from the
    right without a scan of the list (the common case; :func:`iter_chunks` then raises
    :class:`ListEndsEarly` if the list turns out to close sooner). ``exact``: find the
    top-level ``traceEvents`` member by a scan of the document's structure."""
    i = _first_char(buf)
    if i < 0:
        raise TraceFormatError("empty file" if not buf.strip() else "no JSON found")
    if buf[i:i + 1] == b"[":  # the array form of the Chrome trace format
        return {}, i + 1, _array_end(buf, i + 1, lambda j: _closes_list(buf, i + 1, j)), False
    if buf[i:i + 1] != b"{":
        raise TraceFormatError("not JSON (does not start with '{' or '[')")
    m = _KEY.search(buf, i)
    if not m:
        # small documents: parse whole to give a precise reason
        try:
            doc = _loads(buf, warnings)
        except orjson.JSONDecodeError as e:
            raise TraceFormatError(f"not valid JSON ({e})") from None
        if isinstance(doc, dict) and "traceEvents" in doc:
            raise TraceFormatError(f"'traceEvents' is {json_kind(doc['traceEvents'])}, "
                                   f"not a list of events")
        raise TraceFormatError("JSON without a 'traceEvents' list"
                               if isinstance(doc, dict) else "JSON that is not a trace")
    key, start, end, guessed = m.start(), m.end(), None, True
    if exact or not _starts_member(buf, i + 1, key):
        found = _top_level_list(buf, i, warnings)
        if found is not None:
            key, start, end = found
            guessed = False
        elif not exact:
            raise TraceFormatError("JSON whose 'traceEvents' lists are all nested inside other "
                                   "values, none a member of the top-level object")
    if end is None:
        end = _array_end(buf, start, lambda j: _closes_object(buf, key, j))
    rest: dict = {}
    if end >= 0:
        try:
            rest = _loads(buf[:key] + b'"traceEvents":[]' + buf[end + 1:], warnings)
        except orjson.JSONDecodeError:
            warnings.append("the document around traceEvents is damaged; metadata ignored")
            rest = {}
    else:
        warnings.append("the traceEvents list never closes (truncated file?)")
    return rest if isinstance(rest, dict) else {}, start, end, guessed


def _starts_member(buf: bytes, a: int, key: int) -> bool:
    """Whether offset ``key`` starts a member of the object whose text starts at ``a``: the
    text before it, from the last comma at the object's own level, is only whitespace (not a
    key inside a nested value or a string). Costs a scan of ``buf[a:key]``, the few members
    a trace writes before its events."""
    vals = structure.top_level_values(buf, a, key)
    if vals.closed >= 0:
        return False
    s = vals.ends[-2] + 1 if len(vals.ends) > 1 else a
    return not buf[s:key].strip()


def _top_level_list(buf: bytes, i: int, warnings: list[str]) -> tuple[int, int, int] | None:
    """(key, start, end) of the ``traceEvents`` list that is a member of the object opening
    at ``i`` (the last one if the key repeats, as JSON parsers read it; said in
    ``warnings``), from an exact scan of the object's members; None if no member is one.
    ``end`` is -1 when that list never closes."""
    vals = structure.top_level_values(buf, i + 1, len(buf))
    hits, s = [], i + 1
    for e in vals.ends:
        m = _MEMBER.match(buf, s, e)
        if m:
            hits.append((m.start(1), m.end(), e))
        s = e + 1
    if not hits:
        return None
    if len(hits) > 1:
        warnings.append(f"the document holds {len(hits)} top-level 'traceEvents' lists (a "
                        f"repeated key); read the last, as JSON parsers do")
    key, start, e = hits[-1]
    j = e - 1
    while j >= start and buf[j] in b" \t\r\n\x0b\x0c":
        j -= 1
    closes = buf[j:j + 1] == b"]" and j >= start and (e < len(buf) or vals.closed >= 0)
    return key, start, j if closes else -1


def json_kind(value) -> str:
    """A JSON value's type in words (for messages)."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _array_end(buf: bytes, start: int, closes) -> int:
    """Index of the ``]`` closing the events array, found from the right; -1 if none fits.
    ``closes(j)``: whether the ``]`` at ``j`` really closes it (for a candidate that is not
    preceded by an event's ``}``: the list's last entry is something else, e.g. a list)."""
    pos = len(buf)
    while pos > start and buf[pos - 1] in b" \t\r\n\x0b\x0c":
        pos -= 1  # like buf.rstrip(), without copying a big buffer
    checked = 0
    while checked < 64:
        j = buf.rfind(b"]", start - 1, pos)
        if j < 0:
            return -1
        pos = j
        k = j - 1
        while k >= start and buf[k] in b" \t\r\n":
            k -= 1
        if k < start:  # empty array
            return j
        a = j + 1  # the text after ']' must close the document plausibly
        while a < len(buf) and buf[a] in b" \t\r\n\x0b\x0c":
            a += 1
        if a < len(buf) and buf[a] not in b"},":
            continue  # a ']' inside the trailing text: cheap to pass over
        checked += 1
        if buf[k:k + 1] == b"}" or closes(j):
            return j
    return -1


def _closes_object(buf: bytes, key: int, j: int) -> bool:
    """The document parses with the events between ``key`` (its ``"traceEvents"``) and ``j``
    left out."""
    try:
        orjson.loads(buf[:key] + b'"traceEvents":[]' + buf[j + 1:])
    except orjson.JSONDecodeError:
        return False
    return True


def _closes_list(buf: bytes, start: int, j: int) -> bool:
    """The array form: the list opened before ``start`` closes at ``j`` (an exact scan)."""
    return buf[j + 1:].strip() == b"" and \
        structure.top_level_values(buf, start, len(buf)).closed == j


def iter_chunks(buf: bytes, start: int, end: int, warnings: list[str],
                chunk_bytes: int = CHUNK_BYTES, parse=None, guessed: bool = False
                ) -> Iterator[list]:
    """Yield lists of event objects parsed from ``buf[start:end]`` in order (dicts; or what
    ``parse(text, warnings)`` returns, e.g. :func:`parse_typed`). A stretch that does not
    parse is read value by value (:func:`_salvage`); what was skipped is said once, at the
    end, in ``warnings``. ``guessed``: ``end`` is :func:`split_document`'s guess; a list that
    closes before it and is followed by another member of the document raises
    :class:`ListEndsEarly`."""
    parse = parse or _loads
    stop = end if end >= 0 else len(buf)
    damage = _Damage()
    damage.guessed = guessed
    pos = start
    while True:
        while pos < stop and buf[pos] in b" \t\r\n,":
            pos += 1
        if pos >= stop:
            break
        cut, parsed = _chunk(buf, pos, stop, chunk_bytes, parse, warnings)
        if parsed is not None:
            yield parsed
        else:
            yield from _salvage(buf, pos, cut, warnings, damage, last=cut >= stop)
        pos = cut
    damage.report(warnings)


def _parsed(parse, buf: bytes, a: int, b: int, warnings: list[str]):
    try:
        return parse(b"[" + buf[a:b] + b"]", warnings)
    except orjson.JSONDecodeError:
        return None


def _chunk(buf: bytes, pos: int, stop: int, chunk_bytes: int, parse, warnings: list[str]):
    """(cut, events of ``buf[pos:cut]``) for the next chunk of about ``chunk_bytes``; events
    None when that stretch does not parse (the caller salvages it). The cut is guessed at the
    first ``}, {`` past the size; when that guess fails it is found exactly."""
    target = pos + chunk_bytes
    m = _BETWEEN.search(buf, target, stop) if target < stop else None
    guess = m.start() + 1 if m else stop
    parsed = _parsed(parse, buf, pos, guess, warnings)
    if parsed is not None or guess >= stop:
        return guess, parsed
    # the guess fell inside a string or a nested value, or the text is damaged: the first
    # comma past the size between two events (a damaged stretch ends at the guess)
    vals = structure.top_level_values(buf, pos, stop, first_after=target)
    exact = vals.ends[-1] if vals.closed < 0 else -1
    if exact <= pos or exact == guess:
        return guess, None
    return exact, _parsed(parse, buf, pos, exact, warnings)


def dicts(chunk: "TypedChunk", warnings: list[str]) -> list:
    """A typed chunk's events parsed the plain way (for the dict path). msgspec reads some
    values orjson refuses (nested past orjson's limit in a field msgspec skips or takes as
    it is): those are salvaged value by value, as :func:`iter_chunks` would."""
    try:
        return _loads(chunk.text, warnings)
    except orjson.JSONDecodeError:
        damage = _Damage()
        out = [e for batch in _salvage(chunk.text, 1, len(chunk.text) - 1, warnings, damage,
                                       last=False) for e in batch]
        damage.report(warnings)
        return out


class _Damage:
    """What salvaging skipped, counted across the whole list and said once."""

    def __init__(self) -> None:
        self.stretches = self.chars = 0
        self.deep = self.deepest = 0
        self.tail = ""
        self.guessed = False   # the list's end was guessed: an early close may be structure
        self.open = False   # no good value read since the last damage: more damage now
                            # continues that stretch (one stretch, not two)

    def skipped(self, chars: int) -> None:
        if not self.open:
            self.stretches += 1
        self.chars += chars
        self.open = True

    def report(self, warnings: list[str]) -> None:
        if self.deep:
            warnings.append(f"skipped {self.deep} entr{'y' if self.deep == 1 else 'ies'} of "
                            f"the event list nested {self.deepest:,} levels deep"
                            f"{' at most' if self.deep > 1 else ''} (we read up to "
                            f"{MAX_DEPTH:,})")
        if self.stretches:
            warnings.append(f"skipped {self.stretches} damaged stretch(es) of the event list "
                            f"({self.chars} characters) and read on after each")
        if self.tail:
            warnings.append(self.tail)


def _salvage(buf: bytes, a: int, b: int, warnings: list[str], damage: _Damage,
             last: bool) -> Iterator[list]:
    """The events of ``buf[a:b]``, a stretch that does not parse whole: value by value (the
    exact scan of :mod:`compare.load.structure`), skipping values nested deeper than
    :data:`MAX_DEPTH`; a value that does not parse, and whatever follows brackets that do not
    balance, is read event by event (:func:`_resync`)."""
    vals = structure.top_level_values(buf, a, b)
    batch: list = []
    s = a
    for k, (e, depth) in enumerate(zip(vals.ends, vals.depth)):
        if depth > MAX_DEPTH:
            damage.deep += 1
            damage.deepest = max(damage.deepest, depth)
        elif buf[s:e].strip():
            try:
                batch.append(_loads(buf[s:e], warnings))
                damage.open = False
            except orjson.JSONDecodeError:
                final = last and k == len(vals.ends) - 1 and vals.closed < 0
                batch.extend(_resync(buf[s:e], warnings, damage, final))
        s = e + 1
        if len(batch) >= 10000:
            yield batch
            batch = []
    if vals.closed >= 0:
        if damage.guessed and _NEXT_MEMBER.match(buf, vals.closed + 1):
            raise ListEndsEarly()   # not damage: the list ends here, the document goes on
        batch.extend(_resync(buf[vals.closed:b], warnings, damage, last))
    if batch:
        yield batch


def _resync(data: bytes, warnings: list[str], damage: _Damage, last: bool) -> list:
    """Parse event by event (damaged text): a damaged stretch is skipped up to the next
    ``}, {`` event boundary; a damaged end is dropped (``last``: the end of the list, so a
    truncated file)."""
    text = data.decode("utf-8", "replace")
    dec = json.JSONDecoder()
    i, n, out = 0, len(text), []
    while i < n:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n or text[i] == "]":
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except (json.JSONDecodeError, RecursionError):
            m = _NEXT_EVENT.search(text, i + 1)
            if m is None:
                if last:
                    damage.tail = (f"skipped the last {n - i} bytes of the event list: not "
                                   f"complete JSON (truncated mid-event?)")
                else:
                    damage.skipped(n - i)
                break
            damage.skipped(m.end() - i)
            i = m.end()
            continue
        out.append(obj)
        damage.open = False
    return out
