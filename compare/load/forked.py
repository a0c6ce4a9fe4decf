"""Run one function in a forked child while this process goes on, and collect its result.

Used by the trace loader to parse the second half of a big trace on the second core (see
:func:`compare.load.json_trace._add_in_halves`). The child is a ``fork`` of this process, so it reads
the parent's data (a 150 MB buffer) without copying it; it sends back its result pickled over
a pipe and leaves with ``os._exit`` (no atexit handlers, no flushing of the parent's files).

Whatever goes wrong in the child (an exception, a signal, a hang past the deadline) makes
:meth:`Forked.result` return ``None``; the caller then does the work itself. The child is
always reaped: :meth:`Forked.close` kills it if it is still running.
"""
from __future__ import annotations

import os
import pickle
import select
import signal
import time
from typing import Any, Callable


class Forked:
    """A running child computing ``fn()``; see :func:`start`."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid: int | None = pid
        self.fd: int | None = fd

    def result(self, timeout_s: float) -> Any | None:
        """The child's return value, or None if it failed, was killed or took longer than
        ``timeout_s`` seconds from now."""
        data = bytearray()
        if self.fd is None:  # closed: collected already
            return None
        fd = self.fd
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    return None
                part = os.read(fd, 1 << 20)
                if not part:
                    break
                data += part
            if self._reap() != 0:
                return None
            return pickle.loads(data)
        except Exception:  # a damaged payload is a failed child, never the caller's error
            return None
        finally:
            self.close()

    def _reap(self) -> int | None:
        if self.pid is None:
            return None
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        return os.waitstatus_to_exitcode(status)

    def close(self) -> None:
        """Stop the child if it still runs, reap it, close the pipe (idempotent)."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._reap()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def start(fn: Callable[[], Any]) -> Forked | None:
    """Fork a child that computes ``fn()`` and pipes back the pickled result; None where this
    platform cannot fork or the fork fails (the caller does the work itself)."""
    if not hasattr(os, "fork"):
        return None
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(r)
            # Ctrl-C reaches the whole process group: the child just dies, the parent reports
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            payload = pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(payload)
            while view:
                view = view[os.write(w, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return Forked(pid, r)
