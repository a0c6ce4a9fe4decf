"""``compare.run --legacy A --modern B`` on real trace pairs of programs that are not ours
(tests/fixtures/real_pairs: sources, licences and what a careful reader says in pairs.json).

Per pair, on facts, not wording: unmapped at most 10 % of the step per side; the top
``ops_diff`` entry is the op that really changed most and the verdict names it first (or, for a
null pair, reports no significant change); the pair is like for like exactly when the reader
says so, and the caveat that makes it not is the one the reader names. From the held-out round:
no first run without one-time evidence; a dtype change said to be one (with the Cast and
IsFinite counts the raw trace shows), never a batch change; batch sizes from the shapes an
xplane records; a profile window's first step not called the program's, and every
train_function call counted; the generic view everywhere for programs that are not an image
pipeline; a thread blocked in its step function taking no share from the ops.
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from compare.api import compare_traces
from compare.vocabulary.thresholds import ONE_TIME_LEADS

#: Every test reads the module's ``reports``: 19 full compare.run reports, tens of seconds.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent / "fixtures" / "real_pairs"
PAIRS = {k: v for k, v in json.loads((ROOT / "pairs.json").read_text()).items()
         if not k.startswith("_")}
#: Which caveat makes each not-like-for-like pair so (from the reader's caveats in pairs.json).
BREAKS = {"feed_dict_vs_tfrecords_gpu": "feed_dict", "feed_dict_vs_queue_reader_gpu": "feed_dict",
          "first_vs_steady_gpu_mlp": "first_run", "one_vs_five_steps_cpu_mlp": "steps",
          "batch32_vs_batch512_gpu": "batch", "tf2_keras_small_vs_vgg_gpu": "program",
          "chess_numpy_vs_tfdata_gpu_tf2": "batch"}
UNMAPPED_MAX = 0.10
FACTS = json.loads((ROOT / "expected.json").read_text())
SIDE = {"a": "legacy", "b": "modern"}


def _trace(pair: str, side: str, tmp: Path) -> Path:
    """The side's trace: its JSON, or its xplane (gunzipped) where the pair says to compare
    those (what only the xplane records, such as tensor shapes)."""
    if PAIRS[pair]["human"].get("compare_from") == "xplane":
        d = tmp / side
        d.mkdir()
        with gzip.open(ROOT / pair / f"{side}.xplane.pb.gz") as src, \
                open(d / "host.xplane.pb", "wb") as dst:
            shutil.copyfileobj(src, dst)
        return d / "host.xplane.pb"
    return next(p for p in sorted((ROOT / pair).glob(f"{side}.*")) if "xplane" not in p.name)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = {}
    for pair in PAIRS:
        tmp = tmp_path_factory.mktemp(pair)
        r = compare_traces(_trace(pair, "a", tmp), _trace(pair, "b", tmp), out=tmp / "out")
        out[pair] = (r, json.loads((r.out / "report.json").read_text()))
    return out


def _named(expect: dict) -> str:
    return expect["named_op"] or expect["named_type"]


def _is(name: str, row_op: str, row_type: str) -> bool:
    """The reader's op (a node, a type, or an XLA launch node ``cluster_0/_0/_1``) is this
    row: XLA rows are named by their cluster."""
    return name in (row_op, row_type) or name.split("/")[0] == row_op


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_unmapped_at_most_a_tenth_per_side(reports, pair):
    _, doc = reports[pair]
    for side, share in doc["groups"]["unmapped_share"].items():
        assert share <= UNMAPPED_MAX, (pair, side, share)


@pytest.mark.parametrize("pair", sorted(k for k, v in PAIRS.items()
                                        if not v["human"]["top_change_is_noise"]))
def test_top_op_diff_and_the_verdict_name_what_changed_most(reports, pair):
    r, doc = reports[pair]
    expect = PAIRS[pair]["human"]
    top = doc["ops_diff"][0]
    assert _is(_named(expect), top["op"], top["type"]), (pair, top)
    named = r.comparison.verdict.named[0]
    if expect.get("verdict_names"):   # the reader names something else first (idle time)
        assert named.op == expect["verdict_names"], (pair, named)
    else:
        # the reader's op, or the very row that tops ops_diff (checked above: XLA clusters
        # are named by the clusters, "cluster_0+cluster_1")
        assert _is(_named(expect), named.op, named.op) or named.op in (
            expect["named_type"], top["op"]), (pair, named)
    assert doc["verdict"]["named"][0]["op"] == named.op


@pytest.mark.parametrize("pair", sorted(k for k, v in PAIRS.items()
                                        if v["human"]["top_change_is_noise"]))
def test_null_pairs_report_no_significant_change(reports, pair):
    r, doc = reports[pair]
    assert doc["verdict"]["significant"] is False
    assert "no significant change" in r.comparison.verdict.comparison


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_like_for_like_and_the_caveat_that_breaks_it(reports, pair):
    r, doc = reports[pair]
    c = doc["comparability"]
    assert c["like_for_like"] == PAIRS[pair]["human"]["like_for_like"], (pair, c["caveats"])
    breaking = {x["kind"] for x in c["caveats"] if x["breaks"]}
    if pair in BREAKS:
        assert BREAKS[pair] in breaking, (pair, c["caveats"])
        assert r.comparison.verdict.comparison.startswith("Not like for like")


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_a_first_run_needs_one_time_evidence(reports, pair):
    """Where the reader says neither side is a first run, no caveat calls one so (a long input
    wait in a steady step is the step being input-bound)."""
    _, doc = reports[pair]
    first = PAIRS[pair]["human"]["first_run"]
    caveats = [x for x in doc["comparability"]["caveats"] if x["kind"] == "first_run"]
    if first["a"] is False and first["b"] is False:
        assert not [x for x in caveats if x["breaks"]], (pair, caveats)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_explain_and_compare_agree_on_first_runs(reports, pair):
    """A single-step side is a first run in compare's parity check exactly when explain's
    verdict on that step leads with one-time work (both read analysis/evidence.py)."""
    from compare.analysis.explanation import explain
    from compare.load import load

    r, doc = reports[pair]
    flagged = {k for x in doc["comparability"]["caveats"] if x["kind"] == "first_run"
               for k, share in x["facts"].items() if share >= ONE_TIME_LEADS}
    for k, s in r.comparison.sides.items():
        if s.steps.count != 1:
            continue
        findings = explain(load(s.source.path)).verdict.findings
        high = any(f.kind == "one_time" and f.level == "high" for f in findings)
        assert high == (k in flagged), (pair, k, [f.text[:80] for f in findings
                                                  if f.kind == "one_time"])


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_precision_change_is_not_a_batch_change(reports, pair):
    """A dtype change (mixed_float16: more Casts, loss scaling) is said to be one, with the
    counts the raw trace shows, and never called a batch change; no other pair gets it."""
    _, doc = reports[pair]
    expect = PAIRS[pair]["human"].get("precision")
    kinds = {x["kind"]: x for x in doc["comparability"]["caveats"]}
    if not expect:
        assert "precision" not in kinds, (pair, kinds["precision"]["text"])
        return
    x = kinds["precision"]
    assert not x["breaks"] and x["facts"]["side"] == SIDE[expect]
    assert "batch" not in kinds
    for s in ("a", "b"):
        signals = FACTS[pair]["facts"][s]["precision_signals"]
        assert x["facts"]["casts"][SIDE[s]] == signals["cast_nodes"], (pair, s)
        assert x["facts"]["loss_scale"][SIDE[s]] == signals["isfinite_nodes"], (pair, s)


@pytest.mark.parametrize("pair", sorted(k for k, v in PAIRS.items() if v["human"].get("batch")))
def test_batch_sizes_from_the_shapes_the_trace_records(reports, pair):
    _, doc = reports[pair]
    expect = PAIRS[pair]["human"]["batch"]
    x = next(c for c in doc["comparability"]["caveats"] if c["kind"] == "batch")
    assert x["breaks"] and x["facts"]["from"] == "shapes"
    for s in ("a", "b"):
        assert x["facts"][SIDE[s]] == expect[s] == \
            FACTS[pair]["facts"][s]["xplane_shapes"]["leading_dim"], (pair, s)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_first_step_and_step_count(reports, pair):
    """A trace that is a window of a longer run (steps numbered from 109) has no first step of
    the program; every train_function call is a marked step or counted as unmarked."""
    _, doc = reports[pair]
    window = PAIRS[pair]["human"].get("first_step") == "window"
    for s in ("a", "b"):
        st, numbers = doc["steps"][SIDE[s]], FACTS[pair]["facts"][s]["step_numbers"]
        assert (st["first_kind"] == "window") == window, (pair, s, st["first_kind"])
        if window:
            assert (st["first_num"], st["last_num"]) == (numbers["first"], numbers["last"])
            assert st["count"] == numbers["marked"]
            assert st["count"] + st["unmarked_calls"] == numbers["train_function_calls"]


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_other_programs_get_the_generic_view_everywhere(reports, pair):
    """None of these programs is an image pipeline: the verdict, plots and merged trace use
    the generic groups, no seed stage has time, and the unmapped shares report.json gives
    for the view shown agree with the groups'."""
    _, doc = reports[pair]
    assert doc["view"]["shown"] == "groups"
    assert not [row["stage"] for row in doc["stages"] if row["kind"] == "pipeline" and
                (row["legacy_us"] or row["modern_us"])]
    for side, share in doc["groups"]["unmapped_share"].items():
        assert doc["view"]["unmapped_share"][side]["groups"] == share
        assert doc["view"]["unmapped_share"][side]["stages"] == doc["coverage"][side][
            "unmapped_share"]


@pytest.mark.parametrize("pair", sorted(k for k, v in PAIRS.items()
                                        if FACTS[k]["facts"]["a"]["format"] == "xprof" and
                                        not FACTS[k]["facts"]["a"]["views"]["device"]["events"]))
def test_a_thread_waiting_in_its_step_function_takes_no_share(reports, pair):
    """CPU-only TF2 traces: the Python thread blocked in train_function is waiting, so
    runtime and idle together are no more of the step than the time no op runs."""
    _, doc = reports[pair]
    for s in ("a", "b"):
        f = FACTS[pair]["facts"][s]
        gaps = f["gaps_us"] / f["wall_span_us"]
        side = SIDE[s]
        step = doc["steps"][side]["median_us"]
        rest = sum(row[f"{side}_us"] for row in doc["groups"]["rows"]
                   if row["group"] in ("runtime", "idle"))
        assert rest / step <= gaps + 0.05, (pair, s, rest / step, gaps)


def test_faster_side_and_ratio_agree_with_the_facts(reports):
    """Where the reader calls one side faster, the verdict does, by the recorded ratio."""
    for pair in ("mkl_matmul_cpu", "xla_mnist_softmax_gpu", "cpu_vs_gpu_mlp",
                 "lczero_generator_vs_tfrecord_gpu", "mnist_softmax_gpu_xla_off_vs_on"):
        r, doc = reports[pair]
        ratio = FACTS[pair]["facts"]["median_step_a_over_b"]
        steps = doc["comparability"]["step_us"]
        assert steps["legacy"] / steps["modern"] == pytest.approx(ratio, rel=0.05), pair
        assert f"{doc['labels']['modern']} is {ratio:.1f}x faster" in \
            r.comparison.verdict.comparison


@pytest.mark.slow
@pytest.mark.parametrize("pair", ["tf2_keras_small_vs_vgg_gpu", "tf2_keras_rerun_gpu"])
def test_xplane_gives_what_its_trace_json_gives(reports, tmp_path, pair):
    """The same TF2 sessions read from their .xplane.pb (through xprof) compare the same."""
    paths = []
    for side in ("a", "b"):
        d = tmp_path / side
        d.mkdir()
        with gzip.open(ROOT / pair / f"{side}.xplane.pb.gz") as src, \
                open(d / "host.xplane.pb", "wb") as dst:
            shutil.copyfileobj(src, dst)
        paths.append(d / "host.xplane.pb")
    r = compare_traces(*paths, out=tmp_path / "out")
    _, doc = reports[pair]
    top = r.comparison.ops_diff[0]
    assert (top.op, top.type) == (doc["ops_diff"][0]["op"], doc["ops_diff"][0]["type"])
    assert r.comparison.parity.like_for_like == doc["comparability"]["like_for_like"]
    assert r.comparison.verdict.significant == doc["verdict"]["significant"]
