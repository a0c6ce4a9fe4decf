"""``compare.migrate SCRIPT --check --call "FUNC(ARGS)"``: build the TF1 original and its tf.data
port with the same call, compare N batches of each, profile both and compare the profiles the way
``compare.run`` compares the seed's.

Each side runs in a child process (:mod:`.checkrun`) with a time limit: importing a user's script
runs its top-level code, and a hanging script must not hang us. The batches compared are taken
with randomness and queue order neutralised on both sides (see :mod:`.checkrun`), so values can
be compared element by element; the profiled batches run the pipelines as written.

Writes into ``--out DIR`` (new or empty): ``report.md``, ``report.json``, ``stages.png``,
``timelines.png``, ``merged_trace.json.gz`` (by :func:`compare.api.compare_traces`, sides named
"original" and "port"), ``check.json`` (the table and batches/s), ``original/`` (its
``timeline.json``) and ``port/`` (its TensorBoard profile, and the port module checked).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from common import atomic
from common.errors import InputError, say

#: Seconds each side may take (import, build, batches, profile) before it is stopped.
DEFAULT_TIMEOUT = 300
#: Values agree when |a - b| <= ATOL + RTOL * |b| (floats; other dtypes must be equal).
RTOL, ATOL = 1e-4, 1e-4
LABELS = {"a": "original", "b": "port"}
ORIGINS = {"a": "the original built by --call, one batch traced with FULL_TRACE",
           "b": "the port built by --call, profiled"}
#: Width of the table's value columns; longer cells are written in full below their row.
CELL = 28


@dataclasses.dataclass
class Row:
    """One line of the table: what was compared, both sides' values, pass or fail."""

    what: str
    original: str
    port: str
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class CheckResult:
    rows: list[Row]
    batches_per_s: dict[str, float | None]
    out: Path
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    def failures(self) -> list[Row]:
        return [r for r in self.rows if not r.ok]

    def table(self) -> str:
        """The table; a cell too long for its column is written in full below its row."""
        w = max(len(r.what) for r in self.rows)
        lines = [f"{'check':<{w}}  {'original':<{CELL}}  {'port':<{CELL}}  result"]
        for r in self.rows:
            long = [(side, text) for side, text in (("original", r.original), ("port", r.port))
                    if len(text) > CELL]
            cells = [text if len(text) <= CELL else "(below)" for text in (r.original, r.port)]
            lines.append(f"{r.what:<{w}}  {cells[0]:<{CELL}}  {cells[1]:<{CELL}}  "
                         f"{'pass' if r.ok else 'FAIL'}")
            if len(long) == 2 and r.original == r.port:
                long = [("both", r.original)]
            lines += [f"  {side}: {text}" for side, text in long]
        bps = "  ".join(f"{k} {v:.1f} batches/s" if v else f"{k} -"
                        for k, v in self.batches_per_s.items())
        return "\n".join(lines + [f"speed (pipelines as written): {bps}"])

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "rows": [r.to_dict() for r in self.rows],
                "batches_per_s": self.batches_per_s, "notes": self.notes}


@dataclasses.dataclass
class CheckOptions:
    call: str
    setup: str = ""
    batches: int = 3
    timed: int = 10
    timeout: float = DEFAULT_TIMEOUT


class Target(Protocol):
    """The pipeline function to check (``emit.EmittedPipeline``): its name in the port, the
    script function it replaces (``<module>``: the script's top-level code up to
    ``until_line``, its elements bound to ``output``)."""

    @property
    def name(self) -> str: ...
    @property
    def original(self) -> str: ...
    @property
    def until_line(self) -> int: ...
    @property
    def output(self) -> str: ...


#: One side's side.json and its batches (the arrays of each component, batch by batch).
Side = tuple[dict[str, Any], list[list[np.ndarray]]]


def _run_side(side: str, dest: Path, script: str, port: str, target: Target,
              opts: CheckOptions, log: Path) -> None:
    cmd = [sys.executable, "-m", "compare.migration.checkrun", side, str(dest),
           "--script", str(Path(script).resolve()), "--port", str(Path(port).resolve()),
           "--function", target.name if side == "port" else target.original,
           "--call", opts.call, "--setup", opts.setup, "--batches", str(opts.batches),
           "--timed", str(opts.timed)]
    if side == "original" and target.original == "<module>":
        cmd += ["--until", str(target.until_line), "--output", target.output]
        cmd[cmd.index("--function") + 1] = target.name
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with open(log, "ab") as err:
        try:
            proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  env=env, timeout=opts.timeout)
        except subprocess.TimeoutExpired:
            raise InputError(f"the {side} pipeline gave no {opts.batches} batches within "
                             f"{opts.timeout:.0f} s (a script that hangs or waits for "
                             "input?); stopped it") from None
        err.write(proc.stderr)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines()
                 if "error:" in ln]
        why = lines[-1].split("error:", 1)[1].strip() if lines else \
            f"exit code {proc.returncode}; see {log}"
        raise _SideFailed(side, why)


class _SideFailed(Exception):
    def __init__(self, side: str, why: str):
        super().__init__(f"{side}: {why}")
        self.side, self.why = side, why


def _load(dest: Path) -> Side:

    side = json.loads((dest / "side.json").read_text())
    data = np.load(dest / "batches.npz")
    n = 1 + max(int(k.split("_")[0][1:]) for k in data.files)
    c = len(side["components"])
    return side, [[data[f"b{i}_c{j}"] for j in range(c)] for i in range(n)]


def compare_batches(a: Side, b: Side) -> list[Row]:
    """The table's rows: structure, then shape, dtype, value range and values per component,
    batch by batch (padded batches may differ in shape from one batch to the next)."""
    (sa, ba), (sb, bb) = a, b
    rows = [Row("element structure", sa["structure"], sb["structure"],
                sa["structure"] == sb["structure"])]
    rows.append(Row("batches taken", str(len(ba)), str(len(bb)), len(ba) == len(bb)))
    if not rows[0].ok or len(sa["components"]) != len(sb["components"]):
        return rows
    n = min(len(ba), len(bb))
    for j in range(len(sa["components"])):
        xa = [np.asarray(x[j]) for x in ba[:n]]
        xb = [np.asarray(x[j]) for x in bb[:n]]
        shapes = [tuple(x.shape) for x in xa], [tuple(x.shape) for x in xb]
        rows.append(Row(f"[{j}] shape", _shapes(shapes[0]), _shapes(shapes[1]),
                        shapes[0] == shapes[1]))
        dt = sa["components"][j]["dtype"], sb["components"][j]["dtype"]
        rows.append(Row(f"[{j}] dtype", dt[0], dt[1], dt[0] == dt[1]))
        if not (rows[-1].ok and rows[-2].ok):
            continue
        rows += _values(j, xa, xb)
    return rows


def _shapes(shapes: list[tuple[int, ...]]) -> str:
    """One shape, or the shape of each batch when they differ (padded batches)."""
    distinct = list(dict.fromkeys(shapes))
    if len(distinct) == 1:
        return str(distinct[0])
    return "per batch: " + ", ".join(str(s) for s in shapes)


def _values(j: int, xa: list[np.ndarray], xb: list[np.ndarray]) -> list[Row]:
    """Value range and values over all batches, compared element by element in each batch."""
    a = np.concatenate([x.ravel() for x in xa]) if xa else np.array([])
    b = np.concatenate([x.ravel() for x in xb]) if xb else np.array([])
    if a.dtype.kind in "fiub" and a.size:
        ra = f"{a.min():.4g} .. {a.max():.4g}"
        rb = f"{b.min():.4g} .. {b.max():.4g}"
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        tol = ATOL + RTOL * np.abs(fb) if a.dtype.kind == "f" else 0
        bad = np.abs(fa - fb) > tol
        diff = float(np.abs(fa - fb).max())
        return [Row(f"[{j}] value range", ra, rb, ra == rb or not bad.any()),
                Row(f"[{j}] values", f"max |diff| {diff:.3g}",
                    f"{int(bad.sum())} of {a.size} off", not bad.any())]
    same = bool((a == b).all())
    return [Row(f"[{j}] values", "equal" if same else "differ", "", same)]


def run_check(script: str, port: str, target: Target, opts: CheckOptions,
              out: Path) -> CheckResult:
    """Build, compare and profile both sides; write the report into ``out`` (new or empty)."""
    from compare.api import compare_traces  # lazy: the comparison stack, only for --check

    out = atomic.prepare_out_dir(out)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.check-", dir=out.parent))
    log = work / "check.log"
    try:
        sides = {}
        for side in ("original", "port"):
            say(f"compare.migrate: running the {side} pipeline: {opts.call} ...")
            _run_side(side, work / side, script, port, target, opts, log)
            sides[side] = _load(work / side)
        rows = compare_batches(sides["original"], sides["port"])
        bps = {k: sides[k][0].get("batches_per_s") for k in sides}
        atomic.write_bytes(work / "port" / Path(port).name, Path(port).read_bytes())
        say("compare.migrate: comparing the profiles (compare.api.compare_traces) ...")
        compare_traces(work / "original" / "timeline.json", work / "port", out=out,
                       labels=dict(LABELS), origins=dict(ORIGINS))
        result = CheckResult(rows, bps, out)
        _finish(work, out, result)
        return result
    except _SideFailed as e:
        if e.side == "original":
            raise InputError(f"the original pipeline failed: {e.why}") from None
        result = CheckResult([Row("port runs", "yes", e.why, False)], {}, out)
        result.notes.append(f"the port failed: {e.why}")
        atomic.write_json(out / "check.json", result.to_json())
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _finish(work: Path, out: Path, result: CheckResult) -> None:
    """Move the sides in, add the check to report.md, write check.json."""
    for name in ("original", "port"):
        for f in ("batches.npz",):
            (work / name / f).unlink(missing_ok=True)
    staging = work / "move"
    staging.mkdir()
    for name in ("original", "port"):
        os.rename(work / name, staging / name)
    atomic.write_json(staging / "check.json", result.to_json())
    atomic.move_into(staging, out)
    _final_paths(out, str(work), str(out))
    report = out / "report.md"
    if report.is_file():
        text = report.read_text(encoding="utf-8")
        section = ("\n\n## The port checked against the original\n\n```text\n" + result.table()
                   + "\n```\n\nValues compared with randomness and queue order neutralised on "
                   "both sides; speed with the pipelines as written.\n")
        atomic.write_text(report, text + section)


def _final_paths(out: Path, work: str, final: str) -> None:
    """report.md and report.json name the sides where they are now (``out/original``,
    ``out/port``), not the working folder they were compared in, which is gone."""
    md = out / "report.md"
    if md.is_file():
        atomic.write_text(md, md.read_text(encoding="utf-8").replace(work, final))
    js = out / "report.json"
    if js.is_file():
        def fix(v: Any) -> Any:
            if isinstance(v, str):
                return v.replace(work, final)
            if isinstance(v, list):
                return [fix(x) for x in v]
            if isinstance(v, dict):
                return {k: fix(x) for k, x in v.items()}
            return v
        atomic.write_json(js, fix(json.loads(js.read_text(encoding="utf-8"))))


__all__ = ["CheckOptions", "CheckResult", "Row", "compare_batches", "run_check"]
