"""From the symbolic runs of :mod:`.flow` to the typed plan of :mod:`.model`: one
:class:`~.model.Pipeline` per pipeline function and batch/dequeue call.

Each entry function is run in every world (:func:`.flow.run_entry`); every end it reaches is
traced back to its source through explicit queues, readers and per-example steps. A pipeline
belongs to the innermost function that builds both its source and its end (so CIFAR-10's
``distorted_inputs`` and ``inputs`` are two pipelines, and a ``main()`` that calls ``inputs()`` adds
none); the worlds of one end are its variants. A pipeline whose elements come from a parameter
is kept only when no pipeline with a known source reaches the same end.
"""
from __future__ import annotations

import ast
import collections
import dataclasses
import re
from collections.abc import Iterable

from compare.migration import chain as _chain
from compare.migration import model as m
from compare.migration.astutil import line_of
from compare.migration.flow import run_entry
from compare.migration.rules import rule_for
from compare.migration.scan import walk
from compare.migration.source import Where
from compare.migration.state import Budget, Origin, World
from compare.migration.values import (
    MODULE,
    DatasetV,
    End,
    EnqueueV,
    FeedRun,
    FuncInfo,
    ListV,
    Module,
    PlaceholderV,
    QueueV,
    ReaderV,
    StepRec,
    Stream,
    Sym,
    Tensor,
    Val,
    feed_owner,
    tensors_in,
)

#: Stateless replacement of each stateful random rule.
STATELESS: dict[str, str] = {
    "random_crop": "tf.image.stateless_random_crop",
    "random_shuffle": "tf.random.experimental.stateless_shuffle",
    "random_uniform": "tf.random.stateless_uniform",
    "random_normal": "tf.random.stateless_normal",
    "truncated_normal": "tf.random.stateless_truncated_normal",
    "multinomial": "tf.random.stateless_categorical",
    "categorical": "tf.random.stateless_categorical",
    "random_gamma": "tf.random.stateless_gamma",
    "random_poisson": "tf.random.stateless_poisson",
    "dropout": "tf.nn.experimental.stateless_dropout",
    "sample_distorted_bounding_box": "tf.image.stateless_sample_distorted_bounding_box",
}
_READER_KIND = {"whole_file_reader": "whole_file", "tfrecord_reader": "tfrecord",
                "record_input": "tfrecord",
                "text_line_reader": "text_line", "fixed_length_record_reader": "fixed_length",
                "other_reader": "other", "unknown": "unknown", "external": "unknown"}
_INPUT_FNS = frozenset({"numpy_input_fn", "pandas_input_fn"})
#: Python functions that only put values into a container or count them.
_PACKERS = frozenset({"dict", "list", "tuple", "zip", "len"})
#: Statement budget of the whole analysis: this many per statement of the script, plus a floor.
BUDGET_PER_STATEMENT = 6
BUDGET_FLOOR = 20000


def budget_for(statements: int) -> Budget:
    return Budget(BUDGET_FLOOR + BUDGET_PER_STATEMENT * statements)


@dataclasses.dataclass
class _Found:
    world: World
    end: End
    source_path: tuple[str, ...]
    known_source: bool
    touched: set[int]


class _Builder:
    """Turns one (world, end) into a :class:`~.model.Variant` and its unresolved items."""

    def __init__(self, mod: Module, world: World, end: End):
        self.mod, self.world, self.end = mod, world, end
        self.seg = mod.scan.source.segment
        self.unresolved: list[m.Unresolved] = []
        self.notes: list[str] = []
        self.stages: list[m.Stage] = []
        self.branches: list[m.Branch] = []
        self.owner = world.entry

    # -- code -------------------------------------------------------------------------------
    def code(self, val: Val | None) -> m.Code | None:
        if val is None:
            return None
        text = val.text if val.text else ""
        if isinstance(val, Sym) and val.known and isinstance(val.const, (bool, int, float, str,
                                                                          type(None))):
            return m.Code(text or repr(val.const), True, val.const)
        return m.Code(text)

    def site(self, node: ast.AST, fn: str, construct: str = "") -> m.Site:
        return m.Site(fn, line_of(node), construct or self.seg(getattr(node, "func", node), 80))

    # -- steps ------------------------------------------------------------------------------
    def steps_for(self, streams: tuple[Stream, ...],
                  deps: frozenset[int] | None) -> list[StepRec]:
        """The steps of these streams (``deps``: only those, and the graph constants' among
        them)."""
        ids = {id(s) for s in streams}
        steps = self.world.steps
        if deps is not None:
            recs = [steps[d] for d in deps if d in steps and (
                id(steps[d].stream) in ids or steps[d].stream.kind == "float")]
        else:
            by_stream = self.world.steps_by_stream()
            recs = [r for i in ids for r in by_stream.get(i, ())]
        return sorted(recs, key=lambda s: s.id)

    def map_stage(self, streams: tuple[Stream, ...], deps: frozenset[int] | None,
                  parallel: m.Code | None,
                  parallel_from: str) -> m.MapStage | None:
        recs = self.steps_for(streams, deps)
        if not recs:
            return None
        stage = m.MapStage("", self.steps(recs, "example"), parallel, parallel_from,
                           self.random_draws(recs), seqs=tuple(r.seq for r in recs))
        self.loop_variable_note(recs)
        return stage

    def steps(self, recs: list[StepRec], per: str) -> list[m.Step]:
        """The recorded statements as plan steps (one per statement, however often run)."""
        steps: list[m.Step] = []
        by_stmt: dict[int, list[StepRec]] = {}
        for r in recs:
            by_stmt.setdefault(id(r.stmt), []).append(r)
        for group in by_stmt.values():
            r = group[0]
            calls = tuple(dict.fromkeys(q for q, _ in r.calls if q.startswith("tensorflow.")))
            guards = tuple(g for g in r.guards if all(g in x.guards for x in group))
            steps.append(m.Step(r.fn, r.stmt.lineno, r.stmt.end_lineno or r.stmt.lineno,
                                self.seg(r.stmt, 160), calls, guards, len(group),
                                tuple(dict.fromkeys(r.external)), loop=r.loop))
            for name in dict.fromkeys(r.external):
                self.unresolved.append(self.external_item(name, r.stmt.lineno, per))
        return steps

    def per_batch(self, end: End) -> None:
        """The code after the batch call that makes what the pipeline function hands out (its
        return value, or what a method stores on ``self``): one map over batches. The model
        and the loop that use the batches in the function itself are not part of it."""
        batch = next((s for s in self.stages if isinstance(s, m.BatchStage)), None)
        if batch is None or end.batch is None:
            return
        out = [self.world.returned] + ([self.world.me] if self.world.me is not None else [])
        steps = self.world.steps
        deps = frozenset().union(*(t.deps for v in out for t in tensors_in(v) if (
            t.stream is end.batch or any(steps[d].stream is end.batch for d in t.deps))))
        recs = [steps[d] for d in deps if d in steps and (
            steps[d].stream is end.batch or steps[d].stream.kind == "float")]
        if recs and not all(self.packing(r.stmt) for r in recs):
            recs.sort(key=lambda r: r.id)
            batch.after = self.steps(recs, "batch")
            batch.after_random = self.random_draws(recs)
            split = next((s for s in batch.after if "tensorflow.unstack" in s.calls), None)
            looped = [s for s in batch.after if s.loop]
            looped = [s for s in looped if s.loop == looped[0].loop]
            if split is not None and looped:
                self.notes.append(
                    f"after the batch, line {split.line} unstacks it and lines "
                    f"{looped[0].line}-{looped[-1].end_line} process each element in a loop "
                    f"of {looped[0].loop}: that is per-example code; it belongs in the "
                    "per-example map, before the batch (its random draws then differ per "
                    "example as they did)")

    def packing(self, stmt: ast.stmt) -> bool:
        """A statement that only puts the batches into a container (a namedtuple, a dict, a
        tuple) and counts things: nothing for a per-batch map to do."""
        value = getattr(stmt, "value", None)
        if value is None:
            return False
        for n in walk(value):
            if isinstance(n, ast.Call):
                name = n.func.id if isinstance(n.func, ast.Name) else ""
                if name not in self.mod.record_types and name not in _PACKERS:
                    return False
            elif isinstance(n, (ast.BinOp, ast.Subscript, ast.Attribute)):
                return False
        return True

    def external_item(self, name: str, line: int, per: str = "example") -> m.Unresolved:
        """A function the per-example (per-batch) code calls that this file does not define
        (or calls through a decorator that changes what it does)."""
        decorated = next((fi for fi in self.mod.functions if fi.qualname == name and
                          fi.decorator), None)
        if decorated is not None:
            return m.Unresolved(
                f"{name} (called on each example, through {decorated.decorator})", line,
                f"defined at line {line_of(decorated.node)}, but the decorator decides what the "
                "call does (a library's own producer or wrapper): port the body by hand inside "
                "the map (Python code such as NumPy through tf.numpy_function), and check it "
                "for randomness")
        return m.Unresolved(f"{name} (called on each {per})", line,
                            "defined outside this file: it runs inside Dataset.map as it is; "
                            "check it for stateful random ops and TF1-only calls")

    def random_draws(self, recs: list[StepRec]) -> list[m.RandomDraw]:
        draws: dict[int, m.RandomDraw] = {}
        for r in recs:
            for qual, call in r.calls:
                rule = rule_for(qual)
                if rule is None or rule.category != "stateful_random" or rule.id == \
                        "set_random_seed":
                    continue
                if id(call) in draws:
                    draws[id(call)].uses += 1
                    continue
                seed = _arg(call, "seed", rule.params)
                stateless = STATELESS.get(rule.id, f"tf.image.stateless_{rule.id.split('.')[-1]}")
                draws[id(call)] = m.RandomDraw(
                    self.seg(call.func, 80), qual, stateless, r.fn, line_of(call),
                    m.Code(self.seg(seed, 80), isinstance(seed, ast.Constant),
                           getattr(seed, "value", None)) if seed is not None else None)
        out = list(draws.values())
        for d in out:
            if d.seed is not None:
                d.shares_seed_with = tuple(o.line for o in out if o is not d and o.seed is not None
                                           and o.seed.text == d.seed.text)
        return out

    def loop_variable_note(self, recs: list[StepRec]) -> None:
        end = self.end
        inputs = end.inputs
        if not (isinstance(inputs, ListV) and inputs.loop is not None and end.kind.endswith(
                "join")):
            return
        for var in getattr(inputs.loop, "loop_vars", ()) or ():
            uses = [r for r in recs if _mentions(var, r)]
            if uses:
                line = uses[0].stmt.lineno
                self.unresolved.append(m.Unresolved(
                    f"{var} (the loop variable of the {inputs.loop.text} copies)", line,
                    "the copies differ by it, and one Dataset.map has no copy number: keep one "
                    "behaviour, or draw it per example"))

    # -- sources ----------------------------------------------------------------------------
    def from_stream(self, stream: Stream, deps: frozenset[int] | None, parallel: m.Code | None,
                    parallel_from: str) -> m.Source:
        """The source of ``stream`` (stages before it appended first), then its map stage."""
        source = self.stream_source(stream)
        stage = self.map_stage((stream,), deps, parallel, parallel_from)
        if stage is not None:
            self.stages.append(stage)
        return source

    def from_tensors(self, tensors: list[Tensor], parallel: m.Code | None,
                     how: str) -> m.Source:
        """The source of the streams ``tensors`` come from: one stream as :meth:`from_stream`;
        several (an image and its camera file) as branches zipped before the map that
        combines them."""
        tensors = [t for t in tensors if t.stream.kind != "float"] or tensors
        streams = list({id(t.stream): t.stream for t in tensors}.values())
        deps = frozenset().union(*(t.deps for t in tensors))
        if len(streams) == 1:
            return self.from_stream(streams[0], deps, parallel, how)
        outer, branches = self.stages, []
        for s in streams:
            self.stages = []
            branches.append(m.Branch(self.stream_source(s), self.stages))
            self.stages = outer
        source = _shared_source([b.source for b in branches])
        if source is not None:
            for i, b in enumerate(branches):
                b.component = i
        else:
            source = m.Source("zip", None, m.Code(f"{len(branches)} streams"), repeat=False)
        self.branches = branches
        stage = self.map_stage(tuple(streams), deps, parallel, how)
        if stage is not None:
            self.stages.append(stage)
        return source

    def stream_source(self, stream: Stream) -> m.Source:
        if stream.kind == "records":
            reader = getattr(stream.node, "func", stream.node)
            source = self.queue_source(stream.queue, stream) if stream.queue else self.unknown(
                f"the filename queue given to {self.seg(reader, 60)}", stream.node,
                "it is made outside this function (a parameter or another module)")
            self.stages.append(self.read_stage(stream))
            if m.req(stream.reader).kind == "record_input":
                self.stages.append(self.record_input_shuffle(stream))
            return source
        if stream.kind == "rows":
            a = stream.args
            rows = stream.rows
            if isinstance(rows, Sym) and rows.over and not rows.known:  # one producer per item
                return self.unknown(
                    f"{rows.text} (the loop variable over {rows.over})", stream.node,
                    f"each value of it makes a producer of its own: one dataset per value of "
                    f"{rows.over}, combined (tf.data.Dataset.sample_from_datasets([tf.data."
                    f"Dataset.from_tensor_slices({rows.text}) for {rows.text} in "
                    f"{rows.over}])), with the producer's shuffle and repeat on each")
            return m.Source("rows", self.site(stream.node, stream.fn), self.code(stream.rows),
                            self.code(a.get("num_epochs")), self.code(a.get("shuffle")),
                            self.code(a.get("seed")), self.code(a.get("capacity")),
                            target=stream.target)
        if stream.kind == "dequeue":
            queue = m.req(stream.queue)
            source = self.queue_source(queue, stream)
            self.stages.append(self.queue_stage(queue))
            return source
        if stream.kind == "provider":
            return self.provider_source(stream)
        if stream.kind == "iterator":  # a tf.data pipeline's elements, enqueued
            return self.dataset_variant(stream.args["dataset"])
        if stream.kind == "batch":  # batches of another batch call, enqueued again
            upstream = next((e for e in self.world.ends if e.batch is stream), None)
            if upstream is not None and upstream is not self.end:
                return self.batch_variant(upstream)
        if stream.kind == "param" and stream.param:
            return self.unknown(f"{stream.param} (a parameter of {self.owner.qualname})",
                                stream.node, "its elements are made by the caller, outside this "
                                "function: start the dataset there")
        return self.unknown(f"the elements of {self.seg(stream.node, 60)}", stream.node,
                            "this plan cannot follow where they come from")

    def unknown(self, what: str, node: ast.AST, why: str) -> m.Source:
        self.unresolved.append(m.Unresolved(what, line_of(node), why))
        return m.Source("unknown", None, m.Code(what))

    def read_stage(self, stream: Stream) -> m.ReadStage:
        r = m.req(stream.reader)
        kind = _READER_KIND.get(r.kind, "other")
        if r.kind == "external":
            self.unresolved.append(m.Unresolved(
                f"{r.origin} (reads the filename queue)", line_of(stream.node),
                "defined outside this file: it reads the records and turns each into tensors "
                "itself; its record format decides the record dataset (TFRecordDataset for a "
                "TFRecordReader, ...) and what it does per record the map after it"))
        elif kind == "unknown":
            self.unresolved.append(m.Unresolved(
                f"{r.origin} (the reader)", line_of(stream.node),
                "made outside this file (a parameter, another module or an attribute): its "
                "record format decides the record dataset (TFRecordDataset for a TFRecordReader, "
                "FixedLengthRecordDataset, TextLineDataset, ...)"))
        made = self.site(r.node, r.fn) if r.node is not None else None
        options = self.code(r.args.get("options"))
        if options is not None and not _chain.compression_type(options):
            self.unresolved.append(m.Unresolved(
                f"options={options.text} of the reader", line_of(r.node or stream.node),
                "its compression is not written out here: pass it to TFRecordDataset as "
                "compression_type (\"GZIP\" or \"ZLIB\")"))
        key_used = bool(stream.key_ids) or any(
            t.key and t.stream is stream for t in tensors_in(self.end.inputs))
        readers = self.code(stream.loop) if stream.loop is not None else None
        if r.kind == "record_input":  # its parallelism readers (16 by default)
            readers = self.code(r.args.get("parallelism")) or m.tf1_default("record_input",
                                                                              "parallelism")
            r.args = {}
        return m.ReadStage(kind, r.origin, self.site(stream.node, stream.fn), made,
                           {k: c for k, v in r.args.items() if (c := self.code(v)) is not None},
                           readers, key_used,
                           stream.target, self.code(stream.args.get("up_to")),
                           external=r.kind == "external")

    def queue_source(self, q: QueueV, stream: Stream | None) -> m.Source:
        if q.kind == "producer":
            return self.producer_source(q, stream.loop if stream is not None else None)
        if not q.enqueues:
            return self.unknown(f"what fills {q.text or 'the queue'}", q.node,
                                "nothing in this file enqueues into it")
        op = q.enqueues[0]
        if len(q.enqueues) > 1:
            self.notes.append(f"{len(q.enqueues)} enqueue calls fill {q.text}; the plan follows "
                              f"the first (line {op.node.lineno})")
        values = op.values
        if any(isinstance(v, PlaceholderV) for v in _flat(values)):
            source = self.generator_source(q, op, values)
            self.unbatch(op)
            return source
        tensors = [t for t in tensors_in(values) if t.stream.kind not in ("float", "param")]
        params = _params_in(values) + [t.stream.param for t in tensors_in(values)
                                       if t.stream.kind == "param"]
        if not tensors and params and not op.many:  # one example, made by the caller
            names = ", ".join(dict.fromkeys(params))
            return self.unknown(f"{names} (a parameter of {self.owner.qualname})",
                                op.node, "the caller makes the examples enqueued here, outside "
                                "this function: plan the caller's pipeline, with this "
                                "function's code in its per-example map")
        if not tensors:
            return self.computed_source(q, op, stream)
        copies = q.copies or op.loop
        how = (_runner_ops(q.copies) if q.copies is not None else
               f"the {copies.text} enqueue calls" if copies is not None else "")
        source = self.from_tensors(tensors, self.code(copies) if copies else None, how)
        self.unbatch(op)
        return source

    def unbatch(self, op: EnqueueV) -> None:
        """``enqueue_many`` put batches into the queue: their rows are its elements."""
        if op.many:
            self.stages.append(m.UnbatchStage(self.site(op.node, op.fn)))

    def computed_source(self, q: QueueV, op: EnqueueV, stream: Stream | None) -> m.Source:
        """A queue filled with what its enqueue op computes from constants or the function's
        parameters, not from a reader: each run of the op makes its elements anew (random ops
        draw again). Rows the op puts in whole and the same each time (``enqueue_many`` of
        data) are sliced; anything else is computed per element in a map."""
        site = self.site(op.node, op.fn)
        endless = q.copies is not None and not q.closed
        order = "in the order enqueued (a FIFOQueue keeps it)" if q.kind != "random_shuffle" \
            else "shuffled by the RandomShuffleQueue (its buffer below)"
        deps = frozenset().union(*(t.deps for t in tensors_in(op.values)))
        recs = sorted((r for r in self.world.steps.values() if r.id in deps),
                      key=lambda r: r.id)
        draws = self.random_draws(recs)
        target = stream.target if stream is not None else ""
        if op.many and not draws:
            return m.Source("rows", site, self._enqueued(op), repeat=endless, order=order,
                            target=target)
        how = _runner_ops(q.copies) if q.copies is not None else ""
        self.stages.append(m.MapStage("", self.steps(recs, "element"),
                                      self.code(q.copies) if q.copies is not None else None,
                                      how, draws, seqs=tuple(r.seq for r in recs)))
        self.unbatch(op)
        if not endless:
            self.unresolved.append(m.Unresolved(
                f"how often {self.seg(op.node.func, 60)} runs", op.node.lineno,
                "no QueueRunner in this file runs the enqueue op, so the script runs it itself "
                "as often as it likes: end the dataset after that many elements (.take(n))"))
        return m.Source("computed", site, self._enqueued(op), repeat=False, order=order,
                        endless=endless, target=target)

    def _enqueued(self, op: EnqueueV) -> m.Code:
        """What an enqueue op puts in, in the function's terms (as written when that is all)."""
        code = self.code(op.values)
        if code is not None and code.text:
            return code
        arg = op.node.args[0] if op.node.args else next(
            (k.value for k in op.node.keywords if k.arg == "vals"), op.node)
        return m.Code(self.seg(arg, 200))

    def producer_source(self, q: QueueV, copies: Sym | None = None) -> m.Source:
        """A producer's source; made in a loop of copies over data (``for f in names:
        string_input_producer([f])``, each copy reading its own files), the loop's data."""
        a = q.args
        site = self.site(q.node, q.fn)
        seed = self.code(a.get("seed"))
        if q.rule == "record_input":  # its files in random order, read in parallel, shuffled
            return m.Source("file_pattern", site, self.code(a.get("file_pattern")),
                            shuffle=m.Code("True", True, True), seed=seed)

        def source(kind: str, data: m.Code | None, columns: bool = True,
                   shuffle_note: str = "") -> m.Source:
            return m.Source(kind, site, data, self.code(a.get("num_epochs")),
                            self.code(a.get("shuffle")), seed, self.code(a.get("capacity")),
                            columns=columns, shuffle_note=shuffle_note)
        if q.rule == "range_input_producer":
            return source("range", self.code(a.get("limit")))
        if q.rule == "input_producer":
            return source("rows", self.code(a.get("input_tensor")), columns=False)
        files = a.get("string_tensor")
        pattern = _pattern(files)
        if pattern is not None:
            return source("file_pattern", m.Code(self.seg(pattern, 200)))
        one = files.items[0] if isinstance(files, ListV) and len(files.items) == 1 else files
        if copies is not None and isinstance(one, Sym) and one.over:
            note = "never: each copy's queue held one file" if one is not files else ""
            return source("files", m.Code(one.over), shuffle_note=note)
        return source("files", self.code(files))

    def record_input_shuffle(self, stream: Stream) -> m.QueueStage:
        queue = m.req(stream.queue)
        a = queue.args
        return m.QueueStage("random_shuffle", self.site(queue.node, queue.fn),
                            min_after_dequeue=self.code(a.get("buffer_size")) or
                            m.tf1_default("record_input", "buffer_size"),
                            seed=self.code(a.get("seed")))

    def record_input_batch(self, stream: Stream) -> None:
        """get_yield_op gave batch_size records at once; the script split them and ran its
        per-record code on each, in a loop: one map before a batch of that size."""
        q = m.req(stream.queue)
        size = self.code(q.args.get("batch_size"))
        self.stages.append(m.BatchStage("get_yield_op", self.site(stream.node, stream.fn),
                                        {"batch_size": size} if size else {}))
        loops = {s.loop for s in self.steps_for((stream,), None) if s.loop}
        if loops:
            self.unresolved.append(m.Unresolved(
                f"the per-record code's loop over the batch ({', '.join(sorted(loops))})",
                line_of(stream.node),
                "the script runs it once per position in the batch; one Dataset.map has no "
                "position: where the code uses it (to pick a method or a seed), draw it per "
                "example or number the records with .enumerate()"))

    def queue_stage(self, q: QueueV) -> m.QueueStage:
        a = q.args
        return m.QueueStage(q.kind, self.site(q.node, q.fn), self.code(a.get("capacity")),
                            self.code(a.get("min_after_dequeue")), self.code(a.get("seed")))

    def provider_source(self, stream: Stream) -> m.Source:
        p = stream.args["provider"]
        a = p.args
        ds = a.get("dataset")
        name = ds.text if ds is not None else "dataset"
        self.unresolved.append(m.Unresolved(
            f"{name} (the slim Dataset given to DatasetDataProvider)", p.node.lineno,
            "its data_sources, reader and decoder are set where it is made (another module): "
            "they decide the files, the record dataset and the decoding map"))
        site = self.site(p.node, p.fn)
        shuffle = self.code(a.get("shuffle")) or m.tf1_default("slim_provider", "shuffle")
        readers = self.code(a.get("num_readers")) or m.tf1_default("slim_provider", "num_readers")
        self.stages.append(m.ReadStage("unknown", f"{name}.reader", site, readers=readers))
        self.stages.append(m.QueueStage(
            "random_shuffle", site, self.code(a.get("common_queue_capacity")) or m.tf1_default(
                "slim_provider", "common_queue_capacity"), self.code(a.get("common_queue_min"))
            or m.tf1_default("slim_provider", "common_queue_min"), self.code(a.get("seed")),
            when=shuffle))
        items = stream.rows.text if stream.rows is not None else ""
        self.stages.append(m.DecodeStage(self.site(stream.node, stream.fn), f"{name}.decoder",
                                         items))
        return m.Source("provider", site, m.Code(name), self.code(a.get("num_epochs")), shuffle,
                        self.code(a.get("seed")), repeat=True)

    def feed_runs(self, keys: list[str], op: EnqueueV) -> list[FeedRun]:
        """The ``sess.run(..., feed_dict=...)`` calls that run the enqueue op or feed its
        placeholders: those in its own class (or the module functions their names call) when
        there are any, else any of that name."""
        owner = feed_owner(op.info, self.mod.by_name)
        index = self.mod.feeds_by_key
        for where in (owner, "any"):
            runs = list({id(r): r for k in keys for r in index.get((k, where), ())}.values())
            if runs:
                return runs
        return []

    def generator_source(self, q: QueueV, op: EnqueueV, values: Val) -> m.Source:
        holders = [v for v in _flat(values) if isinstance(v, PlaceholderV)]
        names = {h.stored or h.text for h in holders}
        given = self.seg(op.node.args[0], 80) if op.node.args else ""  # enqueue(self._phs)
        fetch = op.stored or op.text
        runs = self.feed_runs([fetch, given, *names], op)
        feeds = sorted({(ln, v) for r in runs for k, v, ln in r.feeds if k in names} | {
            (ln, f"{v} (one value per placeholder of {k})") for r in runs for k, v, ln in r.whole})
        fn = runs[0].fn if runs else ""
        signature = _signature(q, holders, op.many)
        if not runs:
            self.unresolved.append(m.Unresolved(
                f"what is fed to {given or ', '.join(sorted(names))}", op.node.lineno,
                "no sess.run(..., feed_dict=...) in this file feeds it"))
        short = fn.rsplit(".", 1)[-1]
        thread = short in self.mod.threads or fn.rsplit(".", 1)[0] in self.mod.thread_classes
        stored = [n for n in (h.stored or h.text for h in holders) if n.replace(".", "_")
                  .isidentifier()]
        feeder = m.Feeder(fn, thread, feeds, signature, tuple(stored or [given]),
                          runs[0].node.lineno if runs else 0)
        if runs:
            self.unresolved.append(m.Unresolved(
                f"{m.generator_name(feeder)} (the generator)", op.node.lineno,
                f"its body is the Python code of {fn} that fed the placeholders "
                f"({_lines_text(ln for ln, _ in feeds)}): "
                "write that loop as a generator that yields the values instead of running the "
                "enqueue op"))
        return m.Source("generator", self.site(op.node, op.fn), m.Code(fn or "feeder"),
                        repeat=False, feeder=feeder)

    # -- ends -------------------------------------------------------------------------------
    def build(self) -> m.Variant:
        end = self.end
        if end.kind == "iterator":
            source = self.dataset_variant(m.req(end.dataset))
        elif end.kind in ("dequeue_many", "dequeue_up_to"):
            queue = m.req(end.queue)
            source = self.queue_source(queue, None)
            self.stages.append(self.queue_stage(queue))
            size = self.code(end.args["batch_size"])
            self.stages.append(m.BatchStage(end.kind, self.site(end.node, end.fn, end.construct),
                                            {"batch_size": size} if size is not None else {},
                                            padded=queue.kind == "padding_fifo"))
        elif end.kind == "stream":
            stream = m.req(end.stream)
            source = self.from_stream(stream, None, None, "")
            if stream.reader is not None and stream.reader.kind == "record_input":
                self.record_input_batch(stream)
        elif end.kind in ("queue", "external"):
            queue = m.req(end.queue)
            source = self.queue_source(queue, None)
            if queue.kind != "producer":
                self.stages.append(self.queue_stage(queue))
            if end.kind == "external":
                self.handed_out(end)
        elif end.kind in _INPUT_FNS:
            source = self.input_fn_variant(end)
        else:
            source = self.batch_variant(end)
        self.per_batch(end)
        return m.Variant(tuple(self.world.decisions.items()), source, self.stages,
                         origin=Origin(self.world, end), branches=self.branches)

    def input_fn_variant(self, end: End) -> m.Source:
        """tf.estimator's numpy_input_fn / pandas_input_fn: arrays (a DataFrame) fed to a queue
        from Python, shuffled in a RandomShuffleQueue of a quarter of queue_capacity, batched
        with dequeue_many when it repeats forever, dequeue_up_to otherwise."""
        a = end.args
        site = self.site(end.node, end.fn, end.construct)
        rule_ = rule_for(self.mod.scan.resolved.get(id(end.node), ""))
        params = rule_.params if rule_ is not None else ()
        x_node, y_node = _arg(end.node, "x", params), _arg(end.node, "y", params)
        x = self.seg(x_node, 200) if x_node is not None else "x"
        if end.kind == "pandas_input_fn":
            x = f"dict({x})"
        has_y = y_node is not None and not (isinstance(y_node, ast.Constant)
                                            and y_node.value is None)
        data = m.Code(f"({x}, {self.seg(y_node, 200)})" if y_node is not None and has_y else x)
        rule = end.kind
        epochs = self.code(a.get("num_epochs")) or m.tf1_default(rule, "num_epochs")
        capacity = self.code(a.get("queue_capacity"))
        full = capacity or m.tf1_default(rule, "queue_capacity")
        buffer = m.Code(f"{full.text} // 4") if not (
            full.known and isinstance(full.value, int)) else m.Code(
            str(full.value // 4), True, full.value // 4, default=full.default)
        shuffle = self.code(a.get("shuffle"))
        self.stages.append(m.QueueStage("random_shuffle", site, capacity, buffer,
                                        self.code(a.get("seed")),
                                        when=shuffle or m.tf1_default(rule, "shuffle")))
        forever = epochs.is_value(None)
        small = m.Code(str(not forever), True, not forever) if epochs.known else m.Code(
            f"{epochs.text} is not None")
        args = {"batch_size": self.code(a.get("batch_size")) or m.tf1_default(rule, "batch_size"),
                "allow_smaller_final_batch": small}
        threads = self.code(a.get("num_threads"))
        if threads is not None:
            args["num_threads"] = threads
        self.stages.append(m.BatchStage(end.kind, site, args))
        never = shuffle is not None and shuffle.known and not shuffle.value
        return m.Source("rows", site, data, epochs, shuffle if never else None, columns=False,
                        shuffle_note="" if never else "in the queue below, not per epoch")

    def handed_out(self, end: End) -> None:
        call = end.call or self.seg(end.node, 80)
        self.stages.append(m.ExternalStage(self.site(end.node, end.fn, end.construct), call))
        self.unresolved.append(m.Unresolved(
            f"{call} (takes the queue)", line_of(end.node),
            "defined outside this file (another module builds the batch): it dequeues the "
            "queue and makes the rest of the pipeline, its per-example code and its batching; "
            "port that part there, continuing this dataset"))

    def batch_variant(self, end: End) -> m.Source:
        inputs = end.inputs
        tensors = tensors_in(inputs)
        copies = None
        if end.kind.endswith("join") and isinstance(inputs, ListV):
            copies = inputs.loop or (Sym(str(len(inputs.items)), len(inputs.items))
                                     if len(inputs.items) > 1 else None)
        threads = end.args.get("num_threads")
        parallel, how = (copies, f"the {copies.text} copies given to {end.construct}") if (
            copies is not None) else (threads, f"num_threads of {end.construct}") if (
            threads is not None) else (None, "")
        if tensors:
            source = self.from_tensors(tensors, self.code(parallel), how)
        else:
            source = self.unknown(*self.made_elsewhere(end))
        args = {k: c for k, v in end.args.items() if k not in ("tensors", "tensors_list")
                and (c := self.code(v)) is not None}
        self.placeholder_args(end)
        self.bucket_key(end)
        padded = args.get("dynamic_pad")
        self.stages.append(m.BatchStage(end.kind, self.site(end.node, end.fn, end.construct), args,
                                        padded=bool(padded and padded.is_value(True)),
                                        copies=self.code(copies), tensors=self.code(inputs)))
        return source

    def made_elsewhere(self, end: End) -> tuple[str, ast.AST, str]:
        """What, where and why for batched tensors no reader, producer or queue here made."""
        inputs = end.inputs
        what = f"the tensors given to {end.construct}"
        parts = _flat(inputs) if isinstance(inputs, ListV) else [inputs]
        params = [p.param for p in parts if isinstance(p, Sym) and p.param]
        calls = [n for p in parts if isinstance(n := getattr(p, "node", None), ast.Call)]
        if calls:
            call = calls[0]
            name = inputs.text if inputs is not None and inputs.text.isidentifier() else (
                "the batched tensors")
            return (f"{name} (made by {self.seg(call, 60)} at line {call.lineno})", call,
                    "that call is defined outside this file (a parameter's method or another "
                    "module): the dataset starts from what it reads")
        if params:
            return (f"{what} ({', '.join(dict.fromkeys(params))}, a parameter of "
                    f"{self.owner.qualname})", end.node,
                    "the caller makes its elements, outside this function: start the dataset "
                    "there (or take a dataset as the parameter)")
        return (what, end.node, "they do not come from a reader, producer or queue in this file")

    def bucket_key(self, end: End) -> None:
        """Bucketing by a per-example value: tf.data wants it as a function of the element."""
        arg = {"bucket_by_sequence_length": "input_length", "bucket": "which_bucket"}.get(
            end.kind)
        if arg is None:
            return
        value = end.args.get(arg)
        self.unresolved.append(m.Unresolved(
            f"{arg}={value.text if value is not None else '...'} (per example)", line_of(end.node),
            "the script computed it with the example's tensors; the Dataset method takes a "
            "function of the element: write it to compute the same value from the element"))

    def placeholder_args(self, end: End) -> None:
        """A batch size (or any batching argument) fed through a placeholder at each run."""
        for k, v in end.args.items():
            if not isinstance(v, PlaceholderV):
                continue
            names = {v.stored, v.text} - {""}
            lines = sorted({ln for name in names for r in self.mod.feeds_by_key.get(
                (name, "any"), ()) for key, _, ln in r.feeds if key in names})
            fed = f" ({_lines_text(lines)})" if lines else ""
            self.unresolved.append(m.Unresolved(
                f"{k}={v.text} (a placeholder)", line_of(end.node),
                f"the script feeds it at each sess.run{fed}; a tf.data chain takes a Python "
                f"value: make {k} an argument of the function that builds the dataset (one "
                "dataset per value it takes)"))

    def dataset_variant(self, ds: DatasetV) -> m.Source:
        """A tf.data pipeline the script builds, traced back to its start: the datasets it
        takes by name (``zip((ds, counter))``) are branches built first, each from its own
        start; a start made elsewhere is unresolved."""
        outer = self.stages
        for name, sub in _inputs_first(ds):
            self.stages = []
            self.branches.append(m.Branch(self.dataset_source(sub), self.stages, name=name))
            self.stages = outer
        return self.dataset_source(ds)

    def dataset_source(self, ds: DatasetV) -> m.Source:
        head = ds.head
        if head[0] == "call":
            _, qual, node, fr, pos, kw = head
            source = m.Source("dataset", m.Site(fr.fn.qualname, node.lineno,
                                                self.seg(node.func, 80)),
                              m.Code(_chain.dataset_head(self.seg(node, 400), qual)),
                              repeat=False)
        else:
            value = head[1]
            param = getattr(value, "param", "")
            line_node = head[2] if len(head) > 2 else ds.ops[0][1] if ds.ops else self.end.node
            source = self.unknown(
                f"{param} (a parameter of {self.owner.qualname})" if param else
                value.text or "the dataset", line_node, "the dataset it continues is made outside this function: the "
                "chain starts there")
        self.stages.append(m.DatasetStage(_chain.dataset_ops(ds.ops, self.seg,
                                                          self.mod.scan.resolved)))
        return source


def _inputs_first(ds: DatasetV, depth: int = 0) -> list[tuple[str, DatasetV]]:
    """The datasets ``ds`` takes by name, each after the ones it takes itself."""
    out: list[tuple[str, DatasetV]] = []
    for name, sub in ds.inputs if depth < 6 else ():
        out += _inputs_first(sub, depth + 1) + [(name, sub)]
    return out


def _shared_source(sources: list[m.Source]) -> m.Source | None:
    """One source for producers that shuffle with one and the same seed (SfMLearner's image
    and camera file lists, ``seed=seed`` on both): their lists zipped into rows, shuffled once
    with that seed, so each element keeps its pair. None when they do not share one."""
    first = sources[0]
    if first.kind != "files" or first.seed is None or first.seed.is_value(None):
        return None
    def same(a: m.Code | None, b: m.Code | None) -> bool:
        return (a.text if a else None) == (b.text if b else None)
    for s in sources[1:]:
        if s.kind != "files" or not all(same(getattr(s, k), getattr(first, k))
                                        for k in ("seed", "shuffle", "num_epochs")):
            return None
    data = m.Code("[" + ", ".join(s.data.text for s in sources if s.data is not None) + "]")
    return m.Source("rows", first.site, data, first.num_epochs, first.shuffle, first.seed,
                    first.capacity, first.repeat)


def _runner_ops(copies: Val) -> str:
    """``the queue runner's 4 enqueue ops`` (``its one enqueue op``)."""
    if isinstance(copies, Sym) and copies.const == 1:
        return "the queue runner's one enqueue op"
    return f"the queue runner's {copies.text} enqueue ops"


def _lines_text(lines: Iterable[int]) -> str:
    """``line 3`` or ``lines 3, 9``."""
    distinct = list(dict.fromkeys(lines))
    return ("line " if len(distinct) == 1 else "lines ") + ", ".join(map(str, distinct))


def _mentions(var: str, rec: StepRec) -> bool:
    """Does a step use this name, in its statement or the conditions around it?"""
    if any(isinstance(n, ast.Name) and n.id == var for n in walk(rec.stmt)):
        return True
    return any(var in g.replace("(", " ").replace(")", " ").split() for g in rec.guards)


def _arg(call: ast.AST, name: str, params: tuple[str, ...]) -> ast.expr | None:
    """The argument ``call`` gives parameter ``name`` (by keyword or position), if it is a call
    that gives one."""
    if not isinstance(call, ast.Call):
        return None
    for k in call.keywords:
        if k.arg == name:
            return k.value
    if name in params:
        i = params.index(name)
        if i < len(call.args) and not isinstance(call.args[i], ast.Starred):
            return call.args[i]
    return None


def _flat(val: Val, depth: int = 0) -> list[Val]:
    if isinstance(val, ListV) and depth < 4:
        return [x for v in val.items for x in _flat(v, depth + 1)]
    return [val]


def _pattern(files: Val | None) -> ast.AST | None:
    """The glob a file list came from (``match_filenames_once(pattern)``), if it did."""
    node = getattr(files, "node", None)
    if isinstance(files, Sym) and files.qual.endswith("match_filenames_once") and isinstance(
            node, ast.Call) and node.args:
        return node.args[0]
    return None


#: TensorFlow's dtype names that are not ``tf.<name>`` (``FIFOQueue(100, "float")``).
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16"}


def _signature(q: QueueV, holders: list[PlaceholderV], many: bool) -> list[tuple[str, str]]:
    """(shape, dtype) per component of what the generator yields: the queue's shapes and dtypes,
    else the placeholders'. Fed with ``enqueue_many``, a value is a batch of rows: the
    placeholder's shape, or the queue's shape after a batch dimension."""
    dtypes, shapes = q.args.get("dtypes"), q.args.get("shapes")
    one = len(holders) == 1
    out = []
    for i, h in enumerate(holders):
        dtype = _item(dtypes, i) or (dtypes if one and isinstance(dtypes, Sym) else None) or \
            h.args.get("dtype")
        queue_shape = _item(shapes, i)
        shape = h.args.get("shape") if many else queue_shape or h.args.get("shape")
        d = dtype.text if dtype is not None else "None"
        if isinstance(dtype, Sym) and isinstance(dtype.const, str):
            d = f"tf.{_DTYPE_ALIASES.get(dtype.const, dtype.const)}"
        text = shape.text if shape is not None else "None"
        if many and shape is None and queue_shape is not None:
            text = _batched_shape(queue_shape.text)
        out.append((text, d))
    return out


def _batched_shape(text: str) -> str:
    """A shape with a batch dimension of any size in front: ``[3]`` -> ``[None, 3]``."""
    if text.startswith(("[", "(")) and text.endswith(("]", ")")):
        inner = text[1:-1].strip().rstrip(",")
        return f"[None, {inner}]" if inner else "[None]"
    return f"[None, *{text}]"


def _item(val: Val | None, i: int) -> Val | None:
    if isinstance(val, ListV) and i < len(val.items):
        return val.items[i]
    return None


# -- ownership and grouping -------------------------------------------------------------------

def _source_path(end: End, depth: int = 0) -> tuple[tuple[str, ...], bool]:
    """Where the pipeline's source was made (call stack), and whether it is known."""
    if depth > 6:
        return end.path, False
    if end.kind == "iterator":
        head = m.req(end.dataset).head
        return (head[3].path, True) if head[0] == "call" else (end.path, False)
    if end.kind in ("dequeue_many", "dequeue_up_to", "queue", "external"):
        return _queue_path(m.req(end.queue), depth)
    if end.kind in _INPUT_FNS:  # the arrays it is given are its source
        return end.path, True
    stream = end.stream if end.kind == "stream" else next(
        (t.stream for t in tensors_in(end.inputs)), None)
    return _stream_path(stream, depth) if stream is not None else (end.path, False)


def _stream_path(stream: Stream, depth: int) -> tuple[tuple[str, ...], bool]:
    if stream.kind == "records":
        if stream.queue is None:
            return stream.path, False
        return _queue_path(stream.queue, depth + 1)
    if stream.kind == "dequeue":
        return _queue_path(m.req(stream.queue), depth + 1)
    return stream.path, stream.kind not in ("param",)


def _queue_path(q: QueueV, depth: int) -> tuple[tuple[str, ...], bool]:
    if q.kind == "producer" or not q.enqueues:
        return q.path, q.kind == "producer"
    values = q.enqueues[0].values
    tensors = [t for t in tensors_in(values) if t.stream.kind != "float"]
    if tensors and depth < 6:
        return _stream_path(tensors[0].stream, depth + 1)
    return q.path, not _params_in(values)  # rows of the function's own parameters: a helper


def _params_in(val: Val) -> list[str]:
    """The entry parameters a value is made of (a helper's ``input_tensors``)."""
    return list(dict.fromkeys(v.param for v in _flat(val) if isinstance(v, Sym) and v.param))


def _implicit_ends(world: World, dequeued: set[str]) -> list[End]:
    """Streams nothing batches or enqueues (a pipeline that ends in its per-example code) and
    queues filled here but dequeued elsewhere."""
    used_streams, used_queues = set(), set()
    for end in world.ends:
        for t in tensors_in(end.inputs):
            used_streams.add(id(t.stream))
        if end.queue is not None:
            used_queues.add(id(end.queue))
    for q in world.queues:
        for op in q.enqueues:
            for t in tensors_in(op.values):
                used_streams.add(id(t.stream))
    for s in world.streams:
        if s.queue is not None:
            used_queues.add(id(s.queue))
    out = []
    for s in world.streams:
        if id(s) in used_streams or s.kind not in ("records", "rows", "provider", "dequeue"):
            continue
        if any(r.stream is s for r in world.steps.values()) or (
                s.kind == "dequeue" and s.queue is not None and s.queue.enqueues):
            out.append(End("stream", s.node, s.fn, s.path, stream=s, seq=s.seq))
    for q in world.queues:
        if id(q) not in used_queues and (q.kind == "producer" or q.enqueues) and not (
                q.stored and q.stored in dequeued):
            at = q.enqueues[0].node if q.enqueues else q.node  # the same in every world
            out.append(End("queue", at, q.fn, q.path, queue=q,
                           construct=f"{q.enqueues[0].text.split('(')[0]}" if q.enqueues else ""))
    return out


def _owned(entry_path: tuple[str, ...], end: End, source_path: tuple[str, ...]) -> bool:
    """True unless both the end and the source were made inside the same callee of the entry
    (then that callee owns the pipeline). A source the module body made (a queue at the top of
    the script) is every function's: the function that makes the end owns the pipeline."""
    if source_path[:1] == (MODULE,) and entry_path != (MODULE,):
        source_path = end.path
    common = 0
    for a, b in zip(end.path, source_path):
        if a != b:
            break
        common += 1
    return common < 2 or len(end.path) < 2


def _run_all(mod: Module, budget: Budget) -> tuple[list[tuple[FuncInfo, World]], bool]:
    """Every world of every entry, the module body's first: the pipeline objects it leaves in
    its names (a queue made at the top of the script) are what the functions read."""
    entries = sorted(mod.entries(), key=lambda e: e is not mod.module)
    out: list[tuple[FuncInfo, World]] = []
    shared: dict[str, Val] = {}
    stopped = False
    for entry in entries:
        if budget.left <= 0:
            stopped = True
            break
        worlds = run_entry(mod, entry, budget, shared)
        if entry is mod.module and worlds:
            shared = worlds[0].shared
        out += [(entry, w) for w in worlds]
    return out, stopped


def _consumed(runs: list[tuple[FuncInfo, World]]) -> tuple[set[int], set[int]]:
    """The queues some end or dequeue reads (by their constructor call), and the batch calls
    whose batches are enqueued into another queue (``enqueue_many(batch)``: that queue's
    pipeline continues them)."""
    read: set[int] = set()
    rebatched: set[int] = set()
    for _entry, world in runs:
        for end in world.ends:
            if end.queue is not None:
                read.add(id(end.queue.node))
        for s in world.streams:
            if s.kind == "dequeue" and s.queue is not None:
                read.add(id(s.queue.node))
        for q in world.queues:
            for op in q.enqueues:
                for t in tensors_in(op.values):
                    if t.stream.kind == "batch":
                        rebatched.add(id(t.stream.node))
                    elif t.stream.kind == "iterator":
                        rebatched.add(id(t.stream.args["iterator"]))
    return read, rebatched


def find(mod: Module, budget: Budget) -> tuple[list[list[_Found]], bool]:
    """Every end of every entry's worlds, grouped by (entry, end call); and whether the budget
    ran out."""
    groups: dict[tuple[str, int], list[_Found]] = collections.OrderedDict()
    runs, stopped = _run_all(mod, budget)
    read, rebatched = _consumed(runs)
    for entry, world in runs:
        stopped = stopped or world.stopped
        if world.stopped:  # half a run: its pipelines would be half planned
            continue
        for end in world.ends + _implicit_ends(world, mod.dequeued):
            if end.kind == "queue" and id(m.req(end.queue).node) in read:
                continue  # filled here, dequeued by a function: that function's pipeline
            if id(end.node) in rebatched:
                continue  # its batches are enqueued again: part of that queue's pipeline
            path, known = _source_path(end)
            if not _owned((entry.qualname,), end, path):
                continue
            groups.setdefault((entry.qualname, id(end.node)), []).append(
                _Found(world, end, path, known, _touched(end)))
    return list(groups.values()), stopped


def _touched(end: End) -> set[int]:
    """The calls a pipeline passes through: its end, the reads, dequeues and queues upstream."""
    out = {id(end.node)}
    streams = [end.stream] if end.stream is not None else [t.stream for t in tensors_in(end.inputs)]
    queues = [end.queue] if end.queue is not None else []
    for _ in range(8):
        for s in streams:
            out.add(id(s.node))
            if s.queue is not None:
                queues.append(s.queue)
        streams = []
        for q in queues:
            out.add(id(q.node))
            for op in q.enqueues[:1]:
                streams += [t.stream for t in tensors_in(op.values)[:1]]
        queues = []
        if not streams:
            break
    return out


def _drop_covered(groups: list[list[_Found]]) -> list[list[_Found]]:
    """Drop pipelines with an unknown source whose end another pipeline with a known source
    passes through (a helper run on its own, when its callers are planned)."""
    known = set()
    for g in groups:
        for f in g:
            if f.known_source:
                known |= f.touched
    return [g for g in groups if any(f.known_source for f in g)
            or id(g[0].end.node) not in known]


def build(mod: Module, budget: Budget | None = None,
          where: Where | None = None) -> tuple[list[m.Pipeline],
                                                                          list[str]]:
    """The script's pipelines, in source order of their ends, and notes on the analysis.
    ``where(line) -> (cell, line)`` relocates the lines of a notebook's joined cells."""
    budget = budget or budget_for(mod.scan.statements)
    groups, stopped = find(mod, budget)
    notes = []
    if stopped:
        notes.append("The analysis stopped early (statement budget spent): pipelines after that "
                     "point are not planned.")
    out = _merge_alternatives([(_pipeline(mod, g), g) for g in _drop_covered(groups)])
    out.sort(key=lambda p: (p.line, p.function))
    _same_feeder_notes(out)
    root = _root_seed(mod)
    for p in out:
        for v in p.variants:
            v.root_seed = root
        p.chain, p.legend = _chain.render(p)
        p.attributes = _attributes(p)
        p.unresolved += _constructor_params(p)
        if where is not None:
            m.relocate(p, where)
            p.chain, p.legend = _chain.render(p)
        p.legend += _attribute_lines(p)
    return out, notes


def _merge_alternatives(built: list[tuple[m.Pipeline, list[_Found]]]) -> list[m.Pipeline]:
    """One pipeline for batch calls that are alternatives of one another: made in the same
    function, never both in one run (``if shuffle: shuffle_batch(...) else: batch(...)``,
    ``if use_datasets: <tf.data> else: <RecordInput>``); each call's plan becomes a variant,
    under its condition."""
    out: list[tuple[m.Pipeline, list[_Found]]] = []
    # per entry: the indices (in out) of its pipelines, and of those each world reaches
    of_entry: dict[int, set[int]] = collections.defaultdict(set)
    of_world: dict[int, set[int]] = collections.defaultdict(set)
    for p, group in built:
        worlds = {id(f.world) for f in group}
        free = of_entry[id(group[0].world.entry)].difference(*(of_world[w] for w in worlds))
        if free:
            i = min(free)
            q, other = out[i]
            q.variants += p.variants
            q.ends.append(p.end)
            q.unresolved += [u for u in p.unresolved if u not in q.unresolved]
            q.notes += [n for n in p.notes if n not in q.notes]
            other += group
        else:
            i = len(out)
            out.append((p, list(group)))
            of_entry[id(group[0].world.entry)].add(i)
        for w in worlds:
            of_world[w].add(i)
    for q, _ in out:
        q.ends.sort(key=lambda s: s.line)
        if len(q.ends) > 1:
            q.line, q.end = min(q.line, q.ends[0].line), q.ends[0]
            q.variants = _distinct(q.variants)
    return [q for q, _ in out]


def _attributes(p: m.Pipeline) -> list[m.Attribute]:
    """The attributes of ``self`` the plan of a method pipeline uses, where the class sets them
    (its ``__init__`` first) and to what."""
    me = next((v.origin.world.me for v in p.variants if v.origin is not None
               and v.origin.world.me is not None), None)
    if me is None or not me.origins:
        return []
    said = "\n".join([p.chain, *p.legend] + [f"{u.what} {u.why}" for u in p.unresolved])
    used = dict.fromkeys(re.findall(rf"\b{re.escape(me.text)}\.(\w+)", said))
    pipeline_parts = (QueueV, ReaderV, EnqueueV, PlaceholderV)  # the chain replaces these
    return [m.Attribute(f"{me.text}.{a}", *me.origins[a]) for a in used if a in me.origins
            and not isinstance(me.attrs.get(a), pipeline_parts)]


def _constructor_params(p: m.Pipeline) -> list[m.Unresolved]:
    """A method's pipeline built from what its class's constructor was given but did not keep
    (``RandomShuffleQueue(cap, min_after, ...)`` in ``__init__``, dequeued in a method): the
    method cannot read those names; each is unresolved, on the line that uses it."""
    me = next((v.origin.world.me for v in p.variants if v.origin is not None
               and v.origin.world.me is not None), None)
    init = next((f.info for v in p.variants if v.origin is not None
                 for f in v.origin.world.frames.values() if f.info.name == "__init__"
                 and me is not None and f.info.cls is me.cls), None)
    if init is None:
        return []
    said = set(re.findall(r"(?<![\w.])\w+", "\n".join([p.chain, *p.legend])))
    out = []
    for name in init.params[1:]:
        if name not in said:
            continue
        line = next((n.lineno for n in walk(init.node) if isinstance(n, ast.Name)
                     and n.id == name and isinstance(n.ctx, ast.Load)), line_of(init.node))
        out.append(m.Unresolved(
            f"{name} (a parameter of {init.qualname})", line,
            f"{m.short_name(p.function)} uses what the constructor was given, which it does not "
            f"keep: store it (self.{name} = {name}) and read self.{name}, or pass it"))
    return out


def _attribute_lines(p: m.Pipeline) -> list[str]:
    if not p.attributes:
        return []
    out = [f"the object's attributes the plan uses (the port takes them as parameters, or "
           f"keeps {m.short_name(p.function)} a method):"]
    for a in p.attributes:
        where = f"cell {a.cell} line {a.line}" if a.cell else f"line {a.line}"
        out.append(f"  {a.name} = {a.value} ({a.function} {where})")
    return out


def _same_feeder_notes(found: list[m.Pipeline]) -> None:
    """Queues one Python loop fills together are dequeued together: say so, so the port makes
    one generator of tuples rather than generators that drift apart."""
    by_feeder: dict[tuple[str, int], list[m.Pipeline]] = collections.defaultdict(list)
    for p in found:
        feeder = p.variants[0].source.feeder
        if feeder is not None and feeder.function:  # by its name and where it is
            by_feeder[(feeder.function, feeder.line)].append(p)
    for (fn, _line), group in by_feeder.items():
        if len(group) < 2:
            continue
        names = ", ".join(p.function for p in group)
        for p in group:
            p.notes.append(f"{fn} feeds the queues of {names} in one loop: one generator "
                           "yielding their values together (a tuple per element) keeps them "
                           "aligned")


def _root_seed(mod: Module) -> m.Code | None:
    for f in mod.scan.findings:
        if f.rule.id == "set_random_seed" and f.call is not None and f.call.args:
            return m.Code(mod.scan.source.segment(f.call.args[0], 80))
    return None


def _pipeline(mod: Module, group: list[_Found]) -> m.Pipeline:
    first = group[0]
    entry = first.world.entry
    variants, unresolved, notes = [], [], []
    for found in group:
        b = _Builder(mod, found.world, found.end)
        variants.append(b.build())
        unresolved += [u for u in b.unresolved if u not in unresolved]
        notes += [n for n in b.notes if n not in notes]
    variants = _distinct(variants)
    end = first.end
    line = min((_end_line(f.end) for f in group), key=lambda ln: (ln == line_of(end.node), ln))
    site = m.Site(end.fn, line_of(end.node), end.construct or mod.scan.source.segment(
        getattr(end.node, "func", end.node), 80))
    if end.kind == "iterator" and line != line_of(end.node):
        site = m.Site(end.fn, line, f".{_batch_op(group)}, then {end.construct}")
    if entry.parent is not None and entry.name in mod.structural and (
            entry.name not in mod.callees.get(entry.parent.name, ())):
        notes.insert(0, f"{entry.name} is made by {entry.parent.qualname}, which hands it out "
                        f"without calling it: {entry.parent.qualname}'s parameters "
                        f"({', '.join(entry.parent.params) or 'none'}) are what its caller "
                        "passes")
    if end.fn != entry.qualname:
        notes.insert(0, f"its {site.construct} is in {end.fn} (line {site.line}), called from "
                        f"{entry.qualname}")
    kind = {"iterator": "tf.data"}.get(end.kind, "queue")
    if end.kind == "stream" and m.req(end.stream).kind == "records":
        kind = "reader"
    if any(v.source.kind == "generator" for v in variants):
        kind = "feeding"
    return m.Pipeline(entry.qualname, tuple(entry.params), line, site, kind, variants,
                      unresolved, notes, ends=[site])


def _distinct(variants: list[m.Variant]) -> list[m.Variant]:
    """One variant per distinct way of building, under the decisions all its worlds share."""
    if len(variants) < 2:
        return variants
    by_shape: dict[str, list[m.Variant]] = collections.OrderedDict()
    for v in variants:
        shape = repr({k: val for k, val in v.to_dict().items() if k != "when"})
        by_shape.setdefault(shape, []).append(v)
    out = []
    for same in by_shape.values():
        common = set(same[0].when)
        for v in same[1:]:
            common &= set(v.when)
        same[0].when = tuple(w for w in same[0].when if w in common)
        out.append(same[0])
    if len(out) > 1:  # decisions every remaining variant shares say when the pipeline exists
        shared = set(out[0].when)
        for v in out[1:]:
            shared &= set(v.when)
        for v in out:
            v.when = tuple(w for w in v.when if w not in shared) + tuple(
                w for w in v.when if w in shared)
    return out


def _batch_op(group: list[_Found]) -> str:
    for f in group:
        for op in m.req(f.end.dataset).ops:
            if op[0] in ("batch", "padded_batch"):
                return str(op[0])
    return "batch"


def _end_line(end: End) -> int:
    if end.kind == "iterator":
        batch = [op for op in m.req(end.dataset).ops if op[0] in ("batch", "padded_batch")]
        if batch:
            return line_of(batch[-1][1])
    return line_of(end.node)


__all__ = ["build", "budget_for", "find", "STATELESS"]
