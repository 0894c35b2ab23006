"""Re-queue in a cluster: only when not acked, once, not for RETRY 0; WORKING; NACK."""

from __future__ import annotations

import time

from testkit.nodes import wait_for


def total_queued(cluster, queue: str = "q") -> int:
    return sum(n.call("QLEN", queue) for n in cluster)


def test_no_requeue_without_faults(cluster3):
    a = cluster3[0]
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3", "RETRY", "1")
    time.sleep(2.5)  # several retry periods: the queued copy holds, nobody re-queues
    assert total_queued(cluster3) == 1
    assert all(n.show(jid)[b"additional-deliveries"] == 0 for n in cluster3)


def test_requeue_when_not_acked_happens_on_one_node(cluster3):
    a = cluster3[0]
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3", "RETRY", "1")
    assert a.call("GETJOB", "FROM", "q")[0][1] == jid
    wait_for(lambda: total_queued(cluster3) == 1, 10, message="re-queue")
    time.sleep(0.5)
    assert total_queued(cluster3) == 1  # one node, not all
    holder = next(n for n in cluster3 if n.call("QLEN", "q") == 1)
    assert holder.show(jid)[b"additional-deliveries"] >= 1


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
        assert b.call("WORKING", jid) == 2  # from a replica: every owner postpones
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
    wait_for(
        lambda: b.show(jid)[b"nacks"] == 1 and c.show(jid)[b"nacks"] == 1,
        5,
        message="NACK counted by the other owners",
    )


def test_replicas_of_a_delayed_job_wait_delay_plus_retry(cluster3):
    a = cluster3[0]
    jid = a.call("ADDJOB", "dq", "body", "0", "DELAY", "5", "RETRY", "60", "REPLICATE", "3")
    assert 4000 < a.show(jid)[b"next-requeue-within"] <= 5000
    for replica in cluster3[1:]:
        fields = replica.show(jid)
        assert fields[b"state"] == b"active"
        # As Disque: DELAY + RETRY (+ jitter) from the REPLJOB, not the origin's queue time.
        assert 64_000 < fields[b"next-requeue-within"] <= 65_600, fields
        # It wakes 500 ms before, to send WILLQUEUE (its owners' copies are news to it).
        assert fields[b"next-awake-within"] <= fields[b"next-requeue-within"] - 400
        assert fields[b"additional-deliveries"] == 0 and fields[b"nacks"] == 0


def test_only_the_origin_queues_a_delayed_job_when_the_delay_ends(start_cluster):
    cluster = start_cluster(4)
    origin = cluster[1]
    jid = origin.call("ADDJOB", "dq", "body", "0", "DELAY", "1", "RETRY", "60")
    wait_for(lambda: origin.call("QLEN", "dq") == 1, 3, message="the delayed job queued")
    assert sum(n.call("QLEN", "dq") for n in cluster) == 1
    assert origin.show(jid)[b"additional-deliveries"] == 0
    for replica in (n for n in cluster if n is not origin and n.call("SHOW", jid)):
        assert replica.show(jid)[b"state"] == b"active"
        assert replica.show(jid)[b"next-requeue-within"] > 55_000
