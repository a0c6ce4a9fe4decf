"""``python -m benchmarks.gate_rates [--seeds N] [--json FILE]``: how often ``compare.gate``
raises a false alarm, and how often it finds a planted slowdown, measured over many seeds.

Each seed generates two sides as per-step samples (:class:`compare.gating.samples.
SideSamples`, what the gate reads of a trace) of one program and gates them with
:func:`compare.gating.judge.judge` — the gate's own code from the samples on; only the trace
reading is left out (``tests/test_gate.py`` shows on generated and real traces that the
trace path gives the same samples).

**The program** (:func:`program`): ``ops`` ops (default 500) in the groups of a model
(``input``, ``preprocessing``, ``compute: layer_k``, ``optimizer``), sizes log-uniform from
2 µs to 5 ms, per-op noise from 1% to 30% (small ops noisier), one op in ten running only in
some steps, and per step a shared factor (the machine's load) of ``noise`` (default 2%): the
step varies by about that much. Op times are whole µs, as timelines hold them (ties). One step
in fifty has one op hiccup (3x). A step is its rows' wall time, a row the sum of its ops'.

**Scenarios**: ``null`` (no change), ``step`` (every op ``slowdown`` slower, default 3%),
``op`` (one op of at least 200 µs 20% slower). Each is gated with the settings named in its
row; the rate is the share of seeds where the gate failed (null, step) or named the slowed op
and no other op (op), with its 95% Clopper-Pearson interval.
"""
from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
from scipy.stats import binomtest

from common import atomic
from compare.analysis.opdiff import OpStat
from compare.gating.judge import judge
from compare.gating.model import REGRESSED, Settings
from compare.gating.samples import Run, SideSamples

TYPES = ("Conv2D", "MatMul", "BiasAdd", "Relu", "Mul", "AddV2", "Cast", "Reshape",
         "ResizeBilinear", "DecodeJpeg", "ApplyAdam", "IteratorGetNext")
GROUPS = ("input", "preprocessing", *(f"compute: layer_{k}" for k in range(8)), "optimizer")


@dataclasses.dataclass
class Program:
    """What both sides run: per op its name, type, row, size (µs), noise and how often it
    runs."""

    names: list[str]
    types: list[str]
    rows: list[str]
    us: np.ndarray
    noise: np.ndarray
    present: np.ndarray


def program(seed: int, ops: int = 500) -> Program:
    rng = np.random.default_rng([seed, 1])
    us = np.exp(rng.uniform(np.log(2), np.log(5000), ops))
    noise = np.clip(0.3 - 0.06 * np.log10(us) * 1.6, 0.01, 0.3) * rng.uniform(0.5, 1.5, ops)
    present = np.where(rng.random(ops) < 0.1, rng.uniform(0.3, 0.9, ops), 1.0)
    rows = [GROUPS[i] for i in rng.integers(0, len(GROUPS), ops)]
    types = [TYPES[i] for i in rng.integers(0, len(TYPES), ops)]
    names = [f"{row.partition(': ')[2] or row}/op_{i}/{t}" for i, (row, t) in
             enumerate(zip(rows, types))]
    return Program(names, types, rows, us, np.clip(noise, 0.01, 0.3), present)


def side(p: Program, rng: np.random.Generator, steps: int, noise: float,
         factor: np.ndarray | float = 1.0) -> SideSamples:
    """One side's samples: ``factor`` scales each op's time (a slowdown)."""
    n = len(p.us)
    load = np.exp(rng.normal(0, noise, steps))
    per_op = np.exp(rng.normal(0, p.noise[:, None], (n, steps)))
    t = p.us[:, None] * np.asarray(factor).reshape(-1, 1) * per_op * load[None, :]
    hiccup = rng.random(steps) < 0.02
    t[rng.integers(0, n, steps)[hiccup], np.flatnonzero(hiccup)] *= 3
    t *= rng.random((n, steps)) < p.present[:, None]
    t = np.maximum(np.round(t), 0.0) * (t > 0)
    rows: dict[str, np.ndarray] = {}
    ops, op_us, op_wall = {}, {}, {}
    means, counts = t.mean(axis=1).tolist(), (t > 0).mean(axis=1).tolist()
    for i, (name, typ, row) in enumerate(zip(p.names, p.types, p.rows)):
        group = row.partition(": ")[0]
        rows[group] = rows.get(group, np.zeros(steps)) + t[i]
        key = (name, typ)
        mean = means[i]
        ops[key] = OpStat(typ, mean, 0.0, counts[i], "", group, key, mean)
        op_us[key] = t[i]
        op_wall[key] = {group: t[i]}
    dur = sum(rows.values())
    return SideSamples([Run("generated", "generated", steps + 1, steps, False)], dur,
                       np.zeros(steps), rows, ops, op_us, op_wall, {}, {})


def pair(seed: int, ops: int = 500, steps: int = 50, noise: float = 0.02,
         slowdown: float = 0.0, slow_op: int | None = None, op_slowdown: float = 0.0
         ) -> tuple[SideSamples, SideSamples]:
    p = program(seed, ops)
    rng = np.random.default_rng([seed, 2])
    factor = np.full(ops, 1.0 + slowdown)
    if slow_op is not None:
        factor[slow_op] *= 1.0 + op_slowdown
    return side(p, rng, steps, noise), side(p, rng, steps, noise, factor)


def slowed_op(seed: int, ops: int = 500, least_us: float = 200.0) -> int:
    """The op a seed slows: the first that runs every step and takes at least ``least_us``."""
    p = program(seed, ops)
    return int(np.flatnonzero((p.us >= least_us) & (p.present == 1.0))[0])


#: (scenario, what the pair has, gate settings, what counts) per row of the table.
SETTINGS = {
    "default": Settings(),
    "pure statistics (max-slowdown 0, min-effect 0)": Settings(max_slowdown=0.0,
                                                                min_effect_us=0.0),
    "max-slowdown 1%": Settings(max_slowdown=0.01),
    "max-slowdown 2%": Settings(max_slowdown=0.02),
    "min-effect 0": Settings(min_effect_us=0.0),
}


def failed(a: SideSamples, b: SideSamples, s: Settings) -> bool:
    return judge(a, b, s).outcome == REGRESSED


def named_alone(a: SideSamples, b: SideSamples, s: Settings, name: str) -> bool:
    """The op named, and no other op, among the regressions."""
    ops = [c.name for c in judge(a, b, s).regressions if c.level == "op"]
    return ops == [name]


def rate(scenario: str, setting: str, seeds: int, steps: int = 50, ops: int = 500,
         noise: float = 0.02, slowdown: float = 0.03) -> dict:
    s = SETTINGS[setting]
    hits = 0
    t0 = time.perf_counter()
    for seed in range(seeds):
        if scenario == "null":
            hits += failed(*pair(seed, ops, steps, noise), s)
        elif scenario == "step":
            hits += failed(*pair(seed, ops, steps, noise, slowdown=slowdown), s)
        else:
            k = slowed_op(seed, ops)
            a, b = pair(seed, ops, steps, noise, slow_op=k, op_slowdown=0.2)
            hits += named_alone(a, b, s, program(seed, ops).names[k] + " (" +
                                program(seed, ops).types[k] + ")")
    ci = binomtest(hits, seeds).proportion_ci(0.95)
    return {"scenario": scenario, "settings": setting, "seeds": seeds, "steps": steps,
            "ops": ops, "noise": noise, "slowdown": slowdown if scenario == "step" else None,
            "hits": hits, "rate": hits / seeds, "ci95": [round(ci.low, 4), round(ci.high, 4)],
            "seconds": round(time.perf_counter() - t0, 1)}


ROWS = (("null", "default"), ("null", "pure statistics (max-slowdown 0, min-effect 0)"),
        ("step", "max-slowdown 1%"), ("step", "max-slowdown 2%"), ("step", "default"),
        ("op", "min-effect 0"))


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gate_rates", description=(
        "How often compare.gate raises a false alarm, and how often it finds a planted "
        "slowdown, over many seeds of generated per-step samples."))
    ap.add_argument("--seeds", type=int, default=1000, help="seeds per scenario")
    ap.add_argument("--steps", type=int, default=50, help="steps per side")
    ap.add_argument("--ops", type=int, default=500, help="ops in the generated program")
    ap.add_argument("--noise", type=float, default=0.02, help="per-step shared factor (the machine's load), as a share")
    ap.add_argument("--slowdown", type=float, default=0.03, help="the planted slowdown")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    rows = []
    print(f"{'scenario':8} {'settings':50} {'seeds':>6} {'rate':>7}  95% interval")
    for scenario, setting in ROWS:
        r = rate(scenario, setting, args.seeds, args.steps, args.ops, args.noise,
                 args.slowdown)
        rows.append(r)
        print(f"{scenario:8} {setting:50} {r['seeds']:6d} {r['rate']:7.1%}  "
              f"[{r['ci95'][0]:.1%}, {r['ci95'][1]:.1%}]  ({r['seconds']} s)", flush=True)
    if args.json:
        atomic.write_json(args.json, {"rows": rows, "args": vars(args)})


if __name__ == "__main__":
    main()
