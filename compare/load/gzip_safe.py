"""Gzip traces read safely: every member (as ``gzip -d`` does), a bomb refused early, a
damaged or cut stream read up to the damage with a note."""
from __future__ import annotations

import os
import zlib
from pathlib import Path

from compare.load.errors import LoadError

#: Refuse to decompress more than this (a gzip bomb must not exhaust memory).
MAX_DECOMPRESSED_BYTES = int(os.environ.get("COMPARE_MAX_TRACE_BYTES", 4 << 30))
#: Past this much output, refuse gzip data that expands more than MAX_GZIP_RATIO times: real
#: traces compress 11x (xprof JSON) to 29x (indented timeline.py JSON); deflate's limit is
#: ~1030x, which is what bombs use. So a 10 MB -> 10 GB bomb stops after 256 MiB, not 4 GiB.
GZIP_RATIO_CHECK_AFTER = 256 << 20
MAX_GZIP_RATIO = 200
_GUNZIP_PIECE = 16 << 20


def gunzip(p: Path) -> bytes:
    """Decompress a gzip file (all members, as ``gzip -d`` does), refusing a gzip bomb early:
    past :data:`GZIP_RATIO_CHECK_AFTER` bytes of output, an output/input ratio above
    :data:`MAX_GZIP_RATIO`, and always more than :data:`MAX_DECOMPRESSED_BYTES`."""
    out: list[bytes] = []
    total = consumed = 0

    def take(piece: bytes) -> None:
        nonlocal total
        total += len(piece)
        if total > MAX_DECOMPRESSED_BYTES:
            raise LoadError(f"{p}: decompresses to more than {MAX_DECOMPRESSED_BYTES >> 20} MiB "
                            f"(a gzip bomb?); refusing to read it")
        if total > GZIP_RATIO_CHECK_AFTER and total > MAX_GZIP_RATIO * consumed:
            raise LoadError(f"{p}: decompresses more than {MAX_GZIP_RATIO}x ({consumed >> 10} KiB "
                            f"gave over {total >> 20} MiB; a gzip bomb?); refusing to read it")
        out.append(piece)

    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    note = ""
    with open(p, "rb") as f:
        data = b""
        while True:
            if not data:
                data = f.read(1 << 20)
                consumed += len(data)
                if not data:
                    break
            try:
                take(d.decompress(data, _GUNZIP_PIECE))
                while d.unconsumed_tail:
                    take(d.decompress(d.unconsumed_tail, _GUNZIP_PIECE))
            except zlib.error as e:
                if not out:
                    raise LoadError(f"{p}: corrupt gzip data ({e})") from None
                note = "the gzip data is damaged part way; read what came before the damage"
                break
            data = b""
            if d.eof:  # end of a member: another member may follow (concatenated gzip files)
                data = d.unused_data or f.read(1 << 20)
                consumed += 0 if d.unused_data else len(data)
                if not data.strip(b"\0"):
                    data = b""
                    if not f.read(1):
                        break
                    note = "bytes after the gzip data were ignored"
                    break
                if data[:2] != b"\x1f\x8b":
                    note = "bytes after the gzip data were ignored"
                    break
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    if not note and not d.eof:
        note = "the gzip stream ends early (truncated file); read what was there"
    buf = b"".join(out)
    if note:
        buf = Truncated(buf)
        buf.note = note
    return buf


class Truncated(bytes):
    """Bytes from a gzip stream that ended early or was damaged (``note`` says how; the loader
    adds it as a warning)."""

    note: str = ""
