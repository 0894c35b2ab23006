"""Federation (NEEDJOBS/YOURJOBS) and PAUSE broadcast."""

from __future__ import annotations

import random

from testkit.nodes import as_dict, wait_for


def test_hundred_jobs_produced_anywhere_consumed_on_one_node(cluster3):
    produced = set()
    for i in range(100):
        node = random.choice(cluster3.nodes)
        produced.add(node.call("ADDJOB", "fq", f"job-{i}", "5000", "REPLICATE", "1"))
    consumer = cluster3[0]
    consumed = set()
    with consumer.client(socket_timeout=30) as c:
        while len(consumed) < 100:
            reply = c.execute_command("GETJOB", "TIMEOUT", "10000", "COUNT", "10", "FROM", "fq")
            assert reply is not None, f"stalled after {len(consumed)} jobs"
            for _, jid, _ in reply:
                consumed.add(jid)
                c.execute_command("ACKJOB", jid)
    assert consumed == produced
    stat = as_dict(consumer.call("QSTAT", "fq"))
    assert stat[b"jobs-in"] >= 60  # most of them were imported


def test_federation_moves_retry_zero_jobs_without_loss(cluster3):
    a, b, _ = cluster3
    ids = {b.call("ADDJOB", "rz", f"j{i}", "0", "REPLICATE", "1", "RETRY", "0") for i in range(10)}
    got = set()
    while len(got) < 10:
        reply = a.call("GETJOB", "TIMEOUT", "5000", "FROM", "rz")
        assert reply is not None
        got.update(j[1] for j in reply)
    assert got == ids


def moved_job_counters(cluster, replicate: str) -> dict:
    """A job added on node 1 and taken with GETJOB WITHCOUNTERS on node 2, where
    federation moves it; its counters there."""
    a, b, _ = cluster
    jid = a.call("ADDJOB", "moved", "payload", "0", "REPLICATE", replicate, "RETRY", "60")
    reply = b.call("GETJOB", "TIMEOUT", "5000", "WITHCOUNTERS", "FROM", "moved")
    assert reply is not None, "the job did not move to node 2"
    [[_, got, _, *counters]] = reply
    assert got == jid
    return as_dict(counters)


def test_a_moved_job_is_not_counted_as_delivered_again(either_cluster3):
    """YOURJOBS moves the job; the node taking it may hold a copy already
    (REPLICATE 3 on 3 nodes): queueing it there is a move, not a re-queue.
    Disque's receiveYourJobs clears the re-queue flag for every job it brings."""
    for replicate in ("3", "1"):
        counters = moved_job_counters(either_cluster3, replicate)
        assert counters == {b"nacks": 0, b"additional-deliveries": 0}, replicate


def test_consumer_that_drains_a_queue_sees_the_refill_it_caused(cluster3):
    """As in the cluster recording: each GETJOB that empties an importing queue
    asks for more, and the same client's next command runs once it came."""
    a, b, _ = cluster3
    for queue in ("refill1", "refill2", "refill3"):
        for i in range(3):
            b.call("ADDJOB", queue, f"j{i}", "0", "REPLICATE", "1")
        with a.client() as conn:
            pipe = conn.pipeline(transaction=False)  # one write: no time for the bus
            pipe.execute_command("GETJOB", "TIMEOUT", "5000", "FROM", queue)
            pipe.execute_command("GETJOB", "TIMEOUT", "5000", "COUNT", "5", "FROM", queue)
            pipe.execute_command("QLEN", queue)
            first, second, qlen = pipe.execute()
        assert [j[2] for j in first] == [b"j0"]
        assert [j[2] for j in second] == [b"j1"]  # j2 is asked for only when j1 leaves
        assert qlen == 1


def test_qstat_reports_import(cluster3):
    a, b, _ = cluster3
    b_id = b.call("CLUSTER", "MYID")
    b.call("ADDJOB", "iq", "x", "0", "REPLICATE", "1")
    assert a.call("GETJOB", "TIMEOUT", "5000", "FROM", "iq")
    stat = as_dict(a.call("QSTAT", "iq"))
    assert stat[b"import-from"] == [b_id]
    assert stat[b"import-rate"] >= 1


def test_paused_out_queue_is_not_a_federation_source(cluster3):
    a, b, _ = cluster3
    b.call("ADDJOB", "pq", "x", "0", "REPLICATE", "1")
    assert b.call("PAUSE", "pq", "out") == b"out"
    assert a.call("GETJOB", "TIMEOUT", "1500", "FROM", "pq") is None
    b.call("PAUSE", "pq", "none")
    assert a.call("GETJOB", "TIMEOUT", "5000", "FROM", "pq")


def test_pause_bcast_reaches_every_node(cluster3):
    a, b, c = cluster3
    assert a.call("PAUSE", "bq", "in", "bcast") == b"in"
    wait_for(
        lambda: b.call("PAUSE", "bq", "state") == b"in" and c.call("PAUSE", "bq", "state") == b"in",
        5,
        message="PAUSE propagated",
    )
    a.call("PAUSE", "bq", "none", "bcast")
    wait_for(
        lambda: (
            b.call("PAUSE", "bq", "state") == b"none" and c.call("PAUSE", "bq", "state") == b"none"
        ),
        5,
        message="unpause propagated",
    )


def test_queue_paused_in_on_replicas_refuses_replication(cluster3):
    a, b, c = cluster3
    b.call("PAUSE", "rq", "in")
    c.call("PAUSE", "rq", "in")
    import pytest
    import redis

    with pytest.raises(redis.ResponseError, match="NOREPL"):
        a.call("ADDJOB", "rq", "x", "300", "REPLICATE", "2")
