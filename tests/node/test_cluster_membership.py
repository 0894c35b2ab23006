"""Cluster membership: MEET, gossip discovery, failure detection, restart, FORGET, RESET."""

from __future__ import annotations

import time

import pytest

from testkit.nodes import messages_received, wait_for


def test_an_idle_trio_exchanges_fewer_messages_than_disque(cluster3):
    """Each node probes one of its 2 peers every half node timeout (a cluster this
    small: detector.protocol_period), and answers theirs: about 2.7 messages a
    second at timeout 1500 ms. Disque's schedule (each end pings the other, and a
    random node every second) brings it about 7 messages a second."""
    node = cluster3[0]
    before, t0 = messages_received(node), time.monotonic()
    time.sleep(3)
    per_second = (messages_received(node) - before) / (time.monotonic() - t0)
    assert 1 <= per_second <= 4, f"{per_second:.1f} bus messages a second"


def test_chain_of_meets_discovers_full_mesh_of_five(start_cluster):
    cluster = start_cluster(5, mesh=False)
    cluster.meet_chain()
    cluster.wait_full_mesh()
    ids = cluster.node_ids()
    assert len(set(ids)) == 5
    assert all(len(i) == 40 for i in ids)
    for node in cluster:
        hello = node.call("HELLO")
        assert hello[0] == 1
        assert {entry[0] for entry in hello[2:]} == set(ids)
        assert all(entry[3] == b"1" for entry in hello[2:])


def test_cluster_nodes_lists_flags_and_addresses(cluster3):
    lines = cluster3[0].call("CLUSTER", "NODES").decode().splitlines()
    assert len(lines) == 3
    myself = [line for line in lines if "myself" in line.split()[2]]
    assert len(myself) == 1
    for line in lines:
        fields = line.split()
        assert len(fields) == 6
        assert fields[1].startswith("127.0.0.1:")
        assert fields[5] == "connected"


def test_node_paused_becomes_fail_then_recovers(cluster3):
    a, b, c = cluster3
    c.pause()
    try:
        wait_for(lambda: "fail" in cluster3.flags_of(a, c), 15, message="FAIL flag on a")
        wait_for(lambda: "fail" in cluster3.flags_of(b, c), 15, message="FAIL flag on b")
        hello = {e[2]: e[3] for e in a.call("HELLO")[2:]}
        assert hello[str(c.port).encode()] == b"10"
    finally:
        c.resume()
    wait_for(lambda: not cluster3.flags_of(a, c) & {"fail", "pfail"}, 15, message="flags cleared")


def test_killed_node_restarts_and_rejoins_with_same_id(cluster3):
    a, b, c = cluster3
    old_id = c.call("CLUSTER", "MYID")
    c.kill()
    wait_for(lambda: cluster3.flags_of(a, c) & {"pfail", "fail"}, 15, message="failure seen")
    c.start()
    assert c.call("CLUSTER", "MYID") == old_id
    cluster3.wait_full_mesh()
    jid = c.call("ADDJOB", "q", "x", "5000", "REPLICATE", "3")
    assert len(a.call("SHOW", jid)) == 30


def test_forget_removes_node_and_gossip_does_not_bring_it_back(cluster3):
    a, b, c = cluster3
    c_id = c.call("CLUSTER", "MYID")
    c.terminate()
    for node in (a, b):
        assert node.call("CLUSTER", "FORGET", c_id) == b"OK"
    for node in (a, b):
        nodes = node.call("CLUSTER", "NODES").decode()
        assert c_id.decode() not in nodes
    info = a.call("CLUSTER", "INFO").decode()
    assert "cluster_known_nodes:2" in info


def test_forget_errors(cluster3):
    a = cluster3[0]
    with pytest.raises(Exception, match="can't forget myself"):
        a.call("CLUSTER", "FORGET", a.call("CLUSTER", "MYID"))
    with pytest.raises(Exception, match="Unknown node"):
        a.call("CLUSTER", "FORGET", "0" * 40)


def test_reset_hard_gives_new_id_and_forgets_everything(cluster3):
    a = cluster3[0]
    old = a.call("CLUSTER", "MYID")
    a.call("ADDJOB", "q", "x", "0", "REPLICATE", "1")
    assert a.call("CLUSTER", "RESET", "HARD") == b"OK"
    assert a.call("CLUSTER", "MYID") != old
    assert a.call("QLEN", "q") == 0
    assert "cluster_known_nodes:1" in a.call("CLUSTER", "INFO").decode()


def test_reset_soft_keeps_id(cluster3):
    a = cluster3[0]
    old = a.call("CLUSTER", "MYID")
    assert a.call("CLUSTER", "RESET", "SOFT") == b"OK"
    assert a.call("CLUSTER", "MYID") == old


def test_forgotten_live_node_is_not_relearned_from_gossip(cluster3):
    a, b, c = cluster3
    c_id = c.call("CLUSTER", "MYID")
    assert a.call("CLUSTER", "FORGET", c_id) == b"OK"
    # b still knows c and gossips about it; c still pings a. For the blacklist
    # period a must not learn c again.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert c_id.decode() not in a.call("CLUSTER", "NODES").decode()
        time.sleep(0.2)
    assert c_id.decode() in b.call("CLUSTER", "NODES").decode()
