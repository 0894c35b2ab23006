"""Protocol fuzzing of the client port with hypothesis.

Random and mutated RESP against one real node: valid commands with flipped,
inserted and deleted bytes, truncated frames, absurd lengths, random binary,
inline and multibulk interleaved, garbage after valid commands, all cut into
random writes. After every example the node must be alive, serve another
client, still hold the jobs added at the start (QLEN and SHOW), and never
answer "internal error" (a handler that raised). Its RSS must stay within
200 MB of where it started. ``FUZZ_EXAMPLES`` scales the example counts.
"""

from __future__ import annotations

import os

import hiredis
import pytest
from fuzz_util import (
    Health,
    close_all,
    connect,
    encode,
    examples,
    parse_replies,
    read_replies,
    send_chunks,
    used_memory,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.nodes import Node

pytestmark = pytest.mark.timeout(300)

FAKE_ID = b"D-0badc0de-" + b"A" * 24 + b"-05a1"
SETTINGS = dict(
    deadline=None,
    derandomize=not os.environ.get("FUZZ_RANDOM"),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

# Commands that cannot take the node down or change what the health check
# looks at (no SHUTDOWN, DEBUG, CONFIG SET, CLUSTER RESET/LEAVING, CLIENT KILL,
# MONITOR, BGREWRITEAOF; nothing on the sentinel queue).
SAFE_COMMANDS: list[list[bytes]] = [
    [w.encode() if isinstance(w, str) else w for w in c]
    for c in [
        ["PING"],
        ["PING", "hello"],
        ["QLEN", "fq"],
        ["QSTAT", "fq"],
        ["QPEEK", "fq", "3"],
        ["QPEEK", "fq", "-2"],
        ["ADDJOB", "fq", "body", "0"],
        ["ADDJOB", "fq", "b\x00\xff\r\n", "100", "RETRY", "1", "TTL", "10", "MAXLEN", "1000"],
        ["ADDJOB", "fq", "x", "0", "DELAY", "1", "TTL", "5", "ASYNC"],
        ["ADDJOB", "fq", "x", "0", "REPLICATE", "1", "RETRY", "0"],
        ["GETJOB", "NOHANG", "COUNT", "3", "FROM", "fq", "fq2"],
        ["GETJOB", "TIMEOUT", "5", "FROM", "fq"],
        ["GETJOB", "NOHANG", "WITHCOUNTERS", "FROM", "fq"],
        ["SHOW", FAKE_ID],
        ["ACKJOB", FAKE_ID],
        ["FASTACK", FAKE_ID],
        ["NACK", FAKE_ID],
        ["WORKING", FAKE_ID],
        ["DELJOB", FAKE_ID],
        ["ENQUEUE", FAKE_ID],
        ["DEQUEUE", FAKE_ID],
        ["QSCAN", "0", "COUNT", "10", "MINLEN", "0"],
        ["QSCAN", "0", "BUSYLOOP"],
        ["JSCAN", "0", "COUNT", "5", "QUEUE", "fq", "STATE", "queued", "REPLY", "all"],
        ["INFO"],
        ["INFO", "memory"],
        ["INFO", "all"],
        ["HELLO"],
        ["HELLO", "3"],
        ["HELLO", "2"],
        ["CLIENT", "LIST"],
        ["CLIENT", "SETNAME", "fuzz"],
        ["CLIENT", "GETNAME"],
        ["CONFIG", "GET", "maxclients"],
        ["COMMAND"],
        ["COMMAND", "COUNT"],
        ["TIME"],
        ["SLOWLOG", "GET", "2"],
        ["SLOWLOG", "LEN"],
        ["LATENCY", "LATEST"],
        ["PAUSE", "fq", "in"],
        ["PAUSE", "fq", "none"],
        ["PAUSE", "fq", "state"],
        ["CLUSTER", "INFO"],
        ["CLUSTER", "NODES"],
        ["CLUSTER", "MYID"],
        ["AUTH", "x"],
        ["LOADJOB", "x"],
        ["QUIT"],
        ["NOSUCHCOMMAND", "a", "b"],
        ["ADDJOB"],
        ["GETJOB", "FROM"],
    ]
]

GIANT_LENGTHS = [
    b"-2",
    b"-1",
    b"0",
    b"1048576",
    b"1048577",
    b"1e3",
    b" 5",
    b"+5",
    b"0x10",
    b"",
    b"99999999999",
    b"4294967295",
    b"4294967296",
    b"2147483648",
    b"536870913",
    b"18446744073709551616",
    b"9" * 25,
    b"9" * 5000,
]
GARBAGE = [
    b"\r\n",
    b"\n",
    b"\r",
    b"*",
    b"$",
    b"*\r\n",
    b"$\r\n",
    b"*-1\r\n",
    b"$-1\r\n",
    b"*1\r\n*1\r\n$1\r\nx\r\n",
    b"*2\r\n:1\r\n$4\r\nPING\r\n",
    b"*1\r\n+PING\r\n",
    b'"unbalanced',
    b"'x",
    b"\x00\x00",
    b"\xff\xfe",
    b"PING\r\nPING",
    b" \t \r\n",
    b"*1\r\n$4\r\nPI",
    b"~1\r\n",
    b"_\r\n",
    b"#t\r\n",
    b">1\r\n",
    b",1.5\r\n",
    b"(99999999999999999999\r\n",
    b"=5\r\ntxt:x\r\n",
    b"%1\r\n$1\r\nk\r\n",
    b"%2\r\n",
    b"%1\r\n*0\r\n",
    b"*2147483648\r\n",
    b"*1\r\n*4294967295\r\n",
    b"9" * 5000,
]

command = st.sampled_from(SAFE_COMMANDS)


@st.composite
def multibulk(draw) -> bytes:
    return encode(draw(command))


@st.composite
def inline(draw) -> bytes:
    args = draw(command)
    words = []
    for a in args:
        if all(32 < c < 127 and c not in b"\"'\\" for c in a) and a:
            words.append(a)
        else:
            words.append(b'"' + b"".join(b"\\x%02x" % c for c in a) + b'"')
    return b" ".join(words) + draw(st.sampled_from([b"\r\n", b"\n"]))


@st.composite
def mutated(draw) -> bytes:
    """A valid frame with a few byte-level mutations."""
    data = bytearray(draw(st.one_of(multibulk(), inline())))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(
            st.sampled_from(["flip", "insert", "delete", "truncate", "length", "dup", "garbage"])
        )
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 4))]
        elif kind == "truncate":
            del data[pos:]
        elif kind == "length":
            # Replace the first number after a '*' or '$' with an absurd one.
            marks = [i for i, c in enumerate(data) if c in b"*$"]
            if marks:
                i = draw(st.sampled_from(marks))
                end = data.find(b"\r", i)
                if end > 0:
                    data[i + 1 : end] = draw(st.sampled_from(GIANT_LENGTHS))
        elif kind == "dup":
            data += data[pos:]
        else:
            data[pos:pos] = draw(st.sampled_from(GARBAGE))
    return bytes(data)


frame = st.one_of(
    multibulk(), inline(), mutated(), st.sampled_from(GARBAGE), st.binary(max_size=64)
)
stream = st.lists(frame, min_size=1, max_size=8).map(b"".join)


@st.composite
def split(draw, data_strategy) -> list[bytes]:
    """The stream cut at random points into separate writes."""
    data = draw(data_strategy)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=4)))
    out, prev = [], 0
    for c in [*cuts, len(data)]:
        if c > prev:
            out.append(data[prev:c])
        prev = c
    return out or [b""]


def assert_no_internal_error(data: bytes, sent: list[bytes]) -> None:
    assert b"internal error" not in data, f"handler raised: {data[:300]!r} for {sent!r}"


@settings(max_examples=examples(1.0), **SETTINGS)
@given(chunks=split(stream))
def test_random_and_mutated_requests(fuzz_node: Node, health: Health, chunks: list[bytes]) -> None:
    data, _ = send_chunks(fuzz_node.port, chunks, gap=0.002)
    assert_no_internal_error(data, chunks)
    health.check(f"after {chunks!r}")


@settings(max_examples=examples(0.5), **SETTINGS)
@given(
    prefix=st.lists(st.one_of(multibulk(), inline()), min_size=1, max_size=5),
    tail=st.one_of(st.sampled_from(GARBAGE), st.binary(min_size=1, max_size=32), mutated()),
)
def test_valid_commands_are_answered_before_garbage(
    fuzz_node: Node, health: Health, prefix: list[bytes], tail: bytes
) -> None:
    """Commands before a protocol error are executed and answered, in order."""
    quits = [i for i, p in enumerate(prefix) if b"QUIT" in p.upper()]
    data, _ = send_chunks(fuzz_node.port, [b"".join(prefix) + tail], quiet=0.05)
    assert_no_internal_error(data, [*prefix, tail])
    replies = parse_replies(data)
    expected = quits[0] + 1 if quits else len(prefix)
    assert len(replies) >= expected, (prefix, tail, data[:400])
    health.check(f"after {prefix!r} + {tail!r}")


# Deterministic commands: the same reply alone, pipelined, or split anywhere.
DETERMINISTIC = [
    [w.encode() for w in c]
    for c in [
        ["PING"],
        ["QLEN", "dq"],
        ["QSTAT", "nosuchqueue"],
        ["SHOW", FAKE_ID.decode()],
        ["ACKJOB", "bad-id"],
        ["GETJOB", "NOHANG", "FROM", "dq"],
        ["NOSUCH"],
        ["QPEEK", "dq", "x"],
        ["CLUSTER", "MYID"],
        ["PING", "a b"],
        ["QPEEK", "dq", "1"],
        ["DEQUEUE", FAKE_ID.decode()],
    ]
]


@st.composite
def request_forms(draw) -> tuple[list[bytes], list[bytes]]:
    """Commands, each rendered as a multibulk or an inline line."""
    cmds = draw(st.lists(st.sampled_from(DETERMINISTIC), min_size=1, max_size=12))
    frames = []
    for c in cmds:
        if draw(st.booleans()) or any(not (32 < b < 127) or b in b"\"'" for a in c for b in a):
            frames.append(encode(c))
        else:
            frames.append(b" ".join(c) + draw(st.sampled_from([b"\r\n", b"\n"])))
    return cmds, frames


@settings(max_examples=examples(0.5), **SETTINGS)
@given(forms=request_forms(), data=st.data())
def test_pipelined_and_split_requests_get_the_same_replies(
    fuzz_node: Node, health: Health, forms, data
) -> None:
    cmds, frames = forms
    stream_bytes = b"".join(frames)
    cuts = sorted(
        data.draw(st.lists(st.integers(1, max(1, len(stream_bytes) - 1)), max_size=6, unique=True))
    )
    chunks = [
        stream_bytes[a:b]
        for a, b in zip([0, *cuts], [*cuts, len(stream_bytes)], strict=True)
        if b > a
    ]
    expected = []
    with connect(fuzz_node.port) as s:
        reader = hiredis.Reader()
        for c in cmds:
            s.sendall(encode(c))
            expected += read_replies(s, 1, reader)
    raw, _ = send_chunks(fuzz_node.port, chunks, gap=0.003, quiet=0.1, total=5)
    got_replies = parse_replies(raw)
    assert [repr(r) for r in got_replies] == [repr(r) for r in expected], (chunks, raw)
    health.check()


def test_memory_bounded_after_fuzzing(fuzz_node: Node, health: Health) -> None:
    """Runs after the hypothesis tests of this module: they must not have leaked."""
    grown = health.check_memory("after the client-protocol fuzz tests")
    print(f"\nclient fuzz: {health.checks} health checks, RSS grew {grown >> 20} MB")


@pytest.mark.timeout(120)
def test_giant_lengths_then_stall_do_not_allocate(fuzz_node: Node, health: Health) -> None:
    """A length announced but never sent must not be allocated up front."""
    before = used_memory(fuzz_node.port)
    socks = []
    try:
        for i in range(60):
            s = connect(fuzz_node.port)
            header = [
                b"*2\r\n$4\r\nPING\r\n$536870000\r\nabc",  # just below 512 MB
                b"*3\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$400000000\r\n",  # 400 MB body
                b"*1048576\r\n$3\r\nabc\r\n",  # 1M arguments
                b"*1\r\n*1048576\r\n*1048576\r\n*1048576\r\n",
            ][i % 4]
            s.sendall(header)
            socks.append(s)
        health.check("with 60 stalled giant requests")
        grown = used_memory(fuzz_node.port) - before
        assert grown < 100 << 20, f"RSS grew {grown >> 20} MB for 60 stalled requests"
    finally:
        close_all(socks)
    for length in (b"$99999999999", b"$536870913", b"*4294967295", b"*1048577"):
        frame = (
            b"*2\r\n$4\r\nPING\r\n" + length + b"\r\n" if length[:1] == b"$" else length + b"\r\n"
        )
        data, closed = send_chunks(fuzz_node.port, [frame], quiet=0.3, total=3)
        assert data.startswith(b"-ERR Protocol error"), (frame, data)
        assert closed, frame
    health.check("after absurd lengths")
