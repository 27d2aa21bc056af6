"""The engine's modules import each other only downwards: no circle, and no import of an
engine module hidden inside a function (issue 15, item 2). Checked from the source."""

from __future__ import annotations

import ast
import pathlib

import markovsim.engine

ENGINE = pathlib.Path(markovsim.engine.__file__).parent


def _engine_imports(tree: ast.Module, *, top_level: bool) -> set[str]:
    nodes = tree.body if top_level else [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found = set()
    for node in nodes:
        for sub in ([node] if top_level else ast.walk(node)):
            if isinstance(sub, ast.ImportFrom) and sub.level == 1:
                if sub.module:
                    found.add(sub.module)
                else:
                    found.update(alias.name for alias in sub.names)
    return found


def _graph() -> dict[str, set[str]]:
    return {p.stem: _engine_imports(ast.parse(p.read_text()), top_level=True)
            for p in ENGINE.glob("_*.py") if p.stem != "__init__"}


def test_no_engine_import_inside_a_function():
    hidden = {p.stem: sorted(_engine_imports(ast.parse(p.read_text()), top_level=False))
              for p in ENGINE.glob("*.py")}
    assert {k: v for k, v in hidden.items() if v} == {}


def test_engine_import_graph_has_no_cycle():
    graph = _graph()
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path + [node, nxt]))
            if nxt not in state:
                visit(nxt, path + [node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def test_chain_and_structure_share_the_validation_layer():
    graph = _graph()
    assert "_structure" not in graph["_chain"]
    assert "_validate" in graph["_chain"] and "_validate" in graph["_structure"]
    assert graph["_validate"] == set()
