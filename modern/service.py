"""``python -m modern.service dispatcher [--port P] [--work_dir DIR] [--bind IP] [--host NAME]``
and ``python -m modern.service worker --dispatcher HOST:P [--port Q] [--bind IP] [--host NAME]``.

Start a tf.data service dispatcher or worker for the modern pipeline and run until stopped:
SIGINT (Ctrl-C) or SIGTERM stops the server and exits 0 (one that arrives while the server is
still starting is an interruption: exit 128 + signal). TF's stop lets clients still reading
finish their requests, so a server they keep busy past ``--stop_grace`` seconds is ended with
exit code 1 instead. The first line on stdout is the address to connect to (the dispatcher's
``grpc://host:port`` for ``--data_service``, or the worker's ``host:port`` as the dispatcher
hands it to clients); what to do next goes to stderr.
A thin CLI over :mod:`modern.data_service`; bad flags, addresses or ports are one line, exit 2.

A server listens on ``--bind`` only (default 127.0.0.1: this machine), although TensorFlow
always binds every interface: :mod:`modern.bind` narrows it (``--bind 0.0.0.0``: every
interface, as TensorFlow would). The first line on stderr says who can reach the server and
what they can do there -- no authentication, and it runs the dataset graphs clients send
(:func:`modern.data_service.exposure_warning`).
"""
from __future__ import annotations

import faulthandler
import os
import signal
import time

from absl import flags

from common.errors import InputError, cli_main, say
from common.tflog import native_stderr_to
from modern import bind as listen
from modern import data_service as ds

FLAGS = flags.FLAGS
PROG = "modern.service"
ROLES = ("dispatcher", "worker")
DEFAULT_DISPATCHER_PORT = 5050

#: What ``--help`` prints above the flags.
USAGE = f"""\
usage: python -m modern.service dispatcher [--port P] [--work_dir DIR] [--bind IP] [--host NAME]
       python -m modern.service worker --dispatcher HOST:P [--port Q] [--bind IP] [--host NAME]

Starts a tf.data service dispatcher or worker for modern.run --data_service and
compare.run --data_service, and serves until Ctrl-C or SIGTERM (exit 0). The first line on
stdout is the address to connect to: the dispatcher's grpc://HOST:PORT, or the worker's
HOST:PORT as the dispatcher hands it to clients.

The tf.data service has no authentication: whoever reaches a server's port can make it run
dataset graphs, which can read and write files. So a server listens on 127.0.0.1 only unless
--bind names another address of this machine (IPv4 or IPv6), or 0.0.0.0 for every interface.
TensorFlow itself always listens on every interface; a small shim, built once with this
machine's C compiler, narrows it, and the server checks where it listens before it serves.

examples:
  python -m modern.service dispatcher --work_dir /tmp/tfdata-journal
  python -m modern.service worker --dispatcher 127.0.0.1:{DEFAULT_DISPATCHER_PORT}
  python -m modern.service dispatcher --bind 10.0.0.5   # reachable from that network
"""



def _define_flags() -> None:
    flags.DEFINE_integer("port", None, f"Port to listen on (dispatcher default "
                         f"{DEFAULT_DISPATCHER_PORT}; worker default 0 = any free port).",
                         lower_bound=0, upper_bound=65535)
    flags.DEFINE_string("bind", listen.DEFAULT_BIND, "The address to listen on, IPv4 or IPv6: "
                        f"{listen.DEFAULT_BIND} or ::1 (this machine only), one of this "
                        "machine's addresses (e.g. on a private network), or "
                        f"{listen.EVERY_INTERFACE} for every interface. Without authentication "
                        "anyone who reaches it can run dataset graphs here (README, 'Who can "
                        "get in').")
    flags.DEFINE_string("work_dir", None, "dispatcher: journal its state in this folder so a "
                        "restart with the same folder recovers it (fault-tolerant mode).")
    flags.DEFINE_string("dispatcher", None, "worker: the dispatcher's HOST:PORT.")
    flags.DEFINE_string("host", None, "The name or IP clients reach this server by (default: the "
                        f"--bind address, or this machine's host name with --bind "
                        f"{listen.EVERY_INTERFACE}); a worker registers HOST:PORT with the "
                        "dispatcher, which hands it to clients.")
    flags.DEFINE_float("wait_for_dispatcher", 30.0, "worker: seconds to wait for the dispatcher "
                       "to answer before giving up.", lower_bound=0.0)
    flags.DEFINE_float("stop_grace", 20.0, "Seconds to let a stopping server finish the "
                       "requests of clients still reading; after that it exits with code 1.",
                       lower_bound=0.1)
    flags.DEFINE_boolean("verbose", False, "Show TensorFlow's start-up log (CUDA probing and the "
                         "like) too; its errors are always shown.")


def serve_until_signalled() -> str:
    """Block until SIGINT or SIGTERM (raised as :class:`common.errors.Interrupted` by the
    handlers :func:`common.errors.run_cli` installs); return the signal's name.

    The wait wakes up every 0.2 s: a signal that lands on one of TensorFlow's threads does not
    interrupt the main thread, whose Python handler then runs at its next wake-up.
    """
    try:
        while True:
            time.sleep(0.2)
    except KeyboardInterrupt as e:
        return signal.Signals(getattr(e, "signum", signal.SIGINT)).name


def _startup_log():
    """TensorFlow's import and server start-up chatter goes nowhere unless ``--verbose``; what
    the running server logs later (errors) stays on stderr."""

    return native_stderr_to(None if FLAGS.verbose else os.devnull)


def _check_role_flags(role: str) -> None:
    only = {"work_dir": "dispatcher", "dispatcher": "worker"}
    for name, owner in only.items():
        if getattr(FLAGS, name) is not None and role != owner:
            raise InputError(f"--{name} is for the {owner}, not the {role}")


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ROLES:
        got = f"got {' '.join(argv[1:])!r}" if len(argv) > 1 else "none given"
        raise InputError(f"expected one role: {' or '.join(ROLES)} ({got})")
    role = argv[1]
    _check_role_flags(role)

    bind = listen.parse_bind(FLAGS.bind)
    host = FLAGS.host or (ds.this_host() if bind == listen.EVERY_INTERFACE else bind)
    port = (DEFAULT_DISPATCHER_PORT if role == "dispatcher" else 0) if FLAGS.port is None \
        else FLAGS.port
    if role == "worker" and not FLAGS.dispatcher:
        raise InputError("worker: --dispatcher HOST:PORT is required")
    dispatcher = ds.parse_address(FLAGS.dispatcher, "--dispatcher") if FLAGS.dispatcher else None
    listen.check_here(bind)
    # may start this process again, with the shim (same pid); then checks that it narrows
    listen.preload(bind, notify=lambda line: say(f"{PROG}: note: {line}"))
    say(f"{PROG}: {ds.exposure_warning(role, port, bind)}")
    server, where = _start(role, port, host, dispatcher)
    try:
        on = listen.check_listening(where.port, bind)
    except BaseException:
        stop_within(server, FLAGS.stop_grace)
        raise
    print(where.target if role == "dispatcher" else where.hostport, flush=True)
    on_text = listen.describe(on, where.port)
    if role == "dispatcher":
        say(f"{PROG}: dispatcher listening on {on_text}"
            + (f", journal in {FLAGS.work_dir}" if FLAGS.work_dir else "")
            + f". Workers: python -m modern.service worker --dispatcher {where.hostport}; "
            f"clients: --data_service {where.target}. Ctrl-C or SIGTERM stops it.")
    else:
        assert dispatcher is not None  # a worker requires --dispatcher (checked above)
        say(f"{PROG}: worker listening on {on_text}, registered with the dispatcher at "
            f"{dispatcher.hostport} as {where.hostport}. Ctrl-C or SIGTERM stops it.")
    name = serve_until_signalled()
    say(f"{PROG}: {role} stopping ({name}); waiting up to {FLAGS.stop_grace:g} s for clients "
        f"still reading")
    stop_within(server, FLAGS.stop_grace)
    say(f"{PROG}: {role} stopped")
    return 0


def _start(role: str, port: int, host: str, dispatcher):
    """The server, started (TensorFlow's start-up log hidden unless ``--verbose``), and its
    address as clients reach it."""
    with _startup_log():
        if role == "dispatcher":
            server = ds.start_dispatcher(port, FLAGS.work_dir)
        else:
            server = ds.start_worker(dispatcher, port, host, FLAGS.wait_for_dispatcher)
    return server, ds.bound_address(server, host)


def stop_within(server, seconds: float) -> None:
    """Stop ``server``; if TF's stop has not returned after ``seconds``, end the process at once
    with exit code 1.

    TF's stop lets the requests of clients still reading finish (a client whose iterator is
    alive keeps it waiting, for minutes in our benchmark before it collected its garbage) and
    holds the GIL while it waits, so no Python thread could time it out: the watchdog is
    faulthandler's own C thread.
    """

    with open(os.devnull, "a") as sink:  # the dump is not for users: they were told above
        faulthandler.dump_traceback_later(seconds, exit=True, file=sink)
        try:
            server.stop()
        finally:
            faulthandler.cancel_dump_traceback_later()


def main() -> None:
    cli_main(PROG, _define_flags, _main, usage=USAGE)


if __name__ == "__main__":
    main()
