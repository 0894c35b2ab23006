"""Protocol fuzzing of the cluster bus (client port + 10000) with hypothesis.

Random bytes, RESP arrays with wrong element types, unknown message types,
too-short arrays, messages from unknown senders and from a fake peer the
node knows (so that the handlers really run), REPLJOB/YOURJOBS with
malformed job fields, DELJOB/SETACK/GOTACK/QUEUED/... with bad IDs. After
every example the node must be alive, serve clients, keep the sentinel jobs
and have written no traceback to stderr.

The bus trusts its peers (as Disque's does): a peer may legitimately delete
a job with DELJOB or take jobs with NEEDJOBS. So the fuzzer never names
the sentinel jobs or their queue, and the ports it puts in MEET and gossip
are reserved here (bound, not listening), so the node under test never
reaches another test's node (and no address but loopback ones is ever
gossiped). Bugs it found have regression tests in test_server_bugs_bus.py.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator

import hiredis
import pytest
from fuzz_util import Health, call, connect, encode, examples, read_for, read_replies
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.nodes import Node, free_port

pytestmark = pytest.mark.timeout(300)

SETTINGS = dict(
    deadline=None,
    derandomize=not os.environ.get("FUZZ_RANDOM"),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

FAKE_PEER = b"f00dfeed" * 5  # a peer the node is made to know
TYPES = [
    b"MEET",
    b"PING",
    b"PONG",
    b"FAIL",
    b"REPLJOB",
    b"GOTJOB",
    b"ENQUEUE",
    b"WILLQUEUE",
    b"QUEUED",
    b"WORKING",
    b"SETACK",
    b"GOTACK",
    b"DELJOB",
    b"NEEDJOBS",
    b"YOURJOBS",
    b"PAUSE",
]
JOB_IDS = [b"D-f00dfeed-" + bytes([65 + i]) * 24 + b"-05a1" for i in range(4)] + [
    b"D-f00dfeed-" + b"B" * 24 + b"-0000",
    b"D-short",
    b"",
    b"x" * 40,
    b"D-" + b"-" * 38,
]
QUEUES = [b"bq", b"bq2", b"", b"\xff\x00"]
NUMBERS = [
    b"0",
    b"1",
    b"-1",
    b"3",
    b"100",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"99999999999999999999999",
    b"1e3",
    b"",
    b" 1",
    b"0x10",
    b"nan",
    b"\xff",
]


@pytest.fixture(scope="module")
def reserved_ports() -> Iterator[list[int]]:
    """Client ports whose bus port (+10000) is held by a bound, non-listening socket:
    connecting there is refused, and nobody else can listen there meanwhile."""
    socks, ports = [], []
    for _ in range(3):
        port = free_port()
        s = socket.socket()
        s.bind(("127.0.0.1", port + 10000))
        socks.append(s)
        ports.append(port)
    yield ports
    for s in socks:
        s.close()


@pytest.fixture(scope="module")
def bus_setup(fuzz_node: Node, health: Health, reserved_ports: list[int]) -> dict:
    """Make the node know FAKE_PEER (a MEET from it), after the sentinel jobs exist."""
    with connect(fuzz_node.port + 10000) as s:
        s.sendall(encode([b"MEET", FAKE_PEER, str(reserved_ports[0]).encode(), b"-"]))
        read_for(s, quiet=0.1)
    nodes = call(fuzz_node.port, "CLUSTER", "NODES").decode()
    assert FAKE_PEER.decode() in nodes, nodes
    myid = call(fuzz_node.port, "CLUSTER", "MYID")
    return {"myid": myid, "ports": [str(p).encode() for p in reserved_ports]}


hex_id = st.text("0123456789abcdef", min_size=40, max_size=40).map(str.encode)
odd_id = st.one_of(
    st.text("0123456789abcdefABCDEFxyz \n\r\t,:", min_size=40, max_size=40).map(str.encode),
    st.binary(min_size=40, max_size=40),
)
any_id = st.one_of(hex_id, hex_id, odd_id)


def sender_ids(myid: bytes):
    return st.one_of(
        st.just(FAKE_PEER),
        st.just(FAKE_PEER),
        any_id,
        st.just(myid),
        st.binary(max_size=39),
        st.binary(min_size=41, max_size=60),
    )


def ports(reserved: list[bytes]):
    return st.one_of(
        st.sampled_from(reserved),
        st.sampled_from(
            [
                b"65535",
                b"65530",
                b"99999",
                b"-1",
                b"",
                b"x",
                b"1.5",
                b"123456789012",
                b"9" * 5000,
                b"\xff",
            ]
        ),
    )


# Only loopback addresses, or strings that are no address at all: the node must
# never be led to connect anywhere else (nor to resolve a name).
IPS = [
    b"127.0.0.1",
    b"",
    b"::1",
    b"127.0.0.1 x\nyz",
    b"a\x00b",
    b"\xff\xfe",
    b"1.2.3",
    b"::::::::",
    b"127.0.0.1:5",
]


def gossip(reserved: list[bytes]):
    entry = st.tuples(
        any_id,
        st.sampled_from(IPS),
        ports(reserved),
        st.sampled_from([b"-", b"pfail", b"fail", b"leaving", b"fail,leaving", b"", b"\xff"]),
    )
    return st.lists(entry, max_size=4).map(lambda es: [x for e in es for x in e])


@st.composite
def job_fields(draw) -> list[bytes]:
    fields = [
        draw(st.sampled_from(JOB_IDS)),
        draw(st.sampled_from(QUEUES)),
        draw(st.binary(max_size=32)),
    ]
    fields += [draw(st.sampled_from(NUMBERS)) for _ in range(8)]
    fields.append(b" ".join(draw(st.lists(st.sampled_from([FAKE_PEER, b"x", b""]), max_size=3))))
    if draw(st.integers(0, 4)) == 0:  # sometimes too few or too many fields
        cut = draw(st.integers(0, 14))
        fields = (fields + [b"extra", b"extra"])[:cut]
    return fields


def payloads(reserved: list[bytes]):
    return st.one_of(
        gossip(reserved),
        job_fields(),
        st.lists(job_fields(), min_size=1, max_size=3).map(lambda js: [x for j in js for x in j]),
        st.tuples(st.sampled_from(JOB_IDS), st.sampled_from(NUMBERS)).map(list),
        st.tuples(st.sampled_from(QUEUES), st.sampled_from(NUMBERS)).map(list),
        st.lists(st.binary(max_size=20), max_size=6),
    )


@st.composite
def bus_message(draw, myid: bytes, reserved: list[bytes]) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(min_size=1, max_size=80))
    if kind == 1:  # too short
        parts = draw(st.lists(st.binary(max_size=10), max_size=3))
        return encode(parts)
    if kind == 2:  # wrong element types
        junk = draw(
            st.sampled_from(
                [
                    b":1\r\n",
                    b"*0\r\n",
                    b"$-1\r\n",
                    b"*-1\r\n",
                    b"+ok\r\n",
                    b"-err\r\n",
                    b"*1\r\n$1\r\nx\r\n",
                    b"_\r\n",
                    b",1.5\r\n",
                    b"%1\r\n*0\r\n$1\r\nx\r\n",
                    b"*1048577\r\n",
                ]
            )
        )
        # (not a nested '*2147483648': an open SERVER BUG, see test_server_bugs_bus.py)
        return b"*5\r\n$4\r\nPING\r\n$40\r\n" + FAKE_PEER + b"\r\n" + junk * 3
    mtype = draw(st.one_of(st.sampled_from(TYPES), st.sampled_from(TYPES), st.binary(max_size=10)))
    parts = [
        mtype,
        draw(sender_ids(myid)),
        draw(ports(reserved)),
        draw(st.sampled_from([b"-", b"leaving", b"", b"\xff"])),
    ]
    parts += draw(payloads(reserved))
    data = encode(parts)
    if kind == 3:  # truncated
        data = data[: draw(st.integers(0, len(data)))]
    return data


@settings(max_examples=examples(1.0), **SETTINGS)
@given(data=st.data())
def test_random_bus_messages(fuzz_node: Node, health: Health, bus_setup: dict, data) -> None:
    msgs = data.draw(
        st.lists(bus_message(bus_setup["myid"], bus_setup["ports"]), min_size=1, max_size=5)
    )
    send_on_bus(fuzz_node, msgs)
    health.check(f"after bus messages {msgs!r}")


def send_on_bus(node: Node, msgs: list[bytes]) -> None:
    """The messages on one bus connection, then whatever the node answers."""
    with connect(node.port + 10000) as s:
        for m in msgs:
            try:
                s.sendall(m)
            except OSError:
                break  # the node closed a link it found broken
        read_for(s, quiet=0.01, total=0.5)


@settings(max_examples=examples(0.3), **SETTINGS)
@given(
    length=st.sampled_from(
        [b"99999999999", b"4294967295", b"1048576", b"536870912", b"-5", b"1000001"]
    ),
    where=st.sampled_from(["array", "bulk"]),
)
def test_bus_giant_lengths(
    fuzz_node: Node, health: Health, bus_setup: dict, length: bytes, where: str
) -> None:
    frame = (
        (b"*" + length + b"\r\n")
        if where == "array"
        else (b"*5\r\n$4\r\nPING\r\n$40\r\n" + FAKE_PEER + b"\r\n$" + length + b"\r\nabc")
    )
    with connect(fuzz_node.port + 10000) as s:
        s.sendall(frame)
        read_for(s, quiet=0.05, total=0.3)
        health.check(f"while a bus link holds {frame!r}")


# ---- Disque 1.0-rc1's clusterMsg (mixed clusters: cluster/dialect.py) -----------------


@st.composite
def clustermsg_bytes(draw, myid: bytes, reserved: list[bytes]) -> bytes:
    """A clusterMsg as Disque's encoder writes it (random fields, sender often
    FAKE_PEER), then maybe cut or with a few bytes overwritten."""
    from disque_server.cluster import clustermsg as cm
    from disque_server.job import ACTIVE, Job
    from disque_server.serialize import serialize_job

    mtype = draw(st.integers(0, 17))
    sender = draw(st.one_of(st.just(FAKE_PEER), st.just(FAKE_PEER), hex_id, st.just(myid)))
    port = int(draw(st.sampled_from(reserved)))
    msg = cm.Message(
        mtype if mtype <= cm.PAUSE else cm.PING,
        sender,
        draw(st.sampled_from([port, 0, 65535])),
        draw(st.integers(0, 0xFFFF)),
        mflags=draw(st.integers(0, 7)),
        mark=draw(st.sampled_from([b"", b"disque-python/1", b"x"])),
    )
    msg.gossip = [
        cm.Gossip(draw(any_id), draw(st.sampled_from(["127.0.0.1", "", "::1", "x"])), p, f)
        for p, f in draw(
            st.lists(st.tuples(st.sampled_from([port, 0, 1]), st.integers(0, 0xFFFF)), max_size=3)
        )
    ]
    msg.about = draw(any_id)
    msg.job_id = draw(st.sampled_from(JOB_IDS[:4] + [b"x" * 40]))
    msg.aux = draw(st.sampled_from([0, 1, 3, 0xFFFFFFFF]))
    msg.queue = draw(st.sampled_from(QUEUES))
    jobs = []
    for _ in range(draw(st.integers(0, 2))):
        job = Job(draw(st.sampled_from(JOB_IDS[:4])), ACTIVE, int(time.time()) + 60, 5)
        job.queue, job.body = draw(st.sampled_from(QUEUES[:2])), draw(st.binary(max_size=16))
        job.nodes_delivered = (FAKE_PEER,)
        data = serialize_job(job, storage=False)
        if draw(st.integers(0, 3)) == 0:
            data = data[: draw(st.integers(0, len(data)))]
        jobs.append(data)
    msg.jobs = jobs
    data = cm.encode(msg)
    if mtype > cm.PAUSE:  # an unknown type (at offset 12): Disque logs and skips it
        data = data[:12] + mtype.to_bytes(2, "big") + data[14:]
    cut = draw(st.integers(0, 3))
    if cut == 0:
        data = data[: draw(st.integers(0, len(data)))]
    elif cut == 1:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at + 4 :]
    return data


@settings(max_examples=examples(1.0), **SETTINGS)
@given(data=st.data())
def test_random_clustermsg_messages(fuzz_node: Node, health: Health, bus_setup: dict, data) -> None:
    """What a C Disque node (or anything claiming to be one) may send: never a
    traceback, never a dead node, never a job of the sentinels' lost."""
    msgs = data.draw(
        st.lists(clustermsg_bytes(bus_setup["myid"], bus_setup["ports"]), min_size=1, max_size=5)
    )
    send_on_bus(fuzz_node, msgs)
    health.check(f"after clusterMsg messages {msgs!r}")


def test_stalled_giant_bus_messages_do_not_allocate(
    fuzz_node: Node, health: Health, bus_setup: dict
) -> None:
    socks = []
    try:
        for i in range(40):
            s = connect(fuzz_node.port + 10000)
            s.sendall(
                [
                    b"*999999\r\n$4\r\nPING\r\n",
                    b"*5\r\n$4\r\nPING\r\n$40\r\n" + FAKE_PEER + b"\r\n$900000000\r\nx",
                ][i % 2]
            )
            socks.append(s)
        health.check("with 40 stalled bus links")
        grown = health.check_memory("with 40 stalled giant bus messages")
        assert grown < 100 << 20
    finally:
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()


def test_bus_memory_bounded_after_fuzzing(fuzz_node: Node, health: Health, bus_setup: dict) -> None:
    grown = health.check_memory("after the cluster-bus fuzz tests")
    known = call(fuzz_node.port, "CLUSTER", "INFO").decode()
    print(
        f"\nbus fuzz: {health.checks} health checks, RSS grew {grown >> 20} MB; "
        + known.replace("\r\n", " ")
    )


# ---- job state machine: bus messages and client commands on a few shared jobs ----------

STATE_IDS = [b"D-f00dfeed-" + bytes([75 + i]) * 24 + b"-05a1" for i in range(3)]
STATE_QUEUES = [b"sq1", b"sq2"]


@st.composite
def valid_job(draw) -> list[bytes]:
    now = int(time.time())
    jid = draw(st.sampled_from(STATE_IDS))
    retry = draw(st.sampled_from([0, 1, 5]))
    qtime = (now * 1000 + draw(st.sampled_from([-5000, 0, 300, 60_000]))) if retry else 0
    return [
        jid,
        draw(st.sampled_from(STATE_QUEUES)),
        b"body",
        b"%d" % draw(st.sampled_from([1, 2, 3])),
        b"%d" % (now + draw(st.sampled_from([1, 3600]))),
        b"%d" % (now * 1000 * 1_000_000),
        b"0",
        b"%d" % retry,
        b"%d" % draw(st.integers(0, 2)),
        b"%d" % draw(st.integers(0, 2)),
        b"%d" % qtime,
        FAKE_PEER + draw(st.sampled_from([b"", b" " + b"1" * 40])),
    ]


@st.composite
def state_step(draw, myid: bytes, reserved: list[bytes]) -> tuple[str, list[bytes]]:
    jid = draw(st.sampled_from(STATE_IDS))
    header = [FAKE_PEER, reserved[0], draw(st.sampled_from([b"-", b"leaving"]))]
    bus = {
        "REPLJOB": lambda: draw(valid_job()),
        "YOURJOBS": lambda: [
            x for j in draw(st.lists(valid_job(), min_size=1, max_size=2)) for x in j
        ],
        "QUEUED": lambda: [jid, draw(st.sampled_from([b"nack", b"deliv", b"-"]))],
        "WORKING": lambda: [jid],
        "WILLQUEUE": lambda: [jid],
        "SETACK": lambda: [jid, draw(st.sampled_from([b"0", b"1", b"3"]))],
        "GOTACK": lambda: [jid, draw(st.sampled_from([b"0", b"1"]))],
        "DELJOB": lambda: [jid],
        "ENQUEUE": lambda: [jid, draw(st.sampled_from([b"0", b"2"]))],
        "NEEDJOBS": lambda: [
            draw(st.sampled_from(STATE_QUEUES)),
            draw(st.sampled_from([b"1", b"5"])),
        ],
        "PAUSE": lambda: [
            draw(st.sampled_from(STATE_QUEUES)),
            draw(st.sampled_from([b"0", b"1", b"2", b"3"])),
        ],
    }
    client = {
        "GETJOB": lambda: [b"GETJOB", b"NOHANG", b"COUNT", b"2", b"FROM", *STATE_QUEUES],
        "ACKJOB": lambda: [b"ACKJOB", jid],
        "FASTACK": lambda: [b"FASTACK", jid],
        "NACK": lambda: [b"NACK", jid],
        "ENQUEUE": lambda: [b"ENQUEUE", jid],
        "DEQUEUE": lambda: [b"DEQUEUE", jid],
        "WORKING": lambda: [b"WORKING", jid],
        "DELJOB": lambda: [b"DELJOB", jid],
        "PAUSE": lambda: [
            b"PAUSE",
            draw(st.sampled_from(STATE_QUEUES)),
            draw(st.sampled_from([b"none", b"in", b"out", b"all"])),
        ],
    }
    if draw(st.integers(0, 19)) == 0:
        return "wait", [b"%d" % draw(st.sampled_from([300, 1100]))]  # let timers fire
    if draw(st.booleans()):
        mtype = draw(st.sampled_from(sorted(bus)))
        return "bus", [mtype.encode(), *header, *bus[mtype]()]
    name = draw(st.sampled_from(sorted(client)))
    return "client", client[name]()


def job_view(port: int) -> tuple[dict[bytes, dict], dict[bytes, int], dict[bytes, list]]:
    jobs = {}
    for jid in STATE_IDS:
        reply = call(port, "SHOW", jid)
        assert not isinstance(reply, hiredis.ReplyError), (jid, reply)
        if reply:
            jobs[jid] = dict(zip(reply[::2], reply[1::2], strict=True))
    qlen = {q: call(port, "QLEN", q) for q in STATE_QUEUES}
    peek = {q: [item[1] for item in call(port, "QPEEK", q, 100)] for q in STATE_QUEUES}
    return jobs, qlen, peek


@settings(max_examples=examples(0.4), **SETTINGS)
@given(data=st.data())
def test_job_messages_keep_queues_consistent(
    fuzz_node: Node, health: Health, bus_setup: dict, data
) -> None:
    """Whatever the order of state-machine messages and commands on a few jobs, a job
    is in a queue exactly when SHOW says 'queued', and QLEN counts them."""
    steps = data.draw(
        st.lists(state_step(bus_setup["myid"], bus_setup["ports"]), min_size=1, max_size=12)
    )
    with connect(fuzz_node.port + 10000) as bus_link, connect(fuzz_node.port) as client:
        reader = hiredis.Reader()
        for kind, parts in steps:
            if kind == "wait":
                time.sleep(int(parts[0]) / 1000)
            elif kind == "bus":
                bus_link.sendall(encode(parts))
                call(fuzz_node.port, "PING")  # let the node read it first
            else:
                client.sendall(encode(parts))
                reply = read_replies(client, 1, reader)[0]
                assert b"internal error" not in repr(reply).encode(), (parts, reply)
    for q in STATE_QUEUES:
        call(fuzz_node.port, "PAUSE", q, "none")
    jobs, qlen, peek = job_view(fuzz_node.port)
    for q in STATE_QUEUES:
        queued = sorted(j for j, f in jobs.items() if f[b"state"] == b"queued" and f[b"queue"] == q)
        assert sorted(peek[q]) == queued, (q, peek[q], jobs, steps)
        assert qlen[q] == len(peek[q]), (q, qlen, peek, steps)
    health.check(f"after {steps!r}")
