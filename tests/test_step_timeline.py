"""One steady step of each side as data (compare/output/step_timeline.py): the bars of a small
synthetic trace whose answer is planted, the bounds (lanes and bars capped, the rest merged,
dropped and said), timelines.json, and timelines.png drawn from exactly the same bars. Fast."""
from __future__ import annotations

import json

import pytest
from matplotlib.axes import Axes

from compare.analysis import comparison
from compare.output import plots, step_timeline
from compare.output.step_timeline import Bar, Lane, StepTimeline
from tests.synthetic import CPU, trace

# Three session runs of 1000 us; the steady two alike. Lane 0 decodes then resizes, lane 1
# crops meanwhile; lane 2 runs one op in the first run only.
STEP = 1000


def _events():
    out = []
    for k in range(3):
        t = k * STEP
        out += [(CPU, 0, t, 300, "DecodeJpeg", f"decode/DecodeJpeg_{k}"),
                (CPU, 0, t + 300, 200, "ResizeBilinear", f"resize/ResizeBilinear_{k}"),
                (CPU, 1, t + 100, 300, "Slice", f"crop_0/Slice_{k}")]
    out.append((CPU, 2, 50, 20, "Flip", "flip/ReverseV2_x"))
    out.append((CPU, 0, 3 * STEP, 0, "NoOp", "end"))
    return out


@pytest.fixture(scope="module")
def side():
    return comparison.side("a", trace(_events(), steps=[0, STEP, 2 * STEP]), "test")


def test_bars_of_the_representative_step_are_the_planted_ones(side):
    tl = step_timeline.build({"a": side.attribution})["a"]
    assert (tl.step, tl.dur_us, tl.view, tl.lanes_total) == (1, STEP, "stages", 2)
    got = [[(b.start_us, b.dur_us, b.label, b.op, b.wait) for b in ln.bars] for ln in tl.lanes]
    assert got == [[(0, 300, "decode", "DecodeJpeg", False),
                    (300, 200, "resize", "ResizeBilinear", False)],
                   [(100, 300, "crop", "Slice", False)]]
    # timeline.py names a lane by its number: the picture names it by its process, numbered
    assert [ln.short for ln in tl.lanes] == ["CPU:0 Compute #1", "CPU:0 Compute #2"]
    assert tl.folded() == ""


def test_lanes_beyond_the_cap_are_counted_with_their_busy_time(side):
    tl = step_timeline.build({"a": side.attribution}, max_lanes=1)["a"]
    assert len(tl.lanes) == 1 and tl.lanes_total == 2
    assert [b.label for b in tl.lanes[0].bars] == ["decode", "resize"]  # the busiest lane
    assert tl.folded_lanes_us == 300
    assert tl.folded() == "1 quieter lane(s) not drawn (300 us busy)"


def _timeline(bars: list[Bar], dur: float = 10_000) -> StepTimeline:
    return StepTimeline(3, dur, "stages", [Lane("tf_Compute/9", "tf_Compute", bars)], 1)


def test_close_bars_of_one_label_merge_when_over_the_cap():
    # 40 decode ops 1 us apart (under 10000 / 2000 = 5 us), then one resize, then 9 more decode
    bars = [Bar(10.0 * k, 9.0, "decode", f"d{k}") for k in range(40)]
    bars[7].dur_us = 9.5  # the longest of the first run
    bars += [Bar(400.0, 50.0, "resize", "r")]
    bars += [Bar(450.0 + 10 * k, 9.0, "decode", f"e{k}") for k in range(9)]
    tl = _timeline(bars)
    step_timeline._bound(tl, max_bars=5)
    got = [(b.start_us, b.dur_us, b.label, b.op, b.ops) for b in tl.lanes[0].bars]
    assert got == [(0.0, 399.0, "decode", "40 ops (longest: d7)", 40),
                   (400.0, 50.0, "resize", "r", 1),
                   (450.0, 89.0, "decode", "9 ops (longest: e0)", 9)]
    assert (tl.merged_bars, tl.dropped_bars) == (47, 0)
    assert tl.folded() == "47 short ops merged into neighbours of the same stage"


def test_shortest_bars_are_dropped_and_said_when_merging_is_not_enough():
    # alternating labels cannot merge: the 4 longest stay, in time order
    durs = [5, 50, 7, 40, 3, 60, 8, 70]
    bars = [Bar(100.0 * k, d, "decode" if k % 2 else "resize", f"op{k}")
            for k, d in enumerate(durs)]
    tl = _timeline(bars)
    step_timeline._bound(tl, max_bars=4)
    assert [b.op for b in tl.lanes[0].bars] == ["op1", "op3", "op5", "op7"]
    assert (tl.dropped_bars, tl.dropped_us) == (4, 5 + 7 + 3 + 8)
    assert tl.folded() == "4 shortest bars not drawn (23 us)"


def test_under_the_cap_nothing_changes():
    bars = [Bar(10.0 * k, 1.0, "decode", f"d{k}") for k in range(5)]
    tl = _timeline(list(bars))
    step_timeline._bound(tl, max_bars=5)
    assert tl.lanes[0].bars == bars and tl.folded() == ""


def test_timelines_json_holds_every_bar_the_order_and_the_colours(side):
    tls = step_timeline.build({"a": side.attribution}) | {"b": None}  # B: no steady step
    doc = json.loads(json.dumps(step_timeline.to_json(tls, {"a": "base", "b": "new"})))
    assert doc["version"] == step_timeline.TIMELINE_VERSION
    assert doc["order"] == ["base", "new"]      # sides keyed by label, as report.json's
    assert list(doc["colors"]) == ["decode", "resize", "crop"]   # pipeline order, used only
    assert doc["colors"]["decode"] == "#f44a3f"
    lanes = doc["sides"]["base"]["lanes"]
    assert [(b["start_us"], b["dur_us"], b["label"]) for b in lanes[0]["bars"]] == \
        [(0, 300, "decode"), (300, 200, "resize")]
    assert doc["sides"]["new"] is None


def test_timelines_png_draws_exactly_the_bars_of_the_data(side, tmp_path, monkeypatch):
    """The PNG and the tab read one StepTimeline: every bar drawn is one of its bars."""
    drawn = []
    real = Axes.broken_barh

    def spy(self, xranges, yrange, **kw):
        drawn.extend((round(x0 * 1e3, 6), round(w * 1e3, 6), yrange[0]) for x0, w in xranges)
        return real(self, xranges, yrange, **kw)

    monkeypatch.setattr(Axes, "broken_barh", spy)
    tls = step_timeline.build({"legacy": side.attribution})
    plots.timelines_png(tmp_path / "t.png", tls, {"legacy": "A"})
    assert (tmp_path / "t.png").stat().st_size > 1000
    want = [(b.start_us, b.dur_us, row - 0.4) for row, ln in enumerate(tls["legacy"].lanes)
            for b in ln.bars]
    assert sorted(drawn) == sorted(want)
