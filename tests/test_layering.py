"""Imports flow one way (DESIGN.md): no module imports a higher layer, and no two modules import
each other, directly or through others, even lazily inside a function."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("geosleuth", "geosleuth.data", "geosleuth.bounds.imageio", "geosleuth.plugins"),
    ("geosleuth.core",),
    ("geosleuth.secrets", "geosleuth.gazetteer"),
    ("geosleuth.tools",),
    ("geosleuth.agent",),
    ("geosleuth.scoring",),
    ("geosleuth.eval",),
    ("geosleuth.training", "geosleuth.webapp", "geosleuth.testing", "geosleuth.integrations"),
    ("geosleuth.api",),
    ("geosleuth.cli",),
)
"""Low to high: a module may import its own layer and the layers below it."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / "geosleuth").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Every geosleuth module each module imports, at the top or inside a function."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def _layer(module: str) -> int:
    best, depth = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > depth:
                best, depth = i, len(prefix)
    assert best >= 0, f"{module} is in no layer: add its package to LAYERS"
    return best


def test_no_module_imports_a_higher_layer() -> None:
    graph = _imports(_modules())
    upward = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets if _layer(b) > _layer(a))
    assert not upward, "imports that run upward:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components over the module graph: every one is a single module."""
    graph = _imports(_modules())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(_modules()):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_package_facade_is_lazy_and_no_module_reaches_up_through_it() -> None:
    """``geosleuth/__init__.py`` names the flat API by module path and imports it on first use: its
    targets may sit in any layer, so no module of the package may import a facade name back from
    ``geosleuth`` (that would be an upward import the graph above cannot see)."""
    import geosleuth

    modules = _modules()
    assert set(geosleuth.EXPORTS.values()) <= set(modules)
    facade = set(geosleuth.EXPORTS)
    reached = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "geosleuth" and node.level == 0:
                reached += [f"{name}: from geosleuth import {a.name}" for a in node.names if a.name in facade]
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "geosleuth"
                and node.attr in facade
            ):
                reached.append(f"{name}: geosleuth.{node.attr}")
    assert not reached, "modules that import the facade:\n" + "\n".join(reached)


def test_the_checks_see_a_violation() -> None:
    """The graph is real: a known downward edge is in it."""
    graph = _imports(_modules())
    assert "geosleuth.core.parsing" in graph["geosleuth.training.rewards.reading"]
