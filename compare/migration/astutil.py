"""Small syntax-tree helpers the emitter's parts share: copies that remember their original
nodes (the scan's resolved names are keyed by those), the names a statement binds and reads."""
from __future__ import annotations

import ast
from typing import TypeVar

from compare.migration.scan import walk
from compare.migration.values import own_nodes

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
N = TypeVar("N", bound=ast.AST)


def clone(node: N) -> N:
    """A deep copy whose nodes remember their original (``_orig``): names the scan resolved are
    keyed by the original nodes."""
    new = type(node)()
    for k, v in node.__dict__.items():
        setattr(new, k, v)
    new._orig = getattr(node, "_orig", node)  # type: ignore[attr-defined]  # ours, on copies
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            setattr(new, field, [clone(v) if isinstance(v, ast.AST) else v for v in value])
        elif isinstance(value, ast.AST):
            setattr(new, field, clone(value))
    return new


def stored_names(node: ast.AST) -> set[str]:
    """Names a function body (or statement) binds, nested scopes left out."""
    out = set()
    for n in own_nodes(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, _DEFS) and n is not node:
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
    return out


def loads(node: ast.AST) -> set[str]:
    """Every name ``node`` reads (nested functions and lambdas included)."""
    return {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


#: Methods that change a Python container in place.
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "update", "setdefault",
                       "clear", "remove", "add", "discard", "sort", "reverse"})


def _root_name(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def mutated(node: ast.AST) -> set[str]:
    """Names whose value a statement changes in place: ``x.append(...)``,
    ``x[i].append(...)``, ``x[k] = ...``, ``x += ...``."""
    out = set()
    for n in walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in _MUTATORS:
            out.add(_root_name(n.func.value))
        elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
            out.add(_root_name(n.value))
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
    return out - {""}


__all__ = ["clone", "loads", "mutated", "stored_names"]


def line_of(node: ast.AST) -> int:
    """The line ``node`` starts on (an expression's or a statement's; 0 for a node without
    one, such as a module)."""
    line = getattr(node, "lineno", 0)
    return line if isinstance(line, int) else 0
