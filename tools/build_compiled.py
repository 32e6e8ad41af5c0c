"""Compiles the broker's hot modules with mypyc into C extensions beside their sources.

    python tools/build_compiled.py src/ads/net/server.py src/ads/protocol/codec.py ...

`make install` runs it with the modules the Makefile lists (`COMPILED`). Each module
`src/ads/x/y.py` gets `src/ads/x/y.<abi>.so` next to it, and the code they share goes to
`src/ads/native__mypyc.<abi>.so`; all are build outputs, git-ignored. Python imports an
extension before a source file of the same name, so the compiled modules serve from then on;
the sources stay the reference and what `ADS_PURE_PYTHON=1` runs (`ads/__init__.py`).

It writes `src/ads/compiled.txt` last, one `module source extension` line per module, and
its time is the build's: `ads/__init__.py` falls back to the sources when one of them is
newer (edited or checked out since the build), since the compiled modules call each other
directly and a half-stale set would run old code.

Without a C compiler, or when mypyc fails, it removes any extensions of an earlier build,
says why and exits 0: the broker then runs as pure Python, only slower. `--stamp PATH` is
touched only when the build succeeded, so `make` tries again next time instead of taking a
failed build for done.

    python tools/build_compiled.py --verify src/ads/net/server.py ...

checks that the last build compiled exactly these modules and is newer than each of their
sources, and exits 1 saying what is missing otherwise: `make test` runs it first, since
the suite is meant to run on the compiled build the README promises.
"""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
MANIFEST = SRC / "ads" / "compiled.txt"
GROUP = "ads.native"  # the code the modules share: src/ads/native__mypyc.<abi>.so


def _remove_outputs() -> None:
    MANIFEST.unlink(missing_ok=True)
    for path in (SRC / "ads").rglob("*.so"):
        path.unlink()


def _compiler() -> str | None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(os.environ.get("CC", cc).split()[0])


def _build(sources: list[str]) -> None:
    from mypyc.build import mypycify
    from setuptools import setup

    os.chdir(ROOT)
    setup(
        name="ads-compiled",
        package_dir={"": "src"},
        ext_modules=mypycify(sources, group_name=GROUP, target_dir="build/mypyc"),
        script_args=["-q", "build_ext", "--inplace", "--build-temp", "build/mypyc-temp",
                     "--parallel", str(os.cpu_count() or 1)],
    )


def _verify(sources: list[str]) -> int:
    wanted = [".".join(Path(s).relative_to("src").with_suffix("").parts) for s in sources]
    if not MANIFEST.exists():
        print("build_compiled: the broker's modules are not compiled (no src/ads/compiled.txt);"
              " `make install` compiles them: it needs a C compiler and Python's headers")
        return 1
    listed = [line.split()[0] for line in MANIFEST.read_text().splitlines()]
    built = MANIFEST.stat().st_mtime
    stale = [s for s in sources if (ROOT / s).stat().st_mtime > built]
    if sorted(listed) != sorted(wanted) or stale:
        print(f"build_compiled: the compiled build is not this code's (built: {listed}; "
              f"edited since: {stale}); run `make install`")
        return 1
    return 0


def main() -> int:
    args = sys.argv[1:]
    stamp = None
    if args[:1] == ["--stamp"]:
        stamp, args = Path(args[1]), args[2:]
    verify = args[:1] == ["--verify"]
    sources = [str(Path(s).resolve().relative_to(ROOT)) for s in args[verify:]]
    if verify:
        return _verify(sources)
    _remove_outputs()
    if not sources:
        return 0
    if _compiler() is None:
        print("build_compiled: no C compiler found; the broker runs as pure Python")
        return 0
    if not Path(sysconfig.get_paths()["include"], "Python.h").exists():
        print("build_compiled: Python's headers (Python.h) are not installed; the broker runs "
              "as pure Python")
        return 0
    try:
        _build(sources)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure means pure Python
        _remove_outputs()
        print(f"build_compiled: mypyc failed ({exc!r}); the broker runs as pure Python")
        return 0
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    lines = []
    for source in sources:
        module = Path(source).relative_to("src").with_suffix("")
        lines.append(f"{'.'.join(module.parts)} {module}.py {module}{suffix}\n")
    MANIFEST.write_text("".join(lines))
    print(f"build_compiled: {len(sources)} modules compiled")
    if stamp is not None:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
