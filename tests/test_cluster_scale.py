"""A cluster of 25 nodes: every node learns every other, and all agree on a failure.

Disque's failure semantics at a size where the bus's per-node work shows: the
nodes meet one node only and gossip does the rest; a node killed is flagged
PFAIL, then FAIL once a majority sees it failing, by every other node.
"""

from __future__ import annotations

import pytest

from tests.nodes import ClusterOfNodes, links_up, wait_for

SIZE = 25


@pytest.mark.timeout(120)
def test_25_nodes_mesh_agree_on_hello_and_flag_a_killed_node_failing(start_node) -> None:
    cluster = ClusterOfNodes(
        [start_node(config={"cluster-node-timeout": "2000"}) for _ in range(SIZE)]
    )
    first = cluster[0]
    for node in cluster.nodes[1:]:  # a star: every other link comes from gossip
        assert node.call("CLUSTER", "MEET", "127.0.0.1", str(first.port)) == b"OK"
    wait_for(
        lambda: all(links_up(n) == SIZE - 1 for n in cluster),
        timeout=60,
        message=f"every node linked to the {SIZE - 1} others",
    )

    ids = sorted(cluster.node_ids())
    for node in cluster:
        hello = node.call("HELLO")
        assert sorted(entry[0] for entry in hello[2:]) == ids, node

    victim = cluster.nodes[-1]
    victim.kill()
    survivors = cluster.nodes[:-1]
    wait_for(
        lambda: all("fail" in cluster.flags_of(n, victim) for n in survivors),
        timeout=30,
        message="every other node flags the killed node fail",
    )
    for node in survivors:
        hello = node.call("HELLO")
        assert len(hello[2:]) == SIZE, "HELLO still lists the failed node (priority 100)"
