"""Cluster-bus bugs found by the bus fuzzer, one regression test each.

See test_server_bugs.py for the convention (a strict xfail while open).
"""

from __future__ import annotations

import socket
import time

import hiredis
import pytest
from fuzz_util import FuzzNode, call, connect, encode, read_for, read_replies
from test_server_bugs import pipeline_seconds

pytestmark = pytest.mark.timeout(60)


def closed_port() -> int:
    """A port nobody listens on, well outside the range tests give nodes."""
    for port in range(55100, 55400):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
            return port
    raise RuntimeError("no closed port")


def bus_send(node: FuzzNode, *messages: list[bytes]) -> bytes:
    with connect(node.port + 10000) as s:
        for m in messages:
            s.sendall(encode(m))
        data, _ = read_for(s, quiet=0.2)
    return data


def no_traceback(node: FuzzNode) -> None:
    err = node.stderr_text()
    assert "Traceback" not in err and "Fatal error" not in err, err[-2000:]


# Fixed SERVER BUG: a MEET whose 40-byte sender ID is not UTF-8 adds the node (with a stale
# cluster size), then CLUSTER NODES answers 'internal error', nodes.conf can no longer be
# saved, and SHUTDOWN dies with a UnicodeDecodeError traceback (exit 1)
def test_meet_with_binary_sender_id(fresh: FuzzNode) -> None:
    bus_send(fresh, [b"MEET", b"\xff" * 40, str(closed_port()).encode(), b"-"])
    reply = call(fresh.port, "CLUSTER", "NODES")
    assert isinstance(reply, bytes), reply
    no_traceback(fresh)
    assert fresh.terminate() == 0, fresh.stderr_text()[-2000:]


# Fixed SERVER BUG: node IDs and addresses learned from the bus (gossip entries, MEET) are not
# validated: an ID with a newline, or an IP with spaces, is written as is into CLUSTER NODES
# and nodes.conf, where it forges extra lines (here a second 'myself')
def test_gossip_cannot_inject_lines_into_nodes_conf(fresh: FuzzNode) -> None:
    peer, port = b"a" * 40, str(closed_port()).encode()
    forged = b"b" * 38 + b"\n" + b"c"
    ip = b"127.0.0.1 x\n" + b"d" * 40 + b" 1.2.3.4:5 myself,"
    bus_send(
        fresh,
        [b"MEET", peer, port, b"-"],
        [b"PING", peer, port, b"-", forged, b"127.0.0.1", port, b"-", b"e" * 40, ip, port, b"-"],
    )
    call(fresh.port, "CLUSTER", "SAVECONFIG")
    lines = call(fresh.port, "CLUSTER", "NODES").decode().splitlines()
    assert len(lines) <= 4, lines
    conf = (fresh.dir / "nodes.conf").read_text(errors="replace").splitlines()
    assert sum("myself" in line for line in conf) == 1, conf


# Fixed SERVER BUG: a sender port of more than 4300 digits in a MEET raises ValueError outside
# the handlers' try: a traceback on stderr ('Fatal error on transport')
def test_meet_with_giant_sender_port(fresh: FuzzNode) -> None:
    bus_send(fresh, [b"MEET", b"a" * 40, b"9" * 5000, b"-"])
    assert call(fresh.port, "PING") == b"PONG"
    no_traceback(fresh)


# Fixed SERVER BUG: ports above 65535 from MEET and gossip are accepted into the node table
# (CLUSTER NODES shows 127.0.0.1:99999) and connected to forever
def test_meet_with_out_of_range_port_is_ignored(fresh: FuzzNode) -> None:
    bus_send(fresh, [b"MEET", b"a" * 40, b"99999", b"-"])
    assert b"99999" not in call(fresh.port, "CLUSTER", "NODES")


# Fixed SERVER BUG: a RESP3 map with an unhashable key on the bus makes hiredis raise
# TypeError, which BusLink.data_received does not catch: a traceback per message on stderr
def test_bus_resp3_map_with_array_key(fresh: FuzzNode) -> None:
    with connect(fresh.port + 10000) as s:
        s.sendall(b"%1\r\n*0\r\n$1\r\nx\r\n")
        read_for(s, quiet=0.2)
    assert call(fresh.port, "PING") == b"PONG"
    no_traceback(fresh)


# Fixed SERVER BUG: cluster-password authentication can be bypassed by reflection: the node
# answers any CHALLENGE, even from an unauthenticated peer, with HMAC(password, nonce), the
# very proof it expects for its own challenge; so open two links, send link 1's nonce as a
# CHALLENGE on link 2 and replay the AUTH it returns on link 1
def test_cluster_password_cannot_be_bypassed_by_reflection(tmp_path) -> None:
    node = FuzzNode(tmp_path / "node", config={"cluster-password": "s3cret"})
    node.start()
    try:
        links = [connect(node.port + 10000) for _ in range(2)]
        readers = [hiredis.Reader(), hiredis.Reader()]
        challenges = [read_replies(s, 1, r)[0] for s, r in zip(links, readers, strict=True)]
        assert all(c[0] == b"CHALLENGE" for c in challenges), challenges
        links[1].sendall(encode([b"CHALLENGE", challenges[0][1]]))
        links[1].settimeout(2)
        try:
            proof = read_replies(links[1], 1, readers[1])[0]
        except (OSError, ConnectionError):
            proof = None
        if proof and proof[0] == b"AUTH":
            links[0].sendall(encode([b"AUTH", proof[1]]))
            links[0].sendall(encode([b"MEET", b"e" * 40, str(closed_port()).encode(), b"-"]))
            time.sleep(0.3)
        assert b"e" * 40 not in call(node.port, "CLUSTER", "NODES"), (
            "an attacker without the password joined a fake node"
        )
        for s in links:
            s.close()
    finally:
        node.terminate()


# Fixed SERVER BUG: YOURJOBS carrying a job this node holds only as a dummy ACK (an ACKJOB of a
# job it never saw: queue None) raises TypeError in on_yourjobs (queues.create(None)): the link
# is closed and the other jobs of the message are never imported
def test_yourjobs_with_a_job_known_only_as_a_dummy_ack(fresh: FuzzNode) -> None:
    peer, port = b"f" * 40, str(closed_port()).encode()
    bus_send(fresh, [b"MEET", peer, port, b"-"])  # a cluster: ACKJOB keeps dummy ACKs
    acked, other = (b"D-f00dfeed-" + c * 24 + b"-05a1" for c in (b"K", b"L"))
    assert call(fresh.port, "ACKJOB", acked) == 0
    now = int(time.time())
    fields = [
        b"sq1",
        b"body",
        b"3",
        b"%d" % (now + 3600),
        b"%d" % (now * 10**9),
        b"0",
        b"5",
        b"0",
        b"0",
        b"0",
        peer,
    ]
    bus_send(fresh, [b"YOURJOBS", peer, port, b"-", acked, *fields, other, *fields])
    assert call(fresh.port, "QLEN", "sq1") == 1, "the second job was not imported"
    no_traceback(fresh)


# Fixed SERVER BUG: an ENQUEUE from a peer re-queues a job this node already has acknowledged
# (on_enqueue only skips QUEUED jobs; Disque requires state < QUEUED): an acked job is
# delivered again
def test_enqueue_does_not_revive_an_acknowledged_job(fresh: FuzzNode) -> None:
    peer, port = b"f" * 40, str(closed_port()).encode()
    bus_send(fresh, [b"MEET", peer, port, b"-"])
    jid = b"D-f00dfeed-" + b"M" * 24 + b"-05a1"
    now = int(time.time())
    bus_send(
        fresh,
        [
            b"REPLJOB",
            peer,
            port,
            b"-",
            jid,
            b"eq",
            b"body",
            b"2",
            b"%d" % (now + 3600),
            b"%d" % (now * 10**9),
            b"0",
            b"60",
            b"0",
            b"0",
            b"%d" % (now * 1000 + 60_000),
            peer,
        ],
    )
    assert call(fresh.port, "SHOW", jid), "REPLJOB did not register the job"
    assert call(fresh.port, "ACKJOB", jid) == 1
    bus_send(fresh, [b"ENQUEUE", peer, port, b"-", jid, b"0"])
    assert call(fresh.port, "QLEN", "eq") == 0
    assert call(fresh.port, "GETJOB", "NOHANG", "FROM", "eq") is None


# Fixed SERVER BUG: a huge count of an array nested in a bus message ('*5\r\n$4\r\nPING\r\n
# *2147483648\r\n') was allocated by hiredis before any check: anyone who can reach the bus
# port (no password needed to send it) stalled the node 4-9 s per message. Also after a
# simple-string element, cut by the end of a write, right after a bulk string followed by 2
# bytes other than CRLF (hiredis does not check them), and 1000 nested arrays of 999999
@pytest.mark.parametrize(
    "writes",
    [
        [b"*5\r\n$4\r\nPING\r\n*2147483648\r\n"],
        [b"*5\r\n+PING\r\n*2147483648\r\n"],
        [b"*5\r\n$4\r\nPING\r\n*21", b"47483648\r\n"],
        [b"*5\r\n$4\r\nPINGxy*2147483648\r\n"],
        [b"*2147483648\r\n"],
        [b"*1\r\n" + b"*999999\r\n" * 1000],
    ],
    ids=[
        "nested",
        "after-simple-string",
        "cut-count",
        "after-bulk-without-crlf",
        "top-level",
        "deep-6-digits",
    ],
)
def test_bus_nested_huge_array_count_does_not_stall(fresh: FuzzNode, writes) -> None:
    baseline = pipeline_seconds(fresh.port)
    with connect(fresh.port + 10000, 60) as s:
        for data in writes:
            s.sendall(data)
            time.sleep(0.05)
        t0 = time.monotonic()
        assert call(fresh.port, "PING", timeout=60) == b"PONG"
        waited = time.monotonic() - t0
        _, closed = read_for(s, quiet=0.3)
    # The stall may also come when the list is freed, at the node's next garbage
    # collection, which a pipeline of PINGs triggers.
    took = pipeline_seconds(fresh.port)
    assert waited < 1.0 and took < baseline * 3 + 1.0, (
        f"PING waited {waited:.1f}s, 30k PINGs took {took:.1f}s (normally {baseline:.1f}s)"
    )
    assert closed, "the link that sent it stays open"
    no_traceback(fresh)


def test_bus_messages_cut_anywhere_are_read(fresh: FuzzNode) -> None:
    """What the array checks look at must not get in the way: a MEET then PINGs with
    simple strings and bytes that look like array headers in their elements (the sender
    flags: only 'leaving' means anything), cut at every 7th byte, are all read."""
    peer, port, flags = b"a" * 40, str(closed_port()).encode(), b"-*123~45>6%7|8*9"
    stream = encode([b"MEET", peer, port, b"-"]) + b"".join(
        b"*4\r\n+PING\r\n+%s\r\n$%d\r\n%s\r\n+%s\r\n" % (peer, len(port), port, flags)
        for _ in range(3)
    )

    def received() -> int:
        info = call(fresh.port, "CLUSTER", "INFO").decode()
        return int(info.split("cluster_stats_messages_received:")[1].split("\r\n")[0])

    before = received()
    for cut in range(1, len(stream), 7):
        with connect(fresh.port + 10000) as s:
            s.sendall(stream[:cut])
            time.sleep(0.01)
            s.sendall(stream[cut:])
            read_for(s, quiet=0.05)
    assert received() - before == 4 * len(range(1, len(stream), 7))
    no_traceback(fresh)
