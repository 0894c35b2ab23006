"""dialect.py: our bus messages as Disque 1.0-rc1's clusterMsg and back (#39)."""

from __future__ import annotations

import time

import pytest
from inprocess import new_server

from disque_server.clock import now_ms
from disque_server.cluster import clustermsg as cm
from disque_server.cluster import dialect
from disque_server.cluster.bus import BusLink
from disque_server.cluster.node import C_NODE, OURS, ClusterNode
from disque_server.job import ACKED, ACTIVE, FIELDS, Job, job_to_fields
from disque_server.resp import bulk_array
from disque_server.serialize import serialize_job
from disque_server.server import Server

ME = b"a" * 40
OTHER = b"b" * 40


def header(mtype: bytes, flags: bytes = b"-") -> list[bytes]:
    return [mtype, ME, b"7711", flags]


def back(data: bytes) -> list[bytes]:
    parts = dialect.to_ours(cm.decode(data))
    assert parts is not None
    return parts


def test_gossip_from_clustermsg_leaves_a_known_tls_port_alone() -> None:
    """clusterMsg has no room for our TLS port: nothing follows the entries, so a
    marked PING from a node of ours (its first messages) does not reset the TLS
    port its RESP messages told (the payload's length stays a multiple of 4)."""
    ping = header(b"PING") + [OTHER, b"127.0.0.1", b"7712", b"pfail", b"7443"]
    [data] = dialect.to_clustermsgs(ping, dialect.MARK)
    parts = back(data)
    assert parts[:4] == header(b"PING")
    assert parts[4:] == [OTHER, b"127.0.0.1", b"7712", b"pfail"]
    assert cm.decode(data).mark == dialect.MARK


def test_gossip_about_a_node_with_its_own_bus_port_is_not_told_to_disque() -> None:
    ping = header(b"PONG", b"leaving") + [OTHER, b"127.0.0.1", b"7712@9000", b"-", b"0"]
    [data] = dialect.to_clustermsgs(ping, b"")
    msg = cm.decode(data)
    assert msg.gossip == [] and msg.flags & cm.NODE_LEAVING
    assert back(data)[3] == b"leaving"


def test_many_jobs_become_one_message_each_and_back() -> None:
    jobs = []
    for i in range(3):
        job = Job(b"D-aaaaaaaa-%024d-05a1" % i, ACTIVE, int(time.time()) + 100, 30)
        job.queue, job.body, job.nodes_delivered = b"q", b"body %d" % i, (ME, OTHER)
        jobs.append(job)
    fields = [f for job in jobs for f in job_to_fields(job)]
    messages = dialect.to_clustermsgs(header(b"REPLJOB") + fields, b"")
    assert len(messages) == 3  # Disque's REPLJOB takes exactly one job
    for job, data in zip(jobs, messages, strict=True):
        got = back(data)[4:]
        assert len(got) == FIELDS and got[0] == job.id and got[2] == job.body
        assert got[11] == ME + b" " + OTHER
    gotjobs = dialect.to_clustermsgs(header(b"GOTJOB") + [j.id for j in jobs], b"")
    assert [cm.decode(m).job_id for m in gotjobs] == [j.id for j in jobs]


def test_values_of_job_id_messages_round_trip() -> None:
    jid = b"D-aaaaaaaa-" + b"x" * 24 + b"-05a1"
    for mtype, value in (
        (b"SETACK", b"3"),
        (b"GOTACK", b"1"),
        (b"GOTACK", b"0"),
        (b"ENQUEUE", b"5"),
    ):
        [data] = dialect.to_clustermsgs(header(mtype) + [jid, value], b"")
        assert back(data)[4:] == [jid, value]
    for count, flag in ((b"nack", cm.INCR_NACKS), (b"deliv", cm.INCR_DELIV), (b"-", 0)):
        [data] = dialect.to_clustermsgs(header(b"QUEUED") + [jid, count], b"")
        assert cm.decode(data).mflags == flag and back(data)[4:] == [jid, count]


def test_what_disque_has_no_room_for_is_not_sent() -> None:
    jid = b"D-aaaaaaaa-" + b"x" * 24 + b"-05a1"
    assert dialect.to_clustermsgs(header(b"POSTPONE") + [jid, b"1000"], b"") == []
    assert dialect.to_clustermsgs(header(b"YOURJOBS") + [b"q"], b"") == []  # "nothing for you"


def test_a_link_up_after_its_node_spoke_writes_the_nodes_dialect() -> None:
    """Which bus a node speaks can be learned while our link to it connects: its
    first message comes on its own link after our link was made (for a node not
    heard from: clusterMsg with the mark) and before the link is the node's. The
    link writes RESP once up. It used to write clusterMsg until the peer's reply
    on it, and POSTPONE (NACK ... DELAY), which clusterMsg has no room for, was
    dropped meanwhile: test_nack_delay_in_a_cluster's flake, a copy re-queued
    before the delay."""
    cluster = new_server().cluster
    node = ClusterNode(OTHER, "127.0.0.1", 7712)
    cluster.nodes[OTHER] = node
    link = BusLink(cluster, node)  # made when the connection is (the protocol factory)
    assert link.speaks_c and link.mark == dialect.MARK
    node.kind = OURS  # (sender_of: a message from it, meanwhile)
    cluster.link_up(node, link)
    assert node.link is link
    assert not link.speaks_c


def test_a_link_up_to_a_disque_node_writes_clustermsg_without_the_mark() -> None:
    cluster = new_server().cluster
    node = ClusterNode(OTHER, "127.0.0.1", 7712)
    cluster.nodes[OTHER] = node
    link = BusLink(cluster, node)
    node.kind = C_NODE
    cluster.link_up(node, link)
    assert link.speaks_c and link.mark == b""


def c_stream(mark: bytes) -> tuple[bytes, list[Job]]:
    """clusterMsg on a link: three REPLJOBs, three GOTJOBs (about jobs not here),
    two more REPLJOBs: three runs, eight messages (``mark``: from a node of ours
    not yet known to be ours, as dialect.MARK says)."""
    jobs = []
    for i in range(5):
        job = Job(b"D-bbbbbbbb-%024d-05a1" % i, ACTIVE, int(time.time()) + 100, 30)
        job.queue, job.body, job.nodes_delivered = b"q", b"body %d" % i, (ME, OTHER)
        jobs.append(job)
    messages = dialect.RepljobMessages()
    repljobs = [
        messages.message(OTHER, 7712, False, serialize_job(job, storage=False), mark)
        for job in jobs
    ]
    unknown = [b"D-cccccccc-%024d-05a1" % i for i in range(3)]
    gotjobs = dialect.to_clustermsgs([b"GOTJOB", OTHER, b"7712", b"-", *unknown], mark)
    return b"".join(repljobs[:3] + gotjobs + repljobs[3:]), jobs


def server_knowing_other(kind: int) -> Server:
    """A node that knows OTHER as a node of that kind (and links to it no time soon)."""
    server = new_server()
    node = ClusterNode(OTHER, "127.0.0.1", 7712)
    node.kind = kind
    node.connect_attempt = now_ms() + 3_600_000  # (no link attempt from a unit test)
    server.cluster.nodes[OTHER] = node
    return server


def read_in_pieces(link: BusLink, stream: bytes, size: int) -> None:
    """The stream read by the link ``size`` bytes at a time."""
    for i in range(0, len(stream), size):
        link.data_received(stream[i : i + size])


@pytest.mark.parametrize("size", [1, 7, 144, 200, 1000, 1 << 20])
@pytest.mark.parametrize("kind", [C_NODE, OURS])
def test_clustermsgs_read_the_same_however_the_reads_split_them(size: int, kind: int) -> None:
    """A run of clusterMsgs of one sender is handled as one (bus.read_clustermsgs),
    looked at as bytes; a message split between reads is held until its end
    comes. A node of ours (its clusterMsgs marked) then switches to RESP."""
    server = server_knowing_other(kind)
    cluster = server.cluster
    stream, jobs = c_stream(b"" if kind == C_NODE else dialect.MARK)
    if kind == OURS:
        gotjob = [b"GOTJOB", OTHER, b"7712", b"-", b"D-dddddddd-" + b"0" * 24 + b"-05a1"]
        stream += bulk_array(gotjob)
    link = BusLink(cluster, None)
    read_in_pieces(link, stream, size)
    assert cluster.messages_received == (8 if kind == C_NODE else 9)
    for job in jobs:
        copy = server.jobs.lookup(job.id)
        assert copy is not None and copy.body == job.body and copy.queue == b"q"
    assert link.peer_kind == kind and cluster.nodes[OTHER].kind == kind
    if kind == C_NODE:
        assert link.c_input == bytearray()  # nothing held after the last message
    else:
        assert link.c_input is None  # RESP from then on


@pytest.mark.parametrize("size", [1, 50, 188, 300, 1 << 20])
def test_runs_of_job_id_messages_are_read_whatever_their_headers(size: int) -> None:
    """SETACKs and DELJOBs of a C node, one a job: those with the header of the last
    run read (in this read or an earlier one, with other messages between) go on
    with it, read by their ID (and aux) alone; one with another header (its sender
    leaving) starts a run of its own, and the first header after it is decoded
    again. Every message is counted and acted on."""
    server = server_knowing_other(C_NODE)
    cluster = server.cluster
    repljobs, jobs = c_stream(b"")

    def message(mtype: bytes, flags: bytes, *payload: bytes) -> bytes:
        [data] = dialect.to_clustermsgs([mtype, OTHER, b"7712", flags, *payload], b"")
        return data

    setacks = [
        message(b"SETACK", flags, job.id, b"2")
        for job, flags in zip(jobs, (b"-", b"-", b"leaving", b"-", b"-"), strict=True)
    ]
    ping = message(b"PING", b"-")
    deljobs = [message(b"DELJOB", b"-", job.id) for job in jobs[:3]]
    stream = b"".join([repljobs, setacks[0], ping, *setacks[1:], deljobs[0], ping, *deljobs[1:]])
    link = BusLink(cluster, None)
    read_in_pieces(link, stream, size)
    assert cluster.messages_received == 8 + 5 + 3 + 2
    assert [server.jobs.lookup(job.id) for job in jobs[:3]] == [None] * 3
    for job in jobs[3:]:
        copy = server.jobs.lookup(job.id)
        assert copy is not None and copy.state == ACKED
    assert link.c_input == bytearray()


@pytest.mark.parametrize("size", [1, 100, 1 << 20])
def test_a_repljob_that_does_not_deserialize_is_skipped_and_its_run_goes_on(size: int) -> None:
    """The jobs of a run's REPLJOBs are read where they are in the read: one that is
    not a job (here its ID is not a job ID) is skipped, as Disque skips it, and the
    messages after it are read."""
    server = server_knowing_other(C_NODE)
    cluster = server.cluster
    stream, jobs = c_stream(b"")
    at = stream.index(jobs[1].id)
    stream = stream[:at] + b"X" + stream[at + 1 :]
    link = BusLink(cluster, None)
    read_in_pieces(link, stream, size)
    assert [server.jobs.lookup(job.id) is not None for job in jobs] == [True, False] + [True] * 3
    assert link.c_input == bytearray()
