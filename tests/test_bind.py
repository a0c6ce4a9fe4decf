"""``modern.bind``: a tf.data service server listens on ``--bind`` only, although TensorFlow
always binds every interface. The shim is checked on plain sockets in a child process (no
TensorFlow: the same libc ``bind`` call gRPC makes), and the kernel-table reading on sockets of
this process; ``tests/test_service.py`` starts the real servers with and without it.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from common.errors import InputError, RunFailed
from modern import bind
from tests.conftest import ROOT

#: Binds what TensorFlow's gRPC server binds -- the IPv6 wildcard as a dual-stack socket, and
#: the IPv4 wildcard -- plus a given address, and prints where each ended up.
CHILD = """
import socket, sys
from modern import bind
bind.preload(sys.argv[1])
print("pid", __import__("os").getpid())
six = socket.socket(socket.AF_INET6)
six.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
six.bind(("::", 0))
four = socket.socket()
four.bind(("0.0.0.0", 0))
given = socket.socket()
given.bind(("127.0.0.1", 0))
for s in (six, four, given):
    print(s.getsockname()[0])
"""


def _child(address: str, **env) -> list[str]:
    """Where the child's three sockets ended up; it must have kept its pid (``os.execve``,
    not a process of its own the caller would not know)."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, address], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=str(ROOT), **env))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    words = out.split()
    assert words[:2] == ["pid", str(proc.pid)], out
    return words[2:]


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1", "127.0.0.1"), (" 10.0.0.5 ", "10.0.0.5"), ("0.0.0.0", "0.0.0.0")])
def test_bind_takes_an_ipv4_address(text, expected):
    assert bind.parse_bind(text) == expected


@pytest.mark.parametrize("text", ["", "localhost", "::1", "10.0.0", "127.0.0.1:5050"])
def test_anything_else_is_one_line_naming_it(text):
    with pytest.raises(InputError, match="--bind .*expected an IPv4 address"):
        bind.parse_bind(text)


def test_the_shim_turns_a_wildcard_bind_into_the_address_asked_for(tmp_path):
    assert _child("127.0.0.1", XDG_CACHE_HOME=str(tmp_path)) == [
        "::ffff:127.0.0.1", "127.0.0.1", "127.0.0.1"]
    (shim,) = tmp_path.glob("tf-pipeline-compare/bind_shim-*.so")  # built once, cached
    built = shim.stat().st_mtime_ns
    assert _child("127.0.0.1", XDG_CACHE_HOME=str(tmp_path))[1] == "127.0.0.1"
    assert shim.stat().st_mtime_ns == built
    # every interface: no shim, the wildcard stays
    assert _child("0.0.0.0", XDG_CACHE_HOME=str(tmp_path)) == ["::", "0.0.0.0", "127.0.0.1"]


@pytest.mark.parametrize("compiler", ["none on PATH", "one that fails"])
def test_without_a_c_compiler_the_error_says_what_to_do(tmp_path, compiler):
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path))
    env.pop("CC", None)
    if compiler == "none on PATH":
        env["PATH"] = str(tmp_path)
        needles = ["--bind 127.0.0.1: no C compiler (cc)", "or use --bind 0.0.0.0 and a firewall"]
    else:
        env["CC"] = str(tmp_path / "no-such-cc")
        needles = [f"{tmp_path / 'no-such-cc'}: cannot build bind_shim.c"]
    proc = subprocess.run([sys.executable, "-c", CHILD, "127.0.0.1"], cwd=ROOT, timeout=60,
                          capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and proc.stdout == ""  # stopped before anything was bound
    assert all(n in proc.stderr for n in needles), proc.stderr


def test_listening_reads_the_kernels_table_and_checks_it():
    with socket.socket() as local, socket.socket() as every, \
            socket.socket(socket.AF_INET6) as mapped:
        local.bind(("127.0.0.1", 0))
        every.bind(("0.0.0.0", 0))
        mapped.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        mapped.bind(("::ffff:127.0.0.1", 0))
        ports = [s.getsockname()[1] for s in (local, every, mapped)]
        assert bind.listening(ports[0]) == []  # bound, not listening yet
        for s in (local, every, mapped):
            s.listen()
        assert bind.listening(ports[0]) == ["127.0.0.1"]
        assert bind.listening(ports[1]) == ["0.0.0.0"]
        assert bind.listening(ports[2]) == ["::ffff:127.0.0.1"]
        assert bind.check_listening(ports[2], "127.0.0.1") == ["::ffff:127.0.0.1"]
        assert bind.check_listening(ports[1], "0.0.0.0") == ["0.0.0.0"]
        with pytest.raises(RunFailed, match="listens on 0.0.0.0, not only on 127.0.0.1"):
            bind.check_listening(ports[1], "127.0.0.1")
        assert bind.describe(["::ffff:127.0.0.1"], 5050) == "127.0.0.1:5050 only"
        assert bind.describe(["::"], 5050) == "every interface (IPv4 and IPv6), port 5050"
