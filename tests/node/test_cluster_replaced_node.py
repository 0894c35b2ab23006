"""A node killed and replaced by a fresh node (a new ID) on the same address."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.nodes import ClusterOfNodes, Node, wait_for


def node_lines(observer: Node) -> list[list[str]]:
    return [line.split() for line in observer.call("CLUSTER", "NODES").decode().splitlines()]


@pytest.fixture
def replaced(start_cluster, tmp_path) -> Iterator[tuple[ClusterOfNodes, bytes, Node]]:
    """Three nodes; the third killed, seen FAIL, then replaced on its port."""
    cluster = start_cluster(3)
    old_id = cluster[2].call("CLUSTER", "MYID")
    cluster[2].kill()
    wait_for(
        lambda: "fail" in cluster.flags_of(cluster[0], cluster[2]),
        15,
        message="the killed node to be seen FAIL",
    )
    fresh = cluster[2].replaced(tmp_path / "replacement")
    try:
        yield cluster, old_id, fresh
    finally:
        fresh.terminate()


def test_meet_of_a_failed_nodes_address_reaches_the_new_node(replaced) -> None:
    cluster, old_id, fresh = replaced
    new_id = fresh.call("CLUSTER", "MYID")
    assert new_id != old_id
    assert cluster[0].call("CLUSTER", "MEET", "127.0.0.1", str(fresh.port)) == b"OK"

    def knows_both(observer: Node) -> bool:
        ids = {fields[0].encode(): fields[2] for fields in node_lines(observer)}
        return new_id in ids and "handshake" not in ids[new_id] and old_id in ids

    for observer in cluster[:2]:
        wait_for(
            lambda o=observer: knows_both(o),
            15,
            message=f"{observer.port} to know the new node next to the failed one",
        )
    others = {n.call("CLUSTER", "MYID").decode() for n in cluster[:2]}
    wait_for(
        lambda: others <= {f[0] for f in node_lines(fresh)},
        15,
        message=f"the new node to know the others: {node_lines(fresh)}",
    )
    # The old ID stays FAIL until forgotten; the new one is up.
    assert "fail" in {f[0]: f[2] for f in node_lines(cluster[1])}[old_id.decode()]


def test_meet_of_a_live_nodes_address_changes_nothing(start_cluster) -> None:
    cluster = start_cluster(2)
    assert cluster[0].call("CLUSTER", "MEET", "127.0.0.1", str(cluster[1].port)) == b"OK"
    assert not any("handshake" in fields[2] for fields in node_lines(cluster[0]))
    assert len(node_lines(cluster[0])) == 2
