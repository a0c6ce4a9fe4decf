"""The one accounting every number of a comparison comes from.

A trace's steps are windows: each step as the trace marks it (xprof's device step rows, a
profiler step marker, a TF1 session run). Every number is a quantity of events *inside* a
window, by one rule:

- an event counts by its overlap with the window (clipped at both edges), its own time only
  (the time of events nested in it on its row is theirs), on rows that do not repeat others
  (TF1's ``stream:all`` and ``memcpy`` rows where per-stream rows exist:
  :func:`compare.analysis.rows.duplicate_pids`);
- **wall**: each instant of the window once (:mod:`compare.analysis.attribution`). While the
  step waits for or reads its input (an iterator's GetNext, a queue dequeue, a reader's read,
  on any of its threads), the instant is the ``input`` row's, whatever else runs: the step is
  held up by its input (a map running inline inside GetNext is input time, not the model's).
  Other instants are shared among the rows working at them; instants where rows only wait go
  to what they wait in, instants with nothing traced to ``idle`` (between traced work) or
  ``untraced`` (at the window's edges, before the first event and after the last). Per step the
  wall times of all cells add up to the window exactly;
- **busy**: an event's own time in the window, whether it works or waits. Summed over an op's
  events it is the op's time (parallel executions add up), except where the op's host events
  and its device events overlap in time: that stretch counts once. A TF1 GPU op's box on its
  device's compute row (the host launching it) that lasts until its kernels end, and a copy
  drawn on a host row and on a device row (one transfer), are the op's time once: its device
  time plus the host's time outside it;
- **cpu**: busy time that is not waiting.

The cells: (op, row of the generic view, device or host). An op's events each fall in one cell
(an XLA kernel is split among the TF ops fused into it, :mod:`compare.analysis.opkeys`); time
no op owns (TF's runtime, waits, idle) sits in cells without an op. Every table — the group
rows, the step split, ``ops_diff``, ``types_diff``, ``step_delta`` — is a sum of cells, so the
same quantity is the same number wherever it is printed. Tables are means over steady steps
(every step but the first; a single step's own), as means add up and medians do not.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Hashable, TypeVar

import numpy as np

from compare.analysis.analyse import TraceAnalysis
from compare.analysis.attribution import StepTimes
from compare.analysis.groups import GroupMap
from compare.analysis.opkeys import EventOps, Key, op_events
from compare.analysis.rows import on_gpu
from compare.model.events import Trace
from compare.model.intervals import union_per_group
from compare.vocabulary.groups import IDLE_WORKERS
from compare.vocabulary.labels import LABEL

#: Rows of the generic view that hold no event: time nothing traced runs.
IDLE, UNTRACED = "idle", "untraced"
#: The runtime row: also the wall time of worker regions no op runs beside.
RUNTIME = "runtime"
#: The input row: also every instant the step waits for or reads its input.
INPUT = "input"

#: What cells are grouped by (:meth:`Account.ids`).
K = TypeVar("K", bound=Hashable)

@dataclasses.dataclass(frozen=True)
class Cell:
    """Where time is booked: the op (-1: no op's), the generic view's row key
    (``compute: layer_1``, ``runtime``, ``idle``...), whether it is a device row's, and for time
    no op owns, the name of its events."""

    op: int                  # index into Account.ops, -1 for none
    row: str
    device: bool
    event: str = ""          # time no op owns: the name of the events (ExecutorState::Process)

    @property
    def group(self) -> str:
        return self.row.partition(": ")[0]


@dataclasses.dataclass
class StepAccount:
    """One step window: its cells with time (ascending ids) and their time in it."""

    num: int
    ts: float
    dur: float
    cells: np.ndarray
    wall: np.ndarray
    busy: np.ndarray
    cpu: np.ndarray
    count: np.ndarray        # per cell: executions with time in the window
    untraced_us: float

    def total(self, what: str, ids: np.ndarray, n: int) -> np.ndarray:
        """``what`` summed per id (``ids``: per cell of the account, its id below ``n``)."""
        return np.bincount(ids[self.cells], getattr(self, what), minlength=n)


@dataclasses.dataclass
class OpInfo:
    key: Key
    unit: str                # the XLA cluster/function it ran inside, if any


@dataclasses.dataclass
class Account:
    """A trace's steps in cells (see the module docstring)."""

    cells: list[Cell]
    ops: list[OpInfo]
    steps: list[StepAccount]
    rows: list[str] = dataclasses.field(default_factory=list)   # the generic view's row keys
    event_rows: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def steady(self) -> list[StepAccount]:
        """Every step but the first; a single step's own."""
        return self.steps[1:] if len(self.steps) >= 2 else list(self.steps)

    @property
    def first(self) -> StepAccount | None:
        return self.steps[0] if len(self.steps) >= 2 else None

    def ids(self, of: Callable[[Cell], K]) -> tuple[np.ndarray, list[K]]:
        """(per cell an id, the distinct values): cells grouped by ``of(cell)``."""
        seen: dict[K, int] = {}
        ids = np.array([seen.setdefault(of(c), len(seen)) for c in self.cells], np.int64)
        return ids, list(seen)

    def per_step(self, what: str, ids: np.ndarray, n: int,
                 steps: list[StepAccount] | None = None) -> np.ndarray:
        """``what`` per id (rows) per step (columns), over ``steps`` (default: the steady)."""
        steps = self.steady if steps is None else steps
        out = np.zeros((n, len(steps)))
        for j, st in enumerate(steps):
            out[:, j] = st.total(what, ids, n)
        return out

    def mean(self, what: str, ids: np.ndarray, n: int) -> np.ndarray:
        """``what`` per id, mean over the steady steps (0 with none)."""
        steps = self.steady
        acc = np.zeros(n)
        for st in steps:
            acc += st.total(what, ids, n)
        return acc / max(1, len(steps))

    def durations(self, steps: list[StepAccount] | None = None) -> np.ndarray:
        return np.array([st.dur for st in (self.steady if steps is None else steps)])

    def untraced(self, steps: list[StepAccount] | None = None) -> np.ndarray:
        return np.array([st.untraced_us for st in (self.steady if steps is None else steps)])


# --------------------------------------------------------------------------------------------
# building it

class _Cells:
    """Cell ids, made on first use."""

    def __init__(self) -> None:
        self.ids: dict[Cell, int] = {}

    def of(self, cell: Cell) -> int:
        k = self.ids.get(cell)
        if k is None:
            k = self.ids[cell] = len(self.ids)
        return k

    def many(self, op: np.ndarray, row: np.ndarray, dev: np.ndarray, name: np.ndarray,
             rows: list[str], names: list[str]) -> np.ndarray:
        """Cell ids of parallel arrays (op index, row id into ``rows``, device flag, event
        name id into ``names``, which counts only where no op is)."""
        if not len(op):
            return np.zeros(0, np.int64)
        name = np.where(op >= 0, 0, name)
        quad, inv = np.unique(np.stack([op, row, dev.astype(np.int64), name], axis=1), axis=0,
                              return_inverse=True)
        ids = np.array([self.of(Cell(int(o), rows[int(r)], bool(d), names[int(n)] if n else ""))
                        for o, r, d, n in quad], np.int64)
        return ids[inv.reshape(-1)]


def account(a: TraceAnalysis, gmap: GroupMap) -> Account:
    """The account of one analysed trace (see the module docstring)."""
    tr, ev = a.trace, a.trace.events
    eo = op_events(a)
    rows, row_of = _row_ids(gmap, len(ev))
    dev = on_gpu(tr)
    cells = _Cells()
    # per event: its entries (cell, fraction); events that run no op have one, their row's
    n = len(ev)
    n_entries = np.ones(n, np.int64)
    n_entries[eo.idx] = np.diff(eo.ptr)
    ptr = np.concatenate([[0], np.cumsum(n_entries)]).astype(np.int64)
    ent_op = np.full(int(ptr[-1]), -1, np.int64)
    ent_frac = np.ones(int(ptr[-1]))
    ent_ev = np.repeat(np.arange(n, dtype=np.int64), n_entries)
    if len(eo.idx):
        pos = _positions(ptr[eo.idx], np.diff(eo.ptr))
        ent_op[pos] = eo.keys
        ent_frac[pos] = eo.fracs
    names = ev.name[ent_ev].astype(np.int64)
    ent_cell = cells.many(ent_op, row_of[ent_ev], dev[ent_ev], names, rows, tr.strings.names)
    if INPUT not in rows:
        rows.append(INPUT)
    ent_input = cells.many(ent_op, np.full(len(ent_ev), rows.index(INPUT)), dev[ent_ev], names,
                           rows, tr.strings.names)
    single = _single_ops(eo)
    extra = {name: cells.of(Cell(-1, name, False)) for name in (IDLE, UNTRACED)}
    extra[RUNTIME] = cells.of(Cell(-1, RUNTIME, False, IDLE_WORKERS))
    steps = [_step(st, ptr, (ent_cell, ent_input), ent_frac, extra, single, tr, dev)
             for st in a.attribution.steps]
    cell_list = [c for c, _ in sorted(cells.ids.items(), key=lambda kv: kv[1])]
    ops = [OpInfo(k, u) for k, u in zip(eo.names, eo.units)]
    return Account(cell_list, ops, steps, rows, row_of)


def _row_ids(gmap: GroupMap, n: int) -> tuple[list[str], np.ndarray]:
    keys = [gmap.key(i) for i in range(n)] if n else []
    rows: dict[str, int] = {}
    ids = np.array([rows.setdefault(k, len(rows)) for k in keys], np.int64)
    return list(rows), ids


def _positions(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The flat positions ``starts[k] .. starts[k] + counts[k] - 1`` for every k, in order."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64)
    offs = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.asarray(np.repeat(starts, counts) + offs)


@dataclasses.dataclass
class _Single:
    """The op events wholly of one op (``events``, ascending) and that op's index (``key``):
    the ones whose host and device time may overlap."""

    events: np.ndarray
    key: np.ndarray


def _single_ops(eo: EventOps) -> _Single:
    single = np.diff(eo.ptr) == 1
    return _Single(eo.idx[single], eo.keys[eo.ptr[:-1][single]])


def _step(st: StepTimes, ptr: np.ndarray, ent_cells: tuple[np.ndarray, np.ndarray],
          ent_frac: np.ndarray, extra: dict[str, int], single: _Single, tr: Trace,
          dev: np.ndarray) -> StepAccount:
    """One step's cells from its per-event times (:class:`~compare.analysis.attribution.
    StepTimes`); ``ent_cells``: each entry's cell, and its cell in the input row (the wall
    share it had while the step waited for or read its input)."""
    e = st.events
    counts = ptr[e + 1] - ptr[e]
    pos = _positions(ptr[e], counts)
    cell, cell_in = ent_cells[0][pos], ent_cells[1][pos]
    frac = ent_frac[pos]
    def rep(v: np.ndarray) -> np.ndarray:
        return np.asarray(np.repeat(v, counts) * frac)

    z_n = np.zeros(len(cell))
    parts = [(cell, rep(st.ev_wall - st.ev_input), rep(st.ev_self), rep(st.ev_cpu),
              np.ones(len(cell))),
             (cell_in, rep(st.ev_input), z_n, z_n, z_n)]
    idle = float(st.wall[LABEL["idle"]])
    untraced = min(idle, st.untraced_us)
    rest = max(0.0, st.dur - float(st.ev_wall.sum()) - idle)
    z = np.zeros(1)
    parts += [(np.array([extra[IDLE]]), np.array([idle - untraced]), z, z, z),
              (np.array([extra[UNTRACED]]), np.array([untraced]), z, z, z),
              (np.array([extra[RUNTIME]]), np.array([rest]), z, z, z)]
    first_entry = np.cumsum(counts) - counts
    fix = _overlap_once(st, single, tr, dev, cell[first_entry] if len(e) else cell)
    if fix is not None:
        parts.append(fix)
    c = np.concatenate([p[0] for p in parts])
    ids, inv = np.unique(c, return_inverse=True)
    sums = [np.bincount(inv, np.concatenate([p[j] for p in parts]), minlength=len(ids))
            for j in (1, 2, 3, 4)]
    wall, busy, cpu, count = sums
    keep = (wall != 0) | (busy != 0) | (count != 0)
    return StepAccount(st.num, st.ts, st.dur, ids[keep], wall[keep], busy[keep], cpu[keep],
                       count[keep], untraced_us=untraced)


#: A part of a step's account: (cells, wall, busy, cpu, count), one value per cell.
Part = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _overlap_once(st: StepTimes, single: _Single, tr: Trace, dev: np.ndarray,
                  ev_cell: np.ndarray) -> Part | None:
    """The busy correction that counts an op's time once where its host events and its
    device events overlap: per op with both in the step, its host cell gives up the overlap
    (host union + device union - union of both). ``ev_cell``: the cell of each event of the
    step. Returned as a part (cells, 0 wall, busy delta, 0 cpu, 0 count), or None."""
    e, se = st.events, single.events
    if not len(se) or not len(e):
        return None
    # the step's events looked up among the trace's single-op events (both ascending): the
    # cost follows the step's events, not the trace's (a trace of many steps stays linear)
    at = np.searchsorted(se, e)
    hit = (at < len(se)) & (se[np.minimum(at, len(se) - 1)] == e)
    if not hit.any():
        return None
    j = np.flatnonzero(hit)
    sev, skey = e[j], single.key[at[j]]
    on_dev = dev[sev]
    both_sides = np.intersect1d(skey[on_dev], skey[~on_dev])
    if not len(both_sides):
        return None
    sel = np.isin(skey, both_sides)
    sev, skey, j, on_dev = sev[sel], skey[sel], j[sel], on_dev[sel]
    lo, hi = st.ts, st.ts + st.dur
    evs = tr.events
    a, b = np.clip(evs.ts[sev], lo, hi), np.clip(evs.end[sev], lo, hi)
    keys, kinv = np.unique(skey, return_inverse=True)
    n = len(keys)
    both = union_per_group(kinv, a, b, lo, hi, n)
    dev_u = union_per_group(kinv[on_dev], a[on_dev], b[on_dev], lo, hi, n)
    host_u = union_per_group(kinv[~on_dev], a[~on_dev], b[~on_dev], lo, hi, n)
    overlap = host_u + dev_u - both
    host_cell: dict[int, int] = {}
    for k, cid in zip(kinv[~on_dev].tolist(), ev_cell[j[~on_dev]].tolist()):
        host_cell.setdefault(k, cid)
    cells = [(host_cell[k], -float(overlap[k])) for k in range(n) if overlap[k] > 0]
    if not cells:
        return None
    z = np.zeros(len(cells))
    return (np.array([c for c, _ in cells], np.int64), z, np.array([d for _, d in cells]), z,
            z)
