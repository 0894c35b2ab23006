"""docs/tasks.md runs as written, on a real 3-node cluster: its blocks headed
``# app.py`` put together into app.py, run by ``disque-worker app:tasks`` as the
page says; its other Python blocks, in order, as the application's script
(what they print checked against what the page says they print); its
``# test_app.py`` block under pytest, with no node. The page's addresses
(127.0.0.1:7711 and :7712) become this test's nodes'."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.nodes import ClusterOfNodes, free_port
from testkit.workers import run_beside_worker

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tasks.md"
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(180)


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), re.S)


def on_nodes(code: str, cluster3: ClusterOfNodes) -> str:
    for page_port, node in zip(("7711", "7712"), cluster3, strict=False):
        code = code.replace(f"127.0.0.1:{page_port}", f"127.0.0.1:{node.port}")
    return code


def test_the_pages_examples_run_as_written(tmp_path: Path, cluster3: ClusterOfNodes) -> None:
    python = blocks("python")
    app = [b for b in python if b.startswith("# app.py\n")]
    stub = [b for b in python if b.startswith("# test_app.py\n")]
    script = [b for b in python if b not in app and b not in stub]
    assert len(app) >= 4 and len(stub) == 1 and len(script) >= 5
    assert "disque-worker app:tasks\n" in blocks("sh")
    (tmp_path / "app.py").write_text(on_nodes("\n\n".join(app), cluster3))
    (tmp_path / "script.py").write_text(on_nodes("\n\n".join(script), cluster3))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    ran, log = run_beside_worker(tmp_path, ["app:tasks"], [sys.executable, "script.py"], env)
    assert ran.returncode == 0, ran.stdout + ran.stderr + log[-3000:]
    printed = ran.stdout.splitlines()
    assert printed[:2] == [
        "{'customer': 42, 'receipt': 'R-42-5'}",
        "{'customer': 42, 'receipt': 'R-42-5'}",
    ]
    for line in [
        "['R-1-10', 'R-2-20', 'R-3-30']",
        "R-7-3 SUCCESS",
        "ValueError cannot charge 0 EUR",
        "ValueError: cannot charge 0 EUR",  # the traceback's last line
        "FAILURE True",
        "16",
        "20",
        "[0, 2, 4, 6, 8, 10, 12, 14, 16, 18]",
        "55",
        "REVOKED",
    ]:
        assert line in printed, (line, printed)
    assert any(
        line.startswith("app.nightly_report with these arguments is queued or running already")
        for line in printed
    ), printed


def test_the_pages_stub_mode_test_passes_with_no_node(tmp_path: Path) -> None:
    [stub] = [b for b in blocks("python") if b.startswith("# test_app.py\n")]
    (tmp_path / "test_app.py").write_text(stub)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"],
        cwd=tmp_path,
        env={**os.environ, "DISQUE_NODES": f"127.0.0.1:{free_port()}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
