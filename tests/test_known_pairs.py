"""Known answers, generated (issue 24 item 3): compare.run and explain on traces whose answer
is planted (``tests/known_pairs.py``), through the public API (``compare.api.compare_traces``
and ``explain_trace``; every read of their results is in ``tests/known_report.py``).

Properties of a pair (A, then B with one planted change):

- **top**: ``ops_diff``'s first row is the changed op (or cluster, or copy), its delta within
  5 % of the truth's; for added idle time, no op row claims more than the noise;
- **verdict**: the first difference the verdict names is it (by name, or a term whose words
  name it), with the right sign;
- **step**: the step difference (B - A) is the truth's, within 5 %;
- **groups** (CPU pairs, where one executor runs the ops back to back): the group table's op
  rows add up to the ops' true time on each side, within 5 %;
- **step_delta**: report.json's ``step_delta`` terms add up to its step difference, which is
  the truth's (not in report.json yet: ``xfail(strict=True)`` until issue 24 lands it).

And for explain: a first run's first-launch set-up, host copies inside ``_Send``, and GPUs
that recorded nothing each lead the verdict when they dominate.

The fast set is a few deterministic pairs (each compared once, 2-5 s) with every property that
applies to each. The campaigns (``fuzz``; over pairs also ``slow``) draw the parameters with
hypothesis, derandomized; ``KNOWN_PAIRS_EXAMPLES`` sets their examples (default 8 per change
kind). What fails on today's main is listed in ``KNOWN`` / ``EXPLAIN_KNOWN`` with the reason
and marked ``xfail(strict=True)`` where it shows, so that the fix turns the mark into a
failure to remove (BUILD.md, "Known-answer pairs").
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, event, given, settings
from hypothesis import strategies as st

from compare.load import load
from tests.known_pairs import (
    CHANGES,
    ONLY_GPU,
    ONLY_XPROF,
    PROGRAM,
    ExplainParams,
    Pair,
    Params,
    explain_case,
    make_pair,
)
from tests.known_report import Report, compare, explain

ROOT = Path(__file__).resolve().parent.parent

#: An op delta within this share of the truth's (plus the report's 0.1 µs rounding).
OP_TOLERANCE = 0.05
#: The step difference within this share of the truth's (plus 1 µs).
STEP_TOLERANCE = 0.05
#: A planted change is "the" answer when it is this many times any other op's change.
CLEAR_MARGIN = 3.0
#: The verdict must name a change to idle time when it is at least this share of the step
#: (compare.run calls one-step differences under 10 % noise; we leave it room).
IDLE_NAMED_SHARE = 0.15


# --------------------------------------------------------------------------------------------
# the properties, each one assertion with the case's numbers in its message

def check_top(rep: Report, pair: Pair) -> None:
    t, top = pair.truth, rep.ops()[0]
    where = f"{pair.params}\ntruth: {t.summary()}\n{rep.brief()}"
    if t.change == "idle":
        allowed = max(CLEAR_MARGIN * t.others_max_us, OP_TOLERANCE * abs(t.step_delta_us)) + 1
        assert abs(top.delta_us) <= allowed, f"an op row claims the idle time\n{where}"
        return
    assert top.op in t.names, f"top row is not {t.op}\n{where}"
    assert abs(top.delta_us - t.delta_us) <= OP_TOLERANCE * abs(t.delta_us) + 0.5, \
        f"top row's delta {top.delta_us} is not {t.delta_us}\n{where}"
    if t.members:
        assert set(top.members) >= set(t.members), f"the cluster's ops\n{where}"


def check_verdict(rep: Report, pair: Pair) -> None:
    t, named = pair.truth, rep.named()
    where = f"{pair.params}\ntruth: {t.summary()}\n{rep.brief()}"
    assert named, f"the verdict names nothing\n{where}"
    first = named[0]
    if t.change == "idle":
        assert first.op == t.term or "idle" in first.words, f"not the idle time\n{where}"
        sign = t.step_delta_us
    else:   # by name, or a term whose words name it
        assert first.op in t.names or _names_in(first.words, t.names), \
            f"the verdict does not name {t.op} first\n{where}"
        sign = t.delta_us
    assert (first.delta_us > 0) == (sign > 0), f"the verdict's sign\n{where}"


def check_step(rep: Report, pair: Pair) -> None:
    t = pair.truth
    a, b = rep.step_us()
    assert abs((b - a) - t.step_delta_us) <= STEP_TOLERANCE * abs(t.step_delta_us) + 1, \
        f"step {a} -> {b} ({b - a:+.1f}), truth {t.step_a_us} -> {t.step_b_us} " \
        f"({t.step_delta_us:+.1f})\n{pair.params}"


def check_step_delta(rep: Report, pair: Pair) -> None:
    sd = rep.step_delta()
    assert sd is not None, "report.json has no step_delta"
    total = sum(x.delta_us for x in sd.terms)
    assert abs(total - sd.delta_us) <= 0.5 + 1e-3 * abs(sd.delta_us), (total, sd)
    assert abs(sd.delta_us - (sd.b_us - sd.a_us)) <= 0.5, sd
    check_step(rep, pair)


#: Rows of the generic view that are no op's time.
NOT_OPS = frozenset({"runtime", "idle", "unmapped"})


def groups_apply(p: Params) -> bool:
    """On a CPU one executor runs the ops back to back, so each op's wall time is its run
    (the tf.data op of ``straddle`` runs beside them: not there)."""
    return p.device == "cpu" and p.change != "straddle"


def check_groups(rep: Report, pair: Pair) -> None:
    """The group table's op rows hold the ops' time: per side, their sum is the truth's."""
    rows = [r for r in rep.group_rows() if r.group not in NOT_OPS]
    for side, truth_ops in (("A", pair.truth.ops_a), ("B", pair.truth.ops_b)):
        got = sum(r.a_us if side == "A" else r.b_us for r in rows)
        want = sum(truth_ops.values())
        assert abs(got - want) <= OP_TOLERANCE * want + 1, \
            f"{side}'s op rows sum to {got:.1f}, its ops ran {want:.1f} per step\n" \
            f"{pair.params}\n" + "\n".join(f"  {r}" for r in rep.group_rows())


def _names_in(words: str, names) -> bool:
    """One of ``names`` in ``words`` as a whole name (``dense/MatMul`` is not in
    ``gradients/dense/MatMul_grad/MatMul_1``)."""
    return any(n and re.search(rf"(?<![\w/]){re.escape(n)}(?![\w/])", words) for n in names)


PROPERTIES = {"top": check_top, "verdict": check_verdict, "step": check_step,
              "groups": check_groups, "step_delta": check_step_delta}


def applies(prop: str, p: Params) -> bool:
    return groups_apply(p) if prop == "groups" else True


def clear(pair: Pair) -> bool:
    """The planted change is the answer: it stands out of the noise (and, for idle time, is
    large enough that the verdict must name it)."""
    t = pair.truth
    if t.change == "idle":
        return abs(t.step_delta_us) >= IDLE_NAMED_SHARE * max(t.step_a_us, t.step_b_us)
    return abs(t.delta_us) >= CLEAR_MARGIN * t.others_max_us + 20


# --------------------------------------------------------------------------------------------
# the generator itself: deterministic, its truth what it planted, its files as TF writes them

GENERATOR_CASES = [Params(f, d, steps=n, noise=0.03, change="longer", seed=9)
                   for f in ("timeline", "xprof") for d in ("cpu", "gpu") for n in (1, 3)]


@pytest.mark.parametrize("p", GENERATOR_CASES, ids=Params.short)
def test_the_generator_is_deterministic_and_its_steps_are_the_traces(p, tmp_path):
    one, two = make_pair(p, tmp_path / "1"), make_pair(p, tmp_path / "2")
    assert one.a.read_bytes() == two.a.read_bytes() and one.b.read_bytes() == two.b.read_bytes()
    assert one.truth.summary() == two.truth.summary()
    for path, step_us in ((one.a, one.truth.step_a_us), (one.b, one.truth.step_b_us)):
        tr = load(path)
        assert not tr.warnings and len(tr.steps) == p.steps
        durs = [s.dur for s in sorted(tr.steps, key=lambda s: s.ts)]
        assert float(np.median(durs[1:] or durs)) == pytest.approx(step_us, abs=0.01)


@pytest.mark.parametrize("form", ["timeline", "xprof"])
def test_a_noise_free_change_is_planted_exactly(form, tmp_path):
    t = make_pair(Params(form, "gpu", steps=3, change="longer", op=4, delta_us=750), tmp_path).truth
    assert (t.op, t.delta_us, t.others_max_us) == ("dense_1/BiasAdd", 750.0, 0.0)
    assert t.step_delta_us == pytest.approx(750.0, abs=2)   # the device runs the op later
    gone = make_pair(Params(form, "cpu", change="removed", op=2), tmp_path / "r").truth
    assert gone.b_us == 0 and gone.delta_us == -gone.a_us < 0


@pytest.mark.parametrize("device,edge", [("cpu", "start"), ("gpu", "end")])
def test_a_straddling_op_counts_by_its_overlap_with_the_window(device, edge, tmp_path):
    p = Params("xprof", device, steps=3, change="straddle", edge=edge, inside=0.3,
               delta_us=0.0, seed=4)
    t = make_pair(p, tmp_path).truth
    assert t.a_us == pytest.approx(0.3 * t.b_us, abs=0.01)
    assert t.whole_delta_us == pytest.approx(t.b_us if device == "cpu" else 0.0, abs=0.01)


def test_xla_cluster_truth_is_its_run_against_the_ops_it_took(tmp_path):
    t = make_pair(Params("xprof", "cpu", change="fused", op=3, fused_ops=3, ratio=0.5),
                  tmp_path).truth
    assert t.members == ("dense_1/MatMul", "dense_1/BiasAdd",
                         "loss/SparseSoftmaxCrossEntropyWithLogits")
    assert t.b_us == pytest.approx(0.5 * t.a_us, abs=0.01) and t.delta_us < 0


def test_rows_are_named_as_tensorflow_names_them(tmp_path):
    tl = json.loads(make_pair(Params("timeline", "gpu", change="copy"), tmp_path / "t")
                    .a.read_text())
    rows = {e["args"]["name"] for e in tl["traceEvents"] if e.get("name") == "process_name"}
    assert {"/job:localhost/replica:0/task:0/device:GPU:0 Compute",
            "/device:GPU:0/stream:all Compute", "/device:GPU:0/stream:14 Compute",
            "/device:GPU:0/memcpy Compute", "/device:GPU:0/stream:15 Compute"} <= rows
    copies = {e["pid"] for e in tl["traceEvents"] if e.get("name") == "MEMCPYHtoD"}
    assert len(copies) == 2       # memcpy and its stream, not stream:all (as real TF1 files)
    doc = json.loads(gzip.decompress(make_pair(Params("xprof", "gpu", steps=2, change="copy"),
                                               tmp_path / "x").a.read_bytes()))
    assert doc["traceEvents"][-1] == {} and doc["displayTimeUnit"] == "ns"
    lines = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert {"Stream #19(Compute)", "Stream #20(MemcpyH2D)", "Steps", "TensorFlow Ops",
            "python3"} <= lines
    host_copy = [e for e in doc["traceEvents"] if e.get("name") == "MemcpyH2D" and
                 e["pid"] == 501]
    sends = [e for e in doc["traceEvents"] if e.get("name") == "_Send"]
    assert host_copy and all(any(s["tid"] == c["tid"] and s["ts"] <= c["ts"] and
                                 c["ts"] + c["dur"] <= s["ts"] + s["dur"] for s in sends)
                             for c in host_copy)


def test_timeline_modules_load_without_leaving_tensorflow_imported():
    code = ("import sys; from tests.fixtures.make_timelines import tf_timeline_modules; "
            "pb, tl = tf_timeline_modules(); assert tl.Timeline and pb.StepStats; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tensorflow'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr


@pytest.mark.slow
def test_tensorflow_imports_and_traces_after_the_bare_timeline_import():
    """The bare import first, then all of TensorFlow in the same process: a real session run
    traced with FULL_TRACE, its step stats written by the real timeline module."""
    code = ("from tests.fixtures.make_timelines import tf_timeline_modules; "
            "tf_timeline_modules(); import tensorflow as tf; "
            "from tensorflow.python.client import timeline\n"
            "with tf.Graph().as_default():\n"
            "    x = tf.constant([1.0, 2.0]) * 3\n"
            "    with tf.compat.v1.Session() as s:\n"
            "        md = tf.compat.v1.RunMetadata()\n"
            "        s.run(x, options=tf.compat.v1.RunOptions(trace_level=3), run_metadata=md)\n"
            "        print('mul' in timeline.Timeline(md.step_stats)"
            ".generate_chrome_trace_format().lower())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("True"), proc.stderr[-2000:]


# --------------------------------------------------------------------------------------------
# what fails on today's main, and why (issue 24 fixes these; each is marked xfail(strict=True)
# where it shows, so that the fix turns the mark into a failure to remove)

def _launch_matters(pair: Pair) -> bool:
    t = pair.truth
    return abs(t.launch_delta_us) > OP_TOLERANCE * abs(t.delta_us) + 0.5


def _clipping_matters(pair: Pair) -> bool:
    t = pair.truth
    return abs(t.whole_delta_us - t.delta_us) > OP_TOLERANCE * abs(t.delta_us) + 1


@dataclasses.dataclass(frozen=True)
class Known:
    """A property that fails today on the pairs ``applies`` picks (``region``: where the
    campaign draws them)."""

    prop: str
    name: str
    reason: str
    applies: Callable[[Pair], bool]
    region: dict


#: Known failures, each a property that fails on the pairs it picks (none today: issue 24's
#: accounting fixed the six this table held; a new one is listed here with its reason).
KNOWN: tuple[Known, ...] = ()


def xfail(reason: str):
    """Fails today for ``reason``; strict, so that the fix shows (an error that is not a
    failed assertion, such as hypothesis finding no case, is not taken for it)."""
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)


def known(prop: str, pair: Pair) -> Known | None:
    """The known failure of ``prop`` on ``pair``, if any."""
    return next((k for k in KNOWN if k.prop == prop and k.applies(pair)), None)


def expect(request, prop: str, pair: Pair) -> None:
    """Mark the running test xfail(strict=True) when ``prop`` is known to fail on ``pair``."""
    k = known(prop, pair)
    if k is not None:
        request.node.add_marker(xfail(k.reason))


# --------------------------------------------------------------------------------------------
# the fast set: a few deterministic pairs, each compared once, every property on each

FAST = {
    # TF1, the program's only session run written to its own file (CPU)
    "tf1-cpu-run-longer": Params("timeline", "cpu", steps=1, change="longer", op=0,
                                 delta_us=900, seed=1),
    # TF1 on a GPU, four runs appended: three ops moved into an _XlaLaunch cluster
    "tf1-gpu-runs-fused": Params("timeline", "gpu", steps=4, noise=0.02, change="fused",
                                 op=3, fused_ops=3, ratio=0.4, seed=2),
    # TF2 on a CPU: three ops moved into an auto-clustered _XlaRun
    "xprof-cpu-steps-fused": Params("xprof", "cpu", steps=4, noise=0.02, change="fused",
                                    op=3, fused_ops=3, ratio=0.5, seed=3),
    # TF2 on a GPU: the batch's copy to the device takes longer
    "xprof-gpu-steps-copy": Params("xprof", "gpu", steps=4, noise=0.02, change="copy",
                                   delta_us=900, seed=4),
    # TF2 on a CPU: a tf.data map op across the step marker's start in A
    "xprof-cpu-steps-straddle": Params("xprof", "cpu", steps=4, noise=0.02,
                                       change="straddle", edge="start", inside=0.4,
                                       delta_us=300, seed=5),
    # TF2 on a GPU: B waits with nothing traced in the middle of each step
    "xprof-gpu-steps-idle": Params("xprof", "gpu", steps=4, noise=0.02, change="idle",
                                   delta_us=1200, seed=6),
}


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """case -> (pair, report), each pair made and compared once."""
    done: dict[str, tuple[Pair, Report]] = {}

    def get(case: str) -> tuple[Pair, Report]:
        if case not in done:
            folder = tmp_path_factory.mktemp(case)
            pair = make_pair(FAST[case], folder / "traces")
            assert clear(pair), pair.truth.summary()
            done[case] = pair, compare(pair.a, pair.b, folder / "out")
        return done[case]
    return get


@pytest.mark.parametrize("case,prop", [(c, prop) for c in FAST for prop in PROPERTIES
                                       if applies(prop, FAST[c])])
def test_known_answer(case, prop, compared, request):
    pair, rep = compared(case)
    expect(request, prop, pair)
    PROPERTIES[prop](rep, pair)


# --------------------------------------------------------------------------------------------
# explain: what leads when it dominates

EXPLAIN_FAST = {
    "first_launch": ExplainParams("first_launch", setup_us=420_000, seed=1),
    "host_copy": ExplainParams("host_copy", steps=3, copy_share=0.65, seed=2),
    "empty_device": ExplainParams("empty_device", steps=3, gpus=8, host_share=0.1, seed=3),
}
#: case -> why explain does not lead with it yet (none today: issue 24 fixed the three).
EXPLAIN_KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("case", list(EXPLAIN_FAST))
def test_explain_leads_with_what_dominates(case, tmp_path, request):
    if case in EXPLAIN_KNOWN:
        request.node.add_marker(xfail(EXPLAIN_KNOWN[case]))
    check_lead(explain_case(EXPLAIN_FAST[case], tmp_path))


def check_lead(c) -> None:
    got = explain(c.path)
    assert got.bottleneck == c.lead, f"{c.params} {c.facts}: leads with {got.bottleneck}, " \
                                     f"not {c.lead}: {got.headline} (findings {got.kinds})"


# --------------------------------------------------------------------------------------------
# the campaigns

EXAMPLES = int(os.environ.get("KNOWN_PAIRS_EXAMPLES", "8"))
_QUIET = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
#: Derandomized, so that a campaign gives the same cases every run (and an xfail stays one).
CAMPAIGN = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=_QUIET)
#: For a campaign expected to fail today: stop at the first failing case, no shrinking (also
#: explain's, whose cases are simple already and which run in the quick tier).
FAILING = settings(CAMPAIGN, phases=(Phase.explicit, Phase.reuse, Phase.generate))


@st.composite
def pairs(draw, changes=CHANGES, forms=("timeline", "xprof"), devices=("cpu", "gpu")):
    change = draw(st.sampled_from(changes))
    form = draw(st.sampled_from([f for f in forms if change not in ONLY_XPROF or
                                 f == "xprof"]))
    device = draw(st.sampled_from([d for d in devices if change not in ONLY_GPU or
                                   d == "gpu"]))
    return Params(form, device, steps=draw(st.sampled_from((1, 2, 3, 5))),
                  noise=draw(st.sampled_from((0.0, 0.01, 0.03))),
                  change=change, op=draw(st.integers(0, len(PROGRAM) - 1)),
                  delta_us=draw(st.floats(300, 2500).map(lambda x: round(x, 1))),
                  seed=draw(st.integers(0, 2 ** 16)),
                  fused_ops=draw(st.integers(2, 5)),
                  ratio=draw(st.floats(0.2, 0.7).map(lambda x: round(x, 2))),
                  edge=draw(st.sampled_from(("start", "end"))),
                  inside=draw(st.floats(0.2, 0.8).map(lambda x: round(x, 2))))


def _campaign(p: Params, check, when=None) -> None:
    """Make the pair of ``p``; if the planted change is a clear answer (and ``when(pair)``
    holds), compare the pair and ``check(pair, report)``."""
    with tempfile.TemporaryDirectory(prefix="known-pair-") as tmp:
        pair = make_pair(p, Path(tmp) / "traces")
        assume(clear(pair) and (when is None or when(pair)))
        event(p.short())
        check(pair, compare(pair.a, pair.b, Path(tmp) / "out"))


@pytest.mark.fuzz
@pytest.mark.slow
@pytest.mark.parametrize("change", CHANGES)
@given(data=st.data())
@CAMPAIGN
def test_campaign_every_change(change, data):
    """Each change, in every form it can take: each property that is not a known failure on
    the pair."""
    def check(pair, rep):
        for prop in ("top", "verdict", "step", "groups"):
            if applies(prop, pair.params) and known(prop, pair) is None:
                PROPERTIES[prop](rep, pair)
    _campaign(data.draw(pairs((change,))), check)


if KNOWN:  # an empty table would be a parametrize over nothing: a skip, which CI refuses
    @pytest.mark.fuzz
    @pytest.mark.slow
    @pytest.mark.parametrize("k", [pytest.param(k, id=f"{k.prop}-{k.name}",
                                                marks=xfail(k.reason)) for k in KNOWN])
    @given(data=st.data())
    @FAILING
    def test_campaign_known_failure(k, data):
        """Each known failure, on the pairs it concerns: fails today, passes once fixed."""
        _campaign(data.draw(pairs(**k.region)), lambda pair, rep: PROPERTIES[k.prop](rep, pair),
                  when=k.applies)


EXPLAIN_STRATEGIES = {
    "first_launch": st.builds(ExplainParams, case=st.just("first_launch"),
                              setup_us=st.floats(100_000, 700_000),
                              seed=st.integers(0, 2 ** 16)),
    "host_copy": st.builds(ExplainParams, case=st.just("host_copy"),
                           steps=st.sampled_from((1, 3, 5)),
                           copy_share=st.floats(0.5, 0.9),
                           seed=st.integers(0, 2 ** 16)),
    "empty_device": st.builds(ExplainParams, case=st.just("empty_device"),
                              steps=st.sampled_from((1, 3, 5)), gpus=st.integers(1, 8),
                              host_share=st.floats(0.02, 0.3),
                              seed=st.integers(0, 2 ** 16)),
}


@pytest.mark.fuzz
@pytest.mark.parametrize("case", [pytest.param(c, marks=xfail(EXPLAIN_KNOWN[c]))
                                  if c in EXPLAIN_KNOWN else c for c in EXPLAIN_STRATEGIES])
@given(data=st.data())
@FAILING
def test_campaign_explain_leads(case, data):
    p = data.draw(EXPLAIN_STRATEGIES[case])
    with tempfile.TemporaryDirectory(prefix="known-trace-") as tmp:
        check_lead(explain_case(p, Path(tmp)))
