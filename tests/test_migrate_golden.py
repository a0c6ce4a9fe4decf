"""``compare.migrate --emit``'s port of every real script, checked against its expected file
exactly (tests/golden/ports/<script>.golden). After a change meant to alter ports, run
``python -m pytest tests/test_migrate_golden.py --update-golden`` and read the diff of
tests/golden/ before committing it: the other emit tests say what a port must do; these say
that nothing else changed."""
from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from common import atomic
from compare.migrate import analyze_file
from compare.migration.emit import emit

TESTS = Path(__file__).resolve().parent
FIX = TESTS / "fixtures"
REAL = FIX / "real_scripts"
GOLDEN = TESTS / "golden" / "ports"
SCRIPTS = sorted(REAL.glob("*.py")) + sorted(REAL.glob("*.ipynb")) + [FIX / "seed_pipeline.py"]


def port_text(script: Path) -> str:
    """The port as --emit writes it for the script given by its file name in its own folder
    (so the header names no folder of this machine)."""
    return emit(analyze_file(Path(script.name))).text


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_port_is_its_golden_file(script, monkeypatch, request):
    monkeypatch.chdir(script.parent)
    text = port_text(script)
    golden = GOLDEN / f"{script.name}.golden"
    if request.config.getoption("--update-golden"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(golden, text)
        return
    assert golden.is_file(), f"no {golden.relative_to(TESTS)}: run with --update-golden"
    expected = golden.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(
            expected.splitlines(keepends=True), text.splitlines(keepends=True),
            f"{golden.name} (expected)", "port (now)", n=2))
        pytest.fail(f"the port of {script.name} differs from its golden file "
                    f"(--update-golden rewrites it):\n{diff[:6000]}")


def test_every_golden_file_has_its_script():
    """A golden file whose script is gone (or renamed) is dead weight that looks like a test."""
    names = {f"{p.name}.golden" for p in SCRIPTS}
    assert sorted(p.name for p in GOLDEN.glob("*.golden") if p.name not in names) == []
