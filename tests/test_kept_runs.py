"""``compare.run`` stopped part way -- full disk while writing the report, Ctrl-C during
modern, a side that failed -- keeps what its sides completed in ``OUT/partial/<side>``, says so
on one line, and gives the command that rebuilds the report from them, which works. The
pipelines are stand-ins that write small synthetic runs (``tests/synthetic.py``); the real
runs are in ``tests/test_faults.py``. Fast: no TensorFlow."""
from __future__ import annotations

import errno
import io
import json
import shlex
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from common.errors import RunFailed, run_cli
from compare import api, pipelines
from tests.synthetic import write
from tests.test_core_comparison import LEGACY, MODERN, _events


def _stand_in(monkeypatch, fail: dict[str, BaseException] | None = None,
              partial: set[str] = frozenset()):
    """Pipelines that write a timeline and run.json into their folder, as ours do, or (sides
    in ``partial``) leave ``partial/`` with a timeline, as an interrupted one does, then raise
    ``fail[side]``."""
    fail = fail or {}

    def run_in_child(side, out, *args, **kwargs):
        events, starts = _events({"legacy": LEGACY, "modern": MODERN}[side])
        if side in partial:
            write(out / "partial" / "timeline.json", events, steps=starts)
        if side in fail:
            raise fail[side]
        write(out / "timeline.json", events, steps=starts)
        (out / "run.json").write_text(json.dumps({"first_step_s": 0.01,
                                                  "steady_median_s": 0.005}))
        return json.loads((out / "run.json").read_text())

    monkeypatch.setattr(pipelines, "run_in_child", run_in_child)


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", str(args[0] / "report.json"))


def _cli_line(out: Path) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stderr(err):
        code = run_cli(lambda argv: api.run_and_compare(out), [], "compare.run")
    lines = [ln for ln in err.getvalue().splitlines() if not ln.startswith("compare.run: run")]
    assert len(lines) == 1, err.getvalue()
    return code, lines[0]


def _rebuild(line: str) -> list[str]:
    command = line.split("rebuild the report from them: ", 1)[1]
    words = shlex.split(command)
    assert words[:3] == ["python", "-m", "compare.run"]
    return words[3:]


def test_a_full_disk_while_writing_the_report_keeps_both_runs_and_the_rebuild_works(
        tmp_path, monkeypatch):
    _stand_in(monkeypatch)
    monkeypatch.setattr(api, "analyse_and_write", _full_disk)
    out = tmp_path / "run"
    code, line = _cli_line(out)
    kept = out / "partial"
    assert code == 2
    assert line == (f"compare.run: error: {out / 'report.json'}: No space left on device; "
                    f"partial results kept in {kept} (legacy: complete run, modern: complete "
                    f"run); rebuild the report from them: python -m compare.run --legacy "
                    f"{kept / 'legacy'} --modern {kept / 'modern'} --out {out / 'report'}")
    assert sorted(p.name for p in out.iterdir()) == ["partial", "tf.log"]
    assert sorted(p.name for p in kept.iterdir()) == ["legacy", "modern", "partial.json"]
    meta = json.loads((kept / "partial.json").read_text())
    assert meta["runs"] == {"legacy": "complete run", "modern": "complete run"}
    assert meta["rebuild_report"] == line.split("from them: ", 1)[1]


def test_ctrl_c_during_modern_keeps_legacy_and_modern_s_partial_profile(tmp_path, monkeypatch):
    _stand_in(monkeypatch, fail={"modern": KeyboardInterrupt()}, partial={"modern"})
    out = tmp_path / "run"
    code, line = _cli_line(out)
    kept = out / "partial"
    assert code == 130
    assert line == (f"compare.run: interrupted by SIGINT; partial results kept in {kept} "
                    f"(legacy: complete run, modern: partial run); rebuild the report from "
                    f"them: python -m compare.run --legacy {kept / 'legacy'} --modern "
                    f"{kept / 'modern'} --out {out / 'report'}")
    assert (kept / "legacy" / "run.json").is_file()
    assert (kept / "modern" / "timeline.json").is_file() and not (out / "modern").exists()
    # the command does what it says: both runs compared, the interrupted one's steps too
    args = _rebuild(line)
    monkeypatch.undo()
    report = api.compare_traces(args[1], args[3], args[5])
    assert (out / "report" / "report.md").is_file()
    assert report.comparison.sides["a"].steps.median_us == LEGACY["step"]
    assert report.comparison.sides["b"].steps.median_us == MODERN["step"]


def test_a_side_that_left_nothing_keeps_the_other_and_no_rebuild_is_offered(
        tmp_path, monkeypatch):
    _stand_in(monkeypatch, fail={"modern": RunFailed("the tf.data service went away")})
    out = tmp_path / "run"
    code, line = _cli_line(out)
    assert code == 1
    assert line == (f"compare.run: error: the tf.data service went away; partial results kept "
                    f"in {out / 'partial'} (legacy: complete run)")
    assert not (out / "modern").exists() and not (out / "legacy").exists()


def test_nothing_complete_keeps_nothing(tmp_path, monkeypatch):
    _stand_in(monkeypatch, fail={"legacy": KeyboardInterrupt()})
    out = tmp_path / "run"
    code, line = _cli_line(out)
    assert code == 130
    assert line == "compare.run: interrupted by SIGINT; no results were complete, nothing was kept"
    assert not (out / "partial").exists()


@pytest.mark.parametrize("name", ["legacy", "modern"])
def test_a_kept_run_is_never_moved_over_another(tmp_path, name):
    out = tmp_path / "run"
    (out / "legacy").mkdir(parents=True)
    (out / "legacy" / "run.json").write_text("{}")
    (out / "partial" / name).mkdir(parents=True)  # somebody's, already there
    e = KeyboardInterrupt()
    assert api.keep_runs(out, e) == {"legacy": "complete run"}
    assert not any((out / "partial" / name).iterdir())  # left as it was
    if name == "legacy":  # its place is taken: kept where it is, and named there
        assert (out / "legacy" / "run.json").is_file()
        assert e.kept == [f"{out / 'legacy'} (legacy: complete run)"]
    else:
        assert (out / "partial" / "legacy" / "run.json").is_file()
        assert e.kept == [f"{out / 'partial'} (legacy: complete run)"]


def test_runs_that_cannot_be_moved_are_kept_and_named_where_they_are(tmp_path):
    """A disk too full even for the folder (here: a file where it would go): the sides stay
    put, and the line and the command name them there."""
    out = tmp_path / "run"
    (out / "legacy").mkdir(parents=True)
    (out / "legacy" / "run.json").write_text("{}")
    (out / "modern" / "partial").mkdir(parents=True)
    (out / "partial").write_text("in the way")
    e = KeyboardInterrupt()
    assert api.keep_runs(out, e) == {"legacy": "complete run", "modern": "partial run"}
    assert e.kept == [f"{out / 'legacy'} (legacy: complete run)",
                      f"{out / 'modern' / 'partial'} (modern: partial run)"]
    assert e.hint == (f"rebuild the report from them: python -m compare.run --legacy "
                      f"{out / 'legacy'} --modern {out / 'modern' / 'partial'} --out "
                      f"{out / 'report'}")
