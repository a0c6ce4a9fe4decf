"""compare.gate's library on per-step samples built in the tests, each with a planted answer:
the statistics, the items, the judgement, the saved baseline, the renderers, what a side is.
The CLI and traces: tests/test_gate_traces.py; the rates over many seeds: test_gate_rates.py."""
from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from collections import defaultdict

import jsonschema
import numpy as np
import pytest

from common.errors import InputError
from compare.analysis.noise import rank_test
from compare.analysis.opdiff import OpStat
from compare.analysis.step_delta import FUSION
from compare.gating import baseline, render, stats
from compare.gating.items import items
from compare.gating.judge import judge
from compare.gating.model import (
    IMPROVEMENT,
    PASSED,
    REGRESSED,
    REGRESSION,
    SAME,
    TOO_FEW,
    Settings,
    SideInfo,
)
from compare.gating.runs import runs_of
from compare.gating.samples import Run, SideSamples, pooled
from compare.load import LoadError

# --------------------------------------------------------------------------------------------
# sides built from per-op samples


def side(ops: dict[str, np.ndarray], group: dict[str, str] | None = None, units=None,
         unit_of: dict[str, str] | None = None, runtime_us: float = 100.0,
         traced: bool = False) -> SideSamples:
    """A side whose ops run one after another: each op's time is its wall time in its group
    (default compute); the step is their sum plus ``runtime_us``. An op's type is the last
    part of its name."""
    n = len(next(iter(ops.values())))
    group, unit_of = group or {}, unit_of or {}
    terms: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    table, op_us, op_wall = {}, {}, {}
    for name, v in ops.items():
        v = np.asarray(v, float)
        key, g = (name, name.rsplit("/", 1)[-1]), group.get(name, "compute")
        terms[g] = terms[g] + v
        table[key] = OpStat(key[1], float(v.mean()), 0.0, 1.0, unit_of.get(name, ""), g, key,
                            float(v.mean()))
        op_us[key], op_wall[key] = v, {g: v}
    terms["runtime"] = terms["runtime"] + runtime_us
    dur = sum(terms.values())
    return SideSamples([Run("built", "synthetic", n + 1, n, traced)], dur, np.zeros(n),
                       dict(terms), table, op_us, op_wall,
                       {"runtime": {"ExecutorState::Process": runtime_us}}, units or {})


def noisy(us: float, n: int, rng, noise: float = 0.02) -> np.ndarray:
    return us * (1 + rng.normal(0, noise, n))


def program(rng, n: int, factors: dict[int, float] | None = None, ops: int = 40,
            noise: float = 0.02) -> dict[str, np.ndarray]:
    """``ops`` ops of 100 µs to 2 ms; ``factors``: op index -> its slowdown."""
    sizes = np.geomspace(100, 2000, ops)
    factors = factors or {}
    return {f"layer_{i % 4}/op_{i}/MatMul": noisy(sizes[i] * factors.get(i, 1.0), n, rng, noise)
            for i in range(ops)}


def pair(n_a: int = 30, n_b: int = 30, factors: dict[int, float] | None = None, seed: int = 0,
         **kw) -> tuple[SideSamples, SideSamples]:
    rng = np.random.default_rng(seed)
    return side(program(rng, n_a, **kw)), side(program(rng, n_b, factors, **kw))


# --------------------------------------------------------------------------------------------
# statistics


@pytest.mark.parametrize("n_a,n_b,ties", [(5, 5, False), (7, 8, False), (8, 30, False),
                                          (30, 40, False), (12, 12, True), (6, 6, True)])
def test_one_sided_tests_are_noise_rank_test_per_direction(n_a, n_b, ties):
    """Each direction's p, doubled at the smaller, is noise.rank_test's two-sided p (the same
    Mann-Whitney U, exact or normal as scipy's 'auto' picks per item)."""
    rng = np.random.default_rng(n_a * 100 + n_b)
    a = rng.normal(100, 10, (25, n_a))
    b = rng.normal(100, 10, (25, n_b)) + np.linspace(-15, 15, 25)[:, None]
    if ties:
        a, b = np.round(a / 5), np.round(b / 5)
    slower, faster = stats.one_sided(a, b)
    for i in range(25):
        two = rank_test(a[i], b[i]).p
        assert min(1.0, 2 * min(slower[i], faster[i])) == pytest.approx(two, rel=1e-9, abs=1e-12)
        u_b = (b[i][:, None] > a[i][None, :]).sum() + 0.5 * (b[i][:, None] == a[i]).sum()
        if u_b != n_a * n_b / 2:    # the direction is the U statistic's
            assert (slower[i] < faster[i]) == (u_b > n_a * n_b / 2)


def test_one_sided_edges():
    a = np.array([[5.0] * 6, [1, 2, 3, 4, 5, 6]])
    b = np.array([[5.0] * 6, [7, 8, 9, 10, 11, 12]])
    slower, faster = stats.one_sided(a, b)
    assert slower[0] == faster[0] == 1.0                 # both constant and equal
    assert slower[1] == pytest.approx(1 / math.comb(12, 6))   # complete separation, exact
    assert faster[1] == pytest.approx(1.0)
    few = stats.one_sided(np.ones((2, 4)), np.ones((2, 9)))
    assert np.isnan(few[0]).all() and np.isnan(few[1]).all()


def test_holm_known_answer():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    assert stats.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm(np.array([0.5, 0.9])) == pytest.approx([1.0, 1.0])
    assert len(stats.holm(np.array([]))) == 0


def test_can_show_is_a_necessary_condition():
    """Every item whose medians differ by the effect or more passes the filter, which reads
    only the pooled steps (whichever side they came from)."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        n_a, n_b = rng.integers(5, 12, 2)
        a = rng.exponential(100, (1, n_a)) * (rng.random((1, n_a)) < 0.7)
        b = rng.exponential(100, (1, n_b)) * (rng.random((1, n_b)) < 0.7)
        effect = float(rng.uniform(1, 200))
        if abs(np.median(b) - np.median(a)) >= effect:
            assert stats.can_show(a, b, effect)[0]
        both = np.concatenate([a, b], axis=1)
        swapped = both[:, rng.permutation(both.shape[1])]
        assert stats.can_show(a, b, effect)[0] == \
            stats.can_show(swapped[:, :n_a], swapped[:, n_a:], effect)[0]
    # exactly half of a 6-step side at the effect: passes; one fewer: cannot show it
    a = np.zeros((1, 6))
    assert stats.can_show(a, np.array([[0, 0, 0, 50, 50, 50.0]]), 50)[0]
    assert not stats.can_show(a, np.array([[0, 0, 0, 0, 50, 50.0]]), 50)[0]
    assert not stats.can_show(a, a, 0)[0]                 # nothing there at all


def test_smallest_p():
    assert stats.smallest_p(7, 7) == pytest.approx(1 / 3432)
    assert stats.smallest_p(5, 5) == pytest.approx(1 / 252)


# --------------------------------------------------------------------------------------------
# the judgement


def test_planted_regression_and_improvement_found_alone():
    a, b = pair(factors={3: 1.3, 17: 0.7})
    r = judge(a, b, Settings(min_effect_us=0))
    ops = {c.name: c.verdict for c in r.checked if c.level == "op" and c.verdict != SAME}
    assert ops == {"layer_3/op_3/MatMul (MatMul)": REGRESSION,
                   "layer_1/op_17/MatMul (MatMul)": IMPROVEMENT}
    assert r.outcome == REGRESSED and r.exit_code() == 1
    op3 = next(c for c in r.checked if c.name.startswith("layer_3/op_3/"))
    assert op3.change == pytest.approx(0.3, abs=0.03)
    assert op3.p_slower_adjusted < 0.01 and op3.n_a == op3.n_b == 30


def test_a_regression_needs_all_three_conditions():
    a, b = pair(factors={39: 1.03})           # the largest op (2 ms), 3% slower, 2% noise
    name = "layer_3/op_39/MatMul (MatMul)"
    at = (lambda s: next(c for c in judge(a, b, s).checked if c.name == name))
    assert at(Settings(max_slowdown=0.01, min_effect_us=0)).verdict == REGRESSION
    over = at(Settings(max_slowdown=0.05, min_effect_us=0))      # under --max-slowdown
    assert over.verdict == SAME and over.p_slower_adjusted < 0.01
    small = at(Settings(max_slowdown=0.01, min_effect_us=100))   # under --min-effect-us
    assert small.verdict == SAME and small.tested and small.p_slower_adjusted < 0.01
    r = judge(a, b, Settings(max_slowdown=0.01, min_effect_us=100))
    assert render.why_not(small, r) == "beyond the spread, but under the minimum effect (100 us)"
    assert render.why_not(over, judge(a, b, Settings(min_effect_us=0))) == \
        "beyond the spread, but not over --max-slowdown (5.0%)"
    a, b = pair(factors={39: 1.03}, noise=0.2)                   # within the spread
    noisy_op = at(Settings(max_slowdown=0.01, min_effect_us=0))
    assert noisy_op.verdict == SAME and noisy_op.p_slower_adjusted >= 0.01


def test_improvements_never_fail():
    a, b = pair(factors={i: 0.5 for i in range(40)})
    r = judge(a, b, Settings())
    assert r.outcome == PASSED and r.exit_code() == 0 and r.exit_code(strict=True) == 0
    assert {c.level for c in r.improvements} == {"step", "group", "op"}
    assert not r.regressions


def test_an_op_that_appears_is_a_regression_from_zero():
    a, b = pair(n_a=12, n_b=12)
    rng = np.random.default_rng(5)
    b = side({**{k[0]: v for k, v in b.op_us.items()}, "layer_9/Extra/Sort": noisy(900, 12, rng)})
    r = judge(a, b, Settings())
    new = next(c for c in r.regressions if c.level == "op")
    assert new.op == "layer_9/Extra/Sort" and new.status == "added" and new.change is None
    assert "from 0" in render.finding(new)


@pytest.mark.parametrize("n_a,n_b,alpha,few", [(4, 30, 0.01, True), (30, 4, 0.01, True),
                                               (5, 5, 0.01, False), (5, 5, 0.001, True),
                                               (1, 1, 0.01, True)])
def test_too_few_steps(n_a, n_b, alpha, few):
    a, b = pair(n_a, n_b, factors={i: 2.0 for i in range(40)})
    r = judge(a, b, Settings(alpha=alpha), _info(a, b))
    assert (r.outcome == TOO_FEW) == few
    if few:
        assert not r.tested and r.exit_code() == 0 and r.exit_code(strict=True) == 1
        out = render.lines(r)
        assert len(out) == 1 and out[0].startswith("compare.gate: too few steps to tell")
        assert f"{n_a} steady step" in out[0] and "exit 0 (--strict makes it 1)" in out[0]
    else:   # 5 against 5: only complete separation reaches alpha, and only for two items
        assert r.max_items == math.floor(alpha * 252) == 2 and r.outcome == PASSED
        assert judge(a, b, Settings(alpha=alpha, levels=("step",))).outcome == REGRESSED


def test_too_many_items_for_the_steps_is_said():
    a, b = pair(7, 7)
    r = judge(a, b, Settings(min_effect_us=0), _info(a, b))
    assert len(r.tested) == 43 and r.max_items == 34     # the step, 2 groups, 40 ops
    assert any("can tell apart at most 34 items" in ln for ln in render.lines(r))


def test_levels_asked_are_the_only_ones_checked():
    a, b = pair(factors={3: 1.5})
    r = judge(a, b, Settings(levels=("op",)))
    assert {c.level for c in r.checked} == {"op"}
    r = judge(a, b, Settings(levels=("step", "group")))
    assert {c.level for c in r.checked} == {"step", "group"}


def test_no_change_among_500_ops_raises_no_alarm():
    rng = np.random.default_rng(11)
    sizes = np.geomspace(2, 3000, 500)
    mk = (lambda: side({f"s{i % 9}/op_{i}/Add": np.round(noisy(sizes[i], 40, rng, 0.1))
                        for i in range(500)}))
    r = judge(mk(), mk(), Settings(max_slowdown=0, min_effect_us=0))
    assert len(r.tested) > 400 and r.outcome == PASSED


# --------------------------------------------------------------------------------------------
# items: as compare.run names, matches and counts them


def test_items_add_up_and_match_ops_across_renamed_scopes():
    rng = np.random.default_rng(2)
    n = 10
    a = side({"dense/MatMul": noisy(500, n, rng), "IteratorGetNext": noisy(80, n, rng)},
             group={"IteratorGetNext": "input"})
    b = side({"dense_1/MatMul": noisy(800, n, rng), "IteratorGetNext": noisy(80, n, rng)},
             group={"IteratorGetNext": "input"})
    its = {(it.level, it.name): it for it in items(a, b)}
    name = "dense/MatMul (MatMul; dense/MatMul, dense_1/MatMul)"
    op = its[("op", name)]                              # matched by scope (``_N`` dropped)
    assert op.op.match == "scope" and op.b.mean() == pytest.approx(b.op_us[("dense_1/MatMul",
                                                                             "MatMul")].mean())
    groups = [it for it in its.values() if it.level == "group"]
    for s in ("a", "b"):   # the groups add up to the step, step by step
        total = sum(getattr(g, s) for g in groups)
        assert total == pytest.approx(getattr(its[("step", "step")], s))
    step = its[("step", "step")]
    assert {c.name: round(c.delta_us) for c in step.behind} == {
        g.name: round(g.b.mean() - g.a.mean()) for g in groups}
    compute = its[("group", "compute")]
    assert [(c.kind, c.name) for c in compute.behind] == [("op", name)]


def test_xla_fusion_is_one_group_not_a_group_from_nothing():
    """Ops that B runs inside an XLA cluster: their time and the cluster's are the
    ``xla_fusion`` group (as compare.run's step difference books them), both ways."""
    rng = np.random.default_rng(4)
    n = 12
    names = ["dense/MatMul", "dense/BiasAdd", "dense/Relu"]
    plain = side({nm: noisy(300, n, rng) for nm in names} | {"loss/Mean": noisy(50, n, rng)})
    xla = side({"cluster_0/_XlaRun": noisy(400, n, rng), "loss/Mean": noisy(50, n, rng)},
               group={"cluster_0/_XlaRun": "xla_run"}, units={"cluster_0": set(names)},
               unit_of={"cluster_0/_XlaRun": "cluster_0"})
    for a, b in ((plain, xla), (xla, plain)):
        groups = {it.name: it for it in items(a, b) if it.level == "group"}
        assert set(groups) == {"compute", FUSION, "runtime"}
        fusion = groups[FUSION]
        assert fusion.a.mean() == pytest.approx(900, rel=0.05) if a is plain else \
            fusion.b.mean() == pytest.approx(900, rel=0.05)
        assert groups["compute"].a.mean() == pytest.approx(groups["compute"].b.mean(), rel=0.1)
        r = judge(a, b, Settings())
        assert not any(c.level == "group" and c.name == "compute" and c.verdict != SAME
                       for c in r.checked)
        assert next(c for c in r.checked if c.name == FUSION).verdict == \
            (IMPROVEMENT if a is plain else REGRESSION)


def test_pooled_runs_follow_one_another():
    rng = np.random.default_rng(6)
    r1 = side({"a/MatMul": noisy(100, 5, rng), "b/Add": noisy(10, 5, rng)})
    r2 = side({"a/MatMul": noisy(300, 3, rng)}, traced=True)
    p = pooled([r1, r2])
    assert p.steps == 8 and p.traced and len(p.runs) == 2
    key = ("b/Add", "Add")
    assert p.op_us[key][5:].tolist() == [0, 0, 0] and p.op_wall[key]["compute"][5:].sum() == 0
    assert p.ops[("a/MatMul", "MatMul")].host_us == pytest.approx(
        np.concatenate([r1.op_us[("a/MatMul", "MatMul")], r2.op_us[("a/MatMul", "MatMul")]]
                       ).mean())
    assert p.dur_us.tolist() == r1.dur_us.tolist() + r2.dur_us.tolist()


# --------------------------------------------------------------------------------------------
# the saved baseline


def test_baseline_round_trip_gives_the_same_answer(tmp_path):
    a, b = pair(factors={3: 1.3})
    out = tmp_path / "base.json"
    size = baseline.write(a, out)
    assert size == out.stat().st_size < 64_000 and baseline.is_baseline(out)
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads(baseline.SCHEMA_PATH.read_text()))
    back = baseline.read(out)
    assert back.steps == a.steps and set(back.ops) == set(a.ops)
    for k in a.op_us:
        assert back.op_us[k] == pytest.approx(a.op_us[k], abs=5e-4)
    direct, saved = judge(a, b, Settings()), judge(back, b, Settings())
    assert [(c.name, c.verdict) for c in direct.checked] == \
        [(c.name, c.verdict) for c in saved.checked]
    for x, y in zip(direct.checked, saved.checked):
        assert (x.a_median_us, x.a_mean_us, x.p_slower) == pytest.approx(
            (y.a_median_us, y.a_mean_us, y.p_slower), abs=1e-3)
    assert len(out.read_text().splitlines()) > len(a.ops)    # one line per op: diffs well


@pytest.mark.parametrize("damage,needle", [
    (lambda t: t[: len(t) // 2], "cannot read the baseline"),
    (lambda t: t.replace('"version": 1', '"version": 7'), "baseline version 7"),
    (lambda t: t.replace('"dur_us": [', '"dur_us": [1, '), "damaged compare.gate baseline"),
    (lambda t: t.replace('"op_us": [', '"op_us": ["x", '), "damaged compare.gate baseline"),
    (lambda t: t.replace('"ops": [', '"ops": [{"name": 1}, ', 1), "damaged"),
])
def test_damaged_baseline_is_one_line_naming_it(tmp_path, damage, needle):
    a, _ = pair(6, 6)
    out = tmp_path / "base.json"
    baseline.write(a, out)
    out.write_text(damage(out.read_text()))
    with pytest.raises(InputError) as e:
        baseline.read(out)
    assert str(out) in str(e.value) and needle in str(e.value) and "\n" not in str(e.value)


def test_a_trace_is_not_a_baseline(tmp_path):
    t = tmp_path / "trace.json"
    t.write_text('{"traceEvents": [], "format": "compare.gate baseline?"}'[:20])
    assert not baseline.is_baseline(t) and not baseline.is_baseline(tmp_path)


# --------------------------------------------------------------------------------------------
# renderers


def _info(a: SideSamples, b: SideSamples) -> dict[str, SideInfo]:
    return {"a": SideInfo("base", ["a.json"], 1, a.steps, False),
            "b": SideInfo("new", ["b.json"], 1, b.steps, False)}


def test_lines_give_outcome_findings_largest_first_and_how():
    a, b = pair(factors={3: 1.3, 17: 0.7, 39: 1.2, 38: 1.5, 37: 1.5})
    r = judge(a, b, Settings(min_effect_us=0), _info(a, b))
    out = render.lines(r)
    assert out[0] == (f"compare.gate: REGRESSED: new is slower than base beyond the noise in "
                      f"{len(r.regressions)} of {len(r.tested)} checks; 1 improvement (exit 1)")
    findings = [ln for ln in out if ln.startswith(("  REGRESSION", "  improvement"))]
    top = r.regressions[0]
    assert findings[0] == render.finding(top) and top.level == "step"
    assert findings[0].startswith(f"  REGRESSION step: median {top.a_median_us / 1e3:.1f} ms -> "
                                  f"{top.b_median_us / 1e3:.1f} ms per step "
                                  f"(+{top.change * 100:.1f}%, p < 0.001, 30 vs 30 steps); "
                                  f"groups: compute +")
    compute = next(ln for ln in findings if " group compute:" in ln)
    assert "; ops: layer_2/op_38/MatMul (MatMul) +" in compute
    op = next(ln for ln in findings if " op layer_3/op_3/" in ln)
    assert op.startswith("  REGRESSION op layer_3/op_3/MatMul (MatMul): median 126 us -> ")
    assert out[-1] == ("  checked the step, 2 groups, 40 ops; tested the 43 with time on either "
                       "side, one-sided rank tests at alpha 0.01, Holm-adjusted over those 43; "
                       "a regression is a median slower by over 5.0%, beyond the spread")
    regs = [ln for ln in findings if "REGRESSION" in ln]
    deltas = [c.delta_us for c in r.regressions]
    assert len(regs) == len(deltas) and deltas == sorted(deltas, key=lambda d: -abs(d))


def test_json_follows_its_schema_and_says_the_same():
    a, b = pair(factors={39: 1.3})
    r = judge(a, b, Settings(), _info(a, b))
    doc = render.to_json(r)
    jsonschema.validate(doc, json.loads(render.SCHEMA_PATH.read_text()))
    assert doc["outcome"] == "regressed" and doc["exit_code"] == 1
    assert doc["counts"] == {"checked": len(r.checked), "tested": len(r.tested),
                             "regressions": len(r.regressions),
                             "improvements": len(r.improvements)}
    op = next(x for x in doc["regressions"] if x["level"] == "op")
    assert op["op"] == "layer_3/op_39/MatMul" and op["type"] == "MatMul"
    few = judge(*pair(3, 3), Settings(), _info(*pair(3, 3)))
    jsonschema.validate(render.to_json(few, strict=True),
                        json.loads(render.SCHEMA_PATH.read_text()))


def test_junit_one_case_per_item_tested_a_failure_per_regression():
    a, b = pair(factors={3: 1.3, 17: 0.7})
    r = judge(a, b, Settings(min_effect_us=0), _info(a, b))
    root = ET.fromstring(render.junit(r))
    cases = root.findall("testsuite/testcase")
    assert len(cases) == len(r.tested) == int(root.get("tests"))
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == len(r.regressions) == int(root.get("failures"))
    assert {c.get("name") for c in failed} == {c.name for c in r.regressions}
    assert failed[0].find("failure").get("message").startswith("REGRESSION ")
    few = judge(*pair(3, 3), Settings(), _info(*pair(3, 3)))
    for strict, tag in ((False, "skipped"), (True, "failure")):
        case = ET.fromstring(render.junit(few, strict)).find("testsuite/testcase")
        assert case.get("name") == "steps" and case.find(tag) is not None


# --------------------------------------------------------------------------------------------
# what a side is


def _trace(path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"traceEvents": []}')


def test_runs_of_layouts(tmp_path):
    one = tmp_path / "t.json"
    _trace(one)
    assert runs_of(one) == [one]
    run = tmp_path / "run"
    _trace(run / "plugins/profile/2024_01_01_00_00_00/host.trace.json.gz")
    assert runs_of(run) == [run]                                 # one session: the run
    _trace(run / "plugins/profile/2024_01_01_00_00_09/host.trace.json.gz")
    assert [p.name for p in runs_of(run)] == ["2024_01_01_00_00_00", "2024_01_01_00_00_09"]
    reps = tmp_path / "reps"
    for name in ("r1.json", "r2.json.gz"):
        _trace(reps / name)
    (reps / "notes.txt").write_text("not a run")
    _trace(reps / "r3" / "timeline.json")
    _trace(reps / "r4" / "plugins/profile/s/host.xplane.pb")
    assert [p.name for p in runs_of(reps)] == ["r1.json", "r2.json.gz", "r3", "r4"]
    saved = tmp_path / "saved"     # xprof's trace files kept under names of one's own
    for name in ("monday.trace.json.gz", "tuesday.trace.json.gz"):
        _trace(saved / "week" / name)
    _trace(saved / "friday" / "host.trace.json.gz")
    assert [p.name for p in runs_of(saved / "week")] == ["monday.trace.json.gz",
                                                         "tuesday.trace.json.gz"]
    assert [p.name for p in runs_of(saved)] == ["friday", "monday.trace.json.gz",
                                                "tuesday.trace.json.gz"]
    session = tmp_path / "logs/plugins/profile/2024_01_31_12_00_00"
    _trace(session / "host1.trace.json.gz")    # two hosts of one session: one run
    _trace(session / "host2.trace.json.gz")
    assert runs_of(session) == [session] and runs_of(tmp_path / "logs") == [tmp_path / "logs"]
    ours = tmp_path / "ours"       # our run folders (compare.run's DIR/legacy, DIR/modern)
    for side, trace in (("legacy", "timeline.json"), ("modern", "trace.json.gz")):
        _trace(ours / side / trace)
        _trace(ours / side / "run.json")
        _trace(ours / side / "plugins/profile/2024_01_01_00_00_00/host.xplane.pb")
        assert runs_of(ours / side) == [ours / side]
    hosts = tmp_path / "hosts"     # several hosts' xplanes: one session, one run
    _trace(hosts / "h1.xplane.pb")
    _trace(hosts / "h2.xplane.pb")
    assert runs_of(hosts) == [hosts]
    report = tmp_path / "cmp"
    _trace(report / "legacy/timeline.json")
    (report / "report.json").write_text("{}")
    with pytest.raises(InputError, match="a compare.run report folder.*cmp/legacy"):
        runs_of(report)
    (tmp_path / "empty").mkdir()
    with pytest.raises(LoadError, match="holds no trace"):
        runs_of(tmp_path / "empty")
    with pytest.raises(LoadError, match="no such file"):
        runs_of(tmp_path / "missing")
