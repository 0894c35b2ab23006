"""Job life on a single node: DELAY, RETRY re-queues, TTL expiry, queue eviction."""

from __future__ import annotations

import time

import pytest
import redis

from testkit.calls import addjob, show
from testkit.conformance import Conn, encode, pairs
from testkit.nodes import wait_for

pytestmark = pytest.mark.timeout(40)


def qlen(client: redis.Redis, queue: str) -> int:
    return client.execute_command("QLEN", queue)


# ---- DELAY ------------------------------------------------------------------------


def test_delayed_job_is_queued_after_the_delay(client: redis.Redis) -> None:
    t0 = time.monotonic()
    jid = addjob(client, "q", "x", "DELAY", 1)
    assert qlen(client, "q") == 0
    assert show(client, jid)["state"] == b"active"
    wait_for(lambda: qlen(client, "q") == 1, 5, message="delayed job queued")
    assert time.monotonic() - t0 >= 0.8
    assert show(client, jid)["state"] == b"queued"
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "q")[0][1] == jid


def test_delayed_job_not_counted_as_additional_delivery(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "DELAY", 1)
    wait_for(lambda: qlen(client, "q") == 1, 5, message="delayed job queued")
    job = show(client, jid)
    assert (job["nacks"], job["additional-deliveries"]) == (0, 0)


def test_blocked_getjob_receives_delayed_job(node, client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "DELAY", 1)
    t0 = time.monotonic()
    with node.client(socket_timeout=10) as c:
        reply = c.execute_command("GETJOB", "TIMEOUT", 5000, "FROM", "q")
    assert reply == [[b"q", jid, b"x"]]
    assert 0.8 <= time.monotonic() - t0 < 4.5


# ---- RETRY ------------------------------------------------------------------------


def test_unacked_job_is_requeued_after_retry(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 1)
    t0 = time.monotonic()
    assert client.execute_command("GETJOB", "FROM", "q")[0][1] == jid
    assert qlen(client, "q") == 0
    wait_for(lambda: qlen(client, "q") == 1, 5, message="job re-queued")
    assert time.monotonic() - t0 >= 0.4
    job = show(client, jid)
    assert job["state"] == b"queued"
    assert job["additional-deliveries"] == 1
    assert job["nacks"] == 0


def test_requeued_job_counters_with_withcounters(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 1)
    client.execute_command("GETJOB", "FROM", "q")
    wait_for(lambda: qlen(client, "q") == 1, 5, message="job re-queued")
    job = client.execute_command("GETJOB", "WITHCOUNTERS", "FROM", "q")[0]
    assert job[1] == jid
    assert pairs(job[3:]) == {"nacks": 0, "additional-deliveries": 1}


def test_job_requeued_repeatedly_until_acked(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 1)
    for n in (1, 2):
        client.execute_command("GETJOB", "FROM", "q")
        wait_for(lambda: qlen(client, "q") == 1, 5, message=f"re-queue #{n}")
        assert show(client, jid)["additional-deliveries"] == n
    client.execute_command("GETJOB", "FROM", "q")
    assert client.execute_command("ACKJOB", jid) == 1
    assert show(client, jid) is None


def test_acked_job_is_not_requeued(client: redis.Redis) -> None:
    control = addjob(client, "q", "control", "RETRY", 1)
    acked = addjob(client, "q", "acked", "RETRY", 1)
    client.execute_command("GETJOB", "COUNT", 2, "FROM", "q")
    client.execute_command("ACKJOB", acked)
    wait_for(lambda: qlen(client, "q") >= 1, 5, message="control job re-queued")
    time.sleep(0.5)
    assert client.execute_command("QPEEK", "q", 10) == [[b"q", control, b"control"]]


def test_retry_zero_job_is_never_requeued(client: redis.Redis) -> None:
    once = addjob(client, "q", "once", "REPLICATE", 1, "RETRY", 0, "TTL", 30)
    control = addjob(client, "q", "control", "RETRY", 1, "TTL", 30)
    got = client.execute_command("GETJOB", "COUNT", 2, "FROM", "q")
    assert [j[1] for j in got] == [once, control]
    wait_for(lambda: qlen(client, "q") >= 1, 5, message="control job re-queued")
    time.sleep(1.0)
    assert client.execute_command("QPEEK", "q", 10) == [[b"q", control, b"control"]]
    job = show(client, once)
    assert job["state"] == b"active"
    assert job["additional-deliveries"] == 0
    assert job["next-requeue-within"] is None


def test_working_delays_the_requeue(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 3)
    t0 = time.monotonic()
    client.execute_command("GETJOB", "FROM", "q")
    for at in (1.0, 2.0):
        time.sleep(max(0.0, t0 + at - time.monotonic()))
        assert client.execute_command("WORKING", jid) == 3
    # without WORKING the job would be queued again by t0 + 3.5 s (+ timer slack)
    time.sleep(max(0.0, t0 + 3.9 - time.monotonic()))
    assert qlen(client, "q") == 0
    wait_for(lambda: qlen(client, "q") == 1, 5, message="re-queue after WORKING stopped")
    assert time.monotonic() - t0 >= 4.4


def test_dequeued_job_comes_back_after_retry(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 1)
    assert client.execute_command("DEQUEUE", jid) == 1
    wait_for(lambda: qlen(client, "q") == 1, 5, message="dequeued job re-queued")


def test_requeue_wakes_blocked_client(node, client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 1)
    client.execute_command("GETJOB", "FROM", "q")
    with node.client(socket_timeout=10) as c:
        reply = c.execute_command("GETJOB", "TIMEOUT", 5000, "FROM", "q")
    assert reply == [[b"q", jid, b"x"]]


def test_paused_in_queue_does_not_requeue(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 1)
    client.execute_command("GETJOB", "FROM", "q")
    client.execute_command("PAUSE", "q", "in")
    time.sleep(2.0)
    assert qlen(client, "q") == 0
    assert show(client, jid)["state"] == b"active"
    client.execute_command("PAUSE", "q", "none")
    wait_for(lambda: qlen(client, "q") == 1, 5, message="re-queue after un-pause")


# ---- TTL ------------------------------------------------------------------------


def test_queued_job_expires_after_ttl(client: redis.Redis) -> None:
    t0 = time.monotonic()
    jid = addjob(client, "q", "x", "TTL", 2)
    assert show(client, jid) is not None
    wait_for(lambda: show(client, jid) is None, 6, interval=0.05, message="job expired")
    # the reference keeps expire times in whole seconds: 1-2 s for TTL 2
    assert time.monotonic() - t0 >= 0.9
    assert qlen(client, "q") == 0
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "q") is None
    assert client.info("jobs")["registered_jobs"] == 0


def test_active_job_expires_after_ttl(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "TTL", 2, "RETRY", 0)
    client.execute_command("GETJOB", "FROM", "q")
    wait_for(lambda: show(client, jid) is None, 6, interval=0.05, message="job expired")


def test_delayed_job_expires_if_ttl_elapses(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "TTL", 2, "DELAY", 1)
    wait_for(lambda: show(client, jid) is None, 6, interval=0.05, message="job expired")


def test_jobs_with_long_ttl_survive(client: redis.Redis) -> None:
    keep = addjob(client, "q", "keep", "TTL", 60)
    gone = addjob(client, "q", "gone", "TTL", 1)
    wait_for(lambda: show(client, gone) is None, 5, message="short job expired")
    assert show(client, keep)["state"] == b"queued"
    assert qlen(client, "q") == 1


def test_ttl_countdown_in_show(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "TTL", 30)
    assert 29 <= show(client, jid)["ttl"] <= 30
    wait_for(lambda: show(client, jid)["ttl"] <= 28, 5, interval=0.1, message="ttl counts down")


# ---- queue eviction -----------------------------------------------------------------
# Disque evicts empty queues without blocked clients after an idle time (this
# project: the startup directive queue-max-idle-time, in seconds).


@pytest.fixture
def gc_client(start_node):
    node = start_node(config={"queue-max-idle-time": "1"})
    with node.client() as c:
        yield c


def test_empty_idle_queue_is_evicted(gc_client: redis.Redis) -> None:
    c = gc_client
    jid = addjob(c, "gone", "x")
    c.execute_command("GETJOB", "FROM", "gone")
    c.execute_command("ACKJOB", jid)
    assert c.execute_command("QSTAT", "gone") is not None
    wait_for(
        lambda: c.execute_command("QSTAT", "gone") is None,
        15,
        interval=0.2,
        message="empty queue evicted",
    )
    _, names = c.execute_command("QSCAN", "BUSYLOOP")
    assert b"gone" not in names
    assert c.info("queues")["registered_queues"] == 0


def test_non_empty_paused_and_waited_on_queues_are_not_evicted(start_node) -> None:
    node = start_node(config={"queue-max-idle-time": "1"})
    c = node.client()
    jid = addjob(c, "gone", "x")
    c.execute_command("ACKJOB", jid)
    addjob(c, "full", "x")
    pj = addjob(c, "paused", "x")
    c.execute_command("PAUSE", "paused", "out")
    c.execute_command("ACKJOB", pj)
    waiter = Conn(node.port)
    try:
        waiter.send(encode(["GETJOB", "FROM", "waited"]))
        wait_for(
            lambda: c.execute_command("QSTAT", "gone") is None,
            15,
            interval=0.2,
            message="empty queue evicted",
        )
        time.sleep(1.5)
        assert pairs(c.execute_command("QSTAT", "full"))["len"] == 1
        st = pairs(c.execute_command("QSTAT", "paused"))
        assert st is not None and st["pause"] == b"out"
        assert c.execute_command("PAUSE", "paused", "state") == b"out"
        assert pairs(c.execute_command("QSTAT", "waited"))["blocked"] == 1
    finally:
        waiter.close()
        c.close()


def test_evicted_queue_is_recreated_on_demand(gc_client: redis.Redis) -> None:
    c = gc_client
    c.execute_command("ACKJOB", addjob(c, "again", "x"))
    wait_for(
        lambda: c.execute_command("QSTAT", "again") is None,
        15,
        interval=0.2,
        message="empty queue evicted",
    )
    jid = addjob(c, "again", "y")
    assert pairs(c.execute_command("QSTAT", "again"))["len"] == 1
    assert c.execute_command("GETJOB", "FROM", "again") == [[b"again", jid, b"y"]]
