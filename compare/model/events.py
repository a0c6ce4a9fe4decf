"""The one event model every loader produces and every analysis reads.

A :class:`Trace` holds complete events (``ph: X``, and ``B``/``E`` pairs closed into them) as
numpy columns, with strings interned in one symbol table (as HTA does), so a million-event trace
costs tens of megabytes, not gigabytes. Counters, flows and tensor-object events are kept beside
the events. No analysis reads raw JSON or protos; they read this.

Times are microseconds (Chrome trace convention) as floats, absolute as in the source file.
"""
from __future__ import annotations

import dataclasses
import heapq
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Iterable, Iterator, cast

import numpy as np

from compare.model import nesting
from compare.model.nesting import Nesting

if TYPE_CHECKING:
    from common.hlo import HloModule

#: Process kinds (what a process row of a trace viewer shows).
PROCESS_KINDS = ("host", "device", "compute", "allocator", "tensors", "stream", "memcpy", "merged",
                 "other")
#: Event categories, assigned by the loader from names alone (the mapper refines stages).
CATEGORIES = ("op", "xla_compile", "xla_run", "xla_kernel", "tf_data", "queue", "runtime",
              "python", "step", "other")
CAT = {c: i for i, c in enumerate(CATEGORIES)}


#: Longest string a trace keeps (characters): longer names are cut to this when interned, and
#: the loader says how many were (a 50 MB event name is no name; every later step, from
#: matching names to printing them, stays bounded).
MAX_NAME_CHARS = 4096


#: Characters no name keeps as they are: C0 and C1 controls (an escape sequence drives the
#: terminal that shows it, a newline breaks a table row), bidirectional overrides and
#: isolates (they reorder the text around them) and lone surrogates (JSON's ``"\udc80"``;
#: no UTF-8 writer takes them). Each becomes its visible escape (``\x1b``, ``\u202e``).
_UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def showable(s: str) -> str:
    """``s`` with every :data:`_UNSHOWABLE` character replaced by its escape."""
    if s.isprintable() if s.isascii() else not _UNSHOWABLE.search(s):
        return s
    return _UNSHOWABLE.sub(lambda m: repr(m.group())[1:-1], s)


def _all_showable(items: list[str]) -> bool:
    joined = "".join(items)
    return joined.isprintable() if joined.isascii() else not _UNSHOWABLE.search(joined)


def cut_name(s: str) -> str:
    """``s`` cut to :data:`MAX_NAME_CHARS`, saying so and how long it was."""
    if len(s) <= MAX_NAME_CHARS:
        return s
    tail = f"... ({len(s):,} characters)"
    return s[:MAX_NAME_CHARS - len(tail)] + tail


class Strings:
    """An interning symbol table: id 0 is always the empty string. Strings longer than
    :data:`MAX_NAME_CHARS` are kept cut (:func:`cut_name`); ``cut`` counts the distinct ones
    and ``longest`` is the longest seen. Strings are kept :func:`showable`."""

    __slots__ = ("_ids", "names", "_cut", "longest")

    def __init__(self) -> None:
        self.names: list[str] = [""]
        self._ids: dict[str, int] = {"": 0}
        self._cut: set[str] = set()
        self.longest = 0

    @property
    def cut(self) -> int:
        return len(self._cut)

    def id(self, s: str | None) -> int:
        if not s:
            return 0
        i = self._ids.get(s)
        if i is None:
            kept = self.short(s)
            if kept is not s:
                return self.id(kept)
            i = self._ids[s] = len(self.names)
            self.names.append(s)
        return i

    def short(self, s: str) -> str:
        """``s`` as this table keeps it (:func:`showable`, and cut if too long, counted)
        without interning it: for names kept outside the table (processes, threads)."""
        if len(s) <= MAX_NAME_CHARS:
            if s.isascii() and s.isprintable():
                return s   # nearly every name: nothing to do
            kept = showable(s)
            if len(kept) <= MAX_NAME_CHARS:
                return kept
        self.longest = max(self.longest, len(s))
        c = cut_name(showable(s))
        self._cut.add(c)
        return c

    def ids(self, items: Iterable[str | None]) -> list[int]:
        """The ids of ``items`` (falsy items are 0), interning new strings in order."""
        tbl, names = self._ids, self.names
        items = items if isinstance(items, list) else list(items)
        out = list(map(tbl.get, items))
        if None in out:
            new = [s for s in dict.fromkeys([s for s, i in zip(items, out) if i is None]) if s]
            if any(len(s) > MAX_NAME_CHARS for s in new) or not _all_showable(new):
                return [self.id(s) for s in items]   # rare: cut or escape them one by one
            tbl.update(zip(new, range(len(names), len(names) + len(new))))
            names.extend(new)
            out = list(map(tbl.get, items))
            if None in out:  # None items
                out = [0 if i is None else i for i in out]
        return cast("list[int]", out)  # every None became an id above

    def lookup(self, s: str) -> int | None:
        """The id of ``s`` if it was interned, else None (no insertion)."""
        return self._ids.get(s)

    def __getitem__(self, i: int) -> str:
        return self.names[i]

    def __len__(self) -> int:
        return len(self.names)


@dataclasses.dataclass
class Process:
    pid: int
    name: str
    kind: str = "other"
    sort_index: int | None = None


#: The name of the one step of a trace that marks none: the whole trace is one window.
WHOLE_TRACE = "whole trace"


@dataclasses.dataclass
class Step:
    """One step: a marked training/input step (xprof) or one session run (timeline)."""

    num: int
    ts: float
    dur: float
    name: str = ""


#: Columns of :class:`Events`, with their dtypes. String columns hold ids into ``Trace.strings``.
EVENT_COLUMNS: dict[str, type] = {
    "pid": np.int64, "tid": np.int64, "ts": np.float64, "dur": np.float64,
    "name": np.int32,       # event name as displayed (op type for timeline.py, op or kernel name for xprof)
    "op_type": np.int32,    # TF op type (DecodeJpeg, _XlaRun, ...) when known
    "tf_name": np.int32,    # full TF node name with scopes when known
    "category": np.int8,    # index into CATEGORIES
    "group": np.int64,      # xprof group_id (links events to a step), -1 if none
    "hlo_module": np.int32, # XLA module of a compiled kernel event
    "hlo_op": np.int32,     # HLO instruction of a compiled kernel event
    "step": np.int32,       # step number, -1 if outside every step
}
#: The columns of :data:`EVENT_COLUMNS` that hold ids into ``Trace.strings``.
STRING_COLUMNS = ("name", "op_type", "tf_name", "hlo_module", "hlo_op")


class Events:
    """Complete events as parallel numpy arrays (see :data:`EVENT_COLUMNS`), plus dataflow inputs
    in CSR form: the inputs of event ``i`` are ``input_ids[input_ptr[i]:input_ptr[i+1]]`` (string
    ids of producer node names, from timeline ``input0..N`` args)."""

    # The columns of EVENT_COLUMNS, declared for type checkers (``__init__`` makes them).
    pid: np.ndarray
    tid: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    name: np.ndarray
    op_type: np.ndarray
    tf_name: np.ndarray
    category: np.ndarray
    group: np.ndarray
    hlo_module: np.ndarray
    hlo_op: np.ndarray
    step: np.ndarray
    input_ptr: np.ndarray
    input_ids: np.ndarray

    def __init__(self, n: int = 0) -> None:
        for col, dt in EVENT_COLUMNS.items():
            setattr(self, col, np.zeros(n, dtype=dt))
        self.input_ptr = np.zeros(n + 1, dtype=np.int64)
        self.input_ids = np.zeros(0, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def end(self) -> np.ndarray:
        end: np.ndarray = self.ts + self.dur
        return end

    def inputs_of(self, i: int) -> np.ndarray:
        return self.input_ids[self.input_ptr[i]:self.input_ptr[i + 1]]

    def inputs_of_all(self, index: np.ndarray) -> np.ndarray:
        """The inputs of every event of ``index``, concatenated in that order (one gather)."""
        index = np.asarray(index, np.int64)
        starts = self.input_ptr[index]
        lengths = self.input_ptr[index + 1] - starts
        total = int(lengths.sum())
        if not total:
            return np.zeros(0, self.input_ids.dtype)
        # position j of the output reads input_ids[start of its event + its rank within it]
        first = np.cumsum(lengths) - lengths
        at = np.arange(total) - np.repeat(first, lengths) + np.repeat(starts, lengths)
        out: np.ndarray = self.input_ids[at]
        return out

    def take(self, index: np.ndarray) -> "Events":
        """A new Events holding rows ``index`` (an int array or boolean mask), inputs included."""
        index = np.flatnonzero(index) if index.dtype == bool else np.asarray(index)
        out = Events(0)
        for col in EVENT_COLUMNS:
            setattr(out, col, getattr(self, col)[index])
        starts, stops = self.input_ptr[index], self.input_ptr[index + 1]
        lengths = stops - starts
        out.input_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        if lengths.sum():
            out.input_ids = np.concatenate([self.input_ids[a:b] for a, b in zip(starts, stops)])
        return out


assert set(EVENT_COLUMNS) <= set(Events.__annotations__), "declare every column on Events"


class EventBuilder:
    """Accumulates events chunk by chunk (lists or arrays per column), then freezes to numpy.

    Each chunk is converted to numpy at once, so a million events never sit in Python lists
    of Python numbers (tens of bytes each)."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[np.ndarray]] = {c: [] for c in EVENT_COLUMNS}
        self.input_lengths: list[np.ndarray] = []
        self.input_ids: list[np.ndarray] = []

    def extend(self, **cols: Sequence[Any] | np.ndarray) -> None:
        n = len(cols["ts"])
        for c, dt in EVENT_COLUMNS.items():
            v = cols.get(c)
            if v is None:
                default = -1 if c in ("group", "step") else 0
                self.chunks[c].append(np.full(n, default, dtype=dt))
            else:
                self.chunks[c].append(np.asarray(v, dtype=dt))
        lengths = cols.get("input_lengths")
        if lengths is None:
            self.input_lengths.append(np.zeros(n, dtype=np.int64))
        else:
            self.input_lengths.append(np.asarray(lengths, dtype=np.int64))
            self.input_ids.append(np.asarray(cols["input_ids"], dtype=np.int32))

    def freeze(self) -> Events:
        ev = Events(0)
        for c, dt in EVENT_COLUMNS.items():
            parts = self.chunks[c]
            setattr(ev, c, np.concatenate(parts).astype(dt, copy=False) if parts
                    else np.zeros(0, dtype=dt))
            self.chunks[c] = []
        lengths = np.concatenate(self.input_lengths) if self.input_lengths else \
            np.zeros(0, dtype=np.int64)
        ev.input_ptr = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        ev.input_ids = np.concatenate(self.input_ids).astype(np.int32, copy=False) \
            if self.input_ids else np.zeros(0, dtype=np.int32)
        return ev


@dataclasses.dataclass
class Counters:
    """Counter samples (``ph: C``), e.g. allocator bytes in use: one row per (series, time)."""

    pid: np.ndarray
    name: np.ndarray   # string id of the series ("mklcpu", "cpu", ...)
    ts: np.ndarray
    value: np.ndarray

    @staticmethod
    def empty() -> "Counters":
        return Counters(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0), np.zeros(0))


@dataclasses.dataclass
class Flows:
    """Flow arrows: ``ph`` s (start) / t (step) / f (end) with an id; timeline.py draws one per
    tensor edge from producer to consumer."""

    id: np.ndarray
    phase: np.ndarray  # 0 = s, 1 = t, 2 = f
    pid: np.ndarray
    tid: np.ndarray
    ts: np.ndarray
    name: np.ndarray

    @staticmethod
    def empty() -> "Flows":
        z = np.zeros(0, np.int64)
        return Flows(z, z.astype(np.int8), z, z, z.astype(np.float64), z.astype(np.int32))


@dataclasses.dataclass
class Trace:
    """A loaded trace.

    ``format``: "timeline" (tensorflow.python.client.timeline output), "xprof" (TensorBoard
    profile: an .xplane.pb, a logdir, or the trace_viewer JSON xprof writes) or "chrome" (any
    other Chrome trace). ``steps`` are the trace's steps in time order. ``hlo`` maps an XLA
    module name to its :class:`common.hlo.HloModule` when the source carries HLO (xplane).
    ``warnings`` say what was skipped and why.
    """

    source: str
    format: str
    strings: Strings
    processes: dict[int, Process]
    lanes: dict[tuple[int, int], str]
    events: Events
    counters: Counters = dataclasses.field(default_factory=Counters.empty)
    flows: Flows = dataclasses.field(default_factory=Flows.empty)
    objects: dict[int, int] = dataclasses.field(default_factory=dict)
    steps: list[Step] = dataclasses.field(default_factory=list)
    hlo: dict[str, HloModule] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    _nesting: Nesting | None = dataclasses.field(default=None, repr=False, compare=False)

    # --- convenience views ---------------------------------------------------------------

    def s(self, i: int) -> str:
        return self.strings.names[i]

    def col_str(self, col: str) -> list[str]:
        """A string column decoded (for small traces, tests and reports)."""
        names = self.strings.names
        return [names[i] for i in getattr(self.events, col)]

    def category_id(self, category: str) -> int:
        return CATEGORIES.index(category)

    def mask(self, category: str | None = None, name: str | None = None,
             op_type: str | None = None) -> np.ndarray:
        """Boolean mask of events matching every given criterion (exact matches)."""
        ev = self.events
        m = np.ones(len(ev), dtype=bool)
        if category is not None:
            m &= ev.category == CATEGORIES.index(category)
        for col, val in (("name", name), ("op_type", op_type)):
            if val is not None:
                sid = self.strings.lookup(val)
                m &= (getattr(ev, col) == sid) if sid is not None else False
        return m

    def lane_name(self, pid: int, tid: int) -> str:
        return self.lanes.get((pid, tid), str(tid))

    def _lane_positions(self, index: np.ndarray) -> Iterator[np.ndarray]:
        """For each lane among the events ``index``: positions into ``index``, by start time."""
        ev = self.events
        if not len(index):
            return
        pid, tid = ev.pid[index], ev.tid[index]
        order = np.lexsort((ev.ts[index], tid, pid))
        p, t = pid[order], tid[order]
        cuts = np.flatnonzero((p[1:] != p[:-1]) | (t[1:] != t[:-1])) + 1
        yield from np.split(order, cuts)

    def iter_lanes(self, index: np.ndarray | None = None
                   ) -> Iterator[tuple[int, int, np.ndarray]]:
        """(pid, tid, indices sorted by start time) for every lane that has events (only the
        events ``index`` when given)."""
        ev = self.events
        index = np.arange(len(ev)) if index is None else np.asarray(index, dtype=np.int64)
        for positions in self._lane_positions(index):
            chunk = index[positions]
            yield int(ev.pid[chunk[0]]), int(ev.tid[chunk[0]]), chunk

    @property
    def nesting(self) -> Nesting:
        """Which event runs inside which on each lane (computed once, see
        :mod:`compare.model.nesting`)."""
        if self._nesting is None or len(self._nesting.parent) != len(self.events):
            ev = self.events
            self._nesting = nesting.build(ev.pid, ev.tid, ev.ts, ev.dur)
        return self._nesting

    def self_time(self, index: np.ndarray | None = None) -> np.ndarray:
        """Each event's duration minus the time of events nested inside it on its lane.

        Lanes of timeline.py traces never nest, so this equals ``dur`` there; xprof host threads
        nest (ExecutorState::Process > op > kernel). With ``index``, only those events count (as
        parents and as children) and the result is aligned with ``index``.
        """
        ev = self.events
        nest = self.nesting
        index = np.arange(len(ev)) if index is None else np.asarray(index, dtype=np.int64)
        out = ev.dur[index].astype(np.float64, copy=True)
        anc = nest.nearest_in(index)
        child = anc >= 0
        if child.any():
            pos = np.full(len(ev), -1, np.int64)
            pos[index] = np.arange(len(index))
            within = nest.end[index[child]] - ev.ts[index[child]]
            np.subtract.at(out, pos[anc[child]], within)
        np.maximum(out, 0.0, out=out)
        return out

    def step_of(self, ts: np.ndarray) -> np.ndarray:
        """Step number containing each timestamp, -1 outside every step; where steps overlap,
        the one listed last. One sort, whatever the number of steps."""
        ts = np.asarray(ts, dtype=np.float64)
        out = np.full(len(ts), -1, dtype=np.int32)
        if not self.steps or not len(ts):
            return out
        start = np.array([st.ts for st in self.steps], dtype=np.float64)
        end = start + np.array([st.dur for st in self.steps], dtype=np.float64)
        nums = np.array([st.num for st in self.steps], dtype=np.int32)
        order = np.argsort(start, kind="stable")
        start, end, nums = start[order], end[order], nums[order]
        if (end[:-1] <= start[1:]).all():   # disjoint: each instant in at most one step
            k = np.searchsorted(start, ts, side="right") - 1
            hit = (k >= 0) & (ts < end[np.maximum(k, 0)])
            out[hit] = nums[k[hit]]
            return out
        return _step_of_overlapping(ts, start, end, nums, order, out)


def _step_of_overlapping(ts: np.ndarray, start: np.ndarray, end: np.ndarray, nums: np.ndarray,
                         listed: np.ndarray, out: np.ndarray) -> np.ndarray:
    """:meth:`Trace.step_of` for overlapping steps (sorted by start; ``listed``: each one's
    position in the trace's list): a sweep in time keeping the open steps in a heap by that
    position, so the last listed open step is always on top."""
    heap: list[tuple[int, float, int]] = []
    j = 0
    for i in np.argsort(ts, kind="stable"):
        t = ts[i]
        while j < len(start) and start[j] <= t:
            heapq.heappush(heap, (-int(listed[j]), float(end[j]), int(nums[j])))
            j += 1
        while heap and heap[0][1] <= t:   # ended: it covers no later instant either
            heapq.heappop(heap)
        if heap:
            out[i] = heap[0][2]
    return out
