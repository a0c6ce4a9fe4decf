"""Find the legacy constructs of :mod:`.rules` in a script's syntax tree, without running it.

Names are resolved, not matched as text:

- imports bind names to qualified names (``import tensorflow.compat.v1 as tf`` makes ``tf`` mean
  ``tensorflow.compat.v1``; ``from tensorflow.python.client import timeline``; star imports);
- an assignment of a resolved name is an alias (``jit_scope = tf.contrib...experimental_jit_scope``
  makes ``jit_scope()`` a jit scope, reported with ``via="jit_scope"``);
- an assignment of a call to a recognised constructor binds an object of a kind
  (``reader = tf.WholeFileReader()``), so ``reader.read`` matches and a ``reader`` bound to
  anything else does not;
- in a class, ``self.x = <recognised call>`` in any method makes ``self.x`` an object of that
  kind in all its methods (``self.reader.read``);
- any other binding (assignment, parameter, ``def``, loop target, ...) hides the name;
- a script that uses ``tf.`` but never binds ``tf`` (a snippet) is read as if it began with
  ``import tensorflow as tf``, and the result says so.

Statements are followed in source order within a scope (branches one after another, loop bodies
once). Function bodies are read after the code around them, as Python looks up their free names
when they run.

Every step is linear in the script's size: source text is cut from precomputed line offsets (never
by re-splitting the file per node) and shown at most :data:`SEGMENT_LIMIT` characters long.
"""
from __future__ import annotations

import ast
import collections
import dataclasses
from typing import Iterator

from compare.migration.rules import (
    ITERATOR_METHODS,
    RULES_BY_ID,
    Rule,
    applicable_pitfalls,
    canonical,
    method_rule,
    rule_for,
)

#: Longest source excerpt a finding shows (longer ones end in "...").
SEGMENT_LIMIT = 120


@dataclasses.dataclass(frozen=True)
class Ref:
    """A name that means a module or module attribute: ``qual`` resolved, ``written`` as spelled;
    ``via`` is the variable it came through when it was bound by assignment."""

    qual: str
    written: str
    via: str | None = None


@dataclasses.dataclass(frozen=True)
class Obj:
    """A name bound to what a recognised call returned: ``kind`` is the rule's ``returns``."""

    kind: str
    qual: str
    written: str


@dataclasses.dataclass(frozen=True)
class SelfObj:
    """``self`` in a method: the kinds of the attributes the class's methods assign."""

    attrs: tuple[tuple[str, Obj], ...]

    def get(self, attr: str) -> Obj | None:
        return dict(self.attrs).get(attr)


@dataclasses.dataclass
class Finding:
    """One use of a legacy construct. ``col`` is 1-based, in characters; ``construct`` is the
    dotted name as the script spells it (through any alias); ``qualified_name`` is canonical."""

    line: int
    col: int
    rule: Rule
    construct: str
    qualified_name: str
    via: str | None
    source: str
    upgrade: str
    arguments: dict[str, str] = dataclasses.field(default_factory=dict)
    #: Ids of the rule's pitfalls that concern this script (see rules.applicable_pitfalls).
    pitfalls: tuple[str, ...] = ()
    #: The call this construct is the callee of, if any (for the plan; not reported).
    call: ast.Call | None = dataclasses.field(default=None, repr=False, compare=False)
    #: In a notebook: the cell (``line`` is then the line in that cell).
    cell: int | None = None

    @property
    def short(self) -> str:
        """The construct without its call arguments (``tf.RunOptions``, ``global_jit_level``)."""
        if self.rule.id == "global_jit_level":
            return "global_jit_level"
        return self.construct.split("(")[0]


class SourceText:
    """The script's text with its line offsets, so any node's source is one slice away."""

    def __init__(self, text: str):
        self.text = text
        # Line breaks as Python counts them (str.splitlines also splits at form feeds, \x1c, ...).
        self.norm = text.replace("\r\n", "\n").replace("\r", "\n")
        self.lines = self.norm.split("\n")
        self.starts = [0] * (len(self.lines) + 1)
        for i, ln in enumerate(self.lines):
            self.starts[i + 1] = self.starts[i] + len(ln) + 1
        self._ascii: dict[int, bool] = {}
        #: (node, segment) by (node id, limit).
        self._segments: dict[tuple[int, int], tuple[ast.AST, str]] = {}

    def line(self, lineno: int) -> str:
        return self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""

    def char_col(self, lineno: int, byte_col: int) -> int:
        """ast's UTF-8 byte column as a character column."""
        ln = self.line(lineno)
        if lineno not in self._ascii:
            self._ascii[lineno] = ln.isascii()
        if self._ascii[lineno]:
            return byte_col
        return len(ln.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def segment(self, node: ast.AST, limit: int = SEGMENT_LIMIT) -> str:
        """``node`` as written, on one line (whitespace collapsed; a multi-line expression, which
        may hold comments, is unparsed instead), cut to ``limit`` characters with "...".
        Computed once per node and limit (the symbolic run asks again for every world)."""
        key = (id(node), limit)
        hit = self._segments.get(key)
        if hit is None:  # the node is kept with its text, so its id is never reused meanwhile
            hit = self._segments[key] = (node, self._segment(node, limit))
        return hit[1]

    def _segment(self, node: ast.AST, limit: int) -> str:
        line: int = getattr(node, "lineno", 0)
        end_line: int | None = getattr(node, "end_lineno", None)
        if end_line is None or not 0 < line <= end_line <= len(self.lines):
            return cut(" ".join(unparse(node).split()), limit)
        start = self.starts[line - 1] + self.char_col(line, getattr(node, "col_offset", 0))
        end = self.starts[end_line - 1] + self.char_col(end_line, getattr(node, "end_col_offset",
                                                                            0))
        if end - start > 8 * limit:  # long: a prefix is all we show, whatever it holds
            return cut(" ".join(self.norm[start:start + 2 * limit].split()), limit, True)
        seg = self.norm[start:end]
        if "\n" in seg:  # may hold comments: unparse, or keep the text when it cannot be
            seg = unparse(node, seg)
        return cut(" ".join(seg.split()), limit)


def unparse(node: ast.AST, default: str = "...") -> str:
    """ast.unparse, or ``default`` where it fails (f-strings with backslashes before 3.12)."""
    try:
        return ast.unparse(node)
    except (ValueError, RecursionError):
        return default


def cut(text: str, limit: int, always: bool = False) -> str:
    """``text`` cut to ``limit`` characters ending in "..." (``always``: it was cut before)."""
    if len(text) <= limit and not always:
        return text
    return text[:limit - 3].rstrip() + "..."


@dataclasses.dataclass
class ScanResult:
    """The findings in source order; every TensorFlow function the script calls (canonical
    names); what each call's callee resolved to (``resolved[id(call)]``: canonical, any module);
    the source text; whether ``tf`` was assumed to be TensorFlow."""

    findings: list[Finding]
    called: set[str]
    source: SourceText
    resolved: dict[int, str] = dataclasses.field(default_factory=dict)
    assumed_tf: bool = False
    statements: int = 0
    #: Modules the script imports as ``tf`` that are not TensorFlow but were read as it (see
    #: :func:`tf_lookalikes`).
    lookalikes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return self.source.text

    def segment(self, node: ast.AST | None, default: str, limit: int = 60) -> str:
        """``node``'s source as written (whitespace collapsed), or ``default`` if absent/long."""
        if node is None:
            return default
        seg = self.source.segment(node, 10 * limit)
        return seg if len(seg) <= limit else default


class _Scope:
    """Names bound in one function, class, lambda, comprehension or the module."""

    def __init__(self, parent: _Scope | None, kind: str):
        self.parent, self.kind = parent, kind
        self.names: dict[str, Ref | Obj | SelfObj | None] = {}
        self.star: list[str] = []

    def lookup(self, name: str) -> Ref | Obj | SelfObj | None:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.names and (scope is self or scope.kind != "class"):
                return scope.names[name]
            scope = scope.parent
        scope = self
        while scope is not None:  # not bound anywhere: maybe a star import provides it
            for module in scope.star:
                if rule_for(f"{module}.{name}"):
                    return Ref(f"{module}.{name}", name)
            scope = scope.parent
        return None


def _chain(node: ast.expr) -> tuple[ast.expr, list[str]]:
    """``a.b.c`` -> (``a``, ["b", "c"])."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    attrs.reverse()
    return node, attrs


def _upgrade(rule: Rule, qual: str, via: str | None) -> str:
    """How tf_upgrade_v2 treats this use (a key of rules.UPGRADE). It matches names as spelled,
    so a use through an alias variable is invisible to it."""
    if via is not None:
        return "unchanged"
    if qual.startswith("tensorflow.contrib."):
        return "contrib_error"
    if ".compat.v1." in f".{qual}.":
        return "already_compat_v1"
    return "unchanged" if rule.upgrade == "contrib_error" else rule.upgrade


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` (itself included), in no particular order: :func:`ast.walk`
    without its per-node field iteration, which is most of its time."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for field in n._fields:
            v = getattr(n, field, None)
            if isinstance(v, list):
                stack.extend(x for x in v if isinstance(x, ast.AST))
            elif isinstance(v, ast.AST):
                stack.append(v)


@dataclasses.dataclass
class Census:
    """What one walk over the whole tree tells: whether the script uses and binds the name
    ``tf``, its statements, the modules it imports as ``tf`` that are not TensorFlow, and its
    functions by name."""

    used_tf: bool = False
    bound_tf: bool = False
    statements: int = 0
    tf_modules: set[str] = dataclasses.field(default_factory=set)
    defs: dict[str, list[ast.AST]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list))


def census(tree: ast.Module) -> Census:
    """:class:`Census` of ``tree``, in one pass."""
    c = Census()
    for node in walk(tree):
        if isinstance(node, ast.stmt):
            c.statements += 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                c.defs[node.name].append(node)
                c.bound_tf = c.bound_tf or node.name == "tf"
            elif isinstance(node, ast.ClassDef):
                c.bound_tf = c.bound_tf or node.name == "tf"
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    if (a.asname or a.name.split(".")[0]) == "tf":
                        c.bound_tf = True
                        if isinstance(node, ast.Import) and a.asname and \
                                a.name.split(".")[0] != "tensorflow":
                            c.tf_modules.add(a.name)
        elif isinstance(node, ast.Name) and node.id == "tf":
            if isinstance(node.ctx, ast.Load):
                c.used_tf = True
            else:
                c.bound_tf = True
        elif isinstance(node, ast.arg) and node.arg == "tf":
            c.bound_tf = True
    return c


def binds_tf(tree: ast.Module) -> tuple[bool, bool, int]:
    """(the script uses the name ``tf``, the script binds ``tf`` somewhere, its statements)."""
    c = census(tree)
    return c.used_tf, c.bound_tf, c.statements


def _runs_feeding(fn: ast.AST) -> bool:
    """Does this function run a feed_dict or enqueue (a feeder thread's body)?"""
    for node in walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("enqueue", "enqueue_many"):
                return True
            if node.func.attr == "run" and any(k.arg == "feed_dict" for k in node.keywords):
                return True
    return False


class _Scanner:
    """One pass over a module: statements in order, function bodies after (see module doc)."""

    def __init__(self, source: SourceText, lookalikes: tuple[str, ...] = ()):
        self.src = source
        self.lookalikes = lookalikes
        self.findings: list[Finding] = []
        self.called: set[str] = set()
        self.resolved: dict[int, str] = {}
        self.consumed: set[int] = set()
        self.threads: list[tuple[ast.Call, ast.expr]] = []
        self.defs: dict[str, list[ast.AST]] | None = None  # the script's functions by name
        self.pending: collections.deque[tuple[ast.FunctionDef | ast.AsyncFunctionDef, _Scope,
                                              SelfObj | None]] = \
            collections.deque()

    # -- findings ---------------------------------------------------------------------------
    def _segment(self, node: ast.AST, limit: int = SEGMENT_LIMIT) -> str:
        return self.src.segment(node, limit)

    def _add(self, node: ast.AST, rule: Rule, construct: str, qual: str,
             via: str | None) -> Finding:
        lineno: int = getattr(node, "lineno", 0)
        line = self.src.line(lineno)
        f = Finding(lineno, self.src.char_col(lineno, getattr(node, "col_offset", 0)) + 1, rule,
                    construct, canonical(qual), via, line.strip(), _upgrade(rule, qual, via))
        self.findings.append(f)
        return f

    def _arguments(self, call: ast.Call, params: tuple[str, ...]) -> dict[str, str]:
        out: dict[str, str] = {}
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Starred):
                out["*args"] = self._segment(a.value)
            else:
                out[params[i] if i < len(params) else f"arg{i}"] = self._segment(a)
        for kw in call.keywords:
            out[kw.arg or "**kwargs"] = self._segment(kw.value)
        return out

    # -- resolution (pure: no findings) -----------------------------------------------------
    def resolve(self, node: ast.AST | None, scope: _Scope) -> Ref | Obj | SelfObj | None:
        if isinstance(node, ast.Name):
            return scope.lookup(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, scope)
            if isinstance(base, Ref):
                return Ref(f"{base.qual}.{node.attr}", f"{base.written}.{node.attr}", base.via)
            if isinstance(base, SelfObj):
                return base.get(node.attr)
            return None
        if isinstance(node, ast.Call):
            base = self.resolve(node.func, scope)
            if isinstance(base, Ref):
                rule = rule_for(base.qual)
                if rule is not None and rule.returns:
                    return Obj(rule.returns, canonical(base.qual), base.written)
            return None
        if isinstance(node, ast.NamedExpr):
            return self.resolve(node.value, scope)
        return None

    # -- expressions ------------------------------------------------------------------------
    def expr(self, node: ast.AST | None, scope: _Scope) -> None:
        if node is None:
            return
        if isinstance(node, ast.Lambda):
            self._defaults(node.args, scope)
            inner = _Scope(scope, "function")
            self._bind_params(node.args, inner)
            self.expr(node.body, inner)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = _Scope(scope, "comprehension")
            for i, gen in enumerate(node.generators):
                self.expr(gen.iter, scope if i == 0 else inner)
                self._bind_target(gen.target, None, inner)
                for cond in gen.ifs:
                    self.expr(cond, inner)
            for part in ((node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)):
                self.expr(part, inner)
        elif isinstance(node, ast.NamedExpr):
            self.expr(node.value, scope)
            self._bind_target(node.target, node.value, scope)
        elif isinstance(node, ast.Call):
            self.call(node, scope)
        elif isinstance(node, (ast.Attribute, ast.Name)):
            self.reference(node, scope)
        else:
            for child in ast.iter_child_nodes(node):
                self.expr(child, scope)

    def reference(self, node: ast.Attribute | ast.Name, scope: _Scope) -> Finding | None:
        """A maximal dotted chain in load context: report the longest prefix that is a rule,
        or a method of an object we know; scan what the chain hangs off otherwise."""
        root, attrs = _chain(node)
        if not isinstance(root, ast.Name):
            self.expr(root, scope)
        if id(node) in self.consumed:
            return None
        base = self.resolve(root, scope)
        spelled = [root.id if isinstance(root, ast.Name) else self._segment(root, 60)]
        while isinstance(base, SelfObj) and attrs:
            base = base.get(attrs[0])
            spelled.append(attrs.pop(0))
        if isinstance(base, Ref):
            for k in range(len(attrs), -1, -1):
                qual = ".".join([base.qual, *attrs[:k]])
                rule = rule_for(qual)
                if rule is not None:
                    written = ".".join([base.written, *attrs[:k]])
                    return self._add(node, rule, written, qual, base.via)
        elif isinstance(base, Obj) and attrs:
            rule = method_rule(base.kind, attrs[0])
            if rule is not None:
                return self._add(node, rule, ".".join(spelled + attrs[:1]),
                                 f"{base.qual}.{attrs[0]}", None)
        return None

    def _special_call(self, node: ast.Call, base: Ref | Obj | SelfObj | None,
                      kw: dict[str, ast.keyword], scope: _Scope) -> Finding | None:
        """Calls whose finding depends on their arguments: a jit level, a traced or fed run, an
        iterator made from any dataset, a feeder thread (kept for later)."""
        ref = base if isinstance(base, Ref) else None
        rule = rule_for(ref.qual) if ref is not None else None
        func = node.func
        if ref is not None and rule is not None and rule.id == "config_proto" and ref.qual.endswith(
                "OptimizerOptions") and "global_jit_level" in kw:
            value = kw["global_jit_level"].value
            self.consumed.update((id(func), id(value)))
            return self._add(func, RULES_BY_ID["global_jit_level"],
                             f"{ref.written}(global_jit_level={self._segment(value)})",
                             ref.qual + ".global_jit_level", ref.via)
        if ref is not None and rule is not None and rule.id == "run_options" and \
                "trace_level" in kw:
            value = kw["trace_level"].value
            self.consumed.update((id(func), id(value)))
            return self._add(func, rule, f"{ref.written}(trace_level={self._segment(value)})",
                             ref.qual, ref.via)
        if self._is_traced_run(node, scope, kw):
            return self._add(func, RULES_BY_ID["traced_run"],
                             self._segment(func) + "(" + ", ".join(
                                 f"{k}=" for k in ("options", "run_metadata") if k in kw) + ")",
                             "tensorflow.Session.run", None)
        if (isinstance(base, Ref) and canonical(base.qual) == "tensorflow.function"
                and "experimental_compile" in kw):
            self._add(kw["experimental_compile"], RULES_BY_ID["experimental_compile"],
                      f"{base.written}(experimental_compile=...)", base.qual, base.via)
        if isinstance(base, Ref) and canonical(base.qual) == "threading.Thread" and "target" in kw:
            self.threads.append((node, kw["target"].value))
        if isinstance(func, ast.Attribute) and not isinstance(base, Ref):
            self._method_call(node, func, kw, scope)
        return None

    def _method_call(self, node: ast.Call, func: ast.Attribute, kw: dict[str, ast.keyword],
                     scope: _Scope) -> None:
        """``anything.make_one_shot_iterator()`` and ``x.run(..., feed_dict=...)``."""
        if func.attr in ITERATOR_METHODS:
            self._add(func, RULES_BY_ID["make_iterator"],
                      f"{self._segment(func.value, 60)}.{func.attr}",
                      f"tensorflow.data.Dataset.{func.attr}", None)
        elif func.attr in ("read", "read_up_to") and node.args and not isinstance(
                self.resolve(func.value, scope), Obj):
            queue = self.resolve(node.args[0], scope)
            if isinstance(queue, Obj) and queue.kind == "queue":  # a reader made elsewhere
                self._add(func, RULES_BY_ID["reader.read"],
                          f"{self._segment(func.value, 60)}.{func.attr}",
                          f"tensorflow.ReaderBase.{func.attr}", None)
        elif func.attr in ("run", "eval") and "feed_dict" in kw:
            k = kw["feed_dict"]
            self._add(k, RULES_BY_ID["feed_dict"], f"{self._segment(func, 60)}(..., feed_dict=...)",
                      "tensorflow.Session.run.feed_dict", None)
        elif (func.attr == "run" and len(node.args) >= 2 and isinstance(node.args[1], ast.Dict)
              and isinstance(self.resolve(func.value, scope), Obj)):
            self._add(node.args[1], RULES_BY_ID["feed_dict"],
                      f"{self._segment(func, 60)}(..., {{...}})",
                      "tensorflow.Session.run.feed_dict", None)

    def call(self, node: ast.Call, scope: _Scope) -> None:
        base = self.resolve(node.func, scope)
        kw = {k.arg: k for k in node.keywords if k.arg}
        if isinstance(base, Ref):
            self.resolved[id(node)] = canonical(base.qual)
            if base.qual.split(".")[0] == "tensorflow":
                self.called.add(canonical(base.qual))
        finding = self._special_call(node, base, kw, scope)
        if isinstance(node.func, (ast.Attribute, ast.Name)):
            found = self.reference(node.func, scope)
            finding = finding or found
        else:
            self.expr(node.func, scope)
        if finding is not None and finding.call is None:
            finding.call = node
            finding.arguments = self._arguments(node, finding.rule.params)
        for a in node.args:
            self.expr(a, scope)
        for k in node.keywords:
            self.expr(k.value, scope)

    def _is_traced_run(self, node: ast.Call, scope: _Scope, kw: dict[str, ast.keyword]) -> bool:
        """``sess.run(..., options=..., run_metadata=...)`` on a session or with our objects."""
        if not (isinstance(node.func, ast.Attribute) and node.func.attr == "run"):
            return False
        if "options" not in kw and "run_metadata" not in kw:
            return False
        recv = self.resolve(node.func.value, scope)
        if isinstance(recv, Obj) and recv.kind == "session":
            return True
        for k in ("options", "run_metadata"):
            v = self.resolve(kw[k].value, scope) if k in kw else None
            if isinstance(v, Obj) and v.kind in ("run_options", "run_metadata"):
                return True
        return False

    # -- bindings ---------------------------------------------------------------------------
    def _bind_target(self, target: ast.AST, value: ast.AST | None, scope: _Scope) -> None:
        """Bind the names in ``target`` to what ``value`` resolves to (None: unknown). A name
        assigned a plain dotted name is an alias: later uses report ``via`` that name."""
        if isinstance(target, ast.Name):
            binding = self.resolve(value, scope) if value is not None else None
            if isinstance(binding, Ref) and isinstance(value, (ast.Name, ast.Attribute)):
                binding = dataclasses.replace(binding, via=target.id)
            scope.names[target.id] = binding
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            pairwise = (values is not None and len(values) == len(target.elts)
                        and not any(isinstance(e, ast.Starred) for e in target.elts + values))
            for i, elt in enumerate(target.elts):
                self._bind_target(elt, values[i] if values is not None and pairwise else None,
                                  scope)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, None, scope)
        else:  # attribute or subscript target: scan what it hangs off
            self.expr(getattr(target, "value", None), scope)
            self.expr(getattr(target, "slice", None), scope)

    def _bind_params(self, args: ast.arguments, scope: _Scope,
                     self_obj: SelfObj | None = None) -> None:
        for a in args.posonlyargs + args.args + args.kwonlyargs:
            scope.names[a.arg] = None
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                scope.names[extra.arg] = None
        first = (args.posonlyargs + args.args)[:1]
        if self_obj is not None and first:
            scope.names[first[0].arg] = self_obj

    def _defaults(self, args: ast.arguments, scope: _Scope) -> None:
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.expr(d, scope)

    def _jit_level_store(self, target: ast.AST, value: ast.AST, scope: _Scope) -> None:
        """``config....global_jit_level = X`` on a ConfigProto we saw, or with X an OptimizerOptions
        level: one finding, which also covers X."""
        if not (isinstance(target, ast.Attribute) and target.attr == "global_jit_level"):
            return
        root, _ = _chain(target)
        owner = self.resolve(root, scope)
        level = self.resolve(value, scope)
        known_owner = isinstance(owner, Obj) and owner.kind == "config"
        known_level = isinstance(level, Ref) and canonical(level.qual).startswith(
            "tensorflow.OptimizerOptions.")
        if known_owner or known_level:
            self.consumed.add(id(value))
            self._add(target, RULES_BY_ID["global_jit_level"],
                      f"global_jit_level = {self._segment(value)}",
                      "tensorflow.OptimizerOptions.global_jit_level", None)

    def _class_attrs(self, node: ast.ClassDef, scope: _Scope) -> SelfObj:
        """The kinds of ``self.x`` that the class's methods assign from recognised calls
        (resolved in the scope around the class; an attribute assigned two kinds is dropped)."""
        kinds: dict[str, Obj | None] = {}
        for fn in node.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.args.args:
                continue
            me = fn.args.args[0].arg
            for sub in walk(fn):
                if not isinstance(sub, ast.Assign):
                    continue
                for t in sub.targets:
                    if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                            and t.value.id == me):
                        obj = self.resolve(sub.value, scope)
                        obj = obj if isinstance(obj, Obj) else None
                        kinds[t.attr] = obj if kinds.get(t.attr, obj) == obj else None
        return SelfObj(tuple((k, v) for k, v in kinds.items() if v is not None))

    # -- statements -------------------------------------------------------------------------
    def block(self, body: list[ast.stmt], scope: _Scope, self_obj: SelfObj | None = None) -> None:
        for stmt in body:
            self.stmt(stmt, scope, self_obj)

    def _imports(self, node: ast.Import | ast.ImportFrom, scope: _Scope) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in self.lookalikes:
                    scope.names[a.asname] = Ref("tensorflow", a.asname)
                elif a.asname:
                    scope.names[a.asname] = Ref(a.name, a.asname)
                else:
                    first = a.name.split(".")[0]
                    scope.names[first] = Ref(first, first)
            return
        for a in node.names:
            if a.name == "*":
                if not node.level and node.module:
                    scope.star.append(node.module)
                continue
            local = a.asname or a.name
            scope.names[local] = (Ref(f"{node.module}.{a.name}", local)
                                  if not node.level and node.module else None)

    def _assign(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign, scope: _Scope) -> None:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                self._jit_level_store(t, node.value, scope)
            self.expr(node.value, scope)
            for t in node.targets:
                self._bind_target(t, node.value, scope)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self._jit_level_store(node.target, node.value, scope)
                self.expr(node.value, scope)
            self._bind_target(node.target, node.value, scope)
        else:  # AugAssign
            self.expr(node.value, scope)
            self._bind_target(node.target, None, scope)

    def stmt(self, node: ast.stmt, scope: _Scope, self_obj: SelfObj | None = None) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._imports(node, scope)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                self.expr(d, scope)
            self._defaults(node.args, scope)
            scope.names[node.name] = None
            self.pending.append((node, scope, self_obj))
        elif isinstance(node, ast.ClassDef):
            for e in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                self.expr(e, scope)
            self.block(node.body, _Scope(scope, "class"), self._class_attrs(node, scope))
            scope.names[node.name] = None
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self._assign(node, scope)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.expr(item.context_expr, scope)
                if item.optional_vars is not None:
                    self._bind_target(item.optional_vars, item.context_expr, scope)
            self.block(node.body, scope)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.expr(node.iter, scope)
            self._bind_target(node.target, None, scope)
            self.block(node.body, scope)
            self.block(node.orelse, scope)
        elif isinstance(node, ast.Delete):
            for t in node.targets:
                self._bind_target(t, None, scope)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            pass
        elif isinstance(node, ast.Match):
            self._match(node, scope)
        else:  # If, While, Try, Expr, Return, Raise, Assert, ...: expressions, then sub-blocks
            self._generic(node, scope)

    def _match(self, node: ast.Match, scope: _Scope) -> None:
        self.expr(node.subject, scope)
        for case in node.cases:
            for sub in ast.walk(case.pattern):
                for name in (getattr(sub, "name", None), getattr(sub, "rest", None)):
                    if isinstance(name, str):
                        scope.names[name] = None
                if isinstance(sub, ast.MatchValue):
                    self.expr(sub.value, scope)
            self.expr(case.guard, scope)
            self.block(case.body, scope)

    def _generic(self, node: ast.stmt, scope: _Scope) -> None:
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.expr):
                self.expr(value, scope)
            elif isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self.block(value, scope)
            elif field == "handlers":
                for h in value:
                    self.expr(h.type, scope)
                    if h.name:
                        scope.names[h.name] = None
                    self.block(h.body, scope)

    def _feeder_threads(self, tree: ast.Module) -> None:
        """``threading.Thread(target=f)`` where ``f`` (by name, in this file) runs a feed_dict or
        an enqueue: a Python feeder thread."""
        if not self.threads:
            return
        defs = self.defs if self.defs is not None else census(tree).defs
        for call, target in self.threads:
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if any(_runs_feeding(fn) for fn in defs.get(name, ())):
                f = self._add(call.func, RULES_BY_ID["feeder_thread"],
                              f"{self._segment(call.func, 60)}(target={self._segment(target, 60)})",
                              "threading.Thread", None)
                f.call = call
                f.arguments = self._arguments(call, ("group", "target", "name", "args"))

    def run(self, tree: ast.Module, assume_tf: bool) -> ScanResult:
        module = _Scope(None, "module")
        if assume_tf:
            module.names["tf"] = Ref("tensorflow", "tf")
        self.block(tree.body, module)
        while self.pending:  # function bodies, after the code that encloses them
            fn, parent, self_obj = self.pending.popleft()
            inner = _Scope(parent, "function")
            self._bind_params(fn.args, inner, self_obj)
            self.block(fn.body, inner)
        self._feeder_threads(tree)
        self.findings.sort(key=lambda f: (f.line, f.col))
        apply = applicable_pitfalls({f.rule.category for f in self.findings}, self.called)
        for f in self.findings:
            f.pitfalls = tuple(p for p in f.rule.pitfall_ids() if p in apply)
        return ScanResult(self.findings, self.called, self.src, self.resolved, assume_tf,
                          lookalikes=self.lookalikes)


def tf_lookalikes(tree: ast.Module, modules: set[str] | None = None) -> tuple[str, ...]:
    """Modules imported as ``tf`` that are not TensorFlow (``import sugartensor as tf``) when
    the script calls TF1 pipeline functions through them (``tf.train.batch``): such a library
    re-exports TensorFlow, so they are read as TensorFlow's (the report says so). ``modules``:
    those imported as ``tf`` (:class:`Census`), when known."""
    if modules is None:
        modules = census(tree).tf_modules
    if not modules:
        return ()
    for node in walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            root, attrs = _chain(node)
            if isinstance(root, ast.Name) and root.id == "tf" and any(
                    rule_for(".".join(["tensorflow", *attrs[:k]])) for k in range(1, len(attrs) + 1)):
                return tuple(sorted(modules))
    return ()


def scan(tree: ast.Module, text: str) -> ScanResult:
    """All legacy constructs used in ``tree`` (parsed from ``text``), in source order. A script
    that uses ``tf`` without ever binding it is read with ``tf`` meaning TensorFlow; one that
    imports a TensorFlow look-alike as ``tf`` with it meaning TensorFlow (:func:`tf_lookalikes`)."""
    c = census(tree)
    scanner = _Scanner(SourceText(text), tf_lookalikes(tree, c.tf_modules))
    scanner.defs = c.defs
    result = scanner.run(tree, c.used_tf and not c.bound_tf)
    result.statements = c.statements
    return result
