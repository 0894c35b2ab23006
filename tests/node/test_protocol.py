"""Wire protocol: inline commands, pipelining, RESP3 via HELLO, AUTH, QUIT,
protected mode, maxclients, malformed input and binary safety."""

from __future__ import annotations

import random
import re
import socket
import subprocess
import time

import pytest
import redis

from testkit.conformance import JOBID, Conn, encode, pairs, plain
from testkit.nodes import Node, wait_for

pytestmark = pytest.mark.timeout(60)


def recv_until(sock: socket.socket, n_lines: int, timeout: float = 10.0) -> bytes:
    """Read until at least n_lines CRLF-terminated lines arrived."""
    sock.settimeout(timeout)
    data = b""
    while data.count(b"\r\n") < n_lines:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def recv_bulk(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Read one bulk string reply; its payload."""
    data = recv_until(sock, 1, timeout)
    header, _, rest = data.partition(b"\r\n")
    assert header.startswith(b"$"), data
    size = int(header[1:])
    while len(rest) < size + 2:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a bulk reply"
        rest += chunk
    return rest[:size]


def non_loopback_ipv4() -> str | None:
    try:
        out = subprocess.run(
            ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, timeout=5
        ).stdout
        for ip in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out):
            if not ip.startswith("127."):
                return ip
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))
            ip = s.getsockname()[0]
            return None if ip.startswith("127.") or ip == "0.0.0.0" else ip
    except OSError:
        return None


# ---- inline commands ----------------------------------------------------------------


def test_inline_ping(node: Node) -> None:
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(b"PING\r\n")
        assert recv_until(s, 1) == b"+PONG\r\n"


def test_inline_with_bare_newline(node: Node) -> None:
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(b"PING\n")
        assert recv_until(s, 1) == b"+PONG\r\n"


def test_inline_addjob_and_quoted_arguments(node: Node, client: redis.Redis) -> None:
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(b'ADDJOB inq "hello world" 0\r\n')
        reply = recv_until(s, 1)
    assert reply.startswith(b"+D-") and reply.endswith(b"\r\n")
    jid = reply[1:-2].decode()
    assert JOBID.fullmatch(jid)
    assert client.execute_command("GETJOB", "FROM", "inq") == [
        [b"inq", jid.encode(), b"hello world"]
    ]


def test_inline_nul_byte_ends_the_line(node: Node) -> None:
    """As in Redis (sdssplitargs reads a C string): what follows a NUL is ignored, and
    a line that starts with one is empty."""
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(b"PING\0 ignored\r\n\0PING\r\nPING\r\n")
        assert recv_until(s, 2) == b"+PONG\r\n+PONG\r\n"


def test_inline_empty_lines_are_ignored(node: Node) -> None:
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(b"\r\n\r\nPING\r\n")
        assert recv_until(s, 1) == b"+PONG\r\n"


def test_command_split_across_writes(node: Node) -> None:
    payload = encode(["ADDJOB", "splitq", "body", "0"]) + encode(["QLEN", "splitq"])
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(len(payload)):
            s.sendall(payload[i : i + 1])
        data = recv_until(s, 2)
    first, second, _ = data.split(b"\r\n")
    assert first.startswith(b"+D-")
    assert second == b":1"


def test_command_split_at_every_byte_boundary(node: Node) -> None:
    payload = encode(["ADDJOB", "splitq", "body", "0"])
    bad = []
    for cut in range(1, len(payload)):
        with socket.create_connection(("127.0.0.1", node.port), timeout=5) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(payload[:cut])
            time.sleep(0.02)
            s.sendall(payload[cut:])
            reply = recv_until(s, 1)
        if not reply.startswith(b"+D-") or reply.count(b"\r\n") != 1:
            bad.append((payload[:cut], reply))
    assert not bad, bad
    assert node.call("QLEN", "splitq") == len(payload) - 1


# ---- pipelining ------------------------------------------------------------------------


def test_pipelining_many_commands_in_one_write(node: Node) -> None:
    n = 500
    payload = b"".join(encode(["ADDJOB", "pipeq", f"b{i}", "0"]) for i in range(n))
    payload += encode(["QLEN", "pipeq"]) + encode(["PING"])
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(payload)
        data = recv_until(s, n + 2)
    lines = data.split(b"\r\n")[:-1]
    assert len(lines) == n + 2
    assert all(line.startswith(b"+D-") for line in lines[:n])
    assert lines[n] == b":%d" % n
    assert lines[n + 1] == b"+PONG"


def test_pipelined_inline_and_multibulk_mixed(node: Node) -> None:
    payload = (
        b"PING\r\n"
        + encode(["QLEN", "mixq"])
        + b"PING\r\n"
        + encode(["QLEN", "mixq"])
        + b"QLEN mixq\r\n"
    )
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(payload)
        data = recv_until(s, 5)
    assert data == b"+PONG\r\n:0\r\n+PONG\r\n:0\r\n:0\r\n"


def test_inline_after_requests_in_any_encoding_whatever_the_cuts(node: Node) -> None:
    """Requests may use any encoding hiredis accepts (simple strings for bulk strings,
    here with bytes that look like array headers): the inline command after them starts
    where they end, wherever the stream is cut."""
    payload = (
        b"*2\r\n+PING\r\n+a*123\r\n"
        + encode(["PING", "b%45|6~7>8"])
        + b"*1\r\n+PING\r\nPING\r\n"
        + encode(["PING"])
    )
    expected = b"$5\r\na*123\r\n$10\r\nb%45|6~7>8\r\n+PONG\r\n+PONG\r\n+PONG\r\n"
    bad = []
    for cut in range(len(payload)):
        with socket.create_connection(("127.0.0.1", node.port), timeout=5) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(payload[:cut])
            time.sleep(0.01)
            s.sendall(payload[cut:])
            reply = recv_until(s, 7)
        if reply != expected:
            bad.append((cut, reply))
    assert not bad, bad


def test_big_body_with_header_like_bytes_in_many_writes(node: Node, client: redis.Redis) -> None:
    """A body of megabytes, full of bytes that look like RESP headers, sent in small
    writes, then more requests: the node follows the request header by header."""
    body = b"*2147483648\r\n*1\r\n~99\r\n$999999999\r\nPING\r\n" * 100_000  # 4.3 MB
    payload = encode(["ADDJOB", "bigq", body, "0"]) + encode(["QLEN", "bigq"]) + b"PING\r\n"
    with socket.create_connection(("127.0.0.1", node.port), timeout=30) as s:
        for i in range(0, len(payload), 50_000):
            s.sendall(payload[i : i + 50_000])
        data = recv_until(s, 3, timeout=30)
    assert data.startswith(b"+D-") and data.endswith(b"\r\n:1\r\n+PONG\r\n"), data[:200]
    assert client.execute_command("GETJOB", "FROM", "bigq")[0][2] == body


def test_pipelined_bodies_with_header_like_bytes_cut_anywhere(
    node: Node, client: redis.Redis
) -> None:
    bodies = [b"x*%d ~%d >%d %%%d |%d $%d" % (i, i, i, i, i, i * 10**9) for i in range(300)]
    payload = b"".join(encode(["ADDJOB", "hdrq", b, "0"]) for b in bodies)
    rng = random.Random(7)
    cuts = sorted(rng.sample(range(1, len(payload)), 40))
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for a, b in zip([0, *cuts], [*cuts, len(payload)], strict=True):
            s.sendall(payload[a:b])
            time.sleep(0.002)
        data = recv_until(s, len(bodies))
    # Count reply lines, not "+D-": an ID's random part may end in "+D" (then "-05a1").
    replies = [line for line in data.split(b"\r\n") if line.startswith(b"+D-")]
    assert len(replies) == len(bodies), data[-300:]
    jobs = client.execute_command("GETJOB", "COUNT", 1000, "FROM", "hdrq")
    assert sorted(job[2] for job in jobs) == sorted(bodies)


def test_pipelined_replies_keep_order(client: redis.Redis) -> None:
    with client.pipeline(transaction=False) as p:
        for i in range(200):
            p.execute_command("ADDJOB", "ordq", f"b{i}", 0)
            p.execute_command("QLEN", "ordq")
        replies = p.execute()
    assert replies[1::2] == list(range(1, 201))
    peek = client.execute_command("QPEEK", "ordq", 200)
    assert [j[1] for j in peek] == replies[0::2]


# ---- RESP3 and HELLO -----------------------------------------------------------------


def test_a_long_pipeline_leaves_other_clients_their_turn(node: Node) -> None:
    """A client's pipeline read at once runs RUN_BUDGET (256) requests an event-loop
    pass, then the others' turn comes: here 1,000 requests of 2 ms each (2 s) in one
    write, and another client's PING answered long before their end (without the
    budget it waits for all of them); all 1,000 replies come back, in order."""
    pipeline = encode(("DEBUG", "SLEEP", "0.002")) * 1000 + encode(("PING",))
    with (
        socket.create_connection(("127.0.0.1", node.port)) as other,
        socket.create_connection(("127.0.0.1", node.port)) as busy,
    ):
        for conn in (other, busy):  # both accepted before the pipeline
            conn.sendall(encode(("PING",)))
            assert recv_until(conn, 1) == b"+PONG\r\n"
        busy.sendall(pipeline)
        first = recv_until(busy, 1)  # the node runs the pipeline
        started = time.monotonic()
        other.sendall(encode(("CLIENT", "LIST")))
        listing = recv_bulk(other)
        waited = time.monotonic() - started
        replies = first + recv_until(busy, 1001 - first.count(b"\r\n"))
    assert replies == b"+OK\r\n" * 1000 + b"+PONG\r\n"
    # Served while the node held the rest of the pipeline, read but not run yet.
    busy_line = next(line for line in listing.splitlines() if b"cmd=debug" in line)
    held = int(re.search(rb" qbuf=(\d+)", busy_line).group(1))
    assert held > 10_000, busy_line
    # About two passes (1 s): uvloop runs the resumed pass before it polls again.
    assert waited < 1.5, f"the other client waited {waited:.2f}s (the whole pipeline: 2s)"


def test_hello_3_switches_to_resp3(raw: Conn) -> None:
    t, fields = raw.call("HELLO", "3")
    assert t == "%"
    hello = {plain(k): plain(v) for k, v in fields}
    assert {"server", "version", "proto", "id", "mode", "role", "modules"} <= set(hello)
    assert hello["proto"] == 3
    assert isinstance(hello["id"], int)
    assert isinstance(hello["modules"], list)
    jid = raw.call("ADDJOB", "q", "x", "0")[1]
    t, job = raw.call("SHOW", jid)
    assert t == "%"
    assert {plain(k): plain(v) for k, v in job}["body"] == "x"


def test_resp3_nulls(raw: Conn) -> None:
    raw.call("HELLO", "3")
    assert raw.call("SHOW", "D-00000000-000000000000000000000000-0001") == ("_", None)
    assert raw.call("QSTAT", "nosuchqueue") == ("_", None)
    assert raw.call("GETJOB", "NOHANG", "FROM", "emptyq") == ("_", None)
    assert raw.call("GETJOB", "TIMEOUT", "100", "FROM", "emptyq") == ("_", None)
    assert raw.call("CLIENT", "GETNAME") == ("_", None)


def test_resp3_maps_for_qstat_and_config_get(raw: Conn) -> None:
    raw.call("HELLO", "3")
    raw.call("ADDJOB", "q", "x", "0")
    t, st = raw.call("QSTAT", "q")
    assert t == "%"
    assert {plain(k): plain(v) for k, v in st}["len"] == 1
    assert raw.call("CONFIG", "GET", "hz") == ("%", [(("$", "hz"), ("$", "10"))])


def test_resp3_info_is_still_a_bulk_string(raw: Conn) -> None:
    raw.call("HELLO", "3")
    t, text = raw.call("INFO", "jobs")
    assert t in ("$", "=")
    assert "registered_jobs:0" in text


def test_resp3_getjob_is_an_array_of_arrays(raw: Conn) -> None:
    raw.call("HELLO", "3")
    jid = raw.call("ADDJOB", "q", "x", "0")[1]
    assert raw.call("GETJOB", "FROM", "q") == ("*", [("*", [("$", "q"), ("$", jid), ("$", "x")])])


def test_hello_2_returns_to_resp2(raw: Conn) -> None:
    raw.call("HELLO", "3")
    t, flat = raw.call("HELLO", "2")
    assert t == "*"
    hello = pairs(plain(("*", flat)))
    assert hello["proto"] == 2
    assert raw.call("QSTAT", "nosuchqueue") == ("nil", None)
    jid = raw.call("ADDJOB", "q", "x", "0")[1]
    assert raw.call("SHOW", jid)[0] == "*"


def test_hello_without_arguments_is_the_disque_handshake(raw: Conn) -> None:
    t, reply = raw.call("HELLO")
    assert t == "*" and reply[0] == (":", 1)


def test_hello_unsupported_protocol(raw: Conn) -> None:
    t, msg = raw.call("HELLO", "4")
    assert t == "-" and msg.startswith("NOPROTO")
    assert raw.call("QSTAT", "nosuchqueue") == ("nil", None)  # still RESP2


def test_hello_setname(raw: Conn) -> None:
    assert raw.call("HELLO", "3", "SETNAME", "worker-1")[0] == "%"
    assert raw.call("CLIENT", "GETNAME") == ("$", "worker-1")


def test_redis_py_protocol_3_client(node: Node) -> None:
    with node.client(protocol=3) as c:
        jid = c.execute_command("ADDJOB", "q3", "body", 0)
        job = c.execute_command("SHOW", jid)
        assert isinstance(job, dict)
        assert job[b"body"] == b"body" and job[b"state"] == b"queued"
        assert job[b"next-requeue-within"] > 0
        st = c.execute_command("QSTAT", "q3")
        assert isinstance(st, dict) and st[b"len"] == 1
        assert c.execute_command("GETJOB", "FROM", "q3") == [[b"q3", jid, b"body"]]
        assert c.execute_command("SHOW", jid)[b"state"] == b"active"
        assert c.execute_command("ACKJOB", jid) == 1
        assert c.execute_command("SHOW", jid) is None
        assert c.execute_command("GETJOB", "NOHANG", "FROM", "q3") is None
        assert c.ping() is True


# ---- AUTH -----------------------------------------------------------------------------


@pytest.fixture
def secured(start_node) -> Node:
    return start_node(config={"requirepass": "s3cret"})


def test_commands_need_auth(secured: Node) -> None:
    with Conn(secured.port) as c:
        assert c.call("PING") == ("-", "NOAUTH Authentication required.")
        assert c.call("ADDJOB", "q", "x", "0") == ("-", "NOAUTH Authentication required.")
        assert c.call("INFO") == ("-", "NOAUTH Authentication required.")


def test_auth_wrong_password(secured: Node) -> None:
    with Conn(secured.port) as c:
        assert c.call("AUTH", "nope") == ("-", "ERR invalid password")
        assert c.call("PING") == ("-", "NOAUTH Authentication required.")


def test_auth_right_password(secured: Node) -> None:
    with Conn(secured.port) as c:
        assert c.call("AUTH", "s3cret") == ("+", "OK")
        assert c.call("PING") == ("+", "PONG")
        assert c.call("ADDJOB", "q", "x", "0")[0] == "+"


def test_redis_py_with_password(secured: Node) -> None:
    with secured.client(password="s3cret") as c:
        assert c.execute_command("ADDJOB", "q", "x", 0).startswith(b"D-")
    with secured.client(password="s3cret", protocol=3) as c:
        assert c.execute_command("QLEN", "q") == 1


def test_hello_3_with_auth(secured: Node) -> None:
    with Conn(secured.port) as c:
        t, _ = c.call("HELLO", "3", "AUTH", "default", "wrong")
        assert t == "-"
        t, _ = c.call("HELLO", "3", "AUTH", "default", "s3cret")
        assert t == "%"
        assert c.call("PING") == ("+", "PONG")


def test_auth_without_password_set(raw: Conn) -> None:
    assert raw.call("AUTH", "foo") == ("-", "ERR Client sent AUTH, but no password is set")


def test_requirepass_set_at_runtime(node: Node, raw: Conn) -> None:
    assert raw.call("CONFIG", "SET", "requirepass", "later") == ("+", "OK")
    with Conn(node.port) as c:
        assert c.call("PING") == ("-", "NOAUTH Authentication required.")
        assert c.call("AUTH", "later") == ("+", "OK")
        assert c.call("PING") == ("+", "PONG")


# ---- QUIT -------------------------------------------------------------------------------


def test_quit_replies_ok_and_closes(raw: Conn) -> None:
    assert raw.call("QUIT") == ("+", "OK")
    assert raw.is_closed(5)


def test_quit_inline(node: Node) -> None:
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(b"QUIT\r\nPING\r\n")
        assert recv_until(s, 2) == b"+OK\r\n"


# ---- protected mode / bind ---------------------------------------------------------------


def test_protected_mode_logged(node: Node) -> None:
    wait_for(lambda: "protected mode" in node.log().lower(), 5, message="protected mode in the log")


def test_protected_mode_listens_on_loopback_only(node: Node) -> None:
    with Conn(node.port, host="127.0.0.1") as c:
        assert c.call("PING") == ("+", "PONG")
    ip = non_loopback_ipv4()
    if ip is None:
        pytest.skip("no non-loopback IPv4 address on this machine")
    with pytest.raises(OSError):
        socket.create_connection((ip, node.port), timeout=3).close()


def test_bind_all_interfaces(start_node) -> None:
    ip = non_loopback_ipv4()
    if ip is None:
        pytest.skip("no non-loopback IPv4 address on this machine")
    node = start_node(config={"bind": "0.0.0.0"})
    with Conn(node.port, host=ip) as c:
        assert c.call("PING") == ("+", "PONG")


# ---- maxclients --------------------------------------------------------------------------


def test_maxclients(start_node) -> None:
    node = start_node(config={"maxclients": "3"})
    first = Conn(node.port)
    conns = [first]
    try:
        wait_for(
            lambda: re.search(r"connected_clients:1\r?\n", first.call("INFO", "clients")[1]),
            5,
            message="only one client connected",
        )
        for _ in range(2):
            conns.append(Conn(node.port))
            assert conns[-1].call("PING") == ("+", "PONG")
        extra = Conn(node.port)
        conns.append(extra)
        assert extra.read() == ("-", "ERR max number of clients reached")
        assert extra.is_closed(5)
        # the accepted ones still work, and a slot frees up when one leaves
        assert conns[1].call("PING") == ("+", "PONG")
        conns[1].close()

        def new_client_accepted() -> bool:
            with Conn(node.port) as c:
                return c.call("PING") == ("+", "PONG")

        wait_for(new_client_accepted, 5, message="a freed client slot")
    finally:
        for c in conns:
            c.close()


# ---- errors: unknown commands, arity, bad numbers ---------------------------------------------


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["NOSUCHCOMMAND", "a", "b"], "ERR unknown command 'NOSUCHCOMMAND'"),
        (["foobar"], "ERR unknown command 'foobar'"),
        (["SHOW"], "ERR wrong number of arguments for 'show' command"),
        (["QLEN"], "ERR wrong number of arguments for 'qlen' command"),
        (["QSTAT"], "ERR wrong number of arguments for 'qstat' command"),
        (["QPEEK", "q"], "ERR wrong number of arguments for 'qpeek' command"),
        (["WORKING"], "ERR wrong number of arguments for 'working' command"),
        (["SHOW", "a", "b"], "ERR wrong number of arguments for 'show' command"),
        (["LOADJOB", "x"], "ERR LOADJOB is a special command only processed from AOF"),
    ],
)
def test_command_errors(raw: Conn, args: list[str], error: str) -> None:
    assert raw.call(*args) == ("-", error)
    assert raw.call("PING") == ("+", "PONG")


@pytest.mark.parametrize(
    "args",
    [
        ["QPEEK", "q", "x"],
        ["QPEEK", "q", "99999999999999999999999"],
        ["GETJOB", "TIMEOUT", "1.5", "FROM", "q"],
        ["ADDJOB", "q", "x", "0", "TTL", "1e3"],
        ["ADDJOB", "q", "x", "0", "RETRY", "99999999999999999999999"],
        ["JSCAN", "0", "COUNT", "x"],
        ["QSCAN", "0", "COUNT", "-"],
    ],
)
def test_bad_numbers_are_errors(raw: Conn, args: list[str]) -> None:
    t, msg = raw.call(*args)
    assert t == "-" and msg.startswith("ERR"), (t, msg)
    assert raw.call("QLEN", "q") == (":", 0)


# ---- malformed RESP --------------------------------------------------------------------------

MALFORMED = [
    b"*abc\r\n",
    b"*1\r\n$-5\r\n",
    b"*99999999999\r\n",
    b"*1\r\n$abc\r\n",
    b"*2\r\n$4\r\nPING\r\n$99999999999\r\n",
]


@pytest.mark.parametrize("payload", MALFORMED)
def test_protocol_error_closes_only_that_connection(
    node: Node, client: redis.Redis, payload: bytes
) -> None:
    jid = client.execute_command("ADDJOB", "safe", "keep me", 0)
    bystander = Conn(node.port)
    try:
        assert bystander.call("PING") == ("+", "PONG")
        with Conn(node.port, timeout=3) as bad:
            bad.send(payload)
            t, msg = bad.read()
            assert t == "-" and msg.startswith("ERR Protocol error"), msg
            assert bad.is_closed(5)
        assert bystander.call("PING") == ("+", "PONG")
        assert node.is_running()
        assert pairs(client.execute_command("SHOW", jid))["body"] == b"keep me"
        assert client.execute_command("QLEN", "safe") == 1
    finally:
        bystander.close()


def test_simple_string_element_is_read_like_a_bulk_string(node: Node) -> None:
    """Leniency beyond Redis: hiredis hands `+PING` inside a request over as the
    bytes it carries, so the node runs it instead of closing the connection."""
    with Conn(node.port) as c:
        c.send(b"*1\r\n+PING\r\n")
        assert c.read() == ("+", "PONG")
        c.send(b"*1\r\n$4\r\nPING\r\n")
        assert c.read() == ("+", "PONG")


def test_unbalanced_quotes_inline(node: Node) -> None:
    with Conn(node.port) as c:
        c.send(b'ADDJOB q "unterminated 0\r\n')
        t, msg = c.read()
        assert t == "-" and msg.startswith("ERR")
    assert node.call("QLEN", "q") == 0


def test_truncated_command_then_disconnect(node: Node, client: redis.Redis) -> None:
    with Conn(node.port) as c:
        c.send(b"*4\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$4\r\nbo")
    assert client.execute_command("PING") is True
    assert client.execute_command("QLEN", "q") == 0


@pytest.mark.timeout(90)
def test_random_garbage_does_not_hurt(node: Node, client: redis.Redis) -> None:
    ids = [client.execute_command("ADDJOB", "fuzzq", f"job{i}", 0) for i in range(10)]
    rng = random.Random(1234)
    prefixes = [b"", b"*", b"$", b"*2\r\n$", b"*1\r\n$3\r\n", b"PING ", b"\r\n"]
    for _ in range(60):
        junk = rng.choice(prefixes) + bytes(
            rng.randrange(256) for _ in range(rng.randrange(1, 300))
        )
        try:
            with socket.create_connection(("127.0.0.1", node.port), timeout=5) as s:
                s.sendall(junk)
                s.settimeout(0.05)
                try:
                    s.recv(65536)
                except (TimeoutError, OSError):
                    pass
        except OSError:
            pass
    assert node.is_running()
    assert client.execute_command("PING") is True
    assert client.execute_command("QLEN", "fuzzq") == 10
    for i, jid in enumerate(ids):
        assert pairs(client.execute_command("SHOW", jid))["body"] == f"job{i}".encode()


def test_multibulk_count_zero_is_ignored(node: Node) -> None:
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(b"*0\r\n" + encode(["PING"]))
        assert recv_until(s, 1) == b"+PONG\r\n"


# ---- binary safety ----------------------------------------------------------------------------


def test_every_byte_value_round_trips(client: redis.Redis) -> None:
    body = bytes(range(256)) * 3
    jid = client.execute_command("ADDJOB", "binq", body, 0)
    assert pairs(client.execute_command("SHOW", jid))["body"] == body
    assert client.execute_command("QPEEK", "binq", 1) == [[b"binq", jid, body]]
    assert client.execute_command("GETJOB", "FROM", "binq") == [[b"binq", jid, body]]


@pytest.mark.parametrize(
    "body",
    [
        b"\r\n",
        b"\x00",
        b"$5\r\nhello\r\n",
        b"*1\r\n",
        b"\xff\xfe\x00\r\n\r\n",
        "ünïcødé ✓".encode(),
    ],
)
def test_tricky_bodies(client: redis.Redis, body: bytes) -> None:
    jid = client.execute_command("ADDJOB", "binq", body, 0)
    assert client.execute_command("GETJOB", "FROM", "binq") == [[b"binq", jid, body]]


def test_binary_queue_name(client: redis.Redis) -> None:
    queue = b"q\x00\xff\r\n name"
    jid = client.execute_command("ADDJOB", queue, "x", 0)
    assert client.execute_command("QLEN", queue) == 1
    assert pairs(client.execute_command("SHOW", jid))["queue"] == queue
    assert client.execute_command("GETJOB", "FROM", queue) == [[queue, jid, b"x"]]
    _, names = client.execute_command("QSCAN", "BUSYLOOP")
    assert names == [queue]


def test_binary_body_resp3(node: Node) -> None:
    body = bytes(range(256))
    with node.client(protocol=3) as c:
        jid = c.execute_command("ADDJOB", "binq", body, 0)
        assert c.execute_command("SHOW", jid)[b"body"] == body
        assert c.execute_command("GETJOB", "FROM", "binq") == [[b"binq", jid, body]]
