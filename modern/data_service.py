"""tf.data service for the modern pipeline: addresses, the servers, and what a dispatcher reports.

The modern input pipeline (read, decode, resize, crops, draws: :func:`modern.pipeline.build`)
can run on tf.data service workers instead of in the training process. A dispatcher
(:func:`start_dispatcher`) hands out the stream's indices to the workers that registered with it
(:func:`start_worker`); the client applies :func:`distribute` to its dataset and receives the
elements. ``python -m modern.service`` is the CLI over these functions.

What a client sends is the dataset's graph, not Python code: the workers run it with their own
TensorFlow, so every host needs the same TensorFlow version, and the image paths must be
readable under the same names on every worker.

The dispatcher is also asked directly (its ``GetWorkers`` RPC, the message types declared here
from TensorFlow's ``dispatcher.proto``, which TF does not ship as Python): :func:`list_workers`
checks that a dispatcher answers and has workers before a run starts -- otherwise TF's client
and workers wait for it without end -- and tells run.json how many workers there were. Each
worker is asked too (:func:`probe_worker`, its ``GetWorkerTasks`` RPC): TF's dispatcher keeps
a dead worker registered for good, and a hung one still accepts TCP connections.
"""
from __future__ import annotations

import contextlib
import getpass
import ipaddress
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Iterator

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from common.errors import InputError, RunFailed
from modern.bind import DEFAULT_BIND, EVERY_INTERFACE, bind_failure

PROCESSING_MODE = "distributed_epoch"
PROTOCOL = "grpc"
#: Element compression between workers and client: none (see :func:`distribute`).
COMPRESSION = None
#: How long to wait for a dispatcher's answer before calling it unreachable.
ANSWER_TIMEOUT_S = 10.0
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_ADDRESS_RE = re.compile(r"^(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?"
                         r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\s\[\]]+):(?P<port>[0-9]+)$")


@dataclass(frozen=True)
class Address:
    """A tf.data service server address: ``host:port``."""

    host: str
    port: int

    @property
    def hostport(self) -> str:
        return hostport(self.host, self.port)

    @property
    def target(self) -> str:
        """The form ``distribute(service=...)`` and ``--data_service`` take: ``grpc://host:port``."""
        return f"{PROTOCOL}://{self.hostport}"


def hostport(host: str, port: int | str) -> str:
    """``host:port``, an IPv6 address in brackets (``[::1]:5050``)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def parse_address(text: str, flag: str = "--data_service") -> Address:
    """``grpc://host:port`` or ``host:port`` -> :class:`Address`; anything else is an
    :class:`InputError` naming ``flag`` and the text."""
    m = _ADDRESS_RE.match((text or "").strip())
    if not m:
        raise InputError(f"{flag} {text!r}: expected grpc://HOST:PORT or HOST:PORT")
    if m.group("scheme") and m.group("scheme") != PROTOCOL:
        raise InputError(f"{flag} {text!r}: the tf.data service speaks {PROTOCOL}://, "
                         f"not {m.group('scheme')}://")
    port = int(m.group("port"))
    if not 1 <= port <= 65535:
        raise InputError(f"{flag} {text!r}: port {port} is outside 1..65535")
    return Address(m.group("host"), port)


def get_workers_call(channel):
    """The dispatcher's ``GetWorkers`` RPC on ``channel``; returns worker addresses."""

    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="modern/dispatcher_get_workers.proto",
                                               package="tensorflow.data", syntax="proto3")
    info = proto.message_type.add(name="WorkerInfo")  # dispatcher.proto: WorkerInfo
    info.field.add(name="address", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    response = proto.message_type.add(name="GetWorkersResponse")
    response.field.add(name="workers", number=1, type=f.TYPE_MESSAGE, label=f.LABEL_REPEATED,
                       type_name=".tensorflow.data.WorkerInfo")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(
        "tensorflow.data.GetWorkersResponse"))
    return channel.unary_unary("/tensorflow.data.DispatcherService/GetWorkers",
                               request_serializer=bytes, response_deserializer=cls.FromString)


#: How long :func:`probe_worker` waits for a worker's answer.
PROBE_TIMEOUT_S = 2.0
#: A worker's ``GetWorkerTasks`` RPC (worker.proto): an empty request, a short answer that only
#: a running worker process gives (the kernel accepts TCP connections for a stopped one).
_WORKER_TASKS = "/tensorflow.data.WorkerService/GetWorkerTasks"


def probe_worker(hostport: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None if the tf.data service worker at ``hostport`` answers within ``timeout_s``; else why
    not, in a few words ("connection refused", "no answer in 2 s", ...).

    A fresh channel each time: a kept one would back off reconnecting (up to minutes) and call
    a worker restarted on the same port unreachable long after it is back.
    """
    with grpc.insecure_channel(hostport) as channel:
        call = channel.unary_unary(_WORKER_TASKS, request_serializer=bytes,
                                   response_deserializer=None)
        try:
            call(b"", timeout=timeout_s)  # GetWorkerTasksRequest is empty
        except grpc.RpcError as e:
            return no_answer_reason(e, timeout_s)
    return None


def probe_workers(workers: list[str], timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, str | None]:
    """:func:`probe_worker` on every worker at once (a partitioned host costs one timeout, not
    one per worker): {worker: None or why it did not answer}."""
    answers: dict[str, str | None] = {}

    def one(w: str) -> None:
        answers[w] = probe_worker(w, timeout_s)

    threads = [threading.Thread(target=one, args=(w,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + 1.0)
    return {w: answers.get(w, f"no answer in {timeout_s:g} s") for w in workers}


def list_workers(address: Address, wait_s: float = 0.0,
                 answer_timeout_s: float = ANSWER_TIMEOUT_S) -> list[str]:
    """The workers registered with the dispatcher at ``address`` (their ``host:port``).

    Nothing listening there, or a host name that does not resolve, is asked again for up to
    ``wait_s`` seconds (a dispatcher still starting); each try waits up to
    ``answer_timeout_s`` for an answer. No answer is an :class:`InputError`. A worker that
    stopped stays listed for good: TF's dispatcher only logs a worker that stopped
    heartbeating (``DetectMissingWorkers``), it never unregisters it
    (:class:`modern.service_watch.ServiceWatch` probes the workers themselves).
    """

    deadline = time.monotonic() + wait_s
    with grpc.insecure_channel(address.hostport) as channel:
        call = get_workers_call(channel)
        while True:
            try:
                return ask_workers(call, answer_timeout_s)
            except grpc.RpcError as e:
                last = e
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
    raise InputError(f"{address.target}: no tf.data service dispatcher there "
                     f"({no_answer_reason(last, answer_timeout_s)})")


def ask_workers(call, timeout_s: float) -> list[str]:
    """One ``GetWorkers`` call (from :func:`get_workers_call`): the workers' addresses; a
    dispatcher that does not answer raises ``grpc.RpcError``."""
    reply = call(b"", timeout=timeout_s)  # GetWorkersRequest is empty
    return [w.address for w in reply.workers]


def no_answer_reason(e, timeout_s: float) -> str:
    """Why a dispatcher did not answer (a ``grpc.RpcError``), in a few words."""

    detail = (e.details() or "").lower()
    return ("cannot resolve the host name" if "resolv" in detail or "dns resolution" in detail
            else "connection refused" if "refused" in detail
            else "connection reset" if "reset by peer" in detail
            else f"no answer in {timeout_s:g} s"
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED else e.details() or str(e.code()))


def check_service(text: str) -> dict:
    """Check ``--data_service`` before a run: the dispatcher answers and at least one of its
    workers does (TF keeps a dead worker registered, and its client would wait for it).

    Returns what run.json records: address, processing mode, the workers registered now, and
    those of them that did not answer (``not_answering``: {worker: why}).
    """
    address = parse_address(text)
    workers = sorted(list_workers(address))
    start = (f"start some with: python -m modern.service worker --dispatcher "
             f"{address.hostport}")
    if not workers:
        raise InputError(f"{address.target}: the dispatcher has no workers registered; {start}")
    silent = {w: why for w, why in probe_workers(workers).items() if why}
    if len(silent) == len(workers):
        raise InputError(f"{address.target}: none of the dispatcher's {len(workers)} "
                         f"registered worker(s) answers ("
                         + ", ".join(f"{w}: {why}" for w, why in silent.items())
                         + f"); {start}")
    return {"address": address.target, "processing_mode": PROCESSING_MODE,
            "workers": workers, "worker_count": len(workers), "not_answering": silent}


def distribute(ds, target: str):
    """``ds`` processed on the tf.data service at ``target`` in ``distributed_epoch`` mode.

    Elements travel uncompressed (:data:`COMPRESSION`): they are float32 crops (2.9 MB an
    image), which compress badly, and compressing costs the client CPU that scaling out is
    meant to free (numbers: BENCHMARKS.md, "Modern on tf.data service").
    """
    import tensorflow as tf  # lazy: imports TensorFlow

    return ds.apply(tf.data.experimental.service.distribute(
        processing_mode=PROCESSING_MODE, service=parse_address(target).target,
        compression=COMPRESSION))


def exposure_warning(role: str, port: int | None, bind: str = DEFAULT_BIND) -> str:
    """The warning a dispatcher or worker prints first: who can reach it and what they can do.

    The ``grpc`` protocol of tf.data service has no authentication or TLS, and the dispatcher
    builds every dataset graph a client registers (to split it), the workers run them. Who can
    reach the port depends on ``bind`` (:mod:`modern.bind`): 127.0.0.1, this machine's
    processes; another address, whoever reaches that network; ``0.0.0.0``, every interface
    (TensorFlow's own ``"0.0.0.0:" + port`` in ``server_lib.cc``; ``ss -ltn`` shows
    ``*:PORT``, IPv4 and IPv6).
    """

    where = f"port {port}" if port else "its port"
    runs = (f"without authentication, and it runs the dataset graphs clients send as user "
            f"{getpass.getuser()!r} (graph ops read and write files)")
    if bind != EVERY_INTERFACE and ipaddress.ip_address(bind).is_loopback:
        return (f"note: this {role} listens on {bind} only ({where}; --bind): every process "
                f"on this machine, of any user, can reach it, {runs}. To serve other machines "
                f"use --bind with an address on a private network, or --bind {EVERY_INTERFACE} "
                f"behind a firewall (README, 'tf.data service: who can get in').")
    if bind == EVERY_INTERFACE:
        return (f"WARNING: this {role} listens on {where} of EVERY network interface "
                f"(--bind {bind}), {runs}: anyone who can reach the port can. Run it on a "
                f"private network, or let a firewall admit only your own hosts to this port "
                f"(README, 'tf.data service: who can get in').")
    return (f"WARNING: this {role} listens on {bind} only ({where}; --bind): anyone who can "
            f"reach that address can reach it, {runs}. Keep that network private, or let a "
            f"firewall admit only your own hosts to this port (README, 'tf.data service: who "
            f"can get in').")


def this_host() -> str:
    """The name other machines would use for this one (its host name)."""
    return socket.gethostname()


def _server_error(what: str, port: int, e: Exception) -> InputError:
    """A server TensorFlow could not start, and why: the cause the bind shim saw when there is
    one (an address not on this machine, a port in use), else TensorFlow's words."""
    reason = bind_failure(port) or (
        "port in use or not allowed" if "start" in str(e).lower() else str(e))
    return InputError(f"{what} --port {port}: cannot listen ({reason})")


def start_dispatcher(port: int = 0, work_dir: str | None = None):
    """A tf.data service dispatcher listening on ``port`` (0: any free port), on every
    interface unless this process runs with :mod:`modern.bind`'s shim.

    With ``work_dir`` it journals its state there (fault-tolerant mode) and recovers the
    registered datasets and jobs after a restart with the same folder.
    """
    import tensorflow as tf  # lazy: imports TensorFlow

    svc = tf.data.experimental.service
    config = svc.DispatcherConfig(port=port, protocol=PROTOCOL, work_dir=work_dir,
                                  fault_tolerant_mode=bool(work_dir))
    try:
        return svc.DispatchServer(config)
    except (RuntimeError, tf.errors.OpError) as e:
        raise _server_error("dispatcher", port, e) from None


def start_worker(dispatcher: Address, port: int = 0, host: str | None = None,
                 wait_s: float = 30.0):
    """A tf.data service worker on ``port`` (0: any free port) registered with ``dispatcher``.

    ``host`` is the name the dispatcher gives clients to reach this worker (default: this
    machine's host name; TF's own default, ``localhost``, only works when every client runs on
    this machine). The dispatcher must answer within ``wait_s`` seconds: TF's worker would
    otherwise wait for it without end. (TensorFlow is imported first: a worker started with
    its dispatcher imports it meanwhile instead of after.)
    """
    import tensorflow as tf  # lazy: imports TensorFlow

    list_workers(dispatcher, wait_s)

    svc = tf.data.experimental.service
    config = svc.WorkerConfig(dispatcher_address=dispatcher.hostport,
                              worker_address=hostport(host or this_host(), "%port%"), port=port,
                              protocol=PROTOCOL)
    try:
        return svc.WorkerServer(config)
    except (RuntimeError, tf.errors.OpError) as e:
        raise _server_error("worker", port, e) from None


def bound_address(server, host: str) -> Address:
    """Where ``server`` (a dispatcher or worker) listens, as others reach it through ``host``."""
    return Address(host, int(server._address.rsplit(":", 1)[1]))  # TF: "localhost:<bound port>"


#: How long :func:`local_cluster` lets its servers stop after an exception before killing them
#: (all at once: the client that kept them busy is the one going away).
STOP_AFTER_FAILURE_S = 2.0


@dataclass(frozen=True)
class LocalCluster:
    """A running :func:`local_cluster`: the dispatcher's address and the server processes' ids."""

    address: Address
    pids: tuple[int, ...]


@contextlib.contextmanager
def local_cluster(workers: int, startup_timeout_s: float = 120.0) -> Iterator[LocalCluster]:
    """A dispatcher and ``workers`` workers on this machine, each its own
    ``python -m modern.service`` process on 127.0.0.1 (as on separate hosts, elements travel
    over gRPC); yields a :class:`LocalCluster` once every worker has registered, and stops
    them with SIGTERM on exit (workers first). For the benchmark and for trying the service on
    one machine. A server that fails to start is an :class:`InputError` quoting its last stderr
    line; one that ended before the stop, or does not stop cleanly (exit 0 within 30 s), a
    :class:`RunFailed`. Left by an exception (a signal, a failed run), the servers get
    :data:`STOP_AFTER_FAILURE_S` seconds and are then killed.
    """
    servers: list[tuple[subprocess.Popen, object]] = []

    def spawn(*args: str) -> str:
        log = tempfile.TemporaryFile()
        proc = subprocess.Popen([sys.executable, "-m", "modern.service", *args, "--host",
                                 "127.0.0.1"], stdout=subprocess.PIPE, stderr=log, text=True,
                                cwd=_PACKAGE_ROOT, env=dict(os.environ, PYTHONPATH=_PACKAGE_ROOT))
        servers.append((proc, log))
        assert proc.stdout is not None  # stdout=PIPE
        line = proc.stdout.readline().strip()  # the address, once it listens
        if not line:
            raise InputError(f"modern.service {args[0]} exited with code {proc.wait()} before "
                             f"listening: {_last_line(log)}")
        return line

    try:
        dispatcher = parse_address(spawn("dispatcher", "--port", "0"))
        for _ in range(workers):
            spawn("worker", "--dispatcher", dispatcher.hostport, "--port", "0")
        deadline = time.monotonic() + startup_timeout_s
        while len(list_workers(dispatcher)) < workers:
            if time.monotonic() > deadline:
                raise InputError(f"{dispatcher.target}: {workers} worker(s) did not register "
                                 f"in {startup_timeout_s:g} s")
            time.sleep(0.2)
        yield LocalCluster(dispatcher, tuple(proc.pid for proc, _ in servers))
    except BaseException:
        _stop_servers(servers, STOP_AFTER_FAILURE_S, together=True)
        raise
    failures = _stop_servers(servers, 30.0, together=False)
    if failures:
        raise RunFailed("local tf.data service did not stop cleanly: " + "; ".join(failures))


def _last_line(log) -> str:
    """The last non-empty line a server wrote to its stderr ``log``."""
    log.seek(0)
    lines = [ln.strip() for ln in log.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def _stop_servers(servers: list, grace_s: float, together: bool) -> list[str]:
    """Stop :func:`local_cluster`'s ``servers`` ((process, stderr log) pairs) with SIGTERM:
    workers first, each given ``grace_s``; or (``together``) all at once with one shared
    deadline. What has not exited by then is killed. Returns what did not stop cleanly,
    naming a server that had already ended (killed, crashed)."""
    order = list(reversed(servers))
    deadline = time.monotonic() + grace_s
    failures = []
    ended = {proc: proc.poll() for proc, _ in order}
    for proc, _ in order if together else ():
        if ended[proc] is None:
            proc.send_signal(signal.SIGTERM)
    for proc, log in order:
        what = " ".join(proc.args[2:4])
        if ended[proc] is not None:
            failures.append(f"{what} (pid {proc.pid}) had ended before the stop "
                            f"({exit_reason(ended[proc])})")
            log.close()
            continue
        if not together:
            proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace_s
        try:
            code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = f"killed after {grace_s:g} s ({proc.wait()})"
        if code != 0:
            failures.append(f"{what}: exit {code}: {_last_line(log)}")
        log.close()
    return failures


def exit_reason(code: int) -> str:
    """A process's exit code in words: "exit 1", "killed by SIGKILL"."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"
