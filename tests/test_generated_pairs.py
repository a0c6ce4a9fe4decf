"""Generated pairs with known answers (issue 14): our own pipelines run with XLA on and off.
The same program both ways, so the pair is like for like, the ops match by node name (our
scopes), the clusters or compiled functions of the XLA side are in the op diff, and the verdict
names the pipeline's stages. Slow: each side is a real TensorFlow run (session fixtures)."""
from __future__ import annotations

import json

import pytest

from common.stages import ALL_STAGES
from compare.api import compare_traces
from tests.schema import validate as validate_report

pytestmark = pytest.mark.slow

#: Of each side's model op time, at least this much matches by node name (the same graph).
NAME_MATCHED = 0.5


def _check_same_program(doc: dict, xla_side: int) -> None:
    """``xla_side``: 0 for A, 1 for B."""
    validate_report(doc)
    c = doc["comparability"]
    assert c["like_for_like"], c["caveats"]
    assert not {x["kind"] for x in c["caveats"]} & {"program", "batch", "feed_dict",
                                                    "first_run"}
    for side, share in doc["groups"]["unmapped_share"].items():
        assert share <= 0.10, (side, share)
    model = [r for r in doc["ops_diff"] if r["group"] in ("compute", "preprocessing",
                                                         "optimizer", "input")]
    for side in ("a", "b"):
        total = sum(r[f"{side}_us"] for r in model)
        named = sum(r[f"{side}_us"] for r in model if r["match"] in ("name", "scope", "xla"))
        assert total and named / total >= NAME_MATCHED, (side, named, total)
    ran = [u for u, row in doc["xla"][doc["order"][xla_side]]["units"].items() if row["runs"]]
    assert ran
    diffed = {r["op"] for r in doc["ops_diff"]} | {r["op"].split("+")[0]
                                                   for r in doc["ops_diff"]}
    assert any(u in diffed or u.lstrip("_") in " ".join(diffed) for u in ran), (ran, diffed)
    assert doc["verdict"]["named"] and doc["verdict"]["named"][0]["op"] in ALL_STAGES


def test_legacy_with_and_without_xla(compare_traces_run):
    out, proc = compare_traces_run   # legacy.run (XLA) as legacy, legacy.run --noxla as modern
    assert proc.returncode == 0, proc.stderr
    _check_same_program(json.loads((out / "report.json").read_text()), 0)


def test_modern_with_and_without_jit(tmp_path, modern_run, modern_run_nojit):
    r = compare_traces(modern_run_nojit[0], modern_run[0], out=tmp_path / "out",
                       labels={"a": "nojit", "b": "jit"})
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    _check_same_program(doc, 1)
    assert doc["order"] == ["nojit", "jit"]
    assert r.words["comparison"].startswith(("jit is", "nojit is", "no significant"))
