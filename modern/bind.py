"""Listen on one address: what ``python -m modern.service --bind`` does, since TensorFlow cannot.

TensorFlow 2.21's tf.data service servers always listen on every interface:
``GrpcDataServerBase::Start`` (``tensorflow/core/data/service/server_lib.cc``) binds
``"0.0.0.0:" + port``, and neither ``DispatcherConfig`` nor ``WorkerConfig`` has a listen
address. So a server that is to listen on one IPv4 address (``--bind``, default 127.0.0.1) runs
with a small shim preloaded (``bind_shim.c``, built once with this machine's C compiler into
the user's cache): the wildcard bind TensorFlow asks for becomes a bind to that address.
:func:`check_listening` then reads the kernel's socket table, so a shim that did not take
effect stops the server with an error instead of a false promise.

Linux only (``LD_PRELOAD``, ``/proc/net/tcp``). Elsewhere, or without a C compiler, only
``--bind 0.0.0.0`` (every interface, TensorFlow's own behaviour) can be had, and the error says
so.
"""
from __future__ import annotations

import hashlib
import ipaddress
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import atomic
from common.errors import InputError, RunFailed

#: ``--bind`` for every interface (TensorFlow's own behaviour, no shim).
EVERY_INTERFACE = "0.0.0.0"
#: ``--bind``'s default: this machine only.
DEFAULT_BIND = "127.0.0.1"
#: The environment variable the shim reads the address from.
ENV = "MODERN_SERVICE_BIND"
_SOURCE = Path(__file__).with_name("bind_shim.c")
_COMPILE_TIMEOUT_S = 120.0
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column


def parse_bind(text: str) -> str:
    """``--bind``'s value, checked: an IPv4 address (``0.0.0.0``: every interface)."""
    try:
        return str(ipaddress.IPv4Address((text or "").strip()))
    except ValueError:
        raise InputError(f"--bind {text!r}: expected an IPv4 address of this machine "
                         f"({DEFAULT_BIND}, the default, for this machine only), or "
                         f"{EVERY_INTERFACE} for every interface") from None


def preload(bind: str) -> None:
    """Make sure this process runs with the shim loaded for ``bind``: if it does not yet,
    replace it (``os.execv``, same pid, same arguments) by one that does. Call before
    TensorFlow is imported and before anything is printed. ``0.0.0.0`` needs nothing."""
    if bind == EVERY_INTERFACE:
        return
    if sys.platform != "linux":
        raise InputError(f"--bind {bind}: listening on one address needs Linux here "
                         f"(TensorFlow binds every interface; a preloaded shim narrows it); "
                         f"use --bind {EVERY_INTERFACE} and a firewall (README, 'Who can get "
                         f"in')")
    shim = str(shim_path(bind))
    preloaded = os.environ.get("LD_PRELOAD", "").split()
    if os.environ.get(ENV) == bind and shim in preloaded:
        return
    env = dict(os.environ, LD_PRELOAD=" ".join([shim, *preloaded]), **{ENV: bind})
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def shim_path(bind: str = DEFAULT_BIND) -> Path:
    """The built shim for this machine, built first if need be (an :class:`InputError` naming
    what is missing, and what ``--bind`` would do without it, when it cannot be)."""
    source = _SOURCE.read_bytes()
    key = hashlib.sha256(source + platform.machine().encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = cache / "tf-pipeline-compare" / f"bind_shim-{key}.so"
    if target.is_file():
        return target
    cc = os.environ.get("CC") or next(
        (c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if not cc:
        raise InputError(f"--bind {bind}: no C compiler (cc) to build the small shim that "
                         f"narrows TensorFlow's every-interface bind; install one (e.g. apt-get "
                         f"install gcc), or use --bind {EVERY_INTERFACE} and a firewall "
                         f"(README, 'tf.data service: who can get in')")
    target.parent.mkdir(parents=True, exist_ok=True)
    instead = f"(for --bind {bind}); or use --bind {EVERY_INTERFACE} and a firewall"
    with tempfile.TemporaryDirectory(prefix="bind-shim-") as tmp:
        built = Path(tmp) / "bind_shim.so"
        try:
            proc = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(built),
                                   str(_SOURCE), "-ldl"], capture_output=True, text=True,
                                  timeout=_COMPILE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise InputError(f"{cc}: cannot build {_SOURCE.name} ({e}) {instead}") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise InputError(f"{cc}: cannot build {_SOURCE.name}: {last} {instead}")
        atomic.write_bytes(target, built.read_bytes())
    return target


def listening(port: int) -> list[str]:
    """The addresses this process's network namespace listens on at TCP ``port``
    (``/proc/net/tcp`` and ``tcp6``), e.g. ``["127.0.0.1"]``, ``["::"]``,
    ``["::ffff:127.0.0.1"]``."""
    found = []
    for name, size in (("tcp", 4), ("tcp6", 16)):
        try:
            rows = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state = fields[1], fields[3]
            address, _, hex_port = local.partition(":")
            if state == _LISTEN and int(hex_port, 16) == port:
                found.append(_address(bytes.fromhex(address), size))
    return found


def _address(raw: bytes, size: int) -> str:
    """An address as /proc/net/tcp* prints it: 32-bit words in this machine's byte order."""
    if sys.byteorder == "little":
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, size, 4))
    address = ipaddress.ip_address(raw)
    mapped = getattr(address, "ipv4_mapped", None)
    return f"::ffff:{mapped}" if mapped else str(address)


def describe(found: list[str], port: int) -> str:
    """What :func:`listening` found, for people: ``127.0.0.1:5050 only``, ``every interface
    (IPv4 and IPv6), port 5050``."""
    if not found:
        return f"port {port}"
    if set(found) & {"::", EVERY_INTERFACE}:
        both = "::" in found  # gRPC's dual-stack socket
        return f"every interface ({'IPv4 and IPv6' if both else 'IPv4'}), port {port}"
    shown = dict.fromkeys(a.removeprefix("::ffff:") for a in found)
    return ", ".join(f"{a}:{port}" for a in shown) + " only"


def check_listening(port: int, bind: str) -> list[str]:
    """What the server on ``port`` listens on; a :class:`RunFailed` if that is more than
    ``bind`` asked for (the shim did not take effect)."""
    found = listening(port)
    if bind == EVERY_INTERFACE:
        return found
    allowed = {bind, f"::ffff:{bind}"}
    if not found or set(found) - allowed:
        raise RunFailed(f"--bind {bind}: the server on port {port} listens on "
                        f"{', '.join(found) or 'nothing this process can see'}, not only on "
                        f"{bind} (the preloaded shim did not take effect); stopped. --bind "
                        f"{EVERY_INTERFACE} listens on every interface knowingly")
    return found
