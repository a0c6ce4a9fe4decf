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
from pathlib import Path

import numpy as np

from common import atomic, profiling
from common.errors import InputError, run_cli, tf_error_line
from common.tflog import quiet_python_logs
from compare.migration import porthelpers
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
ITERATORS: list = []


# -- the TF1 shim ----------------------------------------------------------------------------

def tf1_module(tf) -> types.ModuleType:
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
    shim.contrib = contrib
    return shim


def install_tf1(tf) -> None:
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

def _middle(tf, shape, minval, maxval, dtype):
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


def _replacements(tf) -> dict:
    """(module, function name) -> the neutral version."""
    from tensorflow.python.ops import random_ops, stateless_random_ops  # lazy: imports TensorFlow

    def uniform(shape, minval=0, maxval=None, dtype=tf.float32, seed=None, name=None, **_):
        return _middle(tf, shape, minval, maxval, dtype)

    def s_uniform(shape, seed, minval=0, maxval=None, dtype=tf.float32, name=None, **_):
        return _middle(tf, shape, minval, maxval, dtype)

    def normal(shape, mean=0.0, stddev=1.0, dtype=tf.float32, seed=None, name=None, **_):
        return tf.fill(shape, tf.cast(mean, dtype))

    def s_normal(shape, seed, mean=0.0, stddev=1.0, dtype=tf.float32, name=None, **_):
        return tf.fill(shape, tf.cast(mean, dtype))

    def same(value, seed=None, name=None, **_):
        return tf.identity(value)

    return {(random_ops, "random_uniform"): uniform, (random_ops, "random_normal"): normal,
            (random_ops, "truncated_normal"): normal, (random_ops, "random_shuffle"): same,
            (stateless_random_ops, "stateless_random_uniform"): s_uniform,
            (stateless_random_ops, "stateless_random_normal"): s_normal,
            (stateless_random_ops, "stateless_truncated_normal"): s_normal,
            (stateless_random_ops, "stateless_shuffle"): same}


def _v1_order(tf) -> dict:
    """The TF1 queue builders with their shuffling and threads turned off."""
    train = tf.compat.v1.train
    orig = {n: getattr(train, n) for n in ("string_input_producer", "input_producer",
                                           "range_input_producer", "slice_input_producer",
                                           "batch", "batch_join", "maybe_batch")}

    def unshuffled(name):
        def fn(*a, **k):
            k["shuffle"] = False
            return orig[name](*a, **k)
        return fn

    def batch(tensors, batch_size, num_threads=1, capacity=32, enqueue_many=False, shapes=None,
              dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None, name=None,
              **_):
        return orig["batch"](tensors, batch_size, num_threads=1, capacity=capacity,
                             enqueue_many=enqueue_many, shapes=shapes, dynamic_pad=dynamic_pad,
                             allow_smaller_final_batch=allow_smaller_final_batch)

    def batch_join(tensors_list, batch_size, capacity=32, enqueue_many=False, shapes=None,
                   dynamic_pad=False, allow_smaller_final_batch=False, **_):
        return orig["batch_join"](tensors_list[:1], batch_size, capacity=capacity,
                                  enqueue_many=enqueue_many, shapes=shapes,
                                  dynamic_pad=dynamic_pad,
                                  allow_smaller_final_batch=allow_smaller_final_batch)

    def fifo(capacity, min_after_dequeue=None, dtypes=None, shapes=None, names=None, seed=None,
             shared_name=None, name="random_shuffle_queue"):
        return tf.compat.v1.FIFOQueue(capacity, dtypes, shapes=shapes, names=names)

    runner_init = tf.compat.v1.train.QueueRunner.__init__

    def one_thread(self, queue=None, enqueue_ops=None, *a, **k):
        """A queue runner runs its enqueue ops in one thread each: keep one, so the queue
        fills in order."""
        return runner_init(self, queue, list(enqueue_ops)[:1] if enqueue_ops else enqueue_ops,
                           *a, **k)

    out = {(train, n): unshuffled(n) for n in ("string_input_producer", "input_producer",
                                               "range_input_producer", "slice_input_producer")}
    out.update({(train, "batch"): batch, (train, "shuffle_batch"): batch,
                (train, "batch_join"): batch_join, (train, "shuffle_batch_join"): batch_join,
                (tf.compat.v1, "RandomShuffleQueue"): fifo,
                (tf.compat.v1.train.QueueRunner, "__init__"): one_thread})
    return out


def _iterators(tf) -> dict:
    """Initializable iterators recorded as the original makes them: the script ran their
    initializers in its own session, ours runs them again."""
    v1_dataset = tf.compat.v1.data.Dataset
    make_iterator = v1_dataset.make_initializable_iterator

    def initializable(self, *a, **k):
        it = make_iterator(self, *a, **k)
        ITERATORS.append(it)
        return it

    return {(v1_dataset, "make_initializable_iterator"): initializable}


def _tf2_order(tf) -> dict:
    from tensorflow.python.data.ops import dataset_ops  # lazy: imports TensorFlow

    files = dataset_ops.DatasetV2.list_files

    def list_files(file_pattern, shuffle=None, seed=None, name=None):
        return files(file_pattern, shuffle=False, name=name)

    return {(dataset_ops.DatasetV2, "shuffle"): lambda self, *a, **k: self,
            (dataset_ops.DatasetV2, "list_files"): staticmethod(list_files)}


@contextlib.contextmanager
def patched(table: dict):
    """Replace each (owner, name) by its value, in the owner and wherever TF's public API
    modules hold the same function; put everything back afterwards."""
    undo = []
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


def neutral(tf, side: str):
    table = _replacements(tf)
    table.update(_v1_order(tf) if side == "original" else _tf2_order(tf))
    return patched(table)


# -- building the sides ----------------------------------------------------------------------

def parse_call(call: str) -> tuple[str, list, dict]:
    """``FUNC(ARGS)`` with literal arguments: (name, positional, keyword)."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError as e:
        raise InputError(f"--call {call!r}: not a call ({e.msg})") from None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise InputError(f"--call {call!r}: write it as FUNC(ARGS), e.g. "
                         "distorted_inputs('data', 32)")
    try:
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    except ValueError:
        raise InputError(f"--call {call!r}: arguments must be literals (strings, numbers, "
                         "True/False/None, lists); set anything else with --setup") from None
    return node.func.id, args, kwargs


def _load(path: str, name: str, setup: str, main: bool = False,
          until: int = 0) -> types.ModuleType:
    """Run the file as module ``name`` (with ``__name__ == "__main__"`` and only its lines up to
    ``until`` for a pipeline built in top-level code); ``setup`` runs first in its namespace."""
    source = Path(path).read_text(encoding="utf-8")
    tree = parse(source, path, notebook=path.endswith(".ipynb")).tree  # Python 2, notebooks
    if until:
        tree = _truncated(tree, until)
    mod = types.ModuleType(name)
    mod.__file__ = path
    mod.__dict__["__name__"] = "__main__" if main else name
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
    def cut(body: list) -> list:
        out = []
        for s in body:
            if s.lineno > until:
                break
            if getattr(s, "end_lineno", s.lineno) > until and hasattr(s, "body"):
                s.body = cut(s.body) or [ast.Pass()]
                if hasattr(s, "orelse"):
                    s.orelse = []
            out.append(s)
        return out
    tree.body = cut(tree.body)
    return tree


def original_outputs(tf, a, graph):
    """The original pipeline's output tensors (flattened) and their structure."""
    with graph.as_default():
        install_tf1(tf)
        if a.until:
            mod = _load(a.script, "migrate_original", a.setup, main=True, until=a.until)
            value = eval(a.output, mod.__dict__)  # noqa: S307 - names the script bound
        else:
            mod = _load(a.script, "migrate_original", a.setup)
            fn = getattr(mod, a.function, None)
            if fn is None:
                raise InputError(f"{a.script} has no function {a.function}")
            value = fn(*a.args, **a.kwargs)
    return value


def take_original(tf, a, n: int, traced: bool = False):
    """``n`` batches of the original (and, when ``traced``, wall times and a FULL_TRACE
    timeline of one more)."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with patched(_iterators(tf)):
        value = original_outputs(tf, a, graph)
    flat = tf.nest.flatten(value)
    with graph.as_default():
        init = [v1.global_variables_initializer(), v1.local_variables_initializer(),
                v1.tables_initializer()] + [it.initializer for it in ITERATORS
                                            if it.initializer.graph is graph]
    batches, walls, trace = [], [], None
    with v1.Session(graph=graph) as sess:
        sess.run(init)
        coord = v1.train.Coordinator()
        threads = v1.train.start_queue_runners(sess=sess, coord=coord)
        try:
            for _ in range(n):
                t0 = time.perf_counter()
                batches.append(sess.run(flat))
                walls.append(time.perf_counter() - t0)
            if traced:
                from tensorflow.python.client import timeline  # lazy: imports TensorFlow
                opts = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
                meta = v1.RunMetadata()
                sess.run(flat, options=opts, run_metadata=meta)
                trace = timeline.Timeline(meta.step_stats, graph=graph).generate_chrome_trace_format(
                    show_dataflow=True, show_memory=True)
        finally:
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=5, ignore_live_threads=True)
    return value, batches, walls, trace


def port_dataset(a):
    mod = _load(a.port, "migrate_port", a.setup)
    fn = getattr(mod, a.function, None)
    if fn is None:
        raise InputError(f"{a.port} has no function {a.function}")
    return fn(*a.args, **a.kwargs)


def take_port(tf, a, n: int):
    ds = port_dataset(a)
    if not isinstance(ds, tf.data.Dataset):
        raise InputError(f"{a.port}: {a.function} returned {type(ds).__name__}, not a "
                         "tf.data.Dataset")
    batches, walls, it = [], [], iter(ds)
    for _ in range(n):
        t0 = time.perf_counter()
        batches.append([x.numpy() for x in tf.nest.flatten(next(it))])
        walls.append(time.perf_counter() - t0)
    return ds.element_spec, batches, walls, it


def _structure(tf, value) -> str:
    """The element's nesting as text; dict keys sorted (tf.nest orders components so too)."""
    def text(x) -> str:
        if isinstance(x, dict):
            return "{" + ", ".join(f"{k!r}: {text(x[k])}" for k in sorted(x)) + "}"
        if isinstance(x, (list, tuple)):
            return "(" + ", ".join(text(v) for v in x) + ("," if len(x) == 1 else "") + ")"
        return "'tensor'"
    return text(tf.nest.map_structure(lambda _x: 0, value))


# -- the child -------------------------------------------------------------------------------

def _plain(x) -> np.ndarray:
    """A batch component as numpy stores it without pickling: strings as bytes arrays."""
    x = np.asarray(x)
    return x.astype(np.bytes_) if x.dtype == object else x


def _dtype(x) -> str:
    x = np.asarray(x)
    return "string" if x.dtype == object or x.dtype.kind == "S" else str(x.dtype)


def _save(dest: Path, side: dict, batches: list) -> None:
    arrays = {f"b{i}_c{j}": _plain(x) for i, b in enumerate(batches) for j, x in enumerate(b)}
    with atomic.atomic_open(dest / "batches.npz", "wb") as f:
        np.savez(f, **arrays)
    atomic.write_json(dest / "side.json", side)


def run_side(a) -> None:
    import tensorflow as tf  # lazy: imports TensorFlow

    quiet_python_logs()
    dest = Path(a.dest)
    dest.mkdir(parents=True, exist_ok=True)
    side: dict = {"side": a.side}
    if a.side == "original":
        with neutral(tf, "original"):
            value, batches, _w, _t = take_original(tf, a, a.batches)
        side["structure"] = _structure(tf, value)
        _, _, walls, trace = take_original(tf, a, WARMUP + a.timed, traced=True)
        atomic.write_text(dest / "timeline.json", trace)
    else:
        with neutral(tf, "port"):
            spec, batches, _w, _it = take_port(tf, a, a.batches)
        side["structure"] = _structure(tf, spec)
        _spec, _b, walls, it = take_port(tf, a, WARMUP + a.timed)
        _profile(it, dest)
    timed = walls[WARMUP:]
    side["batches_per_s"] = len(timed) / sum(timed) if timed and sum(timed) > 0 else None
    side["components"] = [{"shape": list(np.shape(x)), "dtype": _dtype(x)} for x in batches[0]]
    _save(dest, side, batches)


def _profile(it, dest: Path) -> None:
    with profiling.tensorboard_profile(dest):
        for i in range(PROFILED):
            with profiling.step("port", i):
                next(it)


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
