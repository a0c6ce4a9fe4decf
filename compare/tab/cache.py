"""Comparisons the Pipeline compare tab has made, kept on disk: one folder per pair of sessions
and labels, computed once.

The folder's name is a hash of both sessions' profile files (name, size, modification time),
the labels and the versions of report.json and timelines.json: a session whose files change
gets a new folder, and an upgrade that changes what is written does too. A folder appears
only complete: :mod:`compare.tab.compute` writes into a hidden temporary folder beside it
(each file through :mod:`common.atomic`), which is renamed into place when done.

Computed once: in this process one job per folder, whatever the number of requests asking
for it; across processes (two TensorBoards over one logdir) a lock file per folder, taken
before computing and re-checked after. Every job ends in bounded time (``timeout_s``; the
child's process group is killed then, and when TensorBoard exits). At most
:data:`MAX_ENTRIES` comparisons are kept, the least recently viewed removed first.

The child (:mod:`compare.tab.compute`) takes its job as one JSON line on stdin. One is kept
started ahead (:meth:`Comparisons.warm`), its imports done, so that a first view does not wait
for them; it holds no data until it gets a job. A child reads its stdin to the end: when
TensorBoard goes, however it goes, the pipe closes and the child ends.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path

from compare.output.report_json import SCHEMA_VERSION
from compare.output.step_timeline import TIMELINE_VERSION
from compare.tab.sessions import Session

#: The child that computes a comparison (:mod:`compare.tab.compute`), as its errors name it.
PROG = "compare.tab.compute"
#: The cache folder inside the logdir (hidden: TensorBoard and the profile plugin skip it).
CACHE_DIR = ".pipeline_compare"
#: Comparisons kept; the least recently viewed beyond this are removed.
MAX_ENTRIES = 16
#: The longest one comparison may take (s), and how long to wait for another process's.
COMPUTE_TIMEOUT_S = 900.0
#: Progress lines kept per job (the child prints one per phase).
MAX_LINES = 50
#: The files the tab reads from a comparison's folder.
NEEDED = ("report.json", "timelines.json")
_ERROR_PREFIX = f"{PROG}: error: "


def default_root(logdir: str | os.PathLike) -> Path:
    """``<logdir>/.pipeline_compare``, or a folder under ``~/.cache`` named after the logdir
    when the logdir cannot be written."""
    logdir = Path(os.path.realpath(logdir))
    if os.access(logdir, os.W_OK | os.X_OK):
        return logdir / CACHE_DIR
    tag = hashlib.sha256(str(logdir).encode()).hexdigest()[:16]
    return Path.home() / ".cache" / "tf-pipeline-compare" / "tab" / tag


def entry_key(a: Session, b: Session, labels: tuple[str, str]) -> str:
    """The folder name of one comparison (see the module docstring)."""
    try:
        version = metadata.version("tf-pipeline-compare")
    except metadata.PackageNotFoundError:
        version = "source"
    blob = json.dumps({"a": [a.name, a.files], "b": [b.name, b.files], "labels": labels,
                       "report": SCHEMA_VERSION, "timelines": TIMELINE_VERSION,
                       "version": version})
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclasses.dataclass
class Status:
    """Where one comparison is: ``done`` (its ``folder``), ``running`` (progress ``lines``) or
    ``error`` (``message``, one sentence)."""

    state: str
    key: str
    lines: list[str] = dataclasses.field(default_factory=list)
    message: str = ""
    folder: Path | None = None
    elapsed_s: float = 0.0


@dataclasses.dataclass
class _Worker:
    """A started child waiting for its job, and the lines it has printed."""

    proc: subprocess.Popen
    lines: list[str]
    reader: threading.Thread


@dataclasses.dataclass
class _Job:
    key: str
    started: float = dataclasses.field(default_factory=time.monotonic)
    lines: list[str] = dataclasses.field(default_factory=list)
    state: str = "running"
    message: str = ""
    proc: subprocess.Popen | None = None

    def status(self) -> Status:
        return Status(self.state, self.key, list(self.lines), self.message,
                      elapsed_s=round(time.monotonic() - self.started, 1))


class Comparisons:
    """The cache under ``root`` and the jobs filling it. ``command``: the child to run
    (:mod:`compare.tab.compute` unless a test gives another; it reads its job on stdin)."""

    def __init__(self, root: str | os.PathLike, timeout_s: float = COMPUTE_TIMEOUT_S,
                 command: tuple[str, ...] = (sys.executable, "-m", "compare.tab.compute")):
        self.root = Path(root)
        self.timeout_s = timeout_s
        self.command = command
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        self._spare: _Worker | None = None
        self._stopped = False
        atexit.register(self.stop)

    def warm(self) -> None:
        """Start a child ahead of the next job (once; again after each job takes it)."""
        with self._lock:
            if self._stopped or (self._spare and self._spare.proc.poll() is None):
                return
            self._spare = self._start()

    def _start(self) -> _Worker:
        proc = subprocess.Popen(list(self.command), stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        lines: list[str] = []
        reader = threading.Thread(target=_read_lines, args=(proc.stderr, lines), daemon=True)
        reader.start()
        return _Worker(proc, lines, reader)

    def _take(self) -> _Worker:
        """The child started ahead if it is alive, else a new one; another is started ahead."""
        with self._lock:
            if self._stopped:
                raise _Failed("TensorBoard is stopping")
            worker, self._spare = self._spare, None
        if worker is None or worker.proc.poll() is not None:
            worker = self._start()
        self.warm()
        return worker

    def folder(self, key: str) -> Path:
        return self.root / key

    def done(self, key: str) -> bool:
        return all((self.folder(key) / name).is_file() for name in NEEDED)

    def finished(self, a: Session, b: Session, labels: tuple[str, str]) -> Path | None:
        """The folder of this comparison if it is done, else None (nothing is started)."""
        key = entry_key(a, b, labels)
        return self.folder(key) if self.done(key) else None

    def status(self, a: Session, b: Session, labels: tuple[str, str],
               retry: bool = False) -> Status:
        """The comparison of ``a`` and ``b``: from the cache, or the progress of its job
        (started if there is none; started again after an error with ``retry``)."""
        key = entry_key(a, b, labels)
        if self.done(key):
            with contextlib.suppress(OSError):
                os.utime(self.folder(key))  # viewed: kept longest
            return Status("done", key, folder=self.folder(key))
        with self._lock:
            job = self._jobs.get(key)
            if job is None or (job.state == "error" and retry):
                job = self._jobs[key] = _Job(key)
                threading.Thread(target=self._run, args=(job, a, b, labels), daemon=True,
                                 name=f"pipeline-compare-{key[:8]}").start()
            status = job.status()
        if status.state == "done":
            status.folder = self.folder(key)
        return status

    def stop(self) -> None:
        """End every child, running or waiting (TensorBoard is exiting)."""
        with self._lock:
            self._stopped = True
            procs = [j.proc for j in self._jobs.values() if j.proc is not None]
            if self._spare is not None:
                procs.append(self._spare.proc)
                self._spare = None
        for proc in procs:
            _kill_group(proc)

    # -- one job, in its own thread -----------------------------------------------------------
    def _run(self, job: _Job, a: Session, b: Session, labels: tuple[str, str]) -> None:
        tmp = self.root / f".tmp-{job.key}-{os.getpid()}-{threading.get_ident()}"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with _locked(self.root / f".{job.key}.lock", self.timeout_s):
                if not self.done(job.key):
                    self._compute(job, a, b, labels, tmp)
            job.state = "done"
            self._prune(keep=job.key)
        except _Failed as e:
            job.state, job.message = "error", str(e)
        except OSError as e:
            job.state = "error"
            job.message = f"cannot write the tab's cache {self.root}: {e.strerror or e}"
        except Exception as e:  # a bug of ours: said, not left running forever
            job.state, job.message = "error", f"internal error: {type(e).__name__}: {e}"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            job.proc = None
            with self._lock:  # a finished job is the folder now; a failed one stays to be seen
                if job.state == "done":
                    self._jobs.pop(job.key, None)

    def _compute(self, job: _Job, a: Session, b: Session, labels: tuple[str, str],
                 tmp: Path) -> None:
        shutil.rmtree(tmp, ignore_errors=True)
        worker = self._take()
        job.proc, job.lines = worker.proc, worker.lines
        job.lines.insert(0, f"comparing {a.name} (A) with {b.name} (B) ...")
        order = {"a": str(a.path), "b": str(b.path), "out": str(tmp),
                 "label_a": labels[0], "label_b": labels[1]}
        stdin = worker.proc.stdin
        assert stdin is not None  # started with stdin=PIPE
        try:
            stdin.write(json.dumps(order).encode() + b"\n")
            stdin.flush()  # kept open: its end tells the child TensorBoard is gone
            rc = worker.proc.wait(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            raise _Failed(f"the comparison took longer than {self.timeout_s:.0f} s and was "
                          f"stopped") from None
        except BrokenPipeError:
            rc = worker.proc.wait(timeout=self.timeout_s)  # it died first: its own words
        finally:
            _kill_group(worker.proc)
            with contextlib.suppress(OSError):
                stdin.close()
        worker.reader.join(timeout=5)  # its last lines
        if rc != 0:
            raise _Failed(_why(job.lines, rc))
        if not all((tmp / name).is_file() for name in NEEDED):
            raise _Failed(f"the comparison wrote no {' or '.join(NEEDED)}")
        with contextlib.suppress(FileExistsError, OSError):
            os.rename(tmp, self.folder(job.key))  # another process may have won: same result

    def _prune(self, keep: str) -> None:
        """Keep the :data:`MAX_ENTRIES` most recently viewed comparisons, and no temporary
        folder older than a time-out."""
        now = time.time()
        entries = []
        for p in self.root.iterdir():
            if p.name.startswith(".tmp-") and now - p.stat().st_mtime > 2 * self.timeout_s:
                shutil.rmtree(p, ignore_errors=True)
            elif p.is_dir() and not p.name.startswith(".") and p.name != keep:
                entries.append((p.stat().st_mtime, p))
        for _, p in sorted(entries, reverse=True)[MAX_ENTRIES - 1:]:
            lock = self.root / f".{p.name}.lock"
            with contextlib.suppress(_Failed):
                with _locked(lock, 0):  # not while another process computes it
                    shutil.rmtree(p, ignore_errors=True)
                    lock.unlink(missing_ok=True)


class _Failed(Exception):
    """A comparison failed; the message is the sentence the tab shows."""


def _why(lines: list[str], rc: int) -> str:
    """The child's one-line error, else its last line, for the tab."""
    for line in reversed(lines):
        if line.startswith(_ERROR_PREFIX):
            return line[len(_ERROR_PREFIX):]
    last = next((ln for ln in reversed(lines) if ln.strip()), "")
    what = f"exit code {rc}" if rc > 0 else f"signal {-rc}"
    return f"the comparison failed ({what})" + (f": {last.strip()[:300]}" if last else "")


def _read_lines(stream, lines: list[str]) -> None:
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip()
        if line:
            lines.append(line)
            del lines[:-MAX_LINES]


@contextlib.contextmanager
def _locked(path: Path, timeout_s: float):
    """An exclusive lock on ``path`` (created if missing), waited for ``timeout_s`` at most."""
    with open(path, "a") as f:  # append: creates the lock file, never truncates it
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _Failed(f"another process has been making this comparison for "
                                  f"over {timeout_s:.0f} s") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
