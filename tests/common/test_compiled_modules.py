"""Which modules a process runs compiled (`ads.COMPILED`, tools/build_compiled.py), and
`ADS_PURE_PYTHON=1`, which makes every `ads` module load from its source file; and that the
compiled build the README promises is there: every module the Makefile lists, built from
the sources as they are (this fails where `make install` could not compile)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import ads

SRC = Path(ads.__file__).parent.parent
ROOT = SRC.parent

# Imports the broker (and with it every module the build may compile) and reports where
# each `ads` module came from.
_REPORT = """
import json, sys
import ads, ads.broker.server
print(json.dumps({"compiled": list(ads.COMPILED),
                  "files": {n: m.__file__ for n, m in sys.modules.items()
                            if n.startswith("ads.") and getattr(m, "__file__", None)}}))
"""


def _report(pure: bool) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if k != "ADS_PURE_PYTHON"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    if pure:
        env["ADS_PURE_PYTHON"] = "1"
    out = subprocess.run([sys.executable, "-c", _REPORT], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    report = json.loads(out)
    return report["compiled"], report["files"]


def _listed() -> list[str]:
    """The modules of the last build, as tools/build_compiled.py listed them."""
    manifest = SRC / "ads" / "compiled.txt"
    if not manifest.exists():
        return []
    return [line.split()[0] for line in manifest.read_text().splitlines()]


def test_compiled_modules_pure_python_loads_every_module_from_source() -> None:
    compiled, files = _report(pure=True)
    assert compiled == []
    assert "ads.broker.dispatch" in files
    assert all(f.endswith(".py") for f in files.values()), files


def test_compiled_modules_are_the_built_ones_loaded_as_extensions() -> None:
    compiled, files = _report(pure=False)
    listed = _listed()
    assert ("ads.native__mypyc" in files) == bool(compiled)
    # A build older than a source of its modules is not used at all.
    manifest = SRC / "ads" / "compiled.txt"
    fresh = all((SRC / (n.replace(".", "/") + ".py")).stat().st_mtime
                <= manifest.stat().st_mtime for n in listed)
    assert compiled == (listed if fresh else [])
    for name, path in files.items():
        # ads.native__mypyc: the code the compiled modules share, loaded by them
        if name in compiled or name == "ads.native__mypyc":
            assert path.endswith(EXTENSION_SUFFIXES[0]), (name, path)
        else:
            assert path.endswith(".py"), (name, path)


def _makefile_modules() -> list[str]:
    """The Makefile's `COMPILED` list: the modules `make install` compiles."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    found = re.search(r"^COMPILED := (.*)$", text, re.MULTILINE)
    assert found is not None
    return found.group(1).split()


def test_compiled_modules_build_is_present_for_the_sources_as_they_are() -> None:
    modules = _makefile_modules()
    assert len(modules) >= 10, modules
    done = subprocess.run([sys.executable, "tools/build_compiled.py", "--verify", *modules],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout
    compiled, _ = _report(pure=False)
    assert sorted(compiled) == sorted(
        ".".join(Path(m).relative_to("src").with_suffix("").parts) for m in modules)
