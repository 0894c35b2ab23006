"""A cluster of 25 nodes: every node learns every other, and all agree on a failure.

Disque's failure semantics at a size where the bus's per-node work shows: the
nodes meet one node only and gossip does the rest; a node killed is flagged
PFAIL, then FAIL once a majority sees it failing, by every other node.
"""

from __future__ import annotations

import pytest

from testkit.nodes import ClusterOfNodes, links_up, wait_for

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

    replicas_follow_a_window(first)

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


def replicas_follow_a_window(first) -> None:
    """The copies of the jobs added in one event-loop pass go to a few nodes (the
    cron tick's window: REPLJOBs to a peer go out in one write, taken in one
    wake-up), and over ticks they spread over the cluster."""
    client = first.client()
    ticks_before = int(client.info("timers")["cron_ticks"])
    pipe = client.pipeline(transaction=False)
    for i in range(100):  # ASYNC: one pass takes them all (a sync ADDJOB waits its copies)
        pipe.execute_command("ADDJOB", "burst", f"j{i}", 5000, "REPLICATE", 3, "ASYNC")
    ids = pipe.execute()
    windows = int(client.info("timers")["cron_ticks"]) - ticks_before + 1
    holders = {n for jid in ids for n in first.show(jid)[b"nodes-delivered"]}
    # One window of 4 a cron tick the burst spans (all 24 others, drawn per job).
    others = len(holders - {first.call("HELLO")[1]})
    assert 3 <= others <= 4 * windows, (others, windows)
    spread: set[bytes] = set()

    def add_one() -> bool:
        jid = client.execute_command("ADDJOB", "spread", "x", 5000, "REPLICATE", 3)
        spread.update(first.show(jid)[b"nodes-delivered"])
        return len(spread) > SIZE // 2

    wait_for(add_one, timeout=20, interval=0.01, message="copies spread over ticks")
