"""compare/migration's modules import one another without a loop: every import counts, those
inside functions and under ``if TYPE_CHECKING:`` too (issue 27: a loop there is a design one,
even when Python and mypy put up with it)."""
from __future__ import annotations

import ast
from pathlib import Path

import compare.migration

PACKAGE = "compare.migration"
ROOT = Path(compare.migration.__file__).parent


def imports(source: str, modules: set[str]) -> set[str]:
    """The package's modules ``source`` imports, wherever the import statement is."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == PACKAGE:  # from compare.migration import flow
                out |= {a.name for a in node.names if a.name in modules}
            elif node.module.startswith(PACKAGE + "."):
                out.add(node.module.split(".")[2])
        elif isinstance(node, ast.ImportFrom) and node.level == 1:
            out |= {node.module.split(".")[0]} if node.module else {
                a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[2] for a in node.names
                    if a.name.startswith(PACKAGE + ".")}
    return out & modules


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import loop of ``graph`` (its modules in order, the first again at the end), or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for dep in sorted(graph.get(name, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[name] = 2
        return []

    for name in sorted(graph):
        if name not in state and (found := visit(name)):
            return found
    return []


def package_graph() -> dict[str, set[str]]:
    modules = {p.stem for p in ROOT.glob("*.py")}
    return {p.stem: imports(p.read_text(), modules) - {p.stem} for p in ROOT.glob("*.py")}


def test_a_planted_loop_is_found_also_under_type_checking():
    modules = {"emit", "portclass", "lift"}
    graph = {
        "emit": imports("from compare.migration import portclass\n", modules),
        "portclass": imports("import typing\nif typing.TYPE_CHECKING:\n"
                             "    from compare.migration.emit import _Emitter\n", modules),
        "lift": imports("def f():\n    from . import portclass\n", modules),
    }
    assert graph == {"emit": {"portclass"}, "portclass": {"emit"}, "lift": {"portclass"}}
    assert cycle(graph) == ["emit", "portclass", "emit"]
    assert cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_compare_migration_has_no_import_loop():
    graph = package_graph()
    assert {"emit", "portclass", "flow", "calls", "state"} <= set(graph)
    assert "emit" not in graph["portclass"]  # the loop issue 27 named
    assert cycle(graph) == []
