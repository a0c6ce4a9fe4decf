"""The **Pipeline compare** tab: a TensorBoard dynamic plugin (entry point
``tensorboard_plugins: pipeline_compare``) that compares two profile sessions of the logdir.

Routes, under ``/data/plugin/pipeline_compare/``:

- ``index.js``, ``static/<file>``: the page (ES modules and a style sheet of this package; no
  other host is ever named, so it works offline);
- ``sessions``: the logdir's profile sessions, the pair compared first and its labels;
- ``compare?a=&b=&label_a=&label_b=[&retry=1][&seen=N]``: the comparison of sessions ``a`` and
  ``b`` — ``{"state": "done", "report": <report.json>, "timelines": <timelines.json>, ...}``
  from the cache, else ``running`` with the progress lines so far (HTTP 202; with ``seen``, once
  there are more than N of them, the comparison ended, or 2 s passed), or ``error`` with one
  sentence;
- ``file?a=&b=&label_a=&label_b=&name=``: one file of a finished comparison (report.md, ...).

Session names come from the logdir's own listing only (:func:`compare.tab.sessions.pick`): a
path, ``..`` or an unknown name is HTTP 400, and nothing outside the logdir is read; the
comparisons are written only into the cache (:mod:`compare.tab.cache`). The page renders the
report.json that ``compare.run`` would write for the same pair, through one adapter
(``static/adapter.js``).
"""
from __future__ import annotations

import json
import mimetypes
import threading
import time
from pathlib import Path

from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from compare.output.report import FILES
from compare.tab import sessions as sessions_mod
from compare.tab.cache import COMPUTE_TIMEOUT_S, Comparisons, default_root
from compare.tab.sessions import BadName, Session
from compare.viewers.tensorboard import TAB_PLUGIN

PLUGIN_NAME = TAB_PLUGIN
TAB_NAME = "Pipeline compare"
STATIC = Path(__file__).with_name("static")
#: The logdir is listed again after this many seconds (TensorBoard's own reload is 5 s).
LISTING_TTL_S = 5.0
#: The longest ``compare?seen=N`` waits for news while a comparison runs.
LONG_POLL_S = 2.0
_JSON = "application/json"
_TYPES = {".js": "text/javascript", ".css": "text/css", ".txt": "text/plain"}


class PipelineCompareLoader(base_plugin.TBLoader):
    """Adds the tab's flags and makes the plugin (what the entry point names)."""

    def define_flags(self, parser):
        group = parser.add_argument_group("pipeline compare plugin")
        group.add_argument(
            "--pipeline_compare_cache", metavar="DIR", type=str, default="",
            help="Where the Pipeline compare tab keeps its comparisons (default: "
                 "LOGDIR/.pipeline_compare, or ~/.cache/tf-pipeline-compare when the logdir "
                 "cannot be written).")
        group.add_argument(
            "--pipeline_compare_timeout", metavar="SECONDS", type=float,
            default=COMPUTE_TIMEOUT_S,
            help="The longest one comparison in the Pipeline compare tab may take.")

    def fix_flags(self, flags):
        if getattr(flags, "pipeline_compare_timeout", 1) <= 0:
            raise base_plugin.FlagsError("--pipeline_compare_timeout must be positive")

    def load(self, context):
        return PipelineComparePlugin(context)


class PipelineComparePlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context):
        flags = context.flags
        logdir = context.logdir or getattr(flags, "logdir", "") or ""
        self._logdir = Path(logdir).resolve() if logdir and "://" not in logdir else None
        cache = getattr(flags, "pipeline_compare_cache", "") or ""
        timeout = getattr(flags, "pipeline_compare_timeout", COMPUTE_TIMEOUT_S)
        root = Path(cache) if cache else default_root(self._logdir) if self._logdir else None
        self._comparisons = Comparisons(root, timeout) if root else None
        self._static = _static_files()
        self._listing: tuple[float, dict[str, Session]] = (0.0, {})
        self._listing_lock = threading.Lock()
        if self._comparisons and self.is_active():
            self._comparisons.warm()  # its imports done before the first view asks

    # -- TensorBoard's plugin interface ---------------------------------------------------------
    def is_active(self) -> bool:
        return len(self.sessions()) >= 2

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name=TAB_NAME,
                                            disable_reload=True)

    def get_plugin_apps(self):
        routes = {"/index.js": self._serve_index, "/static/*": self._serve_static,
                  "/sessions": self._serve_sessions, "/compare": self._serve_compare,
                  "/file": self._serve_file}
        return {path: wrappers.Request.application(handler) for path, handler in routes.items()}

    # -- the logdir ---------------------------------------------------------------------------
    def sessions(self) -> dict[str, Session]:
        """The logdir's sessions by name, listed again after :data:`LISTING_TTL_S`."""
        if self._logdir is None:
            return {}
        with self._listing_lock:
            when, listing = self._listing
            if time.monotonic() - when > LISTING_TTL_S:
                listing = {s.name: s for s in sessions_mod.list_sessions(self._logdir)}
                self._listing = (time.monotonic(), listing)
            return listing

    def _pair(self, request) -> tuple[Session, Session, tuple[str, str]]:
        listing = self.sessions()
        args = request.args
        a = sessions_mod.pick(args.get("a"), listing, "side A")
        b = sessions_mod.pick(args.get("b"), listing, "side B")
        if a is b:
            raise BadName(f"side A and side B are both {a.name}: pick two different sessions")
        labels = sessions_mod.labels_for(a, b, (args.get("label_a"), args.get("label_b")))
        return a, b, labels

    # -- routes -------------------------------------------------------------------------------
    def _serve_index(self, request: wrappers.Request) -> wrappers.Response:
        return self._static_response(request, "index.js")

    def _serve_static(self, request: wrappers.Request) -> wrappers.Response:
        name = request.path.rsplit("/static/", 1)[-1]
        if name not in self._static:
            return _error(request, f"no file {json.dumps(name[:80])} in this plugin", 404)
        return self._static_response(request, name)

    def _static_response(self, request: wrappers.Request, name: str) -> wrappers.Response:
        data, kind = self._static[name]
        return http_util.Respond(request, data, kind)

    def _serve_sessions(self, request: wrappers.Request) -> wrappers.Response:
        listing = self.sessions()
        out: dict = {"logdir": str(self._logdir or ""),
                     "sessions": [_session_json(s) for s in listing.values()]}
        pair = sessions_mod.default_pair(list(listing.values()))
        if pair:
            out["default"] = {"a": pair[0].name, "b": pair[1].name,
                              "labels": list(sessions_mod.labels_for(*pair))}
        else:
            out["message"] = _why_nothing(self._logdir, listing)
        return http_util.Respond(request, out, _JSON)

    def _serve_compare(self, request: wrappers.Request) -> wrappers.Response:
        try:
            a, b, labels = self._pair(request)
        except BadName as e:
            return _error(request, str(e))
        if self._comparisons is None:
            return _error(request, "TensorBoard was started without --logdir", 400)
        st = self._comparisons.status(a, b, labels, retry=request.args.get("retry") == "1")
        seen = request.args.get("seen", type=int)
        deadline = time.monotonic() + LONG_POLL_S
        # with ``seen`` (progress lines the page has), answer when there is news, or after
        # LONG_POLL_S: the page learns the end at once instead of at its next poll
        while st.state == "running" and seen is not None and len(st.lines) <= seen and \
                time.monotonic() < deadline:
            time.sleep(0.05)
            st = self._comparisons.status(a, b, labels)
        if st.state == "running":
            return http_util.Respond(request, {"state": "running", "lines": st.lines,
                                               "elapsed_s": st.elapsed_s}, _JSON, code=202)
        if st.state == "error":
            return http_util.Respond(request, {"state": "error", "message": st.message}, _JSON)
        return _done(request, st.folder, a, b, labels)

    def _serve_file(self, request: wrappers.Request) -> wrappers.Response:
        try:
            a, b, labels = self._pair(request)
        except BadName as e:
            return _error(request, str(e))
        name = request.args.get("name", "")
        if name not in FILES.values():
            return _error(request, f"{json.dumps(name[:80])} is not a report file")
        folder = self._comparisons.finished(a, b, labels) if self._comparisons else None
        path = folder / name if folder else None
        if path is None or not path.is_file():
            return _error(request, f"{name} is not ready for this pair", 404)
        kind = "application/gzip" if name.endswith(".gz") else \
            mimetypes.guess_type(name)[0] or "application/octet-stream"
        return http_util.Respond(request, path.read_bytes(), kind,
                                 content_encoding=None,
                                 headers=[("Content-Disposition",
                                           f'attachment; filename="{name}"')])


def _static_files() -> dict[str, tuple[bytes, str]]:
    """Every file the page may load, read once: the only names ``static/`` serves."""
    out = {}
    for p in sorted(STATIC.iterdir()):
        if p.is_file() and p.suffix in _TYPES:
            out[p.name] = (p.read_bytes(), _TYPES[p.suffix])
    return out


def _session_json(s: Session) -> dict:
    return {"name": s.name, "run": s.run, "folder": s.folder, "hosts": list(s.hosts),
            "pipeline": s.pipeline, "xplane": bool(s.hosts),
            "modified": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.mtime_ns / 1e9))}


def _why_nothing(logdir: Path | None, listing: dict[str, Session]) -> str:
    if logdir is None:
        return ("TensorBoard was started without a local --logdir; the Pipeline compare tab "
                "reads profile sessions from one.")
    if not listing:
        return (f"{logdir} holds no profile session (no plugins/profile/<session>/ folder with "
                f"an .xplane.pb); the tab compares two.")
    return (f"{logdir} holds one profile session ({next(iter(listing))}); the tab compares two: "
            f"profile another run into this logdir.")


def _done(request, folder: Path, a: Session, b: Session, labels: tuple[str, str]):
    """The finished comparison: report.json and timelines.json as written, spliced in."""
    try:
        report = (folder / "report.json").read_bytes()
        timelines = (folder / "timelines.json").read_bytes()
    except OSError as e:
        return http_util.Respond(request, {"state": "error", "message": f"cannot read the "
                                           f"cached comparison: {e.strerror or e}"}, _JSON)
    head = json.dumps({"state": "done", "pair": {"a": _session_json(a), "b": _session_json(b),
                                                 "labels": list(labels)},
                       "files": sorted(p.name for p in folder.iterdir()
                                       if p.name in FILES.values())})
    body = head[:-1].encode() + b', "report": ' + report + b', "timelines": ' + timelines + b"}"
    return http_util.Respond(request, body, _JSON)


def _error(request, message: str, code: int = 400):
    return http_util.Respond(request, {"error": message}, _JSON, code=code)
