"""The tf.data code of a pipeline (:class:`~.model.Pipeline`), as text, and its legend.

One statement per line (``ds = ds.shuffle(...)``), so a condition the script leaves to run time
becomes an ``if`` around the lines it changes: a shuffle the script turns on with
``shuffle=a.mode == "train"``, or the two ways ``if train:`` builds a pipeline (the variants'
lines are merged with :mod:`difflib`, common lines written once). What the plan cannot know is
written ``...`` with a comment, and listed in the pipeline's unresolved items.
"""
from __future__ import annotations

import ast
import copy
import difflib
import re
from typing import Any, Protocol

from compare.migration import legend
from compare.migration import model as m

AUTOTUNE = "tf.data.AUTOTUNE"
INDENT = "    "
_TF2_READERS = {"tfrecord": "tf.data.TFRecordDataset", "text_line": "tf.data.TextLineDataset"}
_SHUFFLING = frozenset({"shuffle_batch", "shuffle_batch_join", "maybe_shuffle_batch",
                        "maybe_shuffle_batch_join"})


_SIMPLE = re.compile(r"[\w.]+(\(.*\))?$")


def _paren(text: str) -> str:
    if _SIMPLE.match(text) and text.count("(") <= 1:
        return text
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return f"({text})"
    return text if isinstance(node, (ast.Name, ast.Attribute, ast.Constant, ast.Call,
                                     ast.Subscript)) else f"({text})"


def _when(code: m.Code | None, lines: list[str], default: bool = True) -> list[str]:
    """``lines`` as they apply under a flag the script passed (None: ``default``)."""
    if code is None:
        return lines if default else []
    if code.known:
        return lines if code.value else []
    return [f"if {code.text}:"] + [INDENT + ln for ln in lines]


def _seed(code: m.Code | None) -> str:
    return f", seed={code.text}" if code is not None and not code.is_value(None) else ""


class _Render:
    """Renders one variant's lines with dataset variable ``ds``."""

    #: The name of the per-batch function the chain maps after batching; None: the plan's
    #: (a code emitter that defines its own sets it, and appends that map itself).
    after: str | None = None

    def __init__(self, ds: str, pipeline: m.Pipeline, variant: m.Variant):
        self.ds, self.p, self.v = ds, pipeline, variant
        # a map that draws in any variant takes a seed in all (one listing, one signature)
        self.seeded = {st.name for v in pipeline.variants for st in v.maps() if st.random}

    def on(self, ds: str) -> _Render:
        """The same renderer writing to another dataset variable (a branch)."""
        sub = copy.copy(self)
        sub.ds = ds
        return sub

    def op(self, call: str) -> str:
        return f"{self.ds} = {self.ds}.{call}"

    def lines(self) -> list[str]:
        out = self.branches() if self.v.branches else self.source(self.v.source)
        for stage in self.v.stages:
            out += getattr(self, stage.kind)(stage)
        if not any(".prefetch(" in ln for ln in out[-1:]):
            out.append(self.op(f"prefetch({AUTOTUNE})"))
        return out

    # -- sources ----------------------------------------------------------------------------
    def source(self, s: m.Source) -> list[str]:
        ds = self.ds
        if s.kind in ("files", "rows", "range"):
            given = m.req(s.data).text
            data = _tuple(given) if s.kind == "rows" and s.columns else given
            if s.order and data.endswith(",)") and m.literal_length(data) == 1:
                data = data[1:-2]  # a queue of one component hands out the tensor itself
            head = (f"tf.data.Dataset.range({data})" if s.kind == "range" else
                    f"tf.data.Dataset.from_tensor_slices({data})")
            out = [f"{ds} = {head}"]
            count = _count(given, ds) if s.kind == "files" or (
                s.kind == "rows" and not s.columns) else f"{ds}.cardinality()"
            if count != "1" and not s.order and not s.shuffle_note:
                out += _when(s.shuffle, [self.op(f"shuffle({count}{_seed(s.seed)})")])
            return out + self.repeat(s)
        if s.kind == "computed":  # the enqueue op runs again for each element: a map computes it
            return [f"{ds} = tf.data.Dataset.counter()"]
        if s.kind == "file_pattern":
            shuffle = "True" if s.shuffle is None else s.shuffle.text
            return [f"{ds} = tf.data.Dataset.list_files({m.req(s.data).text}, shuffle={shuffle}"
                    f"{_seed(s.seed)})"] + self.repeat(s)
        if s.kind == "generator":
            f = m.req(s.feeder)
            specs = [f"tf.TensorSpec(shape={shape}, dtype={dtype})" for shape, dtype in f.signature]
            sig = specs[0] if len(specs) == 1 else "(" + ", ".join(specs) + ")"
            return [f"{ds} = tf.data.Dataset.from_generator({m.generator_name(f)}, "
                    f"output_signature={sig})"]
        if s.kind == "provider":  # its reading, shuffling and decoding are stages
            shuffle = "True" if s.shuffle is None else s.shuffle.text
            return ([f"{ds} = tf.data.Dataset.list_files({m.req(s.data).text}.data_sources, "
                     f"shuffle={shuffle}{_seed(s.seed)})"] + self.repeat(s))
        if s.kind == "dataset":
            return [f"{ds} = {m.req(s.data).text}"]
        return [f"{ds} = ...  # unresolved: {s.data.text if s.data else 'the elements'}"]

    def branches(self) -> list[str]:
        """Each stream on its own variable, then zipped: ``ds = tf.data.Dataset.zip((ds_1,
        ds_2))``; streams reading one shared source each take their item of it."""
        ds, v = self.ds, self.v
        if v.source.kind == "dataset":  # the datasets the script's own chain takes by name
            out = []
            for b in v.branches:
                first = b.stages[0]
                if b.source.kind == "unknown" and b.name in self.p.params and isinstance(
                        first, m.DatasetStage) and not first.ops:
                    continue  # the function's own parameter: it stays one
                sub = self.on(b.name)
                out += sub.source(b.source)
                for stage in b.stages:
                    out += getattr(sub, stage.kind)(stage)
            return out + self.source(v.source)
        shared = v.source.kind != "zip"
        out = self.source(v.source) if shared else []
        for i, b in enumerate(v.branches, 1):
            b.name = f"{ds}_{i}"
            sub = self.on(b.name)
            out += ([f"{b.name} = {ds}.map(lambda *paths: paths[{b.component}])"] if shared
                    else sub.source(b.source))
            for stage in b.stages:
                out += getattr(sub, stage.kind)(stage)
        names = ", ".join(b.name for b in v.branches)
        return out + [f"{ds} = tf.data.Dataset.zip(({names}))"]

    def repeat(self, s: m.Source) -> list[str]:
        if not s.repeat:
            return []
        e = s.num_epochs
        if e is None or e.is_value(None):
            return [self.op("repeat()")]
        if e.is_value(1):  # one pass: nothing to repeat
            return []
        return [self.op(f"repeat({e.text})")]

    # -- stages -----------------------------------------------------------------------------
    def read(self, st: m.ReadStage) -> list[str]:
        if st.reader == "whole_file":
            fn = ("lambda path: (path, tf.io.read_file(path))" if st.key_used
                  else "tf.io.read_file")
            return [self.op(f"map({fn}, num_parallel_calls={AUTOTUNE})")]
        records = _record_dataset(st)
        if st.key_used and records != "...":
            body = records[len("lambda f: "):] if records.startswith("lambda f: ") else (
                f"{records}(f)")
            records = f"lambda f: {body}.map(lambda record: (f, record))"
        note = f"  # unresolved: the record dataset for {st.origin}" if records == "..." else ""
        up_to = [self.op(f"batch({st.up_to.text})")] if st.up_to is not None else []
        if st.external:
            note = f"  # unresolved: the records {st.origin} reads"
            up_to += [self.op(f"map(...)  # unresolved: what {st.origin} makes of each record")]
        if st.readers is None or st.readers.is_value(1):
            return [self.op(f"flat_map({records}){note}")] + up_to
        return [self.op(f"interleave({records}, cycle_length={st.readers.text}, "
                        f"num_parallel_calls={AUTOTUNE}){note}")] + up_to

    def unbatch(self, st: m.UnbatchStage) -> list[str]:
        return [self.op("unbatch()")]

    def decode(self, st: m.DecodeStage) -> list[str]:
        return [self.op(f"map(...)  # unresolved: {st.decoder}.decode of the items "
                        f"provider.get asks for ({st.items or '...'})")]

    def external(self, st: m.ExternalStage) -> list[str]:
        return [f"{self.ds} = ...  # unresolved: {st.call} takes the queue here; the rest of the "
                "pipeline is built in another module"]

    def map(self, st: m.MapStage) -> list[str]:
        out = []
        if st.name in self.seeded:
            root = self.v.root_seed.text if self.v.root_seed is not None else "None"
            out.append(f"{self.ds} = tf.data.Dataset.zip(({self.ds}, "
                       f"tf.data.Dataset.random(seed={root}).batch(2)))")
        calls = st.parallel.text if st.parallel is not None else AUTOTUNE
        return out + [self.op(f"map({st.name}, num_parallel_calls={calls})")]

    def queue(self, st: m.QueueStage) -> list[str]:
        if st.queue != "random_shuffle":
            return []
        size = st.min_after_dequeue
        if size is not None and size.default and size.is_value(1):
            return []  # RecordInput's default buffer of one record shuffles nothing
        return _when(st.when, [self.op(f"shuffle({_text(st.min_after_dequeue, 'min_after_dequeue')}"
                                       f"{_seed(st.seed)})")])

    def batch(self, st: m.BatchStage) -> list[str]:
        out = self.batching(st)
        if st.after and self.after is None:
            if st.after_random:
                root = self.v.root_seed.text if self.v.root_seed is not None else "None"
                out.append(f"{self.ds} = tf.data.Dataset.zip(({self.ds}, "
                           f"tf.data.Dataset.random(seed={root}).batch(2)))")
            out.append(self.op(f"map({st.after_name}, num_parallel_calls={AUTOTUNE})"))
        return out

    def batching(self, st: m.BatchStage) -> list[str]:
        a = st.args
        out: list[str] = []
        keep = a.get("keep_input")
        if keep is not None and not keep.is_value(True):
            out.append(self.op(f"filter(lambda *example: ...)  # keep_input={keep.text}, "
                               "computed per example"))
        out += _when(a.get("enqueue_many"), [self.op("unbatch()")], default=False)
        if st.op in _SHUFFLING:
            out.append(self.op(f"shuffle({_text(a.get('min_after_dequeue'), 'min_after_dequeue')}"
                               f"{_seed(a.get('seed'))})"))
        size = _text(a.get("batch_size"), "batch_size")
        drop = _drop(st)
        if st.op in _BUCKETS:
            return out + [self.op(_bucket(st, size, drop))]
        pad = a.get("dynamic_pad")
        given = a.get("shapes")
        shapes = f"padded_shapes={_tuple(given.text)}, " if given is not None and (
            not given.is_value(None)) else ""
        plain, padded = (self.op(f"batch({size}, drop_remainder={drop})"),
                         self.op(f"padded_batch({size}, {shapes}drop_remainder={drop})"))
        if st.padded or pad is None or pad.known:
            return out + [padded if st.padded else plain]
        return out + [f"if {pad.text}:", INDENT + padded, "else:", INDENT + plain]

    def dataset(self, st: m.DatasetStage) -> list[str]:
        """The script's own ops; consecutive ops under the same conditions share one ``if``."""
        out: list[str] = []
        open_guards: tuple[str, ...] = ()
        for o in st.ops:
            if o.guards != open_guards:
                keep = 0
                while keep < min(len(o.guards), len(open_guards)) and (
                        o.guards[keep] == open_guards[keep]):
                    keep += 1
                for depth, g in enumerate(o.guards[keep:], keep):
                    out.append(INDENT * depth + f"if {g}:")
                open_guards = o.guards
            out.append(INDENT * len(o.guards) + self.op(o.text))
        return out


_BUCKETS = frozenset({"bucket_by_sequence_length", "bucket"})


def _bucket(st: m.BatchStage, size: str, drop: str) -> str:
    """tf.contrib.training's bucketing as the Dataset method that does it (the length or bucket
    of an element is a function of it the script computed per example: written ``...``)."""
    a = st.args
    if st.op == "bucket":
        return (f"group_by_window(key_func=lambda *example: ..., reduce_func=lambda _, w: "
                f"w.padded_batch({size}, drop_remainder={drop}), window_size={size})  "
                f"# which_bucket={_text(a.get('which_bucket'), '...')}, computed per example")
    bounds = _text(a.get("bucket_boundaries"), "bucket_boundaries")
    return (f"bucket_by_sequence_length(lambda *example: ..., {bounds}, "
            f"[{size}] * (len({bounds}) + 1), drop_remainder={drop})  "
            f"# input_length={_text(a.get('input_length'), '...')}, computed per example")


def _record_dataset(st: m.ReadStage) -> str:
    a = st.args
    if st.reader == "fixed_length":
        extra = "".join(f", {k}={a[k].text}" for k in ("header_bytes", "footer_bytes",
                                                       "hop_bytes") if k in a)
        size = _text(a.get("record_bytes"), "record_bytes")
        return f"lambda f: tf.data.FixedLengthRecordDataset(f, {size}{extra})"
    if st.reader == "text_line" and "skip_header_lines" in a:
        return f"lambda f: tf.data.TextLineDataset(f).skip({a['skip_header_lines'].text})"
    compression = compression_type(a.get("options"))
    if st.reader == "tfrecord" and compression:
        return f'lambda f: tf.data.TFRecordDataset(f, compression_type="{compression}")'
    return _TF2_READERS.get(st.reader, "...")


def compression_type(options: m.Code | None) -> str:
    """GZIP or ZLIB from a TFRecordReader's ``options`` as written; "" when none or unknown."""
    text = options.text.upper() if options is not None else ""
    return next((c for c in ("GZIP", "ZLIB") if c in text), "")


def _drop(st: m.BatchStage) -> str:
    if st.op in ("dequeue_many", "get_yield_op"):
        return "True"
    if st.op == "dequeue_up_to":
        return "False"
    small = st.args.get("allow_smaller_final_batch")
    if small is None or small.is_value(False):
        return "True"
    if small.known:
        return str(not small.value)
    return f"not {_paren(small.text)}"


def _text(code: m.Code | None, default: str) -> str:
    return code.text if code is not None and code.text else default


def _tuple(text: str) -> str:
    """A list of tensors as from_tensor_slices wants it: ``[a, b]`` -> ``(a, b)``."""
    if not text.startswith("["):
        return text
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return text
    if isinstance(node, ast.List):
        return "(" + text[1:-1] + ("," if len(node.elts) == 1 else "") + ")"
    return text


def _count(text: str, ds: str) -> str:
    """The buffer that shuffles a whole file list: its length when written out, else the
    dataset's own cardinality."""
    n = m.literal_length(text)
    return str(n) if n is not None else f"{ds}.cardinality()"


# -- tf.data the script already builds ------------------------------------------------------

_CONTRIB = {
    "group_by_window": "group_by_window({args})",
    "batch_and_drop_remainder": "batch({args}, drop_remainder=True)",
    "padded_batch_and_drop_remainder": "padded_batch({args}, drop_remainder=True)",
    "unbatch": "unbatch()",
    "ignore_errors": "ignore_errors()",
}


def dataset_head(text: str, qual: str) -> str:
    return text.replace("tf.contrib.data.", "tf.data.")


class Segment(Protocol):
    """A script's text of a node, at most ``limit`` characters (``Source.segment``)."""

    def __call__(self, node: ast.AST, limit: int = ..., /) -> str: ...


def _call_args(node: ast.Call, seg: Segment, rename: dict[str, str] | None = None) -> list[str]:
    rename = rename or {}
    out = [seg(a, 400) for a in node.args]
    out += [f"{rename.get(k.arg, k.arg)}={seg(k.value, 400)}" if k.arg else f"**{seg(k.value, 400)}"
            for k in node.keywords]
    return out


def dataset_ops(ops: tuple[tuple[Any, ...], ...], seg: Segment,
                resolved: dict[int, str]) -> list[m.DatasetOp]:
    """The script's dataset method calls as TF 2 writes them."""
    out: list[m.DatasetOp] = []
    for method, node, _fr, _pos, _kw, guards in ops:
        before = len(out)
        _dataset_op(out, method, node, seg, resolved)
        for op in out[before:]:
            op.guards = tuple(guards)
    return out


def _dataset_op(out: list[m.DatasetOp], method: str, node: ast.Call, seg: Segment,
                resolved: dict[int, str]) -> None:
    kws = {k.arg: k for k in node.keywords}
    if method == "map" and ("num_threads" in kws or "output_buffer_size" in kws):
        args = [a for a in _call_args(node, seg, {"num_threads": "num_parallel_calls"})
                if not a.startswith("output_buffer_size=")]
        out.append(m.DatasetOp("map", f"map({', '.join(args)})", node.lineno,
                               "num_threads became num_parallel_calls"))
        if "output_buffer_size" in kws:
            out.append(m.DatasetOp("prefetch", f"prefetch({seg(kws['output_buffer_size'].value)})",
                                   node.lineno, "output_buffer_size became .prefetch"))
        return
    if method == "apply" and node.args and isinstance(node.args[0], ast.Call):
        converted = _contrib_apply(node.args[0], seg, resolved)
        if converted is not None:
            out += [m.DatasetOp(meth, text, node.lineno, "tf.contrib.data transformation")
                    for meth, text in converted]
            return
    out.append(m.DatasetOp(method, f"{method}({', '.join(_call_args(node, seg))})",
                           node.lineno))


def _named_args(call: ast.Call, params: tuple[str, ...], seg: Segment) -> dict[str, str]:
    """A call's arguments by parameter name, as written."""
    out = {params[i]: seg(a, 400) for i, a in enumerate(call.args[:len(params)])
           if not isinstance(a, ast.Starred)}
    out.update({k.arg: seg(k.value, 400) for k in call.keywords if k.arg})
    return out


def _contrib_apply(call: ast.Call, seg: Segment,
                   resolved: dict[int, str]) -> list[tuple[str, str]] | None:
    qual = resolved.get(id(call), "")
    if not qual.startswith("tensorflow.contrib.data."):
        return None
    name = qual.rsplit(".", 1)[-1]
    args = _call_args(call, seg)
    if name in _CONTRIB:
        text = _CONTRIB[name].format(args=", ".join(args))
        return [(text.split("(")[0], text)]
    if name == "map_and_batch":
        named = _named_args(call, ("map_func", "batch_size", "num_parallel_batches",
                                   "drop_remainder", "num_parallel_calls"), seg)
        if "map_func" in named and "batch_size" in named:
            drop = f", drop_remainder={named['drop_remainder']}" if "drop_remainder" in named \
                else ""
            return [("map", f"map({named['map_func']}, num_parallel_calls={AUTOTUNE})"),
                    ("batch", f"batch({named['batch_size']}{drop})")]
    if name == "parallel_interleave":
        named = _named_args(call, ("map_func", "cycle_length", "block_length", "sloppy",
                                   "buffer_output_elements", "prefetch_input_elements"), seg)
        if "map_func" in named and "cycle_length" in named:
            extra = (f", block_length={named['block_length']}" if "block_length" in named
                     else "") + (f", deterministic=not {named['sloppy']}" if "sloppy" in named
                                 else "")
            return [("interleave", f"interleave({named['map_func']}, cycle_length="
                                   f"{named['cycle_length']}{extra}, num_parallel_calls="
                                   f"{AUTOTUNE})")]
    if name == "shuffle_and_repeat" and call.args:
        rest = [a for a in args[1:] if not a.startswith("seed=")]
        seed = [a for a in args[1:] if a.startswith("seed=")]
        return [("shuffle", f"shuffle({', '.join(args[:1] + seed)})"),
                ("repeat", f"repeat({', '.join(rest[:1])})")]
    return [("apply", f"apply(tf.data.experimental.{name}({', '.join(args)}))")]


# -- a pipeline -----------------------------------------------------------------------------

def _names_used(p: m.Pipeline) -> set[str]:
    out = set(p.params)
    for v in p.variants:
        for st in v.stages:
            for step in getattr(st, "steps", []):
                out.update(step.code.replace("(", " ").replace(")", " ").replace(",", " ").split())
        if v.source.data is not None:
            out.update(v.source.data.text.replace(".", " ").replace("(", " ").split())
    return out


def _name_maps(p: m.Pipeline) -> None:
    """Give each map stage a function name: ``<pipeline function>_example``, numbered when the
    pipeline has more than one map."""
    base = m.short_name(p.function)
    count = max((len(v.maps()) for v in p.variants), default=0)
    for v in p.variants:
        for i, st in enumerate(v.maps(), 1):
            st.name = f"{base}_example" if count == 1 else f"{base}_stage{i}"
        batch = v.batch()
        if batch is not None and batch.after:
            batch.after_name = f"{base}_batch"


#: What a variant was built under, (condition, value) each.
_When = tuple[tuple[str, bool], ...]


def _merge(variants: list[tuple[_When, list[str]]]) -> list[str]:
    """One listing for variants built under different decisions (see module doc)."""
    if len({tuple(lines) for _, lines in variants}) == 1:
        return variants[0][1]
    counts: dict[str, int] = {}
    for when, _ in variants:
        for cond, _value in when:
            counts[cond] = counts.get(cond, 0) + 1
    if not counts:
        return variants[0][1]
    order = sorted(counts, key=lambda c: (-counts[c], list(counts).index(c)))
    best: list[str] | None = None
    for cond in order[:4]:  # split on each condition in turn: keep the shortest listing
        yes = [(tuple(w for w in when if w[0] != cond), lines) for when, lines in variants
               if dict(when).get(cond, True)]
        no = [(tuple(w for w in when if w[0] != cond), lines) for when, lines in variants
              if not dict(when).get(cond, True)]
        out = _merge(yes or no) if not yes or not no else _diff(cond, _merge(yes), _merge(no))
        if best is None or len(out) < len(best):
            best = out
    return m.req(best)


def _blocks(lines: list[str]) -> list[str]:
    """Top-level statements with their indented bodies, one string each (an ``if`` block is
    compared whole)."""
    out: list[str] = []
    for ln in lines:
        if out and (ln.startswith(INDENT) or ln.startswith("else:")):
            out[-1] += "\n" + ln
        else:
            out.append(ln)
    return out


def _lines(blocks: list[str], indent: str = "") -> list[str]:
    return [indent + ln for b in blocks for ln in b.split("\n")]


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes, with a single shared statement between two differences folded into
    them: ``ds.repeat()`` of two unrelated chains is not worth splitting both around."""
    out: list[list[Any]] = []
    codes = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    for k, (tag, i1, i2, j1, j2) in enumerate(codes):
        lone = tag == "equal" and i2 - i1 < 2 and 0 < k < len(codes) - 1
        if out and (lone or out[-1][0] == "fold") and not (tag == "equal" and not lone):
            out[-1][2], out[-1][4] = i2, j2
            out[-1][0] = "fold"
        else:
            out.append([tag, i1, i2, j1, j2])
    return [("replace" if c[0] == "fold" else c[0], *c[1:]) for c in out]


def _diff(cond: str, a: list[str], b: list[str]) -> list[str]:
    a, b = _blocks(a), _blocks(b)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        if tag == "equal":
            out += _lines(a[i1:i2])
            continue
        if i2 > i1:
            out += [f"if {cond}:"] + _lines(a[i1:i2], INDENT)
            if j2 > j1:
                out += ["else:"] + _lines(b[j1:j2], INDENT)
        else:
            out += [f"if not {_paren(cond)}:"] + _lines(b[j1:j2], INDENT)
    return out


def render(p: m.Pipeline) -> tuple[str, list[str]]:
    """The pipeline's tf.data code and its legend (what each name in it stands for)."""
    _name_maps(p)
    used = _names_used(p)
    ds = "ds"
    while ds in used:
        ds += "_"
    listed = [(v.when, _Render(ds, p, v).lines()) for v in p.variants]
    return "\n".join(_merge(listed)), legend.legend(p)
