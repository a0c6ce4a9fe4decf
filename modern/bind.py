"""Listen on one address: what ``python -m modern.service --bind`` does, since TensorFlow cannot.

TensorFlow 2.21's tf.data service servers always listen on every interface:
``GrpcDataServerBase::Start`` (``tensorflow/core/data/service/server_lib.cc``) binds
``"0.0.0.0:" + port``, and neither ``DispatcherConfig`` nor ``WorkerConfig`` has a listen
address. So a server that is to listen on one address (``--bind``, default 127.0.0.1; IPv4 or
IPv6) runs with a small shim preloaded (``bind_shim.c``, built once with this machine's C
compiler into the user's cache): the wildcard bind TensorFlow asks for becomes a bind to that
address. In order, before TensorFlow creates its server:

1. :func:`check_here`: the address is one of this machine's (else one line naming it);
2. :func:`shim_path`: the cached shim is the one built here (the SHA-256 recorded at build
   time matches; a truncated or replaced file is built again), and :func:`_check_loads`: the
   dynamic loader loads it (a throwaway process tries);
3. :func:`preload`: the process runs itself again (same pid) with the shim preloaded; the
   shim takes itself out of the environment, so the server's children do not inherit it;
4. :func:`check_narrowing`: in the new process, the loaded shim names the address, and a
   wildcard socket bound (never listening) lands on it.

After the server starts, :func:`check_listening` reads the kernel's socket table as a last
check. Each step that fails stops the server with one line, before it ever listened.

Linux only (``LD_PRELOAD``, ``/proc/net/tcp``). Elsewhere, or without a C compiler, only
``--bind 0.0.0.0`` (every interface, TensorFlow's own behaviour) can be had, and the error says
so.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import ipaddress
import os
import platform
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from common import atomic
from common.errors import InputError, RunFailed

#: ``--bind`` for every interface (TensorFlow's own behaviour, no shim).
EVERY_INTERFACE = "0.0.0.0"
#: ``--bind``'s default: this machine only.
DEFAULT_BIND = "127.0.0.1"
#: The environment variable the shim reads the address from (once, then removes it).
ENV = "MODERN_SERVICE_BIND"
#: Set to the pid when a process runs itself again with the shim (the shim removes it too): a
#: process that finds its own pid here and no shim loaded was not given it by the loader.
EXEC_MARK = "MODERN_SERVICE_BIND_EXEC"
_SOURCE = Path(__file__).with_name("bind_shim.c")
_COMPILE_TIMEOUT_S = 120.0
_LOAD_CHECK_TIMEOUT_S = 60.0
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column
_SIOCGIFADDR = 0x8915
_HOW = (f"use --bind {EVERY_INTERFACE} and a firewall instead (README, 'tf.data service: who "
        f"can get in')")


def parse_bind(text: str) -> str:
    """``--bind``'s value, checked: an IPv4 or IPv6 address (``0.0.0.0`` or ``::``: every
    interface, returned as ``0.0.0.0``; a v4-mapped IPv6 address as its IPv4 form)."""
    try:
        address = ipaddress.ip_address((text or "").strip())
    except ValueError:
        raise InputError(f"--bind {text!r}: expected an IP address of this machine "
                         f"({DEFAULT_BIND}, the default, or ::1 for this machine only; IPv4 or "
                         f"IPv6), or {EVERY_INTERFACE} for every interface") from None
    if address.is_unspecified:
        return EVERY_INTERFACE
    return str(getattr(address, "ipv4_mapped", None) or address)


def is_ipv6(bind: str) -> bool:
    return ":" in bind


def check_here(bind: str) -> None:
    """An :class:`InputError` naming ``bind`` unless a socket can be bound to it here, i.e. it
    is an address of one of this machine's interfaces (the socket never listens)."""
    if bind == EVERY_INTERFACE:
        return
    family = socket.AF_INET6 if is_ipv6(bind) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((bind, 0))
    except OSError as e:
        if e.errno in (errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT):
            raise InputError(f"--bind {bind}: this machine has no IPv6 ({e.strerror})") from None
        if e.errno == errno.EADDRNOTAVAIL or isinstance(e, socket.gaierror):
            raise InputError(f"--bind {bind}: not an address of this machine (no network "
                             f"interface has it); use one of its own "
                             f"({', '.join(local_addresses()) or 'none found'}), or "
                             f"{EVERY_INTERFACE} for every interface") from None
        raise InputError(f"--bind {bind}: cannot listen there ({e.strerror})") from None


def local_addresses() -> list[str]:
    """This machine's addresses: each interface's IPv4 address, then its IPv6 addresses
    (``/proc/net/if_inet6``; link-local ones with their ``%interface``)."""
    found = []
    for _, name in socket.if_nameindex():
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                raw = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:  # no IPv4 address on it
            continue
        found.append(socket.inet_ntoa(raw[20:24]))
    try:
        rows = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        rows = []
    for row in rows:
        fields = row.split()
        address = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
        found.append(f"{address}%{fields[5]}" if address.is_link_local else str(address))
    return list(dict.fromkeys(found))


def preload(bind: str, notify: Callable[[str], None] | None = None) -> None:
    """Make sure this process runs with the shim loaded for ``bind``: if it does not yet,
    replace it (``os.execv``, same pid, same arguments) by one that does; once it does, check
    that wildcard binds land on ``bind`` (:func:`check_narrowing`). Call before TensorFlow is
    imported and before anything is printed. ``0.0.0.0`` needs nothing. ``notify(line)``
    hears of a damaged cached shim being built again."""
    if bind == EVERY_INTERFACE:
        return
    if sys.platform != "linux":
        raise InputError(f"--bind {bind}: listening on one address needs Linux here "
                         f"(TensorFlow binds every interface; a preloaded shim narrows it); "
                         f"{_HOW}")
    ran_again = os.environ.pop(EXEC_MARK, None) == str(os.getpid())
    os.environ.pop(ENV, None)
    active = shim_address()
    if active is not None:
        check_narrowing(bind, active)
        return
    shim = shim_path(bind, notify)
    if ran_again:  # the loader was given the shim and did not load it
        raise RunFailed(f"--bind {bind}: this process was started again with the bind shim "
                        f"{shim} preloaded, and the dynamic loader did not load it; stopped "
                        f"before the server started. {_HOW}")
    preloaded = os.environ.get("LD_PRELOAD", "").replace(":", " ").split()
    env = dict(os.environ, LD_PRELOAD=" ".join([str(shim), *preloaded]),
               **{ENV: bind, EXEC_MARK: str(os.getpid())})
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def shim_address() -> str | None:
    """The address the shim loaded in this process narrows wildcard binds to (as it was
    given); "" when it was given none it could use; None when no shim is loaded."""
    try:
        fn = ctypes.CDLL(None).modern_bind_shim_address
    except AttributeError:
        return None
    fn.argtypes, fn.restype = [ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int
    buf = ctypes.create_string_buffer(128)
    return buf.value.decode() if fn(buf, len(buf)) == 0 else ""


def last_bind_error() -> int:
    """errno of the last bind the loaded shim narrowed and the kernel refused (0: none, or no
    shim loaded)."""
    try:
        fn = ctypes.CDLL(None).modern_bind_shim_last_error
    except AttributeError:
        return 0
    fn.argtypes, fn.restype = [], ctypes.c_int
    return fn()


def check_narrowing(bind: str, active: str | None = None) -> None:
    """A :class:`RunFailed` unless wildcard binds in this process land on ``bind``: the
    loaded shim (``active``: :func:`shim_address`) must name it, and a dual-stack IPv6 socket
    and an IPv4 socket bound to the wildcard (never listening) must land on it, or, for an
    address the socket's family cannot hold, not be bound at all."""
    active = shim_address() if active is None else active
    if active != bind:
        raise RunFailed(f"--bind {bind}: the bind shim loaded in this process narrows to "
                        f"{active or 'no usable address'}, not to {bind}; stopped before the "
                        f"server started")
    for family, wildcard in ((socket.AF_INET6, "::"), (socket.AF_INET, EVERY_INTERFACE)):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:  # no IPv6 here: gRPC makes no such socket either
            continue
        with s:
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # as gRPC does
            try:
                s.bind((wildcard, 0))
            except OSError:
                continue  # refused rather than bound wider (an IPv6 --bind, an IPv4 socket)
            landed = s.getsockname()[0]
        if landed not in _allowed(bind):
            raise RunFailed(f"--bind {bind}: a wildcard bind in this process landed on "
                            f"{landed}, not on {bind} (the bind shim is loaded but not in "
                            f"effect); stopped before the server started. {_HOW}")


def _allowed(bind: str) -> set[str]:
    """What a socket narrowed to ``bind`` reports as its address (getsockname or
    /proc/net/tcp*)."""
    if is_ipv6(bind):
        return {bind, bind.partition("%")[0]}
    return {bind, f"::ffff:{bind}"}


def shim_path(bind: str = DEFAULT_BIND, notify: Callable[[str], None] | None = None) -> Path:
    """The built shim for this machine, checked: the file in the cache is the one built here
    (its SHA-256 recorded at build time matches) and the dynamic loader loads it. A file that
    is missing, truncated or replaced is built again (``notify`` hears why, when a recorded
    build was damaged). An :class:`InputError` naming what is missing, and what ``--bind``
    would do without it, when it cannot be built; a :class:`RunFailed` when the loader will
    not load it."""
    key = hashlib.sha256(_SOURCE.read_bytes() + platform.machine().encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = cache / "tf-pipeline-compare" / f"bind_shim-{key}.so"
    damage = _damage(target)
    if damage:
        if damage != "never built" and notify:
            notify(f"the cached bind shim {target} {damage}; building it again")
        _build(target, bind)
    _check_loads(target, bind)
    return target


def _record(target: Path) -> Path:
    """Where the SHA-256 of the built shim is recorded."""
    return target.with_name(target.name + ".sha256")


def _damage(target: Path) -> str | None:
    """Why the cached shim at ``target`` cannot be used as it is (None: it can)."""
    try:
        data = target.read_bytes()
        recorded = _record(target).read_text().split()
    except OSError:
        return "never built"
    if not recorded:
        return "has an empty build record"
    if hashlib.sha256(data).hexdigest() == recorded[0]:
        return None
    what = "is not an ELF shared object" if data[:4] != b"\x7fELF" else \
        "differs from what was built"
    return f"{what} ({len(data):,} bytes; its SHA-256 is not the one recorded at build)"


def compiler() -> str | None:
    """The C compiler the shim is built with: ``$CC``, else ``cc``, ``gcc`` or ``clang`` on
    PATH; None when there is none."""
    return os.environ.get("CC") or next(
        (c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)


def _build(target: Path, bind: str) -> None:
    """Compile the shim into ``target`` and record its SHA-256 beside it (both atomically)."""
    cc = compiler()
    if not cc:
        raise InputError(f"--bind {bind}: no C compiler (cc) to build the small shim that "
                         f"narrows TensorFlow's every-interface bind; install one (e.g. apt-get "
                         f"install gcc), or use --bind {EVERY_INTERFACE} and a firewall "
                         f"(README, 'tf.data service: who can get in')")
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
        data = built.read_bytes()
    atomic.write_bytes(target, data)
    atomic.write_text(_record(target), hashlib.sha256(data).hexdigest() + "\n")


#: What the throwaway process of :func:`_check_loads` runs: exit 0 if the shim is loaded.
_LOADED = ("import ctypes, sys; "
           "sys.exit(0 if hasattr(ctypes.CDLL(None), 'modern_bind_shim_address') else 3)")


def _check_loads(shim: Path, bind: str) -> None:
    """A :class:`RunFailed` with the loader's own reason unless a throwaway process given
    ``shim`` in ``LD_PRELOAD`` has it loaded (a cache on a ``noexec`` mount, a file the
    loader refuses): the server is never started on a preload that would be ignored."""
    env = dict(os.environ, LD_PRELOAD=str(shim), **{ENV: bind})
    try:
        proc = subprocess.run([sys.executable, "-S", "-c", _LOADED], env=env, text=True,
                              capture_output=True, timeout=_LOAD_CHECK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RunFailed(f"--bind {bind}: cannot try the bind shim {shim} ({e})") from None
    if proc.returncode != 0:
        said = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        why = said[-1].removeprefix("ERROR: ld.so: ").removesuffix(": ignored.") if said \
            else f"not loaded (exit {proc.returncode})"
        raise RunFailed(f"--bind {bind}: the dynamic loader does not load the bind shim: "
                        f"{why}; stopped before the server started. Its cache {shim.parent} "
                        f"must be on a file system that allows programs (XDG_CACHE_HOME moves "
                        f"it; removing it builds the shim again), or {_HOW}")


def listening(port: int) -> list[str]:
    """The addresses this process's network namespace listens on at TCP ``port``
    (``/proc/net/tcp`` and ``tcp6``), e.g. ``["127.0.0.1"]``, ``["::"]``,
    ``["::ffff:127.0.0.1"]``, ``["::1"]``."""
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
    """What :func:`listening` found, for people: ``127.0.0.1:5050 only``, ``[::1]:5050 only``,
    ``every interface (IPv4 and IPv6), port 5050``."""
    if not found:
        return f"port {port}"
    if set(found) & {"::", EVERY_INTERFACE}:
        both = "::" in found  # gRPC's dual-stack socket
        return f"every interface ({'IPv4 and IPv6' if both else 'IPv4'}), port {port}"
    shown = dict.fromkeys(a.removeprefix("::ffff:") for a in found)
    return ", ".join(f"[{a}]:{port}" if is_ipv6(a) else f"{a}:{port}" for a in shown) + " only"


def check_listening(port: int, bind: str) -> list[str]:
    """What the server on ``port`` listens on; a :class:`RunFailed` if that is more than
    ``bind`` asked for (the shim did not take effect)."""
    found = listening(port)
    if bind == EVERY_INTERFACE:
        return found
    if not found or set(found) - _allowed(bind):
        raise RunFailed(f"--bind {bind}: the server on port {port} listens on "
                        f"{', '.join(found) or 'nothing this process can see'}, not only on "
                        f"{bind} (the preloaded shim did not take effect); stopped. --bind "
                        f"{EVERY_INTERFACE} listens on every interface knowingly")
    return found


def bind_failure(port: int) -> str | None:
    """Why a server could not listen on port ``port``, in a few words, when the shim loaded
    in this process saw its narrowed bind fail (None when it did not, or none is loaded)."""
    code, bind = last_bind_error(), shim_address()
    if not code or not bind:
        return None
    where = f"[{bind}]:{port}" if is_ipv6(bind) else f"{bind}:{port}"
    if code == errno.EADDRINUSE:
        return f"{where} is in use by another process"
    if code == errno.EADDRNOTAVAIL:
        return f"{bind} is not an address of this machine"
    if code in (errno.EACCES, errno.EPERM):
        return f"not allowed to listen on {where} (ports below 1024 need root)"
    return f"{where}: {os.strerror(code)}"
