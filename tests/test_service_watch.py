"""The client side of tf.data service faults, without servers: how a stalled read is judged
(:func:`modern.service_watch.stall_check`), what the messages say, the helper thread that keeps
the main thread free for signals and deadlines, the probes of the dispatcher and the workers,
and what a run does with a stall (:class:`modern.runner.ServiceSteps`). The same paths with
real servers killed mid-run: ``tests/test_service_faults.py``.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc
import pytest

from common.errors import RunFailed
from modern.data_service import Address, no_answer_reason, probe_worker
from modern.service_watch import (
    DEFAULT_LOST_WORKER_WAIT_S,
    Health,
    LostWorker,
    ServiceWatch,
    Stall,
    StepThread,
    stall_check,
    stall_from_error,
)
from tests.conftest import ROOT

ADDRESS = Address("127.0.0.1", 5050)
LOST = LostWorker("127.0.0.1:6001", 12, "connection refused")


class _FakeWatch:
    def __init__(self, health: Health):
        self._health = health
        self.steps_done = 0

    def health(self) -> Health:
        return self._health

    def report(self) -> dict:
        return {"lost_workers": [], "dispatcher_outages": []}

    def __exit__(self, *exc) -> None:
        self.stopped_after = self.steps_done


def _stall(health: Health, waited: float, timeout: float = 60.0,
           lost_wait: float = DEFAULT_LOST_WORKER_WAIT_S) -> Stall | None:
    try:
        stall_check(_FakeWatch(health), timeout, lost_wait)(waited)
    except Stall as s:
        return s
    return None


@pytest.mark.parametrize("lost_wait", [DEFAULT_LOST_WORKER_WAIT_S, 2.0, 30.0])
def test_a_lost_worker_ends_the_wait_after_the_lost_worker_wait_when_the_rest_answers(
        lost_wait):
    h = Health(True, "", ("127.0.0.1:6002",), (LOST,))
    assert _stall(h, lost_wait - 0.1, lost_wait=lost_wait) is None
    s = _stall(h, lost_wait, lost_wait=lost_wait)
    assert s.kind == "worker_lost" and s.recoverable
    what, hint = s.describe(ADDRESS)
    assert "127.0.0.1:6001 (connection refused) lost" in what and hint == ""


def test_waits_for_the_timeout_when_nothing_is_lost_or_nothing_is_left():
    healthy = Health(True, "", ("127.0.0.1:6002",), ())
    assert _stall(healthy, 59.0) is None
    assert _stall(healthy, 60.0).kind == "silent"  # up but silent: made good elsewhere
    alone = Health(True, "", (), (LOST,))  # a worker may still join
    assert _stall(alone, 59.0) is None
    s = _stall(alone, 60.0)
    assert s.kind == "no_workers" and not s.recoverable
    assert "every tf.data service worker of grpc://127.0.0.1:5050 is gone " \
           "(127.0.0.1:6001 (connection refused))" in s.describe(ADDRESS)[0]
    # the dispatcher down: no worker_lost shortcut (a restart with --work_dir may come back)
    down = Health(False, "connection refused", ("127.0.0.1:6002",), (LOST,))
    assert _stall(down, 59.0) is None
    s = _stall(down, 60.0)
    assert s.kind == "dispatcher_down" and not s.recoverable
    what, hint = s.describe(ADDRESS)
    assert "stopped answering (connection refused)" in what and "--work_dir" in hint


def test_a_short_timeout_also_shortens_the_grace():
    h = Health(True, "", ("127.0.0.1:6002",), (LOST,))
    assert _stall(h, 2.0, timeout=2.0).kind == "worker_lost"


@pytest.mark.slow  # imports TensorFlow (seconds) for its error classes
def test_tf_errors_that_mean_the_job_is_gone():
    import tensorflow as tf

    h = Health(True, "", (), ())
    forgot = tf.errors.NotFoundError(None, None, "Failed to get element from worker "
                                     "127.0.0.1:43809: Failed to get an element, with a "
                                     "nonretryable error: Failed to get split: Iteration id "
                                     "2000 not found")
    s = stall_from_error(forgot, h)
    assert s.kind == "dispatcher_forgot" and not s.recoverable
    what, hint = s.describe(ADDRESS)
    assert "Iteration id 2000 not found" in what and "--work_dir" in hint
    assert stall_from_error(tf.errors.OutOfRangeError(None, None, "End of sequence"),
                            h).kind == "ended"
    # the client's heartbeat and the dispatcher's state lookup say it in other words
    heartbeat = ("Failed to get tasks: Unknown iteration client id 3000. The dispatcher is not "
                 "configured to be fault tolerant, so this could be caused by a dispatcher "
                 "restart.")
    s = stall_from_error(tf.errors.NotFoundError(None, None, heartbeat), h)
    assert s.kind == "dispatcher_forgot"
    assert s.detail.startswith("Unknown iteration client id 3000.")
    s = stall_from_error(tf.errors.NotFoundError(None, None, "Failed to get tasks: Iteration "
                                                 "client id not found: 3000"), h)
    assert s.kind == "dispatcher_forgot" and s.detail == "Iteration client id not found: 3000"
    # the same words in another kind of error are not the dispatcher's
    assert stall_from_error(tf.errors.InvalidArgumentError(None, None, heartbeat), h) is None
    # a missing image on a worker is the input's fault, not the service's
    assert stall_from_error(tf.errors.NotFoundError(None, None, "/x/a.jpg; No such file or "
                                                    "directory"), h) is None


def test_step_thread_returns_results_and_errors_of_the_helper():
    t = StepThread()
    assert t.call(lambda: threading.current_thread().name) == "service-read"
    with pytest.raises(ZeroDivisionError):
        t.call(lambda: 1 / 0)
    assert t.call(lambda: 7) == 7 and t.abandoned == 0


def test_step_thread_gives_up_a_blocked_call_and_starts_a_new_helper():
    t = StepThread()
    never = threading.Event()
    waits = []

    def on_wait(waited: float) -> None:
        waits.append(waited)
        if waited > 0.5:
            raise TimeoutError("gave up")

    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        t.call(never.wait, on_wait)
    assert time.monotonic() - t0 < 3.0 and t.abandoned == 1 and len(waits) >= 2
    assert t.call(lambda: 5) == 5  # a fresh helper; the old one is still blocked
    never.set()


def test_sigterm_reaches_a_main_thread_waiting_on_a_blocked_helper(tmp_path):
    """The CLI contract while a read is blocked in C++ (here: a helper blocked for good): the
    main thread handles SIGTERM at once, exits 143, and the process ends despite the helper."""
    code = ("import sys, threading\n"
            "from common.errors import run_cli, say\n"
            "from modern.service_watch import StepThread\n"
            "def main(argv):\n"
            "    say('blocked')\n"
            "    StepThread().call(threading.Event().wait)\n"
            "sys.exit(run_cli(main, [], 'probe'))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert proc.stderr.readline().strip() == "blocked"
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=10)
        assert rc == 128 + signal.SIGTERM and time.monotonic() - t0 < 3.0
        assert "interrupted by SIGTERM" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


class _RpcError(grpc.RpcError):
    def __init__(self, details: str, code=None):
        super().__init__(details)
        self._details, self._code = details, code

    def details(self) -> str:
        return self._details

    def code(self):
        return self._code


def _listening() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _FakeWorker:
    """A gRPC server on 127.0.0.1 answering a tf.data worker's ``GetWorkerTasks`` (what
    :func:`probe_worker` asks); while ``hung`` is set it answers nothing, as a stopped
    process."""

    def __init__(self):
        self.hung = threading.Event()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))

        def tasks(request, context):
            while self.hung.is_set() and context.is_active():
                time.sleep(0.02)
            return b""

        handler = grpc.method_handlers_generic_handler("tensorflow.data.WorkerService", {
            "GetWorkerTasks": grpc.unary_unary_rpc_method_handler(tasks)})
        self._server.add_generic_rpc_handlers((handler,))
        self.address = f"127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"
        self._server.start()

    def stop(self) -> None:
        self.hung.clear()
        self._server.stop(grace=None)


@contextlib.contextmanager
def _fake_workers(n: int):
    workers = [_FakeWorker() for _ in range(n)]
    try:
        yield workers
    finally:
        for w in workers:
            w.stop()


def _listed(*workers: str):
    """A dispatcher's ``GetWorkers`` call that lists ``workers``."""
    reply = type("R", (), {"workers": [type("W", (), {"address": w}) for w in workers]})
    return lambda req, timeout: reply


def test_probe_worker_says_why():
    with _fake_workers(1) as (worker,), _listening() as hung:
        assert probe_worker(worker.address, 2.0) is None
        assert probe_worker(f"127.0.0.1:{_closed_port()}", 2.0) == "connection refused"
        # a port whose process does not answer (stopped: its kernel still accepts TCP)
        t0 = time.monotonic()
        assert probe_worker(f"127.0.0.1:{hung.getsockname()[1]}", 0.3) == "no answer in 0.3 s"
        assert time.monotonic() - t0 < 2.0
        worker.hung.set()
        assert probe_worker(worker.address, 0.3) == "no answer in 0.3 s"


@pytest.mark.parametrize("details, code, reason", [
    ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:5050: Failed to "
     "connect to remote host: Connection refused", grpc.StatusCode.UNAVAILABLE,
     "connection refused"),
    ("Stream removed (recvmsg:Connection reset by peer (104))", grpc.StatusCode.UNAVAILABLE,
     "connection reset"),
    ("Deadline Exceeded", grpc.StatusCode.DEADLINE_EXCEEDED, "no answer in 2 s"),
    ("DNS resolution failed for nohost:5050", grpc.StatusCode.UNAVAILABLE,
     "cannot resolve the host name"),
    ("", grpc.StatusCode.INTERNAL, "StatusCode.INTERNAL"),
])
def test_why_a_server_did_not_answer_in_a_few_words(details, code, reason):
    assert no_answer_reason(_RpcError(details, code), 2.0) == reason


def test_the_watch_notices_a_lost_worker_a_new_one_and_a_dispatcher_outage():
    with _fake_workers(2) as (alive, joined):
        a, c = alive.address, joined.address
        b = f"127.0.0.1:{_closed_port()}"  # refuses: lost at the first probe
        lines = []
        watch = ServiceWatch(ADDRESS, [a, b], notify=lines.append, timeout_s=30)
        watch.steps_done = 7
        h = watch.probe(_listed(a, b, c))
        assert h.dispatcher_ok and set(h.alive) == {a, c}
        assert [w.address for w in h.lost] == [b] and h.lost[0].after_steps == 7
        assert lines == [f"tf.data service worker {b} lost after step 7 (connection refused); "
                         f"going on with the 2 worker(s) that remain"]

        def down(req, timeout):
            raise _RpcError("failed to connect: Connection refused",
                            grpc.StatusCode.UNAVAILABLE)

        watch.steps_done = 9
        h = watch.probe(down)
        assert not h.dispatcher_ok and h.dispatcher_reason == "connection refused"
        assert "dispatcher grpc://127.0.0.1:5050 stopped answering after step 9" in lines[-1]
        watch.probe(_listed())
        assert "answers again" in lines[-1]
        report = watch.report()
        assert report["lost_workers"] == [{"address": b, "after_steps": 7,
                                           "reason": "connection refused",
                                           "back_after_s": None}]
        assert [o["after_steps"] for o in report["dispatcher_outages"]] == [9]
        assert report["dispatcher_outages"][0]["seconds"] is not None


def test_a_hung_worker_is_lost_after_two_silent_probes_and_back_when_it_answers():
    """A worker that stops answering (SIGSTOP, a hang) but keeps its port: lost after
    LOST_AFTER_SILENT_PROBES probes without an answer, back (and said so) when it answers."""
    with _fake_workers(2) as (ok, flaky):
        lines = []
        watch = ServiceWatch(ADDRESS, [ok.address, flaky.address], notify=lines.append,
                             timeout_s=30, probe_timeout_s=0.3)
        listed = _listed(ok.address, flaky.address)
        flaky.hung.set()
        watch.steps_done = 3
        assert flaky.address in watch.probe(listed).alive and lines == []  # one silence
        watch.steps_done = 4
        h = watch.probe(listed)
        assert h.alive == (ok.address,) and [w.address for w in h.lost] == [flaky.address]
        assert lines == [f"tf.data service worker {flaky.address} lost after step 4 (no "
                         f"answer in 0.3 s); going on with the 1 worker(s) that remain"]
        flaky.hung.clear()
        h = watch.probe(listed)
        assert set(h.alive) == {ok.address, flaky.address} and h.lost == ()
        assert lines[-1].startswith(f"tf.data service worker {flaky.address} answers again")
        (lost,) = watch.report()["lost_workers"]
        assert lost["after_steps"] == 4 and lost["back_after_s"] is not None
        watch.__exit__(None, None, None)  # stopped: nothing said any more
        flaky.hung.set()
        watch.probe(listed)
        watch.probe(listed)
        assert len(lines) == 2


class _FakeReads:
    """ServiceReads for ServiceSteps: delivers ``indices`` in order, then raises ``stall``."""

    def __init__(self, indices: list[int], stall: Stall):
        self.address, self.timeout_s, self.lost_worker_wait_s = ADDRESS, 60.0, 10.0
        self.watch = _FakeWatch(stall.health)
        self._indices, self._stall = list(indices), stall

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def call(self, fn):
        if not self._indices:
            raise self._stall
        return fn()

    def next_index(self):
        return self._indices.pop(0)


def _steps(reads: _FakeReads, count: int, made: list):
    from modern.runner import ServiceSteps

    service = lambda: ("out", b"p", reads.next_index())  # noqa: E731

    def make_local(indices):
        made.append(list(indices))
        it = iter(indices)
        return lambda: ("out", b"p", next(it))

    lines = []
    return ServiceSteps(reads, count, lambda: service, make_local, lines.append), lines


def test_a_recoverable_stall_makes_the_missing_indices_here():
    stall = Stall("worker_lost", 10.0, Health(True, "", ("w2",), (LOST,)))
    made: list = []
    steps, lines = _steps(_FakeReads([0, 2, 3, 5], stall), 8, made)
    with steps:
        got = [steps(i, False)[2] for i in range(8)]
    assert got == [0, 2, 3, 5, 1, 4, 6, 7] and made == [[1, 4, 6, 7]]
    report = steps.report()
    assert report["reproduced_indices"] == [1, 4, 6, 7] and report["reproduced_count"] == 4
    assert "lost, with the elements it held" in report["reproduced_because"]
    assert "making the 4 element(s) still missing in this process (4 of 8 steps done)" in lines[0]


def test_an_index_sent_twice_or_outside_the_job_is_dropped_and_the_next_one_read():
    stall = Stall("ended", 0.0, Health(True, "", ("w2",), ()))
    reads = _FakeReads([0, 2, 2, 3, 9, -1, 0, 1], stall)
    steps, _ = _steps(reads, 4, [])
    with steps:
        got = [steps(i, False)[2] for i in range(4)]
        assert reads.watch.stopped_after == 4  # the watch stops once every step is read
    assert got == [0, 2, 3, 1]
    assert steps.report()["duplicate_indices"] == [2, 9, -1, 0]
    assert steps.report()["reproduced_count"] == 0


def test_an_unrecoverable_stall_is_one_line_with_the_steps_done():
    stall = Stall("dispatcher_forgot", 0.0, Health(True, "", ("w2",), ()),
                  "Iteration id 2000 not found")
    steps, _ = _steps(_FakeReads([0, 1, 2], stall), 8, [])
    with steps, pytest.raises(RunFailed) as e:
        for i in range(8):
            steps(i, False)
    assert "3 of 8 steps done" in str(e.value) and "--work_dir" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_failed_run_keeps_its_partial_results_and_exits_1(tmp_path):
    import json

    from common import atomic
    from common.errors import EXIT_FAILED, run_cli

    out = tmp_path / "run"
    out.mkdir()

    def main(argv):
        with atomic.staged(out) as staging:
            (staging / "profile.pb").write_bytes(b"x")
            raise RunFailed("the service went away; 3 of 8 steps done")

    assert run_cli(main, [], "probe") == EXIT_FAILED
    meta = json.loads((out / "partial" / "partial.json").read_text())
    assert meta["complete"] is False and meta["failed"].startswith("the service went away")
    assert meta["files"] == ["profile.pb"]
    assert not list(out.glob(".staging-*"))


@pytest.mark.slow  # real tf.data pipelines
def test_elements_made_again_are_the_streams_elements_at_those_indices(tmp_path):
    """What a lost worker held, made again in the client: bit-equal to the stream's elements
    at the same indices, in any order asked."""
    import numpy as np
    import tensorflow as tf

    from benchmarks.images import make_image_set
    from modern import pipeline

    paths = make_image_set(tmp_path, [(260, 300), (300, 260), (280, 280)], seed=5)
    stream = {int(e["index"]): e for e in pipeline.build(paths, seed=3, count=9)}
    again = list(pipeline.build(paths, seed=3, indices=[7, 1, 4]))
    assert [int(e["index"]) for e in again] == [7, 1, 4]
    for e in again:
        ref = stream[int(e["index"])]
        tf.nest.assert_same_structure(e, ref)
        for a, b in zip(tf.nest.flatten(e), tf.nest.flatten(ref)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
