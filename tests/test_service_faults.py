"""tf.data service faults with real servers (issue 18): ``python -m modern.service`` processes
on 127.0.0.1, killed with SIGKILL (or hung with SIGSTOP) at a chosen moment while ``python -m
modern.run --data_service`` and the benchmark's service pipeline read from them.

* a worker killed mid-run: the run completes, the elements it held are made again in the
  client, run.json says so; the benchmark ends at once with one line (it does not time a
  damaged service);
* one worker killed and the other hung, so no worker is left: SIGTERM and SIGINT stop a run
  blocked on the service within seconds (exit 128 + signal, partial profile kept); without a
  signal the run, and compare.run's modern child, end after ``--service_timeout`` with one
  line naming both workers;
* the dispatcher killed and restarted on the same port: with ``--work_dir`` the run goes on;
  without, it ends with one line that names ``--work_dir``. The client, once it has said the
  dispatcher stopped answering, is held until the restarted one listens, so that it cannot
  finish its steps from the worker first on a busy machine;
  :func:`test_the_restart_test_passes_beside_two_busy_loops` runs it under load.

"Mid-run" is made exact, whatever the machine's speed: each client is paused (SIGSTOP) right
after its first step, the servers are killed, and the client resumes with nearly all its steps
still to read. Every wait is bounded, and every process a test starts is killed by the test
(``servers`` fixture, ``_Client``), pass or fail.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.service, pytest.mark.needs("cc")]

STEPS = 200  # the client is paused after its first step: the rest are read after the fault
#: compare.run's child's --service_timeout (and --lost_worker_wait, so that the hung worker is
#: noticed, within ~7 s, before a lost one's wait could end the stall).
CHILD_TIMEOUT_S = 20
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Servers:
    """``python -m modern.service`` processes on 127.0.0.1; :meth:`close` kills them all."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []

    def _spawn(self, *args: str) -> subprocess.Popen:
        log = open(self.tmp / f"server-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "modern.service", *args, "--host",
                                 "127.0.0.1"], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                                stderr=log)
        log.close()
        self.procs.append(proc)
        return proc

    @staticmethod
    def _address(proc: subprocess.Popen, what: str) -> str:
        """The address a server prints first, once it listens (within 120 s)."""
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=120):
                pytest.fail(f"modern.service {what} printed no address in 120 s")
        line = proc.stdout.readline().decode().strip()
        assert line, f"modern.service {what} exited: {proc.wait()}"
        return line

    def dispatcher(self, port: int, work_dir: Path | None = None):
        args = ["dispatcher", "--port", str(port)]
        proc = self._spawn(*args, *(["--work_dir", str(work_dir)] if work_dir else []))
        return proc, self._address(proc, "dispatcher")

    def cluster(self, workers: int, work_dir: Path | None = None):
        """A dispatcher and ``workers`` workers, started at once (the workers wait for the
        dispatcher); returns (dispatcher process, its target, [(worker process, address)])
        once every worker has registered."""
        from modern.data_service import list_workers, parse_address

        port = _free_port()
        args = ["dispatcher", "--port", str(port)]
        dispatcher = self._spawn(*args, *(["--work_dir", str(work_dir)] if work_dir else []))
        started = [self._spawn("worker", "--dispatcher", f"127.0.0.1:{port}")
                   for _ in range(workers)]
        target = self._address(dispatcher, "dispatcher")
        pairs = [(proc, self._address(proc, "worker")) for proc in started]
        deadline = time.monotonic() + 60
        while len(list_workers(parse_address(target))) < workers:
            assert time.monotonic() < deadline, "workers did not register in 60 s"
            time.sleep(0.2)
        return dispatcher, target, pairs

    @staticmethod
    def kill(proc: subprocess.Popen) -> None:
        proc.kill()  # SIGKILL: a machine lost, an OOM kill
        proc.wait(timeout=30)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a hung one, too, dies of the kill at once
                proc.kill()
            proc.wait(timeout=30)
            proc.stdout.close()


@pytest.fixture
def servers(tmp_path):
    s = _Servers(tmp_path)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def images(varied_jpegs) -> str:
    return ",".join(varied_jpegs[1][:12])


class _Client:
    """``python -m module args`` (``module="-c"``: ``python -c args``) in the background, its
    stderr in a file; killed at the end of the ``with`` block if still running. ``first_line``:
    what it says once its first step is done."""

    def __init__(self, tmp: Path, name: str, module: str, *args: str,
                 first_line: str = "first step done"):
        self.err_path, self.first_line = tmp / f"{name}.err", first_line
        cmd = [sys.executable, *(["-c"] if module == "-c" else ["-m", module]), *args]
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                                         stderr=err)

    def __enter__(self) -> "_Client":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(timeout=30)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float) -> float:
        """Seconds until ``needle`` appears on stderr; fails after ``timeout``."""
        return _wait_in_file(self.err_path, needle, timeout, self.proc)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running after {timeout} s: {self.stderr[-2000:]}")

    def first_step_done(self) -> bool:
        """Its first step is done; fails if it has exited."""
        if self.first_line in self.stderr:
            return True
        assert self.proc.poll() is None, f"exited {self.proc.poll()}: {self.stderr[-2000:]}"
        return False

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)


def _wait_in_file(path: Path, needle: str, timeout: float, proc=None) -> float:
    t0 = time.monotonic()
    while not (path.exists() and needle in path.read_text(errors="replace")):
        if (proc is not None and proc.poll() is not None) or time.monotonic() - t0 > timeout:
            text = path.read_text(errors="replace")[-2000:] if path.exists() else ""
            pytest.fail(f"no {needle!r} in {path.name} in {timeout} s: {text}")
        time.sleep(0.05)
    return time.monotonic() - t0


def _modern_run(tmp: Path, name: str, images: str, target: str, *extra: str) -> _Client:
    return _Client(tmp, name, "modern.run", "--out", str(tmp / name), "--images", images,
                   "--steps", str(STEPS), "--seed", "5", "--data_service", target, *extra)


#: The benchmark's service pipeline (benchmarks.pipelines.Modern) as its CLI runs it: argv is
#: the service and the images; it says when its first element is in, then reads on.
BENCH_PROBE = f"""
import os, sys
from common.errors import run_cli, say
from common.tflog import native_stderr_to, quiet_env

quiet_env()  # as benchmarks.pipelines does

def main(argv):
    from benchmarks.pipelines import Modern

    with native_stderr_to(os.devnull):
        p = Modern(argv[1].split(","), 0, jit=True, data_service=argv[0], count={STEPS},
                   service_timeout_s=5)
        p.step()
        say("first element in")
        for _ in range({STEPS} - 1):
            p.step()

sys.exit(run_cli(main, sys.argv[1:], "benchmarks.service_probe"))
"""


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [ln for ln in stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1, stderr[-3000:]
    return errors[0]


def _paused_after_first_step(*clients, timeout: float = 180) -> None:
    """Pause each of ``clients`` (SIGSTOP) as soon as its first step is done (its line in its
    stderr or log), so that every one of them still has nearly all its steps to read."""
    waiting = list(clients)
    deadline = time.monotonic() + timeout
    while waiting:
        for c in list(waiting):
            if c.first_step_done():
                c.pause()
                waiting.remove(c)
        assert time.monotonic() < deadline, f"{len(waiting)} client(s) without a first step"
        time.sleep(0.02)


def test_a_worker_killed_mid_run_costs_the_run_time_and_ends_the_benchmark(
        servers, images, tmp_path):
    from modern import pipeline

    _, target, [(victim, victim_address), _] = servers.cluster(2)
    with _modern_run(tmp_path, "run", images, target, "--lost_worker_wait", "2") as client, \
            _Client(tmp_path, "bench", "-c", BENCH_PROBE, target, images,
                    first_line="first element in") as bench:
        _paused_after_first_step(client, bench)
        servers.kill(victim)
        t_kill = time.monotonic()
        client.resume()
        bench.resume()
        assert bench.wait(timeout=60) == 1, bench.stderr[-3000:]
        bench_s = time.monotonic() - t_kill
        assert client.wait(timeout=120) == 0, client.stderr[-3000:]
        run_s = time.monotonic() - t_kill
    # the benchmark: one line naming the worker, within seconds
    assert bench_s < 30, bench_s
    line = _one_error_line(bench.stderr)
    assert f"benchmarks.service_probe: error: tf.data service worker {victim_address} " in line
    assert "a benchmark does not time a damaged service" in line, line
    # the run: every step, the elements the victim held made here
    assert run_s < 90, run_s  # the remaining steps, the 2 s wait, the making again, the trace
    err = client.stderr
    assert f"worker {victim_address} lost after step" in err, err
    assert "element(s) made again in this process" in err, err
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    svc = run["data_service"]
    (lost,) = svc["lost_workers"]
    assert lost["address"] == victim_address and lost["reason"] == "connection refused"
    assert lost["after_steps"] < STEPS, lost  # noticed mid-run
    assert svc["lost_worker_wait_s"] == 2.0
    # every step delivered, each index once, each with the image a local run reads there
    assert sorted(run["step_indices"]) == list(range(STEPS))
    assert svc["duplicate_indices"] == []
    assert svc["reproduced_count"] > 0, "the killed worker held nothing: nothing was made again"
    assert run["step_indices"][-svc["reproduced_count"]:] == svc["reproduced_indices"]
    local = dict((int(i), p.decode()) for i, p in pipeline.file_dataset(
        images.split(","), 5, count=STEPS).as_numpy_iterator())
    assert [local[i] for i in run["step_indices"]] == run["step_images"]


class _CompareChild:
    """compare.run's modern side (:func:`compare.pipelines.run_in_child`) on a thread, as
    compare.run runs it; ``result`` gets its run.json or exception, and the seconds taken.
    Its child process (found by its command line) can be paused like a :class:`_Client`;
    leaving the ``with`` block kills it if still running."""

    def __init__(self, tmp: Path, target: str, images: str):
        from compare.pipelines import run_in_child

        self.log, self.result, self.relayed = tmp / "child.log", {}, []
        out = tmp / "child"

        def run() -> None:
            t0 = time.monotonic()
            try:
                self.result["run"] = run_in_child("modern", out, images.split(","), STEPS, 5,
                                                  self.log, data_service=target,
                                                  service_timeout=CHILD_TIMEOUT_S,
                                                  lost_worker_wait=CHILD_TIMEOUT_S,
                                                  relay=self.relayed.append)
            except BaseException as e:  # noqa: BLE001 -- handed to the test
                self.result["error"] = e
            self.result["seconds"] = time.monotonic() - t0

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        self.pid = _child_pid(f"compare.pipelines\0modern\0{out}", timeout=60)

    def __enter__(self) -> "_CompareChild":
        return self

    def __exit__(self, *exc) -> None:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                break
        self.thread.join(timeout=30)

    def wait_for(self, needle: str, timeout: float) -> float:
        return _wait_in_file(self.log, needle, timeout)

    def first_step_done(self) -> bool:
        assert self.thread.is_alive(), self.result
        return self.log.exists() and "first step done" in self.log.read_text(errors="replace")

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


def _child_pid(cmdline_part: str, timeout: float) -> int:
    """The pid of this process's child whose NUL-separated command line holds
    ``cmdline_part``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == os.getpid() and cmdline_part in (proc / "cmdline").read_text():
                    return int(proc.name)
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.05)
    pytest.fail(f"no child process with {cmdline_part!r} in {timeout} s")


def test_no_worker_left_signals_and_the_timeout_end_the_wait(servers, images, tmp_path):
    """One worker killed, the other hung (SIGSTOP: its port still accepts connections): the
    clients notice both and, blocked from then on, end on SIGTERM, SIGINT or the timeout (the
    last as compare.run's modern child, which runs the same run with ``--service_timeout``)."""
    from common.errors import RunFailed

    _, target, [(dead, dead_address), (hung, hung_address)] = servers.cluster(2)
    wait = ("--lost_worker_wait", "30")  # as the child's
    with _modern_run(tmp_path, "term", images, target, *wait) as term, \
            _modern_run(tmp_path, "int", images, target, *wait) as sigint, \
            _CompareChild(tmp_path, target, images) as child:
        _paused_after_first_step(term, sigint, child)
        servers.kill(dead)
        hung.send_signal(signal.SIGSTOP)
        t_fault = time.monotonic()
        for c in (term, sigint, child):
            c.resume()
        for c in (term, sigint, child):  # the hung one is noticed too: two probes unanswered
            c.wait_for("no worker left", timeout=CHILD_TIMEOUT_S)
        assert time.monotonic() - t_fault < CHILD_TIMEOUT_S
        time.sleep(1.0)  # blocked inside a service read now
        for c, sig in ((term, signal.SIGTERM), (sigint, signal.SIGINT)):
            t0 = time.monotonic()
            c.proc.send_signal(sig)
            assert c.wait(timeout=30) == 128 + sig, c.stderr[-3000:]
            assert time.monotonic() - t0 < 10
        child.thread.join(timeout=60)
        assert not child.thread.is_alive(), "compare.run's modern child still running"
    assert time.monotonic() - t_fault < CHILD_TIMEOUT_S + 30  # the timeout, the partial profile
    for c, sig in ((term, "SIGTERM"), (sigint, "SIGINT")):
        assert f"interrupted by {sig}; partial results kept in" in c.stderr
        partial = c.err_path.with_suffix("") / "partial"
        assert json.loads((partial / "partial.json").read_text())["interrupted_by"] == sig
        assert list(partial.glob("plugins/profile/*/*.xplane.pb"))
    # the timeout: one line naming both workers, exit 1 (RunFailed in compare.run)
    prog = "compare.pipelines modern: error: "  # the child's log also holds TensorFlow's
    (line,) = [ln for ln in child.log.read_text(errors="replace").splitlines()
               if ln.startswith(prog)]
    assert line.startswith(f"{prog}every tf.data service worker of {target} is gone"), line
    assert f"{dead_address} (connection refused)" in line, line
    assert f"{hung_address} (no answer in" in line, line
    assert f"and no element came for {CHILD_TIMEOUT_S} s" in line, line
    assert f"of {STEPS} steps done" in line, line
    assert line.endswith(f"partial results kept in {tmp_path / 'child' / 'partial'}"), line
    assert isinstance(child.result.get("error"), RunFailed), child.result
    assert str(child.result["error"]).startswith("every tf.data service worker"), child.result
    # what compare.run shows while it waits: the child's lines about its service
    assert any(f"tf.data service worker {hung_address} lost" in ln for ln in child.relayed)
    assert all(ln.startswith("modern: ") and "tf.data service" in ln for ln in child.relayed)


@pytest.mark.parametrize("work_dir", [True, False], ids=["with_work_dir", "without_work_dir"])
def test_a_dispatcher_killed_and_restarted_on_the_same_port(servers, images, tmp_path,
                                                            work_dir):
    journal = tmp_path / "journal" if work_dir else None
    dispatcher, target, _ = servers.cluster(1, journal)
    port = int(target.rsplit(":", 1)[1])
    # a timeout long enough for a restart on a busy machine (TensorFlow's import alone)
    with _modern_run(tmp_path, "run", images, target, "--service_timeout", "150") as client:
        _paused_after_first_step(client)
        servers.kill(dispatcher)
        client.resume()
        client.wait_for("stopped answering", timeout=20)
        # Held from here until the dispatcher is back: on a busy machine the run read all its
        # steps from the worker before its own probes saw the restarted dispatcher answer
        # (TensorFlow's import, a 2 s probe deadline), so the outage it noticed never ended
        # within the run.
        client.pause()
        servers.dispatcher(port, journal)  # the same port, and folder if any; once it listens
        _serving(target, timeout=120)  # it answers, and the worker has registered with it
        client.resume()
        code = client.wait(timeout=150)
    if work_dir:  # TF's fault-tolerant mode: the job goes on
        assert code == 0, client.stderr[-3000:]
        assert "answers again after" in client.stderr
        run = json.loads((tmp_path / "run" / "run.json").read_text())
        svc = run["data_service"]
        assert sorted(run["step_indices"]) == list(range(STEPS))
        (outage,) = svc["dispatcher_outages"]
        assert outage["seconds"] > 0 and outage["after_steps"] < STEPS
        assert svc["lost_workers"] == [] and svc["reproduced_count"] == 0
    else:
        assert code == 1, client.stderr[-3000:]
        line = _one_error_line(client.stderr)
        assert f"the tf.data service dispatcher at {target} was restarted without its state" \
               in line, line
        assert f"of {STEPS} steps done" in line and "--work_dir" in line, line
        assert "partial results kept in" in line, line
        assert not (tmp_path / "run" / "run.json").exists()


def _serving(target: str, timeout: float) -> None:
    """Wait until the dispatcher at ``target`` answers and lists a worker."""
    from modern.data_service import list_workers, parse_address

    deadline = time.monotonic() + timeout
    while not list_workers(parse_address(target), wait_s=timeout):
        assert time.monotonic() < deadline, f"{target} lists no worker after {timeout} s"
        time.sleep(0.2)


def test_the_restart_test_passes_beside_two_busy_loops(tmp_path):
    """The test above, with ``--work_dir``, in a pytest of its own beside two processes that
    each keep a core busy (the issue's recipe: it failed so while passing alone)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "--basetemp", str(tmp_path / "inner"),
             "tests/test_service_faults.py::test_a_dispatcher_killed_and_restarted_on_the_same_"
             "port[with_work_dir]"], cwd=ROOT, env=ENV, capture_output=True, text=True,
            timeout=1200)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait(timeout=30)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "1 passed" in proc.stdout, proc.stdout[-2000:]
