"""Re-queue in a cluster: only when not acked, once, not for RETRY 0; WORKING; NACK."""

from __future__ import annotations

import time

from nodes import as_dict, wait_for


def show(node, jid: bytes) -> dict:
    reply = node.call("SHOW", jid)
    return as_dict(reply)


def total_queued(cluster, queue: str = "q") -> int:
    return sum(n.call("QLEN", queue) for n in cluster)


def test_no_requeue_without_faults(cluster3):
    a = cluster3[0]
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3", "RETRY", "1")
    time.sleep(2.5)   # several retry periods: the queued copy holds, nobody re-queues
    assert total_queued(cluster3) == 1
    assert all(show(n, jid)[b"additional-deliveries"] == 0 for n in cluster3)


def test_requeue_when_not_acked_happens_on_one_node(cluster3):
    a = cluster3[0]
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3", "RETRY", "1")
    assert a.call("GETJOB", "FROM", "q")[0][1] == jid
    wait_for(lambda: total_queued(cluster3) == 1, 10, message="re-queue")
    time.sleep(0.5)
    assert total_queued(cluster3) == 1          # one node, not all
    holder = next(n for n in cluster3 if n.call("QLEN", "q") == 1)
    assert show(holder, jid)[b"additional-deliveries"] >= 1


def test_retry_zero_never_requeued(start_cluster):
    cluster = start_cluster(2)
    a = cluster[0]
    a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "1", "RETRY", "0", "TTL", "10")
    assert a.call("GETJOB", "FROM", "q")
    time.sleep(2)
    assert total_queued(cluster) == 0


def test_working_prevents_requeue(cluster3):
    a, b, _ = cluster3
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3", "RETRY", "2")
    a.call("GETJOB", "FROM", "q")
    deadline = time.time() + 4
    while time.time() < deadline:
        assert b.call("WORKING", jid) == 2    # from a replica: every owner postpones
        time.sleep(0.5)
        assert total_queued(cluster3) == 0


def test_nack_requeues_at_once_and_counts_everywhere(cluster3):
    a, b, c = cluster3
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3")
    a.call("GETJOB", "FROM", "q")
    assert a.call("NACK", jid) == 1
    assert a.call("QLEN", "q") == 1
    got = a.call("GETJOB", "WITHCOUNTERS", "FROM", "q")[0]
    assert got[3:] == [b"nacks", 1, b"additional-deliveries", 0]
    wait_for(lambda: show(b, jid)[b"nacks"] == 1 and show(c, jid)[b"nacks"] == 1, 5,
             message="NACK counted by the other owners")
