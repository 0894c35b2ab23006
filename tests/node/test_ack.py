"""ACKJOB, FASTACK, DELJOB, WORKING and NACK on a single node."""

from __future__ import annotations

import time

import pytest
import redis

from testkit.calls import addjob_id as addjob
from testkit.calls import show
from testkit.conformance import Conn
from testkit.nodes import wait_for

UNKNOWN_ALO = "D-00000000-000000000000000000000000-0001"  # well formed, at-least-once
UNKNOWN_AMO = "D-00000000-000000000000000000000000-0000"  # well formed, at-most-once
BADID = ("-", "BADID Invalid Job ID format.")
NOJOB = ("-", "NOJOB Job not known in the context of this node.")
TOOLATE = (
    "-",
    "TOOLATE Half of job TTL already elapsed, you are no longer allowed "
    "to postpone the next delivery.",
)


def deliver(client: redis.Redis, queue: str) -> str:
    return client.execute_command("GETJOB", "NOHANG", "FROM", queue)[0][1].decode()


# ---- ACKJOB ---------------------------------------------------------------------


def test_ackjob_delivered_job_removes_it(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    deliver(client, "q")
    assert client.execute_command("ACKJOB", jid) == 1
    assert show(client, jid) is None
    assert client.info("jobs")["registered_jobs"] == 0


def test_ackjob_twice_returns_zero(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    assert client.execute_command("ACKJOB", jid) == 1
    assert client.execute_command("ACKJOB", jid) == 0


def test_ackjob_queued_job_removes_it_from_queue(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    assert client.execute_command("ACKJOB", jid) == 1
    assert client.execute_command("QLEN", "q") == 0
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "q") is None
    assert show(client, jid) is None


def test_ackjob_several_ids_counts_known_ones(client: redis.Redis) -> None:
    ids = [addjob(client, "q", str(i)) for i in range(3)]
    assert client.execute_command("ACKJOB", *ids, UNKNOWN_ALO) == 3
    assert all(show(client, j) is None for j in ids)


def test_ackjob_unknown_id_returns_zero(raw: Conn) -> None:
    assert raw.call("ACKJOB", UNKNOWN_ALO) == (":", 0)
    assert raw.call("ACKJOB", UNKNOWN_AMO) == (":", 0)


def test_ackjob_bad_id(raw: Conn) -> None:
    assert raw.call("ACKJOB", "notajobid") == BADID


def test_ackjob_with_one_bad_id_acks_nothing(client: redis.Redis, raw: Conn) -> None:
    jid = addjob(client, "q", "x")
    assert raw.call("ACKJOB", jid, "notajobid") == BADID
    assert show(client, jid) is not None
    assert client.execute_command("QLEN", "q") == 1


def test_ackjob_at_most_once_job(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 0)
    deliver(client, "q")
    assert client.execute_command("ACKJOB", jid) == 1
    assert show(client, jid) is None


@pytest.mark.parametrize("cmd", ["ACKJOB", "FASTACK", "DELJOB", "NACK", "ENQUEUE", "DEQUEUE"])
def test_job_id_list_commands_accept_no_ids(raw: Conn, cmd: str) -> None:
    # arity -1 in the reference command table: nothing to do, zero jobs
    assert raw.call(cmd) == (":", 0)


# ---- FASTACK --------------------------------------------------------------------


def test_fastack_removes_job(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    deliver(client, "q")
    assert client.execute_command("FASTACK", jid) == 1
    assert show(client, jid) is None
    assert client.execute_command("FASTACK", jid) == 0


def test_fastack_queued_job_leaves_queue(client: redis.Redis) -> None:
    ids = [addjob(client, "q", str(i)) for i in range(3)]
    assert client.execute_command("FASTACK", ids[0], ids[2]) == 2
    assert client.execute_command("QLEN", "q") == 1
    assert client.execute_command("GETJOB", "FROM", "q")[0][1].decode() == ids[1]


def test_fastack_unknown_and_bad(raw: Conn) -> None:
    assert raw.call("FASTACK", UNKNOWN_ALO) == (":", 0)
    assert raw.call("FASTACK", "notajobid") == BADID


# ---- DELJOB ---------------------------------------------------------------------


def test_deljob_removes_job_once(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 0)
    assert client.execute_command("DELJOB", jid) == 1
    assert client.execute_command("DELJOB", jid) == 0
    assert show(client, jid) is None
    assert client.execute_command("QLEN", "q") == 0


def test_deljob_several(client: redis.Redis) -> None:
    ids = [addjob(client, "q", str(i)) for i in range(4)]
    deliver(client, "q")
    assert client.execute_command("DELJOB", *ids) == 4
    assert client.info("jobs")["registered_jobs"] == 0


def test_deljob_bad_id(raw: Conn) -> None:
    assert raw.call("DELJOB", "notajobid") == BADID
    assert raw.call("DELJOB", UNKNOWN_ALO) == (":", 0)


# ---- WORKING --------------------------------------------------------------------


def test_working_returns_retry(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    deliver(client, "q")
    assert client.execute_command("WORKING", jid) == 300


def test_working_returns_explicit_retry(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 42)
    deliver(client, "q")
    assert client.execute_command("WORKING", jid) == 42


def test_working_postpones_requeue(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "RETRY", 30)
    deliver(client, "q")
    time.sleep(1.2)
    before = show(client, jid)["next-requeue-within"]
    assert before <= 29_500
    assert client.execute_command("WORKING", jid) == 30
    after = show(client, jid)["next-requeue-within"]
    assert after > before
    assert 29_000 <= after <= 31_000


def test_working_unknown_job(raw: Conn) -> None:
    assert raw.call("WORKING", UNKNOWN_ALO) == NOJOB


def test_working_after_ack(client: redis.Redis, raw: Conn) -> None:
    jid = addjob(client, "q", "x")
    client.execute_command("ACKJOB", jid)
    t, msg = raw.call("WORKING", jid)
    assert t == "-"


def test_working_bad_id(raw: Conn) -> None:
    assert raw.call("WORKING", "notajobid") == BADID


def test_working_arity(raw: Conn) -> None:
    assert raw.call("WORKING") == ("-", "ERR wrong number of arguments for 'working' command")


@pytest.mark.timeout(30)
def test_working_too_late_after_half_ttl(client: redis.Redis, raw: Conn) -> None:
    t0 = time.monotonic()
    jid = addjob(client, "q", "x", "TTL", 4)
    assert raw.call("WORKING", jid) == (":", 1)  # default RETRY: TTL/10, at least 1
    wait_for(
        lambda: raw.call("WORKING", jid) == TOOLATE, 5, interval=0.05, message="WORKING -> TOOLATE"
    )
    # half of the TTL (the reference counts the TTL in whole seconds)
    assert time.monotonic() - t0 >= 1.4


# ---- NACK -----------------------------------------------------------------------


def test_nack_requeues_and_counts(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    deliver(client, "q")
    assert client.execute_command("NACK", jid) == 1
    job = show(client, jid)
    assert job["state"] == b"queued"
    assert job["nacks"] == 1
    assert job["additional-deliveries"] == 0
    assert client.execute_command("QLEN", "q") == 1


def test_nack_twice_counts_twice(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    for _ in range(2):
        deliver(client, "q")
        assert client.execute_command("NACK", jid) == 1
    assert show(client, jid)["nacks"] == 2


def test_nack_job_goes_back_to_queue_head(client: redis.Redis) -> None:
    first = addjob(client, "q", "first")
    deliver(client, "q")
    addjob(client, "q", "second")
    client.execute_command("NACK", first)
    # ordering is by creation time: the nacked job is older
    assert deliver(client, "q") == first


def test_nack_queued_job_is_a_noop(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    assert client.execute_command("NACK", jid) == 0
    assert show(client, jid)["nacks"] == 0
    assert client.execute_command("QLEN", "q") == 1


def test_nack_unknown_and_bad(raw: Conn) -> None:
    assert raw.call("NACK", UNKNOWN_ALO) == (":", 0)
    assert raw.call("NACK", "notajobid") == BADID
