"""Fixtures: real disque-server processes in temporary directories."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.conformance import Conn
from testkit.nodes import (
    ClusterOfNodes,
    Node,
    ReferenceNode,
    free_port,
    replicates_to_all,
    tls_config,
    wait_for,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="run long soak/chaos tests")


def stale_compiled_modules() -> list[str]:
    """Node modules edited since mypyc compiled them in place (pip install -e .):
    Python would run the compiled, older code, not the source under test."""
    root = Path(__file__).resolve().parent.parent / "disque_server"
    stale = []
    for ext in root.rglob("*.so"):
        source = ext.with_name(ext.name.split(".", 1)[0] + ".py")
        if source.exists() and source.stat().st_mtime > ext.stat().st_mtime:
            stale.append(str(source.relative_to(root.parent)))
    return stale


def pytest_sessionstart(session: pytest.Session) -> None:
    stale = stale_compiled_modules()
    if stale:
        pytest.exit(
            f"the compiled node is older than {', '.join(stale[:3])}"
            f"{' ...' if len(stale) > 3 else ''}: rebuild it (pip install -e .) or "
            "go pure (DISQUE_PURE=1 pip install -e .)",
            returncode=4,
        )


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

    def factory(
        config: dict[str, str] | None = None,
        args: list[str] | None = None,
        wait: bool = True,
        name: str | None = None,
    ) -> Node:
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
def reference_binary() -> str:
    """C Disque 1.0-rc1's disque-server, when DISQUE_REF_SERVER names it (make in its
    source tree builds src/disque-server; .ci/run builds it from ../shared/reference
    when that is there); the test is skipped, saying so, otherwise."""
    binary = os.environ.get("DISQUE_REF_SERVER")
    if not binary:
        pytest.skip("DISQUE_REF_SERVER (a built C Disque disque-server) not given")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"DISQUE_REF_SERVER={binary}: no executable there")
    return binary


@pytest.fixture
def c_disque(tmp_path: Path, reference_binary: str) -> Iterator[Node]:
    """A C Disque 1.0-rc1 node (skipped where none is built)."""
    node = ReferenceNode(tmp_path / "c-disque", reference_binary)
    node.start()
    yield node
    node.kill()


@pytest.fixture
def c_cluster3(tmp_path: Path, reference_binary: str) -> Iterator[ClusterOfNodes]:
    """Three C Disque 1.0-rc1 nodes in a full mesh (skipped where none is built)."""
    config = {"cluster-node-timeout": "1500"}
    nodes: list[Node] = [
        ReferenceNode(tmp_path / f"c-disque{i}", reference_binary, config) for i in range(3)
    ]
    with ClusterOfNodes.running(nodes) as cluster:
        for node in cluster:  # C Disque updates the nodes it replicates to in its cron
            wait_for(lambda n=node: replicates_to_all(n, 3), message=f"{node} replicates")
        yield cluster


@pytest.fixture(params=["ours", "C"])
def either_cluster3(request: pytest.FixtureRequest) -> ClusterOfNodes:
    """Three nodes of ours, and three of C Disque's where one is built."""
    return request.getfixturevalue("cluster3" if request.param == "ours" else "c_cluster3")


@pytest.fixture(params=["ours", "C"])
def either_node(request: pytest.FixtureRequest, start_node) -> Node:
    """The test runs on our node, and on C Disque's when DISQUE_REF_SERVER is given."""
    if request.param == "ours":
        return start_node()
    return request.getfixturevalue("c_disque")


@pytest.fixture
def start_cluster(start_node) -> Iterator:
    """Factory: start_cluster(n, config={...}) -> n nodes met (chain) in a full mesh.

    cluster-node-timeout defaults to 1500 ms so failure detection is quick.
    """

    def factory(
        n: int = 3, config: dict[str, str] | None = None, mesh: bool = True
    ) -> ClusterOfNodes:
        cfg = {"cluster-node-timeout": "1500", **(config or {})}
        cluster = ClusterOfNodes([start_node(config=cfg) for _ in range(n)])
        if mesh:
            cluster.join()
        return cluster

    yield factory


@pytest.fixture
def cluster3(start_cluster) -> ClusterOfNodes:
    return start_cluster(3)


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A test CA ("ca") and a certificate for 127.0.0.1 it signed ("cert", "key"),
    good for a node and, under tls-auth-clients, for a client too."""
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make test certificates")
    d = tmp_path_factory.mktemp("certs")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "node.key",
        "-out",
        "node.csr",
    )
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run(
        "x509",
        "-req",
        "-in",
        "node.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
        "-out",
        "node.crt",
    )
    return {"ca": str(d / "ca.crt"), "cert": str(d / "node.crt"), "key": str(d / "node.key")}


@pytest.fixture
def start_tls_node(start_node, certs: dict[str, str]) -> Iterator:
    """Factory: start_tls_node(auth_clients="no", config={...}) -> (node, tls_port).

    The node keeps its plain port (node.port, for checks with node.call); the
    client under test is given only the TLS port."""

    def factory(auth_clients: str = "no", config: dict[str, str] | None = None) -> tuple[Node, int]:
        tls_port = free_port()
        cfg = {**tls_config(certs, tls_port), "tls-auth-clients": auth_clients, **(config or {})}
        return start_node(config=cfg), tls_port

    yield factory


@pytest.fixture
def raw(node: Node) -> Iterator[Conn]:
    """A raw RESP connection to the test's node (replies with their types)."""
    with Conn(node.port) as c:
        yield c
