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
import itertools
from collections.abc import Iterator

from compare.migration import batchpart as _batchpart
from compare.migration import model as m
from compare.migration import porthelpers as _porthelpers
from compare.migration.astutil import clone, stored_names
from compare.migration.astutil import loads as _loads
from compare.migration.astutil import mutated as _mutated
from compare.migration.lifted import DONE, Ctx, Lifted
from compare.migration.rules import rule_for
from compare.migration.scan import walk
from compare.migration.values import (
    End,
    Exec,
    FrameRec,
    FuncInfo,
    Module,
    QueueV,
    Stream,
    own_nodes,
    tensors_in,
)

#: Rule categories of TF1 runtime plumbing: the port leaves out their uses (XLA scopes are
#: unwrapped by :mod:`.rewrite`, the others' statements dropped with the pipeline's).
RUNTIME_CATEGORIES = frozenset({"queue_runner", "session", "tracing", "xla_jit"})
DROPPED_CATEGORIES = RUNTIME_CATEGORIES - {"xla_jit"}
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


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


def _calls(stmt: ast.stmt) -> Iterator[ast.Call]:
    for root in _header_nodes(stmt):
        stack = [root]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Call):
                yield n
            if not isinstance(n, (ast.Lambda, *_DEFS)):
                stack.extend(ast.iter_child_nodes(n))


class Lifter:
    """Lifts one variant (see module doc)."""

    def __init__(self, mod: Module, pipeline: m.Pipeline, variant: m.Variant):
        self.mod, self.p, self.v = mod, pipeline, variant
        origin = m.req(variant.origin)
        world, self.end = origin.world, origin.end
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
        self.source, self.relays = _root_stream(self.end)
        if variant.source.kind == "computed" and self.source is not None and \
                self.source.kind == "dequeue":  # each element is what the enqueue op computes
            self.relays[self.source.seq] = self.source
            self.source = None
        self.sources = _branch_streams(self.end, self.relays) if getattr(
            variant, "branches", None) else {}  # several streams zipped: by their seq
        queues = [r.queue for r in self.relays.values() if r.queue is not None] + (
            [self.end.queue] if self.end.queue is not None else [])
        self.enqueue_calls = {id(op.node): q for q in queues for op in q.enqueues}
        self.enqueued: dict[int, tuple[ast.expr, bool]] = {}  # id(queue) -> (values, many)
        self.dataset_calls = _dataset_calls(self.end)
        self.dataset_names: set[str] = set()  # names the script's own tf.data code binds
        self.decided: set[int] = getattr(world, "decided", set())
        self.copies = _find_copies(self.log, self.end)
        self._step: dict[int, bool] = {}
        self._struct: dict[int, bool] = {}
        self.taken: set[str] = set()
        self.out = Lifted()
        self.phase = "setup"
        self.batch_ctx: Ctx | None = None
        self.order = itertools.count()
        self.deferred: set[int] = set()  # orders of setup items met after the element binding

    # -- classification ---------------------------------------------------------------------
    def has_step(self, x: Exec) -> bool:
        if x.seq not in self._step:
            self._step[x.seq] = x.seq in self.map_seqs or any(
                self.has_step(k) for k in self.kids.get(x.seq, ())) or any(
                self.has_step(y) for f in self.called.get(x.seq, ()) for y in self.top[f.fid])
        return self._step[x.seq]

    def own_structural(self, stmt: ast.stmt) -> bool:
        for call in _calls(stmt):
            if id(call) in self.dataset_calls or self.mod.call_is_structural(call):
                return True
            if self.dataset_calls and _root_name(call.func) in self.dataset_names:
                return True  # ds = ds.take(1): a dataset the script builds, the chain's part
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
        self.out.script_locals |= self.taken if entry.info.name != "<module>" else {
            n for st in entry.info.body if not isinstance(st, (ast.Import, ast.ImportFrom, *_DEFS))
            for n in stored_names(st)}  # the module's imports and defs are the port's globals
        ctx = Ctx(0, {}, {})
        for x in self.top[0]:
            if self.past_end(x):
                break
            self.statement(x, ctx, 0)
        self.finish(ctx)
        return self.out

    def past_end(self, x: Exec) -> bool:
        """Entry statements after the pipeline is complete (the training loop, the session)."""
        return self.phase == "done"

    def statement(self, x: Exec, ctx: Ctx, depth: int) -> None:
        stmt = x.stmt
        if x.seq == self.end.seq and self.end.kind not in ("stream", "queue"):
            self.batch_point(x, ctx, depth)
            return
        if id(stmt) in self.copies.skip:
            if id(stmt) in self.copies.appends and self.copies.element is None and isinstance(
                    stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self.copies.element = ctx.rename(stmt.value.args[0])
            return
        if x.seq in self.copies.loops:
            self.copy_loop(x, ctx, depth)
            return
        if isinstance(stmt, ast.Return) and depth and x.seq not in self.relays:
            ctx.result = ctx.rename(stmt.value) if stmt.value is not None else None
            return
        if isinstance(stmt, ast.If) and x.seq in self.decided:
            self.walk_kids(x, ctx, depth)  # this world took one branch: its `if` is the variant's
            return
        if not self.structural(x):
            self.plain(x, ctx, depth)
            return
        self.capture_enqueue(x, ctx)
        if self.dataset_calls and isinstance(stmt, (ast.Assign, ast.AugAssign)):
            self.dataset_names |= stored_names(stmt)
        if self.end.kind == "queue" and any(c is self.end.node for c in _calls(stmt)):
            self.phase = "done"  # the queue is filled here; what reads it is not in this file
            return
        if isinstance(stmt, _COMPOUND):
            self.flatten(x, ctx, depth)
        elif self.source is not None and x.seq == self.source.seq or x.seq in self.sources:
            self.bind_element(x, ctx)
        elif x.seq in self.relays:
            self.relay(x, ctx, depth)
        elif self.called.get(x.seq):
            self.inline(x, ctx, depth)
        # else a producer, reader, queue, enqueue or session statement: the chain replaces it

    def walk_kids(self, x: Exec, ctx: Ctx, depth: int) -> None:
        for k in self.kids.get(x.seq, ()):
            self.statement(k, ctx, depth)
            if self.phase == "done":
                return

    def flatten(self, x: Exec, ctx: Ctx, depth: int) -> None:
        stmt = x.stmt
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                qual = self.mod.scan.resolved.get(id(item.context_expr), "")
                if not (qual.startswith("tensorflow.") or _is_jit(self.mod, item.context_expr)):
                    self.out.todos.append(
                        f"line {stmt.lineno}: the context manager "
                        f"{ast.unparse(item.context_expr)} around pipeline code was left out")
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)) and self.phase != "after":
            self.out.todos.append(
                f"line {stmt.lineno}: a loop builds pipeline parts; its body is lifted once "
                "(the plan makes its copies one parallel map)")
        self.walk_kids(x, ctx, depth)

    def copy_loop(self, x: Exec, ctx: Ctx, depth: int) -> None:
        """The loop that makes the copies a ``*_join`` batcher takes: one copy (the plan runs
        them as one parallel map). When the copies differ by the loop variable, the port keeps
        the first copy's."""
        stmt = x.stmt
        if not isinstance(stmt, (ast.For, ast.AsyncFor)):
            raise TypeError(f"line {stmt.lineno}: the copies' loop is not a for loop")
        targets = [n.id for n in walk(stmt.target) if isinstance(n, ast.Name)]
        loads = {n.id for s in stmt.body for n in walk(s) if isinstance(n, ast.Name)}
        used = [t for t in targets if t in loads]
        if used:
            first = _first_item(ctx.rename(stmt.iter))
            self.put(ast.Assign([ctx.rename(stmt.target)], first, lineno=stmt.lineno), depth)
            self.out.todos.append(
                f"line {stmt.lineno}: the copies differ by {', '.join(used)}; one Dataset.map "
                f"has no copy number, so the port keeps the copy with {ast.unparse(first)}")
        self.walk_kids(x, ctx, depth)

    def plain(self, x: Exec, ctx: Ctx, depth: int) -> None:
        """A statement that builds no pipeline part: once, per example or per batch."""
        stmt = x.stmt
        if depth == 0 and self.frames[0].info.name == "<module>" and isinstance(
                stmt, (ast.Import, ast.ImportFrom, *_DEFS)):
            return  # the script's own imports and definitions: copied where the port uses them
        lifted = (stmt, ctx, depth, next(self.order))
        if self.phase == "after":
            self.out.after.append(lifted)
        elif self.has_step(x):
            self.phase = "example" if self.phase == "setup" else self.phase
            self.out.example.append(lifted)
        elif depth == 0 or self.phase == "setup":
            if self.phase == "example":
                self.deferred.add(lifted[3])
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

    # -- the element: read, relayed through queues, batched ---------------------------------
    def bind_element(self, x: Exec, ctx: Ctx) -> None:
        """The read / dequeue / slice statement: its targets take the map function's input."""
        self.phase = "example"
        stmt = x.stmt
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        kind = self.source.kind if self.source is not None else "the streams"
        if len(targets) != 1:
            self.out.todos.append(f"line {stmt.lineno}: the element of {kind} "
                                  "is not bound to names here; bind it by hand")
            return
        target = ctx.rename(targets[0])
        example: ast.expr = ast.Name("example", ast.Load())
        if self.sources:  # one of several zipped streams: its item of the element
            item, item_kind = self.sources[x.seq]
            example = ast.Subscript(example, ast.Constant(item), ast.Load())
            if isinstance(target, ast.Tuple) and len(target.elts) == 2 and \
                    item_kind == "records":
                target = target.elts[1]
            self.out.element.append(ast.Assign([target], example, lineno=stmt.lineno))
            return
        key_used = self.key_used()
        if kind == "records" and isinstance(target, ast.Tuple) and len(
                target.elts) == 2 and not key_used:
            target = target.elts[1]
        elif kind == "records" and not isinstance(target, ast.Tuple) and not key_used:
            self.out.element.append(ast.parse(f"{ast.unparse(target)} = (None, example)").body[0])
            return
        self.out.element.append(ast.Assign([target], ast.Name("example", ast.Load()),
                                           lineno=stmt.lineno))

    def capture_enqueue(self, x: Exec, ctx: Ctx) -> None:
        """What an enqueue into a queue the element passes through puts in, in the port's
        names: the dequeue on the other side gives it back."""
        for call in _calls(x.stmt):
            q = self.enqueue_calls.get(id(call))
            if q is None or id(q) in self.enqueued:
                continue
            values = _arg(call, ("vals",))
            if values is not None:
                many = isinstance(call.func, ast.Attribute) and call.func.attr == "enqueue_many"
                self.enqueued[id(q)] = (ctx.rename(values), many)

    def relay(self, x: Exec, ctx: Ctx, depth: int) -> None:
        """A dequeue from a queue between two parts of the pipeline: the tf.data chain has no
        queue there, so the dequeued names take what was enqueued."""
        stream = self.relays[x.seq]
        value = self.enqueued.get(id(stream.queue))
        stmt = x.stmt
        if value is None:
            self.out.todos.append(f"line {stmt.lineno}: what {ast.unparse(stmt)[:60]} dequeues "
                                  "was enqueued where the port cannot see it; bind it by hand")
            return
        values, many = value
        if many:
            self.out.todos.append(f"line {stmt.lineno}: the queue was filled with "
                                  "enqueue_many: its elements are the rows of these tensors")
        rest = _Substitute({id(stream.node): _as_tuple(values)}).visit(ctx.rename(stmt))
        if self.phase == "setup":  # no reader before it: the enqueue op computes each element
            self.phase = "example"
        if isinstance(rest, ast.Return) and depth:
            ctx.result = rest.value
            return
        self.put(rest, depth)
        self.mark_end(x, depth)

    def put(self, stmt: ast.stmt, depth: int) -> None:
        """A statement already in the port's names, in the current phase."""
        bucket = {"example": self.out.example, "after": self.out.after}.get(self.phase,
                                                                             self.out.setup)
        bucket.append((stmt, DONE, depth, next(self.order)))

    def key_used(self) -> bool:
        for st in self.v.stages:
            if isinstance(st, m.ReadStage):
                return st.key_used
        return False

    def batch_point(self, x: Exec, ctx: Ctx, depth: int) -> None:
        """The batch call: the map function returns what it batched; its targets become the
        per-batch function's parameters."""
        stmt = x.stmt
        call = self.end.node
        self.out.returns = self.batch_tensors(x, ctx, depth)
        if self.phase == "done":
            return
        if self.end.kind == "iterator":  # the chain is the script's dataset: nothing after it
            self.iterator_output(x, ctx)
            self.phase = "done"
            return
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

    def batch_tensors(self, x: Exec, ctx: Ctx, depth: int) -> ast.expr | None:
        """What the batcher was given, per example, in the port's names: a dequeue_many's
        queue gives back what was enqueued; a ``*_join`` batcher's copies are one."""
        end = self.end
        if end.kind in ("dequeue_many", "dequeue_up_to") and self.rows_of(end.queue):
            return None  # the rows the chain slices are the elements: no map before the batch
        if end.kind in ("dequeue_many", "dequeue_up_to"):
            value = self.enqueued.get(id(end.queue)) if end.queue is not None else None
            if value is not None and value[1]:
                self.out.todos.append(f"line {x.stmt.lineno}: the queue was filled with "
                                      "enqueue_many: its elements are the rows of these tensors")
            return _as_tuple(clone(value[0])) if value is not None else None
        if end.kind == "iterator":
            return None
        tensors = _arg(end.node, ("tensors", "tensors_list"))
        if tensors is None:
            return None
        results = self.run_frames(x, ctx, depth) if self.called.get(x.seq) else {}
        if results is None:
            return None
        val = _Substitute(results).visit(ctx.rename(tensors))
        if end.kind.endswith("join"):
            val = self.one_copy(val, x.stmt.lineno)
        return _as_tuple(val)

    def rows_of(self, q: QueueV | None) -> bool:
        """Is the plan's source the rows ``enqueue_many`` put into queue ``q`` (sliced by the
        chain itself)?"""
        s = self.v.source
        return q is not None and s.kind == "rows" and s.site is not None and any(
            op.node.lineno == s.site.line and op.many for op in q.enqueues)

    def one_copy(self, val: ast.expr, line: int) -> ast.expr:
        if self.copies.element is not None:
            return self.copies.element
        if isinstance(val, (ast.List, ast.Tuple)) and val.elts:
            if len({ast.unparse(e) for e in val.elts}) > 1:
                self.out.todos.append(f"line {line}: the copies given to the batcher differ; "
                                      "the port makes every element like the first")
            return val.elts[0]
        if isinstance(val, ast.ListComp) and len(val.generators) == 1:
            gen = val.generators[0]
            names = {n.id for n in walk(gen.target) if isinstance(n, ast.Name)}
            if names & {n.id for n in walk(val.elt) if isinstance(n, ast.Name)}:
                self.out.todos.append(f"line {line}: the copies differ by "
                                      f"{ast.unparse(gen.target)}; the port keeps the first")
                self.put(ast.Assign([gen.target], _first_item(gen.iter), lineno=line), 1)
            return val.elt
        return ast.Subscript(val, ast.Constant(0), ast.Load())

    def iterator_output(self, x: Exec, ctx: Ctx) -> None:
        """A pipeline ending in a TF1 iterator: its elements are what ``get_next()`` gives."""
        target = x.stmt.targets[0] if isinstance(x.stmt, ast.Assign) and len(
            x.stmt.targets) == 1 else None
        name = target.id if isinstance(target, ast.Name) else ""
        for y in self.log[x.seq + 1:]:
            s = y.stmt
            if name and y.fid == x.fid and isinstance(s, ast.Assign) and len(s.targets) == 1 \
                    and isinstance(s.value, ast.Call) and ast.unparse(s.value.func) == \
                    f"{name}.get_next":
                output = ctx.rename(s.targets[0])
                setattr(output, "ctx", ast.Load())
                self.out.output = output
                for n in walk(output):
                    if isinstance(n, ast.Name):
                        n.ctx = ast.Load()
                self.out.end_line = s.end_lineno or s.lineno
                return
        self.out.output = ctx.rename(target) if target is not None else None

    def run_frames(self, x: Exec, ctx: Ctx, depth: int) -> dict[int, ast.expr | None] | None:
        """Inline the helpers a statement calls; each call's result by call (None: the
        pipeline ended inside one)."""
        results = {}
        for f in self.called[x.seq]:
            sub = self.frame_ctx(f, ctx)
            for y in self.top[f.fid]:
                self.statement(y, sub, depth + 1)
                if self.phase == "done":
                    return None
            if f.call is not None:
                results[id(f.call)] = sub.result
        return results

    def inline(self, x: Exec, ctx: Ctx, depth: int) -> None:
        """A call of a helper that builds pipeline parts: its statements here, its result where
        the call was."""
        results = self.run_frames(x, ctx, depth)
        if results is None:
            return
        rest = _Substitute(results).visit(ctx.rename(x.stmt))
        if isinstance(rest, ast.Expr) and isinstance(rest.value, (ast.Name, ast.Constant)):
            return  # the call's value was not used
        if isinstance(rest, ast.Return) and depth:
            ctx.result = rest.value
            return
        self.put(rest, depth)

    def frame_ctx(self, f: FrameRec, caller: Ctx) -> Ctx:
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
        self.out.script_locals |= {names.get(n, n) for n in own}
        subs: dict[str, ast.expr] = {}
        assigned = {n.id for n in own_nodes(info.node) if isinstance(n, ast.Name)
                    and isinstance(n.ctx, (ast.Store, ast.Del))}
        call = f.call
        if info.cls is not None and info.params and isinstance(call, ast.Call) and isinstance(
                call.func, ast.Attribute) and info.params[0] not in assigned and not any(
                getattr(d, "id", "") == "staticmethod"
                for d in getattr(info.node, "decorator_list", ())):
            subs[info.params[0]] = caller.rename(call.func.value)  # self.m(...): self is self
            names.pop(info.params[0], None)
        for param, arg in _bound_args(f, info).items():
            value = caller.rename(arg) if arg is not None else None
            if value is None:
                continue
            if param not in assigned and isinstance(value, (ast.Name, ast.Attribute,
                                                            ast.Constant)):
                subs[param] = value
            else:
                target = ast.Name(names.get(param, param), ast.Store())
                self.put(ast.Assign([target], value, lineno=getattr(info.node, "lineno", 0)), 1)
        return Ctx(f.fid, names, subs)

    # -- after the walk ---------------------------------------------------------------------
    def finish(self, ctx: Ctx) -> None:
        out = self.out
        if out.returns is None and self.phase in ("example", "done") and \
                self.end.kind != "iterator":
            out.returns = self.stream_output()
        self.settle_deferred()
        if out.batch_params is not None:
            _batchpart.settle(self.mod, out, self.frames[0].info.cls)
        if not out.end_line:  # the entry's statement that reached the end, and what follows
            top = self.top_exec(self.end.seq) if self.end.seq >= 0 else None
            node = top.stmt if top is not None else self.end.node
            lines: list[int] = [_last_line(node)] + [
                _last_line(it[0]) for it in out.after if it[2] == 0]
            out.end_line = max(lines)

    def top_exec(self, seq: int) -> Exec:
        """The statement of the entry's own body that ran statement ``seq`` (itself, or the
        compound statement or call that led to it)."""
        x = self.log[seq]
        for _ in range(len(self.log)):
            if x.parent >= 0:
                x = self.log[x.parent]
            elif self.frames[x.fid].caller_seq >= 0:
                x = self.log[self.frames[x.fid].caller_seq]
            else:
                break
        return x

    def settle_deferred(self) -> None:
        """Setup statements that belong to each example: met after the element was bound and
        reading per-example names, or making a container (``image_seq = []``) the example code
        fills or rebinds (each trace of the map function makes its own)."""
        out = self.out
        ex_bound = {n for s in out.element for n in stored_names(s)}
        items = sorted(out.setup + out.example, key=lambda it: it[3])
        in_example = {it[3] for it in out.example}
        changed_after: dict[int, set[str]] = {}
        acc: set[str] = set()
        for it in reversed(items):
            changed_after[it[3]] = set(acc)
            if it[3] in in_example:
                node = it[1].apply(it[0])
                acc |= _mutated(node) | stored_names(node)
        moved = set()
        for it in items:
            node = it[1].apply(it[0])
            if it[3] in in_example:
                ex_bound |= stored_names(node)
                continue
            made = stored_names(node)
            if (it[3] in self.deferred and _loads(node) & ex_bound) or (
                    _mutable_init(node) and made & changed_after[it[3]]):
                moved.add(it[3])
                ex_bound |= made
        out.setup = [it for it in out.setup if it[3] not in moved]
        out.example = sorted(out.example + [it for it in items if it[3] in moved],
                             key=lambda it: it[3])

    def stream_output(self) -> ast.expr | None:
        """A pipeline that never batches: the names its last per-example statements bound that
        nothing after them used (``augmented``)."""
        bound: list[str] = []
        for stmt, ctx, _depth, _o in self.out.example:
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


def _root_stream(end: End) -> tuple[Stream | None, dict[int, Stream]]:
    """The stream the element starts as (a reader's records, a producer's rows), followed back
    through explicit queues between parts of the pipeline; those queues' dequeue streams by the
    statement that dequeues (``relays``)."""
    stream = end.stream
    if stream is None:
        tensors = [t for t in tensors_in(end.inputs) if t.stream.kind != "float"]
        stream = tensors[0].stream if tensors else None
    if stream is None and end.queue is not None and end.kind != "queue":
        stream = _enqueued_stream(end.queue)
    relays: dict[int, Stream] = {}
    while stream is not None and stream.kind == "dequeue" and stream.queue is not None and \
            stream.seq not in relays:
        inner = _enqueued_stream(stream.queue)
        if inner is None:
            break  # fed from Python or with constants: the dequeue is the source
        relays[stream.seq] = stream
        stream = inner
    return stream, relays


def _branch_streams(end: End, relays: dict[int, Stream]) -> dict[int, tuple[int, str]]:
    """The streams a pipeline zips (an image and its camera file), in the order the plan's
    branches take them: the seq of each stream's read -> (its item of the element, its
    kind)."""
    tensors = [t for t in tensors_in(end.inputs) if t.stream.kind != "float"]
    streams = list({id(t.stream): t.stream for t in tensors}.values())
    out = {}
    for i, s in enumerate(streams):
        while s.kind == "dequeue" and s.queue is not None:
            inner = _enqueued_stream(s.queue)
            if inner is None:
                break
            relays[s.seq] = s
            s = inner
        out[s.seq] = (i, s.kind)
    return out


def _enqueued_stream(q: QueueV) -> Stream | None:
    if q.kind == "producer" or not q.enqueues:
        return None
    tensors = [t for t in tensors_in(q.enqueues[0].values) if t.stream.kind != "float"]
    return tensors[0].stream if tensors else None


def _dataset_calls(end: End) -> set[int]:
    """The calls that build the tf.data pipeline a TF1 iterator reads: the chain replaces
    them."""
    ds = end.dataset
    if ds is None:
        return set()
    out = {id(op[1]) for op in ds.ops}
    if ds.head and ds.head[0] == "call":
        out.add(id(ds.head[2]))
    return out


@dataclasses.dataclass
class _Copies:
    """The copies a ``*_join`` batcher is given, built in a loop: the loop's executed
    statement(s), the list's ``= []`` and ``.append(x)`` statements, and the first ``x``."""

    loops: set[int] = dataclasses.field(default_factory=set)  # seqs
    skip: set[int] = dataclasses.field(default_factory=set)  # ids of statements
    appends: set[int] = dataclasses.field(default_factory=set)  # ids of statements
    element: ast.expr | None = None


def _appends_to(stmt: ast.AST, name: str) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(
        stmt.value.func, ast.Attribute) and stmt.value.func.attr == "append" and isinstance(
        stmt.value.func.value, ast.Name) and stmt.value.func.value.id == name and len(
        stmt.value.args) == 1


def _find_copies(log: list[Exec], end: End) -> _Copies:
    out = _Copies()
    if not end.kind.endswith("join") or end.seq < 0 or not isinstance(end.node, ast.Call):
        return out
    arg = _arg(end.node, ("tensors_list",))
    if not isinstance(arg, ast.Name):
        return out
    name, fid = arg.id, log[end.seq].fid
    for x in log:
        s = x.stmt
        if x.fid != fid:
            continue
        if _appends_to(s, name):
            out.appends.add(id(s))
            out.skip.add(id(s))
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(
                s.targets[0], ast.Name) and s.targets[0].id == name and isinstance(
                s.value, (ast.List, ast.Tuple)) and not s.value.elts:
            out.skip.add(id(s))
        elif isinstance(s, (ast.For, ast.AsyncFor)) and any(
                _appends_to(n, name) for n in walk(s)):
            out.loops.add(x.seq)
    return out


def _root_name(node: ast.AST) -> str:
    """``ds`` of ``ds.take(1).cache``."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _first_item(it: ast.expr) -> ast.expr:
    """The first value a loop over ``it`` takes: ``range(n)`` -> 0, else ``next(iter(it))``."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in (
            "range", "xrange") and it.args:
        return ast.Constant(0) if len(it.args) == 1 else it.args[0]
    return ast.Call(ast.Name("next", ast.Load()), [ast.Call(ast.Name("iter", ast.Load()), [it],
                                                            [])], [])


def _as_tuple(val: ast.expr) -> ast.expr:
    """A list of tensors given to a queue as the element tf.data makes of it: a tuple, or the
    one tensor (a TF1 queue of one component hands out the tensor itself). Given as a name (a
    list, a dict or a tensor the script built), the port applies TF1's rule when it runs
    (:data:`.porthelpers.TF1_ELEMENT`)."""
    if isinstance(val, (ast.List, ast.Tuple)) and len(val.elts) == 1 and not isinstance(
            val.elts[0], ast.Starred):
        return val.elts[0]
    if isinstance(val, (ast.List, ast.Tuple)):
        return ast.Tuple(val.elts, ast.Load())
    if isinstance(val, (ast.Dict, ast.DictComp, ast.Constant, ast.BinOp)):
        return val
    return ast.Call(ast.Name(_porthelpers.TF1_ELEMENT, ast.Load()), [val], [])


_CONTAINERS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def _mutable_init(node: ast.AST) -> bool:
    """``images = []`` (or a dict, set, comprehension, ``a, b = [], []``): containers the code
    goes on to fill."""
    if not isinstance(node, ast.Assign):
        return False
    v = node.value
    return isinstance(v, _CONTAINERS) or (isinstance(v, ast.Tuple) and bool(v.elts) and all(
        isinstance(e, _CONTAINERS) for e in v.elts))


def _last_line(node: ast.AST) -> int:
    end: int | None = getattr(node, "end_lineno", None)
    start: int = getattr(node, "lineno", 0)
    return end or start


def _arg(call: ast.AST, names: tuple[str, ...]) -> ast.expr | None:
    if not isinstance(call, ast.Call):
        return None
    for k in call.keywords:
        if k.arg in names:
            return k.value
    return call.args[0] if call.args else None


def _is_call_value(stmt: ast.stmt, call: ast.AST) -> bool:
    return getattr(stmt, "value", None) is call


def _bound_args(f: FrameRec, info: FuncInfo) -> dict[str, ast.expr | None]:
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
