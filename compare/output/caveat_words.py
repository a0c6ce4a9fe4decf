"""The parity checks' caveats in words (:class:`compare.analysis.result.Caveat`): what differs
between the two traces and why it matters, one sentence per caveat, naming the sides by their
labels. report.json's ``text``, report.md, the summary and the verdict's sentence all read
:func:`text`."""
from __future__ import annotations

from typing import Any, Callable

from compare.analysis.result import Caveat, PrecisionSign, Scale
from compare.analysis.workload import OneTimeSigns
from compare.fmt import duration as ms
from compare.fmt import listed
from compare.vocabulary.thresholds import AUTOTUNE_KERNELS

Labels = dict[str, str]


def text(x: Caveat, labels: Labels) -> str:
    """The caveat's sentence (no final full stop: the verdict joins caveats with ``;``)."""
    return _BY_KIND[x.kind](x, lambda k: labels.get(k, k))


def _other(k: str) -> str:
    return "b" if k == "a" else "a"


# --------------------------------------------------------------------------------------------
# one-time work

def one_time_sign(o: OneTimeSigns, key: str) -> str:
    """One sign of one-time work in a first step (:func:`compare.analysis.workload.
    one_time_signs`), in words."""
    t = o.one_time
    return {
        "compile": lambda: f"XLA compiles for {ms(o.compile_us)}",
        "autotune": lambda: (f"cuDNN/cuBLAS autotuning ({t.autotune_kernels} GPU kernels for "
                             f"one execution of {t.autotune_node}; a steady call launches a "
                             f"few, {AUTOTUNE_KERNELS} or more is a search)"),
        "outlier": lambda: (f"one {t.outlier_op} call ({t.outlier_node}) takes "
                            f"{ms(t.outlier_us)} while its other calls take "
                            f"{ms(t.outlier_others_us)} (median): a first call setting its "
                            f"library up"),
        "source": lambda: f"its _SOURCE node takes {ms(t.source_us)} (the device being set up)",
        "iterators": lambda: (f"its input pipeline is created in it "
                              f"({', '.join(t.iterators)}, {ms(o.made_us)})"),
    }[key]()


def _why(o: OneTimeSigns) -> str:
    return "; ".join(one_time_sign(o, s) for s in o.signs) + f"; {o.share:.0%} of the step"


def _first_run(x: Caveat, lab: Callable[[str], str]) -> str:
    signs: dict[str, OneTimeSigns] = x.detail["signs"]
    if x.case == "both":
        return ("both traces look like first runs (" +
                "; ".join(f"{lab(k)}: {_why(o)}" for k, o in signs.items()) +
                "): comparable with each other, but neither shows a steady step")
    k = x.detail["side"]
    if x.case == "one":
        return (f"{lab(k)} looks like a first run and {lab(_other(k))} does not: its only step "
                f"shows one-time work ({_why(signs[k])}); one-time work is not a steady cost "
                f"— profile a later step of {lab(k)}")
    return (f"{lab(k)}'s only step carries some one-time work ({_why(signs[k])}), too little "
            f"to change the comparison")


# --------------------------------------------------------------------------------------------
# the other kinds

def _feed_dict(x: Caveat, lab: Callable[[str], str]) -> str:
    d = x.detail
    how = "fed from Python (feed_dict)" if x.case == "feeds" else \
        "not read by any op the trace records (feed_dict or a constant)"
    return (f"{lab(d['side'])}'s input is {how}, so its input work happens outside the traced "
            f"step, while {lab(d['other'])}'s is inside it ({ms(d['other_input_us'])} per step "
            f"in input ops): the step times do not measure the same work — compare "
            f"end-to-end throughput")


def _single_step(x: Caveat, lab: Callable[[str], str]) -> str:
    return ("one traced step per side: a single sample each, so differences under "
            f"{x.detail['noise']:.0%} of the step are not told apart from run-to-run noise (a "
            "typical spread between runs, not one these traces measure: a short step varies "
            "more)")


def _steps(x: Caveat, lab: Callable[[str], str]) -> str:
    one, many = lab(x.detail["one"]), lab(x.detail["many"])
    return (f"one step against many: {one} holds 1 step, {many} {x.detail['steps']}; compared "
            f"per step against {many}'s steady mean (its first step apart)")


def _untraced(x: Caveat, lab: Callable[[str], str]) -> str:
    d = x.detail
    return (f"{lab(d['side'])}'s steps include {ms(d['untraced_us'])} with nothing traced "
            f"between session runs (Python work the trace does not show); its steps are "
            f"compared by their traced span ({ms(d['traced_us'])})")


def _identical(x: Caveat, lab: Callable[[str], str]) -> str:
    return (f"{lab('a')} and {lab('b')} hold the same {x.detail['events']:,} events (one "
            f"profile given twice, or byte-identical copies of one): there is nothing to "
            f"compare")


def _program(x: Caveat, lab: Callable[[str], str]) -> str:
    if x.case == "no_ops":
        bare = x.facts["no_ops"]
        return (f"{' and '.join(lab(k) for k in bare)} hold{'s' if len(bare) == 1 else ''} no "
                "TensorFlow op (no event names an op type or a graph node): nothing shows "
                "that the two run the same program, and there is no op to compare; only the "
                "steps' spans and their events' names are")
    shares: dict[str, float] = x.detail["matched"]
    return ("the two traces share almost no op names (of the model's op time, " +
            ", ".join(f"{lab(k)} {v:.0%}" for k, v in shares.items()) +
            " matches by name): different programs or models; ops are compared by type")


def _data_service(x: Caveat, lab: Callable[[str], str]) -> str:
    events = x.detail["events"]
    if x.case == "both":
        return (f"both read their input from tf.data service workers ({events['a']:,} and "
                f"{events['b']:,} events of its client): what each pipeline handed them ran in "
                f"the workers' processes, in neither trace")
    k, n, moved = x.facts["side"], x.facts["workers"], x.facts["moved"]
    workers = f"{n} tf.data service worker{'s' if n != 1 else ''}" if n else \
        "tf.data service workers (how many, its trace does not show)"
    gone = (f": its {listed(moved)} {'has' if len(moved) == 1 else 'have'} no time in its "
            f"trace ({lab(x.detail['other'])} spends {ms(x.detail['moved_us'])} a step in them)"
            if moved else "")
    return (f"{lab(k)}'s input came from {workers} ({events[k]:,} events of the service's "
            f"client in its trace){gone}; what its pipeline handed the service ran in the "
            f"workers' processes, not in this trace, so {lab(k)}'s step counts only the wait "
            f"for their elements and its CPU time leaves the workers' out")


def scale_words(s: Scale, side: str) -> str:
    """Matched ops scaled alike on side b (named ``side``), in words."""
    most = "nearly all" if s.share >= 0.95 else "most"
    return (f"{most} of the op time matched by name ({s.share:.0%}; {s.scaled} of {s.matched} "
            f"ops) takes about {s.factor:.1f}x as long in {side} "
            f"({'device' if s.device else 'op'} time)")


def _batch(x: Caveat, lab: Callable[[str], str]) -> str:
    if x.case == "times":
        return (f"{scale_words(x.detail['scale'], lab('b'))}: a different batch size or input "
                "shape is likely (the traces record no shapes) — compare per example, not per "
                "step")
    d, f = x.detail, x.facts
    op, a, b = d["example"]
    return (f"different batch sizes: {f['a']} in {lab('a')}, {f['b']} in {lab('b')} (the "
            f"leading dimension of {d['differ']} of the {d['compared']} ops whose output "
            f"shapes both traces record, e.g. {op} {a} vs {b}) — compare per example, not per "
            f"step{_per_example(d['per_example'], lab)}")


def _per_example(per: dict[str, float], lab: Callable[[str], str]) -> str:
    """``: per example, B is 3.2x slower`` from the step times per example."""
    if not per:
        return ""
    pa, pb = per["a"], per["b"]
    slow = "b" if pb > pa else "a"
    return (f": per example {lab(slow)} is {max(pa, pb) / min(pa, pb):.1f}x slower "
            f"({ms(max(pa, pb))} vs {ms(min(pa, pb))})")


def _precision_sign(s: PrecisionSign, k: str, lab: Callable[[str], str]) -> str:
    return {
        "loss_scale": lambda: f"{s.n} loss-scaling IsFinite node(s) only in {lab(k)}",
        "named": lambda: "nodes named for mixed precision (" + ", ".join(s.names) + ")",
        "half": lambda: f"{s.n} recorded tensor(s) in float16/bfloat16",
        "casts": lambda: f"Cast nodes {s.other} in {lab(_other(k))}, {s.n} in {lab(k)}",
    }[s.kind]()


def _precision(x: Caveat, lab: Callable[[str], str]) -> str:
    k, d = x.facts["side"], x.detail
    why = "; ".join(_precision_sign(s, k, lab) for s in d["signs"])
    return (f"{lab(k)} computes in mixed or half precision and {lab(d['other'])} does not "
            f"({why}): a change of dtype, not of batch or shape"
            + (f"; {scale_words(d['scale'], lab('b'))}" if d["scale"] else "")
            + (f"; the {d['same_shapes']} op output shapes both traces record are equal"
               if d["same_shapes"] else ""))


def _devices(x: Caveat, lab: Callable[[str], str]) -> str:
    g = x.detail["gpus"]
    words = {k: f"{lab(k)} on {'the CPU only' if not v else f'{v} GPU(s)'}" for k, v in g.items()}
    return (f"different hardware: {words['a']}, {words['b']}; a GPU op's executor-row time is "
            "its launch, its kernels are on the stream rows, and the op diff counts both")


def _host_masks(x: Caveat, lab: Callable[[str], str]) -> str:
    d = x.detail
    k = d["side"]
    if x.case == "masks":
        return (f"host-side work masks the device-side gain: {lab(k)}'s GPU time per step is "
                f"{ms(d['gain_us'])} lower ({ms(d['device_us'][_other(k)])} -> "
                f"{ms(d['device_us'][k])}), but its step only {ms(d['step_gain_us'])} shorter; "
                f"the GPU is busy {d['busy']:.0%} of its step, the rest is host dispatch, input "
                "and runtime")
    return (f"host-side work does not mask the device-side gain ({lab(k)}'s GPU time per step "
            f"{ms(d['gain_us'])} lower, its step {ms(d['step_gain_us'])} shorter)")


_BY_KIND: dict[str, Callable[[Caveat, Callable[[str], str]], str]] = {
    "first_run": _first_run, "feed_dict": _feed_dict, "single_step": _single_step,
    "steps": _steps, "untraced": _untraced, "identical": _identical, "program": _program,
    "data_service": _data_service, "batch": _batch, "precision": _precision,
    "devices": _devices, "host_masks": _host_masks,
}


def as_json(x: Caveat, facts: Any, labels: Labels) -> dict[str, Any]:
    """The caveat as report.json holds it: kind, its sentence, breaks, and ``facts``."""
    return {"kind": x.kind, "text": text(x, labels), "breaks": x.breaks, "facts": facts}
