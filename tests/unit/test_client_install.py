"""The client's editable install is live: a process started outside the repository
(a worker, a benchmark's producer) imports the repository's disque/, not a copy
made at install time (client/hatch_build.py leaves the package out of an
editable wheel)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def editable_install() -> bool:
    try:
        direct_url = distribution("disque-py-client").read_text("direct_url.json")
    except PackageNotFoundError:
        return False
    return bool(direct_url and json.loads(direct_url).get("dir_info", {}).get("editable"))


def test_an_editable_client_imports_the_repository_sources(tmp_path: Path) -> None:
    if not editable_install():
        pytest.skip("disque-py-client is not installed editable (pip install -e ./client)")
    where = subprocess.run(
        [sys.executable, "-c", "import disque; print(disque.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where) == ROOT / "disque" / "__init__.py"
