"""compare.gate's statistical properties, measured over 200 seeds at the sample level
(:mod:`benchmarks.gate_rates`: two sides of a 500-op program as per-step samples, gated by the
gate's own judgement; tests/test_gate_traces.py shows traces give the same samples).

- no change: the gate fails at most 2% of the seeds, with every threshold off (the rank tests
  and Holm's method alone) and with the defaults;
- a 3% slowdown of the step with 2% noise over 50 steps: found in at least 95% of the seeds
  (with --max-slowdown 1%: the default 5% is above the planted change by design);
- one op among 500 20% slower: named, and no other op, in at least 95% of the seeds.

``BENCHMARKS.md`` has the same rates over 1,000 seeds (``python -m benchmarks.gate_rates``)."""
from __future__ import annotations

import pytest

from benchmarks.gate_rates import rate

SEEDS = 200
pytestmark = pytest.mark.slow     # ~10 s each: 200 gates of 500 ops


@pytest.mark.parametrize("setting", ["default",
                                     "pure statistics (max-slowdown 0, min-effect 0)"])
def test_false_alarms_at_most_2_percent(setting):
    r = rate("null", setting, SEEDS)
    assert r["rate"] <= 0.02, r


def test_a_3_percent_slowdown_is_found():
    r = rate("step", "max-slowdown 1%", SEEDS, slowdown=0.03, noise=0.02, steps=50)
    assert r["rate"] >= 0.95, r


def test_one_slowed_op_among_500_is_named_alone():
    r = rate("op", "min-effect 0", SEEDS, ops=500)
    assert r["rate"] >= 0.95, r
