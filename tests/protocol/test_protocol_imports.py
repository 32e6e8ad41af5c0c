"""The modules of ads.protocol import each other one way (no cycle, even under TYPE_CHECKING)."""

from __future__ import annotations

import ast
from pathlib import Path

import ads.protocol

PACKAGE = Path(ads.protocol.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name.rsplit(".", 1)[-1] for name in found if name.startswith("ads.protocol.")}


def test_protocol_imports_have_no_cycle() -> None:
    graph = {p.stem: _imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for imported in graph.get(module, set()):
            visit(imported, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
