"""What the symbolic run of :mod:`.flow` computes with: abstract values, per-example streams, the
steps and ends it records, and the index of the module's functions and classes.

A value is an ordinary Python value (:class:`Sym`, written as the pipeline function would write
it), a per-example tensor (:class:`Tensor`, derived from a :class:`Stream` through recorded
steps), or one of the TF1 pipeline objects (queue, reader, provider, dataset, iterator,
placeholder). Containers and objects keep their members so tensors flow through them.
"""
from __future__ import annotations

import ast
import collections
import dataclasses
from collections.abc import Sequence
from typing import Any, Callable, Iterator, TypeGuard

from compare.migration.rules import ITERATOR_METHODS, rule_for
from compare.migration.scan import ScanResult, walk

NOCONST = object()
#: Rule categories whose calls build an input pipeline (a function using one is worth running).
STRUCTURAL_CATEGORIES = frozenset({"queue_input", "reader", "batching", "tf_data_v1"})
#: Method names that build or consume a TF1 pipeline on any object.
STRUCTURAL_METHODS = frozenset({"enqueue", "enqueue_many", "dequeue", "dequeue_many",
                                "dequeue_up_to", "read", "read_up_to", "padded_batch",
                                *ITERATOR_METHODS})
MODULE = "<module>"


class Val:
    """Base of all abstract values; ``text`` is how the pipeline function writes the value."""

    text: str = ""


@dataclasses.dataclass(eq=False)
class Sym(Val):
    """An ordinary value. ``const``: its Python value when fixed; ``qual``: the module function
    it names (``decode = tf.image.decode_jpeg``); ``param``: the entry parameter it comes from;
    ``listish``: known to be a Python list; ``over``: what the loop whose variable it is
    iterates (``for f in names``: ``names``). Its text is rendered on demand by ``render``."""

    render: str | Callable[[], str] | None = None  # its text, or what makes it when asked
    const: object = NOCONST
    qual: str = ""
    param: str = ""
    listish: bool = False
    node: ast.AST | None = None
    loop_vars: tuple[str, ...] = ()
    alts: tuple[str, ...] = ()
    over: str = ""  # a for loop's variable over data: the text of what the loop iterates

    @property
    def text(self) -> str:
        """Made when first asked for (most values are never shown)."""
        if callable(self.render):
            self.render = self.render()
        return self.render or ""

    @text.setter
    def text(self, value: str) -> None:
        self.render = value

    @property
    def known(self) -> bool:
        return self.const is not NOCONST

    def written(self, render: str | Callable[[], str] | None) -> Sym:
        """The same value written otherwise (``render``: a str or a callable giving one);
        cheaper than dataclasses.replace, which the symbolic run would call per name read."""
        new = object.__new__(Sym)
        new.__dict__.update(self.__dict__)
        new.render = render
        return new


@dataclasses.dataclass(eq=False)
class Stream:
    """A per-example stream. ``kind``: ``records`` (a reader over a filename queue), ``rows``
    (slice_input_producer), ``dequeue`` (an explicit queue), ``provider`` (slim), ``param`` (the
    entry's parameter: elements made outside). ``path`` is the call stack where it began."""

    kind: str
    node: ast.AST
    fn: str
    path: tuple[str, ...]
    queue: "QueueV | None" = None
    reader: ReaderV | None = None
    rows: Val | None = None
    #: What else the source took: read_up_to's ``up_to``, slice_input_producer's arguments, a
    #: provider, an iterator's dataset (values of several kinds, by name).
    args: dict[str, Any] = dataclasses.field(default_factory=dict)
    loop: Sym | None = None
    param: str = ""
    key_ids: set[int] = dataclasses.field(default_factory=set)
    target: str = ""  # what the script binds the elements to (``_, serialized_example``)
    seq: int = -1  # the executed statement (:class:`Exec`) that began the stream


@dataclasses.dataclass(eq=False)
class Tensor(Val):
    """A per-example tensor: the stream it derives from and the ids of the steps computing it."""

    stream: Stream
    deps: frozenset[int] = frozenset()
    text: str = ""
    key: bool = False


@dataclasses.dataclass(eq=False)
class ListV(Val):
    """A list or tuple; ``loop`` is the iteration count when it was filled in a loop."""

    items: list[Val]
    text: str = ""
    loop: Sym | None = None


@dataclasses.dataclass(eq=False)
class DictV(Val):
    """A dict: its values by key (a constant, or the key's text when the run cannot tell it), so
    tensors flow through ``d['image'] = image``, ``dict(zip(names, tensors))`` and
    ``zip(*d.items())`` as they do through lists."""

    items: dict[object, Val]
    text: str = ""

    def pairs(self) -> list[Val]:
        """``d.items()``: (key, value) for each entry, in order."""
        return [ListV([key_val(k), v]) for k, v in self.items.items()]


def key_val(key: object) -> Sym:
    """A dict key as a value (``("?", text)`` is a key the run could not tell)."""
    if isinstance(key, tuple) and len(key) == 2 and key[0] == "?":
        return Sym(key[1])
    return Sym(repr(key), key)


def dict_key(index: Val) -> object:
    """The key ``index`` stands for: its constant when known and hashable, else its text."""
    if isinstance(index, Sym) and index.known:
        try:
            hash(index.const)
            return index.const
        except TypeError:
            pass
    return ("?", index.text)


@dataclasses.dataclass(eq=False)
class ObjV(Val):
    """An object with attributes we follow (``self``, a local record class)."""

    attrs: dict[str, Val]
    text: str = ""
    cls: ClassInfo | None = None
    #: Where each attribute was first set: (function, line, the value as written).
    origins: dict[str, tuple[str, int, str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(eq=False)
class QueueV(Val):
    """A queue: a producer's (``kind="producer"``, ``rule`` says which) or an explicit one
    (``fifo``, ``random_shuffle``, ``padding_fifo``, ``priority``)."""

    kind: str
    rule: str
    node: ast.Call
    fn: str
    path: tuple[str, ...]
    args: dict[str, Val]
    enqueues: list[EnqueueV] = dataclasses.field(default_factory=list)
    copies: Val | None = None
    closed: bool = False
    text: str = ""
    stored: str = ""


@dataclasses.dataclass(eq=False)
class EnqueueV(Val):
    queue: QueueV
    values: Val
    many: bool
    node: ast.Call
    fn: str
    text: str = ""
    stored: str = ""
    loop: Sym | None = None
    info: FuncInfo | None = None  # the function that made it


@dataclasses.dataclass(eq=False)
class ReaderV(Val):
    kind: str
    node: ast.AST | None
    fn: str
    args: dict[str, Val]
    origin: str
    text: str = ""


@dataclasses.dataclass(eq=False)
class ProviderV(Val):
    node: ast.Call
    fn: str
    args: dict[str, Val]
    text: str = ""


@dataclasses.dataclass(eq=False)
class DatasetV(Val):
    """A tf.data pipeline the script builds: its head (the source call, or an unknown value) and
    the method calls after it, each (method, call node, frame, positional vals, keyword vals)."""

    #: ("call", canonical name, call node, frame, positional vals, keyword vals), or ("value",
    #: the value it continues[, the node that reads it])
    head: tuple[Any, ...]
    #: (method, call node, frame, positional vals, keyword vals, guards) per method call
    ops: tuple[tuple[Any, ...], ...] = ()
    text: str = ""
    #: Datasets the head or an op takes by name (``tf.data.Dataset.zip((ds, counter))``,
    #: ``ds.concatenate(extra)``): (name as written, the dataset it was).
    inputs: tuple[tuple[str, DatasetV], ...] = ()


@dataclasses.dataclass(eq=False)
class IteratorV(Val):
    dataset: DatasetV
    node: ast.Call
    fn: str
    text: str = ""


@dataclasses.dataclass(eq=False)
class PlaceholderV(Val):
    node: ast.Call
    args: dict[str, Val]
    text: str = ""
    stored: str = ""


@dataclasses.dataclass(eq=False)
class FuncV(Val):
    info: FuncInfo
    closure: Frame | None = None  # the frame a nested def was made in
    bound: Val | None = None
    text: str = ""


@dataclasses.dataclass(eq=False)
class ClassV(Val):
    info: ClassInfo | None
    text: str = ""


@dataclasses.dataclass(eq=False)
class Frame:
    """One function's run: names bound with the clock time they were bound (so a value's text
    can be rendered as of when it was made), the call stack, the undecided conditions around."""

    fn: FuncInfo
    env: dict[str, list[tuple[int, Val]]]
    depth: int
    parent: Frame | None
    path: tuple[str, ...]
    guards: tuple[str, ...] = ()
    loop: Sym | None = None
    me: ObjV | None = None
    fid: int = 0

    def bind(self, name: str, val: Val, clock: int) -> None:
        self.env.setdefault(name, []).append((clock, val))

    def get(self, name: str, at: int | None = None) -> Val | None:
        hist = self.env.get(name)
        if not hist:
            return None
        if at is None:
            return hist[-1][1]
        for t, v in reversed(hist):
            if t <= at:
                return v
        return None


@dataclasses.dataclass
class StepRec:
    """A statement that computed per-example tensors, as run (``guards``: the conditions the
    run could not decide around it)."""

    id: int
    stmt: ast.stmt
    fn: str
    stream: Stream
    guards: tuple[str, ...]
    calls: list[tuple[str, ast.Call]] = dataclasses.field(default_factory=list)  # (name, call)
    external: list[str] = dataclasses.field(default_factory=list)
    loop: str = ""  # the iteration count of the loop around it, if any
    seq: int = -1  # the executed statement (:class:`Exec`) it is


@dataclasses.dataclass
class End:
    """Where a pipeline ends: a batching call, a dequeue, an iterator, a queue handed out, or
    the last per-example tensors of a stream nothing batches (``kind`` says which)."""

    kind: str
    node: ast.AST
    fn: str
    path: tuple[str, ...]
    args: dict[str, Val] = dataclasses.field(default_factory=dict)
    inputs: Val | None = None
    queue: QueueV | None = None
    dataset: DatasetV | None = None
    stream: Stream | None = None
    construct: str = ""
    seq: int = -1  # the executed statement (:class:`Exec`) holding the call
    #: The stream of the batches it hands out (their tensors, so the per-batch code after it
    #: is recorded as steps of it).
    batch: Stream | None = None
    #: A queue handed to a function defined elsewhere: that call, as the script writes it.
    call: str = ""


@dataclasses.dataclass(eq=False)
class Exec:
    """One statement as the symbolic run executed it: in frame ``fid``, inside the compound
    statement executed as ``parent`` (-1: at the top of its function's body). A code emitter
    walks these to lift the script's own statements (:mod:`.emit`)."""

    seq: int
    fid: int
    stmt: ast.stmt
    parent: int = -1


@dataclasses.dataclass(eq=False)
class FrameRec:
    """One call of a script function in the run: the function, and the statement of the caller
    (``caller_seq``, in frame ``caller_fid``) that made it; ``call`` is the call node (None for
    the entry and for a method run to build ``self``)."""

    fid: int
    info: "FuncInfo"
    caller_fid: int = -1
    caller_seq: int = -1
    call: ast.AST | None = None


@dataclasses.dataclass(eq=False)
class FuncInfo:
    """A function, method or the module body: ``qualname`` (``Class.method``, ``outer.inner``)."""

    node: ast.AST  # a def, a lambda or the module
    qualname: str
    name: str
    body: list[ast.stmt]
    params: list[str]
    cls: ClassInfo | None = None
    parent: FuncInfo | None = None
    #: A decorator that changes what a call does (``@tf.sg_producer_func``), as written; such a
    #: function is not followed into: the call runs the decorator's code, not the body as is.
    decorator: str = ""

    @property
    def args(self) -> ast.arguments | None:
        args: ast.arguments | None = getattr(self.node, "args", None)
        return args

    @property
    def definition(self) -> ast.FunctionDef | ast.AsyncFunctionDef:
        """The def statement (of a function or a method; not the module's body, a lambda)."""
        node = self.node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise TypeError(f"{self.qualname} is not a def")
        return node


#: Decorators that leave a call running the body as written.
TRANSPARENT_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "abstractmethod",
                                    "wraps", "function", "lru_cache", "cache", "cached_property",
                                    "setter", "getter", "override", "overload"})


def changing_decorator(node: ast.AST, seg: Callable[[ast.AST, int], str]) -> str:
    """The first decorator of a def that is not one of :data:`TRANSPARENT_DECORATORS`."""
    for d in getattr(node, "decorator_list", ()):
        target = d.func if isinstance(d, ast.Call) else d
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name not in TRANSPARENT_DECORATORS:
            return "@" + seg(d, 60)
    return ""


@dataclasses.dataclass(eq=False)
class ClassInfo:
    node: ast.ClassDef
    name: str
    methods: dict[str, FuncInfo]
    bases: list[str]


@dataclasses.dataclass
class FeedRun:
    """A ``.run(fetch, feed_dict=...)`` in the script: ``feeds`` for a dict written out
    ({placeholder: value}), ``whole`` for one built over a container of placeholders
    (``dict(zip(placeholders, values))``, a dict comprehension)."""

    node: ast.Call
    fetch: str
    feeds: list[tuple[str, str, int]]  # (placeholder text, value text, line)
    fn: str
    info: FuncInfo | None = None  # the function running it
    whole: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)  # (container,
    #                                                              values as written, line)


class Module:
    """The index the run needs: functions, classes, module constants and imports, which
    functions build pipelines, and where placeholders are fed."""

    def __init__(self, tree: ast.Module, scan: ScanResult):
        self.tree, self.scan = tree, scan
        self.functions: list[FuncInfo] = []
        self.by_name: dict[str, FuncInfo] = {}
        self.by_node: dict[int, FuncInfo] = {}
        self.methods: dict[str, list[FuncInfo]] = collections.defaultdict(list)
        self.classes: dict[str, ClassInfo] = {}
        self.consts: dict[str, object] = {}
        self.imports: dict[str, str] = {}
        self.feeds: list[FeedRun] = []
        #: The feeds by what they name (the op they run, the placeholders they feed) and where
        #: they are (:func:`feed_owner`; "any": anywhere).
        self.feeds_by_key: dict[tuple[str, object], list[FeedRun]] = {}
        self.threads: set[str] = set()
        self.thread_classes: set[str] = set()
        self.dequeued: set[str] = set()  # receivers of .dequeue*() calls, as written
        self.record_types: set[str] = set()  # module names bound to a namedtuple class
        self._structural_stmt: dict[int, bool] = {}
        self._names: dict[int, tuple[ast.AST, frozenset[str]]] = {}
        #: Runs of each class's ``__init__`` for ``self``, kept to be replayed (flow._Presim).
        self.presims: dict[tuple[int, str], list[Any]] = {}
        self._loads: dict[int, tuple[ast.AST, tuple[str, ...]]] = {}
        # the functions it defines are bound as it runs (a name defined twice calls the
        # definition made before the call); classes are looked up in ``classes``
        body = [s for s in tree.body if not isinstance(s, ast.ClassDef)]
        self.module = FuncInfo(tree, MODULE, MODULE, body, [])
        self._index(tree.body, None, None, "")
        self._module_names()
        self.structural = self._index_calls()

    # -- index ------------------------------------------------------------------------------
    def _index(self, body: list[ast.stmt], cls: ClassInfo | None, parent: FuncInfo | None,
               prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                params += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
                fi = FuncInfo(node, prefix + node.name, node.name, node.body, params, cls, parent,
                              changing_decorator(node, self.scan.source.segment))
                self.functions.append(fi)
                self.by_node[id(node)] = fi
                if cls is not None and parent is None:
                    cls.methods[node.name] = fi
                    self.methods[node.name].append(fi)
                elif parent is None and cls is None:
                    self.by_name[node.name] = fi
                self._index(node.body, None, fi, fi.qualname + ".")
            elif isinstance(node, ast.ClassDef):
                ci = ClassInfo(node, node.name, {}, [getattr(b, "id", getattr(b, "attr", ""))
                                                     for b in node.bases])
                if "Thread" in ci.bases:  # a threading.Thread subclass: its methods feed
                    self.thread_classes.add(prefix + node.name)
                if parent is None:
                    self.classes.setdefault(node.name, ci)
                self._index(node.body, ci, None, prefix + node.name + ".")
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    sub = getattr(node, field, None)
                    if isinstance(sub, list) and sub and not isinstance(node, ast.ClassDef):
                        inner = [h for h in sub if isinstance(h, ast.stmt)]
                        for h in sub:
                            if isinstance(h, ast.ExceptHandler):
                                inner += h.body
                        self._index(inner, cls, parent, prefix)

    def _module_names(self) -> None:
        """Module-level imports and names bound once to a constant (``IMAGE_SIZE = 24``)."""
        counts: collections.Counter[str] = collections.Counter()
        for node in self.tree.body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            counts[n.id] += 1
        for node in self.tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imports[a.asname or a.name.split(".")[0]] = (
                        "tensorflow" if a.asname and a.name in self.scan.lookalikes else
                        a.name if a.asname else a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.imports[a.asname or a.name] = f"{node.module}.{a.name}"
            elif (isinstance(node, ast.Assign) and len(node.targets) == 1
                  and isinstance(node.targets[0], ast.Name) and counts[node.targets[0].id] == 1):
                value = fold(node.value, self.consts)
                if value is not NOCONST:
                    self.consts[node.targets[0].id] = value
                if _is_record_type(node.value):
                    self.record_types.add(node.targets[0].id)

    def names_in(self, node: ast.AST) -> frozenset[str]:
        """The names an expression reads (none for one of ten lines or more, which is shown as
        written), computed once per node."""
        hit = self._names.get(id(node))
        if hit is None:  # kept with the node, so that its id is not reused meanwhile
            first = getattr(node, "lineno", 0)
            names = frozenset(n.id for n in walk(node) if isinstance(n, ast.Name)) if (
                (getattr(node, "end_lineno", None) or first) - first < 10) else frozenset()
            hit = self._names[id(node)] = (node, names)
        return hit[1]

    def loads_in(self, node: ast.AST) -> tuple[str, ...]:
        """The names an expression reads, in no order, computed once per node."""
        hit = self._loads.get(id(node))
        if hit is None:  # kept with the node, so that its id is not reused meanwhile
            names = tuple(dict.fromkeys(n.id for n in walk(node) if isinstance(n, ast.Name)
                                        and isinstance(n.ctx, ast.Load)))
            hit = self._loads[id(node)] = (node, names)
        return hit[1]

    # -- which functions build pipelines ----------------------------------------------------
    def call_is_structural(self, call: ast.Call) -> bool:
        qual = self.scan.resolved.get(id(call), "")
        if qual:
            rule = rule_for(qual)
            if (rule is not None and rule.category in STRUCTURAL_CATEGORIES) or (
                    qual.startswith(("tensorflow.data.", "tensorflow.contrib.data"))):
                return True
        f = call.func
        return isinstance(f, ast.Attribute) and f.attr in STRUCTURAL_METHODS and (
            f.attr != "read" or bool(call.args))

    def _index_calls(self) -> set[str]:
        """One pass over every function's own calls: which functions build pipeline parts
        (directly, or through calls: the names returned), and where placeholders are fed."""
        direct: set[str] = set()
        calls: dict[str, set[str]] = {}
        for fi in [self.module] + self.functions:
            names = calls.setdefault(fi.name, set())
            for n in own_nodes(fi.node):
                if not isinstance(n, ast.Call):
                    continue
                f = n.func
                names.add(f.id if isinstance(f, ast.Name) else getattr(f, "attr", ""))
                if fi.name not in direct and self.call_is_structural(n):
                    direct.add(fi.name)
                if isinstance(f, ast.Attribute):
                    self._feeding(n, f, fi)
        direct.discard(MODULE)
        self.callees = calls
        found = set(direct)
        changed = True
        while changed:
            changed = False
            for name, callees in calls.items():
                if name not in found and callees & found:
                    found.add(name)
                    changed = True
        return found

    def is_structural(self, node: ast.AST) -> bool:
        """Does this statement (an ``if``) build pipeline parts, itself or through a call?"""
        key = id(node)
        if key not in self._structural_stmt:
            self._structural_stmt[key] = any(
                isinstance(sub, ast.Call) and (self.call_is_structural(sub) or (
                    sub.func.id if isinstance(sub.func, ast.Name) else getattr(
                        sub.func, "attr", "")) in self.structural) for sub in walk(node))
        return self._structural_stmt[key]

    def entries(self) -> list[FuncInfo]:
        """The functions worth running: those that build pipeline parts, and the module body
        when it does. A nested function runs inside its parent, unless the parent never calls
        it (``create_input_fn`` returning its ``input_fn``): then it is an entry of its own. A
        function defined again further down is not one (its name calls the later one; the
        module body, which binds definitions as it runs, follows it where it calls it)."""
        out = [fi for fi in self.functions if fi.name in self.structural and (
            fi.parent is None or fi.name not in self.callees.get(fi.parent.name, ())) and not (
            fi.parent is None and fi.cls is None and self.by_name.get(fi.name) is not fi)]
        if any(self.is_structural(s) for s in self.module.body
               if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))):
            out.append(self.module)
        return out

    # -- feeding ----------------------------------------------------------------------------
    def _feeding(self, node: ast.Call, f: ast.Attribute, fi: FuncInfo) -> None:
        """Note dequeued receivers, thread targets and ``.run(fetch, feed_dict=...)``."""
        seg = self.scan.source.segment
        if f.attr in ("dequeue", "dequeue_many", "dequeue_up_to"):
            self.dequeued.add(seg(f.value, 80))
        if f.attr == "Thread":
            for k in node.keywords:
                if k.arg == "target":
                    self.threads.add(getattr(k.value, "attr", getattr(k.value, "id", "")))
        if f.attr != "run" or not node.args:
            return
        feed: ast.AST | None = next((k.value for k in node.keywords if k.arg == "feed_dict"),
                                    node.args[1] if len(node.args) > 1 else None)
        if isinstance(feed, ast.Name):  # feed_dict = {...}; sess.run(op, feed_dict=feed_dict)
            feed = _bound_before(fi, feed.id, node.lineno)
        run = FeedRun(node, seg(node.args[0], 80), [], fi.qualname, info=fi)
        if isinstance(feed, ast.Dict):
            run.feeds = [(seg(k, 80), seg(v, 80), v.lineno) for k, v in zip(feed.keys,
                                                                              feed.values) if k]
        elif isinstance(feed, ast.DictComp):  # {ph: batch[name] for name, ph in phs.items()}
            gen = feed.generators[0]
            run.whole = [(_container(gen.iter, seg), seg(feed, 120), feed.lineno)]
        elif _is_call_of(feed, "dict") and len(feed.args) == 1 and _is_call_of(
                feed.args[0], "zip") and len(feed.args[0].args) == 2:  # dict(zip(phs, values))
            keys, values = feed.args[0].args
            run.whole = [(seg(keys, 80), seg(values, 80), values.lineno)]
        else:
            return
        self.feeds.append(run)
        owner = feed_owner(fi, self.by_name)
        for key in {run.fetch} | {k for k, _, _ in run.feeds + run.whole}:
            self.feeds_by_key.setdefault((key, owner), []).append(run)
            self.feeds_by_key.setdefault((key, "any"), []).append(run)


def feed_owner(fi: FuncInfo | None, by_name: dict[str, FuncInfo]) -> object:
    """Where code runs, for telling apart same-named copies: its class (a method), "module"
    (a module function that its name calls: the last definition of it), else "shadowed"."""
    if fi is None:
        return "module"
    if fi.cls is not None:
        return id(fi.cls.node)
    return "module" if fi.parent is not None or by_name.get(fi.name, fi) is fi else "shadowed"


def _bound_before(fi: FuncInfo, name: str, line: int) -> ast.AST | None:
    """What ``name`` was last assigned in ``fi`` before ``line`` (None: not assigned there)."""
    found = None
    for n in own_nodes(fi.node):
        if isinstance(n, ast.Assign) and n.lineno < line and any(
                isinstance(t, ast.Name) and t.id == name for t in n.targets) and (
                found is None or n.lineno > found.lineno):
            found = n
    return found.value if found is not None else None


def _is_call_of(node: ast.AST | None, name: str) -> TypeGuard[ast.Call]:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _container(node: ast.AST, seg: Callable[[ast.AST, int], str]) -> str:
    """The placeholders a dict comprehension walks, as written: ``phs`` of ``phs.items()``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("items", "keys", "values") and not node.args:
        node = node.func.value
    elif _is_call_of(node, "zip") and node.args:
        node = node.args[0]
    return seg(node, 80)


def _is_record_type(value: ast.AST) -> bool:
    """``collections.namedtuple("Examples", ...)``: a plain record class made in this file."""
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in (
        "namedtuple", "NamedTuple")


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function (or module) body, not those of the functions and classes defined
    in it: every node of a script is visited once over all its functions."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        sub = stack.pop()
        yield sub
        if not isinstance(sub, _SCOPES):
            stack.extend(ast.iter_child_nodes(sub))
        else:  # decorators and defaults run where the def is
            stack.extend(getattr(sub, "decorator_list", []))


def tensors_in(val: Val | None, depth: int = 0) -> list[Tensor]:
    """The per-example tensors inside a value (lists, objects, enqueued values)."""
    if isinstance(val, Tensor):
        return [val]
    if depth > 4:
        return []
    if isinstance(val, ListV):
        return [t for v in val.items for t in tensors_in(v, depth + 1)]
    if isinstance(val, DictV):
        return [t for v in list(val.items.values()) for t in tensors_in(v, depth + 1)]
    if isinstance(val, ObjV):
        return [t for v in list(val.attrs.values()) for t in tensors_in(v, depth + 1)]
    return []


#: Which stream a tensor computed from several belongs to: a queue's, a reader's or a producer's
#: before an entry parameter's, before a graph constant's.
_STREAM_RANK = {"float": 2, "param": 1}


def primary(tensors: list[Tensor]) -> Stream:
    """The stream of a value computed from these tensors (see :data:`_STREAM_RANK`)."""
    return min(tensors, key=lambda t: _STREAM_RANK.get(t.stream.kind, 0)).stream


def merge(alternatives: Sequence[Val | None]) -> Val:
    """One value for several alternatives (both branches of an ``if``)."""
    vals = [v for v in alternatives if v is not None]
    if not vals:
        return Sym("None", None)
    tensors = [t for v in vals for t in tensors_in(v)]
    first = vals[0]
    if all(v is first for v in vals):
        return first
    datasets = [v for v in vals if isinstance(v, DatasetV)]
    if len(datasets) == len(vals):  # one branch added (guarded) ops: keep them
        longest = max(datasets, key=lambda v: len(v.ops))
        if all(longest.ops[:len(v.ops)] == v.ops for v in datasets):
            return longest
    dicts = [v for v in vals if isinstance(v, DictV)]
    if len(dicts) == len(vals):  # both branches' keys, values merged per key
        keys = list(dict.fromkeys(k for v in dicts for k in v.items))
        return DictV({k: merge([v.items[k] for v in dicts if k in v.items]) for k in keys},
                     first.text)
    lists = [v for v in vals if isinstance(v, ListV)]
    if len(lists) == len(vals) and len({len(v.items) for v in lists}) == 1:
        return ListV([merge([v.items[i] for v in lists]) for i in range(len(lists[0].items))],
                     first.text, lists[0].loop or next((v.loop for v in lists if v.loop), None))
    if tensors and (isinstance(first, Tensor) or not isinstance(first, (ListV, ObjV))):
        return Tensor(primary(tensors), frozenset[int]().union(*(t.deps for t in tensors)),
                      first.text)
    syms = [v for v in vals if isinstance(v, Sym)]
    if len(syms) == len(vals):
        quals = [v.qual for v in syms if v.qual]
        alts = tuple(dict.fromkeys(q for v in syms for q in (v.alts or (v.qual,)) if q))
        return Sym(first.text, qual=quals[0] if quals else "", alts=alts,
                   param=next((v.param for v in syms if v.param), ""),
                   listish=all(v.listish for v in syms))
    return first


_BINOPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Div: lambda a, b: a / b, ast.Mod: lambda a, b: a % b}


def fold(node: ast.AST, consts: dict[str, object]) -> object:
    """The value of a small constant expression (numbers, strings, names in ``consts``, + - * /
    // %, unary minus, tuples/lists of those), or NOCONST."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id, NOCONST)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        v = fold(node.operand, consts)
        if v is NOCONST:
            return NOCONST
        return (not v) if isinstance(node.op, ast.Not) else (
            -v if isinstance(v, (int, float)) else NOCONST)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = fold(node.left, consts), fold(node.right, consts)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(
                a, bool) and abs(a) < 1e12 and abs(b) < 1e12:
            try:
                return _BINOPS[type(node.op)](a, b)
            except (ZeroDivisionError, OverflowError):
                return NOCONST
    return NOCONST


#: Value classes :func:`clone` copies (their fields copied in turn); everything else (AST
#: nodes, FuncInfo, ClassInfo, frames, callables, strings) is shared.
_CLONED = (Sym, Stream, Tensor, ListV, DictV, ObjV, QueueV, EnqueueV, ReaderV, ProviderV,
           DatasetV, IteratorV, PlaceholderV, FuncV, ClassV, StepRec, End)


def clone(obj: object, memo: dict[int, object]) -> object:
    """A copy of the values reachable from ``obj`` (one copy per object, through ``memo``: id
    of the original -> copy), so that a symbolic run can go on with them while the originals
    stay as they were. AST nodes, function and class infos and frames are shared: nothing
    changes them once they are made."""
    key = id(obj)
    if key in memo:
        return memo[key]
    if isinstance(obj, _CLONED):
        new = object.__new__(type(obj))
        memo[key] = new
        new.__dict__.update({k: clone(v, memo) for k, v in obj.__dict__.items()})
        return new
    if isinstance(obj, list):
        out: list[object] = []
        memo[key] = out
        out.extend(clone(v, memo) for v in obj)
        return out
    if isinstance(obj, dict):
        d: dict[object, object] = {}
        memo[key] = d
        d.update((k, clone(v, memo)) for k, v in obj.items())
        return d
    if isinstance(obj, tuple):
        items = tuple(clone(v, memo) for v in obj)
        return items if any(a is not b for a, b in zip(items, obj)) else obj
    if isinstance(obj, set):
        return {clone(v, memo) for v in obj}
    return obj
