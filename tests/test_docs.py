"""The docs match the tree: README stays a front page, and ARCHITECTURE.md's module map names
every module there is and none that is gone."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
#: Our packages: those pyproject.toml installs (``common*`` -> ``common``).
PACKAGES = tuple(p.rstrip("*") for p in tomllib.loads((ROOT / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"]["find"]["include"])
#: README is the front page (what it is, the two commands, one example per tool, where to read
#: more); reference text goes to docs/.
README_MAX_LINES = 200


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move text to docs/"


def module_map(text: str) -> dict[str, str]:
    """ARCHITECTURE.md's "Module map", package folder -> its text: a block starts at a line
    that opens with a folder in backticks (`` `compare/load/` — ...``)."""
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    blocks: dict[str, str] = {}
    folder = None
    for line in section.splitlines():
        m = re.match(r"`([\w/]+/)`", line)
        if m:
            folder = m.group(1)
        if folder:
            blocks[folder] = blocks.get(folder, "") + line + "\n"
    return blocks


def holds_code(path: Path) -> bool:
    """More than a docstring: a statement of its own."""
    body = ast.parse(path.read_text()).body
    return any(not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in body)


def modules(folder: str) -> set[str]:
    """The modules of one package folder: its .py files, ``__init__.py`` only when it holds
    code."""
    return {p.name for p in (ROOT / folder).glob("*.py")
            if p.name != "__init__.py" or holds_code(p)}


def test_module_map_names_every_module_and_only_those():
    blocks = module_map((ROOT / "ARCHITECTURE.md").read_text())
    folders = sorted({str(p.parent.relative_to(ROOT)) + "/" for pkg in PACKAGES
                      for p in (ROOT / pkg).rglob("*.py")})
    missing, gone = [], []
    for folder in folders:
        named = set(re.findall(r"`([\w.]+\.py)`", blocks.get(folder, "")))
        have = modules(folder)
        missing += [folder + m for m in sorted(have - named)]
        gone += [folder + m for m in sorted(named) if not (ROOT / folder / m).is_file()]
    assert not missing, f"modules missing from ARCHITECTURE.md's module map: {missing}"
    assert not gone, f"ARCHITECTURE.md's module map names modules that do not exist: {gone}"
