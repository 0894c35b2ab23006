"""Mixed clusters: Disque 1.0-rc1's own nodes and ours on one bus (#39).

Two C nodes and one of ours, then one and two: the full mesh, ADDJOB
REPLICATE 3 on either kind, a job added on one kind delivered and
acknowledged from the other, ACK GC removing every copy, failures detected
by both kinds. Each needs a built C Disque (``reference_binary``: skipped,
saying so, where there is none).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.nodes import (
    ClusterOfNodes,
    Node,
    ReferenceNode,
    as_dict,
    job_with_second_owner,
    replicates_to_all,
    wait_for,
)

TIMEOUT = {"cluster-node-timeout": "1500"}


def mixed_nodes(tmp_path: Path, binary: str, c_count: int, total: int = 3) -> list[Node]:
    return [
        ReferenceNode(tmp_path / f"c{i}", binary, dict(TIMEOUT))
        if i < c_count
        else Node(tmp_path / f"ours{i}", config=dict(TIMEOUT))
        for i in range(total)
    ]


def is_c(node: Node) -> bool:
    return isinstance(node, ReferenceNode)


@pytest.fixture(params=[2, 1], ids=["2C+1", "1C+2"])
def mixed3(request: pytest.FixtureRequest, tmp_path: Path, reference_binary: str) -> Iterator:
    nodes = mixed_nodes(tmp_path, reference_binary, request.param)
    with ClusterOfNodes.running(nodes) as cluster:
        for node in cluster:
            wait_for(lambda n=node: replicates_to_all(n, 3), message=f"{node} replicates")
        yield cluster


def kinds(cluster: ClusterOfNodes) -> tuple[list[Node], list[Node]]:
    return [n for n in cluster if is_c(n)], [n for n in cluster if not is_c(n)]


def holders(cluster: ClusterOfNodes, jid: bytes) -> list[Node]:
    return [n for n in cluster if n.is_running() and n.call("SHOW", jid) is not None]


def test_a_mixed_cluster_is_a_full_mesh_with_every_node_known(mixed3: ClusterOfNodes) -> None:
    ids = set(mixed3.node_ids())
    for node in mixed3:
        lines = node.call("CLUSTER", "NODES").decode().splitlines()
        assert {line.split()[0].encode() for line in lines} == ids
        assert all("connected" in line and "handshake" not in line for line in lines)
        hello = node.call("HELLO")
        assert {entry[0] for entry in hello[2:]} == ids


def test_replicate_3_on_either_kind_puts_a_copy_on_every_node(mixed3: ClusterOfNodes) -> None:
    for node in mixed3:
        jid = node.call("ADDJOB", "mixed", b"from %d" % node.port, "0", "REPLICATE", "3")
        assert len(holders(mixed3, jid)) == 3
        for holder in mixed3:
            show = as_dict(holder.call("SHOW", jid))
            assert show[b"body"] == b"from %d" % node.port
            assert len(show[b"nodes-delivered"]) == 3


@pytest.mark.parametrize("direction", ["C->ours", "ours->C"])
def test_a_job_added_on_one_kind_is_delivered_and_acked_from_the_other(
    mixed3: ClusterOfNodes, direction: str
) -> None:
    c_nodes, ours = kinds(mixed3)
    producer, consumer = (c_nodes[0], ours[0]) if direction == "C->ours" else (ours[0], c_nodes[0])
    queue = f"q-{direction}"
    jid = producer.call("ADDJOB", queue, "payload", "0", "REPLICATE", "2", "RETRY", "30")
    # The consumer may hold no copy: GETJOB then imports it (NEEDJOBS, YOURJOBS).
    reply = consumer.call("GETJOB", "TIMEOUT", "10000", "FROM", queue)
    assert reply is not None and reply[0][1] == jid and reply[0][2] == b"payload"
    assert consumer.call("ACKJOB", jid) == 1
    wait_for(lambda: not holders(mixed3, jid), message="every copy collected (ACK GC)")
    for node in mixed3:
        assert int(node.info("jobs")["registered_jobs"]) == 0


def test_ack_gc_from_either_kind_removes_every_copy(mixed3: ClusterOfNodes) -> None:
    added = []
    for node in mixed3:
        for _ in range(5):
            added.append(node.call("ADDJOB", "gc", "x", "0", "REPLICATE", "3", "RETRY", "30"))
    for i, jid in enumerate(added):  # each acked on another node than its origin
        acker = mixed3[(i // 5 + 1) % 3]
        assert acker.call("ACKJOB", jid) == 1
    wait_for(
        lambda: all(int(n.info("jobs")["registered_jobs"]) == 0 for n in mixed3),
        message="every copy of 15 jobs collected",
    )


def test_a_killed_node_of_either_kind_is_seen_failing_by_both_kinds(
    tmp_path: Path, reference_binary: str
) -> None:
    """Four nodes, two of each kind: one of each killed in turn, both kinds flag it
    (FAIL: a majority of the four agrees), and see it back once restarted."""
    nodes = mixed_nodes(tmp_path, reference_binary, c_count=2, total=4)
    with ClusterOfNodes.running(nodes) as cluster:
        c_victim, c_watcher, our_victim, our_watcher = cluster
        for victim, watchers in (
            (our_victim, [c_victim, c_watcher, our_watcher]),
            (c_victim, [c_watcher, our_watcher]),
        ):
            victim.kill()
            for watcher in watchers:
                wait_for(
                    lambda w=watcher, v=victim: "fail" in cluster.flags_of(w, v),
                    timeout=20,
                    message=f"{watcher} flags {victim} fail",
                )
            victim.start()
            cluster.wait_full_mesh()


def test_a_killed_c_node_restarted_is_reachable_again_for_ours(mixed3: ClusterOfNodes) -> None:
    c_nodes, ours = kinds(mixed3)
    c_nodes[0].kill()
    wait_for(lambda: "fail" in mixed3.flags_of(ours[0], c_nodes[0]), timeout=20, message="fail")
    c_nodes[0].start()
    mixed3.wait_full_mesh()
    wait_for(lambda: replicates_to_all(ours[0], 3), message="REPLICATE 3 from ours again")


def test_pause_bcast_from_either_kind_reaches_every_node(mixed3: ClusterOfNodes) -> None:
    """PAUSE ... bcast: the PAUSE message both ways; QSTAT shows it on every node."""
    for i, node in enumerate(mixed3):
        queue = f"paused{i}"
        node.call("ADDJOB", queue, "x", "0")  # the queue exists where PAUSE is given
        assert node.call("PAUSE", queue, "out", "bcast") == b"out"

        def paused_everywhere(queue: str = queue) -> bool:
            return all(as_dict(n.call("QSTAT", queue)).get(b"pause") == b"out" for n in mixed3)

        wait_for(paused_everywhere, message=f"{queue} paused on every node (from {node})")


def test_a_leaving_node_of_either_kind_is_seen_leaving_by_both(mixed3: ClusterOfNodes) -> None:
    c_nodes, ours = kinds(mixed3)
    for leaving in (c_nodes[0], ours[0]):
        assert leaving.call("CLUSTER", "LEAVING", "yes") == b"OK"
        for watcher in mixed3:
            if watcher is not leaving:
                wait_for(
                    lambda w=watcher, n=leaving: "leaving" in mixed3.flags_of(w, n),
                    message=f"{watcher} sees {leaving} leaving",
                )
        assert leaving.call("CLUSTER", "LEAVING", "no") == b"OK"


def test_a_copy_moved_through_a_c_node_is_collected_when_acked_elsewhere(
    tmp_path: Path, reference_binary: str
) -> None:
    """A job on A (C) goes by YOURJOBS to L (C), then from L to N (ours), where it
    is acknowledged. Disque lists neither the node a job moves to nor the one it
    comes from (receiveNeedJobs, receiveYourJobs), so L, which keeps its copy
    (active, queued again after RETRY), is in no list: N adds the sender, so the
    ACK's SETACK and DELJOB reach it. Without that, L's copy came back every
    RETRY, delivered again each time, and a leaving L never drained
    (test_rolling_upgrade's leave, once in CI)."""
    nodes = mixed_nodes(tmp_path, reference_binary, 2)
    with ClusterOfNodes.running(nodes) as cluster:
        for node in cluster:
            wait_for(lambda n=node: replicates_to_all(n, 3), message=f"{node} replicates")
        a, moved_through, n = nodes
        jid = a.call("ADDJOB", "moved", "body", "0", "REPLICATE", "1", "RETRY", "30")
        [[_, got, _]] = moved_through.call("GETJOB", "TIMEOUT", "10000", "FROM", "moved")
        assert got == jid  # imported from A (NEEDJOBS, YOURJOBS)
        # L answers no NEEDJOBS while it imports for the queue itself (Disque's rule).
        wait_for(lambda: as_dict(moved_through.call("QSTAT", "moved"))[b"import-rate"] == 0, 10)
        assert moved_through.call("ENQUEUE", jid) == 1  # L's copy queued again, to move on
        [[_, got, _]] = n.call("GETJOB", "TIMEOUT", "10000", "FROM", "moved")
        assert got == jid  # imported from L
        delivered = as_dict(n.call("SHOW", jid))[b"nodes-delivered"]
        assert moved_through.call("CLUSTER", "MYID") in delivered
        assert n.call("ACKJOB", jid) == 1
        for node in nodes:
            wait_for(lambda node=node: node.call("SHOW", jid) is None, 10, message=f"{node}")


def test_a_stray_copy_between_c_nodes_is_acked_by_an_owner_of_ours_that_collected_it(
    tmp_path: Path, reference_binary: str
) -> None:
    """A job added on A (C) with a copy on N (ours) goes by YOURJOBS to L (C): L's
    copy is on no list (Disque's receiveYourJobs adds no node), so when the job is
    acknowledged on N and collected, nothing reaches L, whose copy comes back at
    each RETRY to be delivered again, for good (test_rolling_upgrade's leave, which
    waited for it, twice). L's WILLQUEUE still goes to the owners it knows: N
    remembers that it collected the job, and answers SETACK."""
    nodes = mixed_nodes(tmp_path, reference_binary, 2)
    with ClusterOfNodes.running(nodes) as cluster:
        for node in cluster:
            wait_for(lambda n=node: replicates_to_all(n, 3), message=f"{node} replicates")
        a, stray, n = nodes
        jid, queue = job_with_second_owner(a, n, retry=2)
        [[_, got, _]] = stray.call("GETJOB", "TIMEOUT", "10000", "FROM", queue)
        assert got == jid  # moved from A (NEEDJOBS, YOURJOBS)
        assert (
            stray.call("CLUSTER", "MYID")
            not in as_dict(stray.call("SHOW", jid))[b"nodes-delivered"]
        )
        assert n.call("ACKJOB", jid) == 1
        for node in (n, a):
            wait_for(lambda node=node: node.call("SHOW", jid) is None, 10, message=f"{node}")
        wait_for(lambda: stray.call("SHOW", jid) is None, 15, message="the stray copy gone")
