"""Keep TensorFlow's log noise out of the user's way.

TF writes C++ logs straight to file descriptor 2, so Python-level redirection is not enough:
:func:`native_stderr_to` points fd 2 at a log file and keeps a duplicate of the real stderr for
our own messages (:func:`common.errors.say` writes there).
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from typing import Iterator

import absl.logging


def quiet_env(verbose: bool = False) -> None:
    """Set TF's log-level env vars; call before TensorFlow is imported."""
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


def quiet_python_logs() -> None:
    """Silence TF's Python deprecation chatter (queue runners are deprecated; we know)."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="tensorflow")
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    absl.logging.set_verbosity(absl.logging.ERROR)


@contextlib.contextmanager
def native_stderr_to(path: str | os.PathLike | None) -> Iterator[None]:
    """Redirect fd 2 (TF's C++ logs, Python warnings) into ``path`` for the duration."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    real = os.dup(2)
    log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    previous = getattr(sys, "_real_stderr_fd", None)
    sys._real_stderr_fd = real  # type: ignore[attr-defined]
    os.dup2(log_fd, 2)
    os.close(log_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)
        os.close(real)
        sys._real_stderr_fd = previous  # type: ignore[attr-defined]
