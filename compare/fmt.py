"""Numbers for people, the same in every output (terminal text, report.md, plots).

ASCII only ("us", not "µs"): explain's text goes to terminals and pipes of any locale.
"""
from __future__ import annotations


def duration(us: float | None, zero: str | None = None) -> str:
    """A duration given in µs: ``"135 us"`` below 1 ms, ``"8.9 ms"`` below 1 s, else
    ``"4.35 s"``; ``None`` is ``"n/a"``, and 0 is ``zero`` when given (a table's dash)."""
    if us is None:
        return "n/a"
    if zero is not None and us == 0:
        return zero
    if abs(us) < 1e3:
        return f"{us:.0f} us"
    if abs(us) < 1e6:
        return f"{us / 1e3:.1f} ms"
    return f"{us / 1e6:.2f} s"


def size(n_bytes: float) -> str:
    """Bytes as kB below 100 kB, else MB."""
    return f"{n_bytes / 1e6:.1f} MB" if n_bytes >= 1e5 else f"{n_bytes / 1e3:.1f} kB"


def share(x: float) -> str:
    """A fraction as a whole percentage."""
    return f"{x:.0%}"
