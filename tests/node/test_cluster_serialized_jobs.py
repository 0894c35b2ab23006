"""REPLJOB between nodes of ours, old and new (#39): a node sends a job serialized
as Disque does (one part, serialize.py) on a link whose PONG said
``serialized-jobs`` (dialect.SERIALIZED_JOBS), our FIELDS fields on one whose PONG
did not (a node of ours from before that word), and reads both, mixed in one
message. The peer, of either version, is played by the test over RESP on two
real sockets: the link our node opened to it, and the one the test opened.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import hiredis
import pytest

from disque_server.job import ACTIVE, FIELDS, Job, job_to_fields
from disque_server.resp import bulk_array
from disque_server.serialize import deserialize_job, serialize_job
from testkit.nodes import Node, as_dict, free_port, wait_for

PEER = b"0dd0dd00" * 5  # the node of ours the test plays

pytestmark = pytest.mark.timeout(60)


class Peer:
    """The test's side of the two links, and its RESP messages."""

    def __init__(self, node: Node, port: int, out: socket.socket, inbound: socket.socket) -> None:
        self.node, self.port, self.out, self.inbound = node, port, out, inbound
        self.reader = hiredis.Reader()  # what our node writes on its link
        self.out_reader = hiredis.Reader()  # its PONGs on the test's link

    def header(self, mtype: bytes, flags: bytes = b"-") -> list[bytes]:
        return [mtype, PEER, b"%d" % self.port, flags]

    def send(self, sock: socket.socket, mtype: bytes, *payload: bytes, flags: bytes = b"-") -> None:
        sock.sendall(bulk_array(self.header(mtype, flags) + list(payload)))

    def next(self, wanted: bytes, on_out: bool = False, timeout: float = 10.0) -> list[bytes]:
        """The next message of that type our node wrote on its link to the peer (or,
        ``on_out``, on the test's link: PONGs)."""
        sock, reader = (self.out, self.out_reader) if on_out else (self.inbound, self.reader)
        deadline = time.monotonic() + timeout
        while True:
            msg = reader.gets()
            if msg is not False:
                if msg[0] == wanted:
                    return msg
                continue
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(65536)
            assert chunk, "our node closed a link to the peer"
            reader.feed(chunk)


@pytest.fixture
def meet_peer(start_node) -> Iterator[Callable[[bytes], Peer]]:
    """meet_peer(pong_flags): our node, met by a node of ours the test plays, which
    answers our node's first PING (or MEET) on its link with a PONG of those
    sender-flags: ``serialized-jobs`` from a current node, ``-`` from an older one."""
    sockets: list[socket.socket] = []

    def meet(pong_flags: bytes) -> Peer:
        node = start_node()
        port = free_port()
        listener = socket.create_server(("127.0.0.1", port + 10000))
        out = socket.create_connection(("127.0.0.1", node.port + 10000))
        sockets.extend((listener, out))
        out.sendall(bulk_array([b"MEET", PEER, b"%d" % port, b"-", b"0"]))
        listener.settimeout(10)
        inbound, _ = listener.accept()  # our node connects back to the node it met
        sockets.append(inbound)
        peer = Peer(node, port, out, inbound)
        first = peer.reader.gets()
        while first is False:
            peer.reader.feed(inbound.recv(65536))
            first = peer.reader.gets()
        assert first[0] in (b"MEET", b"PING"), first  # RESP: it knows a node of ours
        peer.send(inbound, b"PONG", b"0", flags=pong_flags)
        wait_for(
            lambda: "cluster_reachable_nodes:1" in node.call("CLUSTER", "INFO").decode(),
            message="the peer reachable",
        )
        return peer

    yield meet
    for s in sockets:
        s.close()


def test_jobs_go_serialized_to_a_node_that_reads_them(meet_peer) -> None:
    peer = meet_peer(b"serialized-jobs")
    jid = peer.node.call("ADDJOB", "q", "body", "0", "REPLICATE", "2", "ASYNC")
    repljob = peer.next(b"REPLJOB")
    [serialized] = repljob[4:]
    job, stop = deserialize_job(serialized, storage=False)
    assert stop == len(serialized)
    assert (job.id, job.queue, job.body, job.repl) == (jid, b"q", b"body", 2)
    assert set(job.nodes_delivered) == {PEER, peer.node.call("CLUSTER", "MYID")}


def test_jobs_go_as_fields_to_an_older_node_of_ours(meet_peer) -> None:
    peer = meet_peer(b"-")
    jid = peer.node.call("ADDJOB", "q", "body", "0", "REPLICATE", "2", "ASYNC")
    repljob = peer.next(b"REPLJOB")
    fields = repljob[4:]
    assert len(fields) == FIELDS and fields[0] == jid and fields[1:3] == [b"q", b"body"]


def a_job(n: int) -> Job:
    job = Job(b"D-0dd0dd00-%024d-05a1" % n, ACTIVE, int(time.time()) + 600, 30)
    job.queue, job.body, job.repl = b"mixed", b"job %d" % n, 2
    job.nodes_delivered = (PEER,)
    return job


def test_a_repljob_of_both_forms_is_read_and_a_bad_job_skipped(meet_peer) -> None:
    peer = meet_peer(b"-")
    first, second, third = a_job(1), a_job(2), a_job(3)
    payload = [
        serialize_job(first, storage=False),
        *job_to_fields(second),
        serialize_job(a_job(4), storage=False)[:-3],  # cut short: no copy, no GOTJOB
        b"x" * 90,  # not a job
        serialize_job(third, storage=False),
    ]
    peer.send(peer.out, b"REPLJOB", *payload)
    gotjob = peer.next(b"GOTJOB")
    assert sorted(gotjob[4:]) == sorted([first.id, second.id, third.id])
    for job in (first, second, third):
        show = as_dict(peer.node.call("SHOW", job.id))
        assert show[b"state"] == b"active" and show[b"body"] == job.body
    assert peer.node.call("SHOW", a_job(4).id) is None
    assert "Traceback" not in peer.node.log()


def test_a_leaving_node_says_leaving_in_its_pong(meet_peer) -> None:
    """An older node of ours reads only ``leaving`` in sender-flags: a leaving node's
    PONG says that, not what it reads."""
    peer = meet_peer(b"-")
    assert peer.next(b"PONG", on_out=True)[3] == b"serialized-jobs"  # (to the MEET)
    peer.node.call("CLUSTER", "LEAVING", "yes")
    peer.send(peer.out, b"PING", b"0")
    wait_for(
        lambda: peer.next(b"PONG", on_out=True)[3] == b"leaving",
        message="a PONG that says leaving",
    )
