"""The bracket structure of JSON text, found with numpy a block at a time (no Python loop per
byte): where the top-level values of a list end, and how deep each nests.

The chunked reader (:mod:`compare.load.chrome_json`) cuts the event list where a regular
expression sees ``}, {``; that guess fails when the text holds those bytes inside a string or a
nested value, and JSON parsers refuse values nested deeper than their limit. Both are rare, so
this exact (and slower, ~100 MB/s) scan runs only when a guess failed: it finds the true event
boundaries, and the depth to name in the warning when an event nests too deep.

Strings are honoured: a quote preceded by an odd run of backslashes is escaped; brackets and
commas inside strings are text. Damaged text (a string that never closes) makes the structure
after it meaningless; callers fall back to their own resynchronisation then.
"""
from __future__ import annotations

import dataclasses

import numpy as np

#: Bytes scanned per numpy pass (a few arrays of this many int32 live at once).
BLOCK_BYTES = 1 << 20

_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")
#: Bytes that matter: brackets, commas and quotes (everything else is skipped at once).
_INTEREST = np.zeros(256, bool)
_INTEREST[[ord(c) for c in '[]{},"']] = True
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


@dataclasses.dataclass
class Values:
    """The top-level values of a list's text: ``ends[k]`` is the offset (into the buffer) of
    the comma after value ``k``, or of the text's end for the last; ``depth[k]`` how deep value
    ``k`` nests (1 for ``{}`` or ``[]``, 0 for a number or string); ``closed``: offset of a
    bracket that closes the list itself (depth below 0), or -1."""

    ends: list[int]
    depth: list[int]
    closed: int = -1


def top_level_values(buf: bytes, start: int, stop: int, first_after: int | None = None
                     ) -> Values:
    """Split ``buf[start:stop]``, the inside of a JSON list starting at a value, at its
    top-level commas. With ``first_after``: stop at the first such comma at or after that
    offset (the result then holds the values before it and that comma's offset)."""
    out = Values([], [])
    in_string, run, depth, deepest = False, 0, 0, 0
    pos = start
    while pos < stop:
        end = min(stop, pos + BLOCK_BYTES)
        a = np.frombuffer(buf, np.uint8, end - pos, pos)
        at, chars, structural, in_string, run = _structural(a, in_string, run)
        d = depth + np.cumsum(np.where(structural, _OPEN[chars], 0), dtype=np.int64)
        commas = np.flatnonzero(structural & (chars == _COMMA) & (d == 0))
        below = np.flatnonzero(d < 0)
        close = int(below[0]) if len(below) else None
        if close is not None:
            commas = commas[commas < close]
        if first_after is not None:
            hit = commas[at[commas] + pos >= first_after]
            if len(hit):
                _add(out, d, at, commas[commas <= hit[0]], pos, deepest, None)
                return out
        if close is not None:
            _add(out, d, at, commas, pos, deepest, close)
            out.closed = pos + int(at[close])
            return out
        deepest = _add(out, d, at, commas, pos, deepest, None)
        depth = int(d[-1]) if len(d) else depth
        pos = end
    out.ends.append(stop)
    out.depth.append(deepest)
    return out


def _add(out: Values, d: np.ndarray, at: np.ndarray, commas: np.ndarray, pos: int,
         deepest: int, upto: int | None) -> int:
    """Record the values ending at ``commas`` (indices into ``at``, the block's bytes that
    matter) of one block; return the depth so far of the value still open at the block's end
    (or, with ``upto``, record that one too, ending there)."""
    d = d if upto is None else d[:upto]
    starts = np.concatenate([[0], commas + 1]).astype(np.int64)
    starts = starts[starts < len(d)]
    # max of d from each start to the next (a comma's own depth is 0: harmless)
    peaks = np.maximum(np.maximum.reduceat(d, starts), 0) if len(starts) else d[:0]
    if len(commas):
        first = max(deepest, int(peaks[0])) if len(peaks) else deepest
        out.ends.extend((at[commas] + pos).tolist())
        out.depth.extend([first] + peaks[1:len(commas)].tolist())
        deepest = int(peaks[len(commas)]) if len(peaks) > len(commas) else 0
    else:
        deepest = max(deepest, int(peaks[0]) if len(peaks) else 0)
    if upto is not None:
        out.ends.append(pos + int(at[upto]))
        out.depth.append(deepest)
    return deepest


def _structural(a: np.ndarray, in_string: bool, run: int):
    """The bytes of ``a`` that matter (brackets, commas, quotes): their offsets, values, and
    whether each is structural (outside every string, not a quote). Carries whether the block
    starts inside a string and how many backslashes ended the previous one; returns the same
    for the next block. A quote after an odd run of backslashes is escaped."""
    at = np.flatnonzero(_INTEREST[a])
    chars = a[at]
    is_q = chars == _QUOTE
    bs = np.flatnonzero(a == _BACKSLASH)
    real = is_q.copy()
    if len(bs):
        # each backslash's run: the offset where its run of consecutive backslashes starts
        new_run = np.concatenate([[True], np.diff(bs) != 1])
        run_start = bs[np.maximum.accumulate(np.where(new_run, np.arange(len(bs)), 0))]
        q = at[is_q]
        k = np.searchsorted(bs, q - 1)
        hit = (k < len(bs)) & (bs[np.minimum(k, len(bs) - 1)] == q - 1)
        count = np.where(hit, q - run_start[np.minimum(k, len(bs) - 1)], 0)
        count = count + np.where(hit & (run_start[np.minimum(k, len(bs) - 1)] == 0), run, 0)
        count = np.where(q == 0, run, count)
        real[np.flatnonzero(is_q)] = count % 2 == 0
        tail = len(a) - int(run_start[-1]) if bs[-1] == len(a) - 1 else 0
        run = tail + (run if tail == len(a) else 0)
    else:
        if len(a) and run and len(at) and at[0] == 0 and is_q[0]:
            real[0] = run % 2 == 0
        run = 0
    parity = (np.cumsum(real, dtype=np.int64) + int(in_string)) % 2   # 1: inside after it
    structural = (parity == 0) & ~is_q
    if len(parity):
        in_string = bool(parity[-1])
    return at, chars, structural, in_string, run
