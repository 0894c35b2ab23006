"""Replay the recorded Disque 1.0-rc1 sessions (one node, three-node cluster) and
compare every reply."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.conformance import (
    CLUSTER_GOLDEN,
    CLUSTER_SCRIPT,
    SINGLE_NODE_GOLDEN,
    SINGLE_NODE_SCRIPT,
    parse_golden,
    replay,
)
from testkit.nodes import ClusterOfNodes, Node
from testkit.processes import port_free, port_range


def test_recording_parses() -> None:
    entries = parse_golden(SINGLE_NODE_GOLDEN)
    script = [
        line
        for line in SINGLE_NODE_SCRIPT.read_text().splitlines()
        if line.strip() and not line.startswith(("#", "!"))
    ]
    assert len(entries) == len(script) == 128


@pytest.mark.timeout(60)
def test_single_node_matches_recording(node: Node) -> None:
    result = replay(SINGLE_NODE_GOLDEN, SINGLE_NODE_SCRIPT, node.port)
    assert result.failed == 0, result.report()
    assert result.passed > 100
    assert node.is_running()


def consecutive_free_ports(n: int) -> int:
    """A base port such that base .. base+n-1 and their bus ports are all free."""
    low, high = port_range()  # (this test worker's ports)
    for _ in range(1000):
        base = random.randint(low, high - n)
        if all(port_free(p) and port_free(p + 10000) for p in range(base, base + n)):
            return base
    raise RuntimeError("no run of free ports found")


@pytest.fixture
def cluster_on_consecutive_ports(tmp_path: Path) -> Iterator[ClusterOfNodes]:
    """Three fresh nodes on ports base, base+1, base+2, met: the recording's layout."""
    base = consecutive_free_ports(3)
    nodes = [Node(tmp_path / f"node{i}", port=base + i) for i in range(3)]
    with ClusterOfNodes.running(nodes) as cluster:
        yield cluster


@pytest.mark.timeout(90)
def test_cluster_matches_recording(cluster_on_consecutive_ports: ClusterOfNodes) -> None:
    cluster = cluster_on_consecutive_ports
    result = replay(CLUSTER_GOLDEN, CLUSTER_SCRIPT, cluster[0].port)
    assert result.failed == 0, result.report()
    assert result.passed == 30
    assert all(node.is_running() for node in cluster)
