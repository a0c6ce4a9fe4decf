"""The package's layering, read from the source: modules under ``compare/`` import each other
downward only (no loop, type-only imports included), and none imports a compare module under
``if TYPE_CHECKING`` (the sign of a type living above the modules that read it).
``compare/migration`` is its own owner's (issue 27 item 3) and is left out."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXEMPT = ("compare.migration",)


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / "compare").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if not name.startswith(EXEMPT):
            out[name] = path
    return out


def _imported(node: ast.AST, package: str, known: set[str]) -> list[str]:
    """The compare modules one import statement names (``from pkg import mod`` names mod)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] +
                        ([base] if base else []))
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
    return subs or ([base] if base in known else [])


def _type_checking_blocks(tree: ast.AST) -> list[ast.If]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.If) and
            "TYPE_CHECKING" in ast.unparse(n.test)]


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = {m for node in ast.walk(tree) for m in _imported(node, package, known)
                       if m != name and not m.startswith(EXEMPT)}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_type_checking_import_of_compare():
    found = []
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(), str(path))
        for block in _type_checking_blocks(tree):
            for node in ast.walk(block):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                        [a.name for a in node.names]
                    found += [f"{name}:{node.lineno} {n}" for n in names
                              if n.startswith("compare") or node.level]
    assert not found


def test_no_import_loop():
    assert not _cycles(_graph())


def test_the_loop_finder_finds_a_planted_loop():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert not _cycles({"a": {"b"}, "b": set()})


def test_imports_resolve_from_pkg_import_module():
    graph = _graph()
    assert "compare.analysis.result" in graph["compare.analysis.comparison"]
    assert "compare.output.report_data" in graph["compare.output.report_json"]
