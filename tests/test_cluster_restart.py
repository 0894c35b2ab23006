"""Restarts as a Disque cluster lives them: the node restarted with its
nodes.conf counts its peers as reachable at once (they are unflagged, as in
Disque), and a synchronous ADDJOB waits within its timeout for the links."""

from __future__ import annotations

import random
from pathlib import Path

from nodes import ClusterOfNodes, Node, as_dict, wait_for

NODE_TIMEOUT = {"cluster-node-timeout": "3000"}


def cluster_with_config_files(tmp_path: Path, start_node, n: int) -> ClusterOfNodes:
    """n nodes, each started from its own config file (so CONFIG REWRITE has one)."""
    nodes = []
    for i in range(n):
        conf = tmp_path / f"disque{i}.conf"
        conf.write_text("# restart test\n")
        nodes.append(start_node(config=NODE_TIMEOUT, args=[str(conf)]))
    cluster = ClusterOfNodes(nodes)
    cluster.meet_chain()
    cluster.wait_full_mesh(30)
    return cluster


def holders(cluster: ClusterOfNodes, jid: bytes) -> list[dict]:
    return [
        as_dict(show)
        for n in cluster
        if n.is_running()
        if (show := n.call("SHOW", jid)) is not None
    ]


def test_addjob_right_after_a_kill_9_restart_replicates(start_cluster):
    cluster = start_cluster(7, config=NODE_TIMEOUT)
    first = cluster[0]
    first.kill()
    first.start()  # returns as soon as it answers PING
    jid = first.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3", "RETRY", "5")
    assert jid.startswith(b"D-")
    assert len(holders(cluster, jid)) >= 3


def test_every_job_comes_back_after_five_mass_restarts(tmp_path, start_node):
    cluster = cluster_with_config_files(tmp_path, start_node, 7)
    for node in cluster:
        assert node.call("CONFIG", "SET", "appendonly", "yes") == b"OK"
        assert node.call("CONFIG", "REWRITE") == b"OK"
    for node in cluster:  # the AOF is written from the first rewrite on
        wait_for(
            lambda n=node: n.info("persistence")["aof_state"] == "on",
            10,
            message="the AOF rewrite that CONFIG SET appendonly started",
        )
    rng = random.Random(14)
    jid = cluster[0].call("ADDJOB", "q", "job0", "5000", "REPLICATE", "3", "RETRY", "1")
    for cycle in range(1, 6):
        for node in cluster:
            node.kill()
        for node in cluster:
            node.start()

        def queued_on(jid: bytes = jid) -> list[Node]:
            return [n for n in cluster if (as_dict(n.call("SHOW", jid)).get(b"state") == b"queued")]

        where = wait_for(queued_on, 30, message=f"the job of cycle {cycle} queued again")
        assert len(where) == 1, f"cycle {cycle}: queued on {len(where)} nodes"
        got = where[0].call("GETJOB", "NOHANG", "FROM", "q")
        assert got and got[0][1] == jid, f"cycle {cycle}: {got!r} is not {jid!r}"
        assert where[0].call("ACKJOB", jid) == 1
        jid = rng.choice(cluster.nodes).call(
            "ADDJOB", "q", f"job{cycle}", "5000", "REPLICATE", "3", "RETRY", "1"
        )
        assert jid.startswith(b"D-")
