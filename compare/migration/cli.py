"""``--emit`` and ``--check`` of ``python -m compare.migrate``: plain functions over the flags."""
from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path

from common import atomic
from common.errors import InputError
from compare.migration.check import CheckOptions, run_check
from compare.migration.checkrun import parse_call
from compare.migration.emit import Emitted, EmittedPipeline, emit
from compare.migration.model import Report


def write_port(emitted: Emitted, out: str, overwrite: bool, script: str) -> None:
    """Write the port atomically; an existing file is kept unless ``overwrite``, and the
    script itself never."""
    path = Path(out)
    if path.suffix != ".py":
        raise InputError(f"--emit {out}: the port is a Python module: give a .py file name")
    if path.exists() and os.path.samefile(path, script):
        raise InputError(f"--emit {out}: that is the script itself; give another file")
    if path.is_dir():
        raise InputError(f"--emit {out}: is a folder")
    if path.exists() and not overwrite:
        raise InputError(f"--emit {out}: exists; pass --overwrite to replace it")
    if not path.parent.is_dir():
        raise InputError(f"--emit {out}: no folder {path.parent}")
    atomic.write_text(path, emitted.text)


@dataclasses.dataclass
class Options:
    """``--emit`` and ``--check``'s flags, as plain values (the CLI module reads the flags)."""

    emit: str | None = None
    overwrite: bool = False
    check: bool = False
    call: str | None = None
    setup: str = ""
    batches: int = 3
    out: str | None = None
    port: str | None = None
    timeout: float = 300


def emit_and_check(script: str, report: Report, f: Options) -> int:
    """Emit (``--emit``), then check (``--check``); the exit code."""
    emitted = emit(report)
    if f.check:
        _check_flags(f, emitted)
    if f.emit:
        if not emitted.pipelines:
            sys.stdout.write(f"{script}: no input pipeline to port; {f.emit} not written\n")
            return 0
        write_port(emitted, f.emit, f.overwrite, script)
        sys.stdout.write(emitted.summary(f.emit))
    if not f.check:
        return 0
    return _check(script, emitted, f)


def _check_flags(f: Options, emitted: Emitted) -> EmittedPipeline:
    if not f.call:
        raise InputError("--check needs --call \"FUNC(ARGS)\": the pipeline function to build "
                         "and its arguments")
    name, _a, _k = parse_call(f.call)
    target = next((p for p in emitted.pipelines if p.name == name), None)
    if target is None:
        names = ", ".join(p.name for p in emitted.pipelines) or "none"
        raise InputError(f"--call {f.call}: {name} is not a pipeline function of the port "
                         f"(it has: {names})")
    if not target.complete and not f.port:
        raise InputError(f"--call {f.call}: the port of {name} has TODOs that stop it from "
                         "running; finish it (--emit OUT.py) and check it with --port OUT.py")
    if target.original != "<module>" and not target.returns:
        raise InputError(f"--call {f.call}: {target.original} does not return its batches "
                         "(it uses them itself), so the original cannot be called to compare")
    if f.port and not Path(f.port).is_file():
        raise InputError(f"--port {f.port}: no such file")
    return target


def _check(script: str, emitted: Emitted, f: Options) -> int:
    from compare.api import default_out  # lazy: the comparison stack, only for --check

    target = _check_flags(f, emitted)
    out = Path(f.out) if f.out else default_out()
    opts = CheckOptions(f.call or "", f.setup or "", f.batches, timeout=f.timeout)
    with tempfile.TemporaryDirectory(prefix="migrate-port-") as tmp:
        port = f.port or f.emit
        if not port:
            port = str(Path(tmp) / (Path(script).stem + "_tfdata.py"))
            atomic.write_text(port, emitted.text)
        result = run_check(script, port, target, opts, out)
    sys.stdout.write(result.table() + "\n")
    if result.ok:
        sys.stdout.write(f"check passed: the port gives the original's batches, with "
                         f"shuffles and random draws neutralised on both sides (so the order "
                         f"and the augmentation are not what was compared); report in "
                         f"{out}/report.md\n")
        return 0
    names = "; ".join(f"{r.what}: {r.original} vs {r.port}" for r in result.failures())
    sys.stdout.write(f"check FAILED: {names}\n")
    return 1
