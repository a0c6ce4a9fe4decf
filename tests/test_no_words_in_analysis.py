"""No sentence a user reads is built under ``compare/analysis/``: analyses return facts and
findings as data, and ``compare/output/`` words them (issue 27). The scan reads every string
constant and f-string of the package's source (docstrings apart) and fails on any with three
words or more, but for the kinds of text listed below, which are not sentences."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[1] / "compare" / "analysis"
#: A word: a run of letters between spaces (an apostrophe or a hyphen inside, punctuation
#: around it); ``{}`` placeholders, identifiers (``gpu_stream_all``) and formats are not words.
WORD = re.compile(r"""[(\["']*[A-Za-z]+(?:['-][A-Za-z]+)*[)\]:;,.!?"']*""")
#: Words that make a sentence.
MIN_WORDS = 3
#: Parts of a name, not sentences: an XLA kernel's node name says which cluster it belongs to
#: (``fusion.3 (XLA kernel of cluster_0)``), as the op tables and findings show it.
NAMES = {"legend.py": {" (XLA kernel of {})"}}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = n.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _raised(tree: ast.AST) -> set[int]:
    """Strings inside ``raise``: an error message naming the bad input (common.errors prints
    it as the CLI's one line), not a finding."""
    return {id(s) for n in ast.walk(tree) if isinstance(n, ast.Raise) for s in ast.walk(n)}


def _is_annotation(text: str) -> bool:
    """A string annotation (``"Facts | None"``): names joined by ``|``, ``.`` and ``[]``."""
    return re.fullmatch(r"[\w.\[\], |]+", text) is not None and "|" in text


def _text(n: ast.AST) -> str | None:
    if isinstance(n, ast.Constant) and isinstance(n.value, str):
        return n.value
    if isinstance(n, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)
    return None


def sentences(source: str, allowed: set[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, text) of every string in ``source`` that reads as a sentence."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _raised(tree)
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)
             for v in ast.walk(n) if v is not n}
    out = []
    for n in ast.walk(tree):
        text = _text(n)
        if text is None or id(n) in skip or id(n) in inner or text in allowed or \
                _is_annotation(text):
            continue
        if sum(WORD.fullmatch(w) is not None for w in text.split()) >= MIN_WORDS:
            out.append((getattr(n, "lineno", 0), text))
    return sorted(out)


def test_no_sentence_is_built_under_compare_analysis():
    found = [f"{path.name}:{line}: {text[:70]!r}" for path in sorted(ANALYSIS.glob("*.py"))
             for line, text in sentences(path.read_text(), NAMES.get(path.name, set()))]
    assert not found, "\n".join(found)


def test_the_scan_finds_planted_sentences_and_only_those():
    source = '''
"""A docstring with many words in it."""
x = "the step waited for input"
y = f"it took {ms(d)} of the step"
z = {"kind": "one_time", "case": "first"}
w = "a b"
t: "Facts | None" = None


def f(path):
    """Words in a docstring."""
    raise InputError(f"{path}: the trace has no events")
'''
    assert [text for _, text in sentences(source)] == ["the step waited for input",
                                                      "it took {} of the step"]
