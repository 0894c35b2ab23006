"""The examples/ apps run as their README says: the shop's worker (two
processes) and producer on a real 3-node cluster, and its stub-mode tests with
no node at all."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.nodes import ClusterOfNodes, free_port
from testkit.workers import run_beside_worker

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
    produced, log = run_beside_worker(
        shop, ["tasks:tasks", "--processes", "2"], [sys.executable, "producer.py"], env
    )
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
