"""What a call does in the symbolic run of :mod:`.flow`: TF1 pipeline constructors make queues,
readers, streams and ends; methods on them enqueue, read, dequeue and batch; the script's own
functions are followed; anything else computes a per-example tensor from per-example tensors, or
an ordinary value."""
from __future__ import annotations

import ast
import builtins

from compare.migration import values
from compare.migration.rules import ITERATOR_METHODS, canonical, rule_for
from compare.migration.scan import walk
from compare.migration.state import Frame, Interpreter
from compare.migration.values import (
    ClassV,
    DatasetV,
    DictV,
    End,
    EnqueueV,
    FuncV,
    IteratorV,
    ListV,
    ObjV,
    PlaceholderV,
    ProviderV,
    QueueV,
    ReaderV,
    Stream,
    Sym,
    Tensor,
    Val,
    dict_key,
    merge,
    primary,
    tensors_in,
)

_QUEUE_KINDS = {"random_shuffle_queue": "random_shuffle", "padding_fifo_queue": "padding_fifo",
                "queue": "fifo"}
#: Positional parameters of the queue constructors (by the last part of their name).
_QUEUE_PARAMS = {
    "FIFOQueue": ("capacity", "dtypes", "shapes", "names", "shared_name", "name"),
    "PaddingFIFOQueue": ("capacity", "dtypes", "shapes", "names", "shared_name", "name"),
    "RandomShuffleQueue": ("capacity", "min_after_dequeue", "dtypes", "shapes", "names", "seed",
                           "shared_name", "name"),
    "PriorityQueue": ("capacity", "types", "shapes", "names", "shared_name", "name"),
}
#: Positional parameters of the maybe_* batchers, which differ from the rule's generic list.
_MAYBE_PARAMS = {
    "maybe_batch": ("tensors", "keep_input", "batch_size", "num_threads", "capacity",
                    "enqueue_many", "shapes", "dynamic_pad", "allow_smaller_final_batch"),
    "maybe_shuffle_batch": ("tensors", "batch_size", "capacity", "min_after_dequeue",
                            "keep_input", "num_threads", "seed", "enqueue_many", "shapes",
                            "allow_smaller_final_batch"),
    "maybe_batch_join": ("tensors_list", "keep_input", "batch_size", "capacity", "enqueue_many",
                         "shapes", "dynamic_pad", "allow_smaller_final_batch"),
    "maybe_shuffle_batch_join": ("tensors_list", "batch_size", "capacity", "min_after_dequeue",
                                 "keep_input", "seed", "enqueue_many", "shapes",
                                 "allow_smaller_final_batch"),
}
_BATCHERS = frozenset({"batch", "shuffle_batch", "batch_join", "shuffle_batch_join",
                       "maybe_batch", "bucket_by_sequence_length", "bucket"})
_READERS = frozenset({"whole_file_reader", "tfrecord_reader", "text_line_reader",
                      "fixed_length_record_reader", "other_reader"})
_PRODUCERS = frozenset({"string_input_producer", "range_input_producer", "input_producer",
                        "record_input"})
#: Dataset methods: a value they are called on is taken for a dataset.
DATASET_METHODS = frozenset({"map", "batch", "padded_batch", "shuffle", "repeat", "prefetch",
                             "filter", "apply", "interleave", "flat_map", "shard", "skip", "take",
                             "cache", "concatenate", "unbatch", "zip", "group_by_window",
                             "ignore_errors", "with_options"})
#: Calls whose result is a Python list (so ``len()`` of it works).
_LISTS = frozenset({"list", "sorted", "glob.glob", "os.listdir", "tensorflow.gfile.Glob",
                    "tensorflow.io.gfile.glob", "tensorflow.gfile.ListDirectory",
                    "tensorflow.io.gfile.listdir"})


def call(run: Interpreter, node: ast.Call, fr: Frame) -> Val:
    qual = run.mod.scan.resolved.get(id(node), "")
    func = node.func
    if isinstance(func, ast.Name):
        callee = run.ev(func, fr)
        if isinstance(callee, Sym) and len(callee.alts) > 1:  # decode = jpeg or png decoder
            run.cur_calls.extend((q, node) for q in callee.alts[1:])
            return tf_call(run, node, fr, callee.alts[0])
        if not qual:
            return value_call(run, node, fr, callee)
    if qual:
        return tf_call(run, node, fr, qual)
    if isinstance(func, ast.Attribute):
        recv = run.ev(func.value, fr)
        if isinstance(recv, Sym) and recv.qual:
            return tf_call(run, node, fr, canonical(f"{recv.qual}.{func.attr}"))
        return method_call(run, node, fr, recv, func.attr)
    return value_call(run, node, fr, run.ev(func, fr))


#: TensorFlow names that are not graph ops (specs, scopes, files, logging, graph plumbing).
_NOT_OPS = ("tensorflow.gfile", "tensorflow.io.gfile", "tensorflow.logging", "tensorflow.app",
            "tensorflow.flags", "tensorflow.summary", "tensorflow.train", "tensorflow.Session",
            "tensorflow.name_scope", "tensorflow.variable_scope", "tensorflow.device",
            "tensorflow.control_dependencies", "tensorflow.Graph", "tensorflow.get_default_graph",
            "tensorflow.FixedLen", "tensorflow.VarLen", "tensorflow.TensorShape",
            "tensorflow.Variable", "tensorflow.get_variable", "tensorflow.global_variables",
            "tensorflow.local_variables", "tensorflow.group", "tensorflow.add_to_collection",
            "tensorflow.contrib", "tensorflow.python", "tensorflow.layers", "tensorflow.keras",
            "tensorflow.compat", "tensorflow.errors", "tensorflow.RunOptions",
            "tensorflow.RunMetadata", "tensorflow.ConfigProto", "tensorflow.OptimizerOptions",
            "tensorflow.GraphOptions", "tensorflow.profiler", "tensorflow.Print",
            "tensorflow.assert_", "tensorflow.debugging", "tensorflow.saved_model",
            "tensorflow.examples", "tensorflow.estimator")


def is_op(qual: str) -> bool:
    return qual.startswith("tensorflow.") and not qual.startswith(_NOT_OPS)


def _opaque(run: Interpreter, node: ast.Call, fr: Frame, vals: list[Val], qual: str = "") -> Val:
    """The result of a call we do not follow: a tensor from tensors (or from the entry's
    parameters, when it is a TensorFlow op), a graph tensor that joins whatever per-example
    stream it meets (a TensorFlow op on constants: ``tf.random_uniform([2])``), an ordinary
    value otherwise."""
    if not tensors_in_all(vals) and is_op(qual):
        params = [v.param for v in vals if isinstance(v, Sym) and v.param]
        if params:
            return Tensor(param_stream(run, params[0], node, fr))
        return Tensor(run.floating)
    out = run.combine(node, vals, fr)
    if isinstance(out, Sym) and qual in _LISTS:
        out.listish = True
    return out


def tensors_in_all(vals: list[Val]) -> bool:
    return any(tensors_in(v) for v in vals)


def param_stream(run: Interpreter, name: str, node: ast.AST, fr: Frame) -> Stream:
    if name not in run.param_streams:
        run.param_streams[name] = Stream("param", node, fr.fn.qualname, fr.path, param=name)
        run.world.streams.append(run.param_streams[name])
    return run.param_streams[name]


def _lambdas(run: Interpreter, vals: list[Val], fr: Frame) -> list[Val]:
    """Results of the argument-less lambdas a TF op was given (tf.cond branches), run so the
    script functions they call are followed."""
    out = []
    for v in vals:
        if isinstance(v, FuncV) and v.info.name == "<lambda>" and not v.info.params:
            res = run.call_function(v.info, [], {}, fr, closure=v.closure, call=v.info.node)
            if res is not None:
                out.append(res)
    return out


def tf_call(run: Interpreter, node: ast.Call, fr: Frame, qual: str) -> Val:
    rule = rule_for(qual)
    rid = rule.id if rule else ""
    last = qual.rsplit(".", 1)[-1]
    if rid in _PRODUCERS or rid in _READERS or rid in _QUEUE_KINDS or rid in _BATCHERS or rid in (
            "slice_input_producer", "slim_provider", "queue_runner", "placeholder",
            "numpy_input_fn", "pandas_input_fn"):
        return _pipeline_call(run, node, fr, qual, rid, last)
    if rid == "make_iterator" and last.startswith("make_"):
        pos, _ = run.args_of(node, fr)
        ds = pos[0] if pos and isinstance(pos[0], DatasetV) else DatasetV(("value", pos[0] if pos
                                                                            else Sym("")))
        return _iterator(run, node, fr, ds, last)
    if qual.startswith(("tensorflow.data.", "tensorflow.contrib.data.")) and rid != "make_iterator":
        pos, kw = run.args_of(node, fr)
        if last[:1].isupper() or last in ("from_tensor_slices", "from_tensors", "range", "zip",
                                           "list_files", "from_generator"):
            return DatasetV(("call", qual, node, fr, pos, kw), (), run.src.segment(node, 400),
                            dataset_inputs(run, node, fr, last in _COMBINING))
        return Sym(run.render(node, fr), qual=qual, node=node)  # a transformation for .apply
    pos, kw = run.args_of(node, fr)
    run.cur_calls.append((qual, node))
    restacked = _restacked(run, node, fr, qual, pos)
    if restacked is not None:
        return restacked
    if not qual.startswith("tensorflow."):
        handed = queue_handed_out(run, node, fr, pos + list(kw.values()))
        if handed is not None:
            return handed
    if not qual.startswith("tensorflow.") and tensors_in_all(pos + list(kw.values())):
        run.cur_external.append(run.src.segment(node.func, 60))
    extra = _lambdas(run, pos + list(kw.values()), fr)
    out = _opaque(run, node, fr, pos + list(kw.values()) + extra, qual)
    if isinstance(out, Sym) and qual in ("tensorflow.train.match_filenames_once",
                                         "tensorflow.io.match_filenames_once",
                                         "tensorflow.gfile.Glob", "tensorflow.io.gfile.glob",
                                         "glob.glob"):
        out.qual = qual
    return out


def _pipeline_call(run: Interpreter, node: ast.Call, fr: Frame, qual: str, rid: str,
                   last: str) -> Val:
    """Producers, readers, queues, batchers, slim's provider, queue runners, placeholders."""
    rule = rule_for(qual)
    params = (_QUEUE_PARAMS.get(last) or _MAYBE_PARAMS.get(last)
              or (rule.params if rule is not None else ()))
    pos, named = run.args_of(node, fr, params)
    text = run.render(node, fr)()
    if rid in _PRODUCERS:
        q = QueueV("producer", rid, node, fr.fn.qualname, fr.path, named, text=text)
        run.world.queues.append(q)
        return q
    if rid == "slice_input_producer":
        stream = Stream("rows", node, fr.fn.qualname, fr.path, rows=named.get("tensor_list"),
                        args=named, loop=fr.loop)
        run.world.streams.append(stream)
        rows = named.get("tensor_list")
        n = len(rows.items) if isinstance(rows, ListV) else 1
        return ListV([Tensor(stream) for _ in range(n)], text)
    if rid in _READERS:
        return ReaderV(rid, node, fr.fn.qualname, named, run.src.segment(node, 80), text)
    if rid in _QUEUE_KINDS:
        q = QueueV(_QUEUE_KINDS[rid] if last != "PriorityQueue" else "priority", rid, node,
                   fr.fn.qualname, fr.path, named, text=text)
        run.world.queues.append(q)
        return q
    if rid in _BATCHERS:
        inputs = _computed_inputs(run, node, fr, named.get("tensors", named.get("tensors_list")))
        batch = _batch_stream(run, node, fr)
        run.world.ends.append(End(last, node, fr.fn.qualname, fr.path, named, inputs,
                                  construct=run.src.segment(node.func, 80), seq=run.cur_seq,
                                  batch=batch))
        one = inputs.items[0] if last.endswith("join") and isinstance(inputs, ListV) and (
            inputs.items) else inputs
        out = batched(one, batch)
        return ListV([Tensor(batch), out], text) if last.startswith("bucket") else out
    if rid == "slim_provider":
        return ProviderV(node, fr.fn.qualname, named, text)
    if rid in ("numpy_input_fn", "pandas_input_fn"):  # an input_fn: source and batch in one
        run.world.ends.append(End(rid, node, fr.fn.qualname, fr.path, named,
                                  construct=run.src.segment(node.func, 80), seq=run.cur_seq))
        return Sym(text, node=node)
    if rid == "queue_runner":
        queue, ops = named.get("queue"), named.get("enqueue_ops")
        if isinstance(queue, QueueV) and isinstance(ops, ListV):
            queue.copies = ops.loop or Sym(str(len(ops.items)), len(ops.items))
        return Sym(text)
    return PlaceholderV(node, named, text)  # placeholder


def _batch_stream(run: Interpreter, node: ast.Call, fr: Frame) -> Stream:
    stream = Stream("batch", node, fr.fn.qualname, fr.path)
    run.world.streams.append(stream)
    return stream


def batched(inputs: Val | None, stream: Stream) -> Val:
    """What a batch call hands out: the structure it was given (a list, a dict of features),
    each tensor now a batch of ``stream``."""
    if isinstance(inputs, ListV):
        return ListV([batched(v, stream) for v in inputs.items], inputs.text)
    if isinstance(inputs, DictV):
        return DictV({k: batched(v, stream) for k, v in inputs.items.items()}, inputs.text)
    return Tensor(stream)


def _computed_inputs(run: Interpreter, node: ast.Call, fr: Frame, inputs: Val | None) -> Val | None:
    """The tensors a batch call takes; computed in its own arguments
    (``tf.train.batch([tf.image.decode_jpeg(v)], 4)``), its statement is a per-example step."""
    arg = next((k.value for k in node.keywords if k.arg in ("tensors", "tensors_list")),
               node.args[0] if node.args else None)
    if inputs is None:
        return None
    return computed_here(run, fr, [arg] if arg is not None else [], inputs)


_COMPUTING = (ast.Call, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
              ast.Subscript)


def computed_here(run: Interpreter, fr: Frame, nodes: list[ast.expr], val: Val,
                  kinds: tuple[type[ast.AST], ...] = (ast.Call,)) -> Val:
    """``val`` (what ``nodes`` evaluated to), as a step of the statement being run when they
    compute tensors in place (``parts.append(tf.reshape(x, s))``, ``d.update(y=f(x))``): the
    container they go into would otherwise hold tensors no step made. ``kinds``: the nodes
    that count as computing."""
    if not any(isinstance(n, kinds) for a in nodes for n in walk(a)):
        return val
    stmt = run.world.log[run.cur_seq].stmt if run.cur_seq >= 0 else None
    step = run.touch(stmt, fr, [val]) if stmt is not None else None
    return run.stamp(val, step) if step is not None else val


def _iterator(run: Interpreter, node: ast.Call, fr: Frame, ds: DatasetV, method: str) -> Val:
    it = IteratorV(ds, node, fr.fn.qualname, run.src.segment(node, 120))
    run.world.ends.append(End("iterator", node, fr.fn.qualname, fr.path, dataset=ds,
                              construct=method, seq=run.cur_seq))
    return it


def method_call(run: Interpreter, node: ast.Call, fr: Frame, recv: Val, attr: str) -> Val:
    if isinstance(recv, QueueV):
        return _queue_method(run, node, fr, recv, attr)
    if isinstance(recv, ProviderV) and attr == "get":
        return _provider_get(run, node, fr, recv)
    if isinstance(recv, DatasetV) or (attr in DATASET_METHODS | set(ITERATOR_METHODS)
                                      and isinstance(recv, Sym) and (recv.param or not recv.known)
                                      and not recv.qual):
        return _dataset_method(run, node, fr, recv, attr)
    if isinstance(recv, DictV) and attr in _DICT_METHODS:
        return _dict_method(run, node, fr, recv, attr)
    if isinstance(recv, ListV) and attr in ("append", "extend"):
        pos, _ = run.args_of(node, fr)
        pos = [computed_here(run, fr, node.args[:1], pos[0])] if pos else pos
        if pos:
            add = pos[0].items if attr == "extend" and isinstance(pos[0], ListV) else pos[:1]
            recv.items.extend(add)
            if fr.loop is not None:
                recv.loop = fr.loop
        return Sym("None", None)
    if attr in ("read", "read_up_to") and node.args:
        first = run.ev(node.args[0], fr)
        if isinstance(recv, ReaderV) or isinstance(first, QueueV):
            reader = recv if isinstance(recv, ReaderV) else ReaderV(
                "unknown", None, fr.fn.qualname, {},
                _origin(run, recv, node.func.value if isinstance(node.func, ast.Attribute)
                        else node.func), recv.text)
            return _read(run, node, fr, reader, first)
    if isinstance(recv, ObjV):
        method = None if run.presim else run.method_of(recv, attr)
        if method is not None:
            pos, kw = run.args_of(node, fr)
            out = run.call_function(method, pos, kw, fr, bound=recv, call=node)
            if out is not None:
                run.followed.add(id(node))
                return out
            return _opaque(run, node, fr, [recv] + pos + list(kw.values()))
        if attr in recv.attrs:
            return value_call(run, node, fr, recv.attrs[attr])
    if isinstance(recv, IteratorV) and attr == "get_next":  # the dataset's elements
        stream = Stream("iterator", node, fr.fn.qualname, fr.path,
                        args={"dataset": recv.dataset, "iterator": recv.node}, loop=fr.loop)
        run.world.streams.append(stream)
        return Tensor(stream)
    if isinstance(recv, IteratorV) or attr in ("run", "eval"):  # values out of a session
        run.args_of(node, fr)
        return Sym(run.render(node, fr), node=node)
    pos, kw = run.args_of(node, fr)
    if isinstance(recv, Tensor):  # a tensor's method (a table's lookup of an example's key)
        tensors = [recv] + [t for v in pos + list(kw.values()) for t in tensors_in(v)]
        return Tensor(primary(tensors), frozenset().union(*(t.deps for t in tensors)))
    if isinstance(recv, FuncV):
        return value_call(run, node, fr, recv)
    handed = None if isinstance(recv, ObjV) else queue_handed_out(run, node, fr,
                                                                  pos + list(kw.values()))
    if handed is not None:
        return handed
    if not isinstance(recv, ObjV) and tensors_in_all(pos + list(kw.values())):
        run.cur_external.append(run.src.segment(node.func, 60))  # an object from elsewhere
    return _opaque(run, node, fr, [recv] + pos + list(kw.values()))


_STACKS = frozenset({"tensorflow.stack", "tensorflow.parallel_stack", "tensorflow.concat"})


def _restacked(run: Interpreter, node: ast.Call, fr: Frame, qual: str,
               pos: list[Val]) -> Val | None:
    """``tf.parallel_stack(images)`` of a list filled in a loop over the records a RecordInput
    yielded together: the batch again; what follows is per batch, not per record."""
    if qual not in _STACKS or not pos or not isinstance(pos[0], ListV) or pos[0].loop is None:
        return None
    tensors = tensors_in(pos[0])
    if not tensors or not any(t.stream.reader is not None and t.stream.reader.kind ==
                              "record_input" for t in tensors):
        return None
    stream = Stream("stacked", node, fr.fn.qualname, fr.path)
    run.world.streams.append(stream)
    return Tensor(stream)


def queue_handed_out(run: Interpreter, node: ast.Call, fr: Frame, vals: list[Val]) -> Val | None:
    """A call defined outside this file given one of the pipeline's queues: it reads a filename
    queue (``reader.prepare_reader(filename_queue)``: records it reads and parses itself), or it
    takes a queue filled here (``facenet.create_input_pipeline(input_queue, ...)``: it dequeues
    and batches it, which ends the pipeline here). None when no queue is given."""
    queues = [v for v in vals for v in (v.items if isinstance(v, ListV) else [v])
              if isinstance(v, QueueV)]
    if not queues:
        return None
    q = queues[0]
    more = len(node.args) + len(node.keywords) > 1
    text = f"{run.src.segment(node.func, 60)}({q.text or '...'}{', ...' if more else ''})"
    if q.kind == "producer":
        reader = ReaderV("external", node, fr.fn.qualname, {}, text, text)
        stream = Stream("records", node, fr.fn.qualname, fr.path, queue=q, reader=reader,
                        loop=fr.loop)
        run.world.streams.append(stream)
        return Tensor(stream)
    run.world.ends.append(End("external", node, fr.fn.qualname, fr.path, queue=q,
                              construct=run.src.segment(node.func, 80), seq=run.cur_seq,
                              call=text))
    return Sym(run.render(node, fr), node=node)


def _origin(run: Interpreter, recv: Val, expr: ast.AST) -> str:
    """How the script got an object we do not know (``dataset.reader()``, ``self.reader``)."""
    node = getattr(recv, "node", None)
    return run.src.segment(node if node is not None else expr, 80)


def _read(run: Interpreter, node: ast.Call, fr: Frame, reader: ReaderV, queue: Val) -> Val:
    stream = Stream("records", node, fr.fn.qualname, fr.path,
                    queue=queue if isinstance(queue, QueueV) else None, reader=reader,
                    loop=fr.loop)
    if isinstance(node.func, ast.Attribute) and node.func.attr == "read_up_to":
        pos, kw = run.args_of(node, fr)
        stream.args["up_to"] = pos[1] if len(pos) > 1 else kw.get("num_records")
    run.world.streams.append(stream)
    run.keys_made = True
    return ListV([Tensor(stream, key=True), Tensor(stream)], run.render(node, fr)())


def _queue_method(run: Interpreter, node: ast.Call, fr: Frame, q: QueueV, attr: str) -> Val:
    pos, kw = run.args_of(node, fr)
    if attr in ("enqueue", "enqueue_many"):
        arg = node.args[:1] or [k.value for k in node.keywords if k.arg == "vals"]
        values = computed_here(run, fr, arg, pos[0] if pos else kw.get("vals", Sym("")),
                               _COMPUTING)
        op = EnqueueV(q, values, attr == "enqueue_many", node, fr.fn.qualname,
                      run.src.segment(node, 120), loop=fr.loop, info=fr.fn)
        q.enqueues.append(op)
        return op
    if attr == "dequeue":
        stream = Stream("dequeue", node, fr.fn.qualname, fr.path, queue=q, loop=fr.loop)
        run.world.streams.append(stream)
        return Tensor(stream)
    if attr in ("dequeue_many", "dequeue_up_to"):
        n = pos[0] if pos else kw.get("n", Sym(""))
        batch = _batch_stream(run, node, fr)
        run.world.ends.append(End(attr, node, fr.fn.qualname, fr.path, {"batch_size": n},
                                  queue=q, construct=run.src.segment(node.func, 80),
                                  seq=run.cur_seq, batch=batch))
        return batched(q.enqueues[0].values if q.enqueues else None, batch)
    if attr == "get_yield_op" and q.rule == "record_input":  # batch_size shuffled records
        reader = ReaderV("record_input", q.node, q.fn, q.args, "data_flow_ops.RecordInput",
                         q.text)
        stream = Stream("records", node, fr.fn.qualname, fr.path, queue=q, reader=reader,
                        loop=fr.loop)
        run.world.streams.append(stream)
        return Tensor(stream)
    if attr == "close":
        q.closed = True
    return Sym(run.render(node, fr), node=node)


def _provider_get(run: Interpreter, node: ast.Call, fr: Frame, provider: ProviderV) -> Val:
    pos, _ = run.args_of(node, fr)
    stream = Stream("provider", node, fr.fn.qualname, fr.path, args=dict(provider.args),
                    rows=pos[0] if pos else None)
    stream.reader = None
    stream.queue = None
    stream.args["provider"] = provider
    run.world.streams.append(stream)
    items = pos[0] if pos else None
    n = len(items.items) if isinstance(items, ListV) else 1
    return ListV([Tensor(stream) for _ in range(n)], run.render(node, fr)())


def _dataset_method(run: Interpreter, node: ast.Call, fr: Frame, recv: Val, attr: str) -> Val:
    ds = recv if isinstance(recv, DatasetV) else DatasetV(("value", recv), (), recv.text)
    if attr in ITERATOR_METHODS:
        return _iterator(run, node, fr, ds, attr)
    pos, kw = run.args_of(node, fr)
    out = DatasetV(ds.head, ds.ops + ((attr, node, fr, pos, kw, fr.guards),),
                   run.src.segment(node, 120),
                   ds.inputs + dataset_inputs(run, node, fr, attr in _COMBINING))
    return out


#: Dataset constructors and methods whose arguments are datasets.
_COMBINING = frozenset({"zip", "concatenate", "sample_from_datasets", "choose_from_datasets"})


def dataset_inputs(run: Interpreter, node: ast.Call, fr: Frame,
                   combining: bool) -> tuple[tuple[str, DatasetV], ...]:
    """The datasets a call takes by name in its arguments (``zip((ds, counter))``); for a call
    that combines datasets, a name the run knows nothing of is a dataset made elsewhere."""
    out: list[tuple[str, DatasetV]] = []
    for a in list(node.args) + [k.value for k in node.keywords]:
        for n in ast.walk(a):  # in the order written
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                val = run.lookup(n.id, fr, n)
                if combining and isinstance(val, Sym) and not val.known and not val.qual:
                    val = DatasetV(("value", val, node), (), n.id)
                if isinstance(val, DatasetV) and all(val is not v for _, v in out):
                    out.append((n.id, val))
    return tuple(out)


def value_call(run: Interpreter, node: ast.Call, fr: Frame, callee: Val) -> Val:
    if isinstance(callee, FuncV):
        pos, kw = run.args_of(node, fr)
        out = run.call_function(callee.info, pos, kw, fr, bound=callee.bound,
                                closure=callee.closure, call=node)
        if out is not None:
            run.followed.add(id(node))
            return out
        return _opaque(run, node, fr, pos + list(kw.values()))
    if isinstance(callee, ClassV):
        return _instance(run, node, fr, callee)
    if isinstance(callee, Sym) and callee.qual:
        return tf_call(run, node, fr, callee.qual)
    pos, kw = run.args_of(node, fr)
    vals = pos + list(kw.values())
    name = callee.text if isinstance(callee, Sym) else ""
    builtin = is_builtin(run, node, fr)
    handed = None if builtin else queue_handed_out(run, node, fr, vals)
    if handed is not None:
        return handed
    if builtin and name in _CONTAINERS:
        out = _container(run, node, fr, name, pos, kw)
        if out is not None:
            return out
    if tensors_in_all(vals) and name and not builtin and name not in run.mod.record_types:
        run.cur_external.append(name)
    return _builtin(run, node, fr, name, pos, vals)


_CONTAINERS = frozenset({"dict", "zip", "list", "tuple"})
_DICT_METHODS = frozenset({"items", "keys", "values", "pop", "get", "update", "copy",
                           "setdefault"})


def _container(run: Interpreter, node: ast.Call, fr: Frame, name: str, pos: list[Val],
               kw: dict[str, Val]) -> Val | None:
    """``dict(...)``, ``zip(...)``, ``list(...)``, ``tuple(...)`` of values the run holds as
    containers, so the tensors in them keep their places; None: not such a call."""
    text = run.render(node, fr)()
    starred = len(node.args) == 1 and isinstance(node.args[0], ast.Starred)
    if name == "dict":
        items: dict[object, Val] = {}
        if pos:
            first = pos[0]
            if isinstance(first, DictV):
                items.update(first.items)
            elif isinstance(first, ListV) and first.loop is None and all(
                    isinstance(p, ListV) and len(p.items) == 2 for p in first.items):
                pairs = [p for p in first.items if isinstance(p, ListV)]
                items.update((dict_key(p.items[0]), p.items[1]) for p in pairs)
            else:
                return None
        items.update(kw)
        return DictV(items, text)
    if name == "zip":
        given = (pos[0].items if starred and isinstance(pos[0], ListV) else pos)
        columns = [c for c in given if isinstance(c, ListV) and c.loop is None]
        if not columns or len(columns) != len(given):
            return None
        n = min(len(c.items) for c in columns)
        return ListV([ListV([c.items[i] for c in columns]) for i in range(n)], text)
    if len(pos) == 1 and not kw and not starred:  # list(x), tuple(x)
        one = pos[0]
        if isinstance(one, ListV):
            return ListV(list(one.items), text, one.loop)
        if isinstance(one, DictV):
            return ListV([values.key_val(k) for k in one.items], text)
    return None


def _dict_method(run: Interpreter, node: ast.Call, fr: Frame, d: DictV, attr: str) -> Val:
    pos, kw = run.args_of(node, fr)
    if attr in ("update", "setdefault"):
        given = ListV(pos + list(kw.values()))
        both = computed_here(run, fr, list(node.args) + [k.value for k in node.keywords], given)
        items = both.items if isinstance(both, ListV) else given.items
        pos, kw = items[:len(pos)], dict(zip(kw, items[len(pos):]))
    text = run.render(node, fr)()
    if attr == "items":
        return ListV(d.pairs(), text)
    if attr == "keys":
        return ListV([values.key_val(k) for k in d.items], text)
    if attr == "values":
        return ListV(list(d.items.values()), text)
    if attr == "copy":
        return DictV(dict(d.items), text)
    if attr == "update":
        if pos and isinstance(pos[0], DictV):
            d.items.update(pos[0].items)
        d.items.update(kw)
        return Sym("None", None)
    key = dict_key(pos[0]) if pos else None
    default = pos[1] if len(pos) > 1 else Sym("None", None)
    if attr == "pop":
        return d.items.pop(key, default) if key in d.items else _unknown_entry(d, default)
    if attr == "setdefault":
        return d.items.setdefault(key, default)
    return d.items.get(key, default) if key in d.items else _unknown_entry(d, default)  # get


def _unknown_entry(d: DictV, default: Val) -> Val:
    """An entry the run cannot tell apart: any of the values (their tensors kept)."""
    return merge(list(d.items.values()) + [default]) if d.items else default


#: Python's own functions: never "defined outside this file".
BUILTINS = frozenset(n for n in dir(builtins) if not n.startswith("_"))


def is_builtin(run: Interpreter, node: ast.Call, fr: Frame) -> bool:
    """Is the callee a Python builtin (a bare name the script binds nowhere: ``zip``, ``dict``,
    ``len``)?"""
    func = node.func
    if not (isinstance(func, ast.Name) and func.id in BUILTINS):
        return False
    name = func.id
    f: Frame | None = fr
    while f is not None:
        if f.get(name) is not None:
            return False
        f = f.parent
    mod = run.mod
    return name not in mod.by_name and name not in mod.classes and name not in mod.imports


def _builtin(run: Interpreter, node: ast.Call, fr: Frame, name: str, pos: list[Val],
             vals: list[Val]) -> Val:
    """Builtins whose value we can tell (``len`` of a literal list, ``int`` of a number)."""
    out = _opaque(run, node, fr, vals)
    if not isinstance(out, Sym):
        return out
    one = pos[0] if len(pos) == 1 else None
    if name == "len" and isinstance(one, ListV) and one.loop is None:
        out.const = len(one.items)
    elif name == "len" and isinstance(one, DictV) and not any(
            isinstance(k, tuple) for k in one.items):
        out.const = len(one.items)
    elif name in ("int", "float") and isinstance(one, Sym) and isinstance(one.const, (int, float)):
        out.const = int(one.const) if name == "int" else float(one.const)
    elif name in ("min", "max") and pos and all(isinstance(p, Sym) and isinstance(
            p.const, (int, float)) for p in pos):
        nums = [p.const for p in pos if isinstance(p, Sym) and isinstance(p.const, (int, float))]
        out.const = min(nums) if name == "min" else max(nums)
    elif name in _LISTS:
        out.listish = True
    return out


def _instance(run: Interpreter, node: ast.Call, fr: Frame, cls: ClassV) -> Val:
    obj = ObjV({}, run.render(node, fr)(), cls.info)
    if cls.info is not None and "__init__" in cls.info.methods:
        pos, kw = run.args_of(node, fr)
        run.call_function(cls.info.methods["__init__"], pos, kw, fr, bound=obj, call=node)
    return obj


__all__ = ["call", "tf_call", "method_call", "value_call", "DATASET_METHODS"]
