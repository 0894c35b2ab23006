"""The examples/ apps run as their README says: the shop's worker (two
processes) and producer on a real 3-node cluster, and its stub-mode tests with
no node at all."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.nodes import ClusterOfNodes, free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(180)


def shop_copy(tmp_path: Path) -> Path:
    shop = tmp_path / "shop"
    shutil.copytree(ROOT / "examples" / "shop", shop)
    return shop


def test_the_shop_runs_on_three_nodes(tmp_path: Path, cluster3: ClusterOfNodes) -> None:
    shop = shop_copy(tmp_path)
    env = {**os.environ, "DISQUE_NODES": " ".join(f"127.0.0.1:{n.port}" for n in cluster3)}
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        worker = subprocess.Popen(
            [str(BIN / "disque-worker"), "tasks:tasks", "--processes", "2"],
            cwd=shop,
            env=env,
            stdout=log,
            stderr=log,
        )
    try:
        produced = subprocess.run(
            [sys.executable, "producer.py"],
            cwd=shop,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
    finally:
        worker.kill()
    log = log_path.read_text()
    assert produced.returncode == 0, produced.stdout + produced.stderr + log[-3000:]
    assert produced.stdout.splitlines() == [
        *(f"charged: R-{c}-{10 * c}" for c in range(1, 6)),
        "refused: ValueError: cannot charge 0 EUR",
        "report: TimeLimitExceeded",
        "carts purged",
    ]
    assert "tasks.charge took" in log  # the middleware
    assert "ran past its time limit of 1 s" in log


def test_the_shops_own_tests_pass_with_no_node(tmp_path: Path) -> None:
    shop = shop_copy(tmp_path)
    nowhere = f"127.0.0.1:{free_port()}"  # nothing listens there
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_shop.py"],
        cwd=shop,
        env={**os.environ, "DISQUE_NODES": nowhere},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
