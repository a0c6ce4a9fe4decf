"""Faults: artifacts are written atomically, run folders are never overwritten, SIGINT/SIGTERM
keep what was complete and say where, a full disk is one clear line."""
from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, assert_one_line_error, run_guarded

# --- every writer goes through common.atomic ---------------------------------------------

PACKAGES = ("common", "legacy", "modern", "compare", "benchmarks")
#: (file, call) pairs allowed to write directly: the atomic writer itself, and TF's log file
#: (an append-only log, not an artifact). ``open(..., "a")`` is allowed everywhere for the
#: same reason: a log a child process streams into cannot be written at once.
ALLOWED = {("common/atomic.py", "os.fdopen"), ("common/tflog.py", "os.open")}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _write_mode(call: ast.Call, pos: int) -> bool:
    mode = call.args[pos] if len(call.args) > pos else next(
        (k.value for k in call.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and \
        any(c in mode.value for c in "wx+")


def _direct_writes(path: Path) -> list[str]:
    """Calls in ``path`` that write a file other than through common.atomic."""
    tree = ast.parse(path.read_text(), str(path))
    into_atomic = set()  # calls inside ``with atomic_open(...) as f:`` that write to ``f``
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            targets = {item.optional_vars.id for item in node.items
                       if isinstance(item.context_expr, ast.Call)
                       and _dotted(item.context_expr.func).endswith("atomic_open")
                       and isinstance(item.optional_vars, ast.Name)}
            for stmt in node.body:
                for call in ast.walk(stmt):
                    if isinstance(call, ast.Call) and any(
                            isinstance(a, ast.Name) and a.id in targets for a in call.args):
                        into_atomic.add(id(call))
    in_memory = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Call)
                 and _dotted(node.value.func) in ("io.BytesIO", "BytesIO", "io.StringIO", "StringIO")
                 for t in node.targets if isinstance(t, ast.Name)}  # buffers, written later
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Name) and a.id in in_memory
                                              for a in node.args):
            into_atomic.add(id(node))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in into_atomic:
            continue
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        bad = (
            (name in ("open", "io.open", "builtins.open") and _write_mode(node, 1))
            or (name in ("gzip.open", "bz2.open", "lzma.open") and _write_mode(node, 1))
            or (last in ("write_text", "write_bytes") and "." in name
                and not name.startswith("atomic."))
            or name in ("json.dump", "pickle.dump")
            or (name in ("np.save", "np.savez", "np.savetxt", "numpy.save", "shutil.copy",
                         "shutil.copyfile", "shutil.copy2", "os.fdopen", "os.open"))
            or last == "savefig"
        )
        if bad and (str(path.relative_to(ROOT)), name) not in ALLOWED:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}(...)")
    return found


def test_every_writer_goes_through_common_atomic():
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    assert len(files) > 10
    found = [hit for p in files for hit in _direct_writes(p)]
    assert not found, "write through common.atomic (temp + rename) instead:\n" + "\n".join(found)


def test_the_audit_catches_direct_writes(tmp_path, monkeypatch):
    """The audit itself: each way of writing a file directly is flagged, atomic ones are not."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    src = tmp_path / "mod.py"
    src.write_text(
        "import json, gzip\nfrom common import atomic\n"
        "open(p, 'w').write('x')\n"                     # 3
        "p.write_text('x')\n"                           # 4
        "json.dump(obj, f)\n"                           # 5
        "gzip.open(p, 'wt')\n"                          # 6
        "fig.savefig(p)\n"                              # 7
        "open(p).read()\n"                              # reading is fine
        "open(log, 'ab')\n"                             # so is appending to a log
        "buf = io.BytesIO()\nfig.savefig(buf)\n"        # and drawing into memory
        "atomic.write_text(p, 'x')\n"                   # fine
        "with atomic.atomic_open(p, 'wb') as f:\n"
        "    fig.savefig(f)\n"                          # fine
        "    json.dump(obj, f)\n")                      # fine
    lines = sorted(int(h.split(":")[1]) for h in _direct_writes(src))
    assert lines == [3, 4, 5, 6, 7]


# --- atomic writes and staging -----------------------------------------------------------

def test_atomic_write_that_fails_leaves_the_old_file_and_no_temp(tmp_path):
    from common import atomic

    target = tmp_path / "report.json"
    atomic.write_json(target, {"v": 1})
    with pytest.raises(RuntimeError):
        with atomic.atomic_open(target, "w") as f:
            f.write('{"v": 2, "half')
            raise RuntimeError("crash mid-write")
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_staging_keeps_complete_files_on_interrupt_and_nothing_on_error(tmp_path):
    from common import atomic
    from common.errors import Interrupted

    out = atomic.prepare_out_dir(tmp_path / "a")
    with pytest.raises(Interrupted) as e:
        with atomic.staged(out) as st:
            atomic.write_text(st / "plugins" / "profile.pb", "complete")
            raise Interrupted(signal.SIGTERM)
    assert e.value.kept == [str(out / "partial")]
    assert sorted(p.name for p in out.iterdir()) == ["partial"]
    meta = json.loads((out / "partial" / "partial.json").read_text())
    assert meta["complete"] is False and meta["interrupted_by"] == "SIGTERM"
    assert meta["files"] == ["plugins/profile.pb"]
    # a folder holding a partial run is not empty: it is never reused
    from common.errors import InputError
    with pytest.raises(InputError, match="not empty"):
        atomic.prepare_out_dir(out)

    out = atomic.prepare_out_dir(tmp_path / "b")
    with pytest.raises(ValueError):
        with atomic.staged(out) as st:
            atomic.write_text(st / "run.json", "{}")
            raise ValueError("bad input found late")
    assert list(out.iterdir()) == []

    out = atomic.prepare_out_dir(tmp_path / "c")
    with pytest.raises(Interrupted) as e:  # interrupted before anything was complete
        with atomic.staged(out):
            raise Interrupted(signal.SIGINT)
    assert e.value.kept == [] and list(out.iterdir()) == []


def test_an_oserror_in_staging_names_the_final_path(tmp_path):
    from common import atomic

    out = atomic.prepare_out_dir(tmp_path / "o")
    with pytest.raises(OSError) as e:
        with atomic.staged(out) as st:
            raise OSError(28, "No space left on device", str(st / "timeline.json"))
    assert e.value.filename == str(out / "timeline.json")


def test_signals_are_deferred_while_artifacts_move(tmp_path, monkeypatch):
    """A signal arriving during the move into the run folder is raised after it, so the
    folder never holds half of a run."""
    from common import atomic, errors

    out = atomic.prepare_out_dir(tmp_path / "o")
    staging = out / ".staging-test"
    for name in ("a.json", "b.json", "c.json"):
        atomic.write_text(staging / name, name)
    real_rename = atomic._rename_no_replace

    def rename_then_signal(src, dst):
        real_rename(src, dst)
        os.kill(os.getpid(), signal.SIGTERM)  # arrives mid-move

    monkeypatch.setattr(atomic, "_rename_no_replace", rename_then_signal)
    previous = signal.signal(signal.SIGTERM, errors._on_signal)
    try:
        with pytest.raises(errors.Interrupted):
            atomic.move_into(staging, out)
    finally:
        signal.signal(signal.SIGTERM, previous)
        errors._signals.update(interrupted=0, deferring=0, pending=0)
    assert sorted(p.name for p in out.iterdir()) == ["a.json", "b.json", "c.json"]


# --- run folders are never overwritten ---------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("module", ["legacy.run", "modern.run", "compare.run"])
def test_cli_never_overwrites_a_run_folder(tmp_path, module):
    (tmp_path / "run.json").write_text("earlier run")
    proc = run_guarded(module, "--out", str(tmp_path), "--steps", "2")
    assert_one_line_error(proc, str(tmp_path), "not empty")
    assert (tmp_path / "run.json").read_text() == "earlier run"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
    a_file = tmp_path / "run.json"
    proc = run_guarded(module, "--out", str(a_file), "--steps", "2")
    assert_one_line_error(proc, str(a_file), "not a folder")


def test_moving_artifacts_in_never_replaces_anything(tmp_path):
    from common import atomic
    from common.errors import InputError

    out = atomic.prepare_out_dir(tmp_path / "o")
    atomic.write_text(out / "run.json", "first run")
    staging = out / ".staging-test"
    atomic.write_text(staging / "run.json", "second run")
    atomic.write_text(staging / "timeline.json", "second run")
    with pytest.raises(InputError, match="appeared while this run was writing") as e:
        atomic.move_into(staging, out)
    (kept,) = [p for p in out.iterdir() if p.name.startswith("unsaved-")]
    assert str(kept) in str(e.value)
    assert (out / "run.json").read_text() == "first run"
    assert sorted(p.name for p in kept.iterdir()) == ["run.json", "timeline.json"]


@pytest.mark.slow
def test_two_runs_into_one_folder_never_overwrite_each_other(tmp_path):
    """Both start on an empty folder; whichever finishes first keeps it, the other fails
    cleanly (refused, or its results kept apart) and nothing of the first is replaced."""
    out = tmp_path / "out"
    procs = {seed: _start("legacy.run", out, "--steps", "2", "--seed", str(seed))
             for seed in (1, 2)}
    done = {seed: (p.communicate(timeout=300)[1], p.returncode) for seed, p in procs.items()}
    winners = [seed for seed, (_, rc) in done.items() if rc == 0]
    assert len(winners) == 1, done
    (loser,) = set(done) - set(winners)
    err, rc = done[loser]
    assert rc == 2 and "Traceback" not in err, err
    assert json.loads((out / "run.json").read_text())["seed"] == winners[0]
    for unsaved in out.glob("unsaved-*"):
        assert json.loads((unsaved / "run.json").read_text())["seed"] == loser
    _no_debris(out)


# --- SIGINT / SIGTERM during a real run ----------------------------------------------------

def _start(module: str, out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", module, "--out", str(out), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _wait_for_line(proc: subprocess.Popen, needle: str, timeout: float = 300) -> list[str]:
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            return lines
    proc.kill()
    pytest.fail(f"never saw {needle!r}: {''.join(lines)}")


def _finish(proc: subprocess.Popen, timeout: float = 60) -> str:
    try:
        _, rest = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"no exit {timeout} s after the signal (hung queue runners?)")
    return rest


def _no_debris(out: Path) -> None:
    debris = [str(p) for p in out.rglob("*") if p.name.startswith(".") or p.name.endswith(".tmp")]
    assert not debris, debris


@pytest.mark.slow
@pytest.mark.parametrize("module,sig", [("legacy.run", signal.SIGINT),
                                        ("legacy.run", signal.SIGTERM),
                                        ("modern.run", signal.SIGTERM)])
def test_signal_mid_run_keeps_the_profile_so_far_and_says_where(tmp_path, module, sig):
    from compare.load import load

    out = tmp_path / "out"
    proc = _start(module, out, "--steps", "2000")
    _wait_for_line(proc, "first step done")
    time.sleep(1.0)  # a few dozen profiled steps
    proc.send_signal(sig)
    rest = _finish(proc)
    assert proc.returncode == 128 + sig, rest
    assert "Traceback" not in rest
    (line,) = [ln for ln in rest.splitlines() if "interrupted" in ln]
    partial = out / "partial"
    assert line == (f"{module}: interrupted by {signal.Signals(sig).name}; "
                    f"partial results kept in {partial}")
    assert sorted(p.name for p in out.iterdir()) == ["partial", "tf.log"]
    _no_debris(out)
    meta = json.loads((partial / "partial.json").read_text())
    assert meta["complete"] is False and any(f.endswith(".xplane.pb") for f in meta["files"])
    assert not (partial / "run.json").exists()
    tr = load(partial)  # the partial profile is a usable trace: steps 0..k
    nums = [s.num for s in tr.steps]
    assert nums and nums == list(range(len(nums))) and len(nums) < 2000
    # the interrupted folder is not reused by a new run
    again = run_guarded(module, "--out", str(out), "--steps", "2")
    assert_one_line_error(again, str(out), "not empty")


@pytest.mark.slow
def test_signal_to_compare_run_stops_its_child_and_keeps_the_partial_side(tmp_path):
    """compare.run runs each pipeline in a child: SIGTERM to compare.run stops the child the
    way Ctrl-C would, the child keeps its partial profile, and compare.run says where."""
    out = tmp_path / "out"
    proc = _start("compare.run", out, "--steps", "2000")
    _wait_for_line(proc, "running legacy")
    log, deadline = out / "tf.log", time.monotonic() + 300
    while "legacy: first step done" not in (log.read_text(errors="replace")
                                            if log.exists() else ""):
        assert time.monotonic() < deadline and proc.poll() is None, "legacy never started"
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    rest = _finish(proc)
    assert proc.returncode == 128 + signal.SIGTERM, rest
    assert "Traceback" not in rest
    partial = out / "partial" / "legacy"  # where the README says: OUT/partial/
    assert (f"compare.run: interrupted by SIGTERM; partial results kept in {out / 'partial'} "
            f"(legacy: partial run)\n") in rest  # nothing of modern: no rebuild offered
    assert json.loads((partial / "partial.json").read_text())["complete"] is False
    assert not list(out.glob("report*")) and not (out / "modern").exists()
    assert not (out / "legacy").exists()
    _no_debris(out)
    children = subprocess.run(["pgrep", "-f", f"compare.pipelines legacy {out / 'legacy'}"],
                              capture_output=True, text=True).stdout.split()
    assert not children, "the legacy child outlived compare.run"


@pytest.mark.slow
def test_an_interrupt_during_modern_keeps_both_runs_and_the_printed_rebuild_works(tmp_path):
    """SIGINT to compare.run while modern runs: legacy's complete run and modern's partial
    profile end up in OUT/partial/ (where the README says), and the command the line gives
    rebuilds the report from them."""
    import shlex

    out = tmp_path / "out"
    proc = _start("compare.run", out, "--steps", "120")
    log, deadline = out / "tf.log", time.monotonic() + 600
    while "modern: first step done" not in (log.read_text(errors="replace")
                                            if log.exists() else ""):
        assert time.monotonic() < deadline and proc.poll() is None, "modern never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    rest = _finish(proc)
    assert proc.returncode == 128 + signal.SIGINT, rest
    (line,) = [ln for ln in rest.splitlines() if "interrupted" in ln]
    kept = out / "partial"
    assert line.startswith(f"compare.run: interrupted by SIGINT; partial results kept in {kept} "
                           f"(legacy: complete run, modern: partial run); rebuild the report "
                           f"from them: python -m compare.run --legacy {kept / 'legacy'} "
                           f"--modern {kept / 'modern'} --out {out / 'report'}"), line
    assert sorted(p.name for p in out.iterdir()) == ["partial", "tf.log"]
    _no_debris(out)
    command = shlex.split(line.split("from them: ", 1)[1])
    assert command[:3] == ["python", "-m", "compare.run"]
    again = run_guarded(*command[2:], timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (out / "report" / "report.md").read_text().startswith("# legacy vs modern")
    from compare.load import load

    assert 1 <= len(load(kept / "modern").steps) < 120  # the steps modern did


@pytest.mark.slow
def test_signal_before_any_step_keeps_nothing(tmp_path):
    out = tmp_path / "out"
    proc = _start("legacy.run", out, "--steps", "5")
    _wait_for_line(proc, "legacy: running")  # TF is being imported, the graph built
    proc.send_signal(signal.SIGTERM)
    rest = _finish(proc)
    assert proc.returncode == 128 + signal.SIGTERM, rest
    assert "Traceback" not in rest
    assert "legacy.run: interrupted by SIGTERM; no results were complete, nothing was kept" in rest
    assert {p.name for p in out.iterdir()} <= {"tf.log"}


# --- a full disk ---------------------------------------------------------------------------

@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 1.2 MB tmpfs (a legacy run writes ~1.6 MB). Needs root (CI runs as root)."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}); the RLIMIT_FSIZE "
                    f"variant still runs")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.slow
@pytest.mark.parametrize("module,how", [("legacy.run", "tmpfs"), ("legacy.run", "rlimit_fsize"),
                                        ("modern.run", "rlimit_fsize")])
def test_full_disk_is_one_clear_line_and_nothing_half_written(request, tmp_path, module, how):
    if how == "tmpfs":
        out = request.getfixturevalue("tiny_tmpfs") / "out"
        proc = run_guarded(module, "--out", str(out), "--steps", "3")
        problem = "No space left on device"
    else:
        out = tmp_path / "out"
        limit = {"legacy.run": 400 << 10, "modern.run": 48 << 10}[module]  # below the profile
        proc = run_guarded(module, "--out", str(out), "--steps", "3", fsize=limit)
        problem = "File too large"
    line = assert_one_line_error(proc, str(out), problem)
    assert ".staging" not in line  # names the artifact as the user would see it
    assert [p.name for p in out.iterdir()] == ["tf.log"]
