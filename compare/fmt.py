"""Numbers for people, the same in every output (terminal text, report.md, plots).

ASCII only ("us", not "µs"): explain's text goes to terminals and pipes of any locale.
"""
from __future__ import annotations

import re

#: Longest run of text without a space shown whole (a name, a path): longer ones are cut,
#: saying how long they were. The loader already keeps no name longer than
#: ``compare.model.events.MAX_NAME_CHARS``.
MAX_SHOWN_CHARS = 160
#: A long word, and the loader's note of a name it cut (" (52,428,800 characters)").
_LONG_WORD = re.compile(r"(\S{%d,})( \([\d,]+ characters\))?" % (MAX_SHOWN_CHARS + 1))


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


def fit(s: str, n: int) -> str:
    """``s`` in a column of ``n`` characters: cut with an ellipsis when longer."""
    return s if len(s) <= n else s[: n - 1] + "…"


def shown(s: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """``s`` as text shows it: whole up to ``limit`` characters, else its start and length."""
    if len(s) <= limit:
        return s
    tail = f"...({len(s):,} chars)"
    return s[:max(limit - len(tail), 1)] + tail


#: Closing marks a cut word keeps at its end (``(name)``, ``` `name`, ```): the brackets,
#: quotes and code spans around it stay balanced.
_CLOSERS = ")]}'\"`,;:"


def shown_words(text: str) -> str:
    """``text`` with every run of more than :data:`MAX_SHOWN_CHARS` characters without a
    space cut (:func:`shown`), its last few closing marks kept: what a terminal report (or
    Markdown) can wrap."""
    def cut(m: re.Match) -> str:
        if m.group(2):  # cut already: its first characters, and the length it had
            return m.group(1)[:MAX_SHOWN_CHARS - 3] + "..." + m.group(2)
        word = m.group(1)
        closers = min(len(word) - len(word.rstrip(_CLOSERS)), 3)
        end = len(word) - closers
        return shown(word[:end]) + word[end:]

    return _LONG_WORD.sub(cut, text) if len(text) > MAX_SHOWN_CHARS else text


#: Names listed in one sentence at most (recompiled clusters, input ops): a trace may have
#: thousands; the rest are counted.
MAX_LISTED = 8


def listed(names, limit: int = MAX_LISTED) -> str:
    """``a, b, c`` for a few names; ``a, b, ... and 12 more`` for many."""
    names = list(names)
    head = ", ".join(shown(n) for n in names[:limit])
    return head + (f" and {len(names) - limit} more" if len(names) > limit else "")
