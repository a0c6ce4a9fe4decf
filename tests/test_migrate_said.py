"""Nothing in a plan that the script does not say: every ``argument=value`` a plan states about
the script (its legend, notes and unresolved items) is either the script's own (an argument of
one of its calls, a default of one of its functions, or an expression it writes) or TF1's
default for that argument (``rules.TF1_DEFAULTS``), said to be a default. Scanned over every
plan of every real script in ``tests/fixtures/``; fast known-answer cases of the checker first.

The tf.data chain is our code (``drop_remainder=True``, ``num_parallel_calls=...``), not a
statement about the script, so it is not scanned.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from compare.migrate import analyze_file, analyze_source
from compare.migration.calls import _QUEUE_PARAMS
from compare.migration.rules import RULES, TF1_DEFAULTS, rule_for
from compare.migration.source import parse

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCRIPTS = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".py", ".ipynb")
                 and p.name != "__init__.py" and "real_traces" not in p.parts
                 and "real_pairs" not in p.parts and p.name != "make_timelines.py")

_LITERALS = frozenset({"True", "False", "None"})
#: The names of TF1's arguments: a plan stating one of these states what the script gave.
#: Other names in a plan (``num_parallel_calls=``, ``num=``) are its own tf.data code.
TF1_PARAMS = frozenset({p for r in RULES for p in r.params} | {
    p for ps in _QUEUE_PARAMS.values() for p in ps} | {p for d in TF1_DEFAULTS.values()
                                                       for p in d})


def _norm(text: str) -> str:
    return "".join(text.split())


class Said:
    """What a script says: (parameter, argument) pairs of its calls and defs, and its text."""

    def __init__(self, text: str, notebook: bool = False):
        tree = parse(text, "s.py", notebook).tree
        self.pairs: set[tuple[str, str]] = set()
        self.text = _norm(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                params = self._params(node)
                for i, a in enumerate(node.args):
                    if i < len(params):
                        self.pairs.add((params[i], _norm(ast.unparse(a))))
                self.pairs |= {(k.arg, _norm(ast.unparse(k.value))) for k in node.keywords
                               if k.arg}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args]
                self.pairs |= {(n, _norm(ast.unparse(d))) for n, d in zip(
                    names[len(names) - len(a.defaults):], a.defaults)}

    @staticmethod
    def _params(call: ast.Call) -> tuple[str, ...]:
        f = call.func
        dotted = []
        while isinstance(f, ast.Attribute):
            dotted.append(f.attr)
            f = f.value
        if isinstance(f, ast.Name):
            dotted.append(f.id)
        name = ".".join(reversed(dotted))
        rule = rule_for("tensorflow." + name.split(".", 1)[-1]) if "." in name else None
        return rule.params if rule is not None else ()

    def says(self, name: str, value: str) -> bool:
        """Is ``name=value`` the script's, or TF1's default said as one?"""
        v = _norm(value)
        if (name, v) in self.pairs:
            return True
        if v in _LITERALS or re.fullmatch(r"-?[\d.]+", v) or v[:1] in "'\"":
            return False  # a bare constant must be the script's argument, not any True in it
        return v in self.text


def _in_code(line: str, at: int) -> bool:
    """Is position ``at`` inside the arguments of a call written in the line (our tf.data code,
    ``tf.data.Dataset.random(seed=None)``), rather than in the plan's words?"""
    depth = 0
    for i in range(at - 1, -1, -1):
        c = line[i]
        if c == ")":
            depth += 1
        elif c == "(":
            if depth == 0:
                return i > 0 and (line[i - 1].isalnum() or line[i - 1] in "_.")
            depth -= 1
    return False


def _values(rest: str) -> list[str]:
    """The expressions ``rest`` may begin with, shortest first (``1000 + 3 * n only bounded``:
    ``1000``, ``1000 + 3 * n``)."""
    out = []
    for m in re.finditer(r"[\s;,)]|$", rest):
        text = rest[:m.start()].rstrip(":.,")
        if not text or text in out:
            continue
        try:
            ast.parse(text, mode="eval")
        except SyntaxError:
            continue
        out.append(text)
    return out


def _stated(line: str, name: str, at: int, said: Said) -> str | None:
    """The value stated for ``name`` at ``at`` unless the script says it (None)."""
    values = _values(line[at:])
    if not values or any(said.says(name, v) for v in values):
        return None
    defaults = {repr(v) for d in TF1_DEFAULTS.values() for k, v in d.items() if k == name}
    if values[0] in defaults and "default" in line[at + len(values[0]):][:40]:
        return None
    return values[0]


def unsaid(report, said: Said) -> list[str]:
    """The statements of ``report``'s plans about the script that it does not say."""
    out = []
    for p in report.pipelines:
        lines = list(p.legend) + list(p.notes) + [f"{u.what}: {u.why}" for u in p.unresolved]
        for line in lines:
            for m in re.finditer(r"\b([a-z_][a-z0-9_]*)=", line):
                name = m.group(1)
                if name not in TF1_PARAMS or _in_code(line, m.start()):
                    continue
                value = _stated(line, name, m.end(), said)
                if value is not None:
                    out.append(f"{p.function}: {name}={value} in {line.strip()!r}")
    return out


# -- the checker, on known answers ------------------------------------------------------------

HEAD = "import tensorflow as tf\n"


@pytest.mark.parametrize("source,stated,ok", [
    (HEAD + "q = tf.train.string_input_producer(f, shuffle=False)\n", ("shuffle", "False"), True),
    (HEAD + "q = tf.train.string_input_producer(f, 3, False)\n", ("shuffle", "False"), True),
    (HEAD + "q = tf.train.string_input_producer(f)\nx = False\n", ("shuffle", "False"), False),
    (HEAD + "def f(shuffle=False):\n    pass\n", ("shuffle", "False"), True),
    (HEAD + "q = tf.FIFOQueue(cap, 'float')\n", ("capacity", "cap"), True),
    (HEAD + "q = tf.FIFOQueue(10, 'float')\n", ("capacity", "cap"), False),
])
def test_the_checker_knows_what_a_script_says(source, stated, ok):
    assert Said(source).says(*stated) is ok


def test_the_checker_finds_an_invented_argument():
    """The issue's case: a plan stating shuffle=False for a script that never says it."""
    class P:
        function = "f"
        legend = ["source: rows of x; shuffled never (shuffle=False)",
                  "source: files f; shuffled each epoch (shuffle=True by default)"]
        notes: list = []
        unresolved: list = []

    class R:
        pipelines = [P()]
    assert unsaid(R(), Said(HEAD + "q = tf.train.string_input_producer(f)\n")) == [
        "f: shuffle=False in 'source: rows of x; shuffled never (shuffle=False)'"]


# -- every plan of every real script ------------------------------------------------------------

@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_plans_state_only_what_the_script_says(path):
    report = analyze_file(path)
    said = Said(path.read_text(encoding="utf-8"), notebook=path.suffix == ".ipynb")
    assert unsaid(report, said) == []


def test_a_queue_filled_by_a_queue_runner_states_no_shuffle():
    report = analyze_source(HEAD + "q = tf.FIFOQueue(100, 'float')\n"
                            "op = q.enqueue([tf.random_normal([1])])\n"
                            "tf.train.add_queue_runner(tf.train.QueueRunner(q, [op] * 5))\n"
                            "x = q.dequeue()\n", "t.py")
    (p,) = report.pipelines
    assert "shuffle=" not in "\n".join(p.legend)
    assert unsaid(report, Said(HEAD)) == []
