"""Fixtures: real disque-server processes in temporary directories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from nodes import ClusterOfNodes, Node


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="run long soak/chaos tests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="long test: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def start_node(tmp_path: Path) -> Iterator:
    """Factory: start_node(config={...}, args=[...]) -> a running Node."""
    nodes: list[Node] = []

    def factory(config: dict[str, str] | None = None, args: list[str] | None = None,
                wait: bool = True, name: str | None = None) -> Node:
        node = Node(tmp_path / (name or f"node{len(nodes)}"), config=config, args=args)
        nodes.append(node)
        return node.start(wait=wait)

    yield factory
    for node in nodes:
        node.terminate()


@pytest.fixture
def node(start_node) -> Node:
    """One fresh standalone node."""
    return start_node()


@pytest.fixture
def client(node: Node):
    with node.client() as c:
        yield c


@pytest.fixture
def start_cluster(start_node) -> Iterator:
    """Factory: start_cluster(n, config={...}) -> n nodes met (chain) in a full mesh.

    cluster-node-timeout defaults to 1500 ms so failure detection is quick.
    """

    def factory(n: int = 3, config: dict[str, str] | None = None,
                mesh: bool = True) -> ClusterOfNodes:
        cfg = {"cluster-node-timeout": "1500", **(config or {})}
        cluster = ClusterOfNodes([start_node(config=cfg) for _ in range(n)])
        if mesh:
            cluster.meet_chain()
            cluster.wait_full_mesh()
        return cluster

    yield factory


@pytest.fixture
def cluster3(start_cluster) -> ClusterOfNodes:
    return start_cluster(3)
