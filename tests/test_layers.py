"""markovsim's modules import only downwards, without circles (issue 15).

The graph is computed from the modules' own import statements (read with :mod:`ast`, at
module level and inside functions alike, so a circle cannot hide in a function). The layers,
lowest first, are written down in ``LAYERS``; a module may import its own layer and the
layers below it, never one above, and no set of modules may import each other in a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "markovsim"

#: lowest first. A module belongs to the longest prefix that names it; the root package
#: (``markovsim/__init__.py``) is the public facade above the tools.
LAYERS = (
    ("base", ("markovsim._errors", "markovsim._units", "markovsim._config", "markovsim._random",
              "markovsim._estimate", "markovsim._status", "markovsim._entry", "markovsim._lazy", "markovsim._engine_names",
              "markovsim._compile_cache")),
    ("io", ("markovsim._io", "markovsim._spec")),
    ("engine", ("markovsim.engine", "markovsim._backend")),
    ("domains", ("markovsim.availability", "markovsim.training", "markovsim.inference")),
    ("tools", ("markovsim._grid", "markovsim._sweep", "markovsim.validate", "markovsim.plotting", "markovsim.repro")),
    ("facade", ("markovsim",)),
    ("cli", ("markovsim._cli",)),
)

#: accepted breaks of the layering, each with its reason (none: the phase-1 breaks, the engine
#: circle and training's import of the root package, are gone). Keep it empty.
KNOWN: dict[str, dict] = {"upward": {}, "cycles": {}}


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The markovsim modules that ``name`` imports (anywhere in the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "markovsim")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "markovsim":
                continue
            for alias in node.names:   # `from pkg import submodule` imports the submodule
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in known else module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("markovsim"):
                found.add(node.args[0].value)
    return {m for m in found if m != name}


def layer(name: str) -> int:
    best = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (rank, len(prefix))
    assert best is not None, f"{name}: in no layer; add it to LAYERS in tests/test_layers.py"
    return best[0]


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(g: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_function_level_and_relative_imports():
    g = graph()
    assert "markovsim._io" in g["markovsim.availability._spec"]
    assert "markovsim._config" in g["markovsim.availability"]          # from .. import _config
    assert "markovsim._cli._common" in g["markovsim._cli._train"]       # from . import _common as c
    assert "markovsim.validate" in g["markovsim"]                       # importlib.import_module in __getattr__


def test_every_module_is_in_a_layer():
    for name in modules():
        layer(name)


def test_imports_point_down_only():
    upward = [(a, b) for a, deps in graph().items() for b in deps
              if layer(b) > layer(a) and (a, b) not in KNOWN["upward"]]
    assert not upward, "imports that point up the layers (see LAYERS): " + ", ".join(f"{a} -> {b}" for a, b in upward)


def test_no_import_circles():
    g = {a: {b for b in deps if (a, b) not in KNOWN["upward"]} for a, deps in graph().items()}
    found = [c for c in cycles(g) if c not in KNOWN["cycles"]]
    assert not found, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_the_root_package_does_not_import_the_validation_harness_eagerly():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not any("validate" in (getattr(n, "module", "") or "") for n in top)


def test_nothing_reads_outside_the_package_but_the_shipped_data_resolver():
    """Only ``markovsim._io`` locates files relative to the package (the presets and the
    reproduction scripts: package data in a wheel, the top-level folders in a checkout)."""
    users = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if "__file__" in p.read_text())
    assert users == ["markovsim/_io/_documents.py"]
