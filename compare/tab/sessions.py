"""The profile sessions of a TensorBoard logdir, named as the profile plugin names them, and the
only names the Pipeline compare tab accepts.

A session is a folder ``<run>/plugins/profile/<session>/`` anywhere under the logdir holding
``<host>.xplane.pb`` files (or, as TF 2.2/2.3 wrote them, ``<host>.trace.json.gz``): what
:func:`compare.load.load` reads. Its name is ``<run>/<session>`` (``<session>`` for a run at
the logdir itself), the Sessions list's name in the Profile tab.

Listing never follows a symbolic link out of the logdir and never enters hidden folders (the
tab's own cache is one). A request names sessions; :func:`pick` accepts only a name of the
listing and refuses anything else (a path, ``..``, an unknown name) with :class:`BadName`.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from common.run_record import PIPELINES
from compare.load.xplane import HOST_TRACE_SUFFIX, XPLANE_SUFFIX

#: A session name longer than this is no name we list.
MAX_NAME_CHARS = 1024
#: run.json is read to tell our pipelines' runs; one larger than this is not ours.
RUN_RECORD_MAX_BYTES = 4 << 20


class BadName(ValueError):
    """A request named no session of the listing (HTTP 400); the message is one sentence."""


@dataclasses.dataclass(frozen=True)
class Session:
    name: str                      # "<run>/<session>", as the profile plugin names it
    run: str                       # the TensorBoard run ("" for the logdir itself)
    path: Path                     # the session folder
    files: tuple[tuple[str, int, int], ...]   # (profile file, size, mtime_ns), sorted
    pipeline: str | None = None    # "legacy" / "modern": a run folder of our pipelines

    @property
    def hosts(self) -> tuple[str, ...]:
        """Host names of the xplanes (what the Profile tab's host picker offers)."""
        return tuple(f[: -len(XPLANE_SUFFIX)] for f, _, _ in self.files
                     if f.endswith(XPLANE_SUFFIX))

    @property
    def mtime_ns(self) -> int:
        return max(m for _, _, m in self.files)

    @property
    def folder(self) -> str:
        """The session folder's own name (the profiler's timestamp)."""
        return self.path.name


def list_sessions(logdir: str | os.PathLike) -> list[Session]:
    """Every profile session under ``logdir``, by name."""
    root = Path(os.path.realpath(logdir))
    found: list[Session] = []
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        if here.name == "profile" and here.parent.name == "plugins":
            run_dir = here.parent.parent
            run = run_dir.relative_to(root).as_posix() if run_dir != root else ""
            pipeline = _pipeline(run_dir)
            for d in dirnames:
                s = _session(root, here / d, run, pipeline)
                if s is not None:
                    found.append(s)
            dirnames[:] = []  # a session folder holds no sessions
    return sorted(found, key=lambda s: s.name)


def _session(root: Path, folder: Path, run: str, pipeline: str | None) -> Session | None:
    if not _inside(root, str(folder)):
        return None  # a link out of the logdir
    files = []
    with os.scandir(folder) as it:
        for entry in it:
            if not entry.name.endswith((XPLANE_SUFFIX, HOST_TRACE_SUFFIX)):
                continue
            if entry.is_symlink() and not _inside(root, entry.path):
                continue  # never read outside the logdir
            if entry.is_file():
                st = entry.stat()
                files.append((entry.name, st.st_size, st.st_mtime_ns))
    if not files:
        return None
    name = f"{run}/{folder.name}" if run else folder.name
    return Session(name, run, folder, tuple(sorted(files)), pipeline)


def _inside(root: Path, path: str) -> bool:
    real = os.path.realpath(path)
    return real == str(root) or real.startswith(str(root) + os.sep)


def _pipeline(run_dir: Path) -> str | None:
    """``legacy`` or ``modern`` when ``run_dir`` is one of our pipelines' run folders (its
    run.json says so), else None."""
    record = run_dir / "run.json"
    try:
        if record.is_symlink() or record.stat().st_size > RUN_RECORD_MAX_BYTES:
            return None
        pipeline = json.loads(record.read_bytes()).get("pipeline")
    except (OSError, ValueError, AttributeError):
        return None
    return pipeline if pipeline in PIPELINES else None


def pick(name: str | None, listing: dict[str, Session], what: str = "session") -> Session:
    """The session of the listing called ``name``; BadName for anything else."""
    if not name:
        raise BadName(f"no {what} given")
    if len(name) > MAX_NAME_CHARS or "\x00" in name or "\\" in name or name.startswith("/") \
            or any(part in ("", ".", "..") for part in name.split("/")):
        raise BadName(f"{what} {_quoted(name)} is a path, not a session name of this logdir")
    if name not in listing:
        raise BadName(f"{what} {_quoted(name)} is not a profile session of this logdir")
    return listing[name]


def _quoted(name: str) -> str:
    return json.dumps(name if len(name) <= 80 else name[:77] + "...")


#: A label longer than this is refused (it names a side in every table and sentence).
MAX_LABEL_CHARS = 60


def labels_for(a: Session, b: Session, given: tuple[str | None, str | None] = (None, None)
               ) -> tuple[str, str]:
    """The two sides' names: the ones given (stripped, different, short, printable), else
    our pipelines' names, else the runs' names when they differ, else the session names."""
    defaults = _default_labels(a, b)
    out = []
    for text, default in zip(given, defaults):
        text = (text or "").strip()
        if len(text) > MAX_LABEL_CHARS or not text.isprintable():
            raise BadName(f"label {_quoted(text)} must be printable and at most "
                          f"{MAX_LABEL_CHARS} characters")
        out.append(text or default)
    if out[0] == out[1]:
        raise BadName(f"both sides are labelled {_quoted(out[0])}: give two different labels")
    return out[0], out[1]


def _default_labels(a: Session, b: Session) -> tuple[str, str]:
    if a.pipeline and b.pipeline and a.pipeline != b.pipeline:
        return a.pipeline, b.pipeline
    if a.run and b.run and a.run != b.run:
        return a.run, b.run
    if a.folder != b.folder:
        return a.folder, b.folder
    return a.name, b.name


def default_pair(sessions: list[Session]) -> tuple[Session, Session] | None:
    """What the tab compares first: the latest legacy and modern sessions of our pipelines'
    runs, else the two latest sessions (older as A); None with fewer than two."""
    latest = sorted(sessions, key=lambda s: (s.mtime_ns, s.name))
    ours = {s.pipeline: s for s in latest if s.pipeline}
    if "legacy" in ours and "modern" in ours:
        return ours["legacy"], ours["modern"]
    if len(latest) < 2:
        return None
    return latest[-2], latest[-1]
