"""Server bugs found by the fuzz and load suites, one regression test each.

Every test states the correct behaviour. A bug still open is marked with
``bug`` from fuzz_util (a strict xfail): XFAIL while open, a failure (XPASS) once fixed; then
drop the marker and turn its reason into the "Fixed SERVER BUG" comment the
others carry.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter

import pytest
from fuzz_util import (
    FuzzNode,
    close_all,
    connect,
    encode,
    info_field,
    read_for,
    read_replies,
    send_chunks,
    used_memory,
)

from testkit.nodes import Node

pytestmark = pytest.mark.timeout(120)


def pipeline_seconds(port: int, n: int = 30_000) -> float:
    """Time for n pipelined PINGs: enough allocations for the node's garbage collector
    to run, and so to free what a closed connection left behind."""
    t0 = time.monotonic()
    with connect(port, 120) as s:
        s.sendall(b"PING\r\n" * n)
        expected, got = 7 * n, 0
        while got < expected:
            chunk = s.recv(1 << 20)
            assert chunk, "closed"
            got += len(chunk)
    return time.monotonic() - t0


def ping_latency(port: int, timeout: float = 60.0) -> float:
    t0 = time.monotonic()
    with connect(port, timeout) as s:
        s.sendall(b"PING\r\n")
        assert s.recv(16) == b"+PONG\r\n"
    return time.monotonic() - t0


# Fixed SERVER BUG: a multibulk count above 1M that is not the first bytes of a read is not
# refused before hiredis allocates it: '*2147483648' after a PING stalls the event loop ~9 s
def test_huge_array_count_after_a_command_does_not_stall(fresh: FuzzNode) -> None:
    with connect(fresh.port, 60) as s:
        s.sendall(b"*1\r\n$4\r\nPING\r\n*2147483648\r\n$4\r\nQLEN\r\n")
        time.sleep(0.05)
        waited = ping_latency(fresh.port)
    assert waited < 1.0, f"another client waited {waited:.1f}s for PONG"


# Fixed SERVER BUG: a huge count of an array nested in a request ('*1\r\n*2147483648\r\n')
# is not refused before hiredis allocates it (only top-level counts are checked): each such
# 20-byte request stalls the whole node 4-9 s
def test_nested_huge_array_count_does_not_stall(fresh: FuzzNode) -> None:
    baseline = pipeline_seconds(fresh.port)
    for frame in (b"*1\r\n*2147483648\r\n", b"*1\r\n$4\r\nPING\r\n*1\r\n*2147483648\r\n"):
        with connect(fresh.port, 60) as s:
            s.sendall(frame)
            time.sleep(0.05)
            waited = ping_latency(fresh.port)
        # The stall may also come when the list is freed: with the connection's
        # objects, at the node's next garbage collection, which a pipeline triggers.
        took = pipeline_seconds(fresh.port)
        assert waited < 1.0 and took < baseline * 3 + 1.0, (
            f"after {frame!r}: PING waited {waited:.1f}s, 30k PINGs took {took:.1f}s "
            f"(normally {baseline:.1f}s)"
        )


# Fixed SERVER BUG: a RESP3 map with an unhashable key ('%1\r\n*0\r\n...') makes hiredis
# raise TypeError, which the client parser does not catch: the connection is dropped without
# the replies already computed nor a protocol error, and a traceback goes to stderr
def test_resp3_map_with_array_key_is_a_protocol_error(fresh: FuzzNode) -> None:
    data, closed = send_chunks(
        fresh.port, [b"*1\r\n$4\r\nPING\r\n%1\r\n*0\r\n$1\r\nx\r\n"], quiet=0.3
    )
    assert data.startswith(b"+PONG\r\n-ERR Protocol error"), data
    assert closed
    assert "Traceback" not in fresh.stderr_text()


# Fixed SERVER BUG: integer arguments of more than 4300 digits hit Python's int() limit inside
# the handlers: '-ERR internal error while running ...' instead of the usual error
@pytest.mark.parametrize(
    "args",
    [
        ["ADDJOB", "q", "b", "9" * 5000],
        ["ADDJOB", "q", "b", "0", "TTL", "9" * 5000],
        ["GETJOB", "TIMEOUT", "9" * 5000, "FROM", "q"],
        ["GETJOB", "COUNT", "9" * 5000, "FROM", "q"],
        ["QPEEK", "q", "9" * 5000],
        ["JSCAN", "9" * 5000],
        ["QSCAN", "COUNT", "9" * 5000],
        ["SLOWLOG", "GET", "9" * 5000],
        ["HELLO", "9" * 5000],
        ["CLIENT", "KILL", "ID", "9" * 5000],
    ],
    ids=lambda a: a[0] + "-" + a[-2][:8],
)
def test_integers_with_thousands_of_digits_are_plain_errors(fresh: FuzzNode, args) -> None:
    with connect(fresh.port) as s:
        s.sendall(encode(args))
        reply = read_replies(s, 1)[0]
    assert b"internal error" not in str(reply).encode(), reply


# Fixed SERVER BUG: pipelined requests whose reads never end on a request boundary are all kept
# (Client.pending and pending_requests are only cleared at a boundary): a client that reads
# every reply grows the query buffer, and RSS by twice that, without bound, then is killed with
# 'query buffer limit reached' after 1 GB
def test_query_buffer_of_a_well_behaved_pipelining_client_is_bounded(fresh: FuzzNode) -> None:
    arg = b"x" * 100_000
    cmd = b"*2\r\n$7\r\nUNKNOWN\r\n$%d\r\n%s\r\n" % (len(arg), arg)
    half = len(cmd) // 2
    replies = [0]
    with connect(fresh.port, 30) as s:

        def drain() -> None:
            try:
                while chunk := s.recv(1 << 20):
                    replies[0] += chunk.count(b"\r\n")
            except OSError:
                pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        s.sendall(cmd[:half])
        for _ in range(600):  # 60 MB, each write ends mid-request
            s.sendall(cmd[half:] + cmd[:half])
        qbuf = info_field(fresh.port, "clients", "client_biggest_input_buf")
    assert qbuf < 10 << 20, f"query buffer of {qbuf >> 20} MB for 100 KB requests"


# Fixed SERVER BUG: what a client sends while blocked (GETJOB, synchronous ADDJOB) is appended
# to Client.deferred without any limit and is not counted in the query buffer: memory grows
# with whatever it sends
def test_input_of_a_blocked_client_is_bounded(fresh: FuzzNode) -> None:
    before = used_memory(fresh.port)
    with connect(fresh.port, 30) as s:
        s.sendall(b"GETJOB TIMEOUT 0 FROM emptyq\r\n")
        time.sleep(0.1)
        block = b"x" * (1 << 20)
        s.settimeout(3)  # a send blocked 3 s: the node stopped reading
        try:
            for _ in range(300):  # 300 MB
                s.sendall(block)
        except OSError:
            pass  # stopped reading, or closed for a limit: fine
        grown = used_memory(fresh.port) - before
    assert grown < 150 << 20, f"RSS grew {grown >> 20} MB while the client was blocked"


# Fixed SERVER BUG: inline commands sent while the client is blocked are parsed in quadratic
# time once it unblocks (inline_buf is re-sliced after every line): 2 MB of 'PING' lines stall
# the whole node ~9 s, 4 MB ~39 s
def test_inline_backlog_of_a_blocked_client_is_processed_in_linear_time(fresh: FuzzNode) -> None:
    n = 2_000_000 // 6
    with connect(fresh.port, 120) as s:
        s.sendall(b"GETJOB TIMEOUT 300 FROM emptyq\r\n")
        time.sleep(0.05)
        s.sendall(b"PING\r\n" * n)
        time.sleep(0.5)  # the GETJOB times out, the backlog runs
        waited = ping_latency(fresh.port, 120)
        got, expected = 0, len(b"*-1\r\n") + 7 * n
        s.settimeout(120)
        while got < expected:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
    assert waited < 2.0, f"another client waited {waited:.1f}s for PONG"


# Fixed SERVER BUG: the node neither raises its open-files limit to maxclients + 32 nor lowers
# maxclients to fit (Redis/Disque do both): past the limit, connections are reset, closed
# without a word, or left hanging, instead of getting '-ERR max number of clients reached', and
# nothing is logged
def test_connections_beyond_the_open_files_limit_get_an_error(tmp_path) -> None:
    node = FuzzNode(tmp_path / "node", nofile=128)
    node.start()
    socks: list[socket.socket] = []
    outcomes: Counter = Counter()
    try:
        for _ in range(200):
            try:
                s = connect(node.port)
                socks.append(s)
                s.sendall(b"PING\r\n")
            except OSError as exc:
                outcomes[f"connect: {type(exc).__name__}"] += 1
        for s in socks:
            s.settimeout(3)
            try:
                data = s.recv(100)
            except TimeoutError:
                outcomes["no answer"] += 1
                continue
            except OSError as exc:
                outcomes[type(exc).__name__] += 1
                continue
            outcomes[
                {
                    b"+PONG\r\n": "PONG",
                    b"-ERR max number of clients reached\r\n": "max clients error",
                }.get(data, "closed" if not data else repr(data[:40]))
            ] += 1
        bad = {k: v for k, v in outcomes.items() if k not in ("PONG", "max clients error")}
        assert not bad, f"200 connections to a node limited to 128 files: {dict(outcomes)}"
    finally:
        close_all(socks)
        node.terminate()


# Fixed SERVER BUG: a multibulk request with simple-string elements ('*1\r\n+PING\r\n', accepted
# as bulk strings) followed by an inline command in the same read: the inline recovery assumed
# canonical encoding, so started at the wrong byte, and failed with a protocol error
def test_inline_after_non_canonical_multibulk(node: Node) -> None:
    data, _ = send_chunks(node.port, [b"*1\r\n+PING\r\n*1\r\n+PING\r\nPING\r\n"], quiet=0.3)
    assert data == b"+PONG\r\n" * 3, data


# Fixed SERVER BUG: array counts hiredis allocates at once still reached it wherever the check
# did not see a header (it looked for '\n*' and 7 digits, and its walk stopped at anything but
# '$' elements): after a simple-string element, with another aggregate type, cut by the end of
# a write, right after a bulk string followed by 2 bytes other than CRLF (hiredis does not
# check them), or 1000 nested arrays of 999999 (6 digits): each stalled the node 2-4 s
@pytest.mark.parametrize(
    "writes",
    [
        [b"*2\r\n+PING\r\n*2147483648\r\n"],
        [b"*1\r\n$4\r\nPING\r\n~2147483648\r\n"],
        [b"*1\r\n$4\r\nPING\r\n*1\r\n>99999999\r\n"],
        [b"*1\r\n$4\r\nPING\r\n*21", b"47483648\r\n"],
        [b"*1\r\n$1\r\nxyz*2147483648\r\n"],
        [b"*999999\r\n" * 1000],
        [b"*1\r\n$4\r\nPING\r\n" * 20 + b"*2\r\n$1\r\nx\r\n*999999\r\n" * 1000],
    ],
    ids=[
        "after-simple-string",
        "set",
        "nested-push",
        "cut-count",
        "after-bulk-without-crlf",
        "deep-6-digits",
        "after-a-pipeline",
    ],
)
def test_array_counts_hiredis_would_allocate_are_refused(fresh: FuzzNode, writes) -> None:
    baseline = pipeline_seconds(fresh.port)
    with connect(fresh.port, 60) as s:
        for data in writes:
            s.sendall(data)
            time.sleep(0.05)
        waited = ping_latency(fresh.port)
        reply, closed = read_for(s, quiet=0.3)
    # The stall may also come when the lists are freed, at the node's next garbage
    # collection, which a pipeline triggers.
    took = pipeline_seconds(fresh.port)
    assert waited < 1.0 and took < baseline * 3 + 1.0, (
        f"PING waited {waited:.1f}s, 30k PINGs took {took:.1f}s (normally {baseline:.1f}s)"
    )
    assert b"-ERR Protocol error" in reply and closed, reply[-200:]
    assert "Traceback" not in fresh.stderr_text()
