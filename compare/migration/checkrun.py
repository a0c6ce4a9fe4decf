"""The child process of ``compare.migrate --check``: build one side (the TF1 original or the
tf.data port) with the user's call, take batches from it, profile it.

``python -m compare.migration.checkrun SIDE DEST --script S [--port P] --function F --call C
[--setup CODE] --batches N --timed K``. Writes into DEST: ``batches.npz`` (the batches taken with
randomness neutralised), ``side.json`` (structure, dtypes, shapes, batches/s, notes) and the
side's trace: ``timeline.json`` (timeline.py FULL_TRACE, original) or a TensorBoard profile
(``plugins/profile/...``, port). Errors: one line on stderr; exit 2 when the side could not be
built or gave no data (the parent names the side), never a traceback.

The original runs as TF1 code does on TF 2.21: graph mode, ``import tensorflow`` giving
``tf.compat.v1`` (with the ``tf.contrib`` names pipelines used, and the constants of TF1 tutorial
modules TF 2 dropped), queue runners in a session. Importing the script runs its top-level code
(that is why this is a child process with a time limit).

Randomness, neutralised on both sides for the batches compared: every uniform draw (stateful or
stateless) returns the middle of its range, normal draws their mean, shuffles keep the order
(a random brightness adds 0, a flip does not flip, a crop takes one fixed offset on both sides);
queues keep their order (producers unshuffled, shuffle_batch a plain batch, one thread each;
``Dataset.shuffle`` leaves the order as it is). The profiled batches run the pipelines as written.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import os
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from common import atomic, profiling
from common.errors import InputError, run_cli, tf_error_line
from common.tflog import quiet_python_logs
from compare.migration import porthelpers
from compare.migration.scan import binds_tf
from compare.migration.source import parse
from compare.migration.tfnames import REMOVED_CONSTANTS

#: Batches run before the timed ones (thread pools, files opening, first traces).
WARMUP = 2
#: Port batches profiled with TensorBoard's profiler (after the timed ones).
PROFILED = 5
#: tf.contrib.lookup's table constructors, which TF 2 keeps (unexported) in lookup_ops.
_CONTRIB_LOOKUP = ("index_table_from_tensor", "index_table_from_file",
                   "index_to_string_table_from_tensor", "index_to_string_table_from_file")
#: The initializable iterators the original made (their initializers run in our session).
ITERATORS: list[Any] = []
#: The tensorflow module, a tensor, a graph, a session: TensorFlow's objects (untyped here).
TF = Any
#: What a patch replaces, (owner, attribute name) -> the new value.
Table = dict[tuple[Any, str], Any]


# -- the TF1 shim ----------------------------------------------------------------------------

def tf1_module(tf: TF) -> types.ModuleType:
    """``tensorflow`` as a TF1 script sees it: ``tf.compat.v1``, plus ``tf.contrib`` names."""
    from tensorflow.python.ops import lookup_ops  # lazy: imports TensorFlow

    v1 = tf.compat.v1
    shim = types.ModuleType("tensorflow")
    shim.__dict__.update({k: getattr(v1, k) for k in dir(v1) if not k.startswith("__")})
    shim.__path__ = list(tf.__path__)
    shim.__file__ = tf.__file__
    contrib = types.SimpleNamespace(
        compiler=types.SimpleNamespace(jit=types.SimpleNamespace(
            experimental_jit_scope=tf.xla.experimental.jit_scope)),
        data=tf.data.experimental, framework=types.SimpleNamespace(), slim=None,
        lookup=types.SimpleNamespace(**{n: getattr(lookup_ops, n) for n in _CONTRIB_LOOKUP}))
    setattr(shim, "contrib", contrib)
    return shim


def install_tf1(tf: TF) -> None:
    """Make ``import tensorflow`` (and TF1's removed tutorial modules) what a TF1 script
    expects, and switch to graph mode."""

    tf.compat.v1.disable_eager_execution()
    sys.modules["tensorflow"] = tf1_module(tf)
    for name, consts in REMOVED_CONSTANTS.items():
        parts = name.split(".")
        for i in range(2, len(parts) + 1):
            mod_name = ".".join(parts[:i])
            if mod_name not in sys.modules:
                sys.modules[mod_name] = types.ModuleType(mod_name)
            if i > 2:
                setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1],
                        sys.modules[mod_name])
        sys.modules[name].__dict__.update(consts)
    reader = "tensorflow.examples.tutorials.mnist.input_data"
    sys.modules[reader] = types.ModuleType(reader)
    sys.modules[reader].__dict__.update(porthelpers.mnist_module_namespace(tf))
    setattr(sys.modules["tensorflow.examples.tutorials.mnist"], "input_data", sys.modules[reader])


# -- neutralising randomness and order -------------------------------------------------------

def _middle(tf: TF, shape: Any, minval: Any, maxval: Any, dtype: Any) -> TF:
    dtype = tf.as_dtype(dtype or tf.float32)
    if minval is None and maxval is None:  # integers over their whole range (seed folding)
        return tf.zeros(shape, dtype)
    minval = 0 if minval is None else minval
    if maxval is None:
        maxval = 1 if dtype.is_floating else dtype.max
    lo, hi = tf.cast(minval, dtype), tf.cast(maxval, dtype)
    mid = lo + (hi - lo) / 2 if dtype.is_floating else lo + (hi - lo) // 2
    return tf.fill(tf.cast(shape, tf.int32) if not isinstance(shape, (list, tuple)) else shape,
                   mid)


def _replacements(tf: TF) -> Table:
    """(module, function name) -> the neutral version."""
    from tensorflow.python.ops import random_ops, stateless_random_ops  # lazy: imports TensorFlow

    def uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = tf.float32,
                seed: Any = None, name: Any = None, **_: Any) -> TF:
        return _middle(tf, shape, minval, maxval, dtype)

    def s_uniform(shape: Any, seed: Any, minval: Any = 0, maxval: Any = None,
                  dtype: Any = tf.float32, name: Any = None, **_: Any) -> TF:
        return _middle(tf, shape, minval, maxval, dtype)

    def normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = tf.float32,
               seed: Any = None, name: Any = None, **_: Any) -> TF:
        return tf.fill(shape, tf.cast(mean, dtype))

    def s_normal(shape: Any, seed: Any, mean: Any = 0.0, stddev: Any = 1.0,
                 dtype: Any = tf.float32, name: Any = None, **_: Any) -> TF:
        return tf.fill(shape, tf.cast(mean, dtype))

    def same(value: Any, seed: Any = None, name: Any = None, **_: Any) -> TF:
        return tf.identity(value)

    return {(random_ops, "random_uniform"): uniform, (random_ops, "random_normal"): normal,
            (random_ops, "truncated_normal"): normal, (random_ops, "random_shuffle"): same,
            (stateless_random_ops, "stateless_random_uniform"): s_uniform,
            (stateless_random_ops, "stateless_random_normal"): s_normal,
            (stateless_random_ops, "stateless_truncated_normal"): s_normal,
            (stateless_random_ops, "stateless_shuffle"): same}


def _v1_order(tf: TF) -> Table:
    """The TF1 queue builders with their shuffling and threads turned off."""
    train = tf.compat.v1.train
    orig = {n: getattr(train, n) for n in ("string_input_producer", "input_producer",
                                           "range_input_producer", "slice_input_producer",
                                           "batch", "batch_join", "maybe_batch")}

    def unshuffled(name: str) -> Callable[..., Any]:
        def fn(*a: Any, **k: Any) -> TF:
            k["shuffle"] = False
            return orig[name](*a, **k)
        return fn

    def batch(tensors: Any, batch_size: Any, num_threads: Any = 1, capacity: Any = 32,
              enqueue_many: Any = False, shapes: Any = None, dynamic_pad: Any = False,
              allow_smaller_final_batch: Any = False, shared_name: Any = None, name: Any = None,
              **_: Any) -> TF:
        return orig["batch"](tensors, batch_size, num_threads=1, capacity=capacity,
                             enqueue_many=enqueue_many, shapes=shapes, dynamic_pad=dynamic_pad,
                             allow_smaller_final_batch=allow_smaller_final_batch)

    def batch_join(tensors_list: Any, batch_size: Any, capacity: Any = 32,
                   enqueue_many: Any = False, shapes: Any = None, dynamic_pad: Any = False,
                   allow_smaller_final_batch: Any = False, **_: Any) -> TF:
        return orig["batch_join"](tensors_list[:1], batch_size, capacity=capacity,
                                  enqueue_many=enqueue_many, shapes=shapes,
                                  dynamic_pad=dynamic_pad,
                                  allow_smaller_final_batch=allow_smaller_final_batch)

    def fifo(capacity: Any, min_after_dequeue: Any = None, dtypes: Any = None,
             shapes: Any = None, names: Any = None, seed: Any = None, shared_name: Any = None,
             name: Any = "random_shuffle_queue") -> TF:
        return tf.compat.v1.FIFOQueue(capacity, dtypes, shapes=shapes, names=names)

    runner_init = tf.compat.v1.train.QueueRunner.__init__

    def one_thread(self: Any, queue: Any = None, enqueue_ops: Any = None, *a: Any,
                   **k: Any) -> None:
        """A queue runner runs its enqueue ops in one thread each: keep one, so the queue
        fills in order."""
        runner_init(self, queue, list(enqueue_ops)[:1] if enqueue_ops else enqueue_ops,
                    *a, **k)

    out = {(train, n): unshuffled(n) for n in ("string_input_producer", "input_producer",
                                               "range_input_producer", "slice_input_producer")}
    out.update({(train, "batch"): batch, (train, "shuffle_batch"): batch,
                (train, "batch_join"): batch_join, (train, "shuffle_batch_join"): batch_join,
                (tf.compat.v1, "RandomShuffleQueue"): fifo,
                (tf.compat.v1.train.QueueRunner, "__init__"): one_thread})
    return out


def _iterators(tf: TF) -> Table:
    """Initializable iterators recorded as the original makes them: the script ran their
    initializers in its own session, ours runs them again."""
    v1_dataset = tf.compat.v1.data.Dataset
    make_iterator = v1_dataset.make_initializable_iterator

    def initializable(self: Any, *a: Any, **k: Any) -> TF:
        it = make_iterator(self, *a, **k)
        ITERATORS.append(it)
        return it

    return {(v1_dataset, "make_initializable_iterator"): initializable}


def _tf2_order(tf: TF) -> Table:
    from tensorflow.python.data.ops import dataset_ops  # lazy: imports TensorFlow

    files = dataset_ops.DatasetV2.list_files

    def list_files(file_pattern: Any, shuffle: Any = None, seed: Any = None,
                   name: Any = None) -> TF:
        return files(file_pattern, shuffle=False, name=name)

    return {(dataset_ops.DatasetV2, "shuffle"): lambda self, *a, **k: self,
            (dataset_ops.DatasetV2, "list_files"): staticmethod(list_files)}


@contextlib.contextmanager
def patched(table: Table) -> Iterator[None]:
    """Replace each (owner, name) by its value, in the owner and wherever TF's public API
    modules hold the same function; put everything back afterwards."""
    undo: list[tuple[Any, str, Any]] = []
    api = [m for n, m in list(sys.modules.items())
           if isinstance(m, types.ModuleType) and n.startswith("tensorflow._api.")]
    for (owner, name), new in table.items():
        old = owner.__dict__.get(name, getattr(owner, name, None))
        undo.append((owner, name, old))
        setattr(owner, name, new)
        target = old.__func__ if isinstance(old, staticmethod) else old
        for m in api:
            for k, v in list(vars(m).items()):
                if v is target and callable(v):
                    undo.append((m, k, v))
                    setattr(m, k, new.__func__ if isinstance(new, staticmethod) else new)
    try:
        yield
    finally:
        for owner, name, old in reversed(undo):
            setattr(owner, name, old)


def neutral(tf: TF, side: str) -> contextlib.AbstractContextManager[None]:
    table = _replacements(tf)
    table.update(_v1_order(tf) if side == "original" else _tf2_order(tf))
    return patched(table)


# -- building the sides ----------------------------------------------------------------------

class _Session:
    """``sess`` in ``--call``: the original gets the session the check runs it in (a function
    that starts its own queue runners with the session it is given); the port gets None."""

    def __repr__(self) -> str:
        return "sess"


SESSION = _Session()
#: The names ``--call`` may pass for the session.
SESSION_NAMES = frozenset({"sess", "session"})


def _argument(node: ast.AST) -> object:
    if isinstance(node, ast.Name) and node.id in SESSION_NAMES:
        return SESSION
    return ast.literal_eval(node)


def parse_call(call: str) -> tuple[str, list[object], dict[str, object]]:
    """``FUNC(ARGS)`` with literal arguments (or ``sess``, see :data:`SESSION`): (name,
    positional, keyword)."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError as e:
        raise InputError(f"--call {call!r}: not a call ({e.msg})") from None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise InputError(f"--call {call!r}: write it as FUNC(ARGS), e.g. "
                         "distorted_inputs('data', 32)")
    try:
        args = [_argument(a) for a in node.args]
        kwargs = {k.arg: _argument(k.value) for k in node.keywords if k.arg}
    except ValueError:
        raise InputError(f"--call {call!r}: arguments must be literals (strings, numbers, "
                         "True/False/None, lists) or sess (the session); set anything else "
                         "with --setup") from None
    return node.func.id, args, kwargs


def _given(values: list[object], sess: object) -> list[object]:
    """The call's positional arguments with :data:`SESSION` as ``sess``."""
    return [sess if v is SESSION else v for v in values]


def _given_kw(values: dict[str, object], sess: object) -> dict[str, object]:
    """The call's keyword arguments with :data:`SESSION` as ``sess``."""
    return {k: sess if v is SESSION else v for k, v in values.items()}


def _load(path: str, name: str, setup: str, main: bool = False,
          until: int = 0) -> types.ModuleType:
    """Run the file as module ``name`` (with ``__name__ == "__main__"`` and only its lines up to
    ``until`` for a pipeline built in top-level code); ``setup`` runs first in its namespace."""
    source = Path(path).read_text(encoding="utf-8")
    tree = parse(source, path, notebook=path.endswith(".ipynb")).tree  # Python 2, notebooks
    used, bound, _n = binds_tf(tree)
    if until:
        tree = _truncated(tree, until)
    mod = types.ModuleType(name)
    mod.__file__ = path
    mod.__dict__["__name__"] = "__main__" if main else name
    if used and not bound:  # a snippet using tf without importing it, read as importing it
        mod.__dict__["tf"] = sys.modules.get("tensorflow") or __import__("tensorflow")
    sys.modules[name] = mod
    sys.path.insert(0, str(Path(path).resolve().parent))
    sys.argv = [path]
    if setup and until:
        exec(compile(setup, "--setup", "exec"), mod.__dict__)
    exec(compile(tree, path, "exec"), mod.__dict__)
    if setup and not until:
        exec(compile(setup, "--setup", "exec"), mod.__dict__)
    return mod


def _truncated(tree: ast.Module, until: int) -> ast.Module:
    """The statements that end by line ``until`` (compound statements cut inside)."""
    def cut(body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in body:
            if s.lineno > until:
                break
            if (s.end_lineno or s.lineno) > until and hasattr(s, "body"):
                setattr(s, "body", cut(getattr(s, "body")) or [ast.Pass()])
                if hasattr(s, "orelse"):
                    setattr(s, "orelse", [])
            out.append(s)
        return out
    tree.body = cut(tree.body)
    return tree


def original_outputs(tf: TF, a: argparse.Namespace, graph: TF, sess: TF) -> TF:
    """The original pipeline's output tensors (flattened) and their structure. Built with
    ``sess`` as the default session, as TF1 code that starts its own queue runners expects."""
    with graph.as_default(), sess.as_default():
        install_tf1(tf)
        if a.until:
            mod = _load(a.script, "migrate_original", a.setup, main=True, until=a.until)
            value = eval(a.output, mod.__dict__)  # noqa: S307 - names the script bound
        else:
            mod = _load(a.script, "migrate_original", a.setup)
            fn = getattr(mod, a.function, None)
            if fn is None:
                raise InputError(f"{a.script} has no function {a.function}")
            value = fn(*_given(a.args, sess), **_given_kw(a.kwargs, sess))
    return value


#: What the original gave: its value, the batches taken, the seconds of each timed batch and
#: the FULL_TRACE timeline (None when not traced).
Taken = tuple[Any, list[list[Any]], list[float], "str | None"]


def take_original(tf: TF, a: argparse.Namespace, n: int, traced: bool = False) -> Taken:
    """``n`` batches of the original (and, when ``traced``, wall times and a FULL_TRACE
    timeline of one more)."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with v1.Session(graph=graph) as sess:
        return _take_original(tf, a, n, traced, graph, sess)


def _take_original(tf: TF, a: argparse.Namespace, n: int, traced: bool, graph: TF,
                   sess: TF) -> Taken:
    v1 = tf.compat.v1
    with patched(_iterators(tf)):
        value = original_outputs(tf, a, graph, sess)
    flat = tf.nest.flatten(value)
    with graph.as_default():
        init = [v1.global_variables_initializer(), v1.local_variables_initializer(),
                v1.tables_initializer()] + [it.initializer for it in ITERATORS
                                            if it.initializer.graph is graph]
    with sess.as_default():
        sess.run(init)
        coord = v1.train.Coordinator()
        threads = v1.train.start_queue_runners(sess=sess, coord=coord)
        try:
            if not traced:
                batches, _walls = _batches(lambda: sess.run(flat), n)
                return value, batches, [], None
            _batches(lambda: sess.run(flat), WARMUP, finite=True)
            trace = _full_trace(tf, sess, flat, graph)
            batches, walls = _batches(lambda: sess.run(flat), n - WARMUP, finite=True)
            return value, batches, walls, trace
        finally:
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=5, ignore_live_threads=True)


def _batches(take: Callable[[], Any], n: int,
             finite: bool = False) -> tuple[list[Any], list[float]]:
    """``n`` batches from ``take()`` and the seconds each took; with ``finite``, fewer when the
    data ends first (a finite dataset timed for speed)."""
    import tensorflow as tf  # lazy: imports TensorFlow

    batches: list[Any] = []
    walls: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            batches.append(take())
        except (tf.errors.OutOfRangeError, StopIteration):
            if not finite:
                raise
            break
        walls.append(time.perf_counter() - t0)
    return batches, walls


def _full_trace(tf: TF, sess: TF, flat: list[TF], graph: TF) -> str:
    """A timeline.py FULL_TRACE timeline of one more batch."""
    from tensorflow.python.client import timeline  # lazy: imports TensorFlow

    v1 = tf.compat.v1
    opts = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
    meta = v1.RunMetadata()
    sess.run(flat, options=opts, run_metadata=meta)
    trace: str = timeline.Timeline(meta.step_stats, graph=graph).generate_chrome_trace_format(
        show_dataflow=True, show_memory=True)
    return trace


def port_dataset(a: argparse.Namespace) -> TF:
    mod = _load(a.port, "migrate_port", a.setup)
    fn = getattr(mod, a.function, None)
    if fn is None:
        raise InputError(f"{a.port} has no function {a.function}")
    return fn(*_given(a.args, None), **_given_kw(a.kwargs, None))


def take_port(tf: TF, a: argparse.Namespace, n: int) -> tuple[TF, list[Any], Iterator[Any]]:
    """``n`` batches of the port, its element spec and an iterator over the rest."""
    ds = port_dataset(a)
    if not isinstance(ds, tf.data.Dataset):
        raise InputError(f"{a.port}: {a.function} returned {type(ds).__name__}, not a "
                         "tf.data.Dataset")
    it = iter(ds)
    batches, _walls = _batches(lambda: [x.numpy() for x in tf.nest.flatten(next(it))], n)
    return ds.element_spec, batches, it


def time_port(tf: TF, a: argparse.Namespace, timed: int, dest: Path) -> list[float]:
    """Warm the port up, profile :data:`PROFILED` batches into ``dest``, then time up to
    ``timed`` more (fewer when its data ends); the seconds of each timed batch."""
    _spec, _b, it = take_port(tf, a, 0)
    _batches(lambda: next(it), WARMUP, finite=True)
    with profiling.tensorboard_profile(dest):
        for i in range(PROFILED):
            with profiling.step("port", i):
                if next(it, None) is None:
                    break
    return _batches(lambda: next(it), timed, finite=True)[1]


def _structure(tf: TF, value: Any) -> str:
    """The element's nesting as text; dict keys sorted (tf.nest orders components so too)."""
    def text(x: Any) -> str:
        if isinstance(x, dict):
            return "{" + ", ".join(f"{k!r}: {text(x[k])}" for k in sorted(x)) + "}"
        if isinstance(x, (list, tuple)):
            return "(" + ", ".join(text(v) for v in x) + ("," if len(x) == 1 else "") + ")"
        return "'tensor'"
    return text(tf.nest.map_structure(lambda _x: 0, value))


# -- the child -------------------------------------------------------------------------------

def _plain(x: Any) -> np.ndarray:
    """A batch component as numpy stores it without pickling: strings as bytes arrays."""
    arr = np.asarray(x)
    return arr.astype(np.bytes_) if arr.dtype == object else arr


def _dtype(x: Any) -> str:
    arr = np.asarray(x)
    return "string" if arr.dtype == object or arr.dtype.kind == "S" else str(arr.dtype)


def _save(dest: Path, side: dict[str, Any], batches: list[list[Any]]) -> None:
    arrays = {f"b{i}_c{j}": _plain(x) for i, b in enumerate(batches) for j, x in enumerate(b)}
    with atomic.atomic_open(dest / "batches.npz", "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub types allow_pickle
    atomic.write_json(dest / "side.json", side)


def run_side(a: argparse.Namespace) -> None:
    import tensorflow as tf  # lazy: imports TensorFlow

    quiet_python_logs()
    dest = Path(a.dest)
    dest.mkdir(parents=True, exist_ok=True)
    side: dict[str, Any] = {"side": a.side}
    if a.side == "original":
        with neutral(tf, "original"):
            value, batches, _w, _t = take_original(tf, a, a.batches)
        side["structure"] = _structure(tf, value)
        _, _, timed, trace = take_original(tf, a, WARMUP + a.timed, traced=True)
        assert trace is not None  # traced=True: the run's FULL_TRACE timeline
        atomic.write_text(dest / "timeline.json", trace)
    else:
        with neutral(tf, "port"):
            spec, batches, _it = take_port(tf, a, a.batches)
        side["structure"] = _structure(tf, spec)
        timed = time_port(tf, a, a.timed, dest)
    side["batches_per_s"] = len(timed) / sum(timed) if timed and sum(timed) > 0 else None
    side["components"] = [{"shape": list(np.shape(x)), "dtype": _dtype(x)} for x in batches[0]]
    _save(dest, side, batches)


def _one_line(e: BaseException) -> str:
    """An exception as one line: a traced function's error (``in user code: ...``) by its last
    line, which says what went wrong."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if lines and lines[0].startswith("in user code"):
        return f"{type(e).__name__} in a traced function: {lines[-1]}"
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


def _child(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m compare.migration.checkrun", description=(
        "One side of compare.migrate --check, in a process of its own (compare.migrate "
        "starts it; not meant to be run by hand)."))
    p.add_argument("side", choices=("original", "port"))
    p.add_argument("dest")
    p.add_argument("--script", required=True)
    p.add_argument("--port", default="")
    p.add_argument("--function", required=True)
    p.add_argument("--call", required=True)
    p.add_argument("--setup", default="")
    p.add_argument("--until", type=int, default=0)
    p.add_argument("--output", default="")
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--timed", type=int, default=10)
    a = p.parse_args(argv)
    _name, a.args, a.kwargs = parse_call(a.call)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # lazy: imports TensorFlow
    try:
        run_side(a)
    except InputError:
        raise
    except (tf.errors.OpError, StopIteration) as e:
        what = "ran out of data" if isinstance(e, (StopIteration, tf.errors.OutOfRangeError)) \
            else tf_error_line(e)
        raise InputError(f"{what}") from None
    except Exception as e:  # noqa: BLE001 - the user's script or port failed: one line
        raise InputError(_one_line(e)) from None
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(_child, sys.argv[1:], f"{' '.join(sys.argv[1:2]) or 'side'}"))
