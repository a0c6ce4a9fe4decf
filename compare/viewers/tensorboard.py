"""TensorBoard over a run folder: the command a user types, a server we can start and stop, the
profile plugin's HTTP API, a screenshot of the profile tab, and how to open the merged trace.

A run folder written by ``compare.run`` is a TensorBoard logdir holding one TensorBoard run per
pipeline::

    DIR/legacy/plugins/profile/<session>/<host>.xplane.pb     (legacy.runner.run_legacy)
    DIR/modern/plugins/profile/<session>/<host>.xplane.pb     (modern.runner.run_modern)

The profile plugin (tensorboard-plugin-profile / xprof 2.24) finds every ``plugins/profile``
folder under the logdir and names each profile session ``<TensorBoard run>/<session>``, where
the session is the folder the TensorFlow profiler named after the time of the profile
(``YYYY_MM_DD_HH_MM_SS``), e.g. ``legacy/2026_11_29_15_48_29`` and
``modern/2026_11_29_16_12_04``; a session directly under ``DIR/plugins/profile`` would be named
by its timestamp alone. The plugin sorts the names in reverse, so ``modern/...`` comes before
``legacy/...`` in the Sessions list and is the one the profile tab opens first.
:func:`profile_runs` predicts these names from the folder, and the tests hold the plugin to it.

The profile plugin only shows ``.xplane.pb`` sessions: a Chrome-trace JSON such as
``merged_trace.json.gz`` cannot be opened in TensorBoard 2.21, so :data:`MERGED_TRACE_HOWTO`
says how to open it in Perfetto or chrome://tracing instead.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from importlib import metadata
from pathlib import Path
from typing import Any

from common import procs
from common.errors import InputError
from compare.viewers.browser import BrowserError, Chromium

PLUGIN = "profile"
#: Our own tab's plugin (compare/tab/plugin.py): its name in URLs and TensorBoard's listing.
TAB_PLUGIN = "pipeline_compare"
STARTUP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 120.0

#: How to open merged_trace.json.gz, for report.md. It holds for a merged trace that names
#: every slice by its stage or overhead category and keeps the op in the slice's args: Perfetto
#: colours a slice by a hash of its name and ignores ``cname``, chrome://tracing honours
#: ``cname`` but otherwise also hashes the name, so equal names are what gives equal colours
#: in both viewers. Perfetto also needs the slices of one lane (pid, tid) to nest, never to
#: overlap partially.
MERGED_TRACE_HOWTO = """\
TensorBoard's profile tab shows only the profiler's own `.xplane.pb` sessions (the `legacy/...`
and `modern/...` runs); it cannot open a Chrome-trace JSON file, so open `merged_trace.json.gz`
in one of these (both read the gzipped file as it is):

- Perfetto UI: https://ui.perfetto.dev, then "Open trace file" in the left bar, and choose
  `merged_trace.json.gz`. The file is read in your browser, not uploaded.
- chrome://tracing, in a Chrome or Chromium that still has it: type it into the address bar,
  press "Load", and choose the file. (Recent builds dropped it: Debian's Chromium 156 fails to
  load chrome://tracing; use Perfetto there.)

The two runs are two processes of the one trace, each with its own lanes (threads), on one
time axis. Each slice is named by its stage (`decode`, `crop`, `saturation`, ...) or overhead
category (`xla_compile`, `input_wait`, ...), and both viewers colour a slice by its name: equal
stages have equal colours in both runs, so a colour in one process finds its counterpart in the
other. Click a slice to see the TensorFlow op or XLA kernel it came from (in its arguments).
W/S zoom, A/D pan."""


def command(logdir: str | os.PathLike) -> str:
    """The exact shell command that shows ``logdir`` in TensorBoard (``compare.run`` prints it)."""
    return f"tensorboard --logdir {shlex.quote(str(logdir))}"


def profile_runs(logdir: str | os.PathLike) -> list[str]:
    """The session names the profile plugin lists for ``logdir``, in its order.

    Every ``<run>/plugins/profile/<session>/`` holding an ``.xplane.pb`` becomes
    ``<run>/<session>`` (``<session>`` for the logdir itself), sorted in reverse as the plugin
    sorts them."""
    root = Path(logdir)
    names = set()
    for xplane in root.glob("**/plugins/profile/*/*.xplane.pb"):
        session = xplane.parent
        run = session.parent.parent.parent.relative_to(root).as_posix()
        names.add(session.name if run == "." else f"{run}/{session.name}")
    return sorted(names, reverse=True)


def open_instructions(logdir: str | os.PathLike) -> str:
    """Markdown for report.md: the TensorBoard command, the session names it will list, and
    :data:`MERGED_TRACE_HOWTO`."""
    runs = profile_runs(logdir)
    listed = ", ".join(f"`{r}`" for r in runs) if runs else "(no profile sessions found)"
    return (f"Open both runs in TensorBoard's profile tab:\n\n```\n{command(logdir)}\n```\n\n"
            f"then open the address it prints (http://localhost:6006/ unless that port is "
            f"taken), the PROFILE tab, and pick a session under \"Sessions\": {listed}. "
            f"Each has Overview Page, Trace Viewer, Input Pipeline Analyzer and Framework Op "
            f"Stats under \"Tools\".\n\n{MERGED_TRACE_HOWTO}\n")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])[-400:]


def tab_installed() -> bool:
    """Whether the installed distribution declares the Pipeline compare tab's entry point, so
    that plain ``tensorboard`` shows the tab (not so in a source checkout on PYTHONPATH)."""
    return any(ep.name == TAB_PLUGIN
               for ep in metadata.entry_points(group="tensorboard_plugins"))


def _launcher() -> str:
    """``tensorboard.main``, which finds our tab through its entry point when this package is
    installed; else ``compare.tab.launch``, which adds it (a source checkout on PYTHONPATH)."""
    return "tensorboard.main" if tab_installed() else "compare.tab.launch"


class TensorBoardError(InputError):
    """TensorBoard did not start, died, or answered an API call with an error (one line naming
    the log file)."""


class TensorBoard:
    """A real ``tensorboard --logdir LOGDIR`` on 127.0.0.1 and a free port (context manager).

    It runs in its own process group (TensorBoard may start a data-server child), with its
    output in ``log_path``; :meth:`stop` ends the whole group with bounded waits, and
    :meth:`leftover_pids` tells whether anything of it survived."""

    def __init__(self, logdir: str | os.PathLike, log_path: str | os.PathLike | None = None,
                 startup_timeout: float = STARTUP_TIMEOUT_S):
        self.logdir = Path(logdir).resolve()
        if not self.logdir.is_dir():
            raise TensorBoardError(f"{logdir}: not a folder")
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self.stopped_pgid: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "TensorBoard":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Start TensorBoard and wait (bounded) until the profile plugin answers."""
        if self.log_path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tensorboard-")
            self.log_path = Path(self._tmp.name) / "tensorboard.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):  # another process may take the free port before we bind it
            self.port = free_port()
            argv = [sys.executable, "-m", _launcher(), "--logdir", str(self.logdir),
                    "--host", "127.0.0.1", "--port", str(self.port)]
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
            try:
                self._wait_ready()
                return
            except TensorBoardError:
                self._kill()  # keeps the log, which the error names
                if attempt == 2 or "could not bind" not in _tail(self.log_path, 20).lower():
                    raise

    def _wait_ready(self) -> None:
        assert self.proc is not None and self.log_path is not None, "start() sets them"
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self.proc.poll() is not None:
                raise TensorBoardError(f"tensorboard exited with code {self.proc.returncode} "
                                       f"(log {self.log_path}: {_tail(self.log_path)})")
            try:
                listing = self.get_json("/data/plugins_listing", timeout=5)
                if PLUGIN in listing:
                    return
                raise TensorBoardError(f"tensorboard at {self.url} has no '{PLUGIN}' plugin: "
                                       f"install tensorboard-plugin-profile")
            except (urllib.error.URLError, ConnectionError, socket.timeout, OSError):
                pass
            if time.monotonic() > deadline:
                raise TensorBoardError(f"tensorboard did not answer on {self.url} within "
                                       f"{self.startup_timeout:.0f} s (log {self.log_path}: "
                                       f"{_tail(self.log_path)})")
            time.sleep(0.5)

    def stop(self) -> None:
        """End the server (see :meth:`_kill`) and remove the log if we chose where it went."""
        self._kill()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
            self.log_path = None

    def _kill(self) -> None:
        """SIGTERM the process group, wait (bounded), then SIGKILL whatever is left of it."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=wait)
            if self.proc.returncode is not None and not procs.group_members(pgid):
                break
        # The leader is gone; a child that ignored SIGTERM must not outlive it. (A live member
        # keeps the group id from being reused, so this cannot hit someone else's group.)
        if procs.group_members(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        self.stopped_pgid = pgid
        self.proc = None

    def leftover_pids(self) -> list[int]:
        """Processes still alive from the last server this object stopped (should be none)."""
        return procs.group_members(self.stopped_pgid) if self.stopped_pgid else []

    # -- HTTP ---------------------------------------------------------------------------
    def get(self, path: str, params: dict | None = None, timeout: float = REQUEST_TIMEOUT_S
            ) -> bytes:
        """GET ``path`` (with query ``params``); the body, un-gzipped. HTTP errors raise
        TensorBoardError with the server's one-line message."""
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                body = resp.read()
                if resp.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                return body
        except urllib.error.HTTPError as e:
            detail = e.read()
            if e.headers.get("Content-Encoding") == "gzip":
                detail = gzip.decompress(detail)
            line = detail.decode("utf-8", "replace").strip().splitlines()[:1]
            raise TensorBoardError(f"GET {url}: HTTP {e.code}: {line[0] if line else e.reason}"
                                   ) from None

    def get_json(self, path: str, params: dict | None = None,
                 timeout: float = REQUEST_TIMEOUT_S) -> Any:
        return json.loads(self.get(path, params, timeout))

    def runs(self) -> list[str]:
        """``/data/plugin/profile/runs``: the profile sessions, as named in the Sessions list."""
        return self.get_json(f"/data/plugin/{PLUGIN}/runs")

    def tools(self, run: str) -> list[str]:
        """``/data/plugin/profile/run_tools?run=``: the tools offered for one session."""
        return self.get_json(f"/data/plugin/{PLUGIN}/run_tools", {"run": run})

    def hosts(self, run: str, tool: str) -> list[str]:
        """``/data/plugin/profile/hosts?run=&tag=``: the host names of one session's profile."""
        return [h["hostname"] for h in
                self.get_json(f"/data/plugin/{PLUGIN}/hosts", {"run": run, "tag": tool})]

    def tool_data(self, run: str, tool: str, host: str) -> Any:
        """``/data/plugin/profile/data?run=&tag=&host=``: what the tool's page shows, as JSON
        (the overview and input-pipeline pages are lists of Google-Charts DataTables; the trace
        viewer is a Chrome trace with ``traceEvents``)."""
        return self.get_json(f"/data/plugin/{PLUGIN}/data", {"run": run, "tag": tool,
                                                             "host": host})


# -- the profile tab in a real browser ---------------------------------------------------------
# The profile plugin's page lives in an iframe (/data/plugin_entry.html?name=profile, same
# origin). Its side bar has one ".item-container" per selector: a "Sessions (N)" heading and a
# mat-select showing the chosen session; the other sessions appear as mat-options in an overlay
# once the select is clicked.
_PROFILE_FRAME = "document.querySelector('iframe[src*=\"name=profile\"]')"
_SESSIONS_JS = """(() => {
  const frame = %s;
  const doc = frame && frame.contentDocument;
  if (!doc || !doc.body) return null;
  for (const box of doc.querySelectorAll('.item-container')) {
    const m = /Sessions \\((\\d+)\\)/.exec(box.innerText);
    const select = box.querySelector('mat-select');
    if (!m || !select) continue;
    const f = frame.getBoundingClientRect(), r = select.getBoundingClientRect();
    return {count: +m[1], selected: select.innerText.trim(),
            rendered: doc.body.innerText.includes('Performance Summary'),
            x: f.left + r.left + r.width / 2, y: f.top + r.top + r.height / 2};
  }
  return null;
})()""" % _PROFILE_FRAME
_OPTIONS_JS = """(() => {
  const doc = %s.contentDocument;
  const options = [...doc.querySelectorAll('mat-option')];
  // The list fades and grows in: report it only once it has settled (for the screenshot).
  for (let e = options[0]; e && e !== doc.body; e = e.parentElement) {
    const style = getComputedStyle(e);
    if (style.opacity !== '1' || style.transform !== 'none') return [];
  }
  return options.map(o => o.innerText.trim()).filter(t => t);
})()""" % _PROFILE_FRAME


def show_sessions(page, base_url: str, timeout: float = 90.0) -> list[str]:
    """Load TensorBoard's profile tab in ``page`` (a :class:`compare.viewers.browser.Page`), wait until
    it has rendered a session's overview, open the Sessions list with a mouse click as a user
    would, and return the session names listed (the list stays open for a screenshot)."""
    page.navigate(f"{base_url}/#profile")
    state = page.wait_for(f"(s => s && s.selected && s.rendered && s)({_SESSIONS_JS})",
                          timeout=timeout, what="the profile tab's Sessions list and overview")
    for kind in ("mousePressed", "mouseReleased"):
        page.send("Input.dispatchMouseEvent", {"type": kind, "x": state["x"], "y": state["y"],
                                               "button": "left", "clickCount": 1})
    names = page.wait_for(f"(o => o.length >= {state['count']} && o)({_OPTIONS_JS})",
                          timeout=30, what=f"the {state['count']} sessions in the open list")
    if len(names) != state["count"]:
        raise BrowserError(f"profile tab says Sessions ({state['count']}) but lists {names}")
    return names


# Our Pipeline compare tab (compare/tab/) lives in an iframe too (plugin_entry.html?name=...);
# its root element says in data-state when the first comparison is shown ("done") or failed
# ("error", the sentence in #pc-status).
_TAB_FRAME = "document.querySelector('iframe[src*=\"name=%s\"]')" % TAB_PLUGIN
_TAB_JS = """(() => {
  const frame = %s;
  const doc = frame && frame.contentDocument;
  const root = doc && doc.querySelector('#pc-root');
  if (!root || !['done', 'error'].includes(root.dataset.state)) return null;
  const status = doc.querySelector('#pc-status');
  return {state: root.dataset.state, text: status ? status.innerText.trim() : ''};
})()""" % _TAB_FRAME
#: The compare tab's screenshot is taller than the window: verdict, steps and both timelines.
COMPARE_SHOT_HEIGHT = 1700
#: The longest the compare tab may take to show its first comparison (computed on first view).
COMPARE_TAB_TIMEOUT_S = 300.0


def show_compare_tab(page, base_url: str, timeout: float = COMPARE_TAB_TIMEOUT_S) -> str:
    """Load the Pipeline compare tab in ``page``, wait (bounded) until it shows the comparison
    of its default pair (TensorBoard computes it on first view), and return what its status
    line says; BrowserError with the tab's own sentence if it shows an error instead."""
    page.navigate(f"{base_url}/#{TAB_PLUGIN}")
    got = page.wait_for(_TAB_JS, timeout=timeout, what="the Pipeline compare tab's comparison")
    if got["state"] == "error":
        raise BrowserError(f"the Pipeline compare tab says: {got['text']}")
    return got["text"]


@dataclasses.dataclass
class TabShots:
    """What :func:`screenshot_tabs` saw: the Profile tab's sessions, and the compare tab's
    status line or why it has no screenshot."""

    sessions: list[str]
    compare: str | None = None
    compare_error: str | None = None


def screenshot_profile(logdir: str | os.PathLike, png_path: str | os.PathLike,
                       work_dir: str | os.PathLike | None = None, width: int = 1400,
                       height: int = 900) -> list[str]:
    """:func:`screenshot_tabs` of the Profile tab alone; the session names it listed."""
    return screenshot_tabs(logdir, png_path, None, work_dir, width, height).sessions


def screenshot_tabs(logdir: str | os.PathLike, png_path: str | os.PathLike,
                    compare_png: str | os.PathLike | None = None,
                    work_dir: str | os.PathLike | None = None, width: int = 1400,
                    height: int = 900) -> TabShots:
    """Start TensorBoard over ``logdir``, open its profile tab in headless Chromium, open the
    Sessions list, check that every session of :func:`profile_runs` is listed, and save a PNG
    of the page to ``png_path``; with ``compare_png``, then open the Pipeline compare tab, wait
    for its comparison and save it there (a failure there is said in ``compare_error``, the
    Profile tab's PNG is kept).

    It takes tens of seconds and needs Debian's ``chromium`` (:class:`compare.viewers.browser.BrowserError`,
    an InputError, says so in one line if it is missing). TensorBoard's and Chromium's logs and Chromium's profile go to ``work_dir``
    (default: a temporary folder, removed afterwards). Both processes are always stopped.
    Note that TensorBoard's profile plugin writes its caches (``.cached_tools.json``,
    ``cache_version.txt``, ``*.hlo_proto.pb``, ``*.SSTABLE``) into the session folders it
    serves, as it does for any user, and the compare tab its comparison into
    ``LOGDIR/.pipeline_compare``."""
    expected = profile_runs(logdir)
    if not expected:
        raise InputError(f"{logdir}: no profile sessions (no plugins/profile/*/*.xplane.pb)")
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="tb-screenshot-"))
        work = Path(work_dir)
        tb = stack.enter_context(TensorBoard(logdir, log_path=work / "tensorboard.log"))
        browser = stack.enter_context(Chromium(width=width, height=height,
                                               log_path=work / "chromium.log"))
        page = browser.new_page()
        shots = TabShots(show_sessions(page, tb.url))
        page.screenshot(png_path)
        if compare_png is not None:
            try:
                page.send("Emulation.setDeviceMetricsOverride", {
                    "width": width, "height": COMPARE_SHOT_HEIGHT, "deviceScaleFactor": 1,
                    "mobile": False})
                shots.compare = show_compare_tab(page, tb.url)
                page.screenshot(compare_png)
            except BrowserError as e:
                shots.compare_error = str(e)
    missing = [r for r in expected if r not in shots.sessions]
    if missing:
        raise BrowserError(f"profile tab of {logdir} does not list {', '.join(missing)} "
                           f"(it lists {', '.join(shots.sessions) or 'nothing'})")
    return shots
