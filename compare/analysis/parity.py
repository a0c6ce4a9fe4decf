"""Can the two traces be compared like for like? The parity checks xprof's session-diff
procedure makes first (``xprof/skills/xprof/references/diff_session.md``: workload
configuration — batch size, shapes, hardware — before any timing; host launch apart from device
time; say whether host overhead masks a device gain), made automatically from what a trace
records, plus what TF1 session traces add: a first run against a steady step, ``feed_dict``
input that happens outside the traced session run, one step against many, untraced gaps between
session runs.

Each :class:`Caveat` says what differs and why it matters; ``breaks`` caveats make the pair
not like for like, and the verdict states them before any number.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from compare.analysis.rows import gpu_of, on_gpu, work_mask
from compare.fmt import duration as ms
from compare.vocabulary import ops as tfops
from compare.vocabulary.groups import FEED_NODE, FEED_OPS
from compare.vocabulary.thresholds import (
    CHANGE_NOTABLE,
    COMPILE_MIN_US,
    FIRST_RUN_OP_SHARE,
    FIRST_RUN_RATIO,
    MASKED_DEVICE_BUSY,
    SAME_PROGRAM_SHARE,
    STEP_NOISE_SINGLE,
    UNIFORM_SCALE_FACTOR,
    UNIFORM_SCALE_SHARE,
    UNTRACED_NOTABLE,
)

if TYPE_CHECKING:
    from compare.analysis.comparison import Side
    from compare.analysis.opdiff import OpDiff


@dataclasses.dataclass
class Caveat:
    kind: str         # first_run, feed_dict, steps, untraced, batch, program, devices, host_masks, single_step
    text: str
    breaks: bool      # the pair is not like for like because of it


@dataclasses.dataclass
class StepBasis:
    """The step time the verdict compares per side: the median steady step, or the median
    traced span of a session run when untraced time sits between runs."""

    us: float
    spread: float     # interquartile range / median of the steady steps; 0 with one step
    steady: int
    untraced_us: float


@dataclasses.dataclass
class Parity:
    caveats: list[Caveat]
    steps: dict[str, StepBasis]
    noise: float      # a step or op change below this share of the slower step is not named

    @property
    def like_for_like(self) -> bool:
        return not any(c.breaks for c in self.caveats)


def check(sides: dict[str, "Side"], labels: dict[str, str], rows: list["OpDiff"]) -> Parity:
    steps = {k: step_basis(s) for k, s in sides.items()}
    out: list[Caveat] = []
    for fn in (_first_run, _feed_dict, _steps, _untraced, _program, _batch, _devices,
               _host_masks):
        out += fn(sides, labels, rows, steps)
    return Parity(out, steps, noise_share(list(steps.values())))


def noise_share(steps: list[StepBasis]) -> float:
    """The smallest change of the step, as a share of the slower side's, that these traces
    tell apart from run-to-run noise: the uncertainty of the difference of the two medians
    (each median's standard error from its steps' interquartile range, 0.93 IQR / sqrt(n) for
    normal-ish step times, two of them for ~95 %), and never below CHANGE_NOTABLE, nor below
    STEP_NOISE_SINGLE when a side has a single steady step (no spread to measure)."""
    slower = max((st.us for st in steps), default=0.0)
    if not slower:
        return CHANGE_NOTABLE
    few = min(st.steady for st in steps) < 2
    se = [0.93 * st.spread * st.us / np.sqrt(st.steady) for st in steps if st.steady >= 2]
    return max(CHANGE_NOTABLE, STEP_NOISE_SINGLE if few else 0.0,
               2.0 * float(np.sqrt(sum(x * x for x in se))) / slower)


def step_basis(s: "Side") -> StepBasis:
    att, ev = s.attribution, s.trace.events
    spans, durs = [], []
    work = work_mask(s.trace)
    for st in att.steady:
        inside = work & (ev.step == st.num)
        durs.append(st.dur)
        if inside.any():
            spans.append(min(st.dur, float(ev.end[inside].max() - max(ev.ts[inside].min(),
                                                                       st.ts))))
        else:
            spans.append(st.dur)
    if not durs:
        return StepBasis(0.0, 0.0, 0, 0.0)
    med_span, med_dur = float(np.median(spans)), float(np.median(durs))
    # only a timeline's session runs leave untraced time between them (Python between runs)
    untraced = med_dur - med_span if s.trace.format == "timeline" else 0.0
    use = med_span if untraced >= UNTRACED_NOTABLE * med_dur else med_dur
    vals = spans if use == med_span else durs
    spread = _spread(vals) / use if use else 0.0
    return StepBasis(use, spread, len(durs), untraced)


def _spread(vals: list[float]) -> float:
    """How much steady steps vary: their interquartile range (robust to one odd step); half
    the range with two steps, 0 with one."""
    if len(vals) < 2:
        return 0.0
    if len(vals) == 2:
        return abs(vals[0] - vals[1]) / 2
    q1, q3 = np.percentile(vals, [25, 75])
    return float(q3 - q1)


# --------------------------------------------------------------------------------------------
# the checks: each (sides, labels, op rows, step bases) -> caveats

def _first_run(sides, labels, rows, steps) -> list[Caveat]:
    """A single-step side whose step compiles XLA, or is dominated by one op that takes many
    times less on the other side: one-time work."""
    out, flagged = [], {}
    for k, s in sides.items():
        if s.attribution.first is not None:   # steady steps are compared; the first apart
            continue
        why = _one_time(k, s, rows, steps[k].us)
        if why:
            flagged[k] = why
    if len(flagged) == 2:
        return [Caveat("first_run", "both traces look like first runs (" + "; ".join(
            flagged.values()) + "): comparable with each other, but neither shows a steady "
            "step", False)]
    for k, why in flagged.items():
        other = next(o for o in sides if o != k)
        out.append(Caveat("first_run", f"{labels[k]} looks like a first run and "
                          f"{labels[other]} does not: {why}; one-time work (library set-up, "
                          f"autotuning, compilation) is not a steady cost — profile a later "
                          f"step of {labels[k]}", True))
    return out


def _one_time(k: str, s: "Side", rows, step_us: float) -> str:
    compile_us = s.xla.compile_us
    if compile_us >= COMPILE_MIN_US and step_us and compile_us >= CHANGE_NOTABLE * step_us:
        return f"XLA compiles for {ms(compile_us)} in its only step"
    mine = (lambda r: r.a_us) if k == "legacy" else (lambda r: r.b_us)
    theirs = (lambda r: r.b_us) if k == "legacy" else (lambda r: r.a_us)
    for r in rows:
        if r.status not in ("same", "changed") or not step_us:
            continue
        if mine(r) >= FIRST_RUN_OP_SHARE * step_us and mine(r) >= FIRST_RUN_RATIO * theirs(r):
            return (f"{r.op} takes {ms(mine(r))} ({mine(r) / step_us:.0%} of its step) "
                    f"against {ms(theirs(r))} on the other side")
    return ""


def _traced_input(s: "Side") -> float:
    """Time per steady step in input ops the trace records (readers, queues, iterators,
    tf.data), fed tensors aside."""
    return sum(st.us for (name, op_type), st in s.ops.ops.items()
               if st.group == "input" and not FEED_NODE.match(name) and op_type not in FEED_OPS
               and op_type not in ("_Arg", "_Recv") and not tfops.COPY_EDGE.match(name))


def _feed_dict(sides, labels, rows, steps) -> list[Caveat]:
    traced = {k: _traced_input(s) for k, s in sides.items()}
    if bool(traced["legacy"]) == bool(traced["modern"]):
        return []
    fed = next(k for k, v in traced.items() if not v)
    other = next(k for k in sides if k != fed)
    how = "fed from Python (feed_dict)" if _has_feeds(sides[fed]) else \
        "not read by any op the trace records (feed_dict or a constant)"
    return [Caveat("feed_dict", f"{labels[fed]}'s input is {how}, so its input work happens "
                   f"outside the traced step, while {labels[other]}'s is inside it "
                   f"({ms(traced[other])} per step in input ops): the step times do not "
                   f"measure the same work — compare end-to-end throughput", True)]


def _has_feeds(s: "Side") -> bool:
    names = s.trace.strings.names
    return any(FEED_NODE.match(n) or tfops.COPY_EDGE.match(n) and "_recv_" in n
               or "_arg_" in n for n in names)


def _steps(sides, labels, rows, steps) -> list[Caveat]:
    n = {k: len(s.attribution.steps) for k, s in sides.items()}
    a, b = n["legacy"], n["modern"]
    if a == b == 1:
        return [Caveat("single_step", "one traced step per side: a single sample each, so "
                       f"differences under {STEP_NOISE_SINGLE:.0%} of the step are not told "
                       "apart from run-to-run noise", False)]
    if min(a, b) == 1 and max(a, b) > 1:
        one = "legacy" if a == 1 else "modern"
        many = "modern" if one == "legacy" else "legacy"
        return [Caveat("steps", f"one step against many: {labels[one]} holds 1 step, "
                       f"{labels[many]} {n[many]}; compared per step against "
                       f"{labels[many]}'s steady median (its first step apart)", True)]
    return []


def _untraced(sides, labels, rows, steps) -> list[Caveat]:
    return [Caveat("untraced", f"{labels[k]}'s steps include {ms(st.untraced_us)} with nothing "
                   f"traced between session runs (Python work the trace does not show); "
                   f"its steps are compared by their traced span ({ms(st.us)})", False)
            for k, st in steps.items() if st.us and st.untraced_us >= UNTRACED_NOTABLE * (
                st.us + st.untraced_us)]


def _name_matched_share(rows, side: str) -> float:
    """Of a side's model ops' time (compute, optimizer, preprocessing), the share matched by
    node name (input waits and runtime say nothing of which program ran)."""
    val = (lambda r: r.a_us) if side == "legacy" else (lambda r: r.b_us)
    rows = [r for r in rows if r.group in _MODEL_GROUPS]
    total = sum(val(r) for r in rows)
    named = sum(val(r) for r in rows if r.match in ("name", "scope", "xla"))
    return named / total if total else 1.0


_MODEL_GROUPS = frozenset({"compute", "optimizer", "preprocessing", "xla_run"})


def _program(sides, labels, rows, steps) -> list[Caveat]:
    shares = {k: _name_matched_share(rows, k) for k in sides}
    if min(shares.values()) >= SAME_PROGRAM_SHARE:
        return []
    return [Caveat("program", "the two traces share almost no op names (of the model's op "
                   "time, " + ", ".join(f"{labels[k]} {v:.0%}" for k, v in shares.items())
                   + " matches by name): different programs or models; ops are compared by "
                   "type", True)]


def _batch(sides, labels, rows, steps) -> list[Caveat]:
    """The same graph with (nearly) every op scaled alike: a different batch size or input
    shape (what the trace records of shapes is compared where it has any)."""
    if _devices(sides, labels, rows, steps) or _first_run(sides, labels, rows, steps) or \
            min(_name_matched_share(rows, k)
                                                   for k in sides) < UNIFORM_SCALE_SHARE:
        return []
    # ops compiled by XLA on either side are faster or slower for that reason: left out
    compiled = {k: {key for key, st in s.ops.ops.items() if st.unit} for k, s in sides.items()}
    if bool(compiled["legacy"]) != bool(compiled["modern"]):
        return []   # XLA on one side only: not the same graph (and its threads compete)
    matched = [r for r in rows if r.match == "name" and r.group in ("compute", "preprocessing",
                                                                      "optimizer")
               and r.a_us > 0 and r.b_us > 0
               and not any(key in compiled[k] for k, keys in r.keys.items() for key in keys)]
    if len(matched) < 5:
        return []
    dev = all(r.a_device_us and r.b_device_us for r in matched[:5])
    pairs = [((r.b_device_us / r.a_device_us) if dev and r.a_device_us and r.b_device_us
              else r.b_us / r.a_us, max(r.a_us, r.b_us)) for r in matched]
    weight = sum(w for _, w in pairs)
    for up in (True, False):
        scaled = [(f, w) for f, w in pairs if (f >= UNIFORM_SCALE_FACTOR if up
                                               else f <= 1 / UNIFORM_SCALE_FACTOR)]
        if weight and sum(w for _, w in scaled) >= UNIFORM_SCALE_SHARE * weight:
            factor = float(np.median([f for f, _ in scaled]))
            return [Caveat("batch", f"the same ops all take about {factor:.1f}x the time in "
                           f"{labels['modern']} ({len(scaled)} of {len(pairs)} matched ops, "
                           f"{'device' if dev else 'op'} time): a different batch size or "
                           "input shape is likely (the traces record no shapes) — compare per "
                           "example, not per step", True)]
    return []


def _gpus(s: "Side") -> int:
    """GPUs whose rows hold work (stream, copy or device rows)."""
    pids = set(np.unique(s.trace.events.pid).tolist())
    return len({gpu_of(p.name) for p in s.trace.processes.values()
                if p.pid in pids and p.kind in ("stream", "memcpy", "device") and gpu_of(p.name)})


def _devices(sides, labels, rows, steps) -> list[Caveat]:
    g = {k: _gpus(s) for k, s in sides.items()}
    if (g["legacy"] > 0) == (g["modern"] > 0):
        return []
    words = {k: f"{labels[k]} on {'the CPU only' if not v else f'{v} GPU(s)'}"
             for k, v in g.items()}
    return [Caveat("devices", f"different hardware: {words['legacy']}, {words['modern']}; a "
                   "GPU op's executor-row time is its launch, its kernels are on the stream "
                   "rows, and the op diff counts both", False)]


def _device_busy(s: "Side") -> float:
    """GPU time per steady step: the union of kernels and copies (median)."""
    ev, gpu = s.trace.events, on_gpu(s.trace) & work_mask(s.trace)
    vals = []
    for st in s.attribution.steady:
        idx = np.flatnonzero(gpu & (ev.step == st.num))
        spans = sorted(zip(ev.ts[idx].tolist(), ev.end[idx].tolist()))
        total, end = 0.0, -np.inf
        for t0, t1 in spans:
            if t1 > end:
                total += t1 - max(t0, end)
                end = t1
        vals.append(total)
    return float(np.median(vals)) if vals else 0.0


def _host_masks(sides, labels, rows, steps) -> list[Caveat]:
    """xprof's host-overhead masking rule, for two traces that both ran on a GPU."""
    if not all(_gpus(s) for s in sides.values()):
        return []
    dev = {k: _device_busy(s) for k, s in sides.items()}
    step = {k: st.us for k, st in steps.items()}
    if not all(step.values()):
        return []
    gain = dev["legacy"] - dev["modern"]
    if not gain:
        return []
    faster_dev = "modern" if gain > 0 else "legacy"
    slower_dev = "legacy" if faster_dev == "modern" else "modern"
    big = max(step.values())
    step_gain = step[slower_dev] - step[faster_dev]
    busy = dev[faster_dev] / step[faster_dev]
    if abs(gain) >= CHANGE_NOTABLE * big and busy <= MASKED_DEVICE_BUSY and \
            step_gain < 0.5 * abs(gain):
        return [Caveat("host_masks", f"host-side work masks the device-side gain: "
                       f"{labels[faster_dev]}'s GPU time per step is {ms(abs(gain))} lower "
                       f"({ms(dev[slower_dev])} -> {ms(dev[faster_dev])}), but its step only "
                       f"{ms(step_gain)} shorter; the GPU is busy {busy:.0%} of its step, "
                       "the rest is host dispatch, input and runtime", False)]
    if step_gain <= 0 or abs(gain) < CHANGE_NOTABLE * big:
        return []   # no device-side gain worth a word, or the step follows the device
    return [Caveat("host_masks", f"host-side work does not mask the device-side gain "
                   f"({labels[faster_dev]}'s GPU time per step {ms(abs(gain))} lower, its step "
                   f"{ms(step_gain)} shorter)", False)]
