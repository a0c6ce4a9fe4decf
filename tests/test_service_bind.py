"""``python -m modern.service --bind`` with real servers: on ::1 a client is served; an address
not on this machine, a port in use, a damaged cached shim and a shim that does not narrow each
end in one line, and a watcher reading the kernel's socket table every few milliseconds while
the server starts never sees it listen wider than asked (issue 26).
"""
from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from modern import bind
from tests.conftest import ROOT, assert_one_line_error, run_module
from tests.test_bind import IMPOSTOR, NO_IPV6, _corrupt, _not_here

pytestmark = [pytest.mark.slow, pytest.mark.service, pytest.mark.needs("cc")]

LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1"}


def _free_port(family: int = socket.AF_INET, host: str = "127.0.0.1") -> int:
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class _Watch:
    """Every address the kernel says listens on ``port``, read every 2 ms until stopped."""

    def __init__(self, port: int):
        self.port, self.seen = port, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.seen.update(bind.listening(self.port))

    def stop(self) -> set[str]:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.seen


class _Server:
    """``python -m modern.service ARGS`` with its stderr in a file; killed on exit."""

    def __init__(self, tmp: Path, *args: str, env: dict | None = None):
        self.err = tmp / f"server-{args[0]}-{time.monotonic_ns()}.err"
        with open(self.err, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "modern.service", *args],
                                         cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
                                         env=dict(os.environ, PYTHONPATH=str(ROOT),
                                                  **(env or {})))

    def address(self) -> str:
        line = self.proc.stdout.readline().strip()  # once it listens
        assert line, f"exited {self.proc.wait()}: {self.stderr}"
        return line

    @property
    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def __enter__(self) -> "_Server":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@NO_IPV6
def test_a_dispatcher_and_worker_on_ipv6_loopback_serve_a_client(tmp_path):
    import tensorflow as tf

    from modern import data_service as ds

    with _Server(tmp_path, "dispatcher", "--port", "0", "--bind", "::1") as dispatcher:
        target = dispatcher.address()
        assert target.startswith("grpc://[::1]:"), target
        address = ds.parse_address(target)
        with _Server(tmp_path, "worker", "--dispatcher", address.hostport, "--bind", "::1") \
                as worker:
            worker_address = worker.address()
            assert worker_address.startswith("[::1]:"), worker_address
            for port in (address.port, int(worker_address.rsplit(":", 1)[1])):
                assert bind.listening(port) == ["::1"], bind.listening(port)
            assert ds.list_workers(address) == [worker_address]
            dataset = ds.distribute(tf.data.Dataset.range(20), target)
            assert sorted(dataset.as_numpy_iterator()) == list(range(20))
            assert worker.stop() == 0, worker.stderr
        assert dispatcher.stop() == 0, dispatcher.stderr
    first = dispatcher.stderr.splitlines()[0]
    assert first.startswith("modern.service: note: this dispatcher listens on ::1 only"), first
    assert f"dispatcher listening on [::1]:{address.port} only" in dispatcher.stderr
    assert "worker listening on [::1]:" in worker.stderr


@pytest.mark.parametrize("candidates", [("198.51.100.123", "203.0.113.45"),
                                        ("2001:db8::123", "2001:db8::456")])
def test_an_address_not_on_this_machine_is_named_as_the_cause(candidates):
    address = _not_here(candidates)
    proc = run_module("modern.service", "dispatcher", "--port", "0", "--bind", address,
                      timeout=120)
    line = assert_one_line_error(proc, f"--bind {address}: not an address of this machine")
    assert "in use" not in line and "listens on" not in proc.stderr  # nothing claimed first
    assert proc.stdout == ""


def test_a_port_in_use_is_named_as_the_cause(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_module("modern.service", "dispatcher", "--port", str(port), timeout=120,
                          env={"XDG_CACHE_HOME": str(tmp_path)})
    assert_one_line_error(proc, f"dispatcher --port {port}: cannot listen (127.0.0.1:{port} is "
                                f"in use by another process)")


def _cache_with_shim(cache: Path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return bind.shim_path()


@pytest.mark.parametrize("how", ["truncated", "not ELF"])
def test_a_damaged_cached_shim_is_rebuilt_and_the_server_never_listens_wider(
        tmp_path, monkeypatch, how):
    shim = _cache_with_shim(tmp_path / "cache", monkeypatch)
    _corrupt(shim, how)
    port = _free_port()
    watch = _Watch(port)
    with _Server(tmp_path, "dispatcher", "--port", str(port)) as server:
        assert server.address() == f"grpc://127.0.0.1:{port}"
        time.sleep(0.5)
        code = server.stop()
    seen = watch.stop()
    assert code == 0, server.stderr
    assert seen and seen <= LOOPBACK, seen
    lines = server.stderr.splitlines()
    assert lines[0].startswith(f"modern.service: note: the cached bind shim {shim} "), lines[0]
    assert lines[0].endswith("building it again"), lines[0]
    assert lines[1].startswith("modern.service: note: this dispatcher listens on 127.0.0.1 "
                               "only"), lines[1]
    assert "SIGBUS" not in server.stderr and "ld.so" not in server.stderr


def test_a_shim_that_does_not_narrow_stops_the_server_before_it_listens(tmp_path, monkeypatch):
    shim = _cache_with_shim(tmp_path / "cache", monkeypatch)
    source = tmp_path / "impostor.c"
    source.write_text(IMPOSTOR)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(shim), str(source)], check=True)
    shim.with_name(shim.name + ".sha256").write_text(
        hashlib.sha256(shim.read_bytes()).hexdigest() + "\n")
    port = _free_port()
    watch = _Watch(port)
    t0 = time.monotonic()
    proc = run_module("modern.service", "dispatcher", "--port", str(port), timeout=120)
    seconds = time.monotonic() - t0
    assert watch.stop() == set()  # never listened, not even for a moment
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("modern.service: error: --bind 127.0.0.1: a wildcard bind in this "
                           "process landed on ::, not on 127.0.0.1"), line
    assert "stopped before the server started" in line
    assert seconds < 30, seconds  # before TensorFlow was imported
