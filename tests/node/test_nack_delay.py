"""NACK id ... DELAY seconds (beyond Disque): a retry backoff.

The job is queued again after the delay, on one node, as a NACK's re-queue;
the other owners hold their copies until then. Plain NACK is Disque's.
"""

from __future__ import annotations

import time

import pytest
import redis

from testkit.nodes import wait_for


def delivered_job(node, queue: str = "q", *options) -> bytes:
    node.call("ADDJOB", queue, "body", 0, *options)
    [[_, jid, _]] = node.call("GETJOB", "NOHANG", "FROM", queue)
    return jid


def test_nack_delay_queues_the_job_after_the_delay(node):
    jid = delivered_job(node, "q", "RETRY", 60)
    start = time.monotonic()
    assert node.call("NACK", jid, "DELAY", 1) == 1
    assert node.call("QLEN", "q") == 0
    assert node.show(jid)[b"state"] == b"active"
    wait_for(lambda: node.call("QLEN", "q") == 1, timeout=10, message="the job queued again")
    assert time.monotonic() - start >= 1.0
    job = node.show(jid)
    assert (job[b"state"], job[b"nacks"], job[b"additional-deliveries"]) == (b"queued", 1, 0)


def test_plain_nack_and_delay_zero_queue_at_once(node):
    for args in ([], ["DELAY", "0"]):
        jid = delivered_job(node, "q")
        assert node.call("NACK", jid, *args) == 1
        assert node.call("QLEN", "q") == 1
        assert node.show(jid)[b"nacks"] == 1
        node.call("ACKJOB", jid)


def test_nack_delay_counts_what_it_delayed(node):
    a = delivered_job(node, "q")
    b = delivered_job(node, "q")
    node.call("ADDJOB", "q", "body", 0)  # queued, not delivered: not NACKed
    [queued] = node.call("QPEEK", "q", 1)
    unknown = b"D-00000000-" + a[11:]
    assert node.call("NACK", a, b, queued[1], unknown, "DELAY", 30) == 2
    assert node.call("QLEN", "q") == 1


def test_nack_delay_errors(node):
    jid = delivered_job(node, "q")
    for bad in ("-1", "soon", "1.5"):
        with pytest.raises(redis.ResponseError, match="DELAY time must be a non negative"):
            node.call("NACK", jid, "DELAY", bad)
    with pytest.raises(redis.ResponseError, match="BADID"):
        node.call("NACK", "not-an-id", "DELAY", 1)
    assert node.show(jid)[b"nacks"] == 0


def test_enqueue_cancels_a_pending_nack_delay(node):
    jid = delivered_job(node, "q", "RETRY", 60)
    node.call("NACK", jid, "DELAY", 30)
    assert node.call("ENQUEUE", jid) == 1
    assert node.show(jid)[b"nacks"] == 0


def queued_on(cluster, queue: str) -> list[int]:
    return [n.call("QLEN", queue) for n in cluster]


def test_nack_delay_in_a_cluster(cluster3):
    """RETRY 2, DELAY 4: without the delay reaching the other owners they would
    queue their copies after 2 s."""
    first = cluster3[0]
    jid = first.call("ADDJOB", "q", "body", 0, "REPLICATE", 3, "RETRY", 2)
    [[_, got, _]] = first.call("GETJOB", "NOHANG", "FROM", "q")
    assert got == jid
    start = time.monotonic()
    assert first.call("NACK", jid, "DELAY", 4) == 1
    while time.monotonic() - start < 3.8:
        assert queued_on(cluster3, "q") == [0, 0, 0], "a copy queued before the delay"
        time.sleep(0.05)
    wait_for(
        lambda: sum(queued_on(cluster3, "q")) == 1,
        timeout=10,
        message="the job queued again after the delay",
    )
    assert time.monotonic() - start >= 4.0
    time.sleep(1.5)  # past every owner's own timer: still queued on one node only
    assert sorted(queued_on(cluster3, "q")) == [0, 0, 1]
    wait_for(
        lambda: all(n.show(jid)[b"nacks"] == 1 for n in cluster3),
        timeout=5,
        message="every owner counting the NACK once",
    )
    assert all(n.show(jid)[b"additional-deliveries"] == 0 for n in cluster3)


def test_other_owners_stand_in_when_the_nacking_node_dies(cluster3):
    first = cluster3[0]
    jid = first.call("ADDJOB", "q", "body", 0, "REPLICATE", 3, "RETRY", 1)
    first.call("GETJOB", "NOHANG", "FROM", "q")
    start = time.monotonic()
    assert first.call("NACK", jid, "DELAY", 3) == 1
    wait_for(lambda: cluster3[1].show(jid) and cluster3[2].show(jid), timeout=5)
    first.kill()
    survivors = cluster3.nodes[1:]
    wait_for(
        lambda: sum(queued_on(survivors, "q")) >= 1,
        timeout=15,
        message="a surviving owner queueing the job",
    )
    assert time.monotonic() - start >= 3.0
