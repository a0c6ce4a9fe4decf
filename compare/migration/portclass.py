"""Pipelines built in methods: the port writes a class of the same name holding the ported
pipeline methods, the script's ``__init__`` (without the TF1 pipeline objects it made: the
tf.data chain replaces them), the class attributes, and the methods the ported code calls
through ``self`` (copied and rewritten like any helper). A ``self.x`` the ported code reads that
neither ``__init__``, the class body nor a copied method sets gets a TODO: the caller must set
it. What is not ported (a pipeline built in ``__init__``, one in a nested function) says why.
"""
from __future__ import annotations

import ast
import typing

from compare.migration.astutil import clone, stored_names
from compare.migration.lift import DROPPED_CATEGORIES
from compare.migration.rewrite import Rewriter
from compare.migration.rules import rule_for
from compare.migration.values import MODULE, ClassInfo, FuncInfo

if typing.TYPE_CHECKING:
    from compare.migration.emit import _Emitter

INDENT = "    "
_KEPT_DECORATORS = frozenset({"staticmethod", "classmethod", "property"})


def unsupported(info: FuncInfo | None, p) -> str:
    """Why a pipeline's function is not ported (""; it is)."""
    if info is None:
        return (f"{p.function} is not a function of this script the port can find: port it "
                "by hand from the plan (python -m compare.migrate SCRIPT)")
    if p.function == MODULE:
        return ""
    if info.parent is not None:
        return (f"{p.function} is a function nested in {info.parent.qualname}: the port does "
                "not resolve the names it takes from there; port it by hand from the plan "
                "(python -m compare.migrate SCRIPT)")
    if info.cls is not None and info.name == "__init__":
        return (f"the pipeline is built in the constructor {p.function}, which cannot return a "
                "dataset: port it as a method by hand from the plan (python -m compare.migrate "
                "SCRIPT)")
    return ""


class Classes:
    """The port's classes, one per script class with pipeline methods."""

    def __init__(self, emitter: "_Emitter"):
        self.e = emitter
        self.members: dict[str, list[tuple[str, str]]] = {}
        self.todos: dict[str, list[str]] = {}
        self.emitted: set[str] = set()
        self.blocked_init: dict[str, int] = {}  # names TF 2 lacks in a class's __init__

    def names(self, cls: str) -> set[str]:
        return {n for n, _ in self.members.get(cls, [])}

    def add(self, cls: str, name: str, text: str, info: FuncInfo) -> bool:
        """Add a ported pipeline method (and what it calls through ``self``); False when the
        class cannot give it what it reads."""
        ci = info.cls
        first = cls not in self.members
        self.members.setdefault(cls, [])
        self.todos.setdefault(cls, [])
        self.emitted.add(cls)
        before = self.e.blocked
        if first:
            self.e.need({b for b in ci.bases if b and b != "object"})
            self.init(ci)
            self.blocked_init[cls] = self.e.blocked - before
        self.members[cls].append((name, text))
        calls, attrs = set(self.e.self_calls), set(self.e.self_attrs)
        copied = self.e.blocked
        self.copy_methods(ci, calls | (attrs & set(ci.methods)))  # self.parse given to map
        self.copy_methods(ci, self.setters(ci, attrs))
        runs = self.e.blocked == copied and not self.blocked_init.get(cls)
        return self.check_attrs(ci, calls | attrs) and runs

    def setters(self, ci: ClassInfo, attrs: set[str]) -> set[str]:
        """The methods (other than ``__init__``) that set attributes the ported code reads
        (``set_fake_data``): the caller sets them through these, so the port keeps them."""
        out = set()
        for name, info in ci.methods.items():
            if name == "__init__":
                continue
            stored = {n.attr for n in ast.walk(info.node) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Name) and n.value.id == "self"
                      and isinstance(n.ctx, ast.Store)}
            if stored & attrs:
                out.add(name)
        return out

    def init(self, ci: ClassInfo) -> None:
        """``__init__`` without the statements that make TF1 pipeline objects."""
        info = ci.methods.get("__init__")
        if info is None:
            return
        body: list = []
        for s in info.node.body:
            if self.structural(s):  # the original nodes: the scan's names are keyed by them
                body.append(f"# (left out: {ast.unparse(s).splitlines()[0][:70]}: the tf.data "
                            "chain replaces it)")
            else:
                body.append(clone(s))
        head = clone(info.node)
        head.body = [ast.Pass()]
        head_lines, _d, used = self.e.code([head], set(info.params))
        lines, _d, used_body = self.e.code(body, stored_names(info.node) | set(info.params))
        self.e.need(used | used_body)
        self.members[ci.name].insert(0, ("__init__", "\n".join(
            head_lines[:-1] + [INDENT + ln for ln in (lines or ["pass"])])))

    def structural(self, s: ast.stmt) -> bool:
        mod = self.e.mod
        for n in ast.walk(s):
            if isinstance(n, ast.Call):
                if mod.call_is_structural(n):
                    return True
                rule = rule_for(mod.scan.resolved.get(id(n), ""))
                if rule is not None and rule.category in DROPPED_CATEGORIES:
                    return True
        return False

    def copy_methods(self, ci: ClassInfo, calls: set[str]) -> None:
        todo = sorted(calls)
        while todo:
            name = todo.pop()
            info = ci.methods.get(name)
            if info is None or name in self.names(ci.name):
                continue
            node = clone(info.node)
            node.decorator_list = [d for d in node.decorator_list if isinstance(
                d, ast.Name) and d.id in _KEPT_DECORATORS]
            before = set(self.e.self_calls)
            self.e.self_calls = set()
            lines, _d, used = self.e.code([node], stored_names(info.node) | set(info.params))
            self.e.need(used)
            todo += sorted(self.e.self_calls - calls)
            calls |= self.e.self_calls
            self.e.self_calls = before | self.e.self_calls
            self.members[ci.name].append((name, "\n".join(lines)))

    def check_attrs(self, ci: ClassInfo, read: set[str]) -> bool:
        """Is every ``self.x`` the port reads set by what the class holds?"""
        have = set(ci.methods) | self.class_names(ci)
        for _name, text in self.members[ci.name]:
            try:
                tree = ast.parse(text.strip())
            except SyntaxError:
                continue
            have |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and
                     isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(
                         n.ctx, ast.Store)}
        if any(b in self.e.mod.classes or b not in ("", "object") for b in ci.bases):
            return True  # a base class may set them: not judged here
        missing = sorted(read - have)
        for name in missing:
            self.todos[ci.name].append(
                f"self.{name} is read by the ported code but set outside __init__ (by another "
                "method or the caller): set it before calling the pipeline method")
        return not missing

    def draws(self, ci: ClassInfo, names: set[str], seen: set[str] | None = None) -> int:
        """The random draws of these methods and of what they call (the module's helpers and
        the class's other methods)."""
        seen = set() if seen is None else seen
        total = 0
        for name in sorted(names - seen):
            seen.add(name)
            info = ci.methods.get(name)
            if info is None:
                continue
            rw = Rewriter(self.e.mod, stored_names(info.node) | set(info.params))
            new = rw.visit(clone(info.node))
            total += rw.draws + self.e.need(_free_names(new))
            total += self.draws(ci, {n.func.attr for n in ast.walk(new) if isinstance(
                n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(
                n.func.value, ast.Name) and n.func.value.id == "self"}, seen)
        return total

    def class_names(self, ci: ClassInfo) -> set[str]:
        out = set()
        for s in ci.node.body:
            if isinstance(s, (ast.Assign, ast.AnnAssign)):
                out |= stored_names(s)
        return out

    def texts(self) -> list[str]:
        out = []
        for cls, members in sorted(self.members.items(), key=lambda kv: self.line(kv[0])):
            ci = self.e.mod.classes[cls]
            bases = ", ".join(ast.unparse(b) for b in ci.node.bases)
            head = [f"class {cls}({bases}):" if bases else f"class {cls}:",
                    f'{INDENT}"""The tf.data port of {cls}: its pipeline methods, __init__ and '
                    'the methods they call."""']
            head += [f"{INDENT}# TODO(migrate): {t}" for t in dict.fromkeys(self.todos[cls])]
            attrs = [s for s in ci.node.body if isinstance(s, (ast.Assign, ast.AnnAssign))]
            if attrs:
                lines, _d, used = self.e.code([clone(s) for s in attrs], set())
                self.e.need(used)
                head += [INDENT + ln for ln in lines]
            body = ["\n".join(INDENT + ln if ln else "" for ln in text.split("\n"))
                    for _n, text in members]
            out.append("\n".join(head) + "\n\n" + "\n\n".join(body))
        return out

    def line(self, cls: str) -> int:
        return self.e.mod.classes[cls].node.lineno


def _free_names(node: ast.AST) -> set[str]:
    inner = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(
        n.ctx, ast.Store)} | {a.arg for n in ast.walk(node) if isinstance(n, ast.arguments)
                              for a in n.posonlyargs + n.args + n.kwonlyargs} | {
        n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(
        n.ctx, ast.Load)} - inner - {"self"}


__all__ = ["Classes", "unsupported"]
