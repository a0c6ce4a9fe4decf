"""The real-trace corpus of issue 15 is whole: every trace named in traces.json is on disk, small,
named in the README with its source, and expected.json is what facts.py computes from the files.

The assertions on what ``compare.explain`` says about these traces belong to the issue-15 tests;
this file only guards the fixtures they read.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent / "fixtures" / "real_traces"
LEADS = {"one_time", "input", "compute", "launch", "communication", "compile", "idle", "no_data",
         "copy", "overhead"}
MAX_BYTES = 2 * 1024 * 1024


def _spec():
    with open(CORPUS / "traces.json") as f:
        return {k: v for k, v in json.load(f).items() if not k.startswith("_")}


@pytest.mark.parametrize("name", sorted(_spec()))
def test_entry_is_complete_and_on_disk(name):
    entry = _spec()[name]
    assert entry["lead"] in LEADS
    for key in ("repo", "path", "commit", "licence"):
        assert entry["source"][key], key
    assert len(entry["source"]["commit"]) == 40
    path = CORPUS / entry["path"]
    assert path.exists(), path
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    assert files and all(p.suffix == ".gz" for p in files)
    for p in files:
        assert p.stat().st_size < MAX_BYTES, p
        with gzip.open(p) as f:  # every stored file is valid gzip
            f.read(16)
    readme = (CORPUS / "README.md").read_text()
    assert f"`{name}`" in readme and entry["source"]["repo"] in readme


@pytest.mark.slow  # facts.py recomputes every entry of the corpus in a child process
def test_expected_json_is_what_facts_py_computes():
    result = subprocess.run([sys.executable, str(CORPUS / "facts.py"), "--check"],
                            capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, "expected.json is stale: run tests/fixtures/real_traces/facts.py"


def test_every_share_is_at_most_one():
    expected = json.loads((CORPUS / "expected.json").read_text())

    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.items():
                if key.endswith("share") and isinstance(value, (int, float)):
                    assert 0 <= value <= 1, f"{where}.{key} = {value}"
                walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    walk(expected, "expected")
