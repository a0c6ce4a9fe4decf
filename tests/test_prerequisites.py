"""What the tests need from outside Python (Debian's chromium, a C compiler): a test marked
``@pytest.mark.needs(...)`` skips without it, with one line saying what to install, so the
README's test command passes on a fresh machine; with ``TESTS_NO_SKIPS`` (``.ci/run``) any
skip fails the session. Checked on a small test file run by pytest with and without the tools
on PATH (stand-in executables), as a user's machine would have them."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest
from tests.conftest import ROOT

SAMPLE = '''
import pytest

@pytest.mark.needs("chromium")
def test_a_browser():
    pass

@pytest.mark.needs("cc")
def test_a_compiler():
    pass

@pytest.mark.needs("chromium", "cc")
def test_both():
    pass

def test_nothing_from_outside():
    pass
'''


def _pytest(tmp_path: Path, tools: tuple[str, ...], monkeypatch, capsys,
            **env) -> tuple[int, str]:
    """pytest (in this process) on :data:`SAMPLE` with our conftest's hooks, PATH holding
    only stand-ins for ``tools``: (exit code, what it printed)."""
    bin_dir = tmp_path / f"bin-{'-'.join(tools) or 'none'}"
    bin_dir.mkdir()
    for tool in tools:
        exe = bin_dir / tool
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    sample = tmp_path / "test_sample.py"
    sample.write_text(SAMPLE)
    with monkeypatch.context() as m:
        for name in ("CC", "CHROMIUM", "TESTS_NO_SKIPS", "PYTEST_ADDOPTS"):
            m.delenv(name, raising=False)
        m.setenv("PATH", str(bin_dir))
        for name, value in env.items():
            m.setenv(name, value)
        capsys.readouterr()
        code = pytest.main(["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
                            "-q", "-rs", "-p", "no:cacheprovider", "--import-mode=importlib",
                            "-n", "0",  # in this process: pyproject's addopts say -n 2
                            str(sample)], plugins=[conftest])
    return int(code), capsys.readouterr().out


def test_without_the_tools_their_tests_skip_with_one_line_saying_what_to_install(
        tmp_path, monkeypatch, capsys):
    code, out = _pytest(tmp_path, (), monkeypatch, capsys)
    assert code == 0, out
    skipped = sorted(ln for ln in out.splitlines() if ln.startswith("SKIPPED"))
    chromium = ("needs Debian's chromium (not on PATH): run .ci/install-tools, or apt-get "
                "install chromium")
    cc = ("needs a C compiler (no cc, gcc or clang on PATH, no $CC): run .ci/install-tools, or "
          "apt-get install gcc")
    # one line per test, at the test, naming the first tool it lacks
    assert sorted(ln.split("test_sample.py:", 1)[1] for ln in skipped) == \
        [f"12: {chromium}", f"4: {chromium}", f"8: {cc}"], skipped
    assert all(ln.startswith("SKIPPED [1] ") for ln in skipped), skipped
    assert "1 passed, 3 skipped" in out


def test_with_the_tools_they_run(tmp_path, monkeypatch, capsys):
    code, out = _pytest(tmp_path, ("chromium", "cc"), monkeypatch, capsys)
    assert code == 0 and "4 passed" in out, out
    (tmp_path / "again").mkdir()
    code, out = _pytest(tmp_path / "again", ("cc",), monkeypatch, capsys,
                        CHROMIUM=sys.executable)  # $CHROMIUM counts
    assert code == 0 and "4 passed" in out, out


def test_on_ci_a_skipped_test_fails_the_session(tmp_path, monkeypatch, capsys):
    code, out = _pytest(tmp_path, (), monkeypatch, capsys, TESTS_NO_SKIPS="1")
    assert code == 1, out
    assert "TESTS_NO_SKIPS: 3 test(s) skipped, and none may be here: this session fails" in out
    (tmp_path / "ok").mkdir()
    code, out = _pytest(tmp_path / "ok", ("chromium", "cc"), monkeypatch, capsys,
                        TESTS_NO_SKIPS="1")
    assert code == 0 and "4 passed" in out, out


def test_ci_installs_with_the_script_the_readme_names_and_forbids_skips():
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".ci/install-tools" in ci and "TESTS_NO_SKIPS=1 python -m pytest" in ci
    assert ".ci/install-tools" in (ROOT / "README.md").read_text()
    script = (ROOT / ".ci" / "install-tools")
    assert os.access(script, os.X_OK)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
