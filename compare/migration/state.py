"""The state of the symbolic run (:mod:`.flow`) and the protocol its call handling
(:mod:`.calls`) works through.

:class:`Frame` is one function's run (defined in :mod:`.values`, as a closure's ``FuncV``
holds the frame it was made in), :class:`World` what one run of an entry function found,
:class:`Budget` the statements the whole analysis may still run. :class:`Interpreter` is what
:mod:`.calls` needs of the run: evaluating nodes and arguments, rendering text, following the
script's own functions, recording steps, and the state of the statement being run.
``flow.Run`` is the one implementation; :mod:`.calls` imports this module, never :mod:`.flow`.
"""
from __future__ import annotations

import ast
import dataclasses
from typing import Callable, Protocol

from compare.migration.scan import SourceText
from compare.migration.values import (
    End,
    Exec,
    Frame,
    FrameRec,
    FuncInfo,
    Module,
    ObjV,
    QueueV,
    StepRec,
    Stream,
    Val,
)


class Budget:
    """Statements the whole analysis may still run."""

    def __init__(self, statements: int):
        self.left = statements

    def spend(self) -> bool:
        self.left -= 1
        return self.left >= 0


class Stop(Exception):
    """The budget ran out."""


@dataclasses.dataclass
class Exit:
    """How a block ended: a return (with its value) or a raise."""

    kind: str
    value: Val | None = None


@dataclasses.dataclass
class World:
    """What one run of an entry found."""

    entry: FuncInfo
    decisions: dict[str, bool]
    ends: list[End]
    steps: dict[int, StepRec]
    streams: list[Stream]
    queues: list[QueueV]
    forks: list[str]
    stopped: bool = False
    log: list[Exec] = dataclasses.field(default_factory=list)  # in the order run
    frames: dict[int, FrameRec] = dataclasses.field(default_factory=dict)  # by fid
    decided: set[int] = dataclasses.field(default_factory=set)  # seqs of ifs this world decided
    #: What the entry hands out: its return value and, for a method, ``self`` (per-batch code
    #: is what makes these from the batches).
    returned: Val | None = None
    me: ObjV | None = None
    #: The module body's run only: the pipeline objects its names hold when it ends (queues,
    #: enqueue ops, placeholders, readers, datasets), which functions read as globals.
    shared: dict[str, Val] = dataclasses.field(default_factory=dict)
    _by_stream: dict[int, list[StepRec]] | None = dataclasses.field(default=None, repr=False)

    def steps_by_stream(self) -> dict[int, list[StepRec]]:
        """The recorded steps by the id of their stream (made once the run is over)."""
        if self._by_stream is None:
            self._by_stream = {}
            for r in self.steps.values():
                self._by_stream.setdefault(id(r.stream), []).append(r)
        return self._by_stream


class Origin:
    """The symbolic run a variant was built from (its world and end), kept for the code emitter
    (:mod:`.emit`); not part of the plan's data."""

    def __init__(self, world: World, end: End):
        self.world, self.end = world, end


#: The text of a node as the pipeline function writes it, made when first asked for.
Render = Callable[[], str]


class Interpreter(Protocol):
    """What :mod:`.calls` needs of the symbolic run (``flow.Run``)."""

    mod: Module
    src: SourceText
    world: World
    #: The calls the statement being run made: (canonical name, call node).
    cur_calls: list[tuple[str, ast.Call]]
    #: Functions defined outside this file the statement being run called with tensors.
    cur_external: list[str]
    cur_seq: int
    param_streams: dict[str, Stream]
    followed: set[int]
    presim: bool
    keys_made: bool
    floating: Stream

    def ev(self, node: ast.AST | None, fr: Frame) -> Val: ...

    def args_of(self, node: ast.Call, fr: Frame,
                params: tuple[str, ...] = ()) -> tuple[list[Val], dict[str, Val]]: ...

    def render(self, node: ast.AST, fr: Frame) -> Render: ...

    def combine(self, node: ast.AST, vals: list[Val], fr: Frame, const: object = ...) -> Val: ...

    def lookup(self, name: str, fr: Frame, node: ast.AST) -> Val: ...

    def method_of(self, obj: ObjV, name: str) -> FuncInfo | None: ...

    def call_function(self, info: FuncInfo, pos: list[Val], kw: dict[str, Val], fr: Frame,
                      bound: Val | None = None, closure: Frame | None = None,
                      call: ast.AST | None = None) -> Val | None: ...

    def touch(self, node: ast.stmt, fr: Frame, vals: list[Val]) -> StepRec | None: ...

    def stamp(self, val: Val, step: StepRec) -> Val: ...


__all__ = ["Budget", "Exit", "Frame", "Interpreter", "Render", "Stop", "World"]
