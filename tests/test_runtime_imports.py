"""Every third-party import of the product resolves to a runtime dependency.

`pip install -e .` installs ``[project.dependencies]`` and what they require, nothing else; a
product module that imports a test-only package (``jsonschema``, ``pytest``, ``PIL``...) crashes
on a fresh machine while every test, run with the test extra installed, passes. This walks the
product's source with ``ast`` (imports inside functions included) and resolves each top-level
module to its distribution with ``importlib.metadata``.
"""
from __future__ import annotations

import ast
import importlib.metadata as md
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

try:  # Python 3.11+; on 3.10 the tomli backport, when installed
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def product_packages() -> list[str]:
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({p.rstrip("*").rstrip(".") for p in include})


def runtime_closure(requirements: list[str]) -> set[str]:
    """Distributions `pip install -e .` brings: the declared ones and, transitively, what they
    require outside any extra (markers evaluated for this interpreter)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += [Requirement(r) for r in md.requires(name) or []]
        except md.PackageNotFoundError:
            pass
    return seen


def third_party_imports(package_dir: Path, own: set[str]):
    """(file, line, top-level module) of every absolute import that is not ours or stdlib."""
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in own and top not in sys.stdlib_module_names and top != "__future__":
                    yield path, node.lineno, top


def offending_imports(root: Path, packages: list[str], requirements: list[str]) -> list[str]:
    runtime = runtime_closure(requirements)
    owners = md.packages_distributions()
    problems = []
    for pkg in packages:
        for path, line, top in third_party_imports(root / pkg, set(packages)):
            dists = {canonicalize_name(d) for d in owners.get(top, [])}
            if not dists & runtime:
                why = (f"from {', '.join(sorted(dists))}, not a runtime dependency" if dists
                       else "installed by no distribution here")
                problems.append(f"{path.relative_to(root)}:{line}: imports {top} ({why})")
    return problems


def test_product_imports_only_runtime_dependencies():
    problems = offending_imports(ROOT, product_packages(), PYPROJECT["project"]["dependencies"])
    assert not problems, "\n".join(problems)


def test_the_guard_names_a_test_only_import(tmp_path):
    pkg = tmp_path / "prod"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "report.py").write_text("import json\n\n\ndef validate(r):\n"
                                   "    import jsonschema\n    return jsonschema\n")
    problems = offending_imports(tmp_path, ["prod"], ["numpy>=1.26"])
    assert problems == ["prod/report.py:5: imports jsonschema "
                        "(from jsonschema, not a runtime dependency)"]
    assert not offending_imports(tmp_path, ["prod"], ["jsonschema"])


@pytest.mark.parametrize("requirement, brings", [("matplotlib", "pillow"),
                                                 ("tensorflow==2.21.*", "numpy")])
def test_runtime_closure_follows_requirements(requirement, brings):
    assert brings in runtime_closure([requirement])
