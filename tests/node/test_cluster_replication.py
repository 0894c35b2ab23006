"""Replication: sync and async ADDJOB, NOREPL, retries towards a node that comes back,
delivery after N-1 of the N owners died."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
import redis

from testkit.nodes import as_dict, messages_received, wait_for


def owners(node, jid: bytes) -> set[bytes]:
    show = node.call("SHOW", jid)
    return set(as_dict(show)[b"nodes-delivered"])


def test_sync_replication_reaches_every_requested_node(cluster3):
    a, b, c = cluster3
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3")
    ids = set(cluster3.node_ids())
    for node in cluster3:  # synchronous: every copy exists when ADDJOB returns
        assert owners(node, jid) == ids
    assert a.call("QLEN", "q") == 1
    assert b.call("QLEN", "q") == 0 and c.call("QLEN", "q") == 0


def test_default_replicate_is_min_of_three_and_cluster_size(start_cluster):
    cluster = start_cluster(2)
    jid = cluster[0].call("ADDJOB", "q", "body", "5000")
    assert as_dict(cluster[0].call("SHOW", jid))[b"repl"] == 2


def test_async_replication_returns_at_once_and_replicates_in_background(cluster3):
    a, b, c = cluster3
    jid = a.call("ADDJOB", "q", "body", "0", "REPLICATE", "3", "ASYNC")
    assert a.call("QLEN", "q") == 1
    wait_for(lambda: b.call("SHOW", jid) and c.call("SHOW", jid), 5, message="async copies")


def test_norepl_when_too_few_nodes(cluster3):
    with pytest.raises(redis.ResponseError, match="NOREPL Not enough reachable nodes"):
        cluster3[0].call("ADDJOB", "q", "body", "1000", "REPLICATE", "4")


def test_norepl_when_nodes_unreachable(cluster3):
    a, b, c = cluster3
    b.kill()
    c.kill()
    wait_for(
        lambda: "cluster_reachable_nodes:0" in a.call("CLUSTER", "INFO").decode(),
        15,
        message="peers seen as unreachable",
    )
    with pytest.raises(redis.ResponseError, match="NOREPL"):
        a.call("ADDJOB", "q", "body", "1000", "REPLICATE", "2")
    assert a.call("QLEN", "q") == 0


def test_norepl_on_timeout_cleans_up_partial_copies(cluster3):
    a, b, c = cluster3
    c.pause()  # reachable for a while still: REPLJOB is sent but never confirmed
    try:
        with pytest.raises(redis.ResponseError, match="NOREPL Timeout reached"):
            a.call("ADDJOB", "q", "body", "300", "REPLICATE", "3")
        assert a.call("JSCAN", "0", "BUSYLOOP")[1] == []
        wait_for(lambda: b.call("JSCAN", "0", "BUSYLOOP")[1] == [], 5, message="cleanup on b")
    finally:
        c.resume()


@contextlib.contextmanager
def addjob_waiting_for(a, c, queue: str) -> Iterator[dict]:
    """ADDJOB REPLICATE 3 on a, in a thread, blocked while c is paused; on leaving, c
    is resumed and the thread joined (``result["id"]``: the reply it got)."""
    c.pause()
    result: dict = {}

    def add() -> None:
        with a.client(socket_timeout=30) as cl:
            result["id"] = cl.execute_command("ADDJOB", queue, "body", "20000", "REPLICATE", "3")

    thread = threading.Thread(target=add)
    thread.start()
    try:
        wait_for(
            lambda: a.info("clients")["blocked_clients"] == 1,
            5,
            message="ADDJOB waiting for replication",
        )
        yield result
    finally:
        c.resume()
        thread.join(30)


def test_repljob_retried_towards_a_node_that_comes_back(cluster3):
    a, b, c = cluster3
    with addjob_waiting_for(a, c, "q") as result:
        pass
    assert "id" in result
    assert c.call("SHOW", result["id"]) is not None


def test_a_job_flushed_while_it_replicates_is_not_queued_when_its_copies_come(cluster3):
    """DEBUG FLUSHALL forgets every job at once, one still waiting for its copies too:
    the copies confirmed afterwards reply to the client but queue nothing here (it
    would be a queued job the node does not know: Jobs.flushes)."""
    a, b, c = cluster3
    with addjob_waiting_for(a, c, "fq") as result:
        assert a.call("DEBUG", "FLUSHALL") == b"OK"
    assert "id" in result and c.call("SHOW", result["id"]) is not None
    assert a.call("QLEN", "fq") == 0
    assert a.call("SHOW", result["id"]) is None
    assert int(a.info("jobs")["registered_jobs"]) == 0


def test_one_gotjob_confirms_every_copy_taken_in_one_pass(cluster3):
    """A paused replica finds 60 REPLJOBs waiting: it confirms them all in one GOTJOB
    (far fewer messages than jobs reach the origin), and every ADDJOB returns."""
    a, b, c = cluster3
    jobs = 60
    ids: list[bytes] = []

    def add() -> None:
        with a.client(socket_timeout=30) as cl:
            ids.append(cl.execute_command("ADDJOB", "q", "body", "20000", "REPLICATE", "3"))

    b.pause()
    threads = [threading.Thread(target=add) for _ in range(jobs)]
    try:
        for t in threads:
            t.start()
        wait_for(
            lambda: a.info("clients")["blocked_clients"] == jobs,
            10,
            message="every ADDJOB waiting for the paused replica",
        )
        before = messages_received(a)
    finally:
        b.resume()
    for t in threads:
        t.join(30)
    assert len(ids) == jobs
    # Without batching, b alone would send one GOTJOB per job; the rest is gossip.
    assert messages_received(a) - before < jobs // 2
    for jid in ids:
        assert owners(b, jid) == set(cluster3.node_ids())


def add_async_pipelined(node, jobs: int) -> list[bytes]:
    """ADDJOB ... REPLICATE 3 ASYNC, `jobs` times in one pipeline: the job IDs."""
    with node.client() as cl:
        pipe = cl.pipeline(transaction=False)
        for i in range(jobs):
            pipe.execute_command("ADDJOB", "q", f"job{i}", "0", "REPLICATE", "3", "ASYNC")
        return pipe.execute()


def test_jobs_added_in_one_pass_are_replicated_in_one_message(cluster3):
    """60 pipelined ADDJOB ... ASYNC: one read, one event-loop pass, so each other
    node gets them all in one REPLJOB."""
    a, b, _ = cluster3
    before = messages_received(b)
    ids = add_async_pipelined(a, 60)
    wait_for(lambda: all(b.call("SHOW", jid) for jid in ids), 10, message="copies on b")
    assert messages_received(b) - before < len(ids) // 2


def test_a_thousand_jobs_replicated_at_once_all_arrive(cluster3):
    """1,000 pipelined ADDJOB ... ASYNC are 12,000 REPLJOB fields for each other node:
    several messages (a batch closes at BATCH_MAX_PARTS, and the pipeline takes more
    than one read), every job in one of them."""
    a, b, _ = cluster3
    before = messages_received(b)
    ids = add_async_pipelined(a, 1000)
    wait_for(lambda: b.call("SHOW", ids[-1]) is not None, 10, message="copies on b")
    assert sum(1 for jid in ids if b.call("SHOW", jid)) == 1000
    assert 3 <= messages_received(b) - before < 500


def test_job_with_replicate_n_survives_n_minus_1_killed_owners(start_cluster):
    cluster = start_cluster(3)
    a, b, c = cluster
    jid = a.call("ADDJOB", "q", "body", "5000", "REPLICATE", "3", "RETRY", "1")
    a.kill()
    b.kill()
    # c re-queues it after RETRY (its WILLQUEUE finds no other owner alive).
    got = wait_for(
        lambda: c.call("GETJOB", "NOHANG", "FROM", "q"),
        20,
        message="job delivered by the surviving owner",
    )
    assert got[0][1] == jid
