"""The checker's layers hold: every import of a patchbench.checks module (function-level ones
included) goes to its own layer or one below, and no modules import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

CHECKS = Path(__file__).resolve().parents[1] / "patchbench" / "checks"
LAYERS = ["kernel", "engine", "callindex", "analyses", "rules", "run"]   # bottom up


def _module(path: Path) -> str:
    parts = path.relative_to(CHECKS.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.index(parts[2]) if len(parts) > 2 and parts[2] in LAYERS else None


def _imports() -> dict[str, set[str]]:
    """Each checks module -> the checks modules it imports, anywhere in its body."""
    modules = {_module(path): path for path in CHECKS.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("patchbench.checks"):
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    found.add(child if child in modules else node.module)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name.startswith("patchbench.checks")}
        graph[name] = found - {name}
    return graph


def test_every_module_is_in_a_layer():
    loose = [name for name in _imports() if name != "patchbench.checks" and _layer(name) is None]
    assert loose == []


def test_no_import_runs_up_a_layer():
    upward = sorted((name, imported) for name, imports in _imports().items() for imported in imports
                    if _layer(imported) is not None and _layer(name) is not None
                    and _layer(imported) > _layer(name))
    assert upward == []


def test_no_import_circle():
    graph = _imports()
    state: dict[str, int] = {}
    circles = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for imported in sorted(graph.get(name, ())):
            if state.get(imported) == 1:
                circles.append(path[path.index(imported):] + [imported] if imported in path else [name, imported])
            elif imported not in state:
                visit(imported, path + [imported])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert circles == []
