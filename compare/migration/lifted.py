"""What :mod:`.lift` makes of a variant's statements: each statement with the context that
writes it in the port's names (:class:`Ctx`), and the lifted parts (:class:`Lifted`), which
:mod:`.batchpart` settles and :mod:`.emit` writes."""
from __future__ import annotations

import ast
import dataclasses
from typing import TypeVar, cast

from compare.migration.astutil import clone

N = TypeVar("N", bound=ast.AST)


class _Renamer(ast.NodeTransformer):
    """A frame's names as the port writes them: locals renamed, parameters replaced."""

    def __init__(self, names: dict[str, str], subs: dict[str, ast.expr]):
        self.names, self.subs = names, subs

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.subs:
            return clone(self.subs[node.id])
        if node.id in self.names:
            node.id = self.names[node.id]
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        inner = {a.arg for a in node.args.args}
        saved = self.names, self.subs
        self.names = {k: v for k, v in self.names.items() if k not in inner}
        self.subs = {k: v for k, v in self.subs.items() if k not in inner}
        self.generic_visit(node)
        self.names, self.subs = saved
        return node


@dataclasses.dataclass
class Ctx:
    """How one executed frame is written in the port."""

    fid: int
    names: dict[str, str]
    subs: dict[str, ast.expr]
    result: ast.expr | None = None  # the value its executed return gave

    def rename(self, node: N) -> N:
        """A copy of ``node`` in the port's names (an expression stays an expression, a
        statement a statement)."""
        return cast(N, _Renamer(self.names, self.subs).visit(clone(node)))

    def apply(self, node: N) -> N:
        """``node`` in the port's names (a statement recorded under :data:`DONE` already is)."""
        return node if self.fid < 0 else self.rename(node)


DONE = Ctx(-1, {}, {})  # for statements made or renamed already

#: A lifted statement: (statement, the context writing it, depth of its frame below the entry,
#: the order it was met in).
Item = tuple[ast.stmt, Ctx, int, int]


@dataclasses.dataclass
class Lifted:
    """One variant's statements, each (statement, its frame's :class:`Ctx`, depth of its frame
    below the entry, order met); ``ctx.apply(stmt)`` gives it in the port's names.
    ``element``: how the map function's input binds (statements); ``returns``: the
    map function's result (None: no per-example stage); ``batch_params`` / ``output``: the
    per-batch function's parameters and result (None: no per-batch stage);
    ``entry_returns``: the pipeline function returns its batches (else they are bound to
    ``output``, the names the script gave them); ``todos``: what could not be lifted;
    ``script_locals``: the names the script's pipeline code bound (in the port's names)."""

    setup: list[Item] = dataclasses.field(default_factory=list)
    element: list[ast.stmt] = dataclasses.field(default_factory=list)
    example: list[Item] = dataclasses.field(default_factory=list)
    after: list[Item] = dataclasses.field(default_factory=list)
    returns: ast.expr | None = None
    batch_params: list[str] | None = None
    output: ast.expr | None = None
    entry_returns: bool = False
    end_line: int = 0
    todos: list[str] = dataclasses.field(default_factory=list)
    script_locals: set[str] = dataclasses.field(default_factory=set)


__all__ = ["DONE", "Ctx", "Item", "Lifted"]
