"""``python -m compare.explain TRACE [--json] [--step N]``: answer the seed's four questions
about any trace the loaders read, in plain words with numbers (or as JSON with stable keys).

A thin CLI over :func:`compare.api.explain_trace`; the answers are built in
:mod:`compare.analysis.explanation` and rendered by :mod:`compare.output.explain_text` and
:mod:`compare.output.explain_json`.
"""
from __future__ import annotations

import json
import os
import sys

from absl import flags

from common.errors import InputError, cli_main
from common.tflog import native_stderr_to, quiet_python_logs
from compare.api import explain_trace
from compare.cli_flags import define_max_memory, max_memory_flag
from compare.output.explain_json import to_json
from compare.output.explain_text import to_text

FLAGS = flags.FLAGS

#: What ``--help`` prints above the flags.
USAGE = """\
usage: python -m compare.explain TRACE [--json] [--step N] [--verbose]

Answers four questions about one TensorFlow trace, in plain words with numbers: what each
process (pid) and row is, what XLA's compiles cost and what _XlaLaunch means, in what order
the ops ran (with the critical path), and where the step's time went: the bottleneck and what
to try next. By default it explains a steady step: the one of median length after the first.

TRACE is a timeline.py JSON (TF1 or TF2, CPU or GPU), a Chrome or xprof trace (.json or
.json.gz), an .xplane.pb, or a TensorBoard logdir, run or profile folder. Nothing is written.

examples:
  python -m compare.explain timeline.json
  python -m compare.explain logs/plugins/profile/2026_01_01_12_00_00 --step 3
  python -m compare.explain trace.json.gz --json > facts.json
"""



def _define_flags() -> None:
    flags.DEFINE_boolean("json", False, "Print the facts as JSON instead of the text report.")
    flags.DEFINE_integer("step", None, "Explain this step (default: a steady step).")
    flags.DEFINE_boolean("verbose", False, "Show TensorFlow's own log on stderr.")
    define_max_memory()


def _main(argv: list[str]) -> int:
    if len(argv) != 2:
        raise InputError("usage: python -m compare.explain TRACE [--json] [--step N] (one "
                         "trace file or folder)")
    quiet_python_logs()
    with native_stderr_to(None if FLAGS.verbose else os.devnull):
        e = explain_trace(argv[1], FLAGS.step, max_memory_flag())
    if FLAGS.json:
        sys.stdout.write(json.dumps(to_json(e), indent=1) + "\n")
    else:
        sys.stdout.write(to_text(e))
    return 0


def main() -> None:
    """Entry point of ``python -m compare.explain``."""
    # Our own text is ASCII; a trace's node names may not be, and must not crash a C-locale pipe.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    cli_main("compare.explain", _define_flags, _main, usage=USAGE)


if __name__ == "__main__":
    main()
