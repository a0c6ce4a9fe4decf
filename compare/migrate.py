"""``python -m compare.migrate SCRIPT.py|NOTEBOOK.ipynb [--json]``: what to change to move a TF1
script's input pipelines to tf.data + XLA.

Reads the script with :mod:`ast` (it is never imported or run; a notebook's code cells; a Python 2
script after an in-memory rewrite of its Python 2 syntax) and gives

- one plan per input pipeline: the function that builds it, the line of its batch or dequeue
  call, its tf.data code in the script's own names, and what this file cannot settle;
- every queue-runner input construct, reader, queue batcher, TF1 iterator, feed_dict and feeder
  thread, stateful random op, ``jit_scope`` / ``global_jit_level`` and FULL_TRACE / timeline use,
  with line and column, its TF2 replacement and the pitfalls we measured when the script has
  the construct. See :mod:`compare.migration` for the parts.

Library use::

    report = analyze_file("train.py")      # or analyze_source(text, "train.py")
    report.pipelines, report.findings, report.to_text(), report.to_json()
"""
from __future__ import annotations

import dataclasses
import gc
import io
import json
import math
import sys
import tokenize
from pathlib import Path
from typing import Any

from absl import flags

from common.errors import InputError, cli_main
from compare.migration import cli, render
from compare.migration import pipelines as _pipelines
from compare.migration import plan as _plan
from compare.migration.model import Pipeline
from compare.migration.scan import Finding, scan
from compare.migration.source import Parsed, Where, parse
from compare.migration.values import Module

#: A script larger than this is surely not a hand-written pipeline script.
MAX_BYTES = 20 * 1024 * 1024


#: What ``--help`` prints above the flags.
USAGE = """\
usage: python -m compare.migrate SCRIPT.py|NOTEBOOK.ipynb [--json]
       python -m compare.migrate SCRIPT.py --emit OUT.py [--overwrite]
       python -m compare.migrate SCRIPT.py [--emit OUT.py] --check --call 'FUNC(ARGS)'
           [--setup CODE] [--batches N] [--out DIR] [--port FILE] [--timeout S]

Reads a TF1 script or notebook (never runs it; Python 2 syntax too) and plans each of its
input pipelines as tf.data code in the script's own names, with every queue and batching
argument honoured and what the file cannot settle listed as unresolved; then lists every
queue runner, reader, batcher, TF1 iterator, feed_dict, stateful random op, jit_scope and
timeline use by line, with its TF2 replacement.

--emit writes the port: a module that builds the same pipelines on tf.data, without sessions
or queue runners. --check proves it: it builds the original and the port with --call, compares
their first batches and profiles both into --out. --check imports the script, which runs its
top-level code (in a child process, stopped after --timeout seconds).

examples:
  python -m compare.migrate cifar10_input.py
  python -m compare.migrate cifar10_input.py --emit cifar10_tfdata.py
  python -m compare.migrate cifar10_input.py --check --call "distorted_inputs('data', 32)"
"""



@dataclasses.dataclass
class MigrationReport:
    """Everything the report says about one script: findings in source order, one plan per
    input pipeline, the plan paragraph, the tf_upgrade_v2 comparison and notes on how the file
    was read (notebook, Python 2, ``tf`` assumed)."""

    script: str
    findings: list[Finding]
    plan: str
    tf_upgrade_v2: str
    pipelines: list[Pipeline] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    #: The index of the script the plans were made from (for :mod:`compare.migration.emit`).
    module: Module | None = dataclasses.field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict (stable keys; see :mod:`compare.migration.render`)."""
        return render.to_json(self)

    def to_text(self) -> str:
        """The report for people."""
        return render.to_text(self)


def read_script(path: str | Path) -> str:
    """The script's text, decoded as Python would (UTF-8, or its PEP 263 coding cookie).

    Raises InputError naming the path when it is missing, not a regular file, unreadable,
    too large, or not text in its encoding.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file")
    if p.is_dir():
        raise InputError(f"{path}: is a folder, not a Python script")
    if not p.is_file():
        raise InputError(f"{path}: not a regular file")
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            mib = math.ceil(size / 2**20 * 10) / 10  # 20.01 MiB shows as 20.1, never as 20
            raise InputError(f"{path}: {mib:.1f} MiB is too large for a script "
                             f"(limit {MAX_BYTES // 2**20} MiB)")
        data = p.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        if "invalid or missing encoding declaration" not in str(e):
            raise InputError(f"{path}: {e}") from None  # unknown cookie, BOM against cookie
        encoding = "utf-8"  # non-UTF-8 bytes in the first two lines: say where, below
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        kind = "UTF-8" if encoding.startswith("utf-8") else encoding
        raise InputError(f"{path}:{line}: not {kind} text (byte 0x{data[e.start]:02x} at offset "
                         f"{e.start}); save it as UTF-8 or declare its coding") from None
    except LookupError:
        raise InputError(f"{path}: unknown encoding {encoding!r}") from None


def _assumed_tf_note() -> str:
    return ("The script uses tf without importing it: read as if it began with "
            "\"import tensorflow as tf\" (a snippet).")


def _lookalike_note(module: str) -> str:
    return (f"The script imports {module} as tf, which is not TensorFlow; its tf.* pipeline "
            "calls (tf.train.*, queues, readers) were read as TensorFlow's, as such libraries "
            f"re-export TensorFlow 1 under tf: check that {module} does, and that what it adds "
            "itself (its own tf.* functions) is ported too.")


def analyze_source(text: str, name: str = "<script>", notebook: bool = False) -> MigrationReport:
    """The migration report for a script's text (a notebook's JSON with ``notebook=True``);
    ``name`` labels it in messages."""
    collecting = gc.isenabled()
    gc.disable()  # millions of small acyclic objects: the collector would only slow the analysis
    try:
        parsed = parse(text, name, notebook)
        result = scan(parsed.tree, parsed.text)
        where = parsed.where if parsed.cells else None
        module = Module(parsed.tree, result)
        found, notes = _plan_pipelines(module, where)
    except RecursionError:
        raise InputError(f"{name}: nested too deeply to analyse") from None
    finally:
        if collecting:
            gc.enable()
    _relocate_findings(result.findings, parsed)
    notes = (parsed.notes + ([_assumed_tf_note()] if result.assumed_tf else [])
             + [_lookalike_note(m) for m in result.lookalikes] + notes)
    return MigrationReport(name, result.findings, _plan.plan(result.findings, found),
                           _plan.upgrade_note(result.findings), found, notes, module)


def _plan_pipelines(module: Module, where: Where | None) -> tuple[list[Pipeline], list[str]]:
    """The pipelines; when planning them fails on an unforeseen construct, none, and a note
    that says so (the findings do not depend on it), rather than no report at all."""
    try:
        return _pipelines.build(module, where=where)
    except RecursionError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of the planner on a strange script
        return [], [f"Planning the pipelines failed on this script ({type(e).__name__}: {e}); "
                    "the findings below are complete, the per-pipeline plans are missing. "
                    "Please report it with the script."]


def _relocate_findings(findings: list[Finding], parsed: Parsed) -> None:
    if parsed.cells:
        for f in findings:
            f.cell, f.line = parsed.where(f.line)


def analyze_file(path: str | Path) -> MigrationReport:
    """The migration report for the script or notebook at ``path`` (see :func:`read_script`
    for errors)."""
    return analyze_source(read_script(path), str(path), notebook=str(path).endswith(".ipynb"))


# -- CLI -------------------------------------------------------------------------------------

def _define_flags() -> None:

    flags.DEFINE_boolean("json", False, "Print the report as JSON (findings, summary, plan).")
    flags.DEFINE_string("emit", None, "Write the tf.data port of the script's input pipelines "
                        "to this .py file (never run; an existing file is kept unless "
                        "--overwrite).")
    flags.DEFINE_boolean("overwrite", False, "Let --emit replace an existing file.")
    flags.DEFINE_boolean("check", False, "Build the original (TF1, queue runners) and the port "
                         "with --call, compare --batches batches of each and profile both into "
                         "--out. IMPORTING THE SCRIPT RUNS ITS TOP-LEVEL CODE: each side runs in "
                         "a child process, stopped after --timeout seconds.")
    flags.DEFINE_string("call", None, "With --check: the pipeline function and its arguments "
                        "(literals), e.g. \"distorted_inputs('data', 32)\"; a pipeline in "
                        "top-level code is pipeline().")
    flags.DEFINE_string("setup", "", "With --check: Python run in both modules before the call "
                        "(e.g. \"import types; FLAGS = types.SimpleNamespace(train_dir='d')\").")
    flags.DEFINE_integer("batches", 3, "With --check: batches compared per side.", lower_bound=1)
    flags.DEFINE_string("out", None, "With --check: the report folder (new or empty; default "
                        "runs/<timestamp>).")
    flags.DEFINE_string("port", None, "With --check: check this port (e.g. one you finished by "
                        "hand) instead of a freshly emitted one.")
    flags.DEFINE_float("timeout", 300, "With --check: seconds each side may take.", lower_bound=1)


def _main(argv: list[str]) -> int:

    args = argv[1:]
    if not args:
        raise InputError("no script given: python -m compare.migrate SCRIPT.py|NOTEBOOK.ipynb "
                         "[--json] [--emit OUT.py] [--check --call 'FUNC(ARGS)']")
    if len(args) > 1:
        raise InputError(f"one script at a time, got {len(args)}: {' '.join(args)}")
    f = flags.FLAGS
    report = analyze_file(args[0])
    if not (f.emit or f.check):
        if f.json:
            sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
        else:
            sys.stdout.write(report.to_text())
        return 0
    return cli.emit_and_check(args[0], report, cli.Options(
        f.emit, f.overwrite, f.check, f.call, f.setup or "", f.batches, f.out, f.port, f.timeout))


def main() -> None:
    """Entry point of ``python -m compare.migrate``."""
    # Our own text is ASCII; a user's identifiers may not be, and must not crash a C-locale pipe.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    cli_main("compare.migrate", _define_flags, _main, quiet_tf=False, usage=USAGE)


if __name__ == "__main__":
    main()
