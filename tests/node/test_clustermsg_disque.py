"""Disque's binary bus (disque_server/cluster/clustermsg.py) spoken with a live C
Disque 1.0-rc1 node (#39): its MEET decodes; our PONG completes its handshake
(the node it met takes our name); our REPLJOB gives it a job, which it confirms
with a GOTJOB; its PING decodes. The node under test is C's: the test plays the
other node with the codec, as a mixed cluster's node of ours will."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from disque_server.cluster import clustermsg as cm
from disque_server.job import ACTIVE, Job
from disque_server.serialize import serialize_job
from testkit.nodes import ReferenceNode, as_dict, free_port, wait_for

FAKE = b"f00d" * 10  # the name of the node the test plays


@pytest.fixture
def c_node(tmp_path: Path, reference_binary: str) -> Iterator[ReferenceNode]:
    node = ReferenceNode(tmp_path / "c", reference_binary, {"cluster-node-timeout": "5000"})
    node.start()
    yield node
    node.kill()


def receive(conn: socket.socket) -> cm.Message:
    """The next whole message on the connection."""
    buf = b""
    while not (length := cm.message_length(buf)) or len(buf) < length:
        chunk = conn.recv(65536)
        assert chunk, "the C node closed the bus connection"
        buf += chunk
    assert len(buf) == length, "more than one message at once: the test reads one"
    return cm.decode(buf)


def receive_type(conn: socket.socket, wanted: int) -> cm.Message:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        msg = receive(conn)
        if msg.type == wanted:
            return msg
    raise AssertionError(f"no {cm.TYPE_NAMES[wanted].decode()} from the C node")


def node_line(c_node: ReferenceNode, name: bytes) -> str:
    for line in c_node.call("CLUSTER", "NODES").decode().splitlines():
        if line.startswith(name.decode()):
            return line
    return ""


def test_a_c_node_meets_and_takes_a_job_over_disques_own_bus(c_node: ReferenceNode) -> None:
    port = free_port()
    with socket.create_server(("127.0.0.1", port + 10000)) as listener:
        listener.settimeout(15)
        assert c_node.call("CLUSTER", "MEET", "127.0.0.1", str(port)) == b"OK"
        conn, _ = listener.accept()
        conn.settimeout(15)
        with conn:
            meet = receive(conn)
            assert meet.type == cm.MEET and meet.port == c_node.port
            c_name = meet.sender
            assert c_name == c_node.call("CLUSTER", "MYID")
            assert meet.flags & cm.NODE_MYSELF

            conn.sendall(cm.encode(cm.Message(cm.PONG, FAKE, port)))
            wait_for(
                lambda: "handshake" not in node_line(c_node, FAKE) and node_line(c_node, FAKE),
                message="the C node knowing the test's node by its name",
            )
            assert f"127.0.0.1:{port}" in node_line(c_node, FAKE)

            job = Job(
                b"D-f00df00d-abcdefghijklmnopqrstuvwx-05a1", ACTIVE, int(time.time()) + 600, 60
            )
            job.queue, job.body, job.repl = b"mixed", b"from the codec", 2
            job.ctime = time.time_ns() // 1000 * 1000
            job.nodes_delivered = (FAKE, c_name)
            repljob = cm.Message(cm.REPLJOB, FAKE, port, jobs=[serialize_job(job, storage=False)])
            conn.sendall(cm.encode(repljob))
            gotjob = receive_type(conn, cm.GOTJOB)
            assert gotjob.job_id == job.id and gotjob.sender == c_name
            shown = as_dict(c_node.call("SHOW", job.id))
            assert shown[b"body"] == b"from the codec" and shown[b"queue"] == b"mixed"
            assert shown[b"state"] == b"active" and shown[b"retry"] == 60
            assert 590 <= shown[b"ttl"] <= 601  # (a message carries the TTL left, + 1)

            ping = receive_type(conn, cm.PING)  # C pings the node it met, as any other
            assert ping.sender == c_name and ping.port == c_node.port
