"""Refusing early what cannot fit (issue 25): the memory a load would take, from the file's
size and a gzip's stated size, against the bound; nothing read before the refusal."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compare.api import compare_traces, explain_trace
from compare.load import LoadError, budget, load

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "tests" / "fixtures" / "tf1_gpu.timeline.json"


@pytest.mark.parametrize("text,want", [("8G", 8 << 30), ("500M", 500 << 20), ("1.5GB", 3 << 29),
                                       ("2GiB", 2 << 30), ("4096", 4096), (" 10 k ", 10240)])
def test_parse_size(text, want):
    assert budget.parse_size(text) == want


@pytest.mark.parametrize("text", ["", "8X", "-1G", "G", "1e9"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError):
        budget.parse_size(text)


def test_json_estimate_is_its_size_times_the_factor(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents":[]}' + b" " * 982)
    need, words = budget.estimate(p)
    assert need == int(budget.MEMORY_PER_BYTE * 1000) and "JSON" in words


def test_gzip_estimate_reads_its_stated_size(tmp_path):
    text = SMALL.read_bytes()
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(text))
    assert budget.gzip_stated_size(p) == len(text)
    need, words = budget.estimate(p)
    assert need == int(p.stat().st_size + budget.MEMORY_PER_BYTE * len(text))
    assert "stating" in words


def test_gzip_stating_less_than_its_file_is_estimated_at_least(tmp_path):
    # two members: ISIZE is the last member's alone, here smaller than the file
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(os.urandom(5000)) + gzip.compress(b"x"))
    need, words = budget.estimate(p)
    assert need == int(p.stat().st_size * (1 + budget.MEMORY_PER_BYTE))
    assert "at least" in words


def test_refused_against_max_memory_in_one_line(tmp_path):
    with pytest.raises(LoadError) as e:
        load(SMALL, max_memory=10_000)
    msg = str(e.value)
    assert "\n" not in msg and str(SMALL) in msg and "--max-memory is 9.8 KiB" in msg
    assert "would take about" in msg
    assert len(load(SMALL, max_memory=10 << 20).events)   # a bound that fits: loads


def test_default_bound_is_the_memory_available(monkeypatch):
    monkeypatch.setattr(budget, "available_bytes", lambda: 50_000)
    with pytest.raises(LoadError, match="this machine has 48.8 KiB available"):
        explain_trace(SMALL)
    monkeypatch.setattr(budget, "available_bytes", lambda: None)   # unknown: no refusal
    assert explain_trace(SMALL).legend


def test_available_bytes_on_linux():
    if not Path("/proc/meminfo").exists():
        pytest.skip("no /proc/meminfo")
    n = budget.available_bytes()
    assert n is not None and 0 < n <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_compare_traces_refuses_and_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(LoadError, match="too big to load here"):
        compare_traces(SMALL, SMALL, out, max_memory=10_000)
    assert not out.exists() or not any(out.iterdir())


def test_a_folder_is_checked_before_its_files_are_read(tmp_path):
    (tmp_path / "timeline.json").write_bytes(SMALL.read_bytes())
    with pytest.raises(LoadError, match="too big to load here"):
        load(tmp_path, max_memory=10_000)


def test_two_gib_file_refused_without_being_read(tmp_path):
    """The CLI on a 2 GiB (sparse) trace with --max-memory 1G: exit 2, one line, and the
    process never holds more than a small part of the file."""
    p = tmp_path / "big.json"
    with open(p, "wb") as f:
        f.write(b'{"traceEvents":[')
        f.truncate(2 << 30)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "compare.explain", str(p), "--max-memory",
                             "1G"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "2.0 GiB of JSON" in lines[0] and "1.0 GiB" in lines[0]
    assert "Traceback" not in err


def test_refusal_reads_no_more_than_the_ends(tmp_path, monkeypatch):
    """Only the file's size and its first and last bytes are read: a read of more fails."""
    p = tmp_path / "big.json.gz"
    p.write_bytes(gzip.compress(SMALL.read_bytes()))
    real_open = open

    class Small:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            assert 0 <= n <= 4096, f"read {n} bytes"
            return self.f.read(n)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

    monkeypatch.setattr("builtins.open", lambda *a, **k: Small(real_open(*a, **k)))
    with pytest.raises(LoadError, match="too big to load here"):
        load(p, max_memory=1000)


def test_cli_bad_size_is_one_line():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "compare.explain", str(SMALL), "--max_memory",
                        "lots"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "--max_memory: not a size" in r.stderr
