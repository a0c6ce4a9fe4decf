"""Bounded waits on the tf.data service: what a client does when a worker, the dispatcher or the
network goes away.

TensorFlow 2.21's own client does not end such waits (measured, ``distributed_epoch``; BENCHMARKS.md,
"what TF 2.21 does when a server is lost"): a worker killed mid-job takes the elements it held with it
and the job never finishes, so a client that waits for them waits for good; the dispatcher only
logs a worker that stopped heartbeating, it neither unregisters it nor hands its elements to
another; a client whose dispatcher is gone retries it for good; and all of it happens inside
one C++ call, where Python's signal handlers cannot run. So a client here

* reads from the service on a helper thread (:class:`StepThread`) while the main thread waits in
  slices of :data:`WAIT_SLICE_S`: SIGINT and SIGTERM are handled at once, and a read that takes
  too long is given up (the helper, blocked in TF, is left behind as a daemon thread);
* watches the service (:class:`ServiceWatch`): every :data:`PROBE_INTERVAL_S` it asks the
  dispatcher for its workers and asks each worker for its tasks
  (:func:`modern.data_service.probe_worker`, an RPC: a hung worker's kernel still accepts TCP
  connections); a worker whose port refuses, or that does not answer twice in a row, is lost,
  and one that answers again is back;
* decides, when a read has waited long enough, what the wait means (:func:`stall_check`,
  :class:`Stall`): a worker lost while the dispatcher and other workers still answer (the
  elements it held will never come: after ``lost_worker_wait_s``), the service up but silent,
  the dispatcher gone, or no worker left (after ``timeout_s``).
"""
from __future__ import annotations

import dataclasses
import queue
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import grpc

from common.errors import tf_error_line
from modern.data_service import (
    PROBE_TIMEOUT_S,
    Address,
    ask_workers,
    get_workers_call,
    no_answer_reason,
    probe_workers,
)

#: How often the main thread wakes up while a read is pending (signals, deadlines).
WAIT_SLICE_S = 0.2
#: How often :class:`ServiceWatch` asks the dispatcher and the workers.
PROBE_INTERVAL_S = 1.0
#: Probes in a row without an answer (no refusal either) before a worker counts as lost.
LOST_AFTER_SILENT_PROBES = 2
#: Default of how long a read waits, once a worker is lost and others remain, before the
#: elements still missing are taken as lost with it (the remaining workers deliver an element
#: in milliseconds; a pipeline whose elements take longer needs ``lost_worker_wait_s`` longer).
DEFAULT_LOST_WORKER_WAIT_S = 10.0
#: Default bound on any one read from the service: after this long without an element the
#: client stops waiting (a dispatcher restarted with ``--work_dir`` is back well within it).
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LostWorker:
    """A worker that stopped answering during a run."""

    address: str
    after_steps: int  # steps the run had done when the loss was noticed
    reason: str  # "connection refused", "no answer in 2 s", ...
    back_after_s: float | None = None  # answered again this long after the loss was noticed


@dataclass(frozen=True)
class Health:
    """What the last probe found."""

    dispatcher_ok: bool
    dispatcher_reason: str  # why the dispatcher did not answer ("" when it did)
    alive: tuple[str, ...]
    lost: tuple[LostWorker, ...]  # lost now (a lost worker that answers again is alive)


class ServiceWatch:
    """Probes a tf.data service's dispatcher and workers on a daemon thread while a run reads
    from it. ``steps_done`` (set by the reader) dates what it notices; ``notify(line)`` hears
    of each lost worker, each one back, and each dispatcher outage as it is noticed
    (``timeout_s``: how long the reader will wait, for those lines). Use as a context manager;
    leaving it stops the probes (nothing is noticed or said after that)."""

    def __init__(self, address: Address, workers: list[str],
                 notify: Callable[[str], None] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, interval_s: float = PROBE_INTERVAL_S,
                 probe_timeout_s: float = PROBE_TIMEOUT_S):
        self.address = address
        self.steps_done = 0
        self.history: list[LostWorker] = []  # every loss noticed, in order
        self.outages: list[dict] = []  # dispatcher outages: after_steps, seconds, reason
        self._notify = notify or (lambda line: None)
        self._timeout_s, self._interval = timeout_s, interval_s
        self._probe_timeout_s = probe_timeout_s
        self._known = dict.fromkeys(workers)  # insertion-ordered set
        self._silent: dict[str, int] = {}
        self._lost_now: dict[str, tuple[int, float]] = {}  # worker: (history index, since)
        self._down_since: float | None = None
        self._health = Health(True, "", tuple(workers), ())
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def __enter__(self) -> "ServiceWatch":
        threading.Thread(target=self._loop, name="service-watch", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def health(self) -> Health:
        with self._lock:
            return self._health

    def _loop(self) -> None:

        with grpc.insecure_channel(self.address.hostport) as channel:
            call = get_workers_call(channel)
            while not self._stop.wait(self._interval):
                self.probe(call)

    def probe(self, call) -> Health:
        """Ask the dispatcher (``call``: its ``GetWorkers`` RPC) and every known worker once."""

        try:
            listed, reason = ask_workers(call, self._probe_timeout_s), ""
        except grpc.RpcError as e:
            listed, reason = [], no_answer_reason(e, self._probe_timeout_s)
        for w in listed:  # workers that joined mid-run count too
            self._known.setdefault(w)
        answers = probe_workers(list(self._known), self._probe_timeout_s)
        lines: list[str | LostWorker] = []  # a LostWorker: said with what goes on
        alive = [w for w, why in answers.items() if self._update(w, why, lines)]
        lost = tuple(self.history[i] for i, _ in self._lost_now.values())
        with self._lock:
            self._health = health = Health(not reason, reason, tuple(alive), lost)
        lines += self._dispatcher_state(reason)
        then = (f"going on with the {len(alive)} worker(s) that remain" if alive else
                f"no worker left: waiting up to {self._timeout_s:g} s for one to join")
        for line in lines:
            if not self._stop.is_set():
                self._notify(line if isinstance(line, str) else
                             f"tf.data service worker {line.address} lost after step "
                             f"{line.after_steps} ({line.reason}); {then}")
        return health

    def _update(self, worker: str, why: str | None, lines: list) -> bool:
        """Record one probe of ``worker`` (``lines`` gets what to say); True while it counts
        as alive."""
        if why is None:
            self._silent[worker] = 0
            if worker in self._lost_now:  # back: a restart on the same port, a SIGCONT
                i, since = self._lost_now.pop(worker)
                back = round(time.monotonic() - since, 1)
                self.history[i] = dataclasses.replace(self.history[i], back_after_s=back)
                lines.append(f"tf.data service worker {worker} answers again after {back:.0f} s")
            return True
        self._silent[worker] = self._silent.get(worker, 0) + 1
        if why != "connection refused" and self._silent[worker] < LOST_AFTER_SILENT_PROBES:
            return True
        if worker not in self._lost_now:
            self._lost_now[worker] = (len(self.history), time.monotonic())
            self.history.append(LostWorker(worker, self.steps_done, why))
            lines.append(self.history[-1])
        return False

    def _dispatcher_state(self, reason: str) -> list[str]:
        """Open or close a dispatcher outage (``reason``: why it did not answer, or ""); what
        to say about it."""
        if reason and self._down_since is None:
            self._down_since = time.monotonic()
            self.outages.append({"after_steps": self.steps_done, "seconds": None,
                                 "reason": reason})
            return [f"tf.data service dispatcher {self.address.target} stopped answering "
                    f"after step {self.steps_done} ({reason}); waiting up to "
                    f"{self._timeout_s:g} s for it (if it was started with --work_dir, "
                    f"restarting it on the same port and folder lets the run go on)"]
        if not reason and self._down_since is not None:
            seconds = time.monotonic() - self._down_since
            self._down_since = None
            self.outages[-1]["seconds"] = round(seconds, 1)
            return [f"tf.data service dispatcher {self.address.target} answers again after "
                    f"{seconds:.0f} s"]
        return []

    def report(self) -> dict:
        """What run.json records of the service's faults."""
        return {"lost_workers": [asdict(w) for w in self.history],
                "dispatcher_outages": list(self.outages)}


class Stall(Exception):
    """A read from the service waited too long, or the service said the job is gone. ``kind``:
    ``worker_lost`` (a worker is gone, the dispatcher and other workers answer: what it held is
    not coming), ``silent`` (the service answers but delivered nothing for the whole timeout),
    ``ended`` (the job ended without some elements), ``dispatcher_down``, ``no_workers``, or
    ``dispatcher_forgot`` (a restarted dispatcher does not know the job). The first three are
    made good by making the missing elements elsewhere (:attr:`recoverable`); the others end
    the run."""

    RECOVERABLE = ("worker_lost", "silent", "ended")

    def __init__(self, kind: str, waited_s: float, health: Health, detail: str = ""):
        super().__init__(kind)
        self.kind, self.waited_s, self.health, self.detail = kind, waited_s, health, detail

    @property
    def recoverable(self) -> bool:
        return self.kind in self.RECOVERABLE

    def describe(self, address: Address) -> tuple[str, str]:
        """(what happened, what would have helped or ""), as sentence fragments."""
        h = self.health
        lost = ", ".join(f"{w.address} ({w.reason})" for w in h.lost)
        restart = ("a dispatcher started with --work_dir DIR and restarted on the same port and "
                   "folder picks a running job up again")
        if self.kind == "worker_lost":
            return f"tf.data service worker {lost} lost, with the elements it held", ""
        if self.kind == "silent":
            return (f"the tf.data service at {address.target} answers but delivered nothing for "
                    f"{self.waited_s:.0f} s"), ""
        if self.kind == "ended":
            return f"the tf.data service job at {address.target} ended without every element", ""
        if self.kind == "dispatcher_down":
            return (f"the tf.data service dispatcher at {address.target} stopped answering "
                    f"({h.dispatcher_reason}) and no element came for {self.waited_s:.0f} s"), \
                restart
        if self.kind == "dispatcher_forgot":
            return (f"the tf.data service dispatcher at {address.target} was restarted without "
                    f"its state and no longer knows this run's job ({self.detail})"), \
                f"it keeps no state without --work_dir: {restart}, and the run would have gone on"
        gone = f" ({lost})" if lost else ""
        return (f"every tf.data service worker of {address.target} is gone{gone} and no element "
                f"came for {self.waited_s:.0f} s"), ""


#: What TensorFlow's dispatcher says (as ``NotFoundError``) when it was restarted without
#: ``--work_dir`` and no longer knows a running job: "Iteration id 2000 not found" (a worker's
#: split request), "Unknown iteration client id 3000. The dispatcher is not configured to be
#: fault tolerant, so this could be caused by a dispatcher restart." (the client's heartbeat)
#: and "Iteration client id not found: 3000" (its state lookup); TF 2.21's dispatcher_impl.cc
#: and dispatcher_state.cc. Which of them a client meets first depends on timing.
DISPATCHER_FORGOT = re.compile(
    r"\b(iteration|job)( client)? id \S+ not found"
    r"|\b(iteration|job)( client)? id not found"
    r"|\bunknown (iteration|job)( client)? id\b"
    r"|could be caused by a dispatcher restart", re.I)


def stall_from_error(e: BaseException, health: Health) -> Stall | None:
    """The :class:`Stall` a TensorFlow error from a service read means, if any: the end of the
    job (``OutOfRangeError``) or a dispatcher that no longer knows it (restarted without
    ``--work_dir``: :data:`DISPATCHER_FORGOT`)."""
    import tensorflow as tf  # lazy: imports TensorFlow

    if isinstance(e, tf.errors.OutOfRangeError):
        return Stall("ended", 0.0, health)
    msg = tf_error_line(e)
    found = DISPATCHER_FORGOT.search(msg) if isinstance(e, tf.errors.NotFoundError) else None
    if found:  # the dispatcher's own words: from the clause the match is in to the end
        return Stall("dispatcher_forgot", 0.0, health,
                     msg[msg.rfind(": ", 0, found.start()) + 1:].strip())
    return None


def stall_check(watch: ServiceWatch, timeout_s: float,
                lost_worker_wait_s: float = DEFAULT_LOST_WORKER_WAIT_S) -> Callable[[float], None]:
    """The ``on_wait`` for :meth:`StepThread.call`: raises :class:`Stall` once a read has waited
    ``lost_worker_wait_s`` with a worker lost and the rest of the service answering, or
    ``timeout_s`` whatever the service does."""
    grace = min(lost_worker_wait_s, timeout_s)

    def check(waited_s: float) -> None:
        if waited_s < grace:
            return
        h = watch.health()
        up = h.dispatcher_ok and bool(h.alive)
        if h.lost and up:
            raise Stall("worker_lost", waited_s, h)
        if waited_s >= timeout_s:
            kind = "silent" if up else "dispatcher_down" if not h.dispatcher_ok else "no_workers"
            raise Stall(kind, waited_s, h)

    return check


@dataclass
class _Slot:
    done: threading.Event = field(default_factory=threading.Event)
    value: object = None
    error: BaseException | None = None


class StepThread:
    """Runs calls one at a time on a daemon helper thread; the calling thread waits in
    :data:`WAIT_SLICE_S` slices, calling ``on_wait(seconds waited)`` after each, so signals
    and deadlines are seen while the call is blocked in TensorFlow's C++.

    When the wait ends with an exception (from ``on_wait``, or a signal's), the helper is
    abandoned where it is: it exits when its call returns, if ever, and the next call gets a
    new helper. Daemon threads do not keep the process from exiting.
    """

    def __init__(self, name: str = "service-read"):
        self._name = name
        self._jobs: queue.SimpleQueue | None = None
        self.abandoned = 0

    def call(self, fn: Callable[[], object], on_wait: Callable[[float], None] | None = None):
        if self._jobs is None:
            self._jobs = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(self._jobs,), name=self._name,
                             daemon=True).start()
        slot = _Slot()
        self._jobs.put((fn, slot))
        t0 = time.monotonic()
        try:
            while not slot.done.wait(WAIT_SLICE_S):
                if on_wait:
                    on_wait(time.monotonic() - t0)
        except BaseException:
            self._jobs.put(None)  # the helper ends once its call returns
            self._jobs = None
            self.abandoned += 1
            raise
        if slot.error is not None:
            raise slot.error
        return slot.value

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None


def _serve(jobs: queue.SimpleQueue) -> None:
    while (job := jobs.get()) is not None:
        fn, slot = job
        try:
            slot.value = fn()
        except BaseException as e:  # handed to the waiting thread
            slot.error = e
        finally:
            slot.done.set()


class ServiceReads:
    """Reads from the tf.data service at ``address``, bounded: each :meth:`call` runs on a
    :class:`StepThread` under :func:`stall_check` while a :class:`ServiceWatch` probes the
    service; a read that waits too long, or a TF error that means the job is gone, raises
    :class:`Stall`. Use as a context manager (it starts and stops the watch)."""

    def __init__(self, address: Address, workers: list[str], timeout_s: float = DEFAULT_TIMEOUT_S,
                 notify: Callable[[str], None] | None = None,
                 lost_worker_wait_s: float = DEFAULT_LOST_WORKER_WAIT_S):
        self.address = address
        self.timeout_s, self.lost_worker_wait_s = timeout_s, lost_worker_wait_s
        self.watch = ServiceWatch(address, workers, notify, timeout_s)
        self._thread = StepThread()
        self._check = stall_check(self.watch, timeout_s, lost_worker_wait_s)

    def __enter__(self) -> "ServiceReads":
        self.watch.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.watch.__exit__(*exc)
        self._thread.close()

    def call(self, fn: Callable[[], object]):
        """``fn()`` on the helper thread, bounded as above."""
        import tensorflow as tf  # lazy: imports TensorFlow

        try:
            return self._thread.call(fn, self._check)
        except tf.errors.OpError as e:
            stall = stall_from_error(e, self.watch.health())
            if stall is None:
                raise
            raise stall from None
