"""``modern.bind``: a tf.data service server listens on ``--bind`` only, although TensorFlow
always binds every interface. The shim is checked on plain sockets in a child process (no
TensorFlow: the same libc ``bind`` call gRPC makes), the kernel-table reading on sockets of
this process; ``tests/test_service.py`` starts the real servers with and without it, on
127.0.0.1, ::1 and with a damaged or ineffective shim.

Each fault ends in one line, and nothing is bound before the shim is known to narrow: the
child prints what it bound only after :func:`modern.bind.preload` returned.
"""
from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from common.errors import InputError, RunFailed
from modern import bind
from tests.conftest import ROOT

#: Binds what TensorFlow's gRPC server binds -- the IPv6 wildcard as a dual-stack socket, and
#: the IPv4 wildcard -- plus a given address, and prints where each ended up ("refused" when
#: the bind failed); then what a child it starts finds in its environment.
CHILD = """
import os, socket, subprocess, sys
from common.errors import run_cli
from modern import bind

def main(argv):
    bind.preload(argv[0], notify=lambda line: print("note:", line, file=sys.stderr))
    print("pid", os.getpid())
    six = socket.socket(socket.AF_INET6)
    six.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    four = socket.socket()
    given = socket.socket()
    for s, where in ((six, "::"), (four, "0.0.0.0"), (given, "127.0.0.1")):
        try:
            s.bind((where, 0))
            print(s.getsockname()[0])
        except OSError:
            print("refused")
    env = subprocess.run([sys.executable, "-c", "import os; print(repr(dict(os.environ)))"],
                         capture_output=True, text=True).stdout
    seen = eval(env)
    print("child-env", seen.get(bind.ENV, "-"), seen.get(bind.EXEC_MARK, "-"),
          seen.get("LD_PRELOAD", "-").replace(" ", ","))

sys.exit(run_cli(main, sys.argv[1:], "child"))
"""


def _run_child(address: str, cache: Path, **env) -> subprocess.CompletedProcess:
    """The child, run to its end; ``pid`` added (it must keep it)."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, address], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(ROOT),
                                     XDG_CACHE_HOME=str(cache), **env))
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    done.pid = proc.pid  # type: ignore[attr-defined]
    return done


def _child(address: str, cache: Path, **env) -> tuple[list[str], list[str], str]:
    """(where the child's three sockets ended up, what its own child found in its
    environment, its stderr); it must have kept its pid (``os.execve``, not a process of its
    own the caller would not know)."""
    proc = _run_child(address, cache, **env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    assert lines[0] == f"pid {proc.pid}", proc.stdout
    return lines[1:4], lines[4].split()[1:], proc.stderr


def _shim(cache: Path) -> Path:
    (shim,) = cache.glob("tf-pipeline-compare/bind_shim-*.so")
    return shim


def _one_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """One line on stderr, naming the cause; nothing bound (stdout empty)."""
    assert proc.stdout == "", proc.stdout  # stopped before any socket was bound
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("child: error: --bind "), proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1", "127.0.0.1"), (" 10.0.0.5 ", "10.0.0.5"), ("0.0.0.0", "0.0.0.0"),
    ("::1", "::1"), ("fd00::2", "fd00::2"), ("::", "0.0.0.0"), ("::ffff:127.0.0.1", "127.0.0.1"),
    ("fe80::1%eth0", "fe80::1%eth0")])
def test_bind_takes_an_ipv4_or_ipv6_address(text, expected):
    assert bind.parse_bind(text) == expected


@pytest.mark.parametrize("text", ["", "localhost", "10.0.0", "127.0.0.1:5050", "[::1]", "::1:x"])
def test_anything_else_is_one_line_naming_it(text):
    with pytest.raises(InputError, match="--bind .*expected an IP address of this machine"):
        bind.parse_bind(text)


def has_ipv6_loopback() -> bool:
    """This machine has ``::1`` (IPv6 can be turned off, or lo given no IPv6 address)."""
    try:
        bind.check_here("::1")
    except InputError:
        return False
    return True


NO_IPV6 = pytest.mark.skipif(not has_ipv6_loopback(), reason="this machine has no IPv6 "
                                                             "loopback (::1)")


def _not_here(candidates: tuple[str, ...]) -> str:
    """The first of ``candidates`` (documentation prefixes) no interface of this machine has."""
    here = set(bind.local_addresses())
    return next(a for a in candidates if a not in here)


@pytest.mark.parametrize("candidates", [("198.51.100.123", "203.0.113.45"),
                                        ("2001:db8::123", "2001:db8::456")])
def test_an_address_not_on_this_machine_is_named_as_the_cause(candidates):
    address = _not_here(candidates)
    with pytest.raises(InputError) as e:
        bind.check_here(address)
    text = str(e.value)
    assert text.startswith(f"--bind {address}: not an address of this machine (no network "
                           f"interface has it); use one of its own ("), text
    assert "127.0.0.1" in text and "in use" not in text
    bind.check_here("127.0.0.1")
    bind.check_here("0.0.0.0")


def test_this_machines_addresses_are_listed():
    found = bind.local_addresses()
    assert "127.0.0.1" in found and ("::1" in found) == has_ipv6_loopback(), found
    assert all(bind.parse_bind(a) == a for a in found), found


@pytest.mark.needs("cc")
def test_the_shim_turns_a_wildcard_bind_into_the_ipv4_address_asked_for(tmp_path):
    bound, child_env, err = _child("127.0.0.1", tmp_path)
    assert bound == ["::ffff:127.0.0.1", "127.0.0.1", "127.0.0.1"]
    assert err == ""
    shim = _shim(tmp_path)  # built once, cached, its hash recorded
    record = shim.with_name(shim.name + ".sha256")
    assert record.read_text().split()[0] == hashlib.sha256(shim.read_bytes()).hexdigest()
    built = shim.stat().st_mtime_ns
    assert _child("127.0.0.1", tmp_path)[0][1] == "127.0.0.1"
    assert shim.stat().st_mtime_ns == built
    # every interface: no shim, the wildcard stays
    assert _child("0.0.0.0", tmp_path)[0] == ["::", "0.0.0.0", "127.0.0.1"]


@NO_IPV6
@pytest.mark.needs("cc")
def test_the_shim_turns_a_wildcard_bind_into_the_ipv6_address_asked_for(tmp_path):
    bound, _, _ = _child("::1", tmp_path)
    # the IPv4 wildcard cannot be had on ::1: refused, never bound wider
    assert bound == ["::1", "refused", "127.0.0.1"]


@pytest.mark.needs("cc")
def test_what_the_server_starts_inherits_no_shim(tmp_path):
    """The shim reads its address once and takes itself out of the environment: a child of
    the server gets neither the bind variables nor the preload, and keeps the user's own."""
    _, child_env, _ = _child("127.0.0.1", tmp_path, LD_PRELOAD="libm.so.6")
    assert child_env == ["-", "-", "libm.so.6"]
    _, child_env, _ = _child("127.0.0.1", tmp_path)
    assert child_env == ["-", "-", "-"]


def _corrupt(shim: Path, how: str) -> None:
    data = shim.read_bytes()
    if how == "truncated":  # the issue's `head -c 3000`: ld.so mapped it and died of SIGBUS
        shim.write_bytes(data[:3000])
    elif how == "not ELF":  # ld.so ignored the preload and the server bound every interface
        shim.write_bytes(b"#!/bin/sh\necho not a shared object\n")
    else:  # another valid shared object: a shim from elsewhere, or an old build
        shim.write_bytes(data.replace(b"MODERN_SERVICE_BIND", b"MODERN_SERVICE_BIXD"))


@pytest.mark.parametrize("how, why", [
    ("truncated", "differs from what was built (3,000 bytes"),
    ("not ELF", "is not an ELF shared object"),
    ("replaced", "differs from what was built")])
@pytest.mark.needs("cc")
def test_a_damaged_cached_shim_is_built_again_before_use(tmp_path, how, why):
    _child("127.0.0.1", tmp_path)
    shim = _shim(tmp_path)
    good = shim.read_bytes()
    _corrupt(shim, how)
    bound, _, err = _child("127.0.0.1", tmp_path)
    assert bound == ["::ffff:127.0.0.1", "127.0.0.1", "127.0.0.1"]
    (line,) = err.splitlines()
    assert line.startswith(f"note: the cached bind shim {shim} {why}"), line
    assert line.endswith("its SHA-256 is not the one recorded at build); building it again")
    assert shim.read_bytes() == good


@pytest.mark.needs("cc")
def test_a_shim_the_loader_will_not_load_stops_before_anything_is_bound(tmp_path):
    """A cache whose record matches a file ld.so refuses (what a noexec mount does to a good
    one): a throwaway process tries the preload first, and its reason is the one line."""
    _child("127.0.0.1", tmp_path)
    shim = _shim(tmp_path)
    shim.write_bytes(b"not a shared object at all\n" * 100)
    shim.with_name(shim.name + ".sha256").write_text(
        hashlib.sha256(shim.read_bytes()).hexdigest() + "\n")
    proc = _run_child("127.0.0.1", tmp_path)
    assert proc.returncode == 1
    _one_error(proc, "the dynamic loader does not load the bind shim:",
               f"object '{shim}' from LD_PRELOAD cannot be preloaded (invalid ELF header)",
               "stopped before the server started")


IMPOSTOR = """
#include <string.h>
int modern_bind_shim_address(char *out, unsigned long n) {
    if (n < 16) return -1;
    strcpy(out, "127.0.0.1");
    return 0;
}
"""


@pytest.mark.needs("cc")
def test_a_shim_loaded_but_not_in_effect_stops_before_anything_is_bound(tmp_path):
    """A shared object that loads and names the address but does not narrow binds (no
    ``bind`` of its own): the first wildcard bind of the check lands on ``::`` and the
    process stops, never having listened."""
    _child("127.0.0.1", tmp_path)
    shim = _shim(tmp_path)
    source = tmp_path / "impostor.c"
    source.write_text(IMPOSTOR)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(shim), str(source)], check=True)
    shim.with_name(shim.name + ".sha256").write_text(
        hashlib.sha256(shim.read_bytes()).hexdigest() + "\n")
    proc = _run_child("127.0.0.1", tmp_path)
    assert proc.returncode == 1
    _one_error(proc, "a wildcard bind in this process landed on ::, not on 127.0.0.1",
               "stopped before the server started")


@pytest.mark.parametrize("compiler", ["none on PATH", "one that fails"])
def test_without_a_c_compiler_the_error_says_what_to_do(tmp_path, compiler):
    env = {"PATH": os.environ["PATH"]}
    if compiler == "none on PATH":
        env["PATH"] = str(tmp_path)
        needles = ["--bind 127.0.0.1: no C compiler (cc)", "or use --bind 0.0.0.0 and a firewall"]
    else:
        env["CC"] = str(tmp_path / "no-such-cc")
        needles = [f"{tmp_path / 'no-such-cc'}: cannot build bind_shim.c"]
    clean = {k: v for k, v in os.environ.items() if k != "CC"}
    proc = subprocess.run([sys.executable, "-c", CHILD, "127.0.0.1"], cwd=ROOT, timeout=60,
                          capture_output=True, text=True,
                          env=dict(clean, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path),
                                   **env))
    assert proc.returncode == 2 and proc.stdout == ""  # stopped before anything was bound
    assert all(n in proc.stderr for n in needles), proc.stderr


def test_listening_reads_the_kernels_table_and_checks_it():
    with socket.socket() as local, socket.socket() as every, \
            socket.socket(socket.AF_INET6) as mapped, socket.socket(socket.AF_INET6) as six:
        local.bind(("127.0.0.1", 0))
        every.bind(("0.0.0.0", 0))
        mapped.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        mapped.bind(("::ffff:127.0.0.1", 0))
        six.bind(("::1", 0))
        ports = [s.getsockname()[1] for s in (local, every, mapped, six)]
        assert bind.listening(ports[0]) == []  # bound, not listening yet
        for s in (local, every, mapped, six):
            s.listen()
        assert bind.listening(ports[0]) == ["127.0.0.1"]
        assert bind.listening(ports[1]) == ["0.0.0.0"]
        assert bind.listening(ports[2]) == ["::ffff:127.0.0.1"]
        assert bind.listening(ports[3]) == ["::1"]
        assert bind.check_listening(ports[2], "127.0.0.1") == ["::ffff:127.0.0.1"]
        assert bind.check_listening(ports[1], "0.0.0.0") == ["0.0.0.0"]
        assert bind.check_listening(ports[3], "::1") == ["::1"]
        with pytest.raises(RunFailed, match="listens on 0.0.0.0, not only on 127.0.0.1"):
            bind.check_listening(ports[1], "127.0.0.1")
        with pytest.raises(RunFailed, match="listens on ::ffff:127.0.0.1, not only on ::1"):
            bind.check_listening(ports[2], "::1")
        assert bind.describe(["::ffff:127.0.0.1"], 5050) == "127.0.0.1:5050 only"
        assert bind.describe(["::1"], 5050) == "[::1]:5050 only"
        assert bind.describe(["::"], 5050) == "every interface (IPv4 and IPv6), port 5050"
