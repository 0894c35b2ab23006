"""Our node with a C Disque peer, played by the test with the codec
(disque_server/cluster/clustermsg.py), as Disque 1.0-rc1 writes its bus (#39).

A C node says one job per message and writes what an event-loop pass made
in one write: our node reads such a run (REPLJOB, SETACK, DELJOB ... of one
sender) as one message of many jobs (bus.read_clustermsgs). Checked here
with runs of 50 in one write: every job kept and confirmed (GOTJOB),
acknowledged (GOTACK), deleted; and what our node writes to a C node is
Disque's format, unmarked, one job per message.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from disque_server.cluster import clustermsg as cm
from disque_server.job import ACTIVE, Job
from disque_server.serialize import serialize_job
from testkit.nodes import Node, as_dict, free_port, messages_received, wait_for

FAKE = b"c0ffee00" * 5  # the C node the test plays
JOBS = 50


class Reader:
    """Whole messages from a socket, any number per read."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buf = b""

    def next(self, timeout: float = 10.0) -> cm.Message:
        deadline = time.monotonic() + timeout
        while not (length := cm.message_length(self.buf)) or len(self.buf) < length:
            self.conn.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.conn.recv(65536)
            assert chunk, "our node closed the bus connection"
            self.buf += chunk
        data, self.buf = self.buf[:length], self.buf[length:]
        return cm.decode(data)

    def collect(self, wanted: int, count: int) -> list[cm.Message]:
        got: list[cm.Message] = []
        deadline = time.monotonic() + 15
        while len(got) < count and time.monotonic() < deadline:
            msg = self.next()
            assert msg.mark == b"", "our node marked a message to a C node"
            if msg.type == wanted:
                got.append(msg)
        return got


def message(mtype: int, port: int, **fields: object) -> bytes:
    msg = cm.Message(mtype, FAKE, port, cm.NODE_MYSELF)
    for key, value in fields.items():
        setattr(msg, key, value)
    return cm.encode(msg)


@pytest.fixture
def peer(start_node) -> Iterator[tuple[Node, Reader, int, socket.socket]]:
    """Our node, met by the C node the test plays: the link our node opened to it
    (read with Reader), and the one the test opened (to send on)."""
    node = start_node()
    port = free_port()
    listener = socket.create_server(("127.0.0.1", port + 10000))
    out = socket.create_connection(("127.0.0.1", node.port + 10000))
    out.sendall(message(cm.MEET, port))
    listener.settimeout(10)
    inbound, _ = listener.accept()  # our node connects back to the C node it met
    reader = Reader(inbound)
    first = reader.next()
    # Its MEET was unmarked: our node knows a C node, and writes to it unmarked.
    assert first.type in (cm.MEET, cm.PING) and first.mark == b""
    inbound.sendall(message(cm.PONG, port))  # unmarked: a C node
    yield node, reader, port, out
    for s in (out, inbound, listener):
        s.close()


def test_runs_of_c_messages_in_one_write_each_job_handled(peer) -> None:
    node, reader, port, out = peer
    my_id = node.call("CLUSTER", "MYID")
    received = messages_received(node)
    ids = []
    repljobs = b""
    for i in range(JOBS):
        job = Job(b"D-c0ffee00-%024d-05a1" % i, ACTIVE, int(time.time()) + 600, 30)
        job.queue, job.body, job.repl = b"runs", b"job %d" % i, 2
        job.nodes_delivered = (FAKE, my_id)
        ids.append(job.id)
        repljobs += message(cm.REPLJOB, port, jobs=[serialize_job(job, storage=False)])
    out.sendall(repljobs)
    confirmed = reader.collect(cm.GOTJOB, JOBS)
    assert sorted(m.job_id for m in confirmed) == sorted(ids)
    for jid in ids:
        show = as_dict(node.call("SHOW", jid))
        assert show[b"state"] == b"active" and show[b"body"].startswith(b"job ")
    # SETACK (2 nodes may have it): each acknowledged, GOTACK known=1 for each.
    out.sendall(b"".join(message(cm.SETACK, port, job_id=jid, aux=2) for jid in ids))
    acked = reader.collect(cm.GOTACK, JOBS)
    assert sorted(m.job_id for m in acked) == sorted(ids) and all(m.aux == 1 for m in acked)
    assert all(as_dict(node.call("SHOW", jid))[b"state"] == b"acked" for jid in ids)
    out.sendall(b"".join(message(cm.DELJOB, port, job_id=jid) for jid in ids))
    wait_for(lambda: node.info("jobs")["registered_jobs"] == 0, message="every job deleted")
    assert messages_received(node) - received >= 3 * JOBS  # a run counts each message


def test_our_repljob_to_a_c_node_is_one_job_a_message(peer) -> None:
    node, reader, port, out = peer
    wait_for(
        lambda: "cluster_reachable_nodes:1" in node.call("CLUSTER", "INFO").decode(),
        message="the C node reachable",
    )
    jid = node.call("ADDJOB", "q", "body", "0", "REPLICATE", "2", "ASYNC")
    [repl] = reader.collect(cm.REPLJOB, 1)
    assert len(repl.jobs) == 1
    out.sendall(message(cm.GOTJOB, port, job_id=jid))
    assert as_dict(node.call("SHOW", jid))[b"state"] == b"queued"
