"""Pipelines built in methods: the port writes a class of the same name holding the ported
pipeline methods, the script's ``__init__`` (without the TF1 pipeline objects it made: the
tf.data chain replaces them), the class attributes, and the methods the ported code calls
through ``self`` (copied and rewritten like any helper). A ``self.x`` the ported code reads that
neither ``__init__``, the class body nor a copied method sets gets a TODO: the caller must set
it. What is not ported (a pipeline built in ``__init__``, one in a nested function) says why.
"""
from __future__ import annotations

import ast
from typing import Protocol

from compare.migration.astutil import clone, stored_names
from compare.migration.lift import DROPPED_CATEGORIES
from compare.migration.model import Pipeline
from compare.migration.rewrite import Rewriter
from compare.migration.rules import rule_for
from compare.migration.values import MODULE, ClassInfo, FuncInfo, Module


class Writer(Protocol):
    """What :class:`Classes` needs of the code writer that fills it (``emit``'s): statements
    rewritten to TF 2, the globals they read carried, and what the last code written called
    and read through ``self``."""

    mod: Module
    #: How many statements so far cannot run as written (a name TF 2 lacks, ...).
    blocked: int
    self_calls: set[str]
    self_attrs: set[str]

    def code(self, stmts: list[ast.stmt | str], locals_: set[str],
             live: bool = False) -> tuple[list[str], int, set[str]]: ...

    def need(self, names: set[str]) -> int: ...

INDENT = "    "
_KEPT_DECORATORS = frozenset({"staticmethod", "classmethod", "property"})


def unsupported(info: FuncInfo | None, p: Pipeline) -> str:
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

    def __init__(self, writer: Writer):
        self.writer = writer
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
        if ci is None:
            raise ValueError(f"{info.qualname} is not a method")
        first = cls not in self.members
        self.members.setdefault(cls, [])
        self.todos.setdefault(cls, [])
        self.emitted.add(cls)
        before = self.writer.blocked
        if first:
            self.writer.need({b for b in ci.bases if b and b != "object"})
            self.init(ci)
            self.blocked_init[cls] = self.writer.blocked - before
        self.members[cls].append((name, text))
        calls, attrs = set(self.writer.self_calls), set(self.writer.self_attrs)
        copied = self.writer.blocked
        self.copy_methods(ci, calls | (attrs & set(ci.methods)))  # self.parse given to map
        self.copy_methods(ci, self.setters(ci, attrs))
        runs = self.writer.blocked == copied and not self.blocked_init.get(cls)
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
        body: list[ast.stmt | str] = []
        for s in info.definition.body:
            if self.structural(s):  # the original nodes: the scan's names are keyed by them
                body.append(f"# (left out: {ast.unparse(s).splitlines()[0][:70]}: the tf.data "
                            "chain replaces it)")
            else:
                body.append(clone(s))
        head = clone(info.definition)
        head.body = [ast.Pass()]
        head_lines, _d, used = self.writer.code([head], set(info.params))
        lines, _d, used_body = self.writer.code(body, stored_names(info.node) | set(info.params))
        self.writer.need(used | used_body)
        self.members[ci.name].insert(0, ("__init__", "\n".join(
            head_lines[:-1] + [INDENT + ln for ln in (lines or ["pass"])])))

    def structural(self, s: ast.stmt) -> bool:
        mod = self.writer.mod
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
            node = clone(info.definition)
            node.decorator_list = [d for d in node.decorator_list if isinstance(
                d, ast.Name) and d.id in _KEPT_DECORATORS]
            before = set(self.writer.self_calls)
            self.writer.self_calls = set()
            lines, _d, used = self.writer.code([node], stored_names(info.node) | set(info.params))
            self.writer.need(used)
            todo += sorted(self.writer.self_calls - calls)
            calls |= self.writer.self_calls
            self.writer.self_calls = before | self.writer.self_calls
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
        if any(b in self.writer.mod.classes or b not in ("", "object") for b in ci.bases):
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
            rw = Rewriter(self.writer.mod, stored_names(info.node) | set(info.params))
            new = rw.visit(clone(info.node))
            total += rw.draws + self.writer.need(_free_names(new))
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
            ci = self.writer.mod.classes[cls]
            bases = ", ".join(ast.unparse(b) for b in ci.node.bases)
            head = [f"class {cls}({bases}):" if bases else f"class {cls}:",
                    f'{INDENT}"""The tf.data port of {cls}: its pipeline methods, __init__ and '
                    'the methods they call."""']
            head += [f"{INDENT}# TODO(migrate): {t}" for t in dict.fromkeys(self.todos[cls])]
            attrs = [s for s in ci.node.body if isinstance(s, (ast.Assign, ast.AnnAssign))]
            if attrs:
                lines, _d, used = self.writer.code([clone(s) for s in attrs], set())
                self.writer.need(used)
                head += [INDENT + ln for ln in lines]
            body = ["\n".join(INDENT + ln if ln else "" for ln in text.split("\n"))
                    for _n, text in members]
            out.append("\n".join(head) + "\n\n" + "\n\n".join(body))
        return out

    def line(self, cls: str) -> int:
        return self.writer.mod.classes[cls].node.lineno


def _free_names(node: ast.AST) -> set[str]:
    inner = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(
        n.ctx, ast.Store)} | {a.arg for n in ast.walk(node) if isinstance(n, ast.arguments)
                              for a in n.posonlyargs + n.args + n.kwonlyargs} | {
        n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(
        n.ctx, ast.Load)} - inner - {"self"}


__all__ = ["Classes", "unsupported"]
