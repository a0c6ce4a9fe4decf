"""The modern input pipeline on tf.data service: every image processed exactly once per epoch,
each output equal to a local run's with the same seed; ``modern.run --data_service`` end to end;
the ``modern.service`` servers as a user starts and stops them; clean errors for bad addresses.

An in-process dispatcher and two workers on 127.0.0.1 serve the module; the CLI tests start
their own server processes. Everything that waits on a server has a timeout.
"""
from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from modern.bind import listening
from tests.conftest import ROOT, assert_one_line_error, run_module

pytestmark = [pytest.mark.slow, pytest.mark.service]

SEED = 11


@pytest.fixture(scope="module")
def service():
    """An in-process dispatcher and two workers on 127.0.0.1 (free ports): (dispatcher
    address, the two worker servers); stopped at the end of the module."""
    from modern import data_service as ds

    dispatcher = ds.start_dispatcher(0)
    address = ds.Address("127.0.0.1", ds.bound_address(dispatcher, "127.0.0.1").port)
    workers = [ds.start_worker(address, 0, "127.0.0.1") for _ in range(2)]
    yield address, workers
    import gc

    gc.collect()  # iterators in reference cycles are service clients that a stop waits for
    for w in workers:
        w.stop()
    dispatcher.stop()


@pytest.fixture(scope="module")
def twelve_jpegs(varied_jpegs):
    """Twelve of the varied JPEGs: ten sizes, portrait, landscape and square."""
    return varied_jpegs[1][:12]


def _augmented(dataset, on_first=None) -> dict[int, tuple[str, np.ndarray]]:
    """Every element of ``dataset`` augmented as ``modern.run`` does it (jit-compiled, in this
    process): stream index -> (path, output). An index seen twice fails."""
    from modern import augment

    fn = augment.make_augment(jit=True)
    out = {}
    for e in dataset:
        if on_first and not out:
            on_first()
        i = int(e["index"])
        assert i not in out, f"index {i} delivered twice"
        out[i] = (e["path"].numpy().decode(), fn(e["crops"], e["brightness"], e["saturation"],
                                                  e["contrast"], e["permutation"]).numpy())
    return out


def test_distributed_epoch_processes_each_image_once_per_epoch_and_matches_local(
        service, twelve_jpegs):
    from modern import pipeline

    address, workers = service
    paths, count = twelve_jpegs, 2 * len(twelve_jpegs) + 5  # two epochs and part of a third
    tasks = []
    remote = _augmented(pipeline.build(paths, seed=SEED, count=count, data_service=address.target),
                        on_first=lambda: tasks.extend(w._num_tasks() for w in workers))
    local = _augmented(pipeline.build(paths, seed=SEED, count=count))
    assert tasks == [1, 1], "the job did not run on both workers"
    assert sorted(remote) == sorted(local) == list(range(count))
    n = len(paths)
    for epoch in range(count // n):
        seen = [remote[i][0] for i in range(epoch * n, (epoch + 1) * n)]
        assert sorted(seen) == sorted(paths), f"epoch {epoch}: not every image exactly once"
    assert [remote[i][0] for i in range(n)] != [remote[i][0] for i in range(n, 2 * n)], \
        "files were not reshuffled between epochs"
    for i in range(count):
        assert remote[i][0] == local[i][0], i
        np.testing.assert_array_equal(remote[i][1], local[i][1], err_msg=f"index {i}")


def test_endless_stream_on_the_service_never_repeats_an_index(service, twelve_jpegs):
    """The benchmark's endless stream: indices split across the workers, never made by both
    (``Dataset.counter()`` as the source would make every index once per worker)."""
    from modern import pipeline

    address, _ = service
    it = iter(pipeline.build(twelve_jpegs, seed=SEED, data_service=address.target))
    got = [(int(e["index"]), e["path"].numpy().decode()) for e in (next(it) for _ in range(30))]
    del it
    indices = [i for i, _ in got]
    assert len(set(indices)) == len(indices), sorted(indices)
    stream = dict((int(i), p.decode()) for i, p in
                  pipeline.file_dataset(twelve_jpegs, SEED, count=max(indices) + 1)
                  .as_numpy_iterator())
    assert all(stream[i] == p for i, p in got)


def test_modern_run_cli_on_the_service_end_to_end(service, twelve_jpegs, tmp_path):
    from modern import pipeline

    address, _ = service
    images, steps = twelve_jpegs[:6], 8
    out = tmp_path / "run"
    proc = run_module("modern.run", "--out", str(out), "--images", ",".join(images),
                      "--steps", str(steps), "--seed", "4", "--data_service", address.target,
                      timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "2 tf.data service worker(s)" in proc.stderr
    assert {p.name for p in out.iterdir()} == {"plugins", "run.json", "trace.json.gz", "tf.log"}
    assert len(list(out.glob("plugins/profile/*/*.xplane.pb"))) == 1
    run = json.loads((out / "run.json").read_text())
    from modern.data_service import list_workers

    assert run["data_service"] == {"address": address.target, "processing_mode": "distributed_epoch",
                                   "workers": sorted(list_workers(address)), "worker_count": 2,
                                   "not_answering": {},
                                   # nothing went wrong: nothing lost, nothing made again
                                   "timeout_s": 60.0, "lost_worker_wait_s": 10.0,
                                   "lost_workers": [], "dispatcher_outages": [],
                                   "reproduced_indices": [], "reproduced_count": 0,
                                   "reproduced_because": None, "duplicate_indices": []}
    assert len(run["data_service"]["workers"]) == 2
    # the images a local run with this seed reads, with the same index -> image pairs
    assert sorted(run["step_indices"]) == list(range(steps))
    local = dict((int(i), p.decode()) for i, p in
                 pipeline.file_dataset(images, 4, count=steps).as_numpy_iterator())
    assert [local[i] for i in run["step_indices"]] == run["step_images"]
    assert run["output_shape"] == [10, 221, 221, 3]
    # the client only received elements: reading and decoding happened in the workers
    with gzip.open(out / "trace.json.gz", "rt") as f:
        names = {e.get("name") for e in json.load(f)["traceEvents"] if e.get("ph") == "X"}
    assert "GetDataServiceElement" in names
    assert not names & {"ReadFile", "DecodeJpeg", "ResizeBilinear"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_check_service_refuses_what_cannot_serve():
    from common.errors import InputError
    from modern import data_service as ds

    for text, needle in (("localhost", "expected grpc://HOST:PORT"),
                         ("http://localhost:5050", "speaks grpc://"),
                         ("grpc://localhost:0", "outside 1..65535")):
        with pytest.raises(InputError, match=needle):
            ds.check_service(text)
    port = _free_port()
    with pytest.raises(InputError, match=f"grpc://127.0.0.1:{port}: no tf.data service "
                                         f"dispatcher there"):
        ds.check_service(f"127.0.0.1:{port}")
    lonely = ds.start_dispatcher(0)
    try:
        target = f"grpc://127.0.0.1:{ds.bound_address(lonely, '127.0.0.1').port}"
        with pytest.raises(InputError, match="no workers registered"):
            ds.check_service(target)
        # a worker that registered and is gone stays registered (TF never unregisters one)
        gone = ds.start_worker(ds.parse_address(target), 0, "127.0.0.1", wait_s=10)
        deadline = time.monotonic() + 30
        while not ds.list_workers(ds.parse_address(target)):
            assert time.monotonic() < deadline, "the worker did not register in 30 s"
            time.sleep(0.1)
        gone_address = ds.list_workers(ds.parse_address(target))[0]
        gone.stop()
        with pytest.raises(InputError, match=f"none of the dispatcher's 1 registered worker"
                                             f"\\(s\\) answers \\({gone_address}: connection "
                                             f"refused\\)"):
            ds.check_service(target)
    finally:
        lonely.stop()


@pytest.mark.parametrize("flag", ["localhost:5050:1", "grpc://127.0.0.1:{free}"])
def test_modern_run_bad_data_service_is_one_line_exit_2(tmp_path, flag):
    flag = flag.format(free=_free_port())
    proc = run_module("modern.run", "--out", str(tmp_path / "out"), "--steps", "2",
                      "--data_service", flag, timeout=120)
    assert_one_line_error(proc, flag)
    assert not (tmp_path / "out" / "run.json").exists()


def _start(*args: str) -> tuple[subprocess.Popen, str]:
    """``python -m modern.service args`` as a user starts it; returns (process, the address it
    prints first)."""
    proc = subprocess.Popen([sys.executable, "-m", "modern.service", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return proc, proc.stdout.readline().strip()


def _stop(proc: subprocess.Popen, sig: int) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err


@pytest.mark.needs("cc")
def test_service_cli_serves_until_sigterm_or_sigint(tmp_path):
    import tensorflow as tf

    from modern import data_service as ds

    journal = tmp_path / "journal"
    dispatcher, target = _start("dispatcher", "--port", "0", "--host", "127.0.0.1",
                                "--work_dir", str(journal))
    worker = None
    try:
        assert target.startswith("grpc://127.0.0.1:"), target
        address = ds.parse_address(target)
        _reachable_from_this_machine_only(address.port)
        worker, worker_address = _start("worker", "--dispatcher", address.hostport,
                                        "--bind", "0.0.0.0", "--host", "127.0.0.1")
        assert worker_address.startswith("127.0.0.1:"), worker_address
        assert set(listening(int(worker_address.rsplit(":", 1)[1]))) & {"::", "0.0.0.0"}
        assert ds.list_workers(address) == [worker_address]
        # a client connects and gets every element once
        dataset = ds.distribute(tf.data.Dataset.range(20), target)
        assert sorted(dataset.as_numpy_iterator()) == list(range(20))
        assert any(journal.iterdir()), "the dispatcher wrote no journal into --work_dir"
        code, err = _stop(worker, signal.SIGTERM)
        assert err.startswith("modern.service: WARNING: this worker listens on its port of "
                              "EVERY network interface (--bind 0.0.0.0)"), err
        assert code == 0 and "worker stopping (SIGTERM)" in err, err
        assert err.rstrip().endswith("worker stopped"), err
        worker = None
    finally:
        if worker:
            worker.kill()
        code, err = _stop(dispatcher, signal.SIGINT)
    assert code == 0 and "dispatcher stopping (SIGINT)" in err, err
    assert err.rstrip().endswith("dispatcher stopped"), err
    assert "Traceback" not in err
    # first thing said: who can reach it (this machine, by default), unauthenticated
    first = err.splitlines()[0]
    assert first.startswith("modern.service: note: this dispatcher listens on 127.0.0.1 only") \
        and "without authentication" in first and "--bind 0.0.0.0" in first, first
    assert f"dispatcher listening on 127.0.0.1:{address.port} only" in err, err
    assert f"--dispatcher 127.0.0.1:{address.port}" in err  # tells the user what to run next


def _other_address() -> str | None:
    """One of this machine's IPv4 addresses other than loopback, if it has one (the source
    address of a route; a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: never answers, only routed
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") else address


def _reachable_from_this_machine_only(port: int) -> None:
    """The server on ``port`` listens on 127.0.0.1 only: the kernel's table says so, and a
    connection to this machine's other address is refused (when it has one)."""
    assert set(listening(port)) <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening(port)
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    other = _other_address()
    if other:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((other, port), timeout=5)


def test_a_stop_that_does_not_return_ends_the_process_with_exit_1():
    """The CLI's bound on TF's stop (which waits for clients still reading, holding the GIL):
    a stand-in server whose stop never returns, in a process of its own."""
    code = ("import time\n"
            "from modern.service import stop_within\n"
            "class Stuck:\n"
            "    def stop(self):\n"
            "        while True: sum(range(10**6))  # holds the GIL, as TF's stop does\n"
            "stop_within(Stuck(), 0.5)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60, capture_output=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 1, proc
    code = code.replace("while True: sum(range(10**6))", "return None")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60, capture_output=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc


@pytest.mark.parametrize("args, needle", [
    (["dispatcher", "--port", "70000"], "--port=70000"),
    (["worker", "--dispatcher", "127.0.0.1:99999"], "127.0.0.1:99999"),
    (["worker", "--dispatcher", "nohost"], "nohost"),
    (["worker", "--dispatcher", "127.0.0.1:{free}", "--wait_for_dispatcher", "1"],
     "127.0.0.1:{free}"),
    (["dispatcher", "--port", "{busy}"], "--port {busy}"),
    (["janitor"], "janitor"),
])
@pytest.mark.needs("cc")
def test_service_cli_bad_port_or_address_is_one_line_exit_2(args, needle):
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        values = {"free": _free_port(), "busy": busy.getsockname()[1]}
        args = [a.format(**values) for a in args]
        proc = run_module("modern.service", *args, timeout=120)
    assert_one_line_error(proc, needle.format(**values))


def test_compare_run_with_the_modern_input_on_the_service(service, tmp_path):
    """``compare.run --data_service``: legacy as always, modern's input on the workers; the
    report says where modern's input ran, and modern's trace holds none of it."""
    address, _ = service
    out = tmp_path / "cmp"
    proc = run_module("compare.run", "--out", str(out), "--steps", "4",
                      "--data_service", address.target, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"tf.data on the tf.data service at {address.target}" in proc.stderr
    report = json.loads((out / "report.json").read_text())
    svc = report["runs"]["modern"]["data_service"]
    assert svc["address"] == address.target and svc["worker_count"] == 2
    assert report["runs"]["legacy"].get("data_service") is None
    assert sorted(report["runs"]["modern"]["step_indices"]) == [0, 1, 2, 3]
    assert address.target in report["sources"]["modern"]["note"]
    assert "tf.data service" in (out / "report.md").read_text()
    stages = {row["stage"]: row for row in report["stages"]}
    for stage in ("read", "decode", "resize"):  # on the workers, not in modern's trace
        assert stages[stage]["b_us"] == 0 and stages[stage]["a_us"] > 0, stage
    assert stages["saturation"]["b_us"] > 0  # the augmentation stayed in the client
    # the client's fetch from the service is input wait in both views, never unmapped
    assert not [o for o in report["unmapped_ops"]["modern"] if "GetDataService" in str(o)]
    # the verdict says why the two are not like for like: the workers, not other programs
    kinds = [x["kind"] for x in report["comparability"]["caveats"]]
    assert "data_service" in kinds and "program" not in kinds, kinds
    assert report["verdict"]["comparison"].startswith(
        "Not like for like: modern's input came from 2 tf.data service workers"), \
        report["verdict"]["comparison"]
    assert {"read", "decode", "resize"} <= set(
        next(x for x in report["comparability"]["caveats"] if x["kind"] == "data_service")
        ["facts"]["moved"])


def test_compare_run_data_service_errors_are_one_line_before_anything_runs(tmp_path):
    out = tmp_path / "cmp"
    free = f"grpc://127.0.0.1:{_free_port()}"
    proc = run_module("compare.run", "--out", str(out), "--data_service", free, timeout=120)
    assert_one_line_error(proc, free, "no tf.data service dispatcher")
    assert not out.exists(), "legacy ran although the service was unreachable"
    proc = run_module("compare.run", "--out", str(out), "--legacy", "a.json", "--modern",
                      "b.json", "--data_service", free, timeout=120)
    assert_one_line_error(proc, "--data_service")
