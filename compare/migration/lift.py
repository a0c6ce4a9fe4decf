"""The script's own statements, lifted out of a TF1 pipeline function into the parts of its tf.data
port: what runs once (``setup``: file lists, constants, checks), what runs per example (the body
of the ``Dataset.map`` function) and what runs per batch (a map after ``batch``).

It walks the statements exactly as the symbolic run executed them (:class:`.values.Exec`, one
world of one entry function: undecidable structural ``if`` s are already decided), so a helper's
``if shuffle:`` is the branch its caller chose. A helper that builds pipeline parts (it reads,
queues or batches) is *inlined*: its statements join the pipeline function's, its locals renamed
where they would clash, its parameters replaced by what the caller passed, its ``return`` value put
where the call was. A helper that only computes (``augmentbody``, ``resize_image``) stays a call:
the emitter copies the function into the port. Statements that build the TF1 pipeline (producers,
readers, queues, batchers, sessions, queue runners) are dropped: the tf.data chain replaces them.
"""
from __future__ import annotations

import ast
import collections
import dataclasses

from compare.migration import model as m
from compare.migration.rules import rule_for
from compare.migration.scan import walk
from compare.migration.values import Exec, FrameRec, Module, Stream, own_nodes, tensors_in

#: Rule categories of TF1 runtime plumbing: the port leaves out their uses (XLA scopes are
#: unwrapped by :mod:`.rewrite`, the others' statements dropped with the pipeline's).
RUNTIME_CATEGORIES = frozenset({"queue_runner", "session", "tracing", "xla_jit"})
DROPPED_CATEGORIES = RUNTIME_CATEGORIES - {"xla_jit"}
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclasses.dataclass
class Lifted:
    """One variant's statements, each (statement, its frame's :class:`_Ctx`, depth of its frame
    below the entry); ``ctx.apply(stmt)`` gives it in the port's names. ``element``: how the map function's input binds (statements); ``returns``: the
    map function's result (None: no per-example stage); ``batch_params`` / ``output``: the
    per-batch function's parameters and result (None: no per-batch stage);
    ``entry_returns``: the pipeline function returns its batches (else they are bound to
    ``output``, the names the script gave them); ``todos``: what could not be lifted."""

    setup: list = dataclasses.field(default_factory=list)
    element: list = dataclasses.field(default_factory=list)
    example: list = dataclasses.field(default_factory=list)
    after: list = dataclasses.field(default_factory=list)
    returns: ast.expr | None = None
    batch_params: list[str] | None = None
    output: ast.expr | None = None
    entry_returns: bool = False
    end_line: int = 0
    todos: list[str] = dataclasses.field(default_factory=list)


def clone(node: ast.AST) -> ast.AST:
    """A deep copy whose nodes remember their original (``_orig``): names the scan resolved are
    keyed by the original nodes."""
    new = type(node)()
    for k, v in node.__dict__.items():
        setattr(new, k, v)
    new._orig = getattr(node, "_orig", node)
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            setattr(new, field, [clone(v) if isinstance(v, ast.AST) else v for v in value])
        elif isinstance(value, ast.AST):
            setattr(new, field, clone(value))
    return new


def _header_nodes(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself (a compound statement's header only; no
    nested function bodies)."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [i.context_expr for i in stmt.items]
    if isinstance(stmt, (ast.Try, *_DEFS)):
        return []
    return [stmt]


def _calls(stmt: ast.stmt):
    for root in _header_nodes(stmt):
        stack = [root]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Call):
                yield n
            if not isinstance(n, (ast.Lambda, *_DEFS)):
                stack.extend(ast.iter_child_nodes(n))


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
class _Ctx:
    """How one executed frame is written in the port."""

    fid: int
    names: dict[str, str]
    subs: dict[str, ast.expr]
    result: ast.expr | None = None  # the value its executed return gave

    def rename(self, node: ast.AST) -> ast.AST:
        return _Renamer(self.names, self.subs).visit(clone(node))

    def apply(self, node: ast.AST) -> ast.AST:
        """``node`` in the port's names (a statement recorded under :data:`_DONE` already is)."""
        return node if self.fid < 0 else self.rename(node)


_DONE = _Ctx(-1, {}, {})  # for statements made or renamed already


class Lifter:
    """Lifts one variant (see module doc)."""

    def __init__(self, mod: Module, pipeline: m.Pipeline, variant: m.Variant):
        self.mod, self.p, self.v = mod, pipeline, variant
        world, self.end = variant.origin.world, variant.origin.end
        self.log: list[Exec] = world.log
        self.frames: dict[int, FrameRec] = world.frames
        self.kids: dict[int, list[Exec]] = collections.defaultdict(list)
        self.top: dict[int, list[Exec]] = collections.defaultdict(list)
        self.called: dict[int, list[FrameRec]] = collections.defaultdict(list)
        for x in self.log:
            (self.kids[x.parent] if x.parent >= 0 else self.top[x.fid]).append(x)
        for f in self.frames.values():
            if f.caller_seq >= 0:
                self.called[f.caller_seq].append(f)
        self.map_seqs = {s for st in variant.maps() for s in st.seqs}
        self.source = _source_stream(self.end)
        self._step: dict[int, bool] = {}
        self._struct: dict[int, bool] = {}
        self.taken: set[str] = set()
        self.out = Lifted()
        self.phase = "setup"
        self.batch_ctx: _Ctx | None = None

    # -- classification ---------------------------------------------------------------------
    def has_step(self, x: Exec) -> bool:
        if x.seq not in self._step:
            self._step[x.seq] = x.seq in self.map_seqs or any(
                self.has_step(k) for k in self.kids.get(x.seq, ())) or any(
                self.has_step(y) for f in self.called.get(x.seq, ()) for y in self.top[f.fid])
        return self._step[x.seq]

    def own_structural(self, stmt: ast.stmt) -> bool:
        for call in _calls(stmt):
            if self.mod.call_is_structural(call):
                return True
            rule = rule_for(self.mod.scan.resolved.get(id(call), ""))
            if rule is not None and rule.category in DROPPED_CATEGORIES:
                return True
        return False

    def structural(self, x: Exec) -> bool:
        if x.seq not in self._struct:
            self._struct[x.seq] = self.own_structural(x.stmt) or any(
                self.structural(k) for k in self.kids.get(x.seq, ())) or any(
                self.structural(y) for f in self.called.get(x.seq, ()) for y in self.top[f.fid])
        return self._struct[x.seq]

    # -- walking ----------------------------------------------------------------------------
    def lift(self) -> Lifted:
        entry = self.frames[0]
        self.taken = stored_names(entry.info.node) | set(entry.info.params)
        ctx = _Ctx(0, {}, {})
        for x in self.top[0]:
            if self.past_end(x):
                break
            self.statement(x, ctx, 0)
        self.finish(ctx)
        return self.out

    def past_end(self, x: Exec) -> bool:
        """Entry statements after the pipeline is complete (the training loop, the session)."""
        return self.phase == "done"

    def statement(self, x: Exec, ctx: _Ctx, depth: int) -> None:
        stmt = x.stmt
        if x.seq == self.end.seq and self.end.kind not in ("stream", "queue"):
            self.batch_point(x, ctx, depth)
            return
        if isinstance(stmt, ast.Return) and depth:
            ctx.result = ctx.rename(stmt.value) if stmt.value is not None else None
            return
        if not self.structural(x):
            self.plain(x, ctx, depth)
            return
        if isinstance(stmt, _COMPOUND):
            self.flatten(x, ctx, depth)
            return
        if self.source is not None and x.seq == self.source.seq:
            self.bind_element(x, ctx)
            return
        if self.called.get(x.seq):
            self.inline(x, ctx, depth)
            return
        # a producer, reader, queue, enqueue or session statement: the chain replaces it

    def flatten(self, x: Exec, ctx: _Ctx, depth: int) -> None:
        stmt = x.stmt
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                qual = self.mod.scan.resolved.get(id(item.context_expr), "")
                if not (qual.startswith("tensorflow.") or _is_jit(self.mod, item.context_expr)):
                    self.out.todos.append(
                        f"line {stmt.lineno}: the context manager "
                        f"{ast.unparse(item.context_expr)} around pipeline code was left out")
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.out.todos.append(
                f"line {stmt.lineno}: a loop builds pipeline parts; its body is lifted once "
                "(the plan makes its copies one parallel map)")
        for k in self.kids.get(x.seq, ()):
            self.statement(k, ctx, depth)
            if self.phase == "done":
                return

    def plain(self, x: Exec, ctx: _Ctx, depth: int) -> None:
        """A statement that builds no pipeline part: once, per example or per batch."""
        stmt = x.stmt
        if depth == 0 and self.frames[0].info.name == "<module>" and isinstance(
                stmt, (ast.Import, ast.ImportFrom, *_DEFS)):
            return  # the script's own imports and definitions: copied where the port uses them
        lifted = (stmt, ctx, depth)
        if self.phase == "after":
            if depth == 0 and isinstance(stmt, ast.Return):
                self.out.entry_returns = True
            self.out.after.append(lifted)
        elif self.has_step(x):
            self.phase = "example" if self.phase == "setup" else self.phase
            self.out.example.append(lifted)
        elif depth == 0 or self.phase == "setup":
            self.out.setup.append(lifted)
        else:
            self.out.example.append(lifted)
        self.mark_end(x, depth)

    def mark_end(self, x: Exec, depth: int) -> None:
        """A pipeline that never batches ends with its last per-example statement."""
        if self.end.kind in ("stream", "queue") and depth == 0 and self.phase == "example":
            last = max((s for s in self.map_seqs), default=-1)
            if x.seq >= last or self.contains_seq(x, last):
                self.out.end_line = getattr(x.stmt, "end_lineno", x.stmt.lineno)
                self.phase = "done"

    def contains_seq(self, x: Exec, seq: int) -> bool:
        if x.seq == seq:
            return True
        return any(self.contains_seq(k, seq) for k in self.kids.get(x.seq, ())) or any(
            self.contains_seq(y, seq) for f in self.called.get(x.seq, ()) for y in self.top[f.fid])

    # -- the three points -------------------------------------------------------------------
    def bind_element(self, x: Exec, ctx: _Ctx) -> None:
        """The read / dequeue / slice statement: its targets take the map function's input."""
        self.phase = "example"
        stmt = x.stmt
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        if len(targets) != 1:
            self.out.todos.append(f"line {stmt.lineno}: the element of {self.source.kind} "
                                  "is not bound to names here; bind it by hand")
            return
        target = ctx.rename(targets[0])
        key_used = self.key_used()
        if self.source.kind == "records" and isinstance(target, ast.Tuple) and len(
                target.elts) == 2 and not key_used:
            target = target.elts[1]
        elif self.source.kind == "records" and not isinstance(target, ast.Tuple) and not key_used:
            self.out.element.append(ast.parse(f"{ast.unparse(target)} = (None, example)").body[0])
            return
        self.out.element.append(ast.Assign([target], ast.Name("example", ast.Load()),
                                           lineno=stmt.lineno))

    def put(self, stmt: ast.stmt, depth: int) -> None:
        """A statement already in the port's names, in the current phase."""
        bucket = {"example": self.out.example, "after": self.out.after}.get(self.phase,
                                                                             self.out.setup)
        bucket.append((stmt, _DONE, depth))

    def key_used(self) -> bool:
        for st in self.v.stages:
            if isinstance(st, m.ReadStage):
                return st.key_used
        return False

    def batch_point(self, x: Exec, ctx: _Ctx, depth: int) -> None:
        """The batch call: the map function returns what it batched; its targets become the
        per-batch function's parameters."""
        stmt = x.stmt
        call = self.end.node
        tensors = _arg(call, ("tensors", "tensors_list"))
        if tensors is not None:
            val = ctx.rename(tensors)
            self.out.returns = ast.Tuple(val.elts, ast.Load()) if isinstance(
                val, ast.List) else val
        self.phase = "after"
        self.batch_ctx = ctx
        target = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _is_call_value(stmt, call):
            target = ctx.rename(stmt.targets[0])
        elif isinstance(stmt, ast.Return) and _is_call_value(stmt, call):
            name = _fresh("batch", self.taken)
            target = ast.Name(name, ast.Store())
            if depth:
                ctx.result = ast.Name(name, ast.Load())
            else:
                self.out.entry_returns = True
                self.put(ast.Return(ast.Name(name, ast.Load())), 0)
        if target is None:
            self.out.todos.append(f"line {stmt.lineno}: the batch is not bound to names here "
                                  f"({ast.unparse(stmt)[:80]}); finish the per-batch part by hand")
            self.phase = "done"
            return
        self.out.batch_params = [ast.unparse(e) for e in (
            target.elts if isinstance(target, ast.Tuple) else [target])]
        self.out.output = ast.Tuple([ast.Name(n, ast.Load()) for n in self.out.batch_params],
                                    ast.Load()) if isinstance(target, ast.Tuple) else \
            ast.Name(self.out.batch_params[0], ast.Load())

    def inline(self, x: Exec, ctx: _Ctx, depth: int) -> None:
        """A call of a helper that builds pipeline parts: its statements here, its result where
        the call was."""
        results = {}
        for f in self.called[x.seq]:
            sub = self.frame_ctx(f, ctx)
            for y in self.top[f.fid]:
                self.statement(y, sub, depth + 1)
                if self.phase == "done":
                    return
            if f.call is not None:
                results[id(f.call)] = sub.result
        rest = _Substitute(results).visit(ctx.rename(x.stmt))
        if isinstance(rest, ast.Expr) and isinstance(rest.value, (ast.Name, ast.Constant)):
            return  # the call's value was not used
        if isinstance(rest, ast.Return) and depth:
            ctx.result = rest.value
            return
        if self.phase == "after" and depth == 0 and isinstance(rest, ast.Return):
            self.out.entry_returns = True
        self.put(rest, depth)

    def frame_ctx(self, f: FrameRec, caller: _Ctx) -> _Ctx:
        """Names of an inlined frame: parameters replaced by simple arguments (bound otherwise),
        locals renamed where they clash."""
        info = f.info
        own = stored_names(info.node) | set(info.params)
        names = {}
        for n in sorted(own):
            if n in self.taken:
                names[n] = _fresh(f"{n}_{info.name.strip('<>')}", self.taken)
            else:
                self.taken.add(n)
        subs: dict[str, ast.expr] = {}
        assigned = {n.id for n in own_nodes(info.node) if isinstance(n, ast.Name)
                    and isinstance(n.ctx, (ast.Store, ast.Del))}
        for param, arg in _bound_args(f, info).items():
            value = caller.rename(arg) if arg is not None else None
            if value is None:
                continue
            if param not in assigned and isinstance(value, (ast.Name, ast.Attribute,
                                                            ast.Constant)):
                subs[param] = value
            else:
                target = ast.Name(names.get(param, param), ast.Store())
                self.put(ast.Assign([target], value, lineno=info.node.lineno), 1)
        return _Ctx(f.fid, names, subs)

    def finish(self, ctx: _Ctx) -> None:
        out = self.out
        if out.returns is None and self.phase in ("example", "done"):
            out.returns = self.stream_output()
        if out.batch_params is not None and not out.entry_returns:
            # the entry goes on to use its batches (a model, a session): that is not the
            # pipeline; the port hands out the batches as the script named them
            out.after = [a for a in out.after if a[2] > 0]
        if not out.end_line:
            out.end_line = getattr(self.end.node, "end_lineno", self.end.node.lineno)

    def stream_output(self) -> ast.expr | None:
        """A pipeline that never batches: the names its last per-example statements bound that
        nothing after them used (``augmented``)."""
        bound: list[str] = []
        for stmt, ctx, _depth in self.out.example:
            node = ctx.apply(stmt)
            loads = {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(
                n.ctx, ast.Load)}
            bound = [b for b in bound if b not in loads]
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    bound += [n.id for n in walk(t) if isinstance(n, ast.Name)]
        bound = list(dict.fromkeys(bound))
        if not bound:
            return None
        self.out.output = ast.Tuple([ast.Name(b, ast.Load()) for b in bound], ast.Load()) if len(
            bound) > 1 else ast.Name(bound[0], ast.Load())
        return self.out.output


class _Substitute(ast.NodeTransformer):
    """Put each inlined call's result where the call was."""

    def __init__(self, results: dict[int, ast.expr | None]):
        self.results = results

    def visit_Call(self, node: ast.Call) -> ast.AST:
        orig = getattr(node, "_orig", node)
        if id(orig) in self.results:
            value = self.results[id(orig)]
            return clone(value) if value is not None else ast.Constant(None)
        self.generic_visit(node)
        return node


def _source_stream(end) -> Stream | None:
    if end.stream is not None:
        return end.stream
    tensors = [t for t in tensors_in(end.inputs) if t.stream.kind != "float"]
    return tensors[0].stream if tensors else None


def _arg(call: ast.Call, names: tuple[str, ...]) -> ast.expr | None:
    for k in call.keywords:
        if k.arg in names:
            return k.value
    return call.args[0] if call.args else None


def _is_call_value(stmt: ast.stmt, call: ast.Call) -> bool:
    return getattr(stmt, "value", None) is call


def _bound_args(f: FrameRec, info) -> dict[str, ast.expr | None]:
    """Each parameter of the inlined function and the argument the call gave it."""
    call = f.call
    params = list(info.params)
    out: dict[str, ast.expr | None] = {}
    if not isinstance(call, ast.Call):
        return out
    a = info.args
    names = [x.arg for x in a.posonlyargs + a.args] if a is not None else params
    offset = 1 if info.cls is not None else 0
    for i, arg in enumerate(call.args):
        if i + offset < len(names) and not isinstance(arg, ast.Starred):
            out[names[i + offset]] = arg
    for k in call.keywords:
        if k.arg:
            out[k.arg] = k.value
    if a is not None:
        defaults = dict(zip(names[len(names) - len(a.defaults):], a.defaults))
        for name, value in defaults.items():
            out.setdefault(name, value)
    return out


def _is_jit(mod: Module, node: ast.AST) -> bool:
    qual = mod.scan.resolved.get(id(node), "")
    rule = rule_for(qual) if qual else None
    return rule is not None and rule.category == "xla_jit"


def _fresh(base: str, taken: set[str]) -> str:
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


__all__ = ["Lifted", "Lifter", "clone", "stored_names", "RUNTIME_CATEGORIES"]
