"""The Pipeline compare tab's comparison of two sessions, in a process of its own:
``python -m compare.tab.compute`` then one JSON line on stdin, ``{"a": SESSION_DIR, "b":
SESSION_DIR, "out": DIR, "label_a": A, "label_b": B}``.

It is :func:`compare.api.compare_traces`, what ``compare.run A B`` calls, with
``data_only``: ``report.json`` and ``timelines.json`` go into ``out`` (the tab draws its own
pictures). Progress lines and, on bad input, the one-line error go to stderr (exit 2).

TensorBoard's process starts it (:mod:`compare.tab.cache`), before it has a job, so that its
imports are done when one comes; a trace that takes xprof's converter down, or memory, takes
only this process with it, and a time-out can end it. It reads stdin to the end: the end
(TensorBoard gone, however it went) ends this process, mid-comparison too.
"""
from __future__ import annotations

import json
import os
import sys
import threading

from common.errors import InputError, cli_main, say
from compare.api import compare_traces
from compare.tab.cache import PROG

#: What a job line must name.
KEYS = ("a", "b", "out", "label_a", "label_b")

#: What ``--help`` prints.
USAGE = """\
usage: python -m compare.tab.compute < JOB

The Pipeline compare tab's comparison of two profile sessions, run by TensorBoard in a process
of its own (you do not need to start it). It reads one JSON line on stdin,
{"a": SESSION_DIR, "b": SESSION_DIR, "out": DIR, "label_a": A, "label_b": B}, compares the
two as python -m compare.run A B does, and writes report.json and timelines.json into DIR.
Progress goes to stderr; bad input ends it with one line and exit code 2. It ends when its
stdin ends (TensorBoard gone), mid-comparison too.
"""


def _no_flags() -> None:
    """This child takes no flags: its job comes on stdin."""


def _exit_when_stdin_ends() -> None:
    # the raw descriptor: a daemon thread blocked in sys.stdin would hold its lock while the
    # interpreter shuts down, which aborts it
    while os.read(sys.stdin.fileno(), 1 << 16):
        pass
    os._exit(1)


def _main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    line = sys.stdin.readline()
    if not line.strip():
        return 0  # TensorBoard went before giving a job
    try:
        job = json.loads(line)
        missing = [k for k in KEYS if not isinstance(job.get(k), str) or not job[k]]
    except (ValueError, AttributeError):
        raise InputError("the job line is not a JSON object") from None
    if missing:
        raise InputError(f"the job line has no {', '.join(missing)}")
    threading.Thread(target=_exit_when_stdin_ends, daemon=True).start()
    compare_traces(job["a"], job["b"], job["out"], progress=say, data_only=True,
                   labels={"a": job["label_a"], "b": job["label_b"]})
    return 0


def main() -> None:
    cli_main(PROG, _no_flags, _main, usage=USAGE)


if __name__ == "__main__":
    main()
