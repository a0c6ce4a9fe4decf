"""What of the code after a pipeline's batch call still prepares the batch (the port's per-batch
map) and what consumes it (the model, its training, the session loop: not the pipeline's).

The lifter records every statement the pipeline function runs after its batch call. Walking them
in order, a statement that reads the batch (or what earlier per-batch statements made of it) is
per-batch code when everything it calls only transforms tensors: TensorFlow's array, image,
math and string ops, methods of the tensors themselves, Python builtins, and the script's own
helpers that call nothing else (BEGAN's resize and transpose, a one-hot of the labels). The first
one that calls anything else — a layer, a variable, a loss, an optimizer, a Saver, a session, a
function of another module (``network.inference``) — ends the per-batch code. Statements that do
not read the batch are kept only when per-batch code needs what they bind (``indices =
tf.range(batch_size)`` before a ``sparse_to_dense``).

The port's elements are what the function returns when it returns the batch; otherwise the
batch names the rest of the function goes on to read.
"""
from __future__ import annotations

import ast
import builtins

from compare.migration import tfnames
from compare.migration.astutil import loads, mutated, stored_names
from compare.migration.lifted import Item, Lifted
from compare.migration.rules import canonical
from compare.migration.scan import walk
from compare.migration.values import ClassInfo, FuncInfo, Module

_BUILTINS = frozenset(dir(builtins))
#: Modules whose functions only compute (sizes, shapes, ranges) in per-batch code.
_PLAIN_MODULES = frozenset({"six", "math", "numpy", "itertools", "functools", "operator",
                            "collections", "builtins"})
#: How deep the script's helpers are followed to decide that they only transform tensors.
_HELPER_DEPTH = 4


def qualified(mod: Module, node: ast.AST) -> str:
    """The canonical name a reference resolves to (``tensorflow.image.resize``), or ""."""
    orig = getattr(node, "_orig", node)
    qual = mod.scan.resolved.get(id(orig), "")
    if qual:
        return qual
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    root = mod.imports.get(node.id)
    if root is None and node.id == "tf" and mod.scan.assumed_tf:
        root = "tensorflow"
    return canonical(".".join([root] + parts[::-1])) if root else ""


class _Judge:
    """Does a statement only transform tensors? (see module doc)"""

    def __init__(self, mod: Module, cls: ClassInfo | None = None):
        self.mod, self.cls = mod, cls
        self.memo: dict[int, bool] = {}

    def statement(self, node: ast.AST, values: set[str]) -> bool | None:
        """True: it only transforms tensors (``values``: the names holding the batch and what
        was made of it); False: it consumes them; None: it writes a TF1 summary (the emitter
        drops it with a TODO)."""
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and qualified(
                self.mod, node.value.func).startswith("tensorflow.summary."):
            return None
        if isinstance(node, (ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                             ast.Return)):
            return False  # error handling, definitions: the training program's
        return self.calls_ok(node, values, 0)

    def calls_ok(self, node: ast.AST, local: set[str], depth: int) -> bool:
        for call in (n for n in walk(node) if isinstance(n, ast.Call)):
            if not self.call_ok(call, local, depth):
                return False
        return True

    def call_ok(self, call: ast.Call, local: set[str], depth: int) -> bool:
        f = call.func
        qual = qualified(self.mod, f)
        if qual.startswith("tensorflow"):
            return not tfnames.consumes_batches(qual)
        if qual.split(".")[0] in _PLAIN_MODULES:
            return True  # xrange, math.ceil, np.prod: Python arithmetic on shapes and sizes
        if isinstance(f, ast.Name):
            if f.id in local:
                return True  # a function value bound here (a lambda)
            info = self.mod.by_name.get(f.id)
            if info is not None:
                return self.helper_ok(info, depth)
            return f.id in _BUILTINS
        if isinstance(f, ast.Attribute):
            root = f.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id == "self" and self.cls is not None:
                info = self.cls.methods.get(f.attr)
                return info is not None and self.helper_ok(info, depth)
            if isinstance(root, ast.Name) and root.id in local or not isinstance(
                    root, ast.Name):
                return True  # a method of a value: tensor.set_shape, dict.pop, "{}".format
            return False  # a module's function, or a method of an object made elsewhere
        if isinstance(f, (ast.Call, ast.Subscript)):
            return True  # what an earlier call or index gave: its calls are judged too
        return True

    def helper_ok(self, info: FuncInfo, depth: int) -> bool:
        key = id(info.node)
        if key not in self.memo:
            self.memo[key] = False  # recursion: not followed
            self.memo[key] = depth < _HELPER_DEPTH and self.calls_ok(
                info.node, stored_names(info.node) | set(info.params), depth + 1)
        return self.memo[key]


def settle(mod: Module, out: Lifted, cls: ClassInfo | None = None) -> None:
    """Keep of ``out.after`` (lifted items, in order) the per-batch code, and set
    ``out.output`` and ``out.entry_returns`` (see module doc)."""
    judge = _Judge(mod, cls)
    after = out.after
    live = list(out.batch_params or ())
    kept: list[Item] = []
    support: list[Item] = []
    stop = len(after)
    made: set[str] = set()  # what statements that do not read the batch bound
    out.entry_returns = False
    for i, item in enumerate(after):
        node = item[1].apply(item[0])
        reads = loads(node) & set(live)
        if isinstance(node, ast.Return) and item[2] == 0:
            if reads or loads(node) & made:
                out.entry_returns = True
                kept.append(item)
            stop = i + 1
            break
        verdict = judge.statement(node, set(live) | made)
        if not reads:
            if verdict:
                support.append(item)
                made |= stored_names(node)
            continue
        if verdict is False:
            stop = i
            break
        kept.append(item)
        live += [n for n in sorted(stored_names(node) | mutated(node)) if n not in live]
    out.after = _with_support(kept, support)
    if not out.entry_returns:
        rest = [loads(it[1].apply(it[0])) for it in after[stop:]]
        read_later = set().union(*rest) if rest else set()
        names = [n for n in live if n in read_later] or _finals(live, out.after)
        out.output = ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load()) if len(
            names) > 1 else ast.Name(names[0], ast.Load())


def _with_support(kept: list[Item], support: list[Item]) -> list[Item]:
    """The per-batch statements and the ones they need, in order."""
    needed = set().union(*(loads(it[1].apply(it[0])) for it in kept)) if kept else set()
    chosen = {it[3] for it in kept}
    for it in sorted(support, key=lambda it: -it[3]):
        node = it[1].apply(it[0])
        if stored_names(node) & needed and any(k[3] > it[3] for k in kept):
            chosen.add(it[3])
            needed |= loads(node)
    return sorted([it for it in kept + support if it[3] in chosen], key=lambda it: it[3])


def _finals(live: list[str], kept: list[Item]) -> list[str]:
    """The batch names per-batch code left: each name made from others replaces them."""
    used = set().union(*(loads(it[1].apply(it[0])) for it in kept)) if kept else set()
    made = set().union(*(stored_names(it[1].apply(it[0])) for it in kept)) if kept else set()
    return [n for n in live if n in made or n not in used] or live


__all__ = ["qualified", "settle"]
