"""A side's samples kept in a small JSON file (``compare.gate --save-baseline TRACE OUT.json``),
so CI can gate a new trace against them without the baseline's trace.

The file holds exactly what the gate reads of a side (:class:`compare.gating.samples.
SideSamples`): per pooled steady step the window and its untraced edges, the wall time of each
term of the step difference, each op's op time and wall time per term with its op-table row
(so ops match across sides as compare.run matches them), the time no op owns by event name
(means) and the XLA units' members. Times in µs, kept to the nanosecond. One line per term,
op and event, so a baseline kept in a repository diffs line by line. Its JSON Schema is ``baseline.schema.json`` beside this module (checked in the tests);
``version`` goes up whenever an older reader would misread a newer file.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from common import atomic
from common.errors import InputError
from compare.analysis.opdiff import OpStat
from compare.gating.samples import Run, SideSamples

FORMAT = "compare.gate baseline"
VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("baseline.schema.json")
#: How far into a file its format marker must appear.
_HEAD = 512


def is_baseline(path: str | os.PathLike) -> bool:
    """``path`` is a file that says it is a baseline (its first bytes)."""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        with open(p, "rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and FORMAT.encode() in head


def _num(x: float) -> float | int:
    x = round(float(x), 3)
    return int(x) if x.is_integer() else x


def _nums(a: np.ndarray) -> list:
    return [_num(x) for x in a.tolist()]


def to_json(s: SideSamples) -> dict:
    """The document, keys in the order they are written."""
    return {
        "format": FORMAT, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "runs": [{"source": r.source, "format": r.format, "steps": r.steps, "steady": r.steady,
                  "traced": r.traced, "warnings": r.warnings} for r in s.runs],
        "steps": {"dur_us": _nums(s.dur_us), "untraced_us": _nums(s.untraced_us)},
        "terms": {k: _nums(v) for k, v in s.terms.items()},
        "ops": [{"name": k[0], "type": k[1], "op_type": st.type, "unit": st.unit,
                 "group": st.group, "host_us": _num(st.host_us),
                 "device_us": _num(st.device_us), "count": _num(st.count),
                 "wall_us": _num(st.wall_us), "op_us": _nums(s.op_us[k]),
                 "wall_by_term": {t: _nums(v) for t, v in s.op_wall.get(k, {}).items()}}
                for k, st in s.ops.items()],
        "events": [{"term": t, "name": n, "us": _num(us)}
                   for t, names in s.events.items() for n, us in names.items()],
        "units": {u: sorted(m) for u, m in s.units.items()},
    }


def dumps(doc: dict) -> str:
    """``doc`` as text: one line per top-level key, and per entry of the long tables."""
    lines = []
    for key, value in doc.items():
        head = json.dumps(key) + ": "
        if key in ("runs", "ops", "events") and value:
            body = "[\n" + ",\n".join("  " + _compact(v) for v in value) + "\n]"
        elif key == "terms" and value:
            body = "{\n" + ",\n".join(f"  {json.dumps(k)}: {_compact(v)}"
                                      for k, v in value.items()) + "\n}"
        else:
            body = _compact(value)
        lines.append(head + body)
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _compact(v) -> str:
    return json.dumps(v, separators=(", ", ": "), ensure_ascii=False)


def write(s: SideSamples, out: str | os.PathLike) -> int:
    """Save ``s`` to ``out`` (atomically); its size in bytes."""
    text = dumps(to_json(s))
    atomic.write_text(out, text)
    return len(text.encode("utf-8"))


def read(path: str | os.PathLike) -> SideSamples:
    """A saved baseline; a damaged or unknown one is an :class:`InputError` naming it."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: cannot read the baseline ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f"{path}: not a compare.gate baseline")
    version = doc.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise InputError(f"{path}: baseline version {version!r}; this compare.gate reads "
                         f"version {VERSION} (save the baseline again with this one)")
    try:
        return _samples(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"{path}: damaged compare.gate baseline ({type(e).__name__}: "
                         f"{e})") from None


def _array(values, n: int, what: str) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    if a.shape != (n,) or not np.isfinite(a).all():
        raise ValueError(f"{what}: {n} finite numbers expected")
    return a


def _samples(doc: dict) -> SideSamples:
    dur = np.asarray(doc["steps"]["dur_us"], dtype=float)
    n = len(dur)
    if n == 0:
        raise ValueError("no steps")
    runs = [Run(str(r["source"]), str(r["format"]), int(r["steps"]), int(r["steady"]),
                bool(r["traced"]), [str(w) for w in r.get("warnings", [])])
            for r in doc["runs"]]
    if sum(r.steady for r in runs) != n:
        raise ValueError(f"the runs' steps do not add up to the {n} steps kept")
    ops, op_us, op_wall = {}, {}, {}
    for o in doc["ops"]:
        key = (str(o["name"]), str(o["type"]))
        ops[key] = OpStat(str(o["op_type"]), float(o["host_us"]), float(o["device_us"]),
                          float(o["count"]), str(o["unit"]), str(o["group"]), key,
                          float(o["wall_us"]))
        op_us[key] = _array(o["op_us"], n, f"op {key[0]}")
        if o["wall_by_term"]:
            op_wall[key] = {str(t): _array(v, n, f"op {key[0]} in {t}")
                            for t, v in o["wall_by_term"].items()}
    events: dict = {}
    for e in doc["events"]:
        events.setdefault(str(e["term"]), {})[str(e["name"])] = float(e["us"])
    return SideSamples(
        runs, _array(dur, n, "steps.dur_us"),
        _array(doc["steps"]["untraced_us"], n, "steps.untraced_us"),
        {str(k): _array(v, n, f"term {k}") for k, v in doc["terms"].items()},
        ops, op_us, op_wall, events,
        {str(u): {str(m) for m in ms} for u, ms in doc["units"].items()})
