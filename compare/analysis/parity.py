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

from compare.analysis import workload
from compare.analysis.rows import gpu_of, on_gpu, work_mask
from compare.fmt import duration as ms
from compare.fmt import listed
from compare.model import intervals
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

if TYPE_CHECKING:
    from compare.analysis.comparison import Side
    from compare.analysis.opdiff import OpDiff
    from compare.analysis.step_delta import Basis


@dataclasses.dataclass
class Caveat:
    kind: str         # identical, first_run, feed_dict, steps, untraced, batch, precision,
    #                   program, devices, host_masks, single_step
    text: str
    breaks: bool      # the pair is not like for like because of it
    facts: dict = dataclasses.field(default_factory=dict)   # what it rests on, as numbers


@dataclasses.dataclass
class StepBasis:
    """The step time the verdict compares per side: the mean steady step, or the mean traced
    span of a session run when untraced time sits between runs."""

    us: float
    spread: float     # interquartile range / mean of the steady steps; 0 with one step
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


class _Facts:
    """What the checks read of the two sides, each measured once when first asked for."""

    def __init__(self, sides: dict[str, "Side"],
                 stages: dict[str, dict[str, float]] | None = None) -> None:
        self.sides = sides
        #: per side, the seed pipeline's stages with time (stage -> mean us per step)
        self.stages = stages or {k: {} for k in sides}
        self._one_time: dict[str, workload.OneTimeSigns | None] = {}
        self._precision: dict[str, workload.Precision] = {}
        self._shapes: workload.Shapes | None = None

    def one_time(self, k: str) -> "workload.OneTimeSigns | None":
        """Signs of one-time work in the side's step when it has a single one (with several,
        the first is reported apart and steady steps are compared)."""
        if k not in self._one_time:
            s = self.sides[k]
            single = s.attribution.first is None and s.trace.steps
            self._one_time[k] = workload.one_time_signs(s) if single else None
        return self._one_time[k]

    def precision(self, k: str) -> "workload.Precision":
        if k not in self._precision:
            self._precision[k] = workload.precision(self.sides[k])
        return self._precision[k]

    def shapes(self) -> "workload.Shapes":
        if self._shapes is None:
            self._shapes = workload.compare_shapes(
                *(self.sides[k].trace.meta.get("op_shapes", {}) for k in ("a", "b")))
        return self._shapes


def check(sides: dict[str, "Side"], labels: dict[str, str], rows: list["OpDiff"],
          bases: dict[str, "Basis"], stages: dict[str, dict[str, float]] | None = None
          ) -> Parity:
    """``stages``: per side, the seed pipeline's stages with time (mean us per step), when the
    stages hold (nearly) all of both sides' steps; else None."""
    steps = {k: step_basis(s, bases[k]) for k, s in sides.items()}
    facts = _Facts(sides, stages)
    out: list[Caveat] = []
    for fn in (_identical, _first_run, _feed_dict, _steps, _untraced, _data_service, _program,
               _batch, _precision, _devices, _host_masks):
        out += fn(sides, labels, rows, steps, facts)
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


def step_basis(s: "Side", b: "Basis") -> StepBasis:
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

def _first_run(sides, labels, rows, steps, facts) -> list[Caveat]:
    """A single-step side whose step shows one-time work (:func:`compare.analysis.workload.
    one_time_signs`: compiles, autotuning, a first call's set-up, a device or input pipeline
    set up in it) is a first run; a long input wait alone is not (a steady step can be
    input-bound: that is what the step costs)."""
    found = {k: facts.one_time(k) for k in sides}
    # signs of one-time work too small to matter (a few background kernels) are not named
    signs = {k: o for k, o in found.items() if o is not None and o.signs and
             o.share >= CHANGE_NOTABLE}
    flagged = {k: o for k, o in signs.items() if o.share >= ONE_TIME_LEADS}
    why = {k: f"{'; '.join(o.signs)}; {o.share:.0%} of the step" for k, o in signs.items()}
    facts = {k: round(o.share, 3) for k, o in signs.items()}
    if len(flagged) == 2:
        return [Caveat("first_run", "both traces look like first runs (" + "; ".join(
            f"{labels[k]}: {why[k]}" for k in flagged) + "): comparable with each other, but "
            "neither shows a steady step", False, facts)]
    out = []
    for k, o in signs.items():
        other = next(x for x in sides if x != k)
        if k in flagged:
            out.append(Caveat("first_run", f"{labels[k]} looks like a first run and "
                              f"{labels[other]} does not: its only step shows one-time work "
                              f"({why[k]}); one-time work is not a steady cost — profile a "
                              f"later step of {labels[k]}", True, {k: facts[k]}))
        else:
            out.append(Caveat("first_run", f"{labels[k]}'s only step carries some one-time "
                              f"work ({why[k]}), too little to change the comparison", False,
                              {k: facts[k]}))
    return out


def _traced_input(s: "Side") -> float:
    """Time per steady step in input ops the trace records (readers, queues, iterators,
    tf.data), fed tensors aside."""
    return sum(st.us for (name, op_type), st in s.ops.ops.items()
               if st.group == "input" and not FEED_NODE.match(name) and op_type not in FEED_OPS
               and op_type not in ("_Arg", "_Recv") and not tfops.COPY_EDGE.match(name))


def _feed_dict(sides, labels, rows, steps, facts=None) -> list[Caveat]:
    traced = {k: _traced_input(s) for k, s in sides.items()}
    if bool(traced["a"]) == bool(traced["b"]):
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


def _steps(sides, labels, rows, steps, facts=None) -> list[Caveat]:
    n = {k: len(s.attribution.steps) for k, s in sides.items()}
    a, b = n["a"], n["b"]
    if a == b == 1:
        return [Caveat("single_step", "one traced step per side: a single sample each, so "
                       f"differences under {STEP_NOISE_SINGLE:.0%} of the step are not told "
                       "apart from run-to-run noise (a typical spread between runs, not one "
                       "these traces measure: a short step varies more)", False)]
    if min(a, b) == 1 and max(a, b) > 1:
        one = "a" if a == 1 else "b"
        many = "b" if one == "a" else "a"
        return [Caveat("steps", f"one step against many: {labels[one]} holds 1 step, "
                       f"{labels[many]} {n[many]}; compared per step against "
                       f"{labels[many]}'s steady mean (its first step apart)", True)]
    return []


def _untraced(sides, labels, rows, steps, facts=None) -> list[Caveat]:
    return [Caveat("untraced", f"{labels[k]}'s steps include {ms(st.untraced_us)} with nothing "
                   f"traced between session runs (Python work the trace does not show); "
                   f"its steps are compared by their traced span ({ms(st.us)})", False)
            for k, st in steps.items() if st.us and st.untraced_us >= UNTRACED_NOTABLE * (
                st.us + st.untraced_us)]


def _name_matched_share(rows, side: str) -> float:
    """Of a side's model ops' time (compute, optimizer, preprocessing), the share matched by
    node name (input waits and runtime say nothing of which program ran); of all its ops'
    time when it has no model op."""
    val = (lambda r: r.a_us) if side == "a" else (lambda r: r.b_us)
    model = [r for r in rows if r.group in _MODEL_GROUPS and val(r) > 0]
    rows = model or [r for r in rows if val(r) > 0]
    total = sum(val(r) for r in rows)
    named = sum(val(r) for r in rows if r.match in ("name", "scope", "xla"))
    return named / total if total else 1.0


_MODEL_GROUPS = frozenset({"compute", "optimizer", "preprocessing", "xla_run"})


def _identical(sides, labels, rows, steps, facts=None) -> list[Caveat]:
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
    return [Caveat("identical", f"{labels['a']} and {labels['b']} hold the same "
                   f"{len(ea):,} events (one profile given twice, or byte-identical copies of "
                   f"one): there is nothing to compare", False)]


def _program(sides, labels, rows, steps, facts) -> list[Caveat]:
    """Different programs: a side holds no TensorFlow op, or the two share almost no op names
    -- unless both run the seed pipeline's stages (the stage rules place ops by scope and type
    too: an input pipeline moved to tf.data service workers and the rest fused by XLA keeps
    its stages, not its names)."""
    bare = [k for k in sides if not any((r.a_us if k == "a" else r.b_us) > 0 for r in rows)]
    if bare:
        who = " and ".join(labels[k] for k in bare)
        return [Caveat("program", f"{who} hold{'s' if len(bare) == 1 else ''} no TensorFlow "
                       "op (no event names an op type or a graph node): nothing shows that the "
                       "two run the same program, and there is no op to compare; only the "
                       "steps' spans and their events' names are", True, {"no_ops": bare})]
    if _same_pipeline(facts.stages):
        return []
    shares = {k: _name_matched_share(rows, k) for k in sides}
    if min(shares.values()) >= SAME_PROGRAM_SHARE:
        return []
    return [Caveat("program", "the two traces share almost no op names (of the model's op "
                   "time, " + ", ".join(f"{labels[k]} {v:.0%}" for k, v in shares.items())
                   + " matches by name): different programs or models; ops are compared by "
                   "type", True)]


def _same_pipeline(stages: dict[str, dict[str, float]]) -> bool:
    """Both sides run the seed pipeline's stages, mostly the same ones (at least half of
    either side's)."""
    have = [set(st) for st in stages.values()]
    if len(have) != 2 or not all(have):
        return False
    shared = have[0] & have[1]
    return len(shared) >= SAME_PIPELINE_SHARE * max(len(h) for h in have)


def _data_service(sides, labels, rows, steps, facts) -> list[Caveat]:
    """A side whose input came from tf.data service workers: what its pipeline handed them
    (read, decode, ...) ran in the workers' processes and is not in its trace, so its step
    counts only the wait for their elements and its CPU time leaves theirs out."""
    fetched = {k: _service_events(s.trace) for k, s in sides.items()}
    served = [k for k, n in fetched.items() if n]
    if not served:
        return []
    if len(served) == 2:
        return [Caveat("data_service", f"both read their input from tf.data service workers "
                       f"({fetched['a']:,} and {fetched['b']:,} events of its client): what "
                       f"each pipeline handed them ran in the workers' processes, in neither "
                       f"trace", False, {"sides": served})]
    (k,) = served
    other = "b" if k == "a" else "a"
    moved = [st for st in facts.stages.get(other, {}) if not facts.stages.get(k, {}).get(st)]
    n = sides[k].service_workers
    workers = f"{n} tf.data service worker{'s' if n != 1 else ''}" if n else \
        "tf.data service workers (how many, its trace does not show)"
    gone = (f": its {listed(moved)} {'has' if len(moved) == 1 else 'have'} no time in its "
            f"trace ({labels[other]} spends {ms(sum(facts.stages[other][st] for st in moved))} "
            f"a step in them)" if moved else "")
    return [Caveat("data_service", f"{labels[k]}'s input came from {workers} "
                   f"({fetched[k]:,} events of the service's client in its trace){gone}; what "
                   f"its pipeline handed the service ran in the workers' processes, not in this "
                   f"trace, so {labels[k]}'s step counts only the wait for their elements and "
                   f"its CPU time leaves the workers' out", True,
                   {"side": k, "moved": moved, "workers": n})]


def _service_events(trace) -> int:
    """Events of a tf.data service client in ``trace`` (fetches, its iterator)."""
    names = trace.strings.names
    ids = [i for i, n in enumerate(names) if tfops.is_data_service(n)]
    return int(np.isin(trace.events.name, ids).sum()) if ids else 0


def _batch(sides, labels, rows, steps, facts) -> list[Caveat]:
    """Batch size or input shape. Where both traces record tensor shapes (an xplane's
    allocation events), the shapes decide: leading dimensions that differ on the same ops are
    a different batch whatever the times do, and equal shapes rule one out. Otherwise the
    same graph with most of its op time scaled alike suggests one, unless the traces show a
    change of precision (:func:`_precision`), which scales the ops too."""
    la, lb = labels["a"], labels["b"]
    sh = facts.shapes()
    if sh.recorded:
        b = sh.batch()
        if b is None:
            return []   # the shapes both traces record agree
        op, x, y = sh.example
        per = _per_example(steps, b, labels)
        return [Caveat("batch", f"different batch sizes: {b[0]} in {la}, {b[1]} in {lb} (the "
                       f"leading dimension of {sh.differ[b]} of the {sh.compared} ops whose "
                       f"output shapes both traces record, e.g. {op} {x} vs {y}) — compare "
                       f"per example, not per step{per}", True,
                       {"a": b[0], "b": b[1], "from": "shapes"})]
    scale = _uniform_scale(sides, labels, rows, steps, facts)
    if scale is None or _precision_signs(facts, labels):
        return []
    return [Caveat("batch", f"{scale.words(lb)}: a different batch size or input shape is "
                   "likely (the traces record no shapes) — compare per example, not per step",
                   True, {"from": "times", "factor": round(scale.factor, 2)})]


def _per_example(steps, b: tuple[int, int], labels) -> str:
    """``: per example, B is 3.2x slower`` from the step times and the two batch sizes."""
    a_us, b_us = steps["a"].us, steps["b"].us
    if not (a_us and b_us and b[0] > 0 and b[1] > 0):
        return ""
    pa, pb = a_us / b[0], b_us / b[1]
    slow, fast = ("b", "a") if pb > pa else ("a", "b")
    return (f": per example {labels[slow]} is {max(pa, pb) / min(pa, pb):.1f}x slower "
            f"({ms(max(pa, pb))} vs {ms(min(pa, pb))})")


@dataclasses.dataclass
class _Scale:
    """Matched ops that take about ``factor`` times as long on side b."""

    factor: float
    scaled: int
    matched: int
    share: float          # of the matched ops' time
    device: bool

    def words(self, side: str) -> str:
        most = "nearly all" if self.share >= 0.95 else "most"
        return (f"{most} of the op time matched by name ({self.share:.0%}; {self.scaled} of "
                f"{self.matched} ops) takes about {self.factor:.1f}x as long in {side} "
                f"({'device' if self.device else 'op'} time)")


def _uniform_scale(sides, labels, rows, steps, facts) -> _Scale | None:
    """The same graph (on the same kind of device, no first run, XLA on both sides or
    neither) with at least UNIFORM_SCALE_SHARE of its matched op time scaled alike."""
    if _devices(sides, labels, rows, steps) or \
            any(c.breaks for c in _first_run(sides, labels, rows, steps, facts)) or \
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
            return _Scale(float(np.median([f for f, _ in scaled])), len(scaled), len(pairs),
                          share, dev)
    return None


def _precision_signs(facts, labels) -> dict[str, list[str]]:
    """Per side, what its trace shows of mixed or half precision that the other's does not:
    dynamic loss scaling (``IsFinite`` nodes), many more ``Cast`` nodes, nodes named for mixed
    precision, tensors recorded in float16/bfloat16."""
    p = {k: facts.precision(k) for k in labels}
    if all(x.dtypes and not x.half for x in p.values()):
        return {}   # both traces record their tensors' dtypes, none of them half
    out = {}
    for k, o in (("a", "b"), ("b", "a")):
        mine, other = p[k], p[o]
        signs = []
        if mine.loss_scale and not other.loss_scale:
            signs.append(f"{mine.loss_scale} loss-scaling IsFinite node(s) only in {labels[k]}")
        if mine.named and not other.named:
            signs.append("nodes named for mixed precision (" + ", ".join(mine.named) + ")")
        if mine.half and not other.half:
            signs.append(f"{mine.half} recorded tensor(s) in float16/bfloat16")
        casts = mine.casts >= PRECISION_CAST_FACTOR * max(other.casts, 1) and \
            mine.casts - other.casts >= PRECISION_CAST_MIN
        if casts and (signs or mine.casts - other.casts >= 2 * PRECISION_CAST_MIN):
            # casts back up the other signs; alone only when there are many more of them
            signs.append(f"Cast nodes {other.casts} in {labels[o]}, {mine.casts} in "
                         f"{labels[k]}")
        if signs:
            out[k] = signs
    return out if len(out) == 1 else {}


def _precision(sides, labels, rows, steps, facts) -> list[Caveat]:
    """One side computes in mixed (or half) precision and the other does not: the same
    workload in another dtype, which scales every op's time (not a batch change)."""
    signs = _precision_signs(facts, labels)
    if not signs:
        return []
    k, why = next(iter(signs.items()))
    other = "b" if k == "a" else "a"
    scale = _uniform_scale(sides, labels, rows, steps, facts)
    same = facts.shapes()
    shapes = (f"; the {same.compared} op output shapes both traces record are equal"
              if same.recorded and same.batch() is None else "")
    p = {x: facts.precision(x) for x in labels}
    return [Caveat("precision", f"{labels[k]} computes in mixed or half precision and "
                   f"{labels[other]} does not ({'; '.join(why)}): a change of dtype, not of "
                   f"batch or shape"
                   + (f"; {scale.words(labels['b'])}" if scale else "") + shapes, False,
                   {"side": k, "casts": {x: v.casts for x, v in p.items()},
                    "loss_scale": {x: v.loss_scale for x, v in p.items()}})]


def _gpus(s: "Side") -> int:
    """GPUs whose rows hold work (stream, copy or device rows)."""
    pids = set(np.unique(s.trace.events.pid).tolist())
    return len({gpu_of(p.name) for p in s.trace.processes.values()
                if p.pid in pids and p.kind in ("stream", "memcpy", "device") and gpu_of(p.name)})


def _devices(sides, labels, rows, steps, facts=None) -> list[Caveat]:
    g = {k: _gpus(s) for k, s in sides.items()}
    if (g["a"] > 0) == (g["b"] > 0):
        return []
    words = {k: f"{labels[k]} on {'the CPU only' if not v else f'{v} GPU(s)'}"
             for k, v in g.items()}
    return [Caveat("devices", f"different hardware: {words['a']}, {words['b']}; a "
                   "GPU op's executor-row time is its launch, its kernels are on the stream "
                   "rows, and the op diff counts both", False)]


def _device_busy(s: "Side") -> float:
    """GPU time per steady step: the union of its kernels and copies inside each step's
    window (mean over the steady steps)."""
    ev, gpu = s.trace.events, on_gpu(s.trace) & work_mask(s.trace)
    idx = np.flatnonzero(gpu)
    vals = [intervals.union_us(ev.ts[idx], ev.end[idx], st.ts, st.ts + st.dur)
            for st in s.account.steady]
    return float(np.mean(vals)) if vals else 0.0


def _host_masks(sides, labels, rows, steps, facts=None) -> list[Caveat]:
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
