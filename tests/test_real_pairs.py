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
import tempfile
from pathlib import Path

import pytest

from compare.analysis.compare_verdict import first_op
from compare.api import compare_traces
from compare.vocabulary.thresholds import ONE_TIME_LEADS

#: Every test reads the module's ``reports``: 19 full compare.run reports, tens of seconds.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent / "fixtures" / "real_pairs"
#: Entries marked ``"round": "issue 24"`` are the evidence issue 24's accounting is judged by
#: (tests/test_real_fixtures.py guards their files and facts; test_accounting_* below).
PAIRS = {k: v for k, v in json.loads((ROOT / "pairs.json").read_text()).items()
         if not k.startswith("_")}
#: Which caveat makes each not-like-for-like pair so (from the reader's caveats in pairs.json).
BREAKS = {"feed_dict_vs_tfrecords_gpu": "feed_dict", "feed_dict_vs_queue_reader_gpu": "feed_dict",
          "first_vs_steady_gpu_mlp": "first_run", "one_vs_five_steps_cpu_mlp": "steps",
          "batch32_vs_batch512_gpu": "batch", "tf2_keras_small_vs_vgg_gpu": "program",
          "chess_numpy_vs_tfdata_gpu_tf2": "batch", "tf221_batch64_vs_batch256_cpu": "batch",
          "rai_alexnet_first_vs_steady_gpu": "first_run"}
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
        r = compare_traces(_trace(pair, "a", tmp), _trace(pair, "b", tmp), out=tmp / "out",
                           labels={"a": "legacy", "b": "modern"})
        out[pair] = (r, json.loads((r.out / "report.json").read_text()))
    return out


def _named(expect: dict) -> str:
    """The op the reader names; where the reader's number was an op's time with ops nested in
    it (a host copy inside _Send), the op that leads by own time (``named_op_own_time``)."""
    return expect.get("named_op_own_time") or expect["named_op"] or expect["named_type"]


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
    c = r.comparison
    named = first_op(c, c.verdict)   # the first op the verdict names (behind its first term)
    if expect.get("verdict_names"):   # the reader names something else first (idle time)
        assert c.verdict.named[0].op == expect["verdict_names"], (pair, c.verdict.named)
    else:
        # the reader's op, or the very row that tops ops_diff (checked above: XLA clusters
        # are named by the clusters, "cluster_0+cluster_1")
        assert _is(_named(expect), named, named) or named in (
            expect["named_type"], top["op"]), (pair, named, doc["verdict"]["named"])
    assert doc["verdict"]["named"][0]["op"] == c.verdict.named[0].op


@pytest.mark.parametrize("pair", sorted(k for k, v in PAIRS.items()
                                        if v["human"]["top_change_is_noise"]))
def test_null_pairs_report_no_significant_change(reports, pair):
    r, doc = reports[pair]
    assert doc["verdict"]["significant"] is False
    assert "no significant change" in r.words["comparison"]


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_like_for_like_and_the_caveat_that_breaks_it(reports, pair):
    r, doc = reports[pair]
    c = doc["comparability"]
    assert c["like_for_like"] == PAIRS[pair]["human"]["like_for_like"], (pair, c["caveats"])
    breaking = {x["kind"] for x in c["caveats"] if x["breaks"]}
    if pair in BREAKS:
        assert BREAKS[pair] in breaking, (pair, c["caveats"])
        assert r.words["comparison"].startswith("Not like for like")


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
        k = r.comparison.label(k)
        findings = explain(load(s.source.path)).verdict.findings
        high = any(f.kind == "one_time" and f.level == "high" for f in findings)
        assert high == (k in flagged), (pair, k, [f.detail for f in findings
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
    first = PAIRS[pair]["human"].get("first_step")
    for s in ("a", "b"):
        window = (first.get(s) if isinstance(first, dict) else first) == "window"
        st, numbers = doc["steps"][SIDE[s]], FACTS[pair]["facts"][s]["step_numbers"]
        assert (st["first_kind"] == "window") == window, (pair, s, st["first_kind"])
        if window:
            assert (st["first_num"], st["last_num"]) == (numbers["first"], numbers["last"])
            assert st["count"] == numbers["marked"]
            if numbers["train_function_calls"]:   # Keras marks its steps by these calls
                assert st["count"] + st["unmarked_calls"] == numbers["train_function_calls"]


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_other_programs_get_the_generic_view_everywhere(reports, pair):
    """None of these programs is an image pipeline: the verdict, plots and merged trace use
    the generic groups, no seed stage has time (but the tf.image preprocessing of the models
    fed by one), and the unmapped shares report.json gives for the view shown agree with the
    groups'."""
    _, doc = reports[pair]
    assert doc["view"]["shown"] == "groups"
    if not PAIRS[pair]["human"].get("image_preprocessing"):   # a model fed by tf.image ops
        assert not [row["stage"] for row in doc["stages"] if row["kind"] == "pipeline" and
                    (row["a_us"] or row["b_us"])]
    for side, share in doc["groups"]["unmapped_share"].items():
        assert doc["view"]["unmapped_share"][side]["groups"] == share
        assert doc["view"]["unmapped_share"][side]["stages"] == doc["coverage"][side][
            "unmapped_share"]


@pytest.mark.parametrize("pair", sorted(k for k, v in PAIRS.items()
                                        if FACTS[k]["facts"]["a"]["format"] == "xprof" and
                                        not FACTS[k]["facts"]["a"]["views"]["device"]["events"]))
def test_a_thread_waiting_in_its_step_function_takes_no_share(reports, pair):
    """CPU-only TF2 traces: the Python thread blocked in train_function is waiting, so
    runtime and idle together are no more of the step than the time no op runs. (A side
    running XLA:CPU code is left out: its thread pool's regions between kernels are XLA's
    runtime, work the facts' gaps do not count.)"""
    _, doc = reports[pair]
    for s in ("a", "b"):
        if doc["xla"][SIDE[s]]["compiles"]:
            continue
        f = FACTS[pair]["facts"][s]
        gaps = f["gaps_us"] / f["wall_span_us"]
        side = SIDE[s]
        step = doc["steps"][side]["mean_us"]
        rest = sum(row[f"{s}_us"] for row in doc["groups"]["rows"]
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
        assert f"modern is {ratio:.1f}x faster" in r.words["comparison"]


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
    r = compare_traces(*paths, out=tmp_path / "out", labels={"a": "legacy", "b": "modern"})
    _, doc = reports[pair]
    top = r.comparison.ops_diff[0]
    assert (top.op, top.type) == (doc["ops_diff"][0]["op"], doc["ops_diff"][0]["type"])
    assert r.comparison.parity.like_for_like == doc["comparability"]["like_for_like"]
    assert r.comparison.verdict.significant == doc["verdict"]["significant"]


# --- issue 24: one accounting ------------------------------------------------------------------

@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_accounting_the_step_difference_adds_up(reports, pair):
    """step_delta's terms add up to the step difference, which is the step time the verdict
    and the steps table give; the group rows add up to each side's mean step, and so does
    the step split (one account: report.md's 102 % and 60 % splits of the default run)."""
    r, doc = reports[pair]
    d = doc["step_delta"]
    assert sum(t["delta_us"] for t in d["terms"]) == pytest.approx(d["delta_us"],
                                                                 abs=0.1 * len(d["terms"]) + 0.2)
    for s, us in (("a", d["a_us"]), ("b", d["b_us"])):
        st = doc["steps"][SIDE[s]]
        assert us == pytest.approx(st["basis_us"], abs=0.2) == doc["verdict"][f"{s}_us"]
        rows = sum(row[f"{s}_us"] for row in doc["groups"]["rows"])
        assert rows == pytest.approx(st["mean_us"], abs=0.1 * len(doc["groups"]["rows"]) + 0.2)
        assert sum(st["split_us"].values()) == pytest.approx(st["mean_us"], abs=1.0)


#: Pairs whose top op the windowed facts judge as the tool does. tf221_xla_off_vs_on_cpu is
#: left out: the facts call the jit_compile function an added op of its inclusive call time
#: (137.5 ms, the Python thread's call around its kernels), the tool a fused row of the
#: kernels' op time; the fusion itself is asserted below.
TOP_BY_FACTS = sorted(k for k, v in PAIRS.items() if v.get("round") == "issue 24"
                      and k != "tf221_xla_off_vs_on_cpu")


@pytest.mark.parametrize("pair", TOP_BY_FACTS)
def test_accounting_top_op_is_the_facts_with_its_size(reports, pair):
    """The op that changed most by op time (each event clipped to its step window, its own
    time, each kernel and copy once) is the facts' top host op, its change within 10 %, and
    the verdict names it (behind its term) or the term the reader names."""
    r, doc = reports[pair]
    facts = FACTS[pair]["facts"]["windowed"]["diff"]["host"]["top_ops"][0]
    top = doc["ops_diff"][0]
    assert top["op"] == facts["name"], (pair, top["op"], facts["name"])
    assert top["delta_us"] == pytest.approx(facts["delta_us"], rel=0.10), (pair, top, facts)
    c = r.comparison
    said = {c.ops_diff[o.row].op for x in c.verdict.named if x.term for o in x.term.behind()
            if hasattr(o, "row")}
    if c.verdict.top_op is not None:
        said.add(c.ops_diff[c.verdict.top_op].op)
    expect = PAIRS[pair]["human"]
    assert top["op"] in said or c.verdict.named[0].op == expect.get("verdict_names"), (
        pair, doc["verdict"]["named"])


def test_accounting_xla_fusion_is_one_term():
    """A TF2 jit_compile function on CPU, read from the trace viewer JSON (no HLO): A's ops
    are fused into the function on B's side, one term of the step difference, and B is known
    to compile (not 'no XLA', not 'different programs')."""
    tmp = Path(tempfile.mkdtemp())
    pair = "tf221_xla_off_vs_on_cpu"
    r = compare_traces(_trace(pair, "a", tmp), _trace(pair, "b", tmp), out=tmp / "out",
                       labels={"a": "legacy", "b": "modern"})
    c = r.comparison
    fused = [x for x in c.ops_diff if x.status == "fused" and x.match == "xla"]
    assert [x.op for x in fused] == ["__inference_train_step_309"] and fused[0].into == "b"
    assert len(fused[0].members) >= 40
    assert "xla_fusion" in {t.key for t in c.step_delta.terms}
    assert c.sides["b"].xla.compiles == 1 and "program" not in {
        x.kind for x in c.parity.caveats}
    assert "no XLA" not in r.words["sides"]["b"]
