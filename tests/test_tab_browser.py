"""The Pipeline compare tab in a real TensorBoard and a real headless Chromium, as a user sees
it: listed among TensorBoard's tabs; the values in its tables equal report.json's for the same
pair (and compare.run's own report.json over the same run folder); sorting, the status filter,
the side pickers and labels work; both timelines draw the bars of timelines.json and hover
says what a bar is; the step difference's waterfall draws a step_delta built here; the page
loads nothing from elsewhere; bad names get HTTP 400; and the same tab on a logdir of two real
public profiles of another program (tests/fixtures/real_pairs/chess_numpy_vs_tfdata_gpu_tf2).

Without Chromium these tests skip, saying what to install (``.ci/install-tools``; CI fails on
any skip)."""
from __future__ import annotations

import gzip
import json
import random
import re
import shutil
import struct
import time
from pathlib import Path

import pytest

from compare import fmt
from compare.tab.cache import CACHE_DIR, entry_key
from compare.tab.sessions import list_sessions
from compare.viewers.browser import Chromium
from compare.viewers.tensorboard import TAB_PLUGIN, TensorBoard, TensorBoardError
from tests.conftest import ROOT, run_module

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.needs("chromium")]

FRAME = f"document.querySelector('iframe[src*=\"name={TAB_PLUGIN}\"]')"
CHESS = ROOT / "tests/fixtures/real_pairs/chess_numpy_vs_tfdata_gpu_tf2"
#: (run, session folder) of the chess pair's two xplanes, as their repository named them
CHESS_SESSIONS = {"a": ("numpy", "2021_06_16_16_37_16"), "b": ("tfdata", "2021_06_17_18_34_57")}


class Tab:
    """The compare tab of one TensorBoard in one browser page."""

    def __init__(self, page, tb):
        self.page, self.tb = page, tb

    def js(self, body: str):
        """Run ``body`` (statements ending in ``return``) with ``doc``, the tab's document."""
        return self.page.evaluate(f"(async () => {{ const frame = {FRAME}; "
                                  f"const doc = frame && frame.contentDocument; {body} }})()")

    def open(self) -> dict:
        """Load TensorBoard on the tab afresh (a page already there would only change hash)."""
        self.page.navigate("about:blank")
        self.page.navigate(f"{self.tb.url}/#{TAB_PLUGIN}")
        return self.wait_done()

    def wait_done(self, timeout: float = 240) -> dict:
        return self.page.wait_for(
            f"(() => {{ const f = {FRAME}; const d = f && f.contentDocument; "
            f"const r = d && d.querySelector('#pc-root'); "
            f"return r && ['done', 'error'].includes(r.dataset.state) && "
            f"{{state: r.dataset.state, status: d.querySelector('#pc-status').innerText}}; }})()",
            timeout=timeout, what="the Pipeline compare tab")

    def table(self, table_id: str) -> list[dict]:
        """Every row of a table (all rows shown first): key, and per column value and text."""
        return self.js(f"""
            const box = doc.querySelector('#{table_id}').parentElement;
            const more = box.querySelector('.pc-more');
            if (more && !more.hidden) more.click();
            return [...doc.querySelectorAll('#{table_id} tbody tr:not(.pc-detail)')].map(tr => ({{
              key: tr.dataset.key,
              cells: Object.fromEntries([...tr.children].map(td => [td.dataset.col,
                                         [td.dataset.value, td.innerText.trim()]]))}}));""")

    def click(self, selector: str) -> None:
        assert self.js(f"const e = doc.querySelector({json.dumps(selector)}); "
                       f"if (!e) return false; e.click(); return true;"), selector

    def cached_report(self, logdir: Path, a: str, b: str) -> dict:
        """report.json of the comparison of ``a`` and ``b`` (default labels): what the tab's
        route serves is the file in the tab's cache, byte for byte."""
        doc = self.tb.get_json(f"/data/plugin/{TAB_PLUGIN}/compare", {"a": a, "b": b})
        assert doc["state"] == "done"
        listing = {s.name: s for s in list_sessions(logdir)}
        key = entry_key(listing[a], listing[b], tuple(doc["pair"]["labels"]))
        assert json.loads((logdir / CACHE_DIR / key / "report.json").read_text()) == doc["report"]
        return doc["report"]


@pytest.fixture(scope="module")
def ours(tmp_path_factory, profile_logdir):
    """TensorBoard over a copy of a compare.run-style run folder (legacy/ and modern/), a
    browser page on its compare tab: (Tab, logdir)."""
    logdir = tmp_path_factory.mktemp("tab") / "run"
    shutil.copytree(profile_logdir[0], logdir)
    work = tmp_path_factory.mktemp("tab_work")
    with TensorBoard(logdir, log_path=work / "tensorboard.log") as tb, \
            Chromium(width=1400, height=1000, log_path=work / "chromium.log") as browser:
        yield Tab(browser.new_page(), tb), logdir


def _sessions(logdir: Path) -> dict[str, str]:
    return {p.parts[-5]: f"{p.parts[-5]}/{p.parts[-2]}"
            for p in logdir.glob("*/plugins/profile/*/*.xplane.pb")}


def _num(value: str) -> float | None:
    return None if value in ("", "null") else float(value)


def _signed(us: float) -> str:
    """A change as the page writes it (compare.run's sign and duration)."""
    return ("+" if us > 0 else "-" if us < 0 else "") + fmt.duration(abs(us))


def test_the_tab_is_listed_and_shows_the_default_pair(ours):
    tab, logdir = ours
    listing = tab.tb.get_json("/data/plugins_listing")
    assert listing[TAB_PLUGIN]["tab_name"] == "Pipeline compare" and listing[TAB_PLUGIN]["enabled"]
    got = tab.open()
    assert got["state"] == "done", got
    # TensorBoard's own bar lists the tab beside Profile
    assert "pipeline compare" in tab.page.evaluate("document.body.innerText").lower()
    names = _sessions(logdir)
    assert tab.js("return [doc.querySelector('#pc-a').value, doc.querySelector('#pc-b').value]") \
        == [names["legacy"], names["modern"]]


def test_table_values_equal_report_json_for_the_same_pair(ours):
    tab, logdir = ours
    tab.open()
    names = _sessions(logdir)
    report = tab.cached_report(logdir, names["legacy"], names["modern"])
    assert tab.js("return doc.querySelector('.pc-comparison').innerText") == \
        report["verdict"]["comparison"]
    # the generic view: one row per group, each side's mean per steady step (A: a_*, B: b_*)
    rows = {r["key"]: r["cells"] for r in tab.table("pc-groups-table")}
    want = {(r["group"] + (": " + r["scope"] if r["scope"] else "")): r
            for r in report["groups"]["rows"]}
    assert set(rows) == set(want)
    for key, r in want.items():
        for col, side in (("us0", "a"), ("us1", "b")):
            value, text = rows[key][col]
            assert _num(value) == r[f"{side}_us"], (key, side)
            assert text == (fmt.duration(r[f"{side}_us"]) if r[f"{side}_us"] else "-")
    # the seed's stages (both sides are our pipelines), rows with time on either side
    stages = {r["key"]: r["cells"] for r in tab.table("pc-stages-table")}
    want = {r["stage"]: r for r in report["stages"] if r["a_us"] or r["b_us"]}
    assert set(stages) == set(want)
    for key, r in want.items():
        assert _num(stages[key]["us0"][0]) == r["a_us"]
        assert _num(stages[key]["us1"][0]) == r["b_us"]
        assert _num(stages[key]["ratio"][0]) == r["ratio"]
    # every op row, in report.json's order once sorted by |delta| (the default)
    ops = tab.table("pc-ops-table")
    assert len(ops) == len(report["ops_diff"])
    for row, r in zip(ops, sorted(report["ops_diff"], key=lambda r: -abs(r["delta_us"]))):
        cells = row["cells"]
        assert (cells["op"][0], cells["type"][0], cells["status"][0]) == (
            r["op"], r["type"], r["status"])
        assert (_num(cells["us0"][0]), _num(cells["us1"][0]), _num(cells["delta"][0])) == (
            r["a_us"], r["b_us"], r["delta_us"])
        sign = "+" if r["delta_us"] > 0 else "-" if r["delta_us"] < 0 else ""
        assert cells["delta"][1] == sign + fmt.duration(abs(r["delta_us"]))
    # the steps: mean and median per steady step, the sides in report.json's order
    assert report["order"] == ["legacy", "modern"]
    steps = tab.js("return [...doc.querySelectorAll('#pc-steps-table tbody tr')].map(tr => "
                   "[tr.children[0].innerText, +tr.children[1].dataset.value, "
                   "+tr.children[2].dataset.value])")
    assert steps == [[k, report["steps"][k]["mean_us"], report["steps"][k]["median_us"]]
                     for k in report["order"]]
    # the step difference's waterfall: A's step, each term, B's step
    d = report["step_delta"]
    rows = tab.js("return [...doc.querySelectorAll('#pc-steps .pc-wf-row')].map(g => "
                  "[g.dataset.kind, g.dataset.key, g.querySelector('.pc-wf-amount').textContent])")
    assert rows == [["total", "legacy", fmt.duration(d["a_us"])],
                    *[["term", t["key"], _signed(t["delta_us"])] for t in d["terms"]],
                    ["total", "modern", fmt.duration(d["b_us"])]]
    # each side's sentences
    assert tab.js("return [...doc.querySelectorAll('#pc-verdict ul:not(.pc-caveats) li')]"
                  ".map(li => li.innerText)") == [report["verdict"]["sides"][k]
                                                  for k in report["order"]]


def test_sorting_and_the_status_filter(ours):
    tab, logdir = ours
    tab.open()
    names = _sessions(logdir)
    report = tab.cached_report(logdir, names["legacy"], names["modern"])
    ops = report["ops_diff"]
    tab.click("#pc-ops-table th[data-col='delta']")          # numbers: largest first
    assert tab.js("return doc.querySelector(\"#pc-ops-table th[data-col='delta']\")"
                  ".getAttribute('aria-sort')") == "descending"
    got = [_num(r["cells"]["delta"][0]) for r in tab.table("pc-ops-table")]
    assert got == sorted((r["delta_us"] for r in ops), reverse=True)
    tab.click("#pc-ops-table th[data-col='delta']")          # again: reversed
    got = [_num(r["cells"]["delta"][0]) for r in tab.table("pc-ops-table")]
    assert got == sorted(r["delta_us"] for r in ops)
    tab.click("#pc-ops-table th[data-col='op']")             # text: A to Z
    got = [r["cells"]["op"][0] for r in tab.table("pc-ops-table")]
    assert sorted(got) == sorted(r["op"] for r in ops)
    assert got == tab.js(f"return {json.dumps(got)}.slice().sort((a, b) => a.localeCompare(b))")
    tab.click("#pc-ops .pc-filters button[data-status='removed']")
    got = tab.table("pc-ops-table")
    assert {r["cells"]["status"][0] for r in got} == {"removed"}
    assert len(got) == sum(r["status"] == "removed" for r in ops)
    tab.click("#pc-ops .pc-filters button[data-status='all']")
    assert len(tab.table("pc-ops-table")) == len(ops)
    tab.click("#pc-groups-table th[data-col='us1']")
    got = [_num(r["cells"]["us1"][0]) for r in tab.table("pc-groups-table")]
    assert got == sorted(got, reverse=True)


def test_both_timelines_draw_the_bars_of_timelines_json_and_hover_says_what_they_are(ours):
    tab, logdir = ours
    tab.open()
    names = _sessions(logdir)
    doc = tab.tb.get_json(f"/data/plugin/{TAB_PLUGIN}/compare",
                          {"a": names["legacy"], "b": names["modern"]})
    timelines = doc["timelines"]
    drawn = tab.js("return [...doc.querySelectorAll('.pc-timeline-svg g.pc-side')].map(g => "
                   "[g.querySelectorAll('.pc-bar').length, g.querySelectorAll('.pc-lane-name')"
                   ".length])")
    want = [[sum(len(ln["bars"]) for ln in timelines["sides"][k]["lanes"]),
             len(timelines["sides"][k]["lanes"])] for k in timelines["order"]]
    assert drawn == want and all(n > 0 for n, _ in drawn)
    # hover the longest bar of side B as a mouse would
    side = timelines["sides"][timelines["order"][1]]
    bars = [b for ln in side["lanes"] for b in ln["bars"]]
    longest = max(range(len(bars)), key=lambda i: bars[i]["dur_us"])
    first_b = sum(len(ln["bars"]) for ln in timelines["sides"][timelines["order"][0]]["lanes"])
    at = tab.js(f"""
        const r = doc.querySelector('.pc-bar[data-i="{first_b + longest}"]');
        r.scrollIntoView({{block: 'center'}});
        const b = r.getBoundingClientRect(), f = frame.getBoundingClientRect();
        return {{x: f.left + b.left + b.width / 2, y: f.top + b.top + b.height / 2}};""")
    tab.page.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": at["x"], "y": at["y"]})
    tip = tab.page.wait_for(f"(() => {{ const t = {FRAME}.contentDocument.querySelector("
                            f"'.pc-tip'); return t && !t.hidden && t.innerText; }})()",
                            timeout=10, what="the timeline's hover box")
    bar = bars[longest]
    what = "stage" if timelines["view"] == "stages" else "group"
    assert tip.splitlines()[:3] == [
        bar["op"], f"{what}: {bar['label']}" + (" (waiting for input)" if bar["wait"] else ""),
        f"{fmt.duration(bar['dur_us'])}, from {fmt.duration(bar['start_us'])} into the step"]


def test_the_side_pickers_and_labels_compare_another_pair(ours):
    tab, logdir = ours
    tab.open()
    names = _sessions(logdir)
    tab.click("#pc-swap")
    assert tab.wait_done()["state"] == "done"
    assert tab.js("return [doc.querySelector('#pc-a').value, doc.querySelector('#pc-b').value]") \
        == [names["modern"], names["legacy"]]
    heads = tab.js("return [...doc.querySelectorAll('#pc-groups-table th')].map(t => t.innerText)")
    assert heads[1:3] == ["modern", "legacy"]
    report = tab.cached_report(logdir, names["modern"], names["legacy"])
    assert tab.js("return doc.querySelector('.pc-comparison').innerText") == \
        report["verdict"]["comparison"]
    # labels: typed, then Compare
    tab.js("doc.querySelector('#pc-label-a').value = 'after'; "
           "doc.querySelector('#pc-label-b').value = 'before'; "
           "doc.querySelector('#pc-go').click(); return true;")
    assert tab.wait_done()["state"] == "done"
    heads = tab.js("return [...doc.querySelectorAll('#pc-groups-table th')].map(t => t.innerText)")
    assert heads[1:3] == ["after", "before"]
    assert "after" in tab.js("return doc.querySelector('.pc-comparison').innerText")
    # the profile links open each session in the Profile tab's trace viewer
    links = tab.js("return [...doc.querySelectorAll('.pc-profile-link')].map(a => a.href)")
    assert [link.split("?", 1)[1] for link in links] == [
        f"run={names[k].replace('/', '%2F')}&tool=trace_viewer&host=vm#profile"
        for k in ("modern", "legacy")]


def test_the_profile_link_opens_the_session_in_the_trace_viewer(ours):
    tab, logdir = ours
    tab.open()
    names = _sessions(logdir)
    # side A: legacy, which the Profile tab would not open by itself (it opens modern first)
    tab.click(".pc-card[data-side='0'] .pc-profile-link")
    profile = "document.querySelector('iframe[src*=\"name=profile\"]')"
    tab.page.wait_for(f"(() => {{ const f = {profile}; const d = f && f.contentDocument; "
                      f"return d && d.body && d.body.innerText; }})()", timeout=120,
                      what="the Profile tab")
    session = re.escape(names["legacy"]).replace("/", "\\/")
    tab.page.wait_for(
        f"(() => {{ const t = {profile}.contentDocument.body.innerText; "
        f"return /Sessions \\(\\d+\\)\\s+{session}\\s+Tools \\(\\d+\\)\\s+Trace Viewer/"
        f".test(t); }})()", timeout=120, what="the trace viewer of side A's session")


#: report.json as schema 3 wrote it: per-side keys legacy / modern, labels apart
V3_REPORT = {"schema_version": 3, "labels": {"legacy": "base", "modern": "new"},
             "steps": {"legacy": {"median_us": 300}, "modern": {"median_us": 200}},
             "verdict": {"comparison": "c", "legacy": "l", "modern": "m"},
             "groups": {"rows": [{"group": "input", "scope": "", "legacy_us": 4.0,
                                  "modern_us": 2.0}]}}


def test_the_waterfall_draws_a_step_delta_and_the_adapter_reads_sides_by_order(ours):
    tab, _ = ours
    tab.open()
    # a report as schema 4 writes it: per-side objects keyed by the labels in `order`, rows'
    # per-side fields a_* (A) and b_* (B), a step_delta (here with a rest the terms leave)
    report = {
        "schema_version": 4, "order": ["old run", "new run"],
        "steps": {"old run": {"mean_us": 30000, "median_us": 29000},
                  "new run": {"mean_us": 8000, "median_us": 7900}},
        "verdict": {"comparison": "new run is faster", "sides": {"old run": "slow",
                                                                 "new run": "fast"}},
        "answers": {"old run": {"summary": "A"}, "new run": {"summary": "B"}},
        "groups": {"rows": [{"group": "input", "scope": "", "a_us": 5.0, "b_us": 1.0,
                             "a_ops": ["a"], "b_ops": []}],
                   "unmapped_us": {"old run": 2.0, "new run": 3.0}},
        "ops_diff": [{"op": "x", "type": "T", "status": "removed", "a_us": 7.0, "b_us": 0,
                      "delta_us": -7.0, "into": "new run"}],
        "step_delta": {"basis": "window", "a_us": 30000, "b_us": 8000, "delta_us": -22000,
                       "terms": [{"key": "resize", "words": "resizing", "a_us": 9000,
                                  "b_us": 1000, "delta_us": -8000,
                                  "ops": [{"op": "ResizeBilinear", "type": "ResizeBilinear",
                                           "delta_us": -7500}]},
                                 {"key": "saturation", "a_us": 4000, "b_us": 200,
                                  "delta_us": -3800, "ops": []},
                                 {"key": "compute: x", "a_us": 100, "b_us": 1300,
                                  "delta_us": 1200, "ops": []}],
                       "rest_us": -11400}}
    got = tab.js(f"""
        const base = new URL('plugin/{TAB_PLUGIN}/static/', location.origin + '/data/');
        const adapter = await import(new URL('adapter.js', base));
        const wf = await import(new URL('waterfall.js', base));
        const m = adapter.readReport({json.dumps(report)}, null, null);
        const box = wf.drawWaterfall(m.stepDelta, 800);
        document.body.append(box);
        const rows = [...box.querySelectorAll('.pc-wf-row')].map(g => [g.dataset.kind,
          g.dataset.key, +g.querySelector('rect').getAttribute('x'),
          +g.querySelector('rect').getAttribute('width'),
          g.querySelector('.pc-wf-amount').textContent]);
        const model = {{labels: m.labels, groups: m.groups, ops: m.ops, steps: m.steps,
                        verdict: m.verdict, answers: m.answers, unmapped: m.groupsUnmappedUs}};
        box.remove();
        const v3 = adapter.readReport({json.dumps(V3_REPORT)}, null, null);
        const old = {{labels: v3.labels, groups: v3.groups.map(g => g.us),
                     steps: v3.steps.map(s => s.medianUs), sides: v3.verdict.sides,
                     stepDelta: v3.stepDelta}};
        return {{rows, note: box.querySelector('.pc-note').textContent, model, old}};""")
    kinds = [(k, key, amount) for k, key, _, _, amount in got["rows"]]
    assert kinds == [("total", "old run", "30.0 ms"), ("term", "resize", "-8.0 ms"),
                     ("term", "saturation", "-3.8 ms"), ("term", "compute: x", "+1.2 ms"),
                     ("rest", "everything else", "-11.4 ms"), ("total", "new run", "8.0 ms")]
    scale = got["rows"][0][3] / 30000          # px per us: the first total bar
    x0 = got["rows"][0][2]
    running = 30000
    for (_, _, x, w, _), d in zip(got["rows"][1:5], (-8000, -3800, 1200, -11400)):
        lo, hi = sorted((running, running + d))
        assert x == pytest.approx(x0 + lo * scale, abs=0.01)
        assert w == pytest.approx((hi - lo) * scale, abs=0.01)
        running += d
    assert running == 8000 and got["rows"][-1][3] == pytest.approx(8000 * scale, abs=0.01)
    assert got["note"] == "old run 30.0 ms → new run 8.0 ms (-22.0 ms, mean steady step)"
    m = got["model"]
    assert m["labels"] == ["old run", "new run"]
    assert m["groups"][0]["us"] == [5.0, 1.0] and m["ops"][0]["us"] == [7.0, 0]
    assert [(s["meanUs"], s["medianUs"]) for s in m["steps"]] == [(30000, 29000), (8000, 7900)]
    assert m["verdict"]["sides"] == ["slow", "fast"] and m["unmapped"] == [2.0, 3.0]
    assert [a["summary"] for a in m["answers"]] == ["A", "B"]
    # a report without `order` (schema 3): sides and row fields keyed legacy / modern
    assert got["old"] == {"labels": ["base", "new"], "groups": [[4.0, 2.0]],
                          "steps": [300, 200], "sides": ["l", "m"], "stepDelta": None}


def test_numbers_read_as_compare_run_prints_them(ours):
    tab, _ = ours
    tab.open()
    # Python rounds exact ties to even, toFixed up; 12.35 ms is no tie (12.3499... in binary)
    values = [0, 0.4, 0.5, 1.5, 2.5, 999.4, 999.5, 1000, 1049.9, 12250, 12350, 999_949,
              999_950, 1_000_000, 2_345_000, 2_345_678, -0.5, -1500, -12250, 123_456_789]
    values += [k * 50 for k in range(4000)] + [k + 0.5 for k in range(-500, 500)]
    rng = random.Random(28)
    values += [round(rng.uniform(0, 3e6), rng.choice((0, 1, 2))) for _ in range(4000)]
    got = tab.js(f"""
        const f = await import(new URL('plugin/{TAB_PLUGIN}/static/format.js',
                                       location.origin + '/data/'));
        return {json.dumps(values)}.map(v => f.duration(v));""")
    assert got == [fmt.duration(v) for v in values]


def test_the_page_loads_nothing_from_elsewhere_and_routes_refuse_bad_names(ours):
    tab, logdir = ours
    tab.open()
    urls = tab.js("return performance.getEntriesByType('resource').map(e => e.name)"
                  ".concat([doc.location.href])")
    assert urls and all(u.startswith(tab.tb.url + "/") for u in urls), urls
    names = _sessions(logdir)
    for params in ({"a": "../../etc", "b": names["modern"]},
                   {"a": names["legacy"], "b": "legacy/../modern"},
                   {"a": names["legacy"], "b": "nope/2020_01_01_00_00_00"},
                   {"a": str(logdir / "legacy"), "b": names["modern"]}):
        with pytest.raises(TensorBoardError, match="HTTP 400"):
            tab.tb.get(f"/data/plugin/{TAB_PLUGIN}/compare", params)


@pytest.fixture(scope="module")
def chess_logdir(tmp_path_factory):
    """The chess pair's two real xplanes laid out as TensorBoard writes a logdir."""
    root = tmp_path_factory.mktemp("chess") / "logs"
    for side, (run, session) in CHESS_SESSIONS.items():
        folder = root / run / "plugins" / "profile" / session
        folder.mkdir(parents=True)
        (folder / "aoberai.xplane.pb").write_bytes(
            gzip.decompress((CHESS / f"{side}.xplane.pb.gz").read_bytes()))
    return root


def test_the_tab_on_two_real_public_profiles_of_another_program(chess_logdir, tmp_path):
    with TensorBoard(chess_logdir, log_path=tmp_path / "tensorboard.log") as tb, \
            Chromium(width=1400, height=1000, log_path=tmp_path / "chromium.log") as browser:
        tab = Tab(browser.new_page(), tb)
        got = tab.open()
        assert got["state"] == "done", got
        a, b = (f"{run}/{session}" for run, session in CHESS_SESSIONS.values())
        assert tab.js("return [doc.querySelector('#pc-a').value, "
                      "doc.querySelector('#pc-b').value]") == [a, b]
        report = tab.cached_report(chess_logdir, a, b)
        assert report["order"] == ["numpy", "tfdata"]
        assert report["view"]["shown"] == "groups"
        assert tab.js("return !!doc.querySelector('#pc-stages-table')") is False
        rows = {r["key"]: r["cells"] for r in tab.table("pc-groups-table")}
        for r in report["groups"]["rows"]:
            key = r["group"] + (": " + r["scope"] if r["scope"] else "")
            assert _num(rows[key]["us0"][0]) == r["a_us"]
            assert _num(rows[key]["us1"][0]) == r["b_us"]
        drawn = tab.js("return [...doc.querySelectorAll('.pc-timeline-svg g.pc-side')].map(g => "
                       "g.querySelectorAll('.pc-bar').length)")
        assert len(drawn) == 2 and all(n > 0 for n in drawn), drawn
        shot = tab.page.screenshot(tmp_path / "chess.png")
        assert struct.unpack(">II", shot.read_bytes()[16:24]) == (1400, 1000)


XLA_PAIR = ROOT / "tests/fixtures/real_pairs/tf221_xla_off_vs_on_cpu"


def test_a_fused_cluster_opens_to_the_ops_it_holds(tmp_path):
    """A real pair made with TensorFlow 2.21 (tests/fixtures/real_pairs, a train step without
    and with jit_compile), laid out as a TF 2.2/2.3-style logdir (host.trace.json.gz): the ops
    fused into B's compiled function are rows marked fused, and opening one lists the ops
    report.json says it holds."""
    logdir = tmp_path / "logs"
    for run, side, session in (("base", "a", "2026_01_01_00_00_00"),
                               ("jit", "b", "2026_01_01_00_01_00")):
        folder = logdir / run / "plugins" / "profile" / session
        folder.mkdir(parents=True)
        shutil.copy(XLA_PAIR / f"{side}.trace.json.gz", folder / "host.trace.json.gz")
    with TensorBoard(logdir, log_path=tmp_path / "tensorboard.log") as tb, \
            Chromium(width=1400, height=1000, log_path=tmp_path / "chromium.log") as browser:
        tab = Tab(browser.new_page(), tb)
        assert tab.open()["state"] == "done"
        report = tab.cached_report(logdir, "base/2026_01_01_00_00_00", "jit/2026_01_01_00_01_00")
        fused = [r for r in report["ops_diff"] if r["status"] == "fused" and r["members"]]
        assert fused, [r["status"] for r in report["ops_diff"]]
        tab.click("#pc-ops .pc-filters button[data-status='fused']")
        rows = tab.table("pc-ops-table")
        assert {r["cells"]["op"][0] for r in rows} == {r["op"] for r in report["ops_diff"]
                                                       if r["status"] == "fused"}
        top = max(fused, key=lambda r: abs(r["delta_us"]))
        opened = tab.js(f"""
            const row = () => [...doc.querySelectorAll('#pc-ops-table tbody tr')]
              .find(tr => tr.querySelector("td[data-col='op']")?.dataset.value ===
                          {json.dumps(top["op"])});
            row().querySelector('.pc-toggle').click();       // the table is drawn again
            const detail = row().nextElementSibling;
            return {{cls: detail.className, head: detail.querySelector('p').innerText,
                     items: [...detail.querySelectorAll('li')].map(li => li.innerText)}};""")
        assert opened["cls"] == "pc-detail"
        assert opened["items"] == top["members"]
        assert opened["head"].startswith(f"{top['op']} holds {top['members_total']} op(s) of "
                                         f"the other side")


#: report.json's keys that say where and when, not what was measured
PROVENANCE = {"created", "sources", "cross_checks", "files", "tensorboard", "screenshot", "runs",
              "elapsed_s", "merged_trace"}


def test_compare_run_screenshot_saves_the_tab_with_the_numbers_of_its_report(compare_run):
    """``compare.run --screenshot``: compare_tab.png beside profile_tab.png, shown in report.md
    and listed in report.json; the tab it shows computed, over the run folder, every number
    of compare.run's own report.json (only where and when differ)."""
    out, proc = compare_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no screenshot" not in proc.stderr, proc.stderr[-2000:]
    png = out / "compare_tab.png"
    assert struct.unpack(">II", png.read_bytes()[16:24]) == (1400, 1700)
    assert png.stat().st_size > 50_000
    report = json.loads((out / "report.json").read_text())
    assert report["files"]["compare_tab_png"] == "compare_tab.png"
    assert "](compare_tab.png)" in (out / "report.md").read_text()
    assert "compare_tab.png" in proc.stdout
    (cached,) = (out / CACHE_DIR).glob("*/report.json")
    tab = json.loads(cached.read_text())
    assert tab["order"] == report["order"] == ["legacy", "modern"]
    for key in set(report) - PROVENANCE:
        assert tab[key] == report[key], key


def test_errors_are_one_sentence_in_the_tab(chess_logdir, tmp_path):
    """An unreadable session, then a logdir with one session only: the tab says so in one
    sentence, and nothing is left running."""
    logdir = tmp_path / "logs"
    shutil.copytree(chess_logdir / "numpy", logdir / "numpy")
    bad = logdir / "broken" / "plugins" / "profile" / "2030_01_01_00_00_00" / "host.xplane.pb"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a profile" * 50)
    with TensorBoard(logdir, log_path=tmp_path / "tensorboard.log") as tb, \
            Chromium(width=1400, height=1000, log_path=tmp_path / "chromium.log") as browser:
        tab = Tab(browser.new_page(), tb)
        got = tab.open()
        assert got["state"] == "error", got
        line = got["status"].strip()
        assert line.startswith(f"Could not compare numpy/{CHESS_SESSIONS['a'][1]} with "
                               f"broken/2030_01_01_00_00_00: ") and "\n" not in line
        assert str(bad.parent) in line or "host.xplane.pb" in line, line
        shutil.rmtree(logdir / "broken")
        time.sleep(6)                                       # the listing is 5 s old at most
        got = tab.open()
        assert got["state"] == "error"
        assert got["status"].strip() == (
            f"{logdir} holds one profile session (numpy/{CHESS_SESSIONS['a'][1]}); the tab "
            f"compares two: profile another run into this logdir.")
        assert tb.get_json("/data/plugins_listing")[TAB_PLUGIN]["enabled"] is False


def test_benchmark_smoke_writes_json(profile_logdir, tmp_path):
    """benchmarks.tab runs end to end over a run folder and writes what BENCHMARKS.md reads
    (timings not checked)."""
    out = tmp_path / "bench.json"
    proc = run_module("benchmarks.tab", "--run", str(profile_logdir[0]), "--views", "1",
                      "--json", str(out), timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["first"]["tab_s"] > 0 and result["first"]["page_s"] >= result["first"]["tab_s"]
    assert len(result["later"]) == 1 and result["later_median"]["tab_s"] > 0
    assert result["cli_s"] > 0
    assert result["first_over_cli"] == round(result["first"]["tab_s"] / result["cli_s"], 2)
    # the phases report.json records (its own writing ends after it is written)
    assert {"convert", "map", "compare", "answers"} <= set(result["compute_s"])
    assert "first view (computed)" in proc.stdout
