"""A cluster of ours with nodes of two versions (#39: an upgrade in place between
versions of ours, as from C Disque): this checkout's nodes beside a node run from
the sources of the commit before REPLJOB carried serialized jobs
(``dialect.SERIALIZED_JOBS``), taken from this repository's history with
``git archive`` and run as pure Python. Jobs added on either version are
replicated to both, delivered and acknowledged across them, and every copy
collected; then the old node is upgraded on its directory.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import hiredis
import pytest

from disque_server.resp import bulk_array
from testkit.nodes import ClusterOfNodes, Node, as_dict, wait_for
from testkit.processes import ROOT, free_port, node_env

# The last commit whose nodes say "-" in their PONG and send our FIELDS fields.
BEFORE_SERIALIZED_JOBS = "725a287fc1998932a9e089c7b63f9c6b1d50f950"
CONFIG = {"cluster-node-timeout": "1500"}

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def old_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The node's sources at BEFORE_SERIALIZED_JOBS, unpacked (no compiled module)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs this repository's git history (a clone, not a copy)")
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{BEFORE_SERIALIZED_JOBS}^{{commit}}"],
        capture_output=True,
    )
    if found.returncode != 0:
        pytest.skip(f"commit {BEFORE_SERIALIZED_JOBS[:7]} is not in this clone (shallow?)")
    dest = tmp_path_factory.mktemp("old-node")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", BEFORE_SERIALIZED_JOBS, "disque_server"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


class OldNode(Node):
    """A node run from other sources (``python -m disque_server`` on them)."""

    def __init__(self, workdir: Path, source: Path) -> None:
        super().__init__(workdir, config=dict(CONFIG))
        self.env = node_env(source)


def pong_flags(node: Node) -> bytes:
    """The sender-flags of the PONG a node answers a MEET with (on that connection)."""
    with socket.create_connection(("127.0.0.1", node.port + 10000), timeout=10) as s:
        s.sendall(bulk_array([b"MEET", b"0dd0dd00" * 5, b"%d" % free_port(), b"-", b"0"]))
        reader = hiredis.Reader()
        while (msg := reader.gets()) is False or msg[0] != b"PONG":
            if msg is False:
                reader.feed(s.recv(65536))
    return msg[3]


def test_the_old_node_is_the_version_before(tmp_path: Path, old_source: Path) -> None:
    """What the test below relies on: the old node says "-", ours "serialized-jobs"."""
    old = OldNode(tmp_path / "old", old_source).start()
    new = Node(tmp_path / "new").start()
    try:
        assert pong_flags(old) == b"-" and pong_flags(new) == b"serialized-jobs"
    finally:
        old.terminate()
        new.terminate()


def owners(node: Node, jid: bytes) -> set[bytes]:
    return set(as_dict(node.call("SHOW", jid))[b"nodes-delivered"])


def add_everywhere(entry: Node, cluster: ClusterOfNodes) -> bytes:
    """ADDJOB REPLICATE 3 on ``entry``: a copy on every node when it returns."""
    jid = entry.call("ADDJOB", "versions", f"from {entry.port}", "5000", "REPLICATE", "3")
    ids = set(cluster.node_ids())
    for node in cluster:
        assert owners(node, jid) == ids, f"{node} holds no full copy of {jid!r}"
    return jid


def deliver_and_ack(consumer: Node, jid: bytes, cluster: ClusterOfNodes) -> None:
    """The job queued on ``consumer`` (ENQUEUE: it holds a copy), delivered and
    acknowledged there, and every copy collected."""
    assert consumer.call("ENQUEUE", jid) == 1

    def fetched() -> bool:
        reply = consumer.call("GETJOB", "NOHANG", "FROM", "versions")
        return bool(reply) and reply[0][1] == jid

    wait_for(fetched, message=f"{jid!r} delivered by {consumer}")
    assert consumer.call("ACKJOB", jid) == 1
    wait_for(
        lambda: all(node.call("SHOW", jid) is None for node in cluster),
        message=f"every copy of {jid!r} collected",
    )


def test_nodes_of_two_versions_replicate_deliver_and_collect(
    tmp_path: Path, old_source: Path
) -> None:
    old = OldNode(tmp_path / "old", old_source)
    new = [Node(tmp_path / f"new{i}", config=dict(CONFIG)) for i in range(2)]
    with ClusterOfNodes.running([old, *new]) as cluster:
        build = old.info("server")["disque_build_id"]
        assert "mypyc" not in str(build), "the old node must run its own sources"
        # Each version adds; each version delivers the other's.
        from_old = add_everywhere(old, cluster)
        from_new = add_everywhere(new[0], cluster)
        deliver_and_ack(new[1], from_old, cluster)
        deliver_and_ack(old, from_new, cluster)
        # The old node upgraded on its directory: same ID, the new bus on every link.
        old_id = old.call("CLUSTER", "MYID")
        old.terminate()
        upgraded = Node(old.dir, port=old.port, config=dict(CONFIG)).start()
        cluster.nodes[0] = upgraded
        assert upgraded.call("CLUSTER", "MYID") == old_id
        cluster.wait_full_mesh()
        deliver_and_ack(new[1], add_everywhere(upgraded, cluster), cluster)
