"""Atomic artifact writes (temp file in the same folder + rename), the rule that a run folder
is never overwritten, and staging: a run writes into a hidden folder inside its run folder and
moves the finished artifacts in at the end, so a crash, a full disk or Ctrl-C never leaves a
half-written artifact where a user (or TensorBoard) would read it."""
from __future__ import annotations

import contextlib
import ctypes
import errno
import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from common.errors import InputError, RunFailed, signals_deferred


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[Any]:
    """Open a temp file beside ``path``; on success fsync and rename it over ``path``.

    On any exception the temp file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_umask())
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError) and not e.filename:  # a failed write() names no file
            e.filename = str(path)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w") as f:
        f.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as f:
        f.write(data)


def write_json(path: str | os.PathLike, obj: Any, gz: bool = False) -> None:
    text = json.dumps(obj, indent=None if gz else 2, sort_keys=False)
    if gz:
        write_bytes(path, gzip.compress(text.encode("utf-8"), compresslevel=6))
    else:
        write_text(path, text + "\n")


def prepare_out_dir(out: str | os.PathLike, allow: tuple[str, ...] = ("tf.log",)) -> Path:
    """Return ``out`` as a Path, creating it; refuse a folder that already holds files.

    Names in ``allow`` (the CLI's own log file) may already be there.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    if out.is_dir() and any(c.name not in allow for c in out.iterdir()):
        raise InputError(f"--out {out}: folder is not empty; runs are never overwritten, "
                         f"give a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    return out


def move_into(staging: Path, out: Path) -> list[Path]:
    """Move every entry of ``staging`` into ``out`` (renames on one filesystem), then remove it.

    Signals are held meanwhile, so the move is never half done. Nothing in ``out`` is ever
    replaced: if a name is taken (another run wrote into the same folder meanwhile), what is
    left of this run stays complete in ``out/unsaved-<pid>`` and InputError says so.
    """
    moved = []
    with signals_deferred():
        for entry in sorted(staging.iterdir()):
            dest = out / entry.name
            try:
                _rename_no_replace(entry, dest)
            except FileExistsError:
                keep = out / f"unsaved-{os.getpid()}"
                os.rename(staging, keep)
                raise InputError(f"{dest}: appeared while this run was writing (another run "
                                 f"into {out}?); it was left alone and this run's results are "
                                 f"in {keep}") from None
            moved.append(dest)
        shutil.rmtree(staging, ignore_errors=True)
    return moved


def _rename_no_replace(src: Path, dest: Path) -> None:
    """``rename`` that fails with FileExistsError instead of replacing ``dest`` (Linux
    renameat2 RENAME_NOREPLACE; elsewhere a check, then rename)."""
    if _renameat2 is not None:
        if _renameat2(-100, os.fsencode(src), -100, os.fsencode(dest), 1) == 0:  # AT_FDCWD
            return
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            raise FileExistsError(err, os.strerror(err), str(dest))
        if err not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), str(dest))
    if os.path.lexists(dest):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dest))
    os.rename(src, dest)


def _load_renameat2():
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn


_renameat2 = _load_renameat2()


PARTIAL_DIR = "partial"


@contextlib.contextmanager
def staged(out: str | os.PathLike) -> Iterator[Path]:
    """A hidden staging folder ``out/.staging-<pid>`` for a run's artifacts.

    On success its entries move into ``out``. On an interrupt (SIGINT/SIGTERM, see
    :func:`common.errors.run_cli`) or a :class:`common.errors.RunFailed` whatever complete
    files were staged (e.g. the profile of the steps that ran) are kept in ``out/partial`` with
    a ``partial.json`` saying so, and that path is added to the exception's ``kept`` list; if
    nothing was staged, nothing is kept. On any other error the staging folder is removed.
    Either way no staging folder is left.
    """
    out = Path(out)
    staging = out / f".staging-{os.getpid()}"
    staging.mkdir()
    try:
        yield staging
    except (KeyboardInterrupt, RunFailed) as e:
        with signals_deferred():
            kept = _keep_partial(staging, out / PARTIAL_DIR, e)
        if kept:  # a plain KeyboardInterrupt has no ``kept`` of its own yet
            setattr(e, "kept", [*getattr(e, "kept", []), str(kept)])
        raise
    except BaseException as e:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(e, OSError) and e.filename and str(e.filename).startswith(str(staging)):
            e.filename = str(out) + str(e.filename)[len(str(staging)):]  # name what the user sees
        raise
    move_into(staging, out)


def _keep_partial(staging: Path, dest: Path, why: BaseException) -> Path | None:
    files = sorted(str(p.relative_to(staging)) for p in staging.rglob("*")
                   if p.is_file() and p.stat().st_size > 0 and not p.name.endswith(".tmp"))
    if not files or dest.exists():
        shutil.rmtree(staging, ignore_errors=True)
        return None
    try:
        failed = isinstance(why, RunFailed)
        write_json(staging / "partial.json", {
            "complete": False,
            "failed" if failed else "interrupted_by": str(why) or type(why).__name__,
            "note": f"the run {'failed' if failed else 'was interrupted'}; these files were "
                    f"complete when it stopped (e.g. the profile of the steps that ran); the "
                    f"run's other artifacts are missing",
            "files": files,
        })
        os.rename(staging, dest)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return None
    return dest
