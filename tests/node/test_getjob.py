"""GETJOB: delivery order, options, blocking and wake-ups on a single node."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from testkit.calls import addjob, qstat, show
from testkit.conformance import Conn, pairs
from testkit.nodes import Node, wait_for


class Background:
    """Run a blocking call in a thread on its own connection; get() its result."""

    def __init__(self, fn: Callable[[], Any]):
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:  # reported by get()
            self.error = exc

    def done(self) -> bool:
        return not self.thread.is_alive()

    def get(self, timeout: float = 10.0) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "blocked call did not return"
        if self.error:
            raise self.error
        return self.result


def blocked_getjob(node: Node, *args: object) -> Background:
    def run() -> Any:
        with node.client(socket_timeout=15) as c:
            return c.execute_command("GETJOB", *args)

    return Background(run)


def wait_blocked(client: redis.Redis, queue: str, n: int = 1) -> None:
    wait_for(
        lambda: (qstat(client, queue) or {}).get("blocked") == n,
        5,
        message=f"{n} client(s) blocked on {queue}",
    )


# ---- basic delivery -----------------------------------------------------------


def test_getjob_returns_queue_id_body(client: redis.Redis) -> None:
    jid = addjob(client, "q", "hello")
    assert client.execute_command("GETJOB", "FROM", "q") == [[b"q", jid, b"hello"]]


def test_getjob_makes_job_active_and_dequeued(client: redis.Redis) -> None:
    jid = addjob(client, "q", "hello")
    client.execute_command("GETJOB", "FROM", "q")
    assert client.execute_command("QLEN", "q") == 0
    assert show(client, jid)["state"] == b"active"


def test_getjob_order_is_creation_order(client: redis.Redis) -> None:
    ids = [addjob(client, "q", f"b{i}") for i in range(20)]
    got = [client.execute_command("GETJOB", "FROM", "q")[0][1] for _ in range(20)]
    assert got == ids


def test_getjob_count_returns_several_in_order(client: redis.Redis) -> None:
    ids = [addjob(client, "q", f"b{i}") for i in range(5)]
    reply = client.execute_command("GETJOB", "COUNT", 3, "FROM", "q")
    assert [j[1] for j in reply] == ids[:3]
    assert client.execute_command("QLEN", "q") == 2


def test_getjob_count_larger_than_available_returns_what_is_there(client: redis.Redis) -> None:
    ids = [addjob(client, "q", f"b{i}") for i in range(3)]
    reply = client.execute_command("GETJOB", "COUNT", 10, "FROM", "q")
    assert [j[1] for j in reply] == ids


def test_getjob_queues_are_served_left_to_right(client: redis.Redis) -> None:
    b1 = addjob(client, "qb", "b1")
    a1 = addjob(client, "qa", "a1")
    assert client.execute_command("GETJOB", "FROM", "qa", "qb")[0][1] == a1
    assert client.execute_command("GETJOB", "FROM", "qa", "qb")[0][1] == b1


def test_getjob_count_spans_queues_left_to_right(client: redis.Redis) -> None:
    b = [addjob(client, "qb", f"b{i}") for i in range(2)]
    a = addjob(client, "qa", "a0")
    reply = client.execute_command("GETJOB", "COUNT", 3, "FROM", "qa", "qb")
    assert [(j[0], j[1]) for j in reply] == [(b"qa", a), (b"qb", b[0]), (b"qb", b[1])]


def test_getjob_skips_empty_queues(client: redis.Redis) -> None:
    jid = addjob(client, "q3", "x")
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "q1", "q2", "q3") == [
        [b"q3", jid, b"x"]
    ]


def test_getjob_withcounters(client: redis.Redis) -> None:
    jid = addjob(client, "q", "body")
    assert client.execute_command("GETJOB", "WITHCOUNTERS", "FROM", "q") == [
        [b"q", jid, b"body", b"nacks", 0, b"additional-deliveries", 0]
    ]


def test_getjob_withcounters_after_nack(client: redis.Redis) -> None:
    jid = addjob(client, "q", "body")
    client.execute_command("GETJOB", "FROM", "q")
    assert client.execute_command("NACK", jid) == 1
    job = client.execute_command("GETJOB", "WITHCOUNTERS", "FROM", "q")[0]
    assert job[:3] == [b"q", jid, b"body"]
    assert pairs(job[3:]) == {"nacks": 1, "additional-deliveries": 0}


@pytest.mark.parametrize(
    "words",
    [
        ("withcounters", "count", "nohang", "timeout", "from"),
        ("WITHCOUNTERS", "COUNT", "NOHANG", "TIMEOUT", "FROM"),
        ("WithCounters", "cOUNT", "NoHang", "Timeout", "From"),  # (not in the word table)
    ],
)
def test_options_in_any_order_and_case(client: redis.Redis, words: tuple[str, ...]) -> None:
    withcounters, count, nohang, timeout, from_ = words
    jid = addjob(client, "q", "body")
    reply = client.execute_command(
        "getjob", withcounters, count, 2, nohang, timeout, 100, from_, "q"
    )
    assert reply[0][1] == jid and len(reply[0]) == 7
    assert client.execute_command("getjob", nohang, from_, "q") is None  # NOHANG taken


def test_body_is_returned_once(client: redis.Redis) -> None:
    addjob(client, "q", "one")
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "q") is not None
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "q") is None


# ---- NOHANG / TIMEOUT -----------------------------------------------------------


def test_nohang_on_empty_queue_returns_null(client: redis.Redis) -> None:
    t0 = time.monotonic()
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "emptyq") is None
    assert time.monotonic() - t0 < 1


def test_nohang_with_jobs_returns_them(client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "emptyq", "q")[0][1] == jid


@pytest.mark.timeout(20)
def test_timeout_answers_null_array_after_the_timeout(node: Node) -> None:
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        t0 = time.monotonic()
        s.sendall(
            b"*5\r\n$6\r\nGETJOB\r\n$7\r\nTIMEOUT\r\n$3\r\n300\r\n$4\r\nFROM\r\n$6\r\nemptyq\r\n"
        )
        data = b""
        while not data.endswith(b"\r\n"):
            chunk = s.recv(100)
            assert chunk, "connection closed"
            data += chunk
        elapsed = time.monotonic() - t0
    assert data == b"*-1\r\n"
    assert 0.25 <= elapsed < 5


@pytest.mark.timeout(20)
def test_blocked_getjob_times_out_with_none(node: Node, client: redis.Redis) -> None:
    bg = blocked_getjob(node, "TIMEOUT", 500, "FROM", "q")
    wait_blocked(client, "q")
    assert bg.get(5) is None
    wait_blocked(client, "q", 0)


# ---- blocking and wake-ups ----------------------------------------------------------


@pytest.mark.timeout(30)
def test_blocked_getjob_woken_by_addjob(node: Node, client: redis.Redis) -> None:
    bg = blocked_getjob(node, "TIMEOUT", 10000, "FROM", "q")
    wait_blocked(client, "q")
    assert not bg.done()
    jid = addjob(client, "q", "wake")
    assert bg.get(5) == [[b"q", jid, b"wake"]]
    assert show(client, jid)["state"] == b"active"


@pytest.mark.timeout(30)
def test_blocked_getjob_without_timeout_blocks_until_job(node: Node, client: redis.Redis) -> None:
    bg = blocked_getjob(node, "FROM", "q")
    wait_blocked(client, "q")
    time.sleep(0.3)
    assert not bg.done()
    jid = addjob(client, "q", "late")
    assert bg.get(5)[0][1] == jid


@pytest.mark.timeout(30)
def test_blocked_getjob_woken_by_enqueue(node: Node, client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    client.execute_command("GETJOB", "FROM", "q")
    bg = blocked_getjob(node, "TIMEOUT", 10000, "FROM", "q")
    wait_blocked(client, "q")
    assert client.execute_command("ENQUEUE", jid) == 1
    assert bg.get(5)[0][1] == jid


@pytest.mark.timeout(30)
def test_blocked_getjob_woken_by_nack(node: Node, client: redis.Redis) -> None:
    jid = addjob(client, "q", "x")
    client.execute_command("GETJOB", "FROM", "q")
    bg = blocked_getjob(node, "TIMEOUT", 10000, "WITHCOUNTERS", "FROM", "q")
    wait_blocked(client, "q")
    assert client.execute_command("NACK", jid) == 1
    job = bg.get(5)[0]
    assert job[1] == jid
    assert pairs(job[3:])["nacks"] == 1


@pytest.mark.timeout(30)
def test_blocked_on_several_queues_woken_by_any(node: Node, client: redis.Redis) -> None:
    bg = blocked_getjob(node, "TIMEOUT", 10000, "FROM", "qa", "qb", "qc")
    wait_blocked(client, "qc")
    jid = addjob(client, "qc", "c")
    assert bg.get(5) == [[b"qc", jid, b"c"]]


@pytest.mark.timeout(30)
def test_two_blocked_clients_each_get_one_job(node: Node, client: redis.Redis) -> None:
    bg1 = blocked_getjob(node, "TIMEOUT", 10000, "FROM", "q")
    bg2 = blocked_getjob(node, "TIMEOUT", 10000, "FROM", "q")
    wait_blocked(client, "q", 2)
    j1 = addjob(client, "q", "1")
    j2 = addjob(client, "q", "2")
    got = {bg1.get(5)[0][1], bg2.get(5)[0][1]}
    assert got == {j1, j2}
    assert client.execute_command("QLEN", "q") == 0


@pytest.mark.timeout(30)
def test_blocked_clients_counted_in_info(node: Node, client: redis.Redis) -> None:
    bg = blocked_getjob(node, "TIMEOUT", 10000, "FROM", "q")
    wait_for(
        lambda: client.info("clients")["blocked_clients"] == 1, 5, message="blocked_clients == 1"
    )
    addjob(client, "q", "x")
    bg.get(5)
    wait_for(
        lambda: client.info("clients")["blocked_clients"] == 0, 5, message="blocked_clients == 0"
    )


@pytest.mark.timeout(30)
def test_disconnected_blocked_client_is_unregistered(node: Node, client: redis.Redis) -> None:
    conn = Conn(node.port)
    conn.send(b"*4\r\n$6\r\nGETJOB\r\n$4\r\nFROM\r\n$1\r\nq\r\n$2\r\nq2\r\n")
    wait_blocked(client, "q")
    conn.close()
    wait_blocked(client, "q", 0)
    jid = addjob(client, "q", "x")
    # the job was not swallowed by the dead client
    assert client.execute_command("QLEN", "q") == 1
    assert show(client, jid)["state"] == b"queued"


@pytest.mark.timeout(30)
def test_blocked_getjob_count_returns_available_jobs(node: Node, client: redis.Redis) -> None:
    bg = blocked_getjob(node, "TIMEOUT", 10000, "COUNT", 5, "FROM", "q")
    wait_blocked(client, "q")
    jid = addjob(client, "q", "x")
    reply = bg.get(5)
    assert 1 <= len(reply) <= 5 and reply[0][1] == jid


# ---- paused queues ------------------------------------------------------------------


def test_nohang_on_queue_paused_out_returns_null(client: redis.Redis) -> None:
    addjob(client, "q", "x")
    assert client.execute_command("PAUSE", "q", "out") == b"out"
    assert client.execute_command("GETJOB", "NOHANG", "FROM", "q") is None
    assert client.execute_command("QLEN", "q") == 1


@pytest.mark.timeout(30)
def test_getjob_blocks_on_paused_out_queue_and_unblocks_when_cleared(
    node: Node, client: redis.Redis
) -> None:
    jid = addjob(client, "q", "x")
    client.execute_command("PAUSE", "q", "out")
    bg = blocked_getjob(node, "TIMEOUT", 10000, "FROM", "q")
    wait_blocked(client, "q")
    time.sleep(0.3)
    assert not bg.done()
    assert client.execute_command("PAUSE", "q", "none") == b"none"
    assert bg.get(5) == [[b"q", jid, b"x"]]


@pytest.mark.timeout(30)
def test_paused_out_queue_times_out_despite_jobs(node: Node, client: redis.Redis) -> None:
    addjob(client, "q", "x")
    client.execute_command("PAUSE", "q", "all")
    t0 = time.monotonic()
    with node.client() as c:
        assert c.execute_command("GETJOB", "TIMEOUT", 300, "FROM", "q") is None
    assert time.monotonic() - t0 >= 0.25


@pytest.mark.timeout(30)
def test_getjob_serves_unpaused_queue_when_other_is_paused(client: redis.Redis) -> None:
    addjob(client, "qp", "paused")
    jid = addjob(client, "qf", "free")
    client.execute_command("PAUSE", "qp", "out")
    assert client.execute_command("GETJOB", "FROM", "qp", "qf") == [[b"qf", jid, b"free"]]


# ---- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["COUNT", "0", "FROM", "q1"], "ERR COUNT must be a number greater than zero"),
        (["COUNT", "-2", "FROM", "q1"], "ERR COUNT must be a number greater than zero"),
        (["FROM"], "ERR syntax error"),
        (["NOHANG"], "ERR syntax error"),
        (["NOHANG", "q1"], "ERR syntax error"),
    ],
)
def test_getjob_errors(raw: Conn, args: list[str], error: str) -> None:
    assert raw.call("GETJOB", *args) == ("-", error)


@pytest.mark.parametrize(
    "args",
    [
        ["COUNT", "abc", "FROM", "q"],
        ["TIMEOUT", "abc", "FROM", "q"],
        ["TIMEOUT", "-1", "FROM", "q"],
    ],
)
def test_getjob_bad_numbers(raw: Conn, args: list[str]) -> None:
    t, msg = raw.call("GETJOB", *args)
    assert t == "-" and msg.startswith("ERR")
    assert raw.call("PING") == ("+", "PONG")


def test_getjob_without_arguments(raw: Conn) -> None:
    assert raw.call("GETJOB") == ("-", "ERR wrong number of arguments for 'getjob' command")
