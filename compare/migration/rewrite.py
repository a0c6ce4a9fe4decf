"""A lifted statement in TF 2.21 terms: TF1 names renamed (:mod:`.tfnames`), stateful random ops
made stateless with a per-example seed, ``tf.to_float`` & co. made casts, ``xrange`` made
``range``. What has no TF 2 form gets a TODO (the statement keeps its TF1 spelling there, so the
module still imports; the TODO says what to do).

Every TensorFlow name is written ``tf.<path>`` (the port imports ``import tensorflow as tf``),
whatever alias the script used. Seeds: each stateless draw takes ``_draws.seed()``, a seed folded
from the example's seed and the draw's number; a draw the script gave a seed takes
``_draws.seed(<that seed>)``, so draws that shared a seed in the script share one per example.
"""
from __future__ import annotations

import ast
from typing import Iterable

from compare.migration import tfnames
from compare.migration.lift import RUNTIME_CATEGORIES
from compare.migration.pipelines import STATELESS
from compare.migration.porthelpers import DRAWS, REPLACED, RESIZE_V1
from compare.migration.rules import Rule, canonical, rule_for
from compare.migration.values import Module

#: Positional parameters of the stateful ops whose rule lists none.
_OLD_PARAMS = {
    "sample_distorted_bounding_box": ("image_size", "bounding_boxes", "seed", "seed2",
                                      "min_object_covered", "aspect_ratio_range", "area_range",
                                      "max_attempts", "use_image_if_no_bounding_boxes", "name"),
}
#: Keywords the stateless op spells differently.
_STATELESS_KEYWORDS = {"multinomial": {"output_dtype": "dtype"}}
#: TF1 resizes whose TF 2 form (tf.image.resize, half-pixel centres) gives other values: the
#: port calls a helper that runs the same kernels with TF1's pixel centres.
_V1_RESIZES = {"tensorflow.image.resize_images": None,
               "tensorflow.image.resize_bilinear": "bilinear",
               "tensorflow.image.resize_nearest_neighbor": "nearest",
               "tensorflow.image.resize_bicubic": "bicubic",
               "tensorflow.image.resize_area": "area"}


def _chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _dotted(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


class Rewriter(ast.NodeTransformer):
    """Rewrites one statement (or function) in place; ``todos`` and ``draws`` tell what it
    found. ``locals_`` are names the code binds itself (they shadow imports)."""

    def __init__(self, mod: Module, locals_: Iterable[str] = ()):
        self.mod = mod
        self.locals = set(locals_)
        self.todos: list[str] = []
        self.blocking = 0  # TODOs after which the code cannot run (a name TF 2 does not have)
        self.notes: list[str] = []
        self.draws = 0
        self.helpers: set[str] = set()  # the port's own helpers this code calls
        self.imports: set[str] = set()  # imports the rewritten code needs

    # -- names ------------------------------------------------------------------------------
    def qualified(self, node: ast.AST) -> str:
        """The canonical name of a reference (``tensorflow.image.decode_jpeg``), or ""."""
        orig = getattr(node, "_orig", node)
        qual = self.mod.scan.resolved.get(id(orig), "")
        if qual:
            return qual
        parts = _chain(node)
        if not parts or parts[0] in self.locals:
            return ""
        root = self.mod.imports.get(parts[0])
        if root is None and parts[0] == "tf" and self.mod.scan.assumed_tf:
            root = "tensorflow"
        return canonical(".".join([root] + parts[1:])) if root else ""

    def tf_reference(self, node: ast.AST) -> ast.AST | None:
        """``node`` as TF 2.21 names it, or None when it is not a TensorFlow name."""
        qual = self.qualified(node)
        if not qual.startswith("tensorflow.") and qual != "tensorflow":
            return None
        module, _, attr = qual.rpartition(".")
        if module in tfnames.REMOVED_CONSTANTS and attr in tfnames.REMOVED_CONSTANTS[module]:
            value = tfnames.REMOVED_CONSTANTS[module][attr]
            self.notes.append(f"{ast.unparse(node)} is {value!r} ({module} is gone from TF 2)")
            return ast.Constant(value)
        old = "tf" + qual[len("tensorflow"):]
        if old.startswith("tf.python.platform."):  # flags, gfile: public as tf.flags, tf.gfile
            old = "tf." + old[len("tf.python.platform."):]
        for flags in ("tf.app.flags", "tf.flags"):  # TF 1's flags were absl's
            if old == flags or old.startswith(flags + "."):
                self.imports.add("import absl.flags")
                return _dotted("absl.flags" + old[len(flags):])
        new = tfnames.tf2_name(old)
        if new.name is None and tfnames.exists("tf.compat.v1." + old[3:]):
            new = tfnames.Name2("tf.compat.v1." + old[3:], compat=True)
        if new.name is None:
            self.todos.append(f"{ast.unparse(node)} ({old}) has no TF 2 equivalent: replace it")
            self.blocking += 1
            return None
        if new.compat:
            self.todos.append(f"{old} exists only as {new.name} in TF 2: rewrite this with "
                              "TF 2 ops")
        return _dotted(new.name)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id == "xrange" and "xrange" not in \
                self.locals:
            return ast.copy_location(ast.Name("range", ast.Load()), node)
        if isinstance(node.ctx, ast.Load):
            new = self.tf_reference(node)
            if new is not None:
                return ast.copy_location(new, node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and _chain(node) is not None:
            new = self.tf_reference(node)
            if new is not None:
                return ast.copy_location(new, node)
            if self.qualified(node).startswith("tensorflow"):
                return node  # reported: keep the script's spelling
        self.generic_visit(node)
        return node

    # -- statements -------------------------------------------------------------------------
    def visit_With(self, node: ast.With) -> ast.AST | list[ast.stmt]:
        """``with jit_scope():`` goes (XLA in a port is ``jit_compile=True`` on a function
        outside the map); the body stays."""
        if all(self.runtime(i.context_expr) for i in node.items):
            self.notes.append("XLA jit_scope left out: a tf.data map is not compiled by it")
            body = [self.visit(s) for s in node.body]
            return [x for b in body for x in (b if isinstance(b, list) else [b]) if x is not None]
        self.generic_visit(node)
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST | None:
        if _chain(node.value) and self.runtime(node.value):
            return None  # jit_scope = tf.contrib.compiler.jit.experimental_jit_scope
        self.generic_visit(node)
        return node

    def runtime(self, node: ast.AST) -> bool:

        qual = self.qualified(node) or (self.qualified(node.func) if isinstance(
            node, ast.Call) else "")
        rule = rule_for(qual) if qual else None
        return rule is not None and rule.category in RUNTIME_CATEGORIES

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        if not node.body:
            node.body = [ast.Pass()]
        return node

    # -- calls ------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> ast.AST:
        qual = self.qualified(node) or self.qualified(node.func)
        old = "tf" + qual[len("tensorflow"):] if qual.startswith("tensorflow.") else ""
        rule = rule_for(qual) if qual else None
        if rule is not None and rule.category == "stateful_random" and \
                rule.id != "set_random_seed":
            return self.stateless(node, rule)
        if qual in REPLACED:
            self.helpers.add(REPLACED[qual])
            node.func = ast.copy_location(ast.Name(REPLACED[qual], ast.Load()), node.func)
            self.generic_visit(node)
            return node
        if qual in _V1_RESIZES:
            self.helpers.add(RESIZE_V1)
            node.func = ast.copy_location(ast.Name(RESIZE_V1, ast.Load()), node.func)
            if _V1_RESIZES[qual]:
                node.keywords.append(ast.keyword("method", ast.Constant(_V1_RESIZES[qual])))
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [ast.keyword(k.arg, self.visit(k.value)) for k in node.keywords]
            return node
        if old in tfnames.CASTS and node.args:
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [k for k in node.keywords if k.arg != "name"]
            new = ast.Call(_dotted("tf.cast"), [node.args[0], _dotted(tfnames.CASTS[old])],
                           node.keywords)
            return ast.copy_location(new, node)
        if old:
            self.arguments(node, old)
        self.generic_visit(node)
        return node

    def arguments(self, node: ast.Call, old: str) -> None:
        """tf_upgrade_v2's argument changes: reordered positional arguments become keywords,
        renamed keywords take their TF 2 names."""
        t = tfnames.tables()
        order = t.reorders.get(old)
        if order:
            keep, kws = [], []
            for i, a in enumerate(node.args):
                name = order[i] if i < len(order) else None
                if name is None or isinstance(a, ast.Starred):
                    keep.append(a)
                else:
                    kws.append(ast.keyword(name, a))
            node.args, node.keywords = keep, kws + node.keywords
        renames = t.keywords.get(old, {})
        for k in node.keywords:
            if k.arg in renames and renames[k.arg]:
                k.arg = renames[k.arg]
        node.keywords = [k for k in node.keywords if not (k.arg in renames and
                                                          renames[k.arg] is None)]

    def stateless(self, node: ast.Call, rule: Rule) -> ast.AST:
        """A stateful draw as its stateless op, all arguments by keyword, seeded per example."""
        if rule.id == "dropout":
            self.todos.append("tf.nn.dropout draws a stateful mask: use "
                              "tf.nn.experimental.stateless_dropout(x, rate=1 - keep_prob, "
                              f"seed={DRAWS}.seed())")
            self.generic_visit(node)
            return node
        params = rule.params or _OLD_PARAMS.get(rule.id, ())
        kws: dict[str, ast.expr] = {}
        for i, a in enumerate(node.args):
            if isinstance(a, ast.Starred) or i >= len(params):
                self.todos.append(f"{ast.unparse(node)[:80]}: arguments not known by name; "
                                  "make the draw stateless by hand")
                self.generic_visit(node)
                return node
            kws[params[i]] = a
        for kwd in node.keywords:
            if kwd.arg is None:
                self.todos.append(f"{ast.unparse(node)[:80]}: **kwargs; make the draw "
                                  "stateless by hand")
                self.generic_visit(node)
                return node
            kws[kwd.arg] = kwd.value
        seed = kws.pop("seed", None)
        for k in ("seed2", "name"):
            kws.pop(k, None)
        renames = _STATELESS_KEYWORDS.get(rule.id, {})
        kws = {renames.get(k, k): self.visit(v) for k, v in kws.items()}
        shared = [] if seed is None or (isinstance(seed, ast.Constant) and seed.value is None) \
            else [self.visit(seed)]
        self.draws += 1
        seed_call = ast.Call(_dotted(f"{DRAWS}.seed"), shared, [])
        new = STATELESS.get(rule.id, f"tf.image.stateless_{rule.id.split('.')[-1]}")
        call = ast.Call(_dotted(new), [], [ast.keyword(k, v) for k, v in kws.items()]
                        + [ast.keyword("seed", seed_call)])
        return ast.copy_location(call, node)


def summary_call(mod: Module, stmt: ast.stmt) -> str | None:
    """A statement that only writes a TF1 summary (``tf.summary.image('images', images)``):
    its text, for the TODO that replaces it."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        qual = Rewriter(mod).qualified(stmt.value.func)
        if qual.startswith("tensorflow.summary."):
            return ast.unparse(stmt)
    return None


__all__ = ["DRAWS", "RESIZE_V1", "Rewriter", "summary_call"]
