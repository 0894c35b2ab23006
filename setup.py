"""The node compiled with mypyc: the build users get.

``pip install .`` compiles every module of ``disque_server`` (but
``__main__``) to a C extension with mypyc when a C compiler and the Python
headers are present, and installs the plain Python package, with a one-line
notice, when they are not or the compile fails. ``DISQUE_PURE=1`` forces the
pure-Python build. The rest of the project (CLI, dashboard, Spark source,
library) stays pure Python: its speed is not the node's.

``INFO server`` (``disque_build_id``) and ``disque-server --version`` say
which build runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# Run as scripts (python -m disque_server, python -m disque_server.check_aof): a
# compiled module has no code object for -m to run.
NOT_COMPILED = {"disque_server/__main__.py", "disque_server/check_aof.py"}


def notice(why: str) -> None:
    print(f"disque-py: building the pure-Python node ({why})", file=sys.stderr)


def node_modules() -> list[str]:
    return sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "disque_server").rglob("*.py")
        if str(p.relative_to(ROOT)) not in NOT_COMPILED
    )


def why_pure() -> str | None:
    """Why the node cannot be compiled here, or None when it can."""
    if os.environ.get("DISQUE_PURE", "") not in ("", "0"):
        return "DISQUE_PURE is set"
    if sys.implementation.name != "cpython":
        return f"mypyc needs CPython, not {sys.implementation.name}"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if not shutil.which(os.environ.get("CC", compiler).split()[0]):
        return "no C compiler"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers (python3-dev)"
    return None


class BuildOrFallBack(build_ext):
    """A compile that fails leaves the pure-Python modules in place, with a notice."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # a compiler error must not fail the install
            # No half-compiled node: a module's shim without the shared library
            # would not import. Remove what this build wrote.
            for path in self.get_outputs():
                Path(path).unlink(missing_ok=True)
            notice(f"the compile failed: {exc}")


def remove_compiled_in_place(everything: bool) -> None:
    """An editable install (pip install -e .) compiles in the source tree, and Python
    imports an extension before a .py of the same name: a pure build removes them
    all, a compiled one those of modules no longer compiled."""
    for path in [*(ROOT / "disque_server").rglob("*.so"), *ROOT.glob("*__mypyc*.so")]:
        source = str(path.with_name(path.name.split(".", 1)[0] + ".py").relative_to(ROOT))
        if everything or source in NOT_COMPILED:
            path.unlink()


def ext_modules() -> list[Any]:
    """mypyc's extensions for the node, or none (the pure build)."""
    why = why_pure()
    if why is not None:
        notice(why)
        remove_compiled_in_place(everything=True)
        return []
    remove_compiled_in_place(everything=False)
    try:
        from mypyc.build import mypycify
    except ImportError:
        notice("mypyc is not installed")
        return []
    try:
        return mypycify(node_modules(), opt_level="3", debug_level="0")
    except (Exception, SystemExit) as exc:  # mypy's type errors end in SystemExit
        notice(f"mypyc refused the node: {exc}")
        remove_compiled_in_place(everything=True)
        return []


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildOrFallBack})
