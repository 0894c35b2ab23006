"""Fixtures of the fuzz suite: one node per module and its health checker, and a
fresh node per test (the server-bug regressions)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fuzz_util import FuzzNode, Health

from testkit.nodes import Node


@pytest.fixture(scope="module")
def fuzz_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A standalone node shared by the examples of one module."""
    node = FuzzNode(tmp_path_factory.mktemp("fuzz") / "node", config={"loglevel": "verbose"})
    node.start()
    yield node
    node.resume()
    node.terminate()


@pytest.fixture(scope="module")
def health(fuzz_node: Node) -> Health:
    return Health(fuzz_node)


@pytest.fixture
def fresh(tmp_path) -> Iterator[FuzzNode]:
    node = FuzzNode(tmp_path / "node")
    node.start()
    yield node
    node.resume()
    node.terminate()
