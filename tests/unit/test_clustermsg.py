"""Disque's binary bus message (disque_server/cluster/clustermsg.py): every type
encodes and decodes, and the length checks of Disque's clusterProcessPacket
refuse what C Disque would drop. tests/node/test_clustermsg_disque.py speaks it
with a live C node."""

from __future__ import annotations

import pytest

from disque_server.cluster import clustermsg as cm
from disque_server.job import ACTIVE, Job
from disque_server.serialize import deserialize_job, serialize_job

ME = b"a" * 40
OTHER = b"b" * 40
JID = b"D-aaaaaaaa-abcdefghijklmnopqrstuvwx-05a1"


def job() -> Job:
    j = Job(JID, ACTIVE, 2_000_000_000, 60)
    j.queue, j.body, j.ctime, j.nodes_delivered = b"q", b"body", 1_795_000_000_000_000_000, (ME,)
    return j


MESSAGES = [
    cm.Message(cm.MEET, ME, 7711, cm.NODE_MYSELF),
    cm.Message(cm.PING, ME, 7711, gossip=[cm.Gossip(OTHER, "10.0.0.2", 7712, cm.NODE_PFAIL, 5, 6)]),
    cm.Message(cm.PONG, ME, 7711, gossip=[cm.Gossip(OTHER, "::1", 7712)] * 3),
    cm.Message(cm.FAIL, ME, 7711, about=OTHER),
    cm.Message(cm.REPLJOB, ME, 7711, mflags=cm.NOREPLY, jobs=[serialize_job(job(), False)] * 2),
    cm.Message(cm.YOURJOBS, ME, 7711, jobs=[]),
    cm.Message(cm.SETACK, ME, 7711, job_id=JID, aux=3),
    cm.Message(cm.QUEUED, ME, 7711, job_id=JID, mflags=cm.INCR_DELIV),
    cm.Message(cm.NEEDJOBS, ME, 7711, aux=10, queue=b"emails"),
    cm.Message(cm.PAUSE, ME, 7711, aux=3, queue=b""),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: cm.TYPE_NAMES[m.type].decode())
def test_every_type_round_trips(msg: cm.Message) -> None:
    data = cm.encode(msg)
    assert cm.message_length(data) == len(data)
    decoded = cm.decode(data)
    assert decoded == msg


def test_the_layout_is_disques() -> None:
    """sizeof(clusterMsg) minus its data union is 144; a gossip entry is 104; a
    FAIL is 184 bytes and a job ID message 188, as C computes them."""
    assert cm.HEADER_LEN == 144 and cm.GOSSIP_LEN == 104
    assert len(cm.encode(cm.Message(cm.FAIL, ME, 1, about=OTHER))) == 184
    assert len(cm.encode(cm.Message(cm.DELJOB, ME, 1, job_id=JID))) == 188
    data = cm.encode(cm.Message(cm.PING, ME, 7711, cm.NODE_LEAVING, gossip=[]))
    assert data[:4] == b"DbuZ" and data[8:10] == b"\x00\x01"  # version 1, network order
    assert data[136:138] == b"\x1e\x1f"  # port 7711


def test_a_repljob_carries_jobs_that_deserialize() -> None:
    msg = cm.decode(cm.encode(MESSAGES[4]))
    copy, end = deserialize_job(msg.jobs[0], storage=False)
    assert end == len(msg.jobs[0]) and copy.id == JID and copy.body == b"body"


@pytest.mark.parametrize(
    ("mangle", "why"),
    [
        (lambda b: b"XbuZ" + b[4:], "signature"),
        (lambda b: b[:8] + b"\x00\x00" + b[10:], "version"),
        (lambda b: b[:-1], "totlen"),
        (lambda b: b[:4] + (len(b) + 104).to_bytes(4, "big") + b[8:] + b"\0" * 104, "layout"),
    ],
)
def test_what_disque_would_drop_is_refused(mangle, why: str) -> None:
    data = cm.encode(MESSAGES[1])
    with pytest.raises(cm.MessageError):
        cm.decode(mangle(data))


def test_jobs_that_overrun_their_message_are_refused() -> None:
    data = bytearray(cm.encode(MESSAGES[4]))
    data[cm.HEADER_LEN : cm.HEADER_LEN + 4] = (3).to_bytes(4, "big")  # numjobs 3, two there
    with pytest.raises(cm.MessageError, match="past the end"):
        cm.decode(bytes(data))
