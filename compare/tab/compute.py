"""The Pipeline compare tab's comparison of two sessions, in a process of its own:
``python -m compare.tab.compute --a SESSION_DIR --b SESSION_DIR --out DIR --label_a A
--label_b B``.

It is :func:`compare.api.compare_traces`, what ``compare.run --legacy A --modern B`` calls, with
``data_only``: ``report.json`` and ``timelines.json`` go into ``--out`` (the tab draws its own
pictures, so none are made); progress lines and,
on bad input, the one-line error go to stderr (exit 2). TensorBoard's process starts it (see
:mod:`compare.tab.cache`), so a trace that takes xprof's converter down, or memory, takes only
this process with it, and a time-out can end it.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal

from absl import flags

from common.errors import InputError, cli_main, say
from compare.api import compare_traces
from compare.tab.cache import PARENT_ENV, PROG

FLAGS = flags.FLAGS
_PR_SET_PDEATHSIG = 1


def _define_flags() -> None:
    flags.DEFINE_string("a", None, "Side A: a profile session folder.")
    flags.DEFINE_string("b", None, "Side B: a profile session folder.")
    flags.DEFINE_string("out", None, "A new or empty folder for the report files.")
    flags.DEFINE_string("label_a", None, "What to call side A.")
    flags.DEFINE_string("label_b", None, "What to call side B.")


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    missing = [n for n in ("a", "b", "out", "label_a", "label_b") if not FLAGS[n].value]
    if missing:
        raise InputError(f"missing --{', --'.join(missing)}")
    compare_traces(FLAGS.a, FLAGS.b, FLAGS.out, progress=say, data_only=True,
                   labels={"legacy": FLAGS.label_a, "modern": FLAGS.label_b})
    return 0


def _die_with_parent() -> None:
    """Be killed when the thread of TensorBoard that started this process ends (Linux), so a
    comparison never outlives the TensorBoard that asked for it."""
    parent = os.environ.get(PARENT_ENV)
    if not parent:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if str(os.getppid()) != parent:  # it died before the line above
        os._exit(1)


def main() -> None:
    _die_with_parent()
    cli_main(PROG, _define_flags, _main)


if __name__ == "__main__":
    main()
