"""Refuse early what cannot fit: before a trace is read, the memory its load would take (from
its size on disk, and a gzip's stated size) against the memory the machine has available.

The estimate is :data:`MEMORY_PER_BYTE` times the bytes to parse: the loader holds the file
and builds columns beside it (BENCHMARKS.md, "Loading and explaining a big trace" and "Hostile
traces": peak memory 2-3x the file). A gzip states its decompressed size in its last four bytes
(ISIZE), which is the size modulo 4 GiB of its last member only: a file of several members, or
of 4 GiB or more, states less than it holds. The estimate then uses the larger of ISIZE and
the compressed size, says "at least", and :mod:`compare.load.gzip_safe` still stops a bomb
while reading.

The bound is the memory available now (``MemAvailable`` of ``/proc/meminfo``, under a cgroup's
limit when one is set), or what the caller gives (``--max-memory``).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from compare.load.errors import LoadError

#: Peak memory of a load (and explain) per byte of trace text, the bound BENCHMARKS.md holds
#: the loader to (the benchmark timeline measures ~2x, hostile structures up to 3x).
MEMORY_PER_BYTE = 3.0
#: An xplane (protobuf) converts to trace-viewer JSON several times its size before loading.
XPLANE_MEMORY_PER_BYTE = 10.0

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", re.I)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes from ``8G``, ``500M``, ``1.5GB``, ``2GiB`` or a plain number of bytes; raises
    ValueError on anything else."""
    m = _SIZE.fullmatch(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (e.g. 8G, 500M, or bytes)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def human(n: float) -> str:
    """Bytes in the binary units :func:`parse_size` reads (``8G`` is 8 GiB)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


def available_bytes() -> int | None:
    """Memory this process can still take: ``MemAvailable``, capped by the cgroup's limit
    less its use; None where neither can be read."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            left = max(0, int(limit) - used)
            avail = left if avail is None else min(avail, left)
    except (OSError, ValueError):
        pass
    return avail


def gzip_stated_size(p: Path) -> int:
    """ISIZE: the decompressed size a gzip file states in its last four bytes (modulo 4 GiB,
    last member only)."""
    with open(p, "rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def estimate(p: Path) -> tuple[int, str]:
    """(bytes of memory a load of file ``p`` would take, what that rests on, in words)."""
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(2)
    if head == b"\x1f\x8b" and size >= 18:
        stated = gzip_stated_size(p)
        if stated >= size:
            return int(size + MEMORY_PER_BYTE * stated), \
                f"{human(size)} of gzip stating {human(stated)} of text"
        return int(size + MEMORY_PER_BYTE * size), \
            f"{human(size)} of gzip (its stated size, {human(stated)}, is less than the file: " \
            f"several members or 4 GiB and more; at least)"
    first = head.lstrip()[:1]
    if first in (b"{", b"[") or not head.strip():
        return int(MEMORY_PER_BYTE * size), f"{human(size)} of JSON"
    return int(XPLANE_MEMORY_PER_BYTE * size), f"{human(size)} of profile"


def check(paths: list[Path], source: str, max_memory: int | None = None) -> None:
    """Raise :class:`LoadError` (one line) when loading ``paths`` (the files of one trace)
    would take more memory than ``max_memory`` bytes, or than the machine has available
    when that is None. Reads only sizes and a gzip's last four bytes."""
    need, words = 0, []
    for p in paths:
        n, what = estimate(p)
        need += n
        words.append(what)
    bound = max_memory if max_memory is not None else available_bytes()
    if bound is None or need <= bound:
        return
    has = (f"--max-memory is {human(bound)}" if max_memory is not None
           else f"this machine has {human(bound)} available")
    raise LoadError(f"{source}: too big to load here: {', '.join(words[:3])}"
                    f"{' ...' if len(words) > 3 else ''} would take about {human(need)} of "
                    f"memory and {has}; refused before reading (--max-memory SIZE moves the "
                    f"bound)")
