"""TF1 names to TF 2.21 names, for code the emitter lifts from a script (:mod:`.emit`).

The tables are TensorFlow's own: ``tf_upgrade_v2``'s symbol renames, keyword renames and argument
reorders (``tensorflow/tools/compatibility``), read from their source files as literals rather
than imported (importing them imports TensorFlow: seconds, and ``--emit`` needs no TensorFlow).
Which names TF 2.21 still has is read the same way from its generated API listing
(``tensorflow/_api/v2/**/__init__.py``). Where TensorFlow is not installed, nothing is renamed and
every name is taken to exist (the emitted module says which names it could not check).

What ``tf_upgrade_v2`` only renames to ``tf.compat.v1`` is not a TF 2 port: :func:`tf2_name` says
so, and the emitter writes a TODO there (the casts ``tf.to_float`` & co. it rewrites itself, as
``tf_upgrade_v2``'s own transformer does).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
from pathlib import Path
from typing import Any

#: ``tf.to_<type>(x)`` -> ``tf.cast(x, tf.<dtype>)`` (tf_upgrade_v2's cast transformer).
CASTS: dict[str, str] = {
    "tf.to_float": "tf.float32", "tf.to_double": "tf.float64", "tf.to_int32": "tf.int32",
    "tf.to_int64": "tf.int64", "tf.to_bfloat16": "tf.bfloat16",
    "tf.to_complex64": "tf.complex64", "tf.to_complex128": "tf.complex128",
}


#: Constants of TF1 modules that TF 2 removed, which input pipelines read (the MNIST tutorial's
#: image size): the port writes the value, the check's TF1 shim serves the module.
REMOVED_CONSTANTS: dict[str, dict[str, str | int | float]] = {
    "tensorflow.examples.tutorials.mnist.mnist": {"IMAGE_SIZE": 28, "IMAGE_PIXELS": 784,
                                                  "NUM_CLASSES": 10},
}


#: TensorFlow namespaces and names that consume a batch rather than prepare it (the model, its
#: training, the graph and session runtime): the port's per-batch map stops before the first
#: statement that calls one on the batch (:mod:`.batchpart`).
CONSUMER_PREFIXES: tuple[str, ...] = (
    "tensorflow.layers.", "tensorflow.keras.", "tensorflow.nn.", "tensorflow.losses.",
    "tensorflow.metrics.", "tensorflow.train.", "tensorflow.estimator.", "tensorflow.saved_model.",
    "tensorflow.distribute.", "tensorflow.contrib.layers.", "tensorflow.contrib.slim.",
    "tensorflow.contrib.rnn.", "tensorflow.contrib.seq2seq.", "tensorflow.contrib.framework.",
    "tensorflow.contrib.losses.", "tensorflow.contrib.metrics.", "tensorflow.contrib.learn.",
    "tensorflow.nn.rnn_cell.", "tensorflow.profiler.", "tensorflow.tpu.",
)
CONSUMER_NAMES: frozenset[str] = frozenset({
    "tensorflow.Variable", "tensorflow.get_variable", "tensorflow.variable_scope",
    "tensorflow.placeholder", "tensorflow.placeholder_with_default", "tensorflow.Session",
    "tensorflow.InteractiveSession", "tensorflow.global_variables", "tensorflow.local_variables",
    "tensorflow.trainable_variables", "tensorflow.global_variables_initializer",
    "tensorflow.local_variables_initializer", "tensorflow.gradients", "tensorflow.get_collection",
    "tensorflow.add_to_collection", "tensorflow.matmul", "tensorflow.get_default_graph",
    "tensorflow.Graph", "tensorflow.group", "tensorflow.control_dependencies",
    "tensorflow.add_n", "tensorflow.assign", "tensorflow.assign_add",
})


def consumes_batches(qualname: str) -> bool:
    """Is this TensorFlow name the model's or the runtime's (see :data:`CONSUMER_PREFIXES`)?"""
    return qualname in CONSUMER_NAMES or qualname.startswith(CONSUMER_PREFIXES)


@dataclasses.dataclass(frozen=True)
class Tables:
    """``renames``: TF1 name -> TF2 name; ``keywords``: name -> {old kw: new kw};
    ``reorders``: name -> the old positional parameter names (None: unchanged position)."""

    renames: dict[str, str]
    keywords: dict[str, dict[str, str | None]]
    reorders: dict[str, list[str | None]]
    api_root: Path | None


def _tf_root() -> Path | None:
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _literal(path: Path, name: str) -> dict[str, Any]:
    """The dict literal assigned to ``name`` (a plain or ``self.`` name) in ``path``."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if (t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", None)) == name:
                try:
                    value = ast.literal_eval(node.value)
                except (ValueError, SyntaxError, TypeError):
                    return {}
                return value if isinstance(value, dict) else {}
    return {}


@functools.lru_cache(maxsize=1)
def tables() -> Tables:
    root = _tf_root()
    if root is None:
        return Tables({}, {}, {}, None)
    comp = root / "tools" / "compatibility"
    renames = dict(_literal(comp / "renames_v2.py", "renames"))
    renames.update(_literal(comp / "all_renames_v2.py", "manual_symbol_renames"))
    reorders = dict(_literal(comp / "reorders_v2.py", "reorders"))
    reorders.update(_literal(comp / "tf_upgrade_v2.py", "manual_function_reorders"))
    keywords = _literal(comp / "tf_upgrade_v2.py", "function_keyword_renames")
    api = root / "_api" / "v2"
    return Tables(renames, keywords, reorders, api if api.is_dir() else None)


@functools.lru_cache(maxsize=512)
def _module_names(package: str) -> frozenset[str] | None:
    """The public names of ``tf.<package>`` in TF 2.21 (``""``: tf itself), None if unknown."""
    api = tables().api_root
    if api is None:
        return None
    path = api / "v2.py" if not package else api.joinpath(*package.split("."), "__init__.py")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(names)


def exists(name: str) -> bool | None:
    """Does TF 2.21 have ``tf.a.b.c``? None when the API listing cannot tell."""
    parts = name.split(".")[1:]
    if not parts:
        return True
    api = tables().api_root
    for i in range(len(parts)):
        if i and api is not None and not api.joinpath(*parts[:i]).is_dir():
            return True  # an attribute of an object tf has (tf.image.ResizeMethod.BILINEAR)
        names = _module_names(".".join(parts[:i]))
        if names is None:
            return None
        if parts[i] not in names:
            return False
    return True


@dataclasses.dataclass(frozen=True)
class Name2:
    """The TF2 spelling of a TF1 name: ``name`` (None: none in TF 2), ``compat`` when only
    ``tf.compat.v1`` has it, ``checked`` False when no API listing could confirm it."""

    name: str | None
    compat: bool = False
    checked: bool = True


def tf2_name(old: str) -> Name2:
    """``old`` (``tf.decode_raw``) as TF 2.21 spells it (``tf.io.decode_raw``)."""
    t = tables()
    new = t.renames.get(old, old)
    if new.startswith("tf.compat.v1."):
        return Name2(new, compat=True)
    if new.startswith("tf.compat.v2."):
        new = "tf." + new[len("tf.compat.v2."):]
    if old.startswith("tf.contrib.") and new == old:
        return Name2(None)
    ok = exists(new)
    if ok is False and old.startswith("tf.python.") and "." in old[len("tf.python."):]:
        public = tf2_name("tf." + old.rsplit(".", 1)[1])  # array_ops.shape is tf.shape
        if public.name is not None and exists(public.name):
            return public
    if ok is False:
        return Name2(None)
    return Name2(new, checked=ok is not None)


__all__ = ["CASTS", "REMOVED_CONSTANTS", "Name2", "exists", "tables", "tf2_name"]
