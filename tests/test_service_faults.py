"""tf.data service faults with real servers (issue 18): ``python -m modern.service`` processes
on 127.0.0.1, killed with SIGKILL at a chosen moment while ``python -m modern.run
--data_service`` reads from them.

* a worker lost mid-run: the run completes, the elements it held are made again in the
  client, run.json says so;
* no worker left: SIGTERM and SIGINT stop a run blocked on the service within seconds (exit
  128 + signal, partial profile kept); without a signal the run ends after
  ``--service_timeout`` with one line and exit 1; compare.run's child and the benchmark's
  service pipeline end the same way;
* the dispatcher killed and restarted on the same port: with ``--work_dir`` the run goes on;
  without, it ends with one line that names ``--work_dir``.

Every wait is bounded, and every process a test starts is killed by the test (``servers``
fixture, ``_Client``), pass or fail.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

STEPS = 1500  # several seconds of steps after the kill, even on a fast machine
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

    def start(self, *args: str) -> tuple[subprocess.Popen, str]:
        """Start one; return it and the address it prints first (within 120 s)."""
        log = open(self.tmp / f"server-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "modern.service", *args, "--host",
                                 "127.0.0.1"], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                                stderr=log)
        log.close()
        self.procs.append(proc)
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=120):
                pytest.fail(f"modern.service {' '.join(args)} printed no address in 120 s")
        line = proc.stdout.readline().decode().strip()
        assert line, f"modern.service {' '.join(args)} exited: {proc.wait()}"
        return proc, line

    def dispatcher(self, port: int = 0, work_dir: Path | None = None):
        args = ["dispatcher", "--port", str(port)]
        return self.start(*args, *(["--work_dir", str(work_dir)] if work_dir else []))

    def workers(self, target: str, n: int) -> list[tuple[subprocess.Popen, str]]:
        from modern.data_service import list_workers, parse_address

        address = parse_address(target)
        started = [self.start("worker", "--dispatcher", address.hostport) for _ in range(n)]
        deadline = time.monotonic() + 60
        while len(list_workers(address)) < n:
            assert time.monotonic() < deadline, "workers did not register in 60 s"
            time.sleep(0.2)
        return started

    @staticmethod
    def kill(proc: subprocess.Popen) -> None:
        proc.kill()  # SIGKILL: a machine lost, an OOM kill
        proc.wait(timeout=30)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
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
    stderr in a file; killed at the end of the ``with`` block if still running."""

    def __init__(self, tmp: Path, name: str, module: str, *args: str):
        self.err_path = tmp / f"{name}.err"
        cmd = [sys.executable, *(["-c"] if module == "-c" else ["-m", module]), *args]
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                                         stderr=err)

    def __enter__(self) -> "_Client":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float) -> float:
        """Seconds until ``needle`` appears on stderr; fails after ``timeout``."""
        t0 = time.monotonic()
        while needle not in self.stderr:
            if self.proc.poll() is not None or time.monotonic() - t0 > timeout:
                pytest.fail(f"no {needle!r} on stderr (exit {self.proc.poll()}): "
                            f"{self.stderr[-2000:]}")
            time.sleep(0.1)
        return time.monotonic() - t0

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running after {timeout} s: {self.stderr[-2000:]}")


def _modern_run(tmp: Path, name: str, images: str, target: str, *extra: str) -> _Client:
    return _Client(tmp, name, "modern.run", "--out", str(tmp / name), "--images", images,
                   "--steps", str(STEPS), "--seed", "5", "--data_service", target, *extra)


#: The benchmark's service pipeline (benchmarks.pipelines.Modern) as its CLI runs it: argv is
#: the service and the images; a service that cannot deliver is one line, exit 1.
BENCH_PROBE = """
import os, sys
from common.errors import run_cli
from common.tflog import native_stderr_to, quiet_env

quiet_env()  # as benchmarks.pipelines does

def main(argv):
    from benchmarks.pipelines import Modern

    with native_stderr_to(os.devnull):
        p = Modern(argv[1].split(","), 0, jit=True, data_service=argv[0], count=8,
                   service_timeout_s=5)
        for _ in range(8):
            p.step()

sys.exit(run_cli(main, sys.argv[1:], "benchmarks.service_probe"))
"""


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [ln for ln in stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1, stderr[-3000:]
    return errors[0]


def test_a_worker_killed_mid_run_costs_nothing_but_time(servers, images, tmp_path):
    from modern import pipeline

    _, target = servers.dispatcher()
    (victim, victim_address), _ = servers.workers(target, 2)
    with _modern_run(tmp_path, "run", images, target, "--service_timeout", "30") as client:
        client.wait_for("first step done", timeout=180)
        time.sleep(1.0)
        servers.kill(victim)
        t_kill = time.monotonic()
        assert client.wait(timeout=150) == 0, client.stderr[-3000:]
        after_kill = time.monotonic() - t_kill
    assert after_kill < 120, after_kill  # the remaining steps, the grace, the making again
    err = client.stderr
    assert f"worker {victim_address} lost after step" in err, err
    assert "element(s) made again in this process" in err, err
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    svc = run["data_service"]
    assert [w["address"] for w in svc["lost_workers"]] == [victim_address]
    assert svc["lost_workers"][0]["reason"] == "connection refused"
    # every step delivered, each index once, each with the image a local run reads there
    assert sorted(run["step_indices"]) == list(range(STEPS))
    assert svc["reproduced_count"] > 0, "the killed worker held nothing: nothing was made again"
    assert set(svc["reproduced_indices"]) <= set(run["step_indices"])
    assert run["step_indices"][-svc["reproduced_count"]:] == svc["reproduced_indices"]
    local = dict((int(i), p.decode()) for i, p in pipeline.file_dataset(
        images.split(","), 5, count=STEPS).as_numpy_iterator())
    assert [local[i] for i in run["step_indices"]] == run["step_images"]


def test_no_worker_left_signals_and_the_timeout_end_the_wait(servers, images, tmp_path):
    _, target = servers.dispatcher()
    ((worker, worker_address),) = servers.workers(target, 1)
    with _modern_run(tmp_path, "term", images, target) as client:
        client.wait_for("first step done", timeout=180)
        servers.kill(worker)
        client.wait_for("no worker left", timeout=20)  # blocked on the service from here on
        time.sleep(1.0)
        t0 = time.monotonic()
        client.proc.send_signal(signal.SIGTERM)
        assert client.wait(timeout=30) == 128 + signal.SIGTERM, client.stderr[-3000:]
        assert time.monotonic() - t0 < 10
    assert "interrupted by SIGTERM; partial results kept in" in client.stderr
    partial = tmp_path / "term" / "partial"
    assert json.loads((partial / "partial.json").read_text())["interrupted_by"] == "SIGTERM"
    assert list(partial.glob("plugins/profile/*/*.xplane.pb"))
    # The dead worker stays registered (TF never unregisters one), so later runs pass the
    # preflight and block at once: SIGINT, the timeout, compare.run's child, the benchmark.
    with _modern_run(tmp_path, "int", images, target) as sigint, \
            _modern_run(tmp_path, "timeout", images, target, "--service_timeout", "5") as late, \
            _Client(tmp_path, "bench", "-c", BENCH_PROBE, target, images) as bench:
        sigint.wait_for("no worker left", timeout=180)
        time.sleep(1.0)
        t0 = time.monotonic()
        sigint.proc.send_signal(signal.SIGINT)
        assert sigint.wait(timeout=30) == 128 + signal.SIGINT, sigint.stderr[-3000:]
        assert time.monotonic() - t0 < 10
        assert late.wait(timeout=180) == 1, late.stderr[-3000:]
        assert bench.wait(timeout=180) == 1, bench.stderr[-3000:]
    assert "interrupted by SIGINT" in sigint.stderr
    line = _one_error_line(late.stderr)
    assert f"every tf.data service worker of {target} is gone ({worker_address} (connection " \
           f"refused)) and no element came for 5 s; 0 of {STEPS} steps done" in line, line
    assert line.endswith(f"partial results kept in {tmp_path / 'timeout' / 'partial'}"), line
    line = _one_error_line(bench.stderr)
    assert "benchmarks.service_probe: error: every tf.data service worker" in line, line


def test_compare_runs_modern_child_ends_the_same_way(servers, tmp_path):
    """compare.run's modern side on a service with no worker left: the child's one line comes
    back as :class:`RunFailed` (compare.run: one line, exit 1), within the timeout."""
    from common.errors import RunFailed
    from compare.pipelines import run_in_child

    _, target = servers.dispatcher()
    ((worker, _),) = servers.workers(target, 1)
    servers.kill(worker)
    t0 = time.monotonic()
    with pytest.raises(RunFailed, match="every tf.data service worker .* is gone"):
        run_in_child("modern", tmp_path / "modern", None, 4, 0, tmp_path / "child.log",
                     data_service=target, service_timeout=5)
    assert time.monotonic() - t0 < 120


@pytest.mark.parametrize("work_dir", [True, False], ids=["with_work_dir", "without_work_dir"])
def test_a_dispatcher_killed_and_restarted_on_the_same_port(servers, images, tmp_path,
                                                            work_dir):
    port = _free_port()
    journal = tmp_path / "journal" if work_dir else None
    dispatcher, target = servers.dispatcher(port, journal)
    servers.workers(target, 1)
    with _modern_run(tmp_path, "run", images, target) as client:
        client.wait_for("first step done", timeout=180)
        time.sleep(1.0)
        servers.kill(dispatcher)
        client.wait_for("stopped answering", timeout=20)
        servers.dispatcher(port, journal)  # the same port, and folder if any
        code = client.wait(timeout=180)
    if work_dir:  # TF's fault-tolerant mode: the job goes on
        assert code == 0, client.stderr[-3000:]
        assert "answers again after" in client.stderr
        run = json.loads((tmp_path / "run" / "run.json").read_text())
        svc = run["data_service"]
        assert sorted(run["step_indices"]) == list(range(STEPS))
        assert len(svc["dispatcher_outages"]) == 1
        assert svc["dispatcher_outages"][0]["seconds"] > 0
        assert svc["lost_workers"] == [] and svc["reproduced_count"] == 0
    else:
        assert code == 1, client.stderr[-3000:]
        line = _one_error_line(client.stderr)
        assert f"the tf.data service dispatcher at {target} was restarted without its state" \
               in line, line
        assert f"of {STEPS} steps done" in line and "--work_dir" in line, line
        assert "partial results kept in" in line, line
        assert not (tmp_path / "run" / "run.json").exists()
