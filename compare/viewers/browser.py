"""Headless Chromium driven through the Chrome DevTools protocol, to look at pages as a user would.

Used to check that TensorBoard's profile tab renders our runs and to screenshot it. We talk to
Debian's ``chromium`` over ``--remote-debugging-pipe`` (fd 3 in, fd 4 out, JSON messages ended by
a NUL byte; the transport Playwright itself uses): no port to race for, no websocket library,
no browser download. Every wait is bounded; the browser runs in its own process group with a
fresh profile folder and is killed with that group on exit.
"""
from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from common import atomic, procs
from common.errors import InputError

# Headless, no sandbox (CI runs as root), no GPU. Without the background-networking flags Chromium
# keeps trying to reach Google's hosts, which this machine's closed network refuses.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync")
CHROMIUM_NAMES = ("chromium", "chromium-browser")
MARKER = "COMPARE_BROWSER_PROFILE"  # environment variable naming the browser's profile folder
INSTALL_HINT = "install Debian's chromium (apt-get install chromium) or set CHROMIUM=/path/to/it"


class BrowserError(InputError):
    """Chromium is missing, did not start, died or did not answer in time (one line that names
    the executable and, where there is one, the end of its log)."""


def find_chromium() -> str:
    """The Chromium executable: ``$CHROMIUM`` if set, else ``chromium`` on PATH."""
    exe = os.environ.get("CHROMIUM")
    if exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise BrowserError(f"CHROMIUM={exe}: not an executable file")
        return exe
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise BrowserError(f"chromium not found on PATH: {INSTALL_HINT}")


def _high_fd(fd: int) -> int:
    """A copy of ``fd`` numbered 10 or above (so mapping onto fds 3 and 4 cannot clobber it)."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


class Chromium:
    """One headless Chromium (context manager). ``new_page()`` opens a tab to drive.

    Its fresh ``--user-data-dir`` is made under ``profile_parent`` (default: the temp folder)
    and removed on close; its output goes to ``log_path`` (default: inside that folder)."""

    def __init__(self, executable: str | None = None, width: int = 1400, height: int = 900,
                 timeout: float = 30.0, log_path: str | os.PathLike | None = None,
                 profile_parent: str | os.PathLike | None = None):
        self.executable = executable or find_chromium()
        self.profile_parent = profile_parent
        self.width, self.height, self.timeout = width, height, timeout
        self.log_path = Path(log_path) if log_path else None
        self.pid: int | None = None
        self._profile: str | None = None
        self._last_profile: str | None = None
        self._last_pid: int | None = None
        self._to: int | None = None
        self._from: int | None = None
        self._buf = b""
        self._next_id = 0

    @property
    def profile_dir(self) -> str | None:
        """The running browser's ``--user-data-dir`` (removed on close)."""
        return self._profile

    # -- process -------------------------------------------------------------------------
    def __enter__(self) -> "Chromium":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Start Chromium with a fresh profile folder and wait until the protocol answers."""
        if self.profile_parent:
            os.makedirs(self.profile_parent, exist_ok=True)
        self._profile = self._last_profile = tempfile.mkdtemp(prefix="chromium-profile-",
                                                              dir=self.profile_parent)
        if self.log_path is None:
            self.log_path = Path(self._profile) / "chromium.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        to_r, to_w = map(_high_fd, os.pipe())
        from_r, from_w = map(_high_fd, os.pipe())
        argv = [self.executable, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}",
                "--remote-debugging-pipe", f"--window-size={self.width},{self.height}",
                "--hide-scrollbars", "--mute-audio", "about:blank"]
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 1, str(self.log_path),
                    os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
                   (os.POSIX_SPAWN_DUP2, 1, 2),
                   (os.POSIX_SPAWN_DUP2, to_r, 3),
                   (os.POSIX_SPAWN_DUP2, from_w, 4)]
        # Helpers Chromium forks stay in its process group; those it starts in a session of
        # their own (crashpad handlers) inherit this marker, by which close() finds them.
        env = dict(os.environ, **{MARKER: self._profile})
        try:
            self.pid = self._last_pid = os.posix_spawn(self.executable, argv, env,
                                                       file_actions=actions, setsid=True)
        except OSError as e:
            for fd in (to_r, to_w, from_r, from_w):
                os.close(fd)
            shutil.rmtree(self._profile, ignore_errors=True)
            raise BrowserError(f"{self.executable}: cannot start: {e.strerror or e}") from None
        os.close(to_r)
        os.close(from_w)
        self._to, self._from = to_w, from_r
        try:
            self.send("Browser.getVersion")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Ask Chromium to quit, then kill its process group; remove the profile folder."""
        if self.pid is not None:
            with contextlib.suppress(Exception):
                self.send("Browser.close", timeout=5)
            if not self._wait_exit(5.0):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self._wait_exit(10.0)
            # Helpers (renderer, GPU, zygote) share the group: make sure none outlives us.
            # (A live member keeps the group id from being reused by someone else.)
            self._end_group(self.pid)
            self.pid = None
            if self._profile:
                self._end_marked(self._profile)
        for fd in (self._to, self._from):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to = self._from = None
        if self._profile:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    @staticmethod
    def _end_group(pgid: int) -> None:
        """Kill what is left of the process group and wait (5 s at most) until it is gone: a
        killed process lives on until the kernel has torn it down, longer on a loaded machine."""
        deadline = time.monotonic() + 5.0
        while procs.group_members(pgid) and time.monotonic() < deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            time.sleep(0.05)

    def _end_marked(self, profile: str) -> None:
        """Kill any process that carries this browser's marker and outlived it (seen: the
        crashpad handlers exit with the browser; this is the net should one not)."""
        deadline = time.monotonic() + 5.0
        while True:
            pids = procs.marked(MARKER, profile)
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def leftover_pids(self) -> list[int]:
        """Live processes of the last browser this object started (none after close())."""
        if self._last_pid is None or self._last_profile is None:
            return []
        return sorted(set(procs.group_members(self._last_pid))
                      | set(procs.marked(MARKER, self._last_profile)))

    def _wait_exit(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.pid is not None:
            try:
                pid, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True  # not started, or already reaped

    def _log_tail(self) -> str:
        if self.log_path is None:  # not started
            return ""
        try:
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines()
                     if ln.strip()]
        except OSError:
            return ""
        return f" (log {self.log_path}: {lines[-1].strip()[:200]})" if lines else ""

    # -- protocol ------------------------------------------------------------------------
    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float | None = None) -> dict:
        """Send one DevTools command and wait (bounded) for its answer; return its result."""
        if self._to is None:
            raise BrowserError(f"{self.executable}: not running")
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode("utf-8") + b"\0"
        try:
            while data:
                data = data[os.write(self._to, data):]
        except BrokenPipeError:
            raise BrowserError(f"{self.executable}: exited before {method}"
                               f"{self._log_tail()}") from None
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read(deadline, method)
            if reply.get("id") == msg["id"]:  # anything else is an event: not needed here
                if "error" in reply:
                    raise BrowserError(f"chromium: {method} failed: "
                                       f"{reply['error'].get('message', reply['error'])}")
                return reply.get("result", {})

    def _read(self, deadline: float, waiting_for: str) -> dict:
        assert self._from is not None, "start() opens the pipe"
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"chromium: no answer to {waiting_for} in time"
                                   f"{self._log_tail()}")
            ready, _, _ = select.select([self._from], [], [], left)
            if ready:
                chunk = os.read(self._from, 1 << 20)
                if not chunk:
                    raise BrowserError(f"{self.executable}: exited while waiting for "
                                       f"{waiting_for}{self._log_tail()}")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def new_page(self) -> "Page":
        """Open a new tab of the window size given and attach to it."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.send("Page.enable")
        page.send("Runtime.enable")
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1,
                   "mobile": False})
        return page


class Page:
    """One attached tab: navigate, evaluate JavaScript, poll for a condition, screenshot."""

    def __init__(self, browser: Chromium, session: str):
        self.browser, self.session = browser, session

    def send(self, method: str, params: dict | None = None, timeout: float | None = None) -> dict:
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def navigate(self, url: str) -> None:
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"chromium: cannot load {url}: {result['errorText']}")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (promises are awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"chromium: script failed: {str(text).splitlines()[0]}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 60.0, interval: float = 0.5,
                 what: str = "the page") -> Any:
        """Poll ``expression`` until it is truthy (bounded); return its value.

        On time-out raise BrowserError naming ``what`` and the last value seen."""
        deadline = time.monotonic() + timeout
        value = None
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium: {what} did not appear within {timeout:.0f} s "
                                   f"(last seen: {json.dumps(value)[:200]})")
            time.sleep(interval)

    def screenshot(self, png_path: str | os.PathLike) -> Path:
        """Save what the tab shows now as a PNG (written atomically)."""
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        png_path = Path(png_path)
        atomic.write_bytes(png_path, base64.b64decode(data))
        return png_path
