"""The migration plan as data: one :class:`Pipeline` per input pipeline of the script.

Everything here is in the script's own terms: :class:`Code` is an expression as the pipeline
function would write it (its own parameter and variable names; a helper's parameters replaced by
what the pipeline function passed), with its value when the script fixes it. The tf.data text
(:attr:`Pipeline.chain`) is rendered from this model by :mod:`.chain`; a code emitter can render
the same model into a module.

A pipeline is a source (files, rows, a Python generator, ...) and the stages that follow it in
order: reading records, per-example maps (the script's own statements, with their lines), explicit
queues, and the batching at the end. When the script builds different pipelines for the same
batch call under conditions the analysis cannot decide (``if train:`` around the producer), each
combination is a :class:`Variant` with the decisions it was built under.
"""
from __future__ import annotations

import ast
import dataclasses
import re
from typing import Any, Protocol, TypeVar, Union

from compare.migration.rules import TF1_DEFAULTS
from compare.migration.scan import Finding
from compare.migration.source import Where
from compare.migration.state import Origin
from compare.migration.values import Module


@dataclasses.dataclass(frozen=True)
class Code:
    """An expression in the pipeline function's terms. ``value`` holds the Python value when
    ``known`` (a literal, or a name the script binds to one). ``default``: the script does not
    give it; it is TF1's default for the argument (:data:`.rules.TF1_DEFAULTS`), and the plan
    says so wherever it shows it."""

    text: str
    known: bool = False
    value: object = None
    default: bool = False

    def is_value(self, value: object) -> bool:
        return self.known and self.value is value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text}
        if self.known and isinstance(self.value, (bool, int, float, str, type(None))):
            out["value"] = self.value
        if self.default:
            out["default"] = True
        return out


def tf1_default(rule: str, param: str) -> Code:
    """TF1's default of ``param`` of the construct ``rule``, as a :class:`Code` marked so."""
    value = TF1_DEFAULTS[rule][param]
    return Code(repr(value), True, value, default=True)


@dataclasses.dataclass
class Site:
    """Where a call is: the script function holding it (``<module>`` for top-level code), its
    line (1-based) and the construct as written (``tf.train.shuffle_batch``)."""

    function: str
    line: int
    construct: str
    cell: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))  # its fields are plain values (asdict is slow)


@dataclasses.dataclass
class Unresolved:
    """Something the plan could not settle from this file: what, where (line) and why."""

    what: str
    line: int | None
    why: str
    cell: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))  # its fields are plain values (asdict is slow)


@dataclasses.dataclass
class Feeder:
    """The Python code that fed a queue through placeholders: the function (a thread's target
    when ``thread``), the values it fed (line, expression) and the element signature."""

    function: str
    thread: bool
    feeds: list[tuple[int, str]]
    signature: list[tuple[str, str]]  # (shape, dtype) per component, as tf.TensorSpec takes them
    placeholders: tuple[str, ...] = ()
    #: Its sess.run(..., feed_dict=...) (tells apart feeders of one name; not in the JSON).
    line: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "thread": self.thread,
                "placeholders": list(self.placeholders),
                "feeds": [{"line": ln, "value": v} for ln, v in self.feeds],
                "signature": [{"shape": s, "dtype": d} for s, d in self.signature]}


@dataclasses.dataclass
class Source:
    """Where elements come from. ``kind``: ``files`` (a file list), ``file_pattern`` (a glob),
    ``rows`` (rows of tensors), ``range``, ``generator`` (Python code feeding placeholders),
    ``computed`` (what an enqueue op computes each time it runs: ``data`` is what it enqueues),
    ``provider`` (slim's DatasetDataProvider), ``dataset`` (a tf.data source the script already
    builds) or ``unknown`` (a parameter or another module: see the pipeline's unresolved)."""

    kind: str
    site: Site | None = None
    data: Code | None = None
    num_epochs: Code | None = None
    shuffle: Code | None = None
    seed: Code | None = None
    capacity: Code | None = None
    repeat: bool = True
    feeder: Feeder | None = None
    target: str = ""  # what the script binds each element to (rows: ``image, label``)
    #: rows: ``data`` lists tensors sliced together (slice_input_producer's tensor_list, one
    #: tuple per row); False: it is one tensor, sliced as it is (input_producer's input_tensor).
    columns: bool = True
    #: How it is shuffled when not per epoch by the source itself (numpy_input_fn: in a queue).
    shuffle_note: str = ""
    #: The order its elements keep when no producer shuffles them (a queue filled by an
    #: enqueue op keeps the order it was filled in); the plan states no shuffle argument then.
    order: str = ""
    #: ``computed``: the enqueue op is run again for each element by a QueueRunner (False: the
    #: script runs it itself, as often as it likes).
    endless: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": self.kind, "site": self.site.to_dict() if self.site else None,
               "repeat": self.repeat, "target": self.target, "columns": self.columns,
               "order": self.order, "endless": self.endless}
        for k in ("data", "num_epochs", "shuffle", "seed", "capacity"):
            v = getattr(self, k)
            out[k] = v.to_dict() if v is not None else None
        out["feeder"] = self.feeder.to_dict() if self.feeder else None
        return out


@dataclasses.dataclass
class ReadStage:
    """Records out of files. ``reader``: ``whole_file``, ``tfrecord``, ``text_line``,
    ``fixed_length``, ``other`` or ``unknown`` (made elsewhere: ``origin`` says how the script got
    it). ``readers`` is how many read in parallel; ``key_used`` whether the script used the
    record's key; ``target`` what the script binds (key, record) to."""

    reader: str
    origin: str
    read: Site
    made: Site | None = None
    args: dict[str, Code] = dataclasses.field(default_factory=dict)
    readers: Code | None = None
    key_used: bool = False
    target: str = ""
    up_to: Code | None = None  # read_up_to(queue, n): records come n at a time
    #: ``origin`` is a call defined outside this file that reads the queue and turns each record
    #: into tensors itself (``reader.prepare_reader(filename_queue)``).
    external: bool = False
    kind: str = "read"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "reader": self.reader, "origin": self.origin,
                "target": self.target,
                "read": self.read.to_dict(), "made": self.made.to_dict() if self.made else None,
                "args": {k: v.to_dict() for k, v in self.args.items()},
                "readers": self.readers.to_dict() if self.readers else None,
                "key_used": self.key_used, "external": self.external,
                "up_to": self.up_to.to_dict() if self.up_to else None}


@dataclasses.dataclass
class Step:
    """One statement of per-example code: the script function holding it, its lines, its text,
    the TensorFlow functions it calls, the conditions it runs under (``if a.flip``), how often
    the script ran it per example, callees defined outside this file, and the iteration count
    of a loop around it (``loop``)."""

    function: str
    line: int
    end_line: int
    code: str
    calls: tuple[str, ...] = ()
    guards: tuple[str, ...] = ()
    times: int = 1
    external: tuple[str, ...] = ()
    cell: int | None = None
    loop: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))  # its fields are plain values (asdict is slow)


@dataclasses.dataclass
class RandomDraw:
    """A stateful random op in per-example code and what replaces it. ``seed`` is the seed the
    script passed (None: unseeded); ``shares_seed_with`` lists the lines of the other draws that
    get the very same seed, on purpose (pix2pix flips input and target alike)."""

    construct: str
    qualified_name: str
    stateless: str
    function: str
    line: int
    seed: Code | None
    uses: int = 1
    shares_seed_with: tuple[int, ...] = ()
    cell: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["seed"] = self.seed.to_dict() if self.seed else None
        return out


@dataclasses.dataclass
class MapStage:
    """Per-example code run as one ``Dataset.map``: ``name`` (the function the plan gives it),
    its steps in order, how many run at once (``parallel``, and where that came from) and its
    random draws."""

    name: str
    steps: list[Step]
    parallel: Code | None = None
    parallel_from: str = ""
    random: list[RandomDraw] = dataclasses.field(default_factory=list)
    kind: str = "map"
    seqs: tuple[int, ...] = ()  # the executed statements (values.Exec) of its steps

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "steps": [s.to_dict() for s in self.steps],
                "parallel": self.parallel.to_dict() if self.parallel else None,
                "parallel_from": self.parallel_from,
                "random": [r.to_dict() for r in self.random]}


@dataclasses.dataclass
class QueueStage:
    """An explicit queue between two parts of the pipeline: ``queue`` is ``random_shuffle``,
    ``fifo``, ``padding_fifo`` or ``priority``."""

    queue: str
    site: Site
    capacity: Code | None = None
    min_after_dequeue: Code | None = None
    seed: Code | None = None
    #: The flag it shuffles under (numpy_input_fn's ``shuffle``); None: always.
    when: Code | None = None
    kind: str = "queue"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "queue": self.queue,
                               "site": self.site.to_dict()}
        for k in ("capacity", "min_after_dequeue", "seed", "when"):
            v = getattr(self, k)
            out[k] = v.to_dict() if v is not None else None
        return out


@dataclasses.dataclass
class BatchStage:
    """The batching call and every argument it was given (None: not given). ``op`` is the rule
    id (``shuffle_batch``, ``batch_join``, ...) or the queue method (``dequeue_many``); ``padded``
    is true for ``dynamic_pad=True`` or a PaddingFIFOQueue; ``copies`` is how many copies of the
    preprocessing a ``*_join`` call was given."""

    op: str
    site: Site
    args: dict[str, Code]
    padded: bool = False
    copies: Code | None = None
    tensors: Code | None = None  # the per-example tensors batched, as written
    #: The script's code after the batch call that makes what the pipeline hands out from the
    #: batches (``after_name`` is the function the plan gives it), and its random draws (one
    #: per batch, as in the script).
    after: list[Step] = dataclasses.field(default_factory=list)
    after_random: list[RandomDraw] = dataclasses.field(default_factory=list)
    after_name: str = ""
    kind: str = "batch"

    def arg(self, name: str) -> Code | None:
        return self.args.get(name)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "op": self.op, "site": self.site.to_dict(),
                "args": {k: v.to_dict() for k, v in self.args.items()}, "padded": self.padded,
                "copies": self.copies.to_dict() if self.copies else None,
                "tensors": self.tensors.to_dict() if self.tensors else None,
                "after": {"name": self.after_name, "steps": [s.to_dict() for s in self.after],
                          "random": [r.to_dict() for r in self.after_random]}}


@dataclasses.dataclass
class DatasetOp:
    """One transformation of a tf.data pipeline the script already builds: as TF 2 writes it
    (``text``), its line, and what changed from the script's spelling."""

    method: str
    text: str
    line: int
    changed: str = ""
    guards: tuple[str, ...] = ()
    cell: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))  # its fields are plain values (asdict is slow)


@dataclasses.dataclass
class DatasetStage:
    """The transformations of a tf.data pipeline the script builds itself, in order."""

    ops: list[DatasetOp]
    kind: str = "dataset"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ops": [o.to_dict() for o in self.ops]}


@dataclasses.dataclass
class UnbatchStage:
    """What was put into a queue with ``enqueue_many`` at ``site``: whole batches, whose rows are
    the elements (``Dataset.unbatch``)."""

    site: Site
    kind: str = "unbatch"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "site": self.site.to_dict()}


@dataclasses.dataclass
class DecodeStage:
    """Records decoded by a decoder made elsewhere (slim's ``dataset.decoder``) into the items
    the script asks for (``provider.get(['image', 'label'])``, at ``site``)."""

    site: Site
    decoder: str
    items: str
    kind: str = "decode"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "site": self.site.to_dict(), "decoder": self.decoder,
                "items": self.items}


@dataclasses.dataclass
class ExternalStage:
    """The rest of the pipeline, built outside this file: ``call`` (as written, at ``site``)
    takes the queue filled here and dequeues, preprocesses and batches it."""

    site: Site
    call: str
    kind: str = "external"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "site": self.site.to_dict(), "call": self.call}


Stage = Union[ReadStage, MapStage, QueueStage, BatchStage, DatasetStage, ExternalStage,
              DecodeStage, UnbatchStage]


@dataclasses.dataclass
class Branch:
    """One of several streams a pipeline's per-example code combines (an image and its camera
    file, read by two readers, batched together): ``source`` is its own; when the variant's
    source is not ``zip`` it zips the file lists of producers that share a seed (so the pairs
    stay aligned) and the branch reads its item ``component``; ``stages`` is what happens to
    the stream before the streams are zipped (reading, per-stream queues)."""

    source: Source
    stages: list[Stage]
    component: int = 0
    name: str = ""  # its dataset variable in the chain (set by the renderer)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "component": self.component,
                "source": self.source.to_dict(), "stages": [s.to_dict() for s in self.stages]}


@dataclasses.dataclass
class Variant:
    """One way the pipeline is built: the undecidable conditions it was built under (``when``:
    (condition as written, its value)), the source and the stages in order."""

    when: tuple[tuple[str, bool], ...]
    source: Source
    stages: list[Stage]
    root_seed: Code | None = None
    origin: Origin | None = None  # the symbolic run it came from: for the emitter
    #: Several streams zipped before ``stages`` (see :class:`Branch`); ``source`` is then their
    #: shared source, or kind ``zip`` when each branch has its own.
    branches: list[Branch] = dataclasses.field(default_factory=list)

    def maps(self) -> list[MapStage]:
        return [s for s in self.stages if isinstance(s, MapStage)]

    def batch(self) -> BatchStage | None:
        return next((s for s in self.stages if isinstance(s, BatchStage)), None)

    def to_dict(self) -> dict[str, Any]:
        return {"when": [{"condition": c, "value": v} for c, v in self.when],
                "source": self.source.to_dict(), "stages": [s.to_dict() for s in self.stages],
                "branches": [b.to_dict() for b in self.branches],
                "root_seed": self.root_seed.to_dict() if self.root_seed else None}


@dataclasses.dataclass
class Attribute:
    """An attribute of the object a method pipeline runs on (``self.batch_size``), used by the
    plan: where the class sets it (function, line) and to what, as written."""

    name: str
    function: str
    line: int
    value: str
    cell: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))  # its fields are plain values (asdict is slow)


@dataclasses.dataclass
class Pipeline:
    """One input pipeline: the script function that builds it (``function``, with its
    ``params``), the line of its batch or dequeue call (``line``; for a pipeline that never
    batches, the read; for a queue handed out unbatched, the queue), how it is built
    (``variants``), what is left unresolved, and the tf.data code (``chain``)."""

    function: str
    params: tuple[str, ...]
    line: int
    end: Site
    kind: str
    variants: list[Variant]
    unresolved: list[Unresolved] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    chain: str = ""
    legend: list[str] = dataclasses.field(default_factory=list)
    cell: int | None = None
    #: Every batch or dequeue call of the pipeline: more than one when the script picks one of
    #: several under a condition (``if shuffle: shuffle_batch(...) else: batch(...)``), each a
    #: variant; ``end`` is the first.
    ends: list[Site] = dataclasses.field(default_factory=list)
    #: A method's pipeline: the attributes of its object the plan uses, and where they are set.
    attributes: list[Attribute] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "params": list(self.params), "line": self.line,
                "cell": self.cell, "kind": self.kind, "end": self.end.to_dict(),
                "ends": [e.to_dict() for e in self.ends],
                "attributes": [a.to_dict() for a in self.attributes],
                "chain": self.chain, "unresolved": [u.to_dict() for u in self.unresolved],
                "notes": list(self.notes), "legend": list(self.legend),
                "variants": [v.to_dict() for v in self.variants]}


def literal_length(text: str) -> int | None:
    """How many items a list or tuple written out in ``text`` has (``[a, b]``: 2), else None."""
    if not text.startswith(("[", "(")):
        return None
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    return len(node.elts) if isinstance(node, (ast.List, ast.Tuple)) else None


def relocate(p: Pipeline, where: Where) -> None:
    """Turn the lines of a plan made from a notebook's joined cells into (cell, line in the
    cell); ``where(line) -> (cell, line)``."""
    def fix(obj: object) -> None:
        if obj is None:
            return
        line = getattr(obj, "line", None)
        if dataclasses.is_dataclass(obj) and hasattr(obj, "cell") and line:
            cell, line = where(line)
            setattr(obj, "cell", cell)
            setattr(obj, "line", line)
            if hasattr(obj, "end_line"):
                setattr(obj, "end_line", where(getattr(obj, "end_line"))[1])
            shared = getattr(obj, "shares_seed_with", ())
            if shared:
                setattr(obj, "shares_seed_with", tuple(where(ln)[1] for ln in shared))
        if dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                if f.name not in ("cell", "line"):
                    fix(getattr(obj, f.name))
        elif isinstance(obj, (list, tuple)):
            for x in obj:
                if dataclasses.is_dataclass(x):
                    fix(x)
        elif isinstance(obj, dict):
            for x in obj.values():
                if dataclasses.is_dataclass(x):
                    fix(x)
    p.cell, p.line = where(p.line)
    fix(p.end)
    for e in p.ends:
        if e is not p.end:
            fix(e)
    for v in p.variants:
        fix(v)
    fix(p.unresolved)
    fix(p.attributes)


_T = TypeVar("_T")


def req(x: _T | None) -> _T:
    """``x``, a field the plan's kind always sets (a source's data, a dequeue's site): a
    ValueError when a plan breaks that."""
    if x is None:
        raise ValueError("a plan left out a field its kind always sets")
    return x


class Located(Protocol):
    """Anything of a plan with a line (and, in a notebook, a cell)."""

    @property
    def line(self) -> int | None: ...


def short_name(qualname: str) -> str:
    """The last part of a qualified function name; top-level code is ``pipeline``."""
    parts = qualname.split(".")
    if parts[-1] == "__init__" and len(parts) > 1:  # a constructor: its class names it
        return f"{parts[-2]}_init"
    return "pipeline" if parts[-1].startswith("<") else parts[-1]


def generator_name(f: Feeder) -> str:
    """``<feeding function>_<what it fed>``: ``thread_main_sample`` for self.sample_placeholder,
    ``enqueue_next_group_values`` for self._placeholders; always an identifier."""
    base = short_name(f.function).strip("_") if f.function else "feeder"
    fed = f.placeholders[0].rsplit(".", 1)[-1] if f.placeholders else ""
    words = [w for w in re.split(r"\W+|_", fed) if w and w.lower() not in _PLACEHOLDER_WORDS]
    name = f"{base}_{'_'.join(words) or 'values'}"
    return re.sub(r"\W", "_", name) if name.isidentifier() else "feeder_values"


#: Words naming a placeholder itself, left out of a generator's name.
_PLACEHOLDER_WORDS = frozenset({"placeholder", "placeholders", "ph", "phs", "pl", "input",
                                "inputs"})


class Report(Protocol):
    """What a migration report holds (``compare.migrate.MigrationReport``): what the text, the
    JSON, the port and the check are made from."""

    script: str
    findings: list[Finding]
    plan: str
    tf_upgrade_v2: str
    pipelines: list[Pipeline]
    notes: list[str]
    module: Module | None
