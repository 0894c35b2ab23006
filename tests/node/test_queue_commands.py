"""QLEN, QSTAT, QPEEK, ENQUEUE, DEQUEUE and PAUSE on a single node."""

from __future__ import annotations

import pytest
import redis

from testkit.calls import addjob, qstat, show
from testkit.conformance import Conn
from testkit.nodes import wait_for

QSTAT_KEYS = [
    "name",
    "len",
    "age",
    "idle",
    "blocked",
    "import-from",
    "import-rate",
    "jobs-in",
    "jobs-out",
    "pause",
]
BADID = ("-", "BADID Invalid Job ID format.")
UNKNOWN_ALO = "D-00000000-000000000000000000000000-0001"


# ---- QLEN -------------------------------------------------------------------------


def test_qlen_counts_queued_jobs(client: redis.Redis) -> None:
    assert client.execute_command("QLEN", "q") == 0
    for i in range(3):
        addjob(client, "q", str(i))
    assert client.execute_command("QLEN", "q") == 3
    client.execute_command("GETJOB", "FROM", "q")
    assert client.execute_command("QLEN", "q") == 2


def test_qlen_ignores_delayed_jobs(client: redis.Redis) -> None:
    addjob(client, "q", "later", "DELAY", 100)
    assert client.execute_command("QLEN", "q") == 0


def test_qlen_arity(raw: Conn) -> None:
    assert raw.call("QLEN") == ("-", "ERR wrong number of arguments for 'qlen' command")


# ---- QSTAT ------------------------------------------------------------------------


def test_qstat_unknown_queue_is_null(client: redis.Redis) -> None:
    assert client.execute_command("QSTAT", "nosuchqueue") is None


def test_qstat_fields_in_recorded_order(client: redis.Redis) -> None:
    addjob(client, "q1", "x")
    flat = client.execute_command("QSTAT", "q1")
    assert [k.decode() for k in flat[0::2]] == QSTAT_KEYS


def test_qstat_values(client: redis.Redis) -> None:
    for i in range(4):
        addjob(client, "q1", str(i))
    client.execute_command("GETJOB", "COUNT", 3, "FROM", "q1")
    st = qstat(client, "q1")
    assert st["name"] == b"q1"
    assert st["len"] == 1
    assert st["blocked"] == 0
    assert st["import-from"] == []
    assert st["import-rate"] == 0
    assert st["jobs-in"] == 4
    assert st["jobs-out"] == 3
    assert st["pause"] == b"none"
    assert 0 <= st["age"] <= 2
    assert 0 <= st["idle"] <= 2


def test_qstat_jobs_in_counts_requeues(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    client.execute_command("GETJOB", "FROM", "q")
    client.execute_command("NACK", jid)
    client.execute_command("GETJOB", "FROM", "q")
    st = qstat(client, "q")
    assert (st["jobs-in"], st["jobs-out"]) == (2, 2)


@pytest.mark.timeout(20)
def test_qstat_age_grows(client: redis.Redis) -> None:
    addjob(client, "q", "x")
    wait_for(lambda: qstat(client, "q")["age"] >= 1, 5, interval=0.1, message="age >= 1")


@pytest.mark.parametrize("state", ["in", "out", "all"])
def test_qstat_shows_pause_state(client: redis.Redis, state: str) -> None:
    addjob(client, "q", "x")
    client.execute_command("PAUSE", "q", state)
    assert qstat(client, "q")["pause"] == state.encode()


# ---- QPEEK ------------------------------------------------------------------------


@pytest.fixture
def five(client: redis.Redis) -> list[bytes]:
    return [addjob(client, "q", f"b{i}") for i in range(5)]


def test_qpeek_positive_oldest_first(client: redis.Redis, five: list[bytes]) -> None:
    assert client.execute_command("QPEEK", "q", 2) == [
        [b"q", five[0], b"b0"],
        [b"q", five[1], b"b1"],
    ]


def test_qpeek_negative_newest_first(client: redis.Redis, five: list[bytes]) -> None:
    assert client.execute_command("QPEEK", "q", -2) == [
        [b"q", five[4], b"b4"],
        [b"q", five[3], b"b3"],
    ]


def test_qpeek_more_than_length(client: redis.Redis, five: list[bytes]) -> None:
    assert [j[1] for j in client.execute_command("QPEEK", "q", 100)] == five
    assert [j[1] for j in client.execute_command("QPEEK", "q", -100)] == five[::-1]


def test_qpeek_zero_and_unknown_queue(client: redis.Redis, five: list[bytes]) -> None:
    assert client.execute_command("QPEEK", "q", 0) == []
    assert client.execute_command("QPEEK", "nosuchqueue", 1) == []


def test_qpeek_does_not_consume(client: redis.Redis, five: list[bytes]) -> None:
    client.execute_command("QPEEK", "q", 5)
    assert client.execute_command("QLEN", "q") == 5
    assert show(client, five[0])["state"] == b"queued"
    assert client.execute_command("GETJOB", "FROM", "q")[0][1] == five[0]


def test_qpeek_skips_delivered_jobs(client: redis.Redis, five: list[bytes]) -> None:
    client.execute_command("GETJOB", "COUNT", 2, "FROM", "q")
    assert [j[1] for j in client.execute_command("QPEEK", "q", 10)] == five[2:]


def test_qpeek_bad_count(raw: Conn) -> None:
    t, msg = raw.call("QPEEK", "q", "abc")
    assert t == "-" and msg.startswith("ERR")


def test_qpeek_arity(raw: Conn) -> None:
    assert raw.call("QPEEK", "q") == ("-", "ERR wrong number of arguments for 'qpeek' command")


# ---- DEQUEUE / ENQUEUE ---------------------------------------------------------


def test_dequeue_makes_job_active(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    assert client.execute_command("DEQUEUE", jid) == 1
    assert show(client, jid)["state"] == b"active"
    assert client.execute_command("QLEN", "q") == 0
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "q") is None


def test_dequeue_active_job_returns_zero(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    client.execute_command("GETJOB", "FROM", "q")
    assert client.execute_command("DEQUEUE", jid) == 0


def test_dequeue_counts_several(client: redis.Redis) -> None:
    ids = [addjob(client, "q", str(i)) for i in range(3)]
    assert client.execute_command("DEQUEUE", *ids, UNKNOWN_ALO) == 3
    assert client.execute_command("QLEN", "q") == 0


def test_enqueue_puts_active_job_back(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    client.execute_command("GETJOB", "FROM", "q")
    assert client.execute_command("ENQUEUE", jid) == 1
    assert show(client, jid)["state"] == b"queued"
    assert client.execute_command("GETJOB", "FROM", "q")[0][1] == jid


def test_enqueue_counts_additional_delivery_not_nack(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    client.execute_command("GETJOB", "FROM", "q")
    client.execute_command("ENQUEUE", jid)
    job = show(client, jid)
    assert job["nacks"] == 0
    assert job["additional-deliveries"] == 1


def test_enqueue_already_queued_returns_zero(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    assert client.execute_command("ENQUEUE", jid) == 0
    assert client.execute_command("QLEN", "q") == 1


def test_enqueue_after_dequeue(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    assert client.execute_command("DEQUEUE", jid) == 1
    assert client.execute_command("ENQUEUE", jid) == 1
    assert client.execute_command("QLEN", "q") == 1


def test_enqueue_dequeue_unknown_and_bad_ids(raw: Conn) -> None:
    assert raw.call("ENQUEUE", UNKNOWN_ALO) == (":", 0)
    assert raw.call("DEQUEUE", UNKNOWN_ALO) == (":", 0)
    assert raw.call("ENQUEUE", UNKNOWN_ALO, "notajobid") == BADID
    assert raw.call("DEQUEUE", "notajobid") == BADID


def test_enqueue_with_bad_id_enqueues_nothing(client: redis.Redis, raw: Conn) -> None:
    jid = addjob(client, "q", "x")
    client.execute_command("DEQUEUE", jid)
    assert raw.call("ENQUEUE", jid, "notajobid") == BADID
    assert client.execute_command("QLEN", "q") == 0


# ---- PAUSE ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("opts", "state"),
    [
        (["state"], "none"),
        (["in"], "in"),
        (["out"], "out"),
        (["all"], "all"),
        (["in", "out"], "all"),
        (["none"], "none"),
        (["all", "none"], "none"),
        (["in", "bcast"], "in"),
        (["none", "bcast"], "none"),
        (["IN"], "in"),
    ],
)
def test_pause_replies_state_after_options(raw: Conn, opts: list[str], state: str) -> None:
    assert raw.call("PAUSE", "pq", *opts) == ("+", state)
    assert raw.call("PAUSE", "pq", "state") == ("+", state)


def test_pause_options_replace_the_state(raw: Conn) -> None:
    # recording: PAUSE s1 in -> +in, then PAUSE s1 out -> +out
    assert raw.call("PAUSE", "pq", "in") == ("+", "in")
    assert raw.call("PAUSE", "pq", "out") == ("+", "out")
    assert raw.call("PAUSE", "pq", "state") == ("+", "out")


def test_pause_state_of_unknown_queue(raw: Conn) -> None:
    assert raw.call("PAUSE", "nosuchq", "state") == ("+", "none")


def test_pause_bad_option(raw: Conn) -> None:
    assert raw.call("PAUSE", "pq", "foo") == ("-", "ERR syntax error")
    assert raw.call("PAUSE", "pq", "state") == ("+", "none")


def test_pause_arity(raw: Conn) -> None:
    assert raw.call("PAUSE", "pq") == ("-", "ERR wrong number of arguments for 'pause' command")


def test_pause_in_refuses_addjob_until_cleared(client: redis.Redis, raw: Conn) -> None:
    raw.call("PAUSE", "pq", "in")
    assert raw.call("ADDJOB", "pq", "x", "0") == ("-", "PAUSED Queue paused in input, try later")
    assert client.execute_command("QLEN", "pq") == 0
    raw.call("PAUSE", "pq", "none")
    assert raw.call("ADDJOB", "pq", "x", "0")[0] == "+"


def test_pause_in_still_delivers(client: redis.Redis) -> None:
    jid = addjob(client, "pq", "x")
    client.execute_command("PAUSE", "pq", "in")
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "pq")[0][1] == jid


def test_pause_out_holds_jobs(client: redis.Redis) -> None:
    jid = addjob(client, "pq", "x")
    client.execute_command("PAUSE", "pq", "out")
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "pq") is None
    client.execute_command("PAUSE", "pq", "none")
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "pq")[0][1] == jid


def test_pause_all_refuses_both_directions(client: redis.Redis, raw: Conn) -> None:
    addjob(client, "pq", "x")
    raw.call("PAUSE", "pq", "all")
    assert raw.call("ADDJOB", "pq", "y", "0")[0] == "-"
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "pq") is None
    assert client.execute_command("QLEN", "pq") == 1
