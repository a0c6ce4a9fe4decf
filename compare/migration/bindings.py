"""Is every name bound before the port reads it? The emitter moves the script's statements into
new places (setup, the per-example map, the per-batch map); a statement that read a name the
TF1 code bound (a reader, a queue's output) may land where nothing binds it, and Python would
raise UnboundLocalError or NameError when the port runs. :func:`reads_unbound` finds the names a
statement reads before anything binds them, in execution order within the statement (an ``if``
binds what either branch binds; a loop, what its body binds; a nested ``def`` reads nothing until
it is called).
"""
from __future__ import annotations

import ast

from compare.migration.scan import walk


def targets(node: ast.AST) -> set[str]:
    """The plain names an assignment target binds."""
    return {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(
        n.ctx, (ast.Store, ast.Del))}


class _Reads:
    def __init__(self) -> None:
        self.missing: set[str] = set()

    def expr(self, e: ast.AST | None, bound: set[str]) -> None:
        if e is None:
            return
        inner: set[str] = set()
        for n in walk(e):
            if isinstance(n, ast.Lambda):
                a = n.args
                inner |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
                inner |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
            elif isinstance(n, ast.comprehension):
                inner |= targets(n.target)
            elif isinstance(n, ast.NamedExpr):
                inner |= targets(n.target)
        for n in walk(e):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound \
                    and n.id not in inner:
                self.missing.add(n.id)

    def block(self, stmts: list[ast.stmt], bound: set[str]) -> None:
        for s in stmts:
            self.stmt(s, bound)

    def branch(self, stmts: list[ast.stmt], bound: set[str]) -> set[str]:
        inner = set(bound)
        self.block(stmts, inner)
        return inner

    def stmt(self, s: ast.stmt, bound: set[str]) -> None:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in s.decorator_list:
                self.expr(d, bound)
            if not isinstance(s, ast.ClassDef):
                for d in s.args.defaults + [d for d in s.args.kw_defaults if d is not None]:
                    self.expr(d, bound)
            bound.add(s.name)
        elif isinstance(s, ast.If):
            self.expr(s.test, bound)
            bound |= self.branch(s.body, bound) | self.branch(s.orelse, bound)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self.expr(s.iter, bound)
            bound |= targets(s.target)
            bound |= self.branch(s.body + s.orelse, bound)
        elif isinstance(s, ast.While):
            self.expr(s.test, bound)
            bound |= self.branch(s.body + s.orelse, bound)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.expr(item.context_expr, bound)
                if item.optional_vars is not None:
                    bound |= targets(item.optional_vars)
            self.block(s.body, bound)
        elif isinstance(s, ast.Try):
            bound |= self.branch(s.body + s.orelse, bound)
            for h in s.handlers:
                inner = set(bound) | ({h.name} if h.name else set())
                self.block(h.body, inner)
                bound |= inner
            self.block(s.finalbody, bound)
        else:
            self.simple(s, bound)

    def simple(self, s: ast.stmt, bound: set[str]) -> None:
        if isinstance(s, ast.Assign):
            self.expr(s.value, bound)
            for t in s.targets:
                self.expr(t, bound)  # x[i] = ... reads x and i
                bound |= targets(t)
        elif isinstance(s, ast.AugAssign):
            self.expr(s.value, bound)
            if isinstance(s.target, ast.Name) and s.target.id not in bound:
                self.missing.add(s.target.id)
            self.expr(s.target, bound)
        elif isinstance(s, ast.AnnAssign):
            self.expr(s.value, bound)
            bound |= targets(s.target)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in s.names}
        elif isinstance(s, (ast.Global, ast.Nonlocal)):
            bound |= set(s.names)
        else:
            self.expr(s, bound)


def reads_unbound(stmt: ast.stmt, bound: set[str]) -> set[str]:
    """The names ``stmt`` reads before they are bound, given the names ``bound`` before it."""
    r = _Reads()
    r.stmt(stmt, set(bound))
    return r.missing


def binds(stmt: ast.stmt) -> set[str]:
    """What ``stmt`` binds when it has run (both branches of an ``if`` counted)."""
    bound: set[str] = set()
    _Reads().stmt(stmt, bound)
    return bound


__all__ = ["binds", "reads_unbound", "targets"]
