"""``python -m compare.migrate SCRIPT.py [--json]``: what to change to move a TF1 script's input
pipeline to tf.data + XLA.

Reads the script with :mod:`ast` (it is never imported or run) and lists, with line and column,
every queue-runner input construct, reader, queue batcher, stateful random op, ``jit_scope`` /
``global_jit_level`` and FULL_TRACE / timeline use, each with its TF2 replacement, the pitfalls
we measured, and where our own port does the same job. See :mod:`compare.migration` for the parts.

Library use::

    report = analyze_file("train.py")      # or analyze_source(text, "train.py")
    report.findings, report.to_text(), report.to_json()
"""
from __future__ import annotations

import ast
import dataclasses
import io
import json
import sys
import tokenize
from pathlib import Path

from common.errors import InputError, cli_main
from compare.migration import plan as _plan
from compare.migration import render
from compare.migration.scan import Finding, scan

#: A script larger than this is surely not a hand-written pipeline script.
MAX_BYTES = 20 * 1024 * 1024


@dataclasses.dataclass
class MigrationReport:
    """Everything the report says about one script: findings in source order, the migration plan
    paragraph and the tf_upgrade_v2 comparison."""

    script: str
    findings: list[Finding]
    plan: str
    tf_upgrade_v2: str

    def to_json(self) -> dict:
        """The report as a JSON-ready dict (stable keys; see :mod:`compare.migration.render`)."""
        return render.to_json(self.script, self.findings, self.plan, self.tf_upgrade_v2)

    def to_text(self) -> str:
        """The report for people."""
        return render.to_text(self.script, self.findings, self.plan, self.tf_upgrade_v2)


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
            raise InputError(f"{path}: {size / 2**20:.0f} MiB is too large for a script "
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


def _parse(text: str, name: str) -> ast.Module:
    if not text:
        raise InputError(f"{name}: empty file")
    if not text.strip():
        raise InputError(f"{name}: holds only whitespace")
    try:
        return ast.parse(text, filename=name)
    except SyntaxError as e:
        where = f"{name}:{e.lineno}" if e.lineno else name
        hint = (" (a Python 2 script? port it to Python 3 first)"
                if "Missing parentheses in call to" in str(e.msg) else "")
        raise InputError(f"{where}: not valid Python 3: {e.msg}{hint}") from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise InputError(f"{name}: cannot be parsed ({type(e).__name__}: {e})") from None


def analyze_source(text: str, name: str = "<script>") -> MigrationReport:
    """The migration report for a script's text; ``name`` labels it in messages."""
    tree = _parse(text, name)
    try:
        result = scan(tree, text)
    except RecursionError:
        raise InputError(f"{name}: nested too deeply to analyse") from None
    return MigrationReport(name, result.findings, _plan.plan(result),
                           _plan.upgrade_note(result.findings))


def analyze_file(path: str | Path) -> MigrationReport:
    """The migration report for the script at ``path`` (see :func:`read_script` for errors)."""
    return analyze_source(read_script(path), str(path))


# -- CLI -------------------------------------------------------------------------------------

def _define_flags() -> None:
    from absl import flags

    flags.DEFINE_boolean("json", False, "Print the report as JSON (findings, summary, plan).")


def _main(argv: list[str]) -> int:
    from absl import flags

    args = argv[1:]
    if not args:
        raise InputError("no script given: python -m compare.migrate SCRIPT.py [--json]")
    if len(args) > 1:
        raise InputError(f"one script at a time, got {len(args)}: {' '.join(args)}")
    report = analyze_file(args[0])
    if flags.FLAGS.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(report.to_text())
    return 0


def main() -> None:
    """Entry point of ``python -m compare.migrate``."""
    # Our own text is ASCII; a user's identifiers may not be, and must not crash a C-locale pipe.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")
    cli_main("compare.migrate", _define_flags, _main, quiet_tf=False)


if __name__ == "__main__":
    main()
