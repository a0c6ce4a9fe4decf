"""From a file's text to a syntax tree the analysis can read, saying what it had to do on the way.

- Notebooks (``.ipynb``): the code cells are joined in order; IPython magics and shell escapes
  (``%matplotlib``, ``!pip``, ``%%bash`` cells) become ``pass`` so line numbers hold; every line
  maps back to its cell (:meth:`Parsed.where`).
- Python 2: when the text is not Python 3, the Python 2 statements Python 3 rejects (``print x``,
  ``exec code``, ``except E, e:``, ``raise E, msg``, backticks, ``0777``, ``10L``, ``ur''``,
  ``<>``, tabs mixed with spaces) are rewritten in memory, each on its own line, and parsed
  again; the report says what was rewritten. The file itself is never touched.

A small tokenizer of our own does the rewriting: :mod:`tokenize` rejects Python 2 numbers and
backticks outright from Python 3.12 on.
"""
from __future__ import annotations

import ast
import collections
import dataclasses
import json
import re
from typing import Any, Callable

from common.errors import InputError

#: Where a line of the joined code of a notebook is: (cell number, line in the cell).
Where = Callable[[int], tuple[int | None, int]]


@dataclasses.dataclass(frozen=True)
class Cell:
    """A notebook code cell: its number among all cells (1-based, as the notebook shows them)
    and the lines it occupies in the joined code (``first``, 1-based, ``count`` lines)."""

    number: int
    first: int
    count: int


@dataclasses.dataclass
class Parsed:
    """What the analysis reads: ``text`` (the code that was parsed) and its ``tree``; ``notes``
    say how it differs from the file (Python 2 rewrites, notebook cells)."""

    name: str
    text: str
    tree: ast.Module
    notes: list[str] = dataclasses.field(default_factory=list)
    cells: tuple[Cell, ...] = ()
    python2: dict[str, int] = dataclasses.field(default_factory=dict)

    def where(self, line: int) -> tuple[int | None, int]:
        """``(cell number, line in the cell)`` for a notebook, ``(None, line)`` otherwise."""
        for cell in self.cells:
            if cell.first <= line < cell.first + cell.count:
                return cell.number, line - cell.first + 1
        return None, line


# -- notebooks ------------------------------------------------------------------------------

#: Cell magics whose body is still Python (the magic line itself becomes ``pass``).
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug",
                                 "tensorflow_version"})
_MAGIC_LINE = re.compile(r"^(\s*)(?:[%!?]|[\w.]+\s*=\s*[%!])")


def _cell_source(cell: dict[str, Any]) -> str:
    src = cell.get("source", cell.get("input", ""))
    return "".join(src) if isinstance(src, list) else str(src)


def _cell_lines(source: str) -> tuple[list[str], bool]:
    """The cell's lines with magics made ``pass``; False when the cell is not Python at all."""
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].lstrip()[2:].split()[:1]
        if not magic or magic[0] not in _PYTHON_CELL_MAGICS:
            return ["pass"] * len(lines), False
        lines[0] = "pass"
    out = []
    for ln in lines:
        m = _MAGIC_LINE.match(ln)
        if m is not None:
            out.append(m.group(1) + "pass")
        elif ln.rstrip().endswith("?") and not ln.lstrip().startswith("#"):
            out.append(ln[:len(ln) - len(ln.lstrip())] + "pass")
        else:
            out.append(ln)
    return out, True


def notebook_code(text: str, name: str) -> tuple[str, tuple[Cell, ...], int]:
    """The code cells of a notebook joined into one script: (code, cells, non-Python cells)."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise InputError(f"{name}: not a notebook (not JSON: {e})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{name}: not a notebook (no cells)")
    cells = doc.get("cells")
    if cells is None and isinstance(doc.get("worksheets"), list):  # nbformat 3
        cells = [c for ws in doc["worksheets"] if isinstance(ws, dict) for c in ws.get("cells", [])]
    if not isinstance(cells, list):
        raise InputError(f"{name}: not a notebook (no cells)")
    lines: list[str] = []
    found: list[Cell] = []
    skipped = 0
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        body, python = _cell_lines(_cell_source(cell))
        skipped += not python
        found.append(Cell(number, len(lines) + 1, len(body)))
        lines += body
    return "\n".join(lines) + "\n", tuple(found), skipped


# -- a tolerant tokenizer -------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\f]+)
  | (?P<cont>\\\r?\n)
  | (?P<nl>\r\n|\r|\n)
  | (?P<comment>\#[^\r\n]*)
  | (?P<string>(?i:[rbuf]{0,2})(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
                                 |'(?:\\.|[^\\'\r\n])*'|"(?:\\.|[^\\"\r\n])*"))
  | (?P<number>0[xX][0-9a-fA-F_]+[lL]?|0[oObB]?[0-7_]+[lL]?|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)
               (?:[eE][+-]?\d+)?[jJlL]?)
  | (?P<name>[^\W\d]\w*)
  | (?P<op>\*\*=?|//=?|>>=?|<<=?|<>|!=|->|:=|\.\.\.|[-+*/%&|^=<>]=?|[()\[\]{}:,;.@~`])
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)


@dataclasses.dataclass
class _Tok:
    kind: str
    text: str
    start: int  # offset in the text
    depth: int  # bracket depth before the token


def _tokens(text: str) -> list[_Tok]:
    """Tokens with offsets; ``nl`` only where a logical line ends (bracket depth 0)."""
    out: list[_Tok] = []
    depth, pos = 0, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:  # the pattern's last branch takes any character
            break
        kind, tok = m.lastgroup, m.group()
        pos = m.end()
        if kind in ("ws", "cont", "comment") or (kind == "nl" and depth):
            continue
        out.append(_Tok(kind, tok, m.start(), depth))
        if tok in "([{" and kind == "op":
            depth += 1
        elif tok in ")]}" and kind == "op":
            depth = max(0, depth - 1)
    return out


_COMPOUND = frozenset({"if", "elif", "else", "for", "while", "try", "except", "finally", "with",
                       "def", "class"})


def _statements(toks: list[_Tok]) -> list[list[_Tok]]:
    """Simple statements: split at logical line ends, ``;`` and the ``:`` of a compound
    header that has its body on the same line (``if x: print y``)."""
    out: list[list[_Tok]] = []
    cur: list[_Tok] = []
    for t in toks:
        if t.kind == "nl" or (t.kind == "op" and t.text == ";" and not t.depth):
            out.append(cur)
            cur = []
            continue
        cur.append(t)
        if (t.kind == "op" and t.text == ":" and not t.depth and cur[0].kind == "name"
                and cur[0].text in _COMPOUND):
            out.append(cur)
            cur = []
    out.append(cur)
    return [s for s in out if s]


class _Edits:
    """Replacements by offset, applied right to left so earlier offsets stay valid."""

    def __init__(self) -> None:
        self.items: list[tuple[int, int, str]] = []
        self.count: collections.Counter[str] = collections.Counter()

    def put(self, start: int, end: int, new: str, what: str | None = None) -> None:
        self.items.append((start, end, new))
        if what:
            self.count[what] += 1

    def apply(self, text: str) -> str:
        """The text with every edit made (edits at one offset in the order they were put,
        as when applied right to left one by one), in one pass."""
        parts, pos = [], len(text)
        for start, end, new in sorted(self.items, key=lambda e: (e[0], e[1]), reverse=True):
            parts.append(text[end:pos])
            parts.append(new)
            pos = start
        parts.append(text[:pos])
        return "".join(reversed(parts))


def _end(t: _Tok) -> int:
    return t.start + len(t.text)


def _statement_call(stmt: list[_Tok], edits: _Edits, what: str) -> None:
    """``print x, y`` -> ``print(x, y)``; ``print >>f, x`` -> ``print(f, x)``; bare ``print``."""
    head = stmt[0]
    if len(stmt) == 1:
        edits.put(_end(head), _end(head), "()", what)
        return
    nxt = stmt[1]
    if nxt.kind == "op" and nxt.text in ("(", "=", ".", ",", ")"):
        if nxt.text != "(" or any(t.text == "," and t.depth == 0 for t in stmt[2:]):
            if nxt.text == "(":  # print (a), b: a tuple in Python 2
                edits.put(nxt.start, nxt.start, "(", what)
                edits.put(_end(stmt[-1]), _end(stmt[-1]), ")")
        return
    edits.put(_end(head), nxt.start, "(", what)  # 'print x' -> 'print(x': the space becomes (
    if nxt.kind == "op" and nxt.text == ">>":
        edits.put(nxt.start, _end(nxt), "")
    edits.put(_end(stmt[-1]), _end(stmt[-1]), ")")


def _rewrite_statement(stmt: list[_Tok], edits: _Edits) -> None:
    head = stmt[0]
    if head.kind != "name":
        return
    if head.text in ("print", "exec"):
        _statement_call(stmt, edits, f"{head.text} statement")
    elif head.text == "except":
        k = next((k for k, t in enumerate(stmt) if t.text == "," and t.depth == 0), None)
        if k is not None:
            comma = stmt[k]
            tight = k + 1 < len(stmt) and stmt[k + 1].start == _end(comma)  # except E,e:
            edits.put(comma.start, _end(comma), " as " if tight else " as", "except E, e")
    elif head.text == "raise":
        sep = next((t for t in stmt if t.text == "," and t.depth == 0), None)
        if sep is not None:
            edits.put(sep.start, _end(sep), "(", "raise E, message")
            edits.put(_end(stmt[-1]), _end(stmt[-1]), ")")


def _rewrite_token(t: _Tok, edits: _Edits, ticks: list[int]) -> None:
    if t.kind == "number":
        if re.fullmatch(r"0[0-7_]+[lL]?", t.text) and t.text.strip("0_lL"):
            edits.put(t.start, t.start + 1, "0o", "octal literal")
        if t.text[-1] in "lL":
            edits.put(_end(t) - 1, _end(t), "", "long literal")
    elif t.kind == "string" and t.text[:2].lower() == "ur":
        edits.put(t.start, t.start + 1, "", "ur'' string")
    elif t.kind == "op" and t.text == "<>":
        edits.put(t.start, _end(t), "!=", "<> operator")
    elif t.kind == "op" and t.text == "`":
        ticks.append(t.start)
        opening = len(ticks) % 2 == 1
        edits.put(t.start, _end(t), "repr(" if opening else ")",
                  "backtick repr" if opening else None)


def python2_rewrite(text: str) -> tuple[str, dict[str, int]]:
    """``text`` with the Python 2 syntax of the module doc rewritten, and what was rewritten."""
    toks = _tokens(text)
    edits = _Edits()
    for stmt in _statements(toks):
        _rewrite_statement(stmt, edits)
    ticks: list[int] = []
    for t in toks:
        _rewrite_token(t, edits, ticks)
    return edits.apply(text), dict(edits.count)


def _expand_tabs(text: str) -> str:
    """Leading tabs as Python 2 read them (to the next multiple of 8)."""
    return "".join(ln[:len(ln) - len(ln.lstrip(" \t"))].expandtabs(8) + ln.lstrip(" \t")
                   for ln in text.splitlines(keepends=True))


# -- parsing --------------------------------------------------------------------------------

def _try_parse(text: str, name: str) -> ast.Module | SyntaxError:
    try:
        return ast.parse(text, filename=name)
    except SyntaxError as e:  # TabError and IndentationError too
        return e
    except (ValueError, RecursionError, MemoryError) as e:
        raise InputError(f"{name}: cannot be parsed ({type(e).__name__}: {e})") from None


def _python2(text: str, name: str, first: SyntaxError) -> tuple[ast.Module, str, dict[str, int]]:
    rewritten, done = python2_rewrite(text)
    tree = _try_parse(rewritten, name)
    if isinstance(tree, TabError) or (isinstance(tree, SyntaxError)
                                      and isinstance(first, TabError)):
        rewritten = _expand_tabs(rewritten)
        done["tabs mixed with spaces"] = 1
        tree = _try_parse(rewritten, name)
    if isinstance(tree, SyntaxError) or not done:
        where = f"{name}:{first.lineno}" if first.lineno else name
        raise InputError(f"{where}: not valid Python 3: {first.msg}") from None
    return tree, rewritten, done


def parse(text: str, name: str, notebook: bool = False) -> Parsed:
    """Parse a script's text (or a notebook's JSON with ``notebook=True``), falling back to the
    Python 2 rewrite; InputError names the file and the line when neither parses."""
    cells: tuple[Cell, ...] = ()
    notes: list[str] = []
    if notebook:
        text, cells, skipped = notebook_code(text, name)
        if not cells:
            raise InputError(f"{name}: the notebook has no code cells")
        notes.append(f"Notebook: read its {len(cells)} code cell(s) in order"
                     + (f" ({skipped} non-Python cell(s) skipped)" if skipped else "")
                     + "; lines are given as cell N, line M.")
    elif not text:
        raise InputError(f"{name}: empty file")
    if not text.strip():
        raise InputError(f"{name}: holds only whitespace")
    tree = _try_parse(text, name)
    done: dict[str, int] = {}
    if isinstance(tree, SyntaxError):
        tree, text, done = _python2(text, name, tree)
        said = ", ".join(f"{what} x{n}" for what, n in sorted(done.items()))
        notes.append(f"Python 2 script: analysed after rewriting its Python 2 syntax in memory "
                     f"({said}; line numbers unchanged). Port it to Python 3 before running it on "
                     "TF 2 (2to3 does the syntax; check integer division and str/bytes).")
    return Parsed(name, text, tree, notes, cells, done)
