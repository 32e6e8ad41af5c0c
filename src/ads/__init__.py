"""ADS: a Kafka-compatible distributed commit log.

Compiled modules: `make install` compiles the request path's hot modules with mypyc
(`tools/build_compiled.py`, listed in `compiled.txt` here) into extensions beside their
sources, which Python imports in their place. Those sources are the reference and are run
instead (every `ads.*` module imported from its `.py` file) when

- `ADS_PURE_PYTHON=1` is set in the environment, or
- a source is newer than its extension (edited or checked out since the build): the
  compiled modules call each other directly, so one stale module would run old code.

`COMPILED` names the modules that run compiled in this process (empty when pure Python).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import SOURCE_SUFFIXES, FileFinder, ModuleSpec, SourceFileLoader
from pathlib import Path
from types import ModuleType

__version__ = "0.1.0"


class _SourcesOnly:
    """Finds `ads.*` modules among source files only, never among extensions."""

    def __init__(self) -> None:
        self._finders: dict[str, FileFinder] = {}

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if path is None or not name.startswith("ads."):
            return None
        for entry in path:
            finder = self._finders.get(entry)
            if finder is None:
                finder = self._finders[entry] = FileFinder(
                    entry, (SourceFileLoader, SOURCE_SUFFIXES))
            spec = finder.find_spec(name, target)
            if spec is not None:
                return spec
        return None


def _compiled_modules() -> tuple[str, ...]:
    """The modules of the last build, or () when they must not be used."""
    if os.environ.get("ADS_PURE_PYTHON", "") not in ("", "0"):
        return ()
    root = Path(__file__).parent.parent
    manifest = root / "ads" / "compiled.txt"
    try:
        # Written last by the build, so its time is the build's (an extension's own time
        # is not: the build leaves one whose stub did not change as it was).
        built = manifest.stat().st_mtime
        modules = []
        for line in manifest.read_text().splitlines():
            module, source, extension = line.split()
            if (root / source).stat().st_mtime > built or not (root / extension).exists():
                return ()
            modules.append(module)
    except (OSError, ValueError):
        return ()  # no build (or a broken one): the sources serve
    return tuple(modules)


COMPILED = _compiled_modules()
if not COMPILED:
    sys.meta_path.insert(0, _SourcesOnly())
