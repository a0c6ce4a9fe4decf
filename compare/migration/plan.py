"""The report's header prose: what the tf.data pipeline will look like for this script, and what
``tf_upgrade_v2`` would have done instead.

Both are built from the findings (and the calls the scanner kept), so the dataset chain names the
script's own file list, epochs, batch size and shuffle buffer where it wrote them.
"""
from __future__ import annotations

import ast
from typing import Callable

from compare.migration.scan import Finding, ScanResult

AUTOTUNE = "tf.data.AUTOTUNE"
_DECODE = ("image.decode_jpeg", "image.decode_png", "image.decode_image", "image.decode_bmp",
           "image.decode_gif", "io.decode_jpeg", "io.decode_png", "io.decode_image",
           "decode_raw", "io.decode_raw", "decode_csv", "io.decode_csv")
_PARSE = ("parse_single_example", "io.parse_single_example", "parse_example", "io.parse_example")
_RESIZE = ("image.resize_images", "image.resize", "image.resize_bilinear",
           "image.resize_image_with_crop_or_pad", "image.resize_with_crop_or_pad")
_STATELESS = {
    "random_crop": "tf.image.stateless_random_crop",
    "random_shuffle": "tf.random.experimental.stateless_shuffle",
    "random_uniform": "tf.random.stateless_uniform",
    "sample_distorted_bounding_box": "tf.image.stateless_sample_distorted_bounding_box",
}
_READERS = ("whole_file_reader", "tfrecord_reader", "text_line_reader",
            "fixed_length_record_reader", "other_reader")


def _first(findings: list[Finding], *rule_ids: str) -> Finding | None:
    return next((f for f in findings if f.rule.id in rule_ids), None)


def _arg(f: Finding | None, name: str, index: int | None = None) -> ast.expr | None:
    """The call argument ``name`` (keyword, or positional ``index``) of a finding's call."""
    if f is None or f.call is None:
        return None
    for kw in f.call.keywords:
        if kw.arg == name:
            return kw.value
    if index is not None and index < len(f.call.args):
        a = f.call.args[index]
        return None if isinstance(a, ast.Starred) else a
    return None


def _is_const(node: ast.expr | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


class _Chain:
    """Builds the dataset chain for one script."""

    def __init__(self, result: ScanResult):
        self.r = result
        self.f = result.findings

    def text(self, node: ast.expr | None, default: str) -> str:
        return self.r.segment(node, default)

    def shuffle_repeat(self, f: Finding, epochs_at: int, shuffle_at: int, buffer: str) -> list[str]:
        """``.shuffle(n)`` unless ``shuffle=False`` (or one item), then ``.repeat(num_epochs)``."""
        steps = []
        if not _is_const(_arg(f, "shuffle", shuffle_at), False) and buffer != "1":
            steps.append(f".shuffle({buffer})")
        epochs = _arg(f, "num_epochs", epochs_at)
        steps.append(".repeat()" if epochs is None or _is_const(epochs, None)
                     else f".repeat({self.text(epochs, 'num_epochs')})")
        return steps

    def source(self) -> list[str]:
        """The head of the chain: the dataset of file names (or rows) the producers made."""
        f = _first(self.f, "string_input_producer")
        if f is not None:
            files = _arg(f, "string_tensor", 0)
            match = _first(self.f, "match_filenames_once")
            if match is not None:  # the file list is a glob
                pattern = self.text(_arg(match, "pattern", 0), "pattern")
                # list_files already shuffles, so only the repeat is added
                return ([f"tf.data.Dataset.list_files({pattern})"]
                        + self.shuffle_repeat(f, 1, 2, "1"))
            n = len(files.elts) if isinstance(files, (ast.List, ast.Tuple)) else None
            return ([f"tf.data.Dataset.from_tensor_slices({self.text(files, 'filenames')})"]
                    + self.shuffle_repeat(f, 1, 2, str(n) if n else "len(filenames)"))
        f = _first(self.f, "slice_input_producer")
        if f is not None:
            rows = _arg(f, "tensor_list", 0)
            if isinstance(rows, (ast.List, ast.Tuple)) and rows.elts:
                text = "(" + ", ".join(self.text(e, "t") for e in rows.elts) + (
                    ",)" if len(rows.elts) == 1 else ")")
            else:
                text = f"tuple({self.text(rows, 'tensor_list')})"
            return [f"tf.data.Dataset.from_tensor_slices({text})"] + self.shuffle_repeat(
                f, 1, 2, "num_rows")
        f = _first(self.f, "range_input_producer")
        if f is not None:
            limit = self.text(_arg(f, "limit", 0), "limit")
            return [f"tf.data.Dataset.range({limit})"] + self.shuffle_repeat(f, 1, 2, limit)
        f = _first(self.f, "input_producer")
        if f is not None:
            tensor = self.text(_arg(f, "input_tensor", 0), "input_tensor")
            return [f"tf.data.Dataset.from_tensor_slices({tensor})"] + self.shuffle_repeat(
                f, 2, 3, "buffer_size")
        if _first(self.f, *_READERS):
            return ["tf.data.Dataset.from_tensor_slices(filenames)"]
        return ["tf.data.Dataset.from_tensor_slices(tensors)"]

    def reader(self) -> list[str]:
        """How records come out of the files: read_file, or a record dataset per file."""
        f = _first(self.f, *_READERS)  # the script's first reader
        if f is None or f.rule.id == "other_reader":
            return []
        if f.rule.id == "whole_file_reader":
            return [".map(tf.io.read_file)"]
        if f.rule.id == "tfrecord_reader":
            return [f".interleave(tf.data.TFRecordDataset, num_parallel_calls={AUTOTUNE})"]
        if f.rule.id == "text_line_reader":
            skip = _arg(f, "skip_header_lines", 0)
            inner = "tf.data.TextLineDataset(f)" + (
                f".skip({self.text(skip, 'n')})" if skip is not None else "")
            return [f".interleave(lambda f: {inner}, num_parallel_calls={AUTOTUNE})"]
        size = self.text(_arg(f, "record_bytes", 0), "record_bytes")
        return [f".interleave(lambda f: tf.data.FixedLengthRecordDataset(f, {size}), "
                f"num_parallel_calls={AUTOTUNE})"]

    def batch(self) -> list[str]:
        """``.shuffle(min_after_dequeue).batch(n, drop_remainder=True)`` as the script batched."""
        f = _first(self.f, "shuffle_batch", "shuffle_batch_join")
        if f is not None:
            size = self.text(_arg(f, "batch_size", 1), "batch_size")
            keep = self.text(_arg(f, "min_after_dequeue", 3), "min_after_dequeue")
            return [f".shuffle({keep})", f".batch({size}, drop_remainder=True)"]
        f = _first(self.f, "batch", "batch_join", "maybe_batch")
        if f is not None:
            return [f".batch({self.text(_arg(f, 'batch_size', 1), 'batch_size')}, "
                    "drop_remainder=True)"]
        return []


def _names(findings: list[Finding], keep: Callable[[Finding], bool], limit: int = 0,
           label: Callable[[Finding], str] = lambda f: f.short) -> str:
    """Distinct labels of the findings ``keep`` accepts, in source order."""
    seen: list[str] = []
    for f in findings:
        if keep(f) and label(f) not in seen:
            seen.append(label(f))
    if limit and len(seen) > limit:
        return ", ".join(seen[:limit]) + ", ..."
    return ", ".join(seen)


def _in(*categories: str) -> Callable[[Finding], bool]:
    return lambda f: f.rule.category in categories


def plan(result: ScanResult) -> str:
    """One paragraph: the tf.data chain for this script, then where each other piece goes."""
    findings = result.findings
    if not findings:
        return ""
    cats = {f.rule.category for f in findings}
    build = _Chain(result)
    decode = [n for n in _DECODE + _PARSE if f"tensorflow.{n}" in result.called]
    resize = [n for n in _RESIZE if f"tensorflow.{n}" in result.called]
    crops = _first(findings, "random_crop") is not None
    chain = build.source() + build.reader()
    where = ""
    if decode or resize:
        fn = "parse" if any(n in _PARSE for n in decode) else "_and_".join(
            (["decode"] if decode else []) + (["resize"] if resize else []))
        chain.append(f".map({fn}, num_parallel_calls={AUTOTUNE})")
        where = (f", where {fn} holds the script's {', '.join(f'tf.{n}' for n in decode + resize)}"
                 + (" (decode and resize stay in tf.data: XLA's resize needs its output size at "
                    "compile time)" if resize else ""))
    if crops:
        chain.append(f".map(random_crops, num_parallel_calls={AUTOTUNE})")
    chain += build.batch() + [f".prefetch({AUTOTUNE})"]
    text = [f"The input becomes one tf.data chain: dataset = {''.join(chain)}{where}."]
    if crops:
        text.append(f"The crops ({_names(findings, lambda f: f.rule.id == 'random_crop')}) "
                    "move into tf.data as tf.image.stateless_random_crop, so what follows them "
                    "sees a fixed shape.")
    if "stateful_random" in cats:
        rest = [f for f in findings if f.rule.category == "stateful_random"
                and f.rule.id != "random_crop"]
        ops = list(dict.fromkeys(
            _STATELESS.get(f.rule.id) or f"tf.image.stateless_{f.rule.id.split('.')[-1]}"
            for f in rest))
        on = ("each batch (fixed batch shape from drop_remainder=True)" if "batching" in cats
              else "each element, outside Dataset.map")
        if rest:
            text.append(
                f"The {'rest of the ' if crops else ''}augmentation "
                f"({_names(rest, lambda f: True)}) becomes one "
                f"@tf.function(jit_compile=True) called on {on} with static input shapes, "
                f"drawing with {', '.join(ops)}")
            text[-1] += (" from seeds split from one root by tf.random.experimental."
                         "stateless_split (a compiled function inside Dataset.map recompiled per "
                         "element: 7.2 s/image when shapes varied).")
        else:
            text.append("Seed the crops from one root split by "
                        "tf.random.experimental.stateless_split.")
    if "xla_jit" in cats:
        old_xla = _names(findings, _in("xla_jit"))
        text.append(f"XLA is switched on per function with jit_compile=True, so {old_xla} "
                    f"{'go' if ',' in old_xla else 'goes'}.")
    gone = _names(findings, _in("queue_runner", "session"), limit=6)
    if gone:
        verb = "goes" if "," not in gone else "go"
        text.append(f"A Python for loop over the dataset replaces the session loop: {gone} {verb}, "
                    "as tf.data starts and stops its own threads.")
    if "tracing" in cats:
        old = _names(findings, lambda f: f.rule.category == "tracing" and f.rule.id != "traced_run")
        text.append("Profile with tf.profiler.experimental.start(logdir) / stop() and "
                    "tf.profiler.experimental.Trace(\"step\", step_num=i, _r=1) around each step, "
                    f"read in TensorBoard's Profile tab, instead of {old or 'FULL_TRACE'} and "
                    "a timeline.json.")
    return " ".join(text)


def upgrade_note(findings: list[Finding]) -> str:
    """What ``tf_upgrade_v2`` would do with these findings, against what we recommend."""
    if not findings:
        return ""
    count = {k: sum(f.upgrade == k for f in findings)
             for k in ("compat_v1", "renamed_same", "contrib_error", "unchanged",
                       "already_compat_v1")}

    def names(*keys: str) -> str:
        return _names(findings, lambda f: f.upgrade in keys, limit=4,
                      label=lambda f: f.via or f.short)

    def n(k: int, what: str) -> str:
        return f"{k} {what}" if k == 1 else f"{k} {what}s"

    said = []
    if count["compat_v1"]:
        said.append(f"rename {count['compat_v1']} to tf.compat.v1 ({names('compat_v1')}), "
                    "which keeps them running as queue runners, readers and sessions")
    if count["renamed_same"]:
        still = " or ".join(w for w, cat in (("stateful", "stateful_random"),
                                              ("a queue", "queue_input"))
                            if any(f.upgrade == "renamed_same" and f.rule.category == cat
                                   for f in findings))
        said.append(f"rename {count['renamed_same']} to TF2 names that do the same thing "
                    f"({names('renamed_same')}: still {still})")
    if count["contrib_error"]:
        said.append(f"mark {n(count['contrib_error'], 'tf.contrib use')} ERROR, as tf.contrib "
                    f"cannot be converted ({names('contrib_error')})")
    left = count["unchanged"] + count["already_compat_v1"]
    if left:
        already = (f"; {count['already_compat_v1']} of them already spelled tf.compat.v1"
                   if count["already_compat_v1"] else "")
        said.append(f"leave {left} as written ({names('unchanged', 'already_compat_v1')}{already})")
    return ("tf_upgrade_v2 (TF 2.21) would " + "; ".join(said) + ". It never builds a tf.data "
            "pipeline, a stateless random op or a jit_compile function; this report recommends "
            "exactly those rewrites.")
