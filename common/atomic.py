"""Atomic artifact writes (temp file in the same folder + rename) and the rule that a run
folder is never overwritten."""
from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from common.errors import InputError


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
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
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
    """Move every entry of ``staging`` into ``out`` (renames on one filesystem), then remove it."""
    moved = []
    for entry in sorted(staging.iterdir()):
        dest = out / entry.name
        os.replace(entry, dest)
        moved.append(dest)
    shutil.rmtree(staging, ignore_errors=True)
    return moved
