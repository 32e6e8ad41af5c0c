"""The code's shape, checked mechanically: no import circles, modules of a readable size,
and every remaining `type: ignore` names its error code and why."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import grimp

SRC = Path(__file__).resolve().parents[1] / "src" / "ads"
# Generated code and tables, exempt from the size rule.
LONG_BY_DESIGN = {"protocol/messages.py", "broker/configdefs.py"}
MAX_LINES = 600


def _imports(graph: grimp.ImportGraph, module: str) -> Iterator[str]:
    return iter(sorted(graph.find_modules_directly_imported_by(module)))


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, _imports(graph, root))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, _imports(graph, child)))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_architecture_has_no_import_cycles() -> None:
    graph = grimp.build_graph("ads", include_external_packages=False)
    assert _cycles(graph) == []


def test_architecture_modules_stay_under_600_lines() -> None:
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert set(long) <= LONG_BY_DESIGN, long


def test_architecture_type_ignores_name_code_and_reason() -> None:
    bare = []
    for path in SRC.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "type: ignore" in line and not re.search(
                    r"type: ignore\[[\w,-]+\]\s+#?\s*-?\s*\w+", line):
                bare.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert bare == []
