"""``compare.run --legacy A --modern B`` on real trace pairs of programs that are not ours
(tests/fixtures/real_pairs: sources, licences and what a careful reader says in pairs.json).

Per pair, on facts, not wording: unmapped at most 10 % of the step per side; the top
``ops_diff`` entry is the op that really changed most and the verdict names it first (or, for a
null pair, reports no significant change); the pair is like for like exactly when the reader
says so, and the caveat that makes it not is the one the reader names.
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from compare.api import compare_traces

ROOT = Path(__file__).resolve().parent / "fixtures" / "real_pairs"
PAIRS = {k: v for k, v in json.loads((ROOT / "pairs.json").read_text()).items()
         if not k.startswith("_")}
#: Which caveat makes each not-like-for-like pair so (from the reader's caveats in pairs.json).
BREAKS = {"feed_dict_vs_tfrecords_gpu": "feed_dict", "feed_dict_vs_queue_reader_gpu": "feed_dict",
          "first_vs_steady_gpu_mlp": "first_run", "one_vs_five_steps_cpu_mlp": "steps",
          "batch32_vs_batch512_gpu": "batch", "tf2_keras_small_vs_vgg_gpu": "program"}
UNMAPPED_MAX = 0.10


def _trace(pair: str, side: str) -> Path:
    return next(p for p in sorted((ROOT / pair).glob(f"{side}.*")) if "xplane" not in p.name)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = {}
    for pair in PAIRS:
        r = compare_traces(_trace(pair, "a"), _trace(pair, "b"),
                           out=tmp_path_factory.mktemp(pair) / "out")
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
    assert _is(_named(expect), named.op, named.op) or named.op == expect["named_type"], \
        (pair, named)
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


def test_faster_side_and_ratio_agree_with_the_facts(reports):
    """Where the reader calls one side faster, the verdict does, by the recorded ratio."""
    facts = json.loads((ROOT / "expected.json").read_text())
    for pair in ("mkl_matmul_cpu", "xla_mnist_softmax_gpu", "cpu_vs_gpu_mlp"):
        r, doc = reports[pair]
        ratio = facts[pair]["facts"]["median_step_a_over_b"]
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
