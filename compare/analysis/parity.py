"""Can the two traces be compared like for like? The parity checks xprof's session-diff
procedure makes first (``xprof/skills/xprof/references/diff_session.md``: workload
configuration — batch size, shapes, hardware — before any timing; host launch apart from device
time; say whether host overhead masks a device gain), made automatically from what a trace
records, plus what TF1 session traces add: a first run against a steady step, ``feed_dict``
input that happens outside the traced session run, one step against many, untraced gaps between
session runs.

Each :class:`Caveat` is what differs, as data (its kind and case, the numbers and names it
rests on); ``breaks`` caveats make the pair not like for like, and the verdict states them
before any number. :mod:`compare.output.caveat_words` says why each matters, in words.
"""
from __future__ import annotations

import numpy as np

from compare.analysis import workload
from compare.analysis.opdiff import OpDiff
from compare.analysis.result import SIDES, Caveat, Parity, PrecisionSign, Scale, StepBasis
from compare.analysis.rows import gpu_of, on_gpu, work_mask
from compare.analysis.side import Side
from compare.analysis.step_delta import Basis
from compare.model import intervals
from compare.model.events import Trace
from compare.vocabulary import ops as tfops
from compare.vocabulary.groups import FEED_NODE, FEED_OPS
from compare.vocabulary.thresholds import (
    CHANGE_NOTABLE,
    MASKED_DEVICE_BUSY,
    ONE_TIME_LEADS,
    PRECISION_CAST_FACTOR,
    PRECISION_CAST_MIN,
    SAME_PIPELINE_SHARE,
    SAME_PROGRAM_SHARE,
    STEP_NOISE_SINGLE,
    UNIFORM_SCALE_FACTOR,
    UNIFORM_SCALE_SHARE,
    UNTRACED_NOTABLE,
)

Sides = dict[str, Side]
#: Per side, the step time compared and its spread.
Steps = dict[str, StepBasis]

class _Facts:
    """What the checks read of the two sides, each measured once when first asked for."""

    def __init__(self, sides: dict[str, Side],
                 stages: dict[str, dict[str, float]] | None = None) -> None:
        self.sides = sides
        #: per side, the seed pipeline's stages with time (stage -> mean us per step)
        self.stages = stages or {k: {} for k in sides}
        self._one_time: dict[str, workload.OneTimeSigns | None] = {}
        self._precision: dict[str, workload.Precision] = {}
        self._shapes: workload.Shapes | None = None

    def one_time(self, k: str) -> workload.OneTimeSigns | None:
        """Signs of one-time work in the side's step when it has a single one (with several,
        the first is reported apart and steady steps are compared)."""
        if k not in self._one_time:
            s = self.sides[k]
            single = s.attribution.first is None and s.trace.steps
            self._one_time[k] = workload.one_time_signs(s) if single else None
        return self._one_time[k]

    def precision(self, k: str) -> workload.Precision:
        if k not in self._precision:
            self._precision[k] = workload.precision(self.sides[k])
        return self._precision[k]

    def shapes(self) -> workload.Shapes:
        if self._shapes is None:
            self._shapes = workload.compare_shapes(
                *(self.sides[k].trace.meta.get("op_shapes", {}) for k in ("a", "b")))
        return self._shapes


def check(sides: dict[str, Side], rows: list[OpDiff], bases: dict[str, Basis],
          stages: dict[str, dict[str, float]] | None = None) -> Parity:
    """``stages``: per side, the seed pipeline's stages with time (mean us per step), when the
    stages hold (nearly) all of both sides' steps; else None."""
    steps = {k: step_basis(s, bases[k]) for k, s in sides.items()}
    facts = _Facts(sides, stages)
    out: list[Caveat] = []
    for fn in (_identical, _first_run, _feed_dict, _steps, _untraced, _data_service, _program,
               _batch, _precision, _devices, _host_masks):
        out += fn(sides, rows, steps, facts)
    return Parity(out, steps, noise_share(list(steps.values())))


def noise_share(steps: list[StepBasis]) -> float:
    """The smallest change of the step, as a share of the slower side's, that these traces
    tell apart from run-to-run noise: the uncertainty of the difference of the two means
    (each mean's standard error from its steps' interquartile range, 0.93 IQR / sqrt(n) for
    normal-ish step times, two of them for ~95 %), and never below CHANGE_NOTABLE, nor below
    STEP_NOISE_SINGLE when a side has a single steady step (no spread to measure)."""
    slower = max((st.us for st in steps), default=0.0)
    if not slower:
        return CHANGE_NOTABLE
    few = min(st.steady for st in steps) < 2
    se = [0.93 * st.spread * st.us / np.sqrt(st.steady) for st in steps if st.steady >= 2]
    return max(CHANGE_NOTABLE, STEP_NOISE_SINGLE if few else 0.0,
               2.0 * float(np.sqrt(sum(x * x for x in se))) / slower)


def step_basis(s: Side, b: Basis) -> StepBasis:
    """The side's step time compared (:func:`compare.analysis.step_delta.basis`, from its
    account): the mean steady step, or its mean traced span."""
    vals = b.samples
    if not len(vals):
        return StepBasis(0.0, 0.0, 0, 0.0)
    spread = _spread(list(vals)) / b.us if b.us else 0.0
    return StepBasis(b.us, spread, len(vals), b.untraced_us if b.kind == "traced" else 0.0)


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

def _first_run(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    """A single-step side whose step shows one-time work (:func:`compare.analysis.workload.
    one_time_signs`: compiles, autotuning, a first call's set-up, a device or input pipeline
    set up in it) is a first run; a long input wait alone is not (a steady step can be
    input-bound: that is what the step costs)."""
    found = {k: facts.one_time(k) for k in sides}
    # signs of one-time work too small to matter (a few background kernels) are not named
    signs = {k: o for k, o in found.items() if o is not None and o.signs and
             o.share >= CHANGE_NOTABLE}
    flagged = {k: o for k, o in signs.items() if o.share >= ONE_TIME_LEADS}
    shares = {k: round(o.share, 3) for k, o in signs.items()}
    if len(flagged) == 2:
        return [Caveat("first_run", False, shares, "both", {"signs": flagged})]
    return [Caveat("first_run", k in flagged, {k: shares[k]}, "one" if k in flagged else "some",
                   {"side": k, "signs": {k: o}}) for k, o in signs.items()]


def _traced_input(s: Side) -> float:
    """Time per steady step in input ops the trace records (readers, queues, iterators,
    tf.data), fed tensors aside."""
    return sum(st.us for (name, op_type), st in s.ops.ops.items()
               if st.group == "input" and not FEED_NODE.match(name) and op_type not in FEED_OPS
               and op_type not in ("_Arg", "_Recv") and not tfops.COPY_EDGE.match(name))


def _feed_dict(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    traced = {k: _traced_input(s) for k, s in sides.items()}
    if bool(traced["a"]) == bool(traced["b"]):
        return []
    fed = next(k for k, v in traced.items() if not v)
    other = next(k for k in sides if k != fed)
    return [Caveat("feed_dict", True, {}, "feeds" if _has_feeds(sides[fed]) else "unread",
                   {"side": fed, "other": other, "other_input_us": traced[other]})]


def _has_feeds(s: Side) -> bool:
    names = s.trace.strings.names
    return any(FEED_NODE.match(n) or tfops.COPY_EDGE.match(n) and "_recv_" in n
               or "_arg_" in n for n in names)


def _steps(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    n = {k: len(s.attribution.steps) for k, s in sides.items()}
    a, b = n["a"], n["b"]
    if a == b == 1:
        return [Caveat("single_step", False, {}, "", {"noise": STEP_NOISE_SINGLE})]
    if min(a, b) == 1 and max(a, b) > 1:
        one = "a" if a == 1 else "b"
        many = "b" if one == "a" else "a"
        return [Caveat("steps", True, {}, "", {"one": one, "many": many, "steps": n[many]})]
    return []


def _untraced(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    return [Caveat("untraced", False, {}, "",
                   {"side": k, "untraced_us": st.untraced_us, "traced_us": st.us})
            for k, st in steps.items() if st.us and st.untraced_us >= UNTRACED_NOTABLE * (
                st.us + st.untraced_us)]


def _name_matched_share(rows: list[OpDiff], side: str) -> float:
    """Of a side's model ops' time (compute, optimizer, preprocessing), the share matched by
    node name (input waits and runtime say nothing of which program ran); of all its ops'
    time when it has no model op."""
    def val(r: OpDiff) -> float:
        return r.a_us if side == "a" else r.b_us

    model = [r for r in rows if r.group in _MODEL_GROUPS and val(r) > 0]
    timed = model or [r for r in rows if val(r) > 0]
    total = sum(val(r) for r in timed)
    named = sum(val(r) for r in timed if r.match in ("name", "scope", "xla"))
    return named / total if total else 1.0


_MODEL_GROUPS = frozenset({"compute", "optimizer", "preprocessing", "xla_run"})


def _identical(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    """Both sides hold the same events: one profile given twice, or two hosts' byte-identical
    copies of one (a multi-host demo ships such a pair); every difference would be zero."""
    a, b = sides["a"].trace, sides["b"].trace
    ea, eb = a.events, b.events
    if not len(ea) or len(ea) != len(eb) or not (
            np.array_equal(ea.ts, eb.ts) and np.array_equal(ea.dur, eb.dur)):
        return []
    na, nb = a.strings.names, b.strings.names
    if any(na[i] != nb[j] for i, j in zip(ea.name.tolist(), eb.name.tolist())):
        return []
    return [Caveat("identical", False, {}, "", {"events": len(ea)})]


def _program(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    """Different programs: a side holds no TensorFlow op, or the two share almost no op names
    -- unless both run the seed pipeline's stages (the stage rules place ops by scope and type
    too: an input pipeline moved to tf.data service workers and the rest fused by XLA keeps
    its stages, not its names)."""
    bare = [k for k in sides if not any((r.a_us if k == "a" else r.b_us) > 0 for r in rows)]
    if bare:
        return [Caveat("program", True, {"no_ops": bare}, "no_ops")]
    if _same_pipeline(facts.stages):
        return []
    shares = {k: _name_matched_share(rows, k) for k in sides}
    if min(shares.values()) >= SAME_PROGRAM_SHARE:
        return []
    return [Caveat("program", True, {}, "names", {"matched": shares})]


def _same_pipeline(stages: dict[str, dict[str, float]]) -> bool:
    """Both sides run the seed pipeline's stages, mostly the same ones (at least half of
    either side's)."""
    have = [set(st) for st in stages.values()]
    if len(have) != 2 or not all(have):
        return False
    shared = have[0] & have[1]
    return len(shared) >= SAME_PIPELINE_SHARE * max(len(h) for h in have)


def _data_service(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    """A side whose input came from tf.data service workers: what its pipeline handed them
    (read, decode, ...) ran in the workers' processes and is not in its trace, so its step
    counts only the wait for their elements and its CPU time leaves theirs out."""
    fetched = {k: _service_events(s.trace) for k, s in sides.items()}
    served = [k for k, n in fetched.items() if n]
    if not served:
        return []
    if len(served) == 2:
        return [Caveat("data_service", False, {"sides": served}, "both", {"events": fetched})]
    (k,) = served
    other = "b" if k == "a" else "a"
    moved = [st for st in facts.stages.get(other, {}) if not facts.stages.get(k, {}).get(st)]
    n = sides[k].service_workers
    return [Caveat("data_service", True, {"side": k, "moved": moved, "workers": n}, "one",
                   {"events": fetched, "other": other,
                    "moved_us": sum(facts.stages[other][st] for st in moved)})]


def _service_events(trace: Trace) -> int:
    """Events of a tf.data service client in ``trace`` (fetches, its iterator)."""
    names = trace.strings.names
    ids = [i for i, n in enumerate(names) if tfops.is_data_service(n)]
    return int(np.isin(trace.events.name, ids).sum()) if ids else 0


def _batch(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    """Batch size or input shape. Where both traces record tensor shapes (an xplane's
    allocation events), the shapes decide: leading dimensions that differ on the same ops are
    a different batch whatever the times do, and equal shapes rule one out. Otherwise the
    same graph with most of its op time scaled alike suggests one, unless the traces show a
    change of precision (:func:`_precision`), which scales the ops too."""
    sh = facts.shapes()
    if sh.recorded:
        b = sh.batch()
        if b is None:
            return []   # the shapes both traces record agree
        op, x, y = sh.example
        return [Caveat("batch", True, {"a": b[0], "b": b[1], "from": "shapes"}, "shapes",
                       {"differ": sh.differ[b], "compared": sh.compared,
                        "example": [op, str(x), str(y)], "per_example": _per_example(steps, b)})]
    scale = _uniform_scale(sides, rows, steps, facts)
    if scale is None or _precision_signs(facts):
        return []
    return [Caveat("batch", True, {"from": "times", "factor": round(scale.factor, 2)}, "times",
                   {"scale": scale})]


def _per_example(steps: dict[str, StepBasis], b: tuple[int, int]) -> dict[str, float]:
    """Per side, its step time per example (from the step times and the two batch sizes);
    empty when a side has no step time or no batch."""
    a_us, b_us = steps["a"].us, steps["b"].us
    if not (a_us and b_us and b[0] > 0 and b[1] > 0):
        return {}
    return {"a": a_us / b[0], "b": b_us / b[1]}


def _uniform_scale(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> Scale | None:
    """The same graph (on the same kind of device, no first run, XLA on both sides or
    neither) with at least UNIFORM_SCALE_SHARE of its matched op time scaled alike."""
    if _devices(sides, rows, steps, facts) or \
            any(c.breaks for c in _first_run(sides, rows, steps, facts)) or \
            min(_name_matched_share(rows, k) for k in sides) < UNIFORM_SCALE_SHARE:
        return None
    # ops compiled by XLA on either side are faster or slower for that reason: left out
    compiled = {k: {key for key, st in s.ops.ops.items() if st.unit} for k, s in sides.items()}
    if bool(compiled["a"]) != bool(compiled["b"]):
        return None   # XLA on one side only: not the same graph (and its threads compete)
    matched = [r for r in rows if r.match == "name" and r.group in ("compute", "preprocessing",
                                                                      "optimizer")
               and r.a_us > 0 and r.b_us > 0
               and not any(key in compiled[k] for k, keys in r.keys.items() for key in keys)]
    if len(matched) < 5:
        return None
    dev = all(r.a_device_us and r.b_device_us for r in matched[:5])
    pairs = [((r.b_device_us / r.a_device_us) if dev and r.a_device_us and r.b_device_us
              else r.b_us / r.a_us, max(r.a_us, r.b_us)) for r in matched]
    weight = sum(w for _, w in pairs)
    for up in (True, False):
        scaled = [(f, w) for f, w in pairs if (f >= UNIFORM_SCALE_FACTOR if up
                                               else f <= 1 / UNIFORM_SCALE_FACTOR)]
        share = sum(w for _, w in scaled) / weight if weight else 0.0
        if share >= UNIFORM_SCALE_SHARE:
            return Scale(float(np.median([f for f, _ in scaled])), len(scaled), len(pairs),
                          share, dev)
    return None


def _precision_signs(facts: _Facts) -> dict[str, list[PrecisionSign]]:
    """Per side, what its trace shows of mixed or half precision that the other's does not:
    dynamic loss scaling (``IsFinite`` nodes), many more ``Cast`` nodes, nodes named for mixed
    precision, tensors recorded in float16/bfloat16."""
    p = {k: facts.precision(k) for k in SIDES}
    if all(x.dtypes and not x.half for x in p.values()):
        return {}   # both traces record their tensors' dtypes, none of them half
    out = {}
    for k, o in (("a", "b"), ("b", "a")):
        mine, other = p[k], p[o]
        signs = []
        if mine.loss_scale and not other.loss_scale:
            signs.append(PrecisionSign("loss_scale", mine.loss_scale))
        if mine.named and not other.named:
            signs.append(PrecisionSign("named", names=list(mine.named)))
        if mine.half and not other.half:
            signs.append(PrecisionSign("half", mine.half))
        casts = mine.casts >= PRECISION_CAST_FACTOR * max(other.casts, 1) and \
            mine.casts - other.casts >= PRECISION_CAST_MIN
        if casts and (signs or mine.casts - other.casts >= 2 * PRECISION_CAST_MIN):
            # casts back up the other signs; alone only when there are many more of them
            signs.append(PrecisionSign("casts", mine.casts, other.casts))
        if signs:
            out[k] = signs
    return out if len(out) == 1 else {}


def _precision(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    """One side computes in mixed (or half) precision and the other does not: the same
    workload in another dtype, which scales every op's time (not a batch change)."""
    signs = _precision_signs(facts)
    if not signs:
        return []
    k, why = next(iter(signs.items()))
    same = facts.shapes()
    p = {x: facts.precision(x) for x in SIDES}
    return [Caveat("precision", False,
                   {"side": k, "casts": {x: v.casts for x, v in p.items()},
                    "loss_scale": {x: v.loss_scale for x, v in p.items()}}, "",
                   {"other": "b" if k == "a" else "a", "signs": why,
                    "scale": _uniform_scale(sides, rows, steps, facts),
                    "same_shapes": same.compared if same.recorded and same.batch() is None
                    else 0})]


def _gpus(s: Side) -> int:
    """GPUs whose rows hold work (stream, copy or device rows)."""
    pids = set(np.unique(s.trace.events.pid).tolist())
    return len({gpu_of(p.name) for p in s.trace.processes.values()
                if p.pid in pids and p.kind in ("stream", "memcpy", "device") and gpu_of(p.name)})


def _devices(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    g = {k: _gpus(s) for k, s in sides.items()}
    if (g["a"] > 0) == (g["b"] > 0):
        return []
    return [Caveat("devices", False, {}, "", {"gpus": g})]


def _device_busy(s: Side) -> float:
    """GPU time per steady step: the union of its kernels and copies inside each step's
    window (mean over the steady steps)."""
    ev, gpu = s.trace.events, on_gpu(s.trace) & work_mask(s.trace)
    idx = np.flatnonzero(gpu)
    vals = [intervals.union_us(ev.ts[idx], ev.end[idx], st.ts, st.ts + st.dur)
            for st in s.account.steady]
    return float(np.mean(vals)) if vals else 0.0


def _host_masks(sides: Sides, rows: list[OpDiff], steps: Steps, facts: _Facts) -> list[Caveat]:
    """xprof's host-overhead masking rule, for two traces that both ran on a GPU."""
    if not all(_gpus(s) for s in sides.values()):
        return []
    dev = {k: _device_busy(s) for k, s in sides.items()}
    step = {k: st.us for k, st in steps.items()}
    if not all(step.values()):
        return []
    gain = dev["a"] - dev["b"]
    if not gain:
        return []
    faster_dev = "b" if gain > 0 else "a"
    slower_dev = "a" if faster_dev == "b" else "b"
    big = max(step.values())
    step_gain = step[slower_dev] - step[faster_dev]
    busy = dev[faster_dev] / step[faster_dev]
    detail = {"side": faster_dev, "gain_us": abs(gain), "device_us": dev,
              "step_gain_us": step_gain, "busy": busy}
    if abs(gain) >= CHANGE_NOTABLE * big and busy <= MASKED_DEVICE_BUSY and \
            step_gain < 0.5 * abs(gain):
        return [Caveat("host_masks", False, {}, "masks", detail)]
    if step_gain <= 0 or abs(gain) < CHANGE_NOTABLE * big:
        return []   # no device-side gain worth a word, or the step follows the device
    return [Caveat("host_masks", False, {}, "follows", detail)]
