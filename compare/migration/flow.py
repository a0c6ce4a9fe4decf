"""A symbolic run of a script's pipeline-building code, one entry function at a time.

Nothing is executed: statements are followed in order with abstract values (:mod:`.values`).
Calls to the script's own functions are followed into their bodies (parameters bound to what the
caller passed, so a helper's ``if shuffle:`` is decided by the caller's ``shuffle=True``); loops
run once and remember their count; an ``if`` whose condition is fixed takes its branch. An ``if``
the run cannot decide either

- builds pipeline parts in its branches (``if train: string_input_producer(..., shuffle=True)``):
  the run is a *world* with one decision per such condition; the caller runs every combination
  (:func:`run_entry`, at most :data:`MAX_WORLDS`);
- or only computes: both branches run, their statements carry the condition as a guard, and the
  values are merged.

Every statement that computes per-example tensors is recorded (:class:`~.values.StepRec`), with
the steps each tensor depends on; every batching call, dequeue, iterator and unbatched stream is
an :class:`~.values.End`. A shared statement budget bounds the whole analysis.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
from typing import Any, Callable, cast

from compare.migration import calls
from compare.migration.rules import canonical
from compare.migration.scan import walk
from compare.migration.state import Budget, Exit, Frame, Render, Stop, World
from compare.migration.values import (
    NOCONST,
    ClassInfo,
    ClassV,
    DatasetV,
    DictV,
    End,
    EnqueueV,
    Exec,
    FrameRec,
    FuncInfo,
    FuncV,
    IteratorV,
    ListV,
    Module,
    ObjV,
    PlaceholderV,
    ProviderV,
    QueueV,
    ReaderV,
    StepRec,
    Stream,
    Sym,
    Tensor,
    Val,
    clone,
    dict_key,
    fold,
    key_val,
    merge,
    primary,
    tensors_in,
)

#: Worlds (combinations of undecidable structural conditions) run per entry function.
MAX_WORLDS = 8
#: How deep calls into the script's own functions are followed.
MAX_DEPTH = 8

_UNPARSER = getattr(ast, "_Unparser", None)

if _UNPARSER is not None:
    class _Renaming(_UNPARSER):  # type: ignore[misc, valid-type]
        """ast's unparser writing some names as other text."""

        def __init__(self, texts: dict[str, str]):
            super().__init__()
            self.texts = texts

        def visit_Name(self, n: ast.Name) -> None:
            self.write(self.texts.get(n.id, n.id))


def _unparse_with(node: ast.AST, texts: dict[str, str]) -> str:
    """``node`` unparsed with names replaced by their text in the pipeline function (a helper's
    parameters by what was passed, its locals by their definitions), without copying it."""
    if _UNPARSER is None:  # not in this Python: copy and rename
        tree = copy.deepcopy(node)
        for n in walk(tree):
            if isinstance(n, ast.Name) and n.id in texts:
                n.id = texts[n.id]
        return ast.unparse(tree)
    return str(_Renaming(texts).visit(node))


def _constant(value: object) -> ast.Constant:
    """A constant node of a value the run folded (ast's own signature is narrower than what
    ``ast.Constant`` holds at run time)."""
    return ast.Constant(cast(Any, value))


def _paren(text: str) -> str:
    simple = text.replace(".", "").replace("_", "").isalnum() or (
        text.startswith(("(", "[", "{")) and text.endswith((")", "]", "}")))
    return text if simple or not text else f"({text})"


class Run:
    """One world of one entry function (see module doc)."""

    def __init__(self, mod: Module, entry: FuncInfo, decisions: dict[str, bool], budget: Budget,
                 shared: dict[str, Val] | None = None):
        self.mod, self.entry, self.decisions, self.budget = mod, entry, decisions, budget
        #: The module body's pipeline objects by name (see :attr:`World.shared`); each run
        #: takes its own copy of a queue the first time it reads it.
        self.shared = shared or {}
        self.copies: dict[str, Val] = {}
        self.src = mod.scan.source
        self.clock = 0
        self.world = World(entry, dict(decisions), [], {}, [], [], [])
        self.stack: list[FuncInfo] = []
        self.cur_calls: list[tuple[str, ast.Call]] = []
        self.cur_external: list[str] = []
        self.param_streams: dict[str, Stream] = {}
        self.followed: set[int] = set()
        self.presim = False  # running __init__ for self: its calls to methods are not followed
        self.keys_made = False  # a reader's key (file name) was read in this run
        self.consulted: dict[str, bool] | None = None  # the decisions __init__'s run met (instance)
        self.floating = Stream("float", entry.node, entry.qualname, (entry.qualname,))
        self.fresh: int = 0  # streams made before the current statement began
        self.cur_seq = -1  # the statement being executed (its Exec's seq)
        self.parent_seq = -1  # the compound statement around it, in the same frame

    # -- text -------------------------------------------------------------------------------
    def render(self, node: ast.AST, fr: Frame) -> Render:
        """A callable giving ``node``'s text in the pipeline function's terms."""
        seg = self.src.segment
        if fr.depth == 0:
            return lambda: seg(node, 400)
        at = self.clock

        def text() -> str:
            names = self.mod.names_in(node)
            subs: dict[str, str] = {}
            for name in names:
                val = self._lookup_at(name, fr, at)
                if val is not None and val.text and val.text != name:
                    subs[name] = _paren(val.text)
            if not subs:
                return seg(node, 400)
            try:
                text = " ".join(_unparse_with(node, subs).split())
            except (ValueError, RecursionError):  # f-string quirks: keep the script's text
                return seg(node, 400)
            return text if len(text) <= 400 else seg(node, 400)
        return text

    def _lookup_at(self, name: str, fr: Frame, at: int) -> Val | None:
        f: Frame | None = fr
        while f is not None:
            v = f.get(name, at)
            if v is not None:
                return v
            f = f.parent
        return None

    # -- names ------------------------------------------------------------------------------
    def lookup(self, name: str, fr: Frame, node: ast.AST) -> Val:
        f: Frame | None = fr
        while f is not None:
            v = f.get(name)
            if v is not None:
                if fr.depth == 0 and f is fr and isinstance(v, Sym):
                    return v.written(name)
                if fr.depth == 0 and isinstance(v, Tensor):  # named as the pipeline function does
                    return Tensor(v.stream, v.deps, name, v.key)
                return v
            f = f.parent
        return self.global_name(name, node)

    def global_name(self, name: str, node: ast.AST) -> Val:
        mod = self.mod
        if name in self.shared:
            if name not in self.copies:
                self.copies[name] = _own_copy(self.shared[name])
            return self.copies[name]
        if name in mod.by_name:
            return FuncV(mod.by_name[name], text=name)
        if name in mod.classes:
            return ClassV(mod.classes[name], text=name)
        if name in mod.consts:
            return Sym(name, mod.consts[name])
        if name == "__name__":
            return Sym(name, "__main__")
        if name in mod.imports:
            return Sym(name, qual=canonical(mod.imports[name]))
        if name == "tf" and mod.scan.assumed_tf:
            return Sym(name, qual="tensorflow")
        return Sym(name, {"True": True, "False": False, "None": None}.get(name, NOCONST))

    def assign(self, target: ast.AST, val: Val, fr: Frame) -> None:
        if isinstance(target, ast.Name):
            if fr.depth == 0 and not isinstance(val, (Sym, FuncV, Tensor)) and not (
                    val.text.isidentifier()):
                val.text = target.id
            self.clock += 1
            fr.bind(target.id, val, self.clock)
        elif isinstance(target, (ast.Tuple, ast.List)):
            parts = self.unpack(val, len(target.elts))
            for elt, part in zip(target.elts, parts):
                self.assign(elt.value if isinstance(elt, ast.Starred) else elt, part, fr)
        elif isinstance(target, ast.Attribute):
            owner = self.ev(target.value, fr)
            if isinstance(owner, ObjV):
                owner.attrs[target.attr] = val
                if isinstance(val, (EnqueueV, PlaceholderV, QueueV)):
                    val.stored = self.src.segment(target, 80)
        elif isinstance(target, ast.Subscript):
            owner = self.ev(target.value, fr)
            index = self.ev(target.slice, fr)
            if isinstance(owner, ListV) and isinstance(index, Sym) and isinstance(
                    index.const, int) and -len(owner.items) <= index.const < len(owner.items):
                owner.items[index.const] = val
            elif isinstance(owner, DictV) and not isinstance(target.slice, ast.Slice):
                owner.items[dict_key(index)] = val
            elif isinstance(owner, ListV) and owner.loop is not None and len(owner.items) == 1:
                owner.items[0] = val  # lists[i] = ... of a list made by a comprehension

    def unpack(self, val: Val, n: int) -> list[Val]:
        if isinstance(val, ListV) and len(val.items) == n:
            return list(val.items)
        if isinstance(val, Tensor):
            return [Tensor(val.stream, val.deps, val.text) for _ in range(n)]
        if isinstance(val, ListV) and val.items:
            return [merge(val.items)] * n
        param = getattr(val, "param", "")
        return [Sym(f"{val.text}[{i}]" if val.text else "", param=param) for i in range(n)]

    # -- expressions ------------------------------------------------------------------------
    def ev(self, node: ast.AST | None, fr: Frame) -> Val:
        if node is None:
            return Sym("None", None)
        method = _EV.get(type(node))
        if method is not None:
            return method(self, node, fr)
        vals = [self.ev(c, fr) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
        return self.combine(node, vals, fr)

    def combine(self, node: ast.AST, vals: list[Val], fr: Frame,
                const: object = NOCONST) -> Val:
        """A value computed from ``vals``: a tensor when any of them is one (of the first
        stream that is not floating: a graph tensor joins the stream it is combined with)."""
        tensors = [t for v in vals for t in tensors_in(v)]
        if tensors:
            return Tensor(primary(tensors), frozenset().union(*(t.deps for t in tensors)))
        params = [v.param for v in vals if isinstance(v, Sym) and v.param]
        text: str | Render = self.render(node, fr)
        if fr.depth and isinstance(const, (bool, int, float, str, type(None))) and not (
                isinstance(const, str) and len(const) > 80):
            text = repr(const)  # a helper's computed constant: its value reads best
        return Sym(text, const, param=params[0] if params else "", node=node)

    def ev_Constant(self, node: ast.Constant, fr: Frame) -> Val:
        return Sym(lambda: self.src.segment(node, 400), node.value, node=node)

    def ev_Name(self, node: ast.Name, fr: Frame) -> Val:
        return self.lookup(node.id, fr, node)

    def ev_Attribute(self, node: ast.Attribute, fr: Frame) -> Val:
        base = self.ev(node.value, fr)
        if isinstance(base, ObjV):
            if node.attr in base.attrs:
                val = base.attrs[node.attr]
                if fr.depth == 0 and isinstance(val, Tensor):
                    return Tensor(val.stream, val.deps, self.src.segment(node, 120), val.key)
                if self.presim and isinstance(val, Sym) and not val.known:
                    return val.written(self.src.segment(node, 120))
                return val
            method = self.method_of(base, node.attr)
            if method is not None:
                return FuncV(method, bound=base, text=f"{base.text}.{node.attr}")
        if isinstance(base, Tensor):
            return Tensor(base.stream, base.deps)
        if isinstance(base, Sym) and base.qual:
            return Sym(self.render(node, fr), qual=f"{base.qual}.{node.attr}", node=node)
        return Sym(self.render(node, fr), param=getattr(base, "param", ""), node=node)

    def method_of(self, obj: ObjV, name: str) -> FuncInfo | None:
        cls, seen = obj.cls, 0
        while cls is not None and seen < 8:
            if name in cls.methods:
                return cls.methods[name]
            cls = next((self.mod.classes[b] for b in cls.bases if b in self.mod.classes), None)
            seen += 1
        return None

    def ev_Subscript(self, node: ast.Subscript, fr: Frame) -> Val:
        base = self.ev(node.value, fr)
        index = self.ev(node.slice, fr)
        if isinstance(base, ListV) and isinstance(index, Sym) and isinstance(index.const, int):
            if -len(base.items) <= index.const < len(base.items):
                return base.items[index.const]
        if isinstance(base, DictV) and not isinstance(node.slice, ast.Slice):
            key = dict_key(index)
            if key in base.items:
                return base.items[key]
        if isinstance(base, ListV) and base.items and all(isinstance(v, ListV) for v in
                                                          base.items):
            return merge(base.items)  # lists[i] of a list of lists (one per split)
        if isinstance(base, (Tensor, ListV, DictV)) and tensors_in(base):
            t = tensors_in(base)
            return Tensor(primary(t), frozenset().union(*(x.deps for x in t)))
        return self.combine(node, [base, index], fr)

    def ev_List(self, node: ast.List | ast.Tuple, fr: Frame) -> Val:
        items = [self.ev(e.value if isinstance(e, ast.Starred) else e, fr) for e in node.elts]
        return ListV(items, self.render(node, fr)())

    ev_Tuple = ev_List

    def ev_Dict(self, node: ast.Dict, fr: Frame) -> Val:
        items: dict[object, Val] = {}
        for k, v in zip(node.keys, node.values):
            val = self.ev(v, fr)
            if k is None:  # {**other}
                if not isinstance(val, DictV):
                    return self.combine(node, [self.ev(x, fr) for x in node.values], fr)
                items.update(val.items)
            else:
                items[dict_key(self.ev(k, fr))] = val
        return DictV(items, self.render(node, fr)())

    def ev_BinOp(self, node: ast.BinOp, fr: Frame) -> Val:
        left, right = self.ev(node.left, fr), self.ev(node.right, fr)
        if isinstance(node.op, ast.Mult) and isinstance(left, ListV) and isinstance(right, Sym):
            return ListV(list(left.items), self.render(node, fr)(), loop=right)  # [op] * n
        const = NOCONST
        if isinstance(left, Sym) and isinstance(right, Sym) and left.known and right.known:
            const = fold(ast.BinOp(_constant(left.const), node.op, _constant(right.const)), {})
        return self.combine(node, [left, right], fr, const)

    def ev_UnaryOp(self, node: ast.UnaryOp, fr: Frame) -> Val:
        v = self.ev(node.operand, fr)
        const = NOCONST
        if isinstance(v, Sym) and v.known:
            const = fold(ast.UnaryOp(node.op, _constant(v.const)), {})
        return self.combine(node, [v], fr, const)

    def ev_Compare(self, node: ast.Compare, fr: Frame) -> Val:
        vals = [self.ev(node.left, fr)] + [self.ev(c, fr) for c in node.comparators]
        const = NOCONST
        known = [v for v in vals if isinstance(v, Sym) and v.known]
        if len(vals) == 2 and len(known) == 2:
            a, b = known[0].const, known[1].const
            try:
                const = {ast.Eq: a == b, ast.NotEq: a != b, ast.Is: a is b,
                         ast.IsNot: a is not b}.get(type(node.ops[0]), NOCONST)
                if const is NOCONST and isinstance(a, (int, float)) and isinstance(
                        b, (int, float)):
                    const = {ast.Gt: a > b, ast.Lt: a < b, ast.GtE: a >= b,
                             ast.LtE: a <= b}.get(type(node.ops[0]), NOCONST)
            except TypeError:
                const = NOCONST
        return self.combine(node, vals, fr, const)

    def ev_BoolOp(self, node: ast.BoolOp, fr: Frame) -> Val:
        vals = [self.ev(v, fr) for v in node.values]
        const: object = NOCONST
        known = [v for v in vals if isinstance(v, Sym) and v.known]
        if len(known) == len(vals):
            truth = [bool(v.const) for v in known]
            const = all(truth) if isinstance(node.op, ast.And) else any(truth)
        elif isinstance(node.op, ast.Or):  # x or default: the first known-true operand
            true = [v for v in known if v.const]
            if true and vals.index(true[0]) == 0:
                const = true[0].const
        return self.combine(node, vals, fr, const)

    def ev_IfExp(self, node: ast.IfExp, fr: Frame) -> Val:
        test = self.ev(node.test, fr)
        if isinstance(test, Sym) and test.known:
            return self.ev(node.body if test.const else node.orelse, fr)
        body, orelse = self.ev(node.body, fr), self.ev(node.orelse, fr)
        if tensors_in(body) or tensors_in(orelse):
            return merge([body, orelse])
        return self.combine(node, [test, body, orelse], fr)

    def ev_Lambda(self, node: ast.Lambda, fr: Frame) -> Val:
        info = FuncInfo(node, f"{fr.fn.qualname}.<lambda>", "<lambda>",
                        [ast.Return(node.body, lineno=node.lineno, col_offset=node.col_offset,
                                    end_lineno=node.end_lineno,
                                    end_col_offset=node.end_col_offset)],
                        [a.arg for a in node.args.args], parent=fr.fn)
        return FuncV(info, closure=fr, text=self.src.segment(node, 400))

    def ev_NamedExpr(self, node: ast.NamedExpr, fr: Frame) -> Val:
        val = self.ev(node.value, fr)
        self.assign(node.target, val, fr)
        return val

    def ev_Starred(self, node: ast.Starred, fr: Frame) -> Val:
        return self.ev(node.value, fr)

    def ev_JoinedStr(self, node: ast.JoinedStr, fr: Frame) -> Val:
        return Sym(self.render(node, fr), node=node)

    def ev_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                    fr: Frame) -> Val:
        first = node.generators[0]
        count = self.loop_count(first.iter, self.ev(first.iter, fr), fr)
        inner = Frame(fr.fn, {}, fr.depth, fr, fr.path, fr.guards,
                      count if count.text else fr.loop, fr.me)
        for i, gen in enumerate(node.generators):
            it = self.ev(gen.iter, fr) if i else None
            it = it if it is not None else self.ev(first.iter, fr)
            over = self.render(gen.iter, fr)() if isinstance(gen.target, ast.Name) else ""
            item = (Tensor(it.stream, it.deps) if isinstance(it, Tensor) else
                    merge(it.items) if isinstance(it, ListV) and it.items and tensors_in(it)
                    else Sym(self.render(gen.target, fr), param=getattr(it, "param", ""),
                             over=over))
            self.assign(gen.target, item, inner)
        elt = node.value if isinstance(node, ast.DictComp) else node.elt
        val = self.ev(elt, inner)
        if tensors_in(val) or isinstance(val, (ListV, DictV)) and not isinstance(
                node, ast.DictComp):  # [read(q) for _ in range(n)]: n copies; [[] for ...]
            return ListV([val], self.render(node, fr)(), loop=count if count.text else None)
        return Sym(self.render(node, fr), listish=True, node=node)

    ev_SetComp = ev_GeneratorExp = ev_DictComp = ev_ListComp

    # -- calls ------------------------------------------------------------------------------
    def ev_Call(self, node: ast.Call, fr: Frame) -> Val:
        return calls.call(self, node, fr)

    def args_of(self, node: ast.Call, fr: Frame,
                params: tuple[str, ...] = ()) -> tuple[list[Val], dict[str, Val]]:
        pos = [self.ev(a.value if isinstance(a, ast.Starred) else a, fr) for a in node.args]
        kw = {k.arg: self.ev(k.value, fr) for k in node.keywords if k.arg}
        named = dict(kw)
        for i, v in enumerate(pos):
            if i < len(params) and params[i] not in named:
                named[params[i]] = v
        return pos, named

    # -- statements -------------------------------------------------------------------------
    def block(self, body: list[ast.stmt], fr: Frame) -> Exit | None:
        for stmt in body:
            out = self.stmt(stmt, fr)
            if out is not None:
                return out
        return None

    def stmt(self, node: ast.stmt, fr: Frame) -> Exit | None:
        if not self.budget.spend():
            raise Stop()
        log = self.world.log
        log.append(Exec(len(log), fr.fid, node, self.parent_seq))
        method = _ST.get(type(node))
        if method is None:
            return None
        saved = self.cur_calls, self.cur_external, self.fresh, self.cur_seq, self.parent_seq
        self.cur_calls, self.cur_external = [], []
        self.fresh = len(self.world.streams)
        self.cur_seq = self.parent_seq = len(log) - 1
        try:
            return method(self, node, fr)
        finally:
            streams = self.world.streams
            if len(streams) > self.fresh:  # the streams this statement began
                for s in streams[self.fresh:]:
                    if isinstance(node, ast.Assign) and not s.target and s.kind != "param":
                        s.target = self.src.segment(node.targets[0], 120)
                    if s.seq < 0:
                        s.seq = self.cur_seq
            (self.cur_calls, self.cur_external, self.fresh, self.cur_seq,
             self.parent_seq) = saved

    def touch(self, node: ast.stmt, fr: Frame, vals: list[Val]) -> StepRec | None:
        """Record ``node`` as a per-example step when it computed from per-example tensors."""
        value = getattr(node, "value", None)
        if isinstance(value, ast.Call) and id(value) in self.followed:
            return None  # the followed function's own statements are the steps
        made_here = {id(s) for s in self.world.streams[self.fresh:] if s.kind != "param"}
        tensors = [t for v in vals for t in tensors_in(v)
                   if t.deps or id(t.stream) not in made_here]
        if not tensors:
            return None
        step = StepRec(len(self.world.steps) + 1, node, fr.fn.qualname,
                       primary(tensors), fr.guards, list(self.cur_calls),
                       list(self.cur_external), fr.loop.text if fr.loop is not None else "",
                       self.cur_seq)
        self.world.steps[step.id] = step
        for t in tensors + self.keys_read(node, fr):
            if t.key:
                t.stream.key_ids.add(step.id)
        return step

    def keys_read(self, node: ast.stmt, fr: Frame) -> list[Tensor]:
        """The reader keys (``key, value = reader.read(q)``: the file name) a statement reads
        by name: a step computing from a key uses it, though what it computes is no key."""
        value = getattr(node, "value", None)
        if value is None or not self.keys_made:
            return []
        found = (self._lookup_at(name, fr, self.clock) for name in self.mod.loads_in(value))
        return [v for v in found if isinstance(v, Tensor) and v.key]

    def stamp(self, val: Val, step: StepRec) -> Val:
        """``val`` as computed by ``step`` (tensors in it now depend on the step)."""
        if isinstance(val, Tensor):
            return Tensor(val.stream, val.deps | {step.id}, val.text)
        if isinstance(val, ListV):
            return ListV([self.stamp(v, step) for v in val.items], val.text, val.loop)
        if isinstance(val, DictV):
            return DictV({k: self.stamp(v, step) for k, v in val.items.items()}, val.text)
        return val

    def st_Assign(self, node: ast.Assign, fr: Frame) -> None:
        val = self.ev(node.value, fr)
        if not _plain_move(node.value):
            step = self.touch(node, fr, [val])
            if step is not None:
                val = self.stamp(val, step)
        for t in node.targets:
            self.assign(t, val, fr)
            self.note_origin(t, node.value, fr)

    def note_origin(self, target: ast.AST, value: ast.AST, fr: Frame) -> None:
        """``self.x = value``: where the object's attribute was set, for the plan to say."""
        for t in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                owner = fr.get(t.value.id)
                if isinstance(owner, ObjV) and t.attr not in owner.origins:
                    owner.origins[t.attr] = (fr.fn.qualname, t.lineno,
                                             self.src.segment(value, 80))

    def st_AnnAssign(self, node: ast.AnnAssign, fr: Frame) -> None:
        if node.value is not None:
            self.st_Assign(ast.Assign([node.target], node.value, lineno=node.lineno,
                                      col_offset=node.col_offset, end_lineno=node.end_lineno,
                                      end_col_offset=node.end_col_offset), fr)

    def st_AugAssign(self, node: ast.AugAssign, fr: Frame) -> None:
        val = self.combine(node, [self.ev(node.target, fr), self.ev(node.value, fr)], fr)
        step = self.touch(node, fr, [val])
        self.assign(node.target, self.stamp(val, step) if step else val, fr)

    def st_Expr(self, node: ast.Expr, fr: Frame) -> None:
        val = self.ev(node.value, fr)
        call = node.value
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "set_shape"):
            target = call.func.value
            old = self.ev(target, fr)
            step = self.touch(node, fr, [old])
            if step is not None:
                self.assign(target, self.stamp(old, step), fr)
            return
        qual = self.mod.scan.resolved.get(id(call), "") if isinstance(call, ast.Call) else ""
        if qual.startswith("tensorflow.") and not calls.is_op(qual):
            return  # graph bookkeeping (add_to_collection, summaries, logging): no data
        self.touch(node, fr, [val] if not isinstance(val, (QueueV, EnqueueV)) else [])

    def st_Return(self, node: ast.Return, fr: Frame) -> Exit:
        val = self.ev(node.value, fr) if node.value is not None else Sym("None", None)
        if not _plain_move(node.value):
            step = self.touch(node, fr, [val])
            if step is not None:
                val = self.stamp(val, step)
        return Exit("return", val)

    def st_Raise(self, node: ast.Raise, fr: Frame) -> Exit:
        return Exit("raise")

    def st_Assert(self, node: ast.Assert, fr: Frame) -> None:
        self.ev(node.test, fr)

    def st_Import(self, node: ast.Import | ast.ImportFrom, fr: Frame) -> None:
        for a in node.names:
            if isinstance(node, ast.Import):
                name = a.asname or a.name.split(".")[0]
                qual = a.name if a.asname else name
            elif a.name != "*" and node.module and not node.level:
                name, qual = a.asname or a.name, f"{node.module}.{a.name}"
            else:
                continue
            self.clock += 1
            fr.bind(name, Sym(name, qual=canonical(qual)), self.clock)

    st_ImportFrom = st_Import

    def st_FunctionDef(self, node: ast.FunctionDef, fr: Frame) -> None:
        info = self.mod.by_node.get(id(node))
        if info is not None:
            self.clock += 1
            fr.bind(node.name, FuncV(info, closure=fr, text=node.name), self.clock)

    st_AsyncFunctionDef = st_FunctionDef

    def st_ClassDef(self, node: ast.ClassDef, fr: Frame) -> None:
        self.clock += 1
        fr.bind(node.name, ClassV(ClassInfo(node, node.name, {}, []), text=node.name),
                self.clock)

    def st_With(self, node: ast.With, fr: Frame) -> Exit | None:
        for item in node.items:
            val = self.ev(item.context_expr, fr)
            if item.optional_vars is not None:
                self.assign(item.optional_vars, val, fr)
        return self.block(node.body, fr)

    st_AsyncWith = st_With

    def st_Try(self, node: ast.Try, fr: Frame) -> Exit | None:
        out = self.block(node.body, fr)
        if out is not None and out.kind == "return":
            return out
        return self.block(node.finalbody, fr) or (out if out and out.kind == "return" else None)

    st_TryStar = st_Try

    def st_For(self, node: ast.For, fr: Frame) -> Exit | None:
        it = self.ev(node.iter, fr)
        if isinstance(it, DictV):  # a dict iterates over its keys
            it = ListV([key_val(k) for k in it.items], it.text)
        count = self.loop_count(node.iter, it, fr)
        if _is_range(node.iter):  # the copy number: copies made by it may differ by it
            count.loop_vars = tuple(n.id for n in walk(node.target)
                                    if isinstance(n, ast.Name))  # noqa
        over = self.render(node.iter, fr)() if isinstance(node.target, ast.Name) and \
            not _is_range(node.iter) else ""
        item = merge(it.items) if isinstance(it, ListV) and it.items else (
            Tensor(it.stream, it.deps) if isinstance(it, Tensor) else
            Sym(self.render(node.target, fr), param=getattr(it, "param", ""), over=over))
        if isinstance(it, Sym) and it.param and not isinstance(item, Tensor):
            item = Sym(self.render(node.target, fr), param=it.param, over=over)
        elif isinstance(item, Sym) and over:
            item = dataclasses.replace(item, over=over)
        self.assign(node.target, item, fr)
        outer = fr.loop
        fr.loop = count
        try:
            out = self.block(node.body, fr)
        finally:
            fr.loop = outer
        return out if out is not None and out.kind == "return" else None

    st_AsyncFor = st_For

    def loop_count(self, it_node: ast.AST, it: Val, fr: Frame) -> Sym:
        if (isinstance(it_node, ast.Call) and isinstance(it_node.func, ast.Name)
                and it_node.func.id in ("range", "xrange") and len(it_node.args) == 1):
            arg = self.ev(it_node.args[0], fr)
            if isinstance(arg, Sym):
                return Sym(arg.text, arg.const, param=arg.param)
            return Sym(self.render(it_node.args[0], fr))
        return Sym(lambda: f"len({it.text})" if it.text else "")

    def st_While(self, node: ast.While, fr: Frame) -> Exit | None:
        self.ev(node.test, fr)
        out = self.block(node.body, fr)
        return out if out is not None and out.kind == "return" else None

    def st_If(self, node: ast.If, fr: Frame) -> Exit | None:
        test = self.ev(node.test, fr)
        if isinstance(test, Sym) and test.known:
            return self.block(node.body if test.const else node.orelse, fr)
        cond = _condition_text(test, node.test, self)
        key = cond[4:] if cond.startswith("not ") else cond
        if key in self.world.decisions or self.mod.is_structural(node):  # decided in this world
            self.world.decided.add(self.cur_seq)
            return self.block(node.body if self.decide(cond) else node.orelse, fr)
        return self.both(node, cond, fr)

    def decide(self, cond: str) -> bool:
        key, value = (cond[4:], False) if cond.startswith("not ") else (cond, True)
        if key not in self.world.decisions:
            self.world.forks.append(key)
            self.world.decisions[key] = self.decisions.get(key, True)
        if self.consulted is not None:
            self.consulted.setdefault(key, self.world.decisions[key])
        return self.world.decisions[key] == value

    def both(self, node: ast.If, cond: str, fr: Frame) -> Exit | None:
        """Run both branches of an undecidable, non-structural ``if`` and merge the names."""
        saved = {k: list(v) for k, v in fr.env.items()}
        outer = fr.guards
        fr.guards = outer + (cond,)
        out_a = self.block(node.body, fr)
        env_a = fr.env
        fr.env = {k: list(v) for k, v in saved.items()}
        fr.guards = outer + (_negate(cond),)
        out_b = self.block(node.orelse, fr)
        fr.guards = outer
        if out_a is not None and out_a.kind == "raise":
            return out_b
        if out_b is not None and out_b.kind == "raise":
            fr.env = env_a
            return out_a
        for name in set(env_a) | set(fr.env):
            a, b = env_a.get(name), fr.env.get(name)
            va, vb = (a[-1][1] if a else None), (b[-1][1] if b else None)
            if va is not vb and va is not None:
                self.clock += 1
                fr.bind(name, merge([va, vb] if vb is not None else [va]), self.clock)
        if out_a is not None and out_b is not None:
            return Exit("return", merge([out_a.value, out_b.value]))
        return None

    # -- running an entry -------------------------------------------------------------------
    def new_frame(self, info: FuncInfo, caller: Frame | None, call: ast.AST | None) -> int:
        """Record a call of ``info`` made by the statement being executed in ``caller``."""
        fid = len(self.world.frames)
        self.world.frames[fid] = FrameRec(fid, info, caller.fid if caller else -1,
                                          self.cur_seq if caller else -1, call)
        return fid

    def call_function(self, info: FuncInfo, pos: list[Val], kw: dict[str, Val], fr: Frame,
                      bound: Val | None = None, closure: Frame | None = None,
                      call: ast.AST | None = None) -> Val | None:
        """Run the script's own function with these arguments; None when it is not followed
        (too deep, recursive, or nothing per-example or structural in it)."""
        if fr.depth + 1 > MAX_DEPTH or info in self.stack:
            return None
        args = ([bound] if bound is not None else []) + pos
        if info.decorator:  # the decorator's code runs, not the body: a call we cannot follow
            if any(tensors_in(v) for v in args + list(kw.values())):
                self.cur_external.append(info.qualname)
            return None
        relevant = info.name in self.mod.structural or info.name == "<lambda>" or any(
            tensors_in(v) or _pipeline_val(v) for v in args + list(kw.values()))
        if not relevant:
            return None
        callee = Frame(info, {}, fr.depth + 1, closure, fr.path + (info.qualname,),
                       fr.guards, fr.loop, bound if isinstance(bound, ObjV) else None,
                       self.new_frame(info, fr, call))
        self.bind_params(info, args, kw, callee, fr)
        self.stack.append(info)
        outer = self.parent_seq
        self.parent_seq = -1
        try:
            out = self.block(info.body, callee)
        finally:
            self.stack.pop()
            self.parent_seq = outer
        return out.value if out is not None and out.kind == "return" else Sym("None", None)

    def bind_params(self, info: FuncInfo, args: list[Val], kw: dict[str, Val], callee: Frame,
                    caller: Frame) -> None:
        a = info.args
        if a is None:
            return
        names = [x.arg for x in a.posonlyargs + a.args]
        defaults = dict(zip(names[len(names) - len(a.defaults):], a.defaults))
        defaults.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        for i, name in enumerate(names + [x.arg for x in a.kwonlyargs]):
            if i < len(names) and i < len(args):
                val = args[i]
            elif name in kw:
                val = kw[name]
            elif name in defaults:
                val = self.ev(defaults[name], Frame(self.mod.module, {}, 1, None, ()))
            else:
                val = Sym(name)
            self.clock += 1
            callee.bind(name, val, self.clock)
        for extra in (a.vararg, a.kwarg):
            if extra is not None:
                self.clock += 1
                callee.bind(extra.arg, Sym(extra.arg), self.clock)

    def entry_frame(self) -> Frame:
        info = self.entry
        fr = Frame(info, {}, 0, self.enclosing(info), (info.qualname,),
                   fid=self.new_frame(info, None, None))
        if info.cls is not None and info.params:
            me = self.instance(info.cls, info.params[0])
            self.clock += 1
            fr.bind(info.params[0], me, self.clock)
            fr.me = me
        for name in info.params[1 if info.cls is not None else 0:]:
            self.clock += 1
            fr.bind(name, Sym(name, param=name), self.clock)
        return fr

    def enclosing(self, info: FuncInfo) -> Frame | None:
        """For a nested function run on its own: the functions around it, their parameters
        known by name only (what the caller of the outer function passes)."""
        outer = None
        chain: list[FuncInfo] = []
        parent = info.parent
        while parent is not None and len(chain) < MAX_DEPTH:
            chain.append(parent)
            parent = parent.parent
        for fn in reversed(chain):
            outer = Frame(fn, {}, 0, outer, (fn.qualname,))
            for name in fn.params:
                self.clock += 1
                outer.bind(name, Sym(name, param=name), self.clock)
        return outer

    def instance(self, cls: ClassInfo, me_name: str) -> ObjV:
        """``self`` for a method run on its own: the attributes ``__init__`` sets (run without
        following its calls to other methods). Every method of a class, in every world, begins
        with the same run of ``__init__`` when the decisions it meets are the same: it runs
        once, and the others take a copy of what it made (:class:`_Presim`)."""
        me = ObjV({}, me_name, cls)
        init = self.method_of(me, "__init__")
        if init is None or init.args is None or init is self.entry:
            return me
        w = self.world
        fresh = list(w.frames) == [0] and not (
            w.log or w.streams or w.steps or w.forks or w.decided or w.queues or w.ends or
            self.copies or self.param_streams or self.followed or self.clock)
        key = (id(init), me_name)
        if fresh:
            made: list[_Presim] = self.mod.presims.get(key, [])
            for pre in made:
                if pre.fits(self.decisions):
                    return pre.replay(self)
        consulted: dict[str, bool] = {}
        self.consulted = consulted
        try:
            me = self.simulate_init(me, init, me_name)
        finally:
            self.consulted = None
        if fresh:
            self.mod.presims.setdefault(key, []).append(_Presim.take(self, me, consulted))
        return me

    def simulate_init(self, me: ObjV, init: FuncInfo, me_name: str) -> ObjV:
        fr = Frame(init, {}, 1, None, (self.entry.qualname, init.qualname), me=me,
                   fid=self.new_frame(init, None, None))
        self.clock += 1
        fr.bind(init.params[0], me, self.clock)
        for name in init.params[1:]:
            self.clock += 1
            fr.bind(name, Sym(name), self.clock)  # what the constructor was given
        self.stack.append(init)
        self.presim = True
        try:
            self.block(init.body, fr)
        finally:
            self.stack.pop()
            self.presim = False
        for k, v in me.attrs.items():
            if isinstance(v, Sym):
                me.attrs[k] = Sym(f"{me_name}.{k}", v.const, v.qual, listish=v.listish)
            elif not v.text or "(" in v.text:
                v.text = f"{me_name}.{k}"
        return me

    def go(self) -> World:
        try:
            fr = self.entry_frame()
            self.world.me = fr.me
            out = self.block(self.entry.body, fr)
            if out is not None and out.kind == "return":
                self.world.returned = out.value
            if self.entry is self.mod.module:
                self.world.shared = {k: h[-1][1] for k, h in fr.env.items()
                                     if h and _shareable(h[-1][1])}
        except Stop:
            self.world.stopped = True
        except RecursionError:
            self.world.stopped = True
        return self.world


#: Run's handlers by node type: ``ev_<Type>`` for expressions, ``st_<Type>`` for statements.
#: ``Run.ev_X`` and ``Run.st_X`` by the node type ``ast.X`` they evaluate or run.
_EV: dict[type[ast.AST], Callable[[Run, Any, Frame], Val]] = {
    getattr(ast, n[3:]): f for n, f in vars(Run).items()
    if n.startswith("ev_") and hasattr(ast, n[3:])}
_ST: dict[type[ast.AST], Callable[[Run, Any, Frame], Exit | None]] = {
    getattr(ast, n[3:]): f for n, f in vars(Run).items()
    if n.startswith("st_") and hasattr(ast, n[3:])}


@dataclasses.dataclass
class _Records:
    """What a run of ``__init__`` for ``self`` left in the world and the run."""

    me: ObjV
    frames: dict[int, FrameRec]
    log: list[Exec]
    streams: list[Stream]
    queues: list[QueueV]
    ends: list[End]
    steps: dict[int, StepRec]
    forks: list[str]
    decided: set[int]
    copies: dict[str, Val]
    followed: set[int]
    clock: int
    keys_made: bool

    def copy(self, memo: dict[int, object]) -> _Records:
        """A copy made with :func:`.values.clone` (its fields through one ``memo``, in order)."""
        new = object.__new__(_Records)
        new.__dict__.update({k: clone(v, memo) for k, v in self.__dict__.items()})
        return new


@dataclasses.dataclass
class _Presim:
    """What one run of a class's ``__init__`` for ``self`` made at the start of a world (see
    :meth:`Run.instance`): the decisions it met, copies of the world's records and of the run's
    state after it, and how many statements it spent. ``replay`` puts a fresh copy of them into
    another run at the same point, as if it had run ``__init__`` itself."""

    consulted: dict[str, bool]
    records: _Records
    entry: str  # the qualname of the entry it ran for (the first part of its objects' paths)

    def fits(self, decisions: dict[str, bool]) -> bool:
        return all(decisions.get(k, True) == v for k, v in self.consulted.items())

    @classmethod
    def take(cls, run: Run, me: ObjV, consulted: dict[str, bool]) -> _Presim:
        w = run.world
        records = _Records(me, {k: f for k, f in w.frames.items() if k}, w.log, w.streams,
                           w.queues, w.ends, w.steps, w.forks, w.decided, run.copies,
                           run.followed, run.clock, run.keys_made).copy({})
        return cls(dict(consulted), records, run.entry.qualname)

    def replay(self, run: Run) -> ObjV:
        """Its records in ``run``, copied, with the paths of what they made starting at
        ``run``'s entry; the statements it ran are spent from the budget again."""
        spent = len(self.records.log)
        if run.budget.left - spent < 0:
            raise Stop()
        run.budget.left -= spent
        memo: dict[int, object] = {}
        r = self.records.copy(memo)
        for obj in memo.values():  # streams, queues and ends were made under the entry
            path = getattr(obj, "path", None)
            if isinstance(path, tuple) and path[:1] == (self.entry,):
                setattr(obj, "path", (run.entry.qualname,) + path[1:])
        w = run.world
        w.frames.update(r.frames)
        w.log, w.streams, w.queues, w.ends = r.log, r.streams, r.queues, r.ends
        w.steps, w.forks, w.decided = r.steps, r.forks, r.decided
        w.decisions.update(self.consulted)
        run.copies, run.followed = r.copies, r.followed
        run.clock, run.keys_made = r.clock, r.keys_made
        return r.me


def _is_range(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("range", "xrange"))


def _plain_move(node: ast.AST | None) -> bool:
    """A statement that only moves values (``a, b = x, y``; ``return images, labels``)."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_plain_move(e) for e in node.elts)
    return False


def _negate(cond: str) -> str:
    return cond[4:] if cond.startswith("not ") else f"not {cond}"


def _condition_text(test: Val, node: ast.AST, run: Run) -> str:
    text = test.text if isinstance(test, Sym) else ""
    if not text:
        text = run.src.segment(node, 120)
    text = " ".join(text.split())
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and not text.startswith(
            "not "):
        text = "not " + text
    while text.startswith("not not "):
        text = text[8:]
    return text


def _pipeline_val(val: Val) -> bool:
    if isinstance(val, (QueueV, ReaderV, ProviderV, DatasetV, IteratorV, PlaceholderV,
                        EnqueueV)):
        return True
    if isinstance(val, ListV):
        return any(_pipeline_val(v) for v in val.items[:8])
    return isinstance(val, Sym) and bool(val.param)


def _shareable(val: Val, depth: int = 0) -> bool:
    """A value the module body made that functions may read as a global: a pipeline object, or
    a list or dict holding one (``placeholders = [tf.placeholder(...), ...]``)."""
    if isinstance(val, (QueueV, EnqueueV, PlaceholderV, ReaderV, DatasetV)):
        return True
    if isinstance(val, ListV) and depth < 2:
        return any(_shareable(v, depth + 1) for v in val.items[:16])
    if isinstance(val, DictV) and depth < 2:
        return any(_shareable(v, depth + 1) for v in list(val.items.values())[:16])
    return False


def _own_copy(val: Val) -> Val:
    """A module-level pipeline object as one run sees it: a queue copied (what the run enqueues
    into it, closes or runs it with stays in that run), the rest as they are."""
    if isinstance(val, QueueV):
        return dataclasses.replace(val, enqueues=list(val.enqueues))
    if isinstance(val, ListV):
        return ListV([_own_copy(v) for v in val.items], val.text, val.loop)
    if isinstance(val, DictV):
        return DictV({k: _own_copy(v) for k, v in val.items.items()}, val.text)
    return val


def run_entry(mod: Module, entry: FuncInfo, budget: Budget,
              shared: dict[str, Val] | None = None) -> list[World]:
    """Every world of an entry: one run per combination of the structural conditions it meets
    (depth-first, each new condition first True then False), at most :data:`MAX_WORLDS`.
    ``shared``: the module body's pipeline objects (:attr:`World.shared`), read as globals."""
    worlds: list[World] = []
    todo: list[dict[str, bool]] = [{}]
    while todo and len(worlds) < MAX_WORLDS and budget.left > 0:
        decisions = todo.pop()
        world = Run(mod, entry, decisions, budget, shared).go()
        worlds.append(world)
        for i, key in enumerate(world.forks):
            if key in decisions:
                continue
            flipped = dict(decisions)
            flipped.update({k: world.decisions[k] for k in world.forks[:i]})
            flipped[key] = not world.decisions[key]
            todo.append(flipped)
    return worlds


__all__ = ["Budget", "Run", "World", "run_entry", "tensors_in", "merge", "MAX_WORLDS"]
