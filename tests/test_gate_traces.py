"""compare.gate on traces: pairs generated with a known change (tests/known_pairs.py, as
TensorFlow writes them), the real pairs with several steps (tests/fixtures/real_pairs, gated
both ways), its numbers against compare.run's for the same pair, and the CLI as CI runs it."""
from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from compare.analysis.step_delta import FUSION
from compare.api import compare_traces
from compare.gating import Settings, gate, read_side
from compare.gating.items import PART_MIN_US
from compare.gating.judge import judge
from compare.gating.model import PASSED, REGRESSED, TOO_FEW
from compare.gating.render import SCHEMA_PATH, to_json
from tests.conftest import assert_one_line_error, run_module
from tests.known_pairs import Params, make_pair
from tests.known_report import Report

REAL = Path(__file__).parent / "fixtures" / "real_pairs"
SERIAL = REAL / "tf221_serial_vs_prefetch_input_cpu"      # A serial input, B prefetched


def _by_name(result, level: str) -> dict:
    return {c.name: c for c in result.checked if c.level == level}


# --------------------------------------------------------------------------------------------
# generated pairs: the trace path gives the planted answer


@pytest.mark.parametrize("form,device", [("timeline", "cpu"), ("xprof", "cpu"),
                                         ("xprof", "gpu")])
def test_planted_op_slowdown_is_named_and_nothing_else(tmp_path, form, device):
    p = make_pair(Params(form=form, device=device, steps=31, noise=0.02, change="longer",
                         op=3, delta_us=120.0, seed=5), tmp_path)
    r = gate(p.a, p.b, Settings())
    ops = [c for c in r.regressions if c.level == "op"]
    assert r.outcome == REGRESSED and [c.op for c in ops] == [p.truth.op]
    op = ops[0]
    assert op.b_mean_us - op.a_mean_us == pytest.approx(p.truth.delta_us, abs=1.0)
    assert op.n_a == op.n_b == 30
    assert not r.improvements


@pytest.mark.parametrize("form", ["timeline", "xprof"])
def test_no_change_passes(tmp_path, form):
    p = make_pair(Params(form=form, steps=31, noise=0.02, change="longer", delta_us=0.0,
                         seed=9), tmp_path)
    r = gate(p.a, p.b, Settings(max_slowdown=0.0, min_effect_us=0.0))
    assert r.outcome == PASSED and not r.regressions and len(r.tested) > 10


def test_fusion_into_xla_is_its_own_group_both_ways(tmp_path):
    p = make_pair(Params(form="xprof", steps=31, noise=0.02, change="fused", op=0, fused_ops=3,
                         ratio=1.6, seed=2), tmp_path)
    forward, back = gate(p.a, p.b, Settings()), gate(p.b, p.a, Settings())
    assert FUSION in {c.name for c in forward.regressions}
    assert FUSION in {c.name for c in back.improvements}
    for r in (forward, back):   # no group grows from nothing because its ops moved into XLA
        assert {c.name for c in r.regressions if c.level == "group"} <= {FUSION, "runtime"}


def test_a_folder_of_runs_pools_their_steps(tmp_path):
    p = make_pair(Params(form="xprof", steps=11, noise=0.02, seed=4), tmp_path / "pair")
    reps = tmp_path / "reps"
    for k in ("r1", "r2"):
        (reps / k).mkdir(parents=True)
        shutil.copy(p.a, reps / k / p.a.name)
    one, two = read_side(p.a), read_side(reps)
    assert two.steps == 2 * one.steps == 20 and len(two.runs) == 2
    key = next(iter(one.op_us))
    assert two.op_us[key].tolist() == one.op_us[key].tolist() * 2
    assert two.ops[key].host_us == pytest.approx(one.ops[key].host_us)


@pytest.mark.slow
@pytest.mark.parametrize("delta_us", [0.0, 90.0])
def test_rates_on_generated_traces(tmp_path, delta_us):
    """The sample-level rates (tests/test_gate_rates.py) on the trace path, over 20 seeds of
    xprof traces with 31 steps and 2% noise per op: no change fails no seed; an op 90 us slower
    (10% of dense/MatMul) is named, alone, in every seed."""
    hits = []
    for seed in range(20):
        p = make_pair(Params(form="xprof", steps=31, noise=0.02, change="longer", op=0,
                             delta_us=delta_us, seed=seed), tmp_path / str(seed))
        r = gate(p.a, p.b, Settings(max_slowdown=0.02))
        hits.append([c.op for c in r.regressions if c.level == "op"] == [p.truth.op]
                    if delta_us else r.outcome == REGRESSED)
    assert sum(hits) == (20 if delta_us else 0), hits


# --------------------------------------------------------------------------------------------
# the same numbers as compare.run


def test_numbers_match_compare_run(tmp_path):
    """Means per step of the step, each group (a term of the step difference) and each op
    (an ops_diff row) are report.json's, on a pair with an XLA fusion."""
    p = make_pair(Params(form="xprof", steps=8, noise=0.03, change="fused", fused_ops=3,
                         seed=3), tmp_path / "pair")
    report = compare_traces(p.a, p.b, tmp_path / "out", labels={"a": "A", "b": "B"})
    rep = Report(json.loads((report.out / "report.json").read_text()))
    _assert_same_numbers(rep, gate(p.a, p.b, Settings(min_effect_us=0)))


def _assert_same_numbers(rep: Report, result) -> None:
    g = to_json(result)
    items = {(c["level"], c["name"]): c for c in g["checked"]}
    sd = rep.step_delta()
    step = items[("step", "step")]
    assert (step["baseline_mean_us"], step["new_mean_us"]) == pytest.approx((sd.a_us, sd.b_us),
                                                                               abs=0.06)
    assert {t.key for t in sd.terms} == {n for (lv, n) in items if lv == "group"}
    for t in sd.terms:
        c = items[("group", t.key)]
        assert (c["baseline_mean_us"], c["new_mean_us"]) == pytest.approx((t.a_us, t.b_us),
                                                                          abs=0.06)
    ops = {(c["op"], c["type"]): c for c in g["checked"] if c["level"] == "op"}
    assert len(ops) == len(rep.ops())
    for r in rep.ops():
        c = ops[(r.op, r.type)]
        assert (c["baseline_mean_us"], c["new_mean_us"]) == pytest.approx((r.a_us, r.b_us),
                                                                          abs=0.06)
        assert c["status"] == r.status
    _assert_same_parts(rep, result)


def _assert_same_parts(rep: Report, result) -> None:
    """What the gate's lines name behind an item, with its change, is report.json's: the
    step's groups (step_delta's terms) and, behind each group, the ops and the time no op
    owns that the step difference names there."""
    checked = {(c.level, c.name): c for c in result.checked}
    step = {p.name: p.delta_us for p in checked[("step", "step")].behind}
    ops = 0
    for t in rep.doc["step_delta"]["terms"]:
        assert step[t["key"]] == pytest.approx(t["delta_us"], abs=0.06)
        parts = {p.name: p.delta_us for p in checked[("group", t["key"])].behind}
        for o in t.get("ops", ()):
            if abs(o["delta_us"]) >= PART_MIN_US:
                name = next(n for n in parts if n.startswith(f"{o['op']} ({o['type']})"))
                assert parts[name] == pytest.approx(o["delta_us"], abs=0.06)
                ops += 1
        for e in t.get("events", ()):
            assert parts[e["name"]] == pytest.approx(e["delta_us"], abs=0.06)
    assert ops


@pytest.mark.slow
def test_numbers_match_compare_run_on_a_real_pair(tmp_path):
    pair = REAL / "tf221_xla_off_vs_on_cpu"
    report = compare_traces(pair / "a.trace.json.gz", pair / "b.trace.json.gz", tmp_path / "o",
                            labels={"a": "A", "b": "B"})
    rep = Report(json.loads((report.out / "report.json").read_text()))
    _assert_same_numbers(rep, gate(pair / "a.trace.json.gz", pair / "b.trace.json.gz",
                                   Settings(min_effect_us=0)))


# --------------------------------------------------------------------------------------------
# real pairs, both ways


@pytest.fixture(scope="module")
def real():
    """Each real pair's sides, read once."""
    cache: dict[Path, object] = {}

    def side(path: Path):
        if path not in cache:
            cache[path] = read_side(path)
        return cache[path]
    return side


def _gate(real, pair: str, baseline: str, new: str, **kw):
    folder = REAL / pair
    return judge(real(folder / f"{baseline}.trace.json.gz"),
                 real(folder / f"{new}.trace.json.gz"), Settings(**kw))


def test_real_serial_input_against_prefetch(real):
    """A serial tf.data map inside the step (A) against parallel + prefetch (B): gated with B
    as the baseline the input group regressed, and the op whose time moved into it is named."""
    r = _gate(real, "tf221_serial_vs_prefetch_input_cpu", "b", "a")
    assert r.outcome == REGRESSED and r.exit_code() == 1
    group = _by_name(r, "group")["input"]
    assert group.verdict == "regression" and group.n_a == group.n_b == 7
    assert group.b_median_us > 5 * group.a_median_us
    behind = {c.name: c.delta_us for c in group.behind if c.kind == "op"}
    assert behind["resize/ResizeBilinear (ResizeBilinear)"] > 3000
    back = _gate(real, "tf221_serial_vs_prefetch_input_cpu", "a", "b")
    assert back.outcome == PASSED and "input" in {c.name for c in back.improvements}


def test_real_batch_four_times_larger(real):
    r = _gate(real, "tf221_batch64_vs_batch256_cpu", "a", "b")
    assert r.outcome == REGRESSED
    assert {"step", "compute"} <= {c.name for c in r.regressions}
    ops = [c for c in r.regressions if c.level == "op"]
    assert ops[0].op == "gradient_tape/sequential_1/conv2d_1_2/convolution/Conv2DBackpropFilter"
    compute = _by_name(r, "group")["compute"]
    assert compute.behind and max(compute.behind, key=lambda c: c.delta_us).name.startswith(
        "gradient_tape/sequential_1/conv2d_1_2/convolution/Conv2DBackpropFilter")
    back = _gate(real, "tf221_batch64_vs_batch256_cpu", "b", "a")
    assert back.outcome == PASSED and len(back.improvements) == len(r.regressions)


def test_real_xla_on_is_slower_and_off_is_not_a_regression(real):
    r = _gate(real, "tf221_xla_off_vs_on_cpu", "a", "b")
    assert r.outcome == REGRESSED
    step = _by_name(r, "step")["step"]
    assert step.verdict == "regression" and \
        max(step.behind, key=lambda c: c.delta_us).name == FUSION
    back = _gate(real, "tf221_xla_off_vs_on_cpu", "b", "a")
    assert back.outcome == PASSED and "step" in {c.name for c in back.improvements}


def test_real_first_window_against_a_later_one(real):
    r = _gate(real, "tf221_first_vs_later_window_cpu", "b", "a")
    assert r.outcome == REGRESSED and {"step", "compute"} <= {c.name for c in r.regressions}
    assert _gate(real, "tf221_first_vs_later_window_cpu", "a", "b").outcome == PASSED


def test_real_mixed_float16_on_cpu_is_slower_in_compute(real):
    """TF 2.3 Keras on CPU, float32 (A) against the mixed_float16 policy (B), 18 steps a side:
    B is slower in compute, its convolution gradients named; the other way round, improvements
    only."""
    r = _gate(real, "fatma_fp32_vs_mixed16_cpu_tf23", "a", "b")
    assert r.outcome == REGRESSED
    assert {"step", "compute"} <= {c.name for c in r.regressions}
    ops = [c for c in r.regressions if c.level == "op"]
    assert ops[0].op == "gradient_tape/sequential/conv2d_1/Conv2D/Conv2DBackpropFilter"
    assert ops[0].n_a == ops[0].n_b == 18
    back = _gate(real, "fatma_fp32_vs_mixed16_cpu_tf23", "b", "a")
    assert back.outcome == PASSED and not back.regressions
    # the same items the other way round (an op row's name says its direction: fused "<-",
    # unfused "->", so ops are counted)
    assert len(back.improvements) == len(r.regressions)
    assert {c.name for c in back.improvements if c.level != "op"} == \
        {c.name for c in r.regressions if c.level != "op"}


def test_real_null_pair_passes_both_ways(real):
    """The same TF 2.3 Keras program run twice (its folders differ only in a label): no
    regression either way, at the defaults."""
    for a, b in (("a", "b"), ("b", "a")):
        r = _gate(real, "fatma_batch_label_null_cpu_tf23", a, b)
        assert r.outcome == PASSED and not r.regressions and len(r.tested) > 10


@pytest.mark.parametrize("pair", ["tf221_serial_vs_prefetch_input_cpu",
                                  "tf221_xla_off_vs_on_cpu"])
def test_real_trace_against_itself_passes_with_nothing_found(real, pair):
    r = _gate(real, pair, "a", "a", max_slowdown=0.0, min_effect_us=0.0)
    assert r.outcome == PASSED and not r.regressions and not r.improvements


def test_real_single_step_pairs_are_too_few(tmp_path):
    pair = REAL / "one_vs_five_steps_cpu_mlp"
    r = gate(pair / "a.timeline.json", pair / "b.timeline.json")
    assert r.outcome == TOO_FEW and r.exit_code() == 0 and r.exit_code(strict=True) == 1


# --------------------------------------------------------------------------------------------
# the CLI, as CI runs it


def test_cli_gates_a_real_pair_with_junit_and_json(tmp_path):
    junit, js = tmp_path / "gate.xml", tmp_path / "gate.json"
    proc = run_module("compare.gate", str(SERIAL / "b.trace.json.gz"),
                      str(SERIAL / "a.trace.json.gz"), "--labels", "prefetch,serial",
                      "--junit", str(junit), "--json", str(js))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("compare.gate: REGRESSED: serial is slower than prefetch")
    group = next(ln for ln in lines if ln.startswith("  REGRESSION group input:"))
    assert "ops: resize/ResizeBilinear (ResizeBilinear) +4.2 ms" in group
    suite = ET.parse(junit).getroot()
    assert int(suite.get("failures")) >= 1 and int(suite.get("tests")) > 10
    doc = json.loads(js.read_text())
    jsonschema.validate(doc, json.loads(SCHEMA_PATH.read_text()))
    assert doc["exit_code"] == 1 and doc["sides"]["baseline"]["label"] == "prefetch"
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.slow  # three gate processes over real traces
def test_cli_saved_baseline_then_gates_against_it(tmp_path):
    base = tmp_path / "ci" / "baseline.json"
    proc = run_module("compare.gate", "--save-baseline", str(SERIAL / "b.trace.json.gz"),
                      str(base))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"compare.gate: baseline of {SERIAL / 'b.trace.json.gz'} "
                                  f"(7 steady steps,")
    assert 1_000 < base.stat().st_size < 200_000
    slower = run_module("compare.gate", str(base), str(SERIAL / "a.trace.json.gz"))
    same = run_module("compare.gate", str(base), str(SERIAL / "b.trace.json.gz"))
    assert (slower.returncode, same.returncode) == (1, 0), slower.stderr + same.stderr
    assert "REGRESSION group input" in slower.stdout
    assert same.stdout.startswith("compare.gate: passed")


@pytest.mark.slow
def test_cli_report_and_too_few(tmp_path):
    out = tmp_path / "report"
    proc = run_module("compare.gate", str(SERIAL / "b.trace.json.gz"),
                      str(SERIAL / "a.trace.json.gz"), "--report", str(out))
    assert proc.returncode == 1 and (out / "report.md").is_file()
    assert proc.stdout.splitlines()[-1] == f"report: {out / 'report.md'}"
    pair = REAL / "one_vs_five_steps_cpu_mlp"
    few = run_module("compare.gate", str(pair / "a.timeline.json"), str(pair / "b.timeline.json"))
    strict = run_module("compare.gate", str(pair / "a.timeline.json"),
                        str(pair / "b.timeline.json"), "--strict")
    assert (few.returncode, strict.returncode) == (0, 1)
    assert len(few.stdout.splitlines()) == 1 and "too few steps to tell" in few.stdout


def test_cli_help():
    proc = run_module("compare.gate", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: python -m compare.gate")
    assert "--max-slowdown" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args,needle", [
    ([], "takes two sides"),
    (["x.json"], "takes two sides"),
    (["missing.json", "other.json"], "missing.json: no such file"),
    (["README.md", "README.md"], "README.md"),
    (["A", "B", "--max-slowdown", "lots"], "--max-slowdown 'lots'"),
    (["A", "B", "--alpha", "1.5"], "--alpha 1.5"),
    (["A", "B", "--by", "step,stage"], "--by"),
    (["A", "B", "--min-effect-us", "-3"], "--min-effect-us -3"),
    (["A", "B", "--labels", "one"], "--labels"),
    (["A", "B", "--max-memory", "lots"], "--max_memory"),
    (["A", "B", "--max-memory", "1K"], "a.trace.json.gz: too big to load"),
    (["--save-baseline", "A"], "--save-baseline TRACE takes one argument"),
    (["--save-baseline", "A", "tests"], "--save-baseline TRACE tests: is a folder"),
    (["A", "B", "--junit", "tests"], "--junit tests: is a folder"),
    (["--nosuchflag"], "nosuchflag"),
])
def test_cli_bad_input_is_one_line(tmp_path, args, needle):
    args = [str(SERIAL / "a.trace.json.gz") if a == "A" else
            str(SERIAL / "b.trace.json.gz") if a == "B" else a for a in args]
    assert_one_line_error(run_module("compare.gate", *args, cwd=Path(__file__).parent.parent),
                          needle)


def test_cli_bad_baseline_and_report_are_one_line(tmp_path):
    bad = tmp_path / "baseline.json"
    bad.write_text('{"format": "compare.gate baseline", "version": 1, "steps": {}}')
    assert_one_line_error(run_module("compare.gate", str(bad), str(SERIAL / "a.trace.json.gz")),
                          str(bad), "damaged")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("mine")
    assert_one_line_error(run_module("compare.gate", str(SERIAL / "b.trace.json.gz"),
                                     str(SERIAL / "a.trace.json.gz"), "--report", str(taken)),
                          "--report")
    assert (taken / "x").read_text() == "mine"
    assert_one_line_error(run_module("compare.gate", str(bad), str(SERIAL / "a.trace.json.gz"),
                                     "--report", str(tmp_path / "r")), "saved baseline")
