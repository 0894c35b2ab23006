"""ADDJOB: job IDs, options, defaults and errors on a single node."""

from __future__ import annotations

import re
import time

import pytest
import redis

from testkit.calls import addjob_id as addjob
from testkit.calls import show
from testkit.conformance import JOBID, SHOW_KEYS, Conn


def encoded_ttl(jid: str) -> int:
    return int(jid[-4:], 16)


# ---- the reply and the job ID ---------------------------------------------


def test_addjob_replies_job_id_as_status(raw: Conn) -> None:
    t, jid = raw.call("ADDJOB", "q", "body", "0")
    assert t == "+"
    assert len(jid) == 40
    assert JOBID.fullmatch(jid)


def test_job_id_starts_with_node_id_prefix(client: redis.Redis) -> None:
    myid = client.execute_command("CLUSTER", "MYID").decode()
    assert re.fullmatch(r"[0-9a-f]{40}", myid)
    jid = addjob(client, "q", "x")
    assert jid[2:10] == myid[:8]


def test_job_ids_are_unique(client: redis.Redis) -> None:
    with client.pipeline(transaction=False) as p:
        for i in range(500):
            p.execute_command("ADDJOB", "q", f"b{i}", 0)
        ids = p.execute()
    assert len({bytes(i) for i in ids}) == 500
    assert all(JOBID.fullmatch(i.decode()) for i in ids)


def test_default_ttl_encoded_as_odd_minutes(client: redis.Redis) -> None:
    assert addjob(client, "q", "x").endswith("-05a1")


def test_retry_zero_ttl_encoded_as_even_minutes(client: redis.Redis) -> None:
    assert addjob(client, "q", "x", "REPLICATE", 1, "RETRY", 0).endswith("-05a0")


@pytest.mark.parametrize("ttl", [60, 180, 600, 3600, 7200, 59])
def test_encoded_ttl_parity_and_value(client: redis.Redis, ttl: int) -> None:
    minutes = ttl // 60
    alo = encoded_ttl(addjob(client, "q", "x", "TTL", ttl))
    amo = encoded_ttl(addjob(client, "q", "x", "TTL", ttl, "RETRY", 0))
    assert alo % 2 == 1 and abs(alo - minutes) <= 1
    assert amo % 2 == 0 and abs(amo - minutes) <= 1


def test_recorded_id_suffix_for_ttl_600(client: redis.Redis) -> None:
    # recording: ADDJOB q1 body2 5000 REPLICATE 1 RETRY 30 TTL 600 -> ...-000b
    jid = client.execute_command(
        "ADDJOB", "q1", "body2", 5000, "REPLICATE", 1, "RETRY", 30, "TTL", 600
    ).decode()
    assert jid.endswith("-000b")


# ---- SHOW of a new job ----------------------------------------------------


def test_show_new_job_fields_in_recorded_order(client: redis.Redis) -> None:
    jid = addjob(client, "q1", "body1")
    flat = client.execute_command("SHOW", jid)
    assert len(flat) == 30
    assert [k.decode() for k in flat[0::2]] == SHOW_KEYS


def test_show_new_job_defaults(client: redis.Redis) -> None:
    myid = client.execute_command("CLUSTER", "MYID")
    jid = addjob(client, "q1", "body1")
    job = show(client, jid)
    assert job["id"] == jid.encode()
    assert job["queue"] == b"q1"
    assert job["state"] == b"queued"
    assert job["repl"] == 1
    assert job["ttl"] == 86400
    assert job["delay"] == 0
    assert job["retry"] == 300
    assert job["nacks"] == 0
    assert job["additional-deliveries"] == 0
    assert job["nodes-delivered"] == [myid]
    assert job["nodes-confirmed"] == []
    assert 295_000 <= job["next-requeue-within"] <= 301_000
    assert job["body"] == b"body1"


def test_show_ctime_is_nanosecond_like_and_increasing(client: redis.Redis) -> None:
    before_ms = int(time.time() * 1000)
    ctimes = [show(client, addjob(client, "q", str(i)))["ctime"] for i in range(20)]
    after_ms = int(time.time() * 1000)
    assert ctimes == sorted(ctimes) and len(set(ctimes)) == 20
    for c in ctimes:
        assert before_ms - 2000 <= c // 1_000_000 <= after_ms + 2000


def test_explicit_retry_and_ttl_are_shown(client: redis.Redis) -> None:
    job = show(client, addjob(client, "q", "x", "RETRY", 30, "TTL", 600))
    assert job["retry"] == 30
    assert job["ttl"] == 600
    assert 29_000 <= job["next-requeue-within"] <= 31_000


@pytest.mark.parametrize(
    ("ttl", "retry"), [(100, 10), (5, 1), (3600, 300), (1000, 100), (86400, 300)]
)
def test_default_retry_is_tenth_of_ttl_capped_at_300(
    client: redis.Redis, ttl: int, retry: int
) -> None:
    assert show(client, addjob(client, "q", "x", "TTL", ttl))["retry"] == retry


def test_retry_zero_has_no_requeue_time(client: redis.Redis) -> None:
    job = show(client, addjob(client, "q", "x", "REPLICATE", 1, "RETRY", 0))
    assert job["retry"] == 0
    assert job["next-requeue-within"] is None
    assert job["state"] == b"queued"


def test_retry_zero_without_replicate_on_single_node(client: redis.Redis) -> None:
    # default REPLICATE is the cluster size (1) here, so RETRY 0 alone is fine
    jid = addjob(client, "q", "x", "RETRY", 0)
    assert show(client, jid)["repl"] == 1


def test_delay_job_is_active_not_queued(client: redis.Redis) -> None:
    jid = addjob(client, "q1", "body4", "DELAY", 100)
    job = show(client, jid)
    assert job["state"] == b"active"
    assert job["delay"] == 100
    assert client.execute_command("QLEN", "q1") == 0


def test_options_are_case_insensitive(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "replicate", 1, "retry", 7, "ttl", 70, "maxlen", 5, "async")
    job = show(client, jid)
    assert (job["retry"], job["ttl"]) == (7, 70)


def test_async_job_is_queued(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x", "ASYNC")
    assert show(client, jid)["state"] == b"queued"
    assert client.execute_command("QLEN", "q") == 1


def test_empty_body(client: redis.Redis) -> None:
    jid = addjob(client, "q", b"")
    assert show(client, jid)["body"] == b""
    assert client.execute_command("GETJOB", "FROM", "q") == [[b"q", jid.encode(), b""]]


def test_large_body_round_trip(client: redis.Redis) -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    jid = addjob(client, "q", body)
    assert show(client, jid)["body"] == body
    assert client.execute_command("GETJOB", "FROM", "q")[0][2] == body


def test_addjob_increments_qlen_and_registered_jobs(client: redis.Redis) -> None:
    for i in range(5):
        addjob(client, "qq", str(i))
    assert client.execute_command("QLEN", "qq") == 5
    assert client.info("jobs")["registered_jobs"] == 5


def test_sync_timeout_argument_accepted(client: redis.Redis) -> None:
    jid = client.execute_command("ADDJOB", "q", "x", 5000).decode()
    assert JOBID.fullmatch(jid)


# ---- MAXLEN ----------------------------------------------------------------


def test_maxlen_refuses_when_queue_is_long_enough(raw: Conn) -> None:
    assert raw.call("ADDJOB", "qmax", "a", "0", "MAXLEN", "2")[0] == "+"
    assert raw.call("ADDJOB", "qmax", "b", "0", "MAXLEN", "2")[0] == "+"
    assert raw.call("ADDJOB", "qmax", "c", "0", "MAXLEN", "2") == (
        "-",
        "MAXLEN Queue is already longer than the specified MAXLEN count",
    )
    assert raw.call("QLEN", "qmax") == (":", 2)
    # without MAXLEN the queue still accepts jobs
    assert raw.call("ADDJOB", "qmax", "d", "0")[0] == "+"


def test_maxlen_zero_is_an_error(raw: Conn) -> None:
    assert raw.call("ADDJOB", "q", "x", "0", "MAXLEN", "0") == (
        "-",
        "ERR MAXLEN must be a positive number",
    )


# ---- errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["REPLICATE", "3"],
            "NOREPL Not enough reachable nodes for the requested replication level",
        ),
        (
            ["REPLICATE", "10"],
            "NOREPL Not enough reachable nodes for the requested replication level",
        ),
        (
            ["ASYNC", "REPLICATE", "2"],
            "NOREPL Not enough reachable nodes for the requested replication level",
        ),
        (
            ["REPLICATE", "2", "RETRY", "0"],
            "ERR With RETRY set to 0 please explicitly set  REPLICATE to 1 (at-most-once delivery)",
        ),
        (
            ["DELAY", "100", "TTL", "50"],
            "ERR The specified DELAY is greater than TTL. Job refused since would never be delivered",
        ),
        (["TTL", "-5"], "ERR TTL must be a number > 0"),
        (["TTL", "0"], "ERR TTL must be a number > 0"),
        (["REPLICATE", "0"], "ERR REPLICATE must be between 1 and 65535"),
        (["REPLICATE", "65536"], "ERR REPLICATE must be between 1 and 65535"),
        (["RETRY", "-1"], "ERR RETRY time must be a non negative number"),
        (["DELAY", "-1"], "ERR DELAY time must be a non negative number"),
        (["MAXLEN", "-3"], "ERR MAXLEN must be a positive number"),
        (["FOO"], "ERR syntax error"),
        (["RETRY"], "ERR syntax error"),
        (["TTL"], "ERR syntax error"),
    ],
)
def test_addjob_option_errors(raw: Conn, args: list[str], error: str) -> None:
    assert raw.call("ADDJOB", "q1", "x", "0", *args) == ("-", error)
    assert raw.call("QLEN", "q1") == (":", 0)


def test_addjob_timeout_not_a_number(raw: Conn) -> None:
    assert raw.call("ADDJOB", "q1", "x", "notanumber") == (
        "-",
        "ERR timeout is not an integer or out of range",
    )


@pytest.mark.parametrize("opt", ["REPLICATE", "DELAY", "RETRY", "TTL", "MAXLEN"])
def test_addjob_non_numeric_option_value(raw: Conn, opt: str) -> None:
    t, msg = raw.call("ADDJOB", "q1", "x", "0", opt, "abc")
    assert t == "-" and msg.startswith("ERR")
    assert raw.call("QLEN", "q1") == (":", 0)


@pytest.mark.parametrize("args", [["ADDJOB"], ["ADDJOB", "q1"], ["ADDJOB", "q1", "x"]])
def test_addjob_wrong_arity(raw: Conn, args: list[str]) -> None:
    assert raw.call(*args) == ("-", "ERR wrong number of arguments for 'addjob' command")


def test_addjob_on_queue_paused_in_input(raw: Conn) -> None:
    assert raw.call("PAUSE", "pq", "in") == ("+", "in")
    assert raw.call("ADDJOB", "pq", "x", "0") == ("-", "PAUSED Queue paused in input, try later")
    assert raw.call("PAUSE", "pq", "none") == ("+", "none")
    assert raw.call("ADDJOB", "pq", "x", "0")[0] == "+"


def test_addjob_allowed_on_queue_paused_in_output(raw: Conn) -> None:
    assert raw.call("PAUSE", "pq", "out") == ("+", "out")
    assert raw.call("ADDJOB", "pq", "x", "0")[0] == "+"
    assert raw.call("QLEN", "pq") == (":", 1)
