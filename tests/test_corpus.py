"""The bad-input corpus (tests/corpus/make_corpus.py) through every CLI and the loaders: one
line naming the input and the problem, exit 2, no traceback, bounded memory and time; partly
usable input is analysed and what was skipped is said."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import assert_one_line_error, run_guarded

pytestmark = pytest.mark.slow

#: image item -> the words the one-line error must hold (None: the run must succeed)
IMAGE_ERRORS = {
    "img_empty.jpg": "empty file",
    "img_truncated.jpg": "does not decode",
    "img_png.jpg": "a PNG file",
    "img_1x4000.jpg": "aspect ratio 4000:1",
    "img_4000x1.jpg": "aspect ratio 4000:1",
    "img_claims_60000x60000.jpg": "3600 MP, above the 100 MP limit",
    "img_folder.jpg": "holds no .jpg",
}
#: trace item -> ("error", words of the LoadError) or ("partial", words of a warning)
TRACE_OUTCOMES = {
    "tr_empty.json": ("error", "empty file"),
    "tr_truncated.json": ("partial", "truncated mid-event"),
    "tr_truncated.json.gz": ("partial", "gzip stream ends early"),
    "tr_damaged_middle.json": ("partial", "skipped 1 damaged stretch"),
    "tr_non_utf8.json": ("partial", "non-UTF-8 bytes were replaced"),
    "tr_not_a_trace.json": ("error", "without a 'traceEvents' list"),
    "tr_list_of_numbers.json": ("error", "no usable trace events"),
    "tr_unknown_ph.json": ("partial", "unknown ph 'Q'"),
    "tr_unclosed_be.json": ("partial", "B events never closed"),
    "tr_bad_dur.json": ("partial", "negative dur"),
    "tr_no_pid_tid.json": ("partial", "without integer pid/tid"),
    "tr_all_no_pid_tid.json": ("error", "no usable trace events"),
    "tr_bomb.json.gz": ("error", "gzip bomb"),
    "tr_corrupt.xplane.pb": ("error", "not a valid .xplane.pb"),
    "tr_garbage.xplane.pb": ("error", "not a valid .xplane.pb"),
    "tr_empty_logdir": ("error", "no .xplane.pb"),
}


def test_corpus_lists_every_item(corpus):
    from tests.corpus.make_corpus import IMAGES, TRACES

    assert set(corpus) == set(IMAGES) | set(TRACES)
    tested = set(IMAGE_ERRORS) | set(TRACE_OUTCOMES) | {
        "img_gray.jpg", "img_cmyk.jpg", "img_8000x8000.jpg", "img_noperm.jpg"}
    assert tested == set(corpus)
    assert all(p.exists() for p in corpus.values())
    assert 9e6 < corpus["tr_bomb.json.gz"].stat().st_size < 12e6


# --- images ------------------------------------------------------------------------------

@pytest.mark.parametrize("module", ["legacy.run", "modern.run"])
@pytest.mark.parametrize("item", sorted(IMAGE_ERRORS))
def test_pipeline_run_refuses_bad_image(corpus, tmp_path, module, item):
    out = tmp_path / "out"
    proc = run_guarded(module, "--out", str(out), "--images", str(corpus[item]), "--steps", "2")
    assert_one_line_error(proc, str(corpus[item]), IMAGE_ERRORS[item])
    assert not out.exists() or {p.name for p in out.iterdir()} <= {"tf.log"}


MIXED_BAD = ("img_empty.jpg", "img_png.jpg", "img_truncated.jpg", "img_1x4000.jpg")


def _mixed(corpus, tmp_path) -> Path:
    """A folder of the four bad images and two good ones (grayscale, CMYK)."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    for item in MIXED_BAD + ("img_gray.jpg", "img_cmyk.jpg"):
        (folder / item).write_bytes(corpus[item].read_bytes())
    return folder


def _names_every_bad_one(proc, folder: Path) -> None:
    line = assert_one_line_error(proc, "4 of 6 images cannot be used (--skip_bad runs on the "
                                       "other 2): ")
    for item in MIXED_BAD:
        assert f"{folder / item}: " in line and IMAGE_ERRORS[item] in line, (item, line)


def test_modern_skip_bad_runs_on_what_is_usable_and_names_the_rest(corpus, tmp_path):
    """A folder of good and bad images: by default one line naming every bad file; with
    --skip_bad the run goes on and names every skipped file with its reason, on stderr and in
    run.json."""
    folder, bad = _mixed(corpus, tmp_path), MIXED_BAD
    proc = run_guarded("modern.run", "--out", str(tmp_path / "strict"), "--images", str(folder),
                       "--steps", "2")
    _names_every_bad_one(proc, folder)
    out = tmp_path / "lenient"
    proc = run_guarded("modern.run", "--out", str(out), "--images", str(folder), "--steps", "2",
                       "--skip_bad")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    run = json.loads((out / "run.json").read_text())
    skipped = {os.path.basename(s["path"]): s["reason"] for s in run["skipped"]}
    assert set(skipped) == set(bad) and run["skipped_count"] == len(bad)
    for item in bad:
        assert IMAGE_ERRORS[item] in skipped[item]
        assert any(item in ln and "skipped" in ln for ln in proc.stderr.splitlines())
    assert {os.path.basename(i["path"]) for i in run["images"]} == {"img_gray.jpg", "img_cmyk.jpg"}


def test_compare_run_names_every_bad_image_or_skips_them(corpus, tmp_path):
    """compare.run on the same folder: one line naming all four before anything runs (no run
    folder made), or with --skip_bad each skipped one named and both pipelines run on the
    two good ones."""
    folder = _mixed(corpus, tmp_path)
    strict = tmp_path / "strict"
    t0 = time.monotonic()
    proc = run_guarded("compare.run", "--out", str(strict), "--images", str(folder),
                       "--steps", "2")
    _names_every_bad_one(proc, folder)
    assert not strict.exists() and time.monotonic() - t0 < 60  # no TensorFlow run started
    out = tmp_path / "lenient"
    proc = run_guarded("compare.run", "--out", str(out), "--images", str(folder), "--steps", "2",
                       "--skip_bad", timeout=600)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    skipped = [ln for ln in proc.stderr.splitlines() if ln.startswith("compare.run: skipped ")]
    assert len(skipped) == len(MIXED_BAD)
    for item, line in zip(sorted(MIXED_BAD), skipped):
        assert line.startswith(f"compare.run: skipped {folder / item}: ") and \
            IMAGE_ERRORS[item] in line, (item, line)
    for side in ("legacy", "modern"):
        run = json.loads((out / side / "run.json").read_text())
        assert {os.path.basename(i["path"]) for i in run["images"]} == \
            {"img_gray.jpg", "img_cmyk.jpg"}, side


@pytest.mark.parametrize("item", ["img_empty.jpg", "img_1x4000.jpg", "img_truncated.jpg",
                                  "img_claims_60000x60000.jpg"])
def test_compare_run_refuses_bad_image(corpus, tmp_path, item):
    out = tmp_path / "out"
    proc = run_guarded("compare.run", "--out", str(out), "--images", str(corpus[item]),
                       "--steps", "2")
    assert_one_line_error(proc, str(corpus[item]), IMAGE_ERRORS[item])


def test_header_guards_need_no_tensorflow(corpus):
    """Size and aspect guards run on the JPEG header alone, before TF is even imported."""
    from common.errors import InputError
    from common.inputs import check_file, jpeg_size

    assert jpeg_size(corpus["img_8000x8000.jpg"].read_bytes()) == (8000, 8000)
    assert jpeg_size(corpus["img_1x4000.jpg"].read_bytes()) == (4000, 1)
    for item in ("img_1x4000.jpg", "img_4000x1.jpg", "img_claims_60000x60000.jpg"):
        with pytest.raises(InputError, match=IMAGE_ERRORS[item]):
            check_file(str(corpus[item]))


def test_grayscale_and_cmyk_jpegs_run_with_true_colours(corpus, tmp_path):
    """Both decode to 3 channels with the right colours (CMYK converted, gray replicated) and
    the legacy CLI runs on them."""
    import tensorflow as tf

    from common.inputs import default_image

    rgb = tf.io.decode_jpeg(open(default_image(), "rb").read(), channels=3).numpy()
    for item in ("img_gray.jpg", "img_cmyk.jpg"):
        x = tf.io.decode_jpeg(corpus[item].read_bytes(), channels=3).numpy()
        assert x.shape == rgb.shape
        if item == "img_gray.jpg":
            assert (x[..., 0] == x[..., 1]).all() and (x[..., 1] == x[..., 2]).all()
        else:  # within JPEG re-encoding error of the original RGB, channel by channel
            assert np.abs(x.astype(float) - rgb).mean(axis=(0, 1)).max() < 8
    out = tmp_path / "out"
    proc = run_guarded("legacy.run", "--out", str(out), "--images",
                       f"{corpus['img_gray.jpg']},{corpus['img_cmyk.jpg']}", "--steps", "2")
    assert proc.returncode == 0, proc.stderr
    run = json.loads((out / "run.json").read_text())
    assert {os.path.basename(i["path"]) for i in run["images"]} == {"img_gray.jpg", "img_cmyk.jpg"}
    assert run["output_shape"] == [10, 221, 221, 3]


@pytest.mark.parametrize("module,mem_gib", [("legacy.run", 4), ("modern.run", 6)])
def test_8000x8000_image_runs_in_bounded_memory(corpus, tmp_path, module, mem_gib):
    """64 MP is inside the 100 MP limit: it must run under an address-space cap (measured:
    legacy 1.0 GB peak RSS; modern 2.4 GB, its parallel map holding the decoded image and its
    float copy, 0.7 GB each)."""
    out = tmp_path / "out"
    proc = run_guarded(module, "--out", str(out), "--images",
                       str(corpus["img_8000x8000.jpg"]), "--steps", "2", mem_gib=mem_gib)
    assert proc.returncode == 0, proc.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["images"][0]["height"] == run["images"][0]["width"] == 8000
    assert proc.maxrss_mib < 3072, proc.maxrss_mib


@pytest.mark.parametrize("module", ["legacy.run", "modern.run"])
def test_unreadable_image_is_refused(corpus, tmp_path, module):
    """Mode 000 stops reads only for a non-root user; as root the CLI runs without the
    capabilities that let root ignore file modes."""
    img, out = corpus["img_noperm.jpg"], tmp_path / "out"
    proc = run_guarded(module, "--out", str(out), "--images", str(img), "--steps", "2",
                       modes_bind_root=True)
    assert_one_line_error(proc, str(img), "permission denied")
    assert not out.exists()


# --- traces ------------------------------------------------------------------------------

def _load_or_refused(path, kind: str, needle: str):
    """The loaded trace; or, for an item that must be refused, None after checking the one-line
    LoadError names the file and what is wrong."""
    from compare.load import LoadError, load

    if kind != "error":
        return load(path)
    with pytest.raises(LoadError) as e:
        load(path)
    msg = str(e.value)
    assert str(path) in msg and needle in msg and "\n" not in msg, msg
    return None


@pytest.mark.parametrize("item", sorted(t for t in TRACE_OUTCOMES if t != "tr_bomb.json.gz"))
def test_loader_on_bad_trace(corpus, legacy_run, item):
    from compare.load import load

    kind, needle = TRACE_OUTCOMES[item]
    path = corpus[item]
    tr = _load_or_refused(path, kind, needle)
    if tr is None:
        return
    assert any(needle in w for w in tr.warnings), tr.warnings
    whole = load(legacy_run[0] / "timeline.json")
    assert 0 < len(tr.events) <= len(whole.events) + (item == "tr_unclosed_be.json")
    assert (tr.events.dur >= 0).all()
    names = set(tr.col_str("op_type"))
    if item == "tr_non_utf8.json":  # every event kept, the damaged names readable
        assert len(tr.events) == len(whole.events)
        assert "D\ufffdcodeJpeg" in names and "Reader\ufffdReadV2" in names
    if item in ("tr_unknown_ph.json",):  # the odd events dropped, every real one kept
        assert len(tr.events) == len(whole.events)
    if item == "tr_damaged_middle.json":  # the garbled event lost, the events after it read
        assert len(tr.events) == len(whole.events) - 1
    if item == "tr_unclosed_be.json":  # the one B/E pair that closes is kept, nested inside
        assert len(tr.events) == len(whole.events) + 1
        assert any("E events without a matching B" in w for w in tr.warnings)
        assert 3.0 in tr.events.dur[tr.mask(name="nested")]


def test_gzip_bomb_is_refused_in_bounded_memory_and_time(corpus):
    """10 MB -> 10 GiB: refused after a few hundred MiB of output (the ratio guard), not after
    the 4 GiB absolute cap, and never the whole 10 GiB."""
    path = str(corpus["tr_bomb.json.gz"])
    code = ("import sys; from common.errors import run_cli; from compare.load import load; "
            "sys.exit(run_cli(lambda argv: load(argv[0]) and 0, sys.argv[1:], 'load'))")
    proc = run_guarded("-c", code, path, timeout=120, mem_gib=2)
    assert_one_line_error(proc, path, "gzip bomb")
    assert proc.maxrss_mib < 1024, proc.maxrss_mib


# --- compare.explain on the trace corpus -------------------------------------------------

@pytest.mark.parametrize("item", sorted(TRACE_OUTCOMES))
def test_explain_on_bad_trace(corpus, item):
    """Unusable: one line naming the file, exit 2. Partly usable: the report of what could be
    read, opening with what was skipped (text), and the same in ``warnings`` (--json)."""
    kind, needle = TRACE_OUTCOMES[item]
    path = str(corpus[item])
    bomb = item == "tr_bomb.json.gz"
    proc = run_guarded("compare.explain", path, timeout=300, mem_gib=2 if bomb else 8)
    if bomb:
        assert proc.maxrss_mib < 1024, proc.maxrss_mib
    if kind == "error":
        assert_one_line_error(proc, path, needle)
        assert proc.stdout == ""
        return
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    head = proc.stdout.split("\n\n")[:3]
    assert any("Warnings" in part and needle in part for part in head), proc.stdout[:2000]
    data = json.loads(run_guarded("compare.explain", path, "--json").stdout)
    assert any(needle in w for w in data["warnings"]), data["warnings"]


# --- compare.run on the trace corpus -------------------------------------------------------

@pytest.mark.parametrize("item", sorted(TRACE_OUTCOMES))
def test_compare_run_on_bad_trace(corpus, legacy_run, tmp_path, item):
    """A good legacy trace against each corpus item as the modern one. Unusable: one line
    naming the file, exit 2, no report. Partly usable: the comparison of what could be read,
    what was skipped said on the terminal and kept in report.json."""
    kind, needle = TRACE_OUTCOMES[item]
    path, out = str(corpus[item]), tmp_path / "out"
    bomb = item == "tr_bomb.json.gz"
    proc = run_guarded("compare.run", "--legacy", str(legacy_run[0] / "timeline.json"),
                       "--modern", path, "--out", str(out), timeout=300, mem_gib=8)
    if bomb:
        assert proc.maxrss_mib < 2048, proc.maxrss_mib
    if kind == "error":
        assert_one_line_error(proc, path, needle)
        assert not (out / "report.json").exists()
        return
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    said = [ln for ln in (proc.stdout + proc.stderr).splitlines() if needle in ln]
    # the side is named by its label (the file's name) and the path
    assert said and all(path in ln for ln in said), proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    b = report["order"][1]   # the corpus item is side B
    assert any(needle in w for w in report["sources"][b]["warnings"]), report["sources"]


# --- hostile structure (issue 19) ----------------------------------------------------------

#: item -> ("error", words of the one line), ("partial", words of a warning) or ("ok", None)
HOSTILE_OUTCOMES = {
    "tr_nested_lists.json": ("error", "nested 199,999 levels deep"),
    "tr_nested_args.json": ("partial", "nested 100,001 levels deep"),
    "tr_many_pids.json.gz": ("ok", None),
    "tr_many_tids.json.gz": ("ok", None),
    "tr_many_names.json.gz": ("ok", None),
    "tr_many_steps.json.gz": ("ok", None),
    "tr_flow_storm.json.gz": ("ok", None),
    "tr_timeline_storm.json.gz": ("ok", None),
    "tr_long_name.json.gz": ("partial", "cut 3 names longer than 4,096 characters"),
    "tr_wrong_types.json": ("error", "whose pid is a string, not an integer"),
    "tr_damaged_big.json.gz": ("partial", "skipped 1 damaged stretch"),
}
#: The trace on the other side of compare.run.
GOOD_TRACE = "tests/fixtures/tf1_cpu_xla.timeline.json"


def test_hostile_corpus_lists_every_item(hostile_corpus):
    from tests.corpus.make_corpus import HOSTILE

    assert set(hostile_corpus) == set(HOSTILE) == set(HOSTILE_OUTCOMES)
    assert sum(p.stat().st_size for p in hostile_corpus.values()) < 16e6  # small on disk


@pytest.mark.parametrize("item", sorted(HOSTILE_OUTCOMES))
def test_loader_on_hostile_trace(hostile_corpus, item):
    from compare.model.events import MAX_NAME_CHARS

    kind, needle = HOSTILE_OUTCOMES[item]
    path = hostile_corpus[item]
    tr = _load_or_refused(path, kind, needle)
    if tr is None:
        return
    assert len(tr.events) and (tr.events.dur >= 0).all()
    assert max(map(len, tr.strings.names)) <= MAX_NAME_CHARS
    if kind == "partial":
        assert any(needle in w for w in tr.warnings), tr.warnings
    else:
        assert not tr.warnings, tr.warnings


def _bounded_text(stdout: str) -> None:
    """A report a terminal shows: no line past the width plus a cut name, bounded size."""
    assert max(len(line) for line in stdout.splitlines()) <= 200
    assert len(stdout) < 200_000


@pytest.mark.parametrize("item", sorted(HOSTILE_OUTCOMES))
def test_explain_on_hostile_trace(hostile_corpus, item):
    """Explained (what was skipped said first) or refused in one line, in bounded memory."""
    kind, needle = HOSTILE_OUTCOMES[item]
    path = str(hostile_corpus[item])
    proc = run_guarded("compare.explain", path, timeout=300, mem_gib=4)
    if kind == "error":
        assert_one_line_error(proc, path, needle)
        assert proc.stdout == ""
        return
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    _bounded_text(proc.stdout)
    if kind == "partial":
        head = proc.stdout.split("\n\n")[0]
        assert "Warnings" in head and needle in head, head
    assert proc.maxrss_mib < 2048, proc.maxrss_mib


def _hostile_sides() -> list[tuple[str, str]]:
    """Refused and partly usable traces on both sides (what is said names the side); the
    costly well-formed ones on one side each, alternating, so both sides are covered: the two
    sides go through the same analysis."""
    ok = [i for i in sorted(HOSTILE_OUTCOMES) if HOSTILE_OUTCOMES[i][0] == "ok"]
    out = [(i, s) for i in sorted(HOSTILE_OUTCOMES) if i not in ok for s in ("legacy", "modern")]
    return out + [(i, ("legacy", "modern")[k % 2]) for k, i in enumerate(ok)]


@pytest.mark.parametrize("item,side", _hostile_sides())
def test_compare_run_on_hostile_trace(hostile_corpus, tmp_path, item, side):
    """A hostile trace on either side of compare.run against a good one: the comparison,
    what was skipped said and kept in report.json; or one line and no report."""
    from tests.conftest import ROOT

    kind, needle = HOSTILE_OUTCOMES[item]
    path, out = str(hostile_corpus[item]), tmp_path / "out"
    other = "modern" if side == "legacy" else "legacy"
    proc = run_guarded("compare.run", f"--{side}", path, f"--{other}", str(ROOT / GOOD_TRACE),
                       "--out", str(out), timeout=600, mem_gib=6)
    if kind == "error":
        assert_one_line_error(proc, path, needle)
        assert not (out / "report.json").exists()
        return
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    report = json.loads((out / "report.json").read_text())
    warnings = report["sources"][report["order"][0 if side == "legacy" else 1]]["warnings"]
    if kind == "partial":
        assert any(needle in w for w in warnings), warnings
        assert any(needle in ln and path in ln for ln in proc.stderr.splitlines()), proc.stderr
    else:
        assert not warnings, warnings
    md = (out / "report.md").read_text()
    assert max(len(line) for line in md.splitlines()) < 20_000
