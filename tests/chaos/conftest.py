"""Fixtures of the chaos suite: a cluster of ChaosNodes, the partitioner, artifacts.

Environment knobs (all optional):

- ``CHAOS_SECONDS``: length of the workload + nemesis phase of every chaos
  test (default: 20 s for the short tests, 300 s for the ``slow`` one);
- ``CHAOS_SEED``: replay a run's random choices (printed in every summary);
- ``CHAOS_ARTIFACTS``: where summaries and, on failure, node logs are copied
  (default: ``chaos-artifacts`` under pytest's base temporary directory).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos_harness import ChaosNode, Partitioner, gid_base

from testkit.nodes import ClusterOfNodes

NODE_CONFIG = {
    "cluster-node-timeout": "1500",
    "appendonly": "yes",  # a SIGKILL must not lose what a reply confirmed
    "appendfsync": "everysec",
}


@pytest.fixture(scope="session")
def chaos_artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("CHAOS_ARTIFACTS")
    path = Path(configured) if configured else tmp_path_factory.getbasetemp() / "chaos-artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def chaos_cluster(tmp_path: Path) -> Iterator:
    """Factory: chaos_cluster(n, config) -> n ChaosNodes in a full mesh."""
    clusters: list[ClusterOfNodes] = []

    def factory(n: int = 5, config: dict[str, str] | None = None) -> ClusterOfNodes:
        cfg = {**NODE_CONFIG, **(config or {})}
        # Own group IDs (for the partitioner's owner match) need root to set.
        base = gid_base() if hasattr(os, "geteuid") and os.geteuid() == 0 else None
        nodes = [
            ChaosNode(tmp_path / f"node{i}", config=cfg, gid=None if base is None else base + i)
            for i in range(n)
        ]
        cluster = ClusterOfNodes(nodes)  # type: ignore[arg-type]
        clusters.append(cluster)
        for node in nodes:
            node.start(wait=False)
        for node in nodes:
            node.wait_ready()
        cluster.join(timeout=30)
        return cluster

    yield factory
    for cluster in clusters:
        for node in cluster:
            if node.is_running():
                node.resume()  # a SIGSTOPped node ignores SIGTERM
                node.terminate()


@pytest.fixture
def partitioner() -> Iterator[Partitioner]:
    p = Partitioner()
    reason = p.unavailable_reason()
    if reason:
        pytest.skip(f"partition variant skipped: {reason}")
    try:
        yield p
    finally:
        p.uninstall()
