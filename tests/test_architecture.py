"""The code's shape, checked mechanically: no import circles, the complexity limits ruff
enforces kept on and their exemptions honest, and every remaining `type: ignore` names its
error code and why."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grimp

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "ads"
# The complexity rules and the loosest value each limit may have; pyproject.toml says why
# these values. They may be tightened there; loosening one means changing this line too.
COMPLEXITY = {"C901": ("mccabe", "max-complexity", 12),
              "PLR0912": ("pylint", "max-branches", 12),
              "PLR0913": ("pylint", "max-args", 8),
              "PLR0915": ("pylint", "max-statements", 50)}
# Exempt as a whole folder, for the reason pyproject.toml gives; other exemptions name files.
EXEMPT_FOLDERS = {"tests/*"}


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


def _ruff_lint() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]


def _ruff(*args: str) -> list[dict[str, Any]]:
    """ruff's diagnostics (JSON) for `args`, run from the repository's root."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--exit-zero",
                           "--output-format", "json", *args],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_architecture_complexity_limits_are_on() -> None:
    """`make test` runs ruff, which enforces the limits; this keeps them from being dropped
    from the selection or loosened without anyone deciding to."""
    lint = _ruff_lint()

    def covered(code: str, prefixes: list[str]) -> bool:
        return any(code.startswith(prefix) for prefix in prefixes)

    for code, (section, key, loosest) in COMPLEXITY.items():
        assert covered(code, lint["select"]) and not covered(code, lint["ignore"]), code
        assert lint[section][key] <= loosest, (section, key)


def test_architecture_complexity_exemptions_still_apply() -> None:
    """An exemption from a limit names one file (or a folder of EXEMPT_FOLDERS) and goes once
    the file is within the limit: a stale one would let the function grow back unseen."""
    exempt = {pattern: sorted(set(codes) & set(COMPLEXITY))
              for pattern, codes in _ruff_lint()["per-file-ignores"].items()}
    files = {pattern: codes for pattern, codes in exempt.items()
             if codes and pattern not in EXEMPT_FOLDERS}
    assert all((ROOT / pattern).is_file() for pattern in files), files
    found = {(Path(d["filename"]).relative_to(ROOT).as_posix(), d["code"])
             for d in _ruff("--select", ",".join(COMPLEXITY),
                            "--config", "lint.per-file-ignores = {}", *files)}
    stale = [(f, code) for f, codes in files.items() for code in codes
             if (f, code) not in found]
    assert stale == []


def test_architecture_complexity_noqa_still_apply_and_say_why() -> None:
    """A `noqa` for a limit sits on the def line, says why after a dash (`noqa: C901 - why`)
    and goes once the function is within the limit."""
    unused = [f"{d['filename']}:{d['location']['row']}: {d['message']}"
              for d in _ruff("--select", ",".join([*COMPLEXITY, "RUF100"]), "src", "tests",
                             "tools")
              if d["code"] == "RUF100" and any(code in d["message"] for code in COMPLEXITY)]
    assert unused == []
    bare = []
    for folder in ("src", "tests", "tools"):
        for path in (ROOT / folder).rglob("*.py"):
            if "node_modules" in path.parts:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                noqa = re.search(r"#\s*noqa:([^#]*)", line)
                if noqa and any(code in noqa.group(1) for code in COMPLEXITY) and not (
                        line.lstrip().startswith(("def ", "async def "))
                        and re.search(r"noqa:\s*[A-Z0-9, ]+\s+-\s+\w", line)):
                    bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert bare == []


def test_architecture_type_ignores_name_code_and_reason() -> None:
    bare = []
    for path in SRC.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "type: ignore" in line and not re.search(
                    r"type: ignore\[[\w,-]+\]\s+#?\s*-?\s*\w+", line):
                bare.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert bare == []

