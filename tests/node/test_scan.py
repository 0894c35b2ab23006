"""JSCAN and QSCAN: cursors, options, filters and guarantees under concurrent changes."""

from __future__ import annotations

import random

import pytest
import redis

from testkit.conformance import SHOW_KEYS, Conn, pairs


def add_many(client: redis.Redis, n: int, queue: str | None = None, *opts: object) -> list[bytes]:
    with client.pipeline(transaction=False) as p:
        for i in range(n):
            p.execute_command("ADDJOB", queue or f"q{i % 7}", f"body{i}", 0, *opts)
        return p.execute()


def scan_all(
    client: redis.Redis, cmd: str, *opts: object, count: int | None = 10, max_calls: int = 100_000
) -> list[bytes]:
    """Iterate a cursor to the end; return everything it produced (with duplicates)."""
    seen: list = []
    cursor = b"0"
    extra = ("COUNT", count) if count is not None else ()
    for _ in range(max_calls):
        cursor, items = client.execute_command(cmd, cursor, *extra, *opts)
        seen.extend(items)
        if cursor == b"0":
            return seen
    raise AssertionError("cursor never returned to 0")


# ---- JSCAN ------------------------------------------------------------------------


def test_jscan_empty(client: redis.Redis) -> None:
    assert client.execute_command("JSCAN") == [b"0", []]


def test_jscan_ids_are_status_replies(client: redis.Redis, raw: Conn) -> None:
    ids = {i.decode() for i in add_many(client, 3)}
    t, (cursor, items) = raw.call("JSCAN", "0", "BUSYLOOP")
    assert t == "*" and cursor == ("$", "0")
    assert items[0] == "*"
    assert {x for x in items[1]} == {("+", i) for i in ids}


def test_jscan_without_cursor_and_busyloop(client: redis.Redis) -> None:
    ids = set(add_many(client, 5))
    for args in (
        ["JSCAN"],
        ["JSCAN", "0", "COUNT", "100"],
        ["JSCAN", "BUSYLOOP"],
        ["JSCAN", "0", "BUSYLOOP"],
        ["JSCAN", "BUSYLOOP", "0"],
    ):
        cursor, items = client.execute_command(*args)
        if "BUSYLOOP" in args:
            assert cursor == b"0"
            assert set(items) == ids, args
        else:
            assert set(items) <= ids


def test_jscan_busyloop_returns_everything_at_once(client: redis.Redis) -> None:
    ids = add_many(client, 1000)
    cursor, items = client.execute_command("JSCAN", "0", "BUSYLOOP", "COUNT", 5)
    assert cursor == b"0"
    assert set(items) == set(ids)


@pytest.mark.timeout(60)
def test_jscan_cursor_iteration_returns_all_jobs(client: redis.Redis) -> None:
    ids = add_many(client, 2000)
    seen = scan_all(client, "JSCAN", count=10)
    assert set(seen) == set(ids)


@pytest.mark.timeout(60)
def test_jscan_cursor_iteration_with_concurrent_deletes_and_adds(client: redis.Redis) -> None:
    rng = random.Random(7)
    ids = add_many(client, 2000)
    deleted: set[bytes] = set()
    seen: set[bytes] = set()
    cursor = b"0"
    calls = 0
    while True:
        cursor, items = client.execute_command("JSCAN", cursor, "COUNT", 10)
        seen.update(items)
        calls += 1
        victims = rng.sample(ids, 3)
        client.execute_command("DELJOB", *victims)
        deleted.update(victims)
        add_many(client, 2, "newq")
        if cursor == b"0":
            break
        assert calls < 100_000
    assert calls > 2, "COUNT 10 over 2000 jobs must take several calls"
    missing = set(ids) - deleted - seen
    assert not missing, f"{len(missing)} jobs present for the whole scan were never returned"


def test_jscan_queue_filter(client: redis.Redis) -> None:
    s1 = client.execute_command("ADDJOB", "s1", "a", 0)
    client.execute_command("ADDJOB", "s2", "b", 0)
    assert client.execute_command("JSCAN", "0", "QUEUE", "s1", "BUSYLOOP") == [b"0", [s1]]
    assert client.execute_command("JSCAN", "0", "QUEUE", "nosuch", "BUSYLOOP") == [b"0", []]


def test_jscan_state_filter(client: redis.Redis) -> None:
    queued = client.execute_command("ADDJOB", "q", "a", 0)
    delayed = client.execute_command("ADDJOB", "q", "b", 0, "DELAY", 100)
    taken = client.execute_command("ADDJOB", "q2", "c", 0)
    client.execute_command("GETJOB", "FROM", "q2")
    _, q = client.execute_command("JSCAN", "0", "STATE", "queued", "BUSYLOOP")
    _, a = client.execute_command("JSCAN", "0", "STATE", "active", "BUSYLOOP")
    _, both = client.execute_command("JSCAN", "0", "STATE", "queued", "STATE", "active", "BUSYLOOP")
    assert set(q) == {queued}
    assert set(a) == {delayed, taken}
    assert set(both) == {queued, delayed, taken}


def test_jscan_queue_and_state_combined(client: redis.Redis) -> None:
    client.execute_command("ADDJOB", "q", "a", 0)
    b = client.execute_command("ADDJOB", "q", "b", 0, "DELAY", 100)
    client.execute_command("ADDJOB", "other", "c", 0, "DELAY", 100)
    _, items = client.execute_command("JSCAN", "QUEUE", "q", "STATE", "active", "BUSYLOOP")
    assert items == [b]


def test_jscan_reply_all(client: redis.Redis) -> None:
    jid = client.execute_command("ADDJOB", "s1", "a", 0)
    cursor, items = client.execute_command("JSCAN", "0", "REPLY", "all", "QUEUE", "s1", "BUSYLOOP")
    assert cursor == b"0" and len(items) == 1
    assert [k.decode() for k in items[0][0::2]] == SHOW_KEYS
    job = pairs(items[0])
    assert job["id"] == jid and job["body"] == b"a" and job["state"] == b"queued"
    assert job == {
        **pairs(client.execute_command("SHOW", jid)),
        "next-requeue-within": job["next-requeue-within"],
        "next-awake-within": job["next-awake-within"],
        "ttl": job["ttl"],
    }


def test_jscan_reply_id_is_default(client: redis.Redis) -> None:
    jid = client.execute_command("ADDJOB", "s1", "a", 0)
    assert client.execute_command("JSCAN", "REPLY", "id", "BUSYLOOP") == [b"0", [jid]]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["0", "REPLY", "foo"], "ERR Invalid REPLY type, try ID or ALL"),
        (["0", "STATE", "foo"], "ERR Invalid job state name"),
    ],
)
def test_jscan_errors(raw: Conn, args: list[str], error: str) -> None:
    assert raw.call("JSCAN", *args) == ("-", error)


@pytest.mark.parametrize(
    "args", [["0", "FOO"], ["0", "COUNT"], ["0", "COUNT", "abc"], ["0", "QUEUE"]]
)
def test_jscan_syntax_errors(raw: Conn, args: list[str]) -> None:
    t, msg = raw.call("JSCAN", *args)
    assert t == "-" and msg.startswith("ERR")


# ---- QSCAN ------------------------------------------------------------------------


def test_qscan_empty(client: redis.Redis) -> None:
    assert client.execute_command("QSCAN") == [b"0", []]


def test_qscan_lists_queues(client: redis.Redis) -> None:
    for q in ("qmax", "q1", "s1", "s2"):
        client.execute_command("ADDJOB", q, "x", 0)
    for args in (["QSCAN"], ["QSCAN", "0", "COUNT", "100"], ["QSCAN", "BUSYLOOP"]):
        cursor, items = client.execute_command(*args)
        assert cursor == b"0"
        assert set(items) == {b"qmax", b"q1", b"s1", b"s2"}, args


def test_qscan_names_are_bulk_strings(client: redis.Redis, raw: Conn) -> None:
    client.execute_command("ADDJOB", "qa", "x", 0)
    assert raw.call("QSCAN", "BUSYLOOP") == ("*", [("$", "0"), ("*", [("$", "qa")])])


def test_qscan_minlen_maxlen(client: redis.Redis) -> None:
    for q, n in (("one", 1), ("two", 2), ("three", 3)):
        add_many(client, n, q)
    _, exactly1 = client.execute_command("QSCAN", "BUSYLOOP", "MINLEN", 1, "MAXLEN", 1)
    _, min2 = client.execute_command("QSCAN", "BUSYLOOP", "MINLEN", 2)
    _, max2 = client.execute_command("QSCAN", "BUSYLOOP", "MAXLEN", 2)
    assert set(exactly1) == {b"one"}
    assert set(min2) == {b"two", b"three"}
    assert set(max2) == {b"one", b"two"}


def test_qscan_importrate(client: redis.Redis) -> None:
    client.execute_command("ADDJOB", "q", "x", 0)
    assert client.execute_command("QSCAN", "BUSYLOOP", "IMPORTRATE", 1) == [b"0", []]
    _, items = client.execute_command("QSCAN", "BUSYLOOP", "IMPORTRATE", 0)
    assert items == [b"q"]


@pytest.mark.timeout(60)
def test_qscan_cursor_iteration_returns_all_queues(client: redis.Redis) -> None:
    names = {f"queue-{i}".encode() for i in range(600)}
    with client.pipeline(transaction=False) as p:
        for n in names:
            p.execute_command("ADDJOB", n, "x", 0)
        p.execute()
    assert set(scan_all(client, "QSCAN", count=10)) == names


@pytest.mark.timeout(60)
def test_qscan_iteration_with_concurrent_new_queues(client: redis.Redis) -> None:
    names = {f"queue-{i}".encode() for i in range(600)}
    with client.pipeline(transaction=False) as p:
        for n in names:
            p.execute_command("ADDJOB", n, "x", 0)
        p.execute()
    seen: set[bytes] = set()
    cursor, k = b"0", 0
    while True:
        cursor, items = client.execute_command("QSCAN", cursor, "COUNT", 10)
        seen.update(items)
        for _ in range(3):
            client.execute_command("ADDJOB", f"late-{k}", "x", 0)
            k += 1
        if cursor == b"0":
            break
        assert k < 300_000
    assert names <= seen


def test_qscan_syntax_error(raw: Conn) -> None:
    assert raw.call("QSCAN", "0", "FOO") == ("-", "ERR syntax error")
