"""Which bus a peer speaks, and our messages as Disque 1.0-rc1's ``clusterMsg`` and back.

A mixed cluster (C Disque nodes and ours, as during a rolling upgrade) runs
on two wire formats. Our nodes frame messages as RESP arrays (``bus.py``);
Disque's bus is the binary ``clusterMsg`` (``clustermsg.py``). A node of ours
reads both on any link (by the first byte of each message: ``D`` or ``*``)
and writes to each peer in the format it reads:

- ``C_NODE``: a Disque node, written to in ``clusterMsg`` only;
- ``OURS``: a node of ours, written to in RESP;
- ``UNKNOWN``: not heard from yet: written to in ``clusterMsg`` carrying
  ``MARK`` in the header's unused bytes. Disque reads such a message as its
  own (it zeroes and ignores those bytes); a node of ours sees the mark and
  answers in RESP, and the link switches to RESP for good.

A link only ever switches from ``clusterMsg`` to RESP, never back: a
reader that has seen RESP on a link reads RESP from then on.

Everything else the handlers see is our message: ``to_ours`` turns a
``clusterMsg`` into the parts of ours (``[TYPE, sender-id, port, flags,
payload ...]``), ``to_clustermsgs`` turns ours into what a Disque node
reads. What Disque has no room for is not sent to it: POSTPONE (``NACK ...
DELAY``), gossip about nodes whose bus port is not port + 10000, our TLS port
and announced address; a message about many jobs becomes one per job (its
REPLJOB takes exactly one). With ``cluster-password`` or ``tls-cluster`` no
Disque node can join anyway: the bus is RESP only (``compatible``).
"""

from __future__ import annotations

from typing import Final

from disque_server.cluster import clustermsg
from disque_server.cluster.clustermsg import Gossip, Message
from disque_server.cluster.requeue import DELIVERY, NACK, NOCOUNT
from disque_server.config import Config
from disque_server.job import ACTIVE, FIELDS, Job, job_from_fields, job_to_fields
from disque_server.serialize import SerializeError, deserialize_job, serialize_job

MARK: Final = b"disque-python/1"

# What a node of ours puts in its PONG's sender-flags (bus.py) when not leaving:
# it reads a REPLJOB's jobs serialized as Disque does (serialize.py), one part a
# job. The link the PONG came on (ours to that node, which a restart closes) then
# sends them so; until then, and to a node of ours older than this word, our
# FIELDS fields (replication.py).
SERIALIZED_JOBS: Final = b"serialized-jobs"

# QUEUED's counter (requeue.py) as the INCR flags of Disque's
QUEUED_FLAGS: Final = {NACK: clustermsg.INCR_NACKS, DELIVERY: clustermsg.INCR_DELIV}

TYPE_OF: Final = {name: code for code, name in clustermsg.TYPE_NAMES.items()}
ID_AND_VALUE: Final = frozenset((b"SETACK", b"GOTACK", b"ENQUEUE"))  # [id, value] pairs
IDS_ONLY: Final = frozenset((b"GOTJOB", b"WORKING", b"DELJOB", b"WILLQUEUE"))
# Types whose handlers take many jobs in one message (a run of them is one).
RUN_TYPES: Final = frozenset(
    (
        clustermsg.REPLJOB,
        clustermsg.GOTJOB,
        clustermsg.WORKING,
        clustermsg.DELJOB,
        clustermsg.SETACK,
        clustermsg.GOTACK,
    )
)

FLAG_NAMES: Final = (
    (clustermsg.NODE_PFAIL, b"pfail"),
    (clustermsg.NODE_FAIL, b"fail"),
    (clustermsg.NODE_LEAVING, b"leaving"),
)


def compatible(config: Config) -> bool:
    """Whether Disque nodes can be on this node's bus: not with a bus password or
    TLS on the bus, which Disque does not have."""
    return not config["cluster-password"] and not config["tls-cluster"]


# ---- clusterMsg -> ours ----------------------------------------------------------------


def to_ours(msg: Message) -> list[bytes] | None:
    """The message as the parts our handlers take, or None when it says nothing to
    us (a type ours has no handler for, or jobs that do not deserialize)."""
    if msg.type not in clustermsg.TYPE_NAMES:
        return None
    parts = header_parts(msg)
    name = parts[0]
    mtype = msg.type
    if mtype in clustermsg.GOSSIP_TYPES:
        for g in msg.gossip:
            if not g.flags & (clustermsg.NODE_HANDSHAKE | clustermsg.NODE_NOADDR):
                parts += [g.name, g.ip.encode(), b"%d" % g.port, flag_names(g.flags)]
        # Nothing after the entries: clusterMsg has no room for a TLS port or an
        # announced address, so what a node of ours said of them in RESP stands
        # (a "0" here reset a peer's TLS port until its next RESP PING).
    elif mtype == clustermsg.FAIL:
        parts.append(msg.about)
    elif mtype in clustermsg.JOBS_TYPES:
        fields = jobs_fields(msg.jobs)
        if fields is None:
            return None
        parts += fields
    elif mtype in clustermsg.JOB_ID_TYPES:
        if name == b"QUEUED":
            parts += [msg.job_id, queued_count(msg.mflags)]
        else:
            parts += job_id_item(name, msg.job_id, msg.aux)
    else:  # NEEDJOBS, PAUSE
        parts += [msg.queue, b"%d" % msg.aux]
    return parts


def header_parts(msg: Message) -> list[bytes]:
    """Our header of a message of a known type: [TYPE, sender-id, port, flags]."""
    leaving = b"leaving" if msg.flags & clustermsg.NODE_LEAVING else b"-"
    return [
        clustermsg.TYPE_NAMES[msg.type],
        clustermsg.unpadded(msg.sender),
        b"%d" % msg.port,
        leaving,
    ]


def copies(jobs: list[bytes]) -> list[Job]:
    """Serialized jobs (a REPLJOB's, a YOURJOBS') as Jobs; none when one does not
    deserialize (Disque logs such a message and skips it). A REPLJOB's go to its
    handler as they are (``Cluster.handle_repljobs``), not through our fields."""
    result: list[Job] = []
    for data in jobs:
        try:
            job, _ = deserialize_job(data, storage=False)
        except SerializeError:
            return []
        result.append(job)
    return result


def jobs_fields(jobs: list[bytes]) -> list[bytes] | None:
    """Serialized jobs as our FIELDS fields each; None when one does not
    deserialize."""
    fields: list[bytes] = []
    deserialized = copies(jobs)
    if len(deserialized) != len(jobs):
        return None
    for job in deserialized:
        fields += job_to_fields(job)
    return fields


def job_id_item(name: bytes, job_id: bytes, aux: int) -> list[bytes]:
    """What a job ID message (not QUEUED) adds to our payload: the ID, and for
    SETACK, GOTACK and ENQUEUE its number."""
    if name == b"GOTACK":
        return [job_id, b"1" if aux else b"0"]
    if name in ID_AND_VALUE:
        return [job_id, b"%d" % aux]
    return [job_id]


def run_key(msg: Message) -> bytes:
    """What messages must share to be handled as one (``bus.read_clustermsgs``): the
    type, when its handler takes many jobs, and the sender as the header says it;
    b"" for a message handled on its own."""
    if msg.type not in RUN_TYPES:
        return b""
    return b"%d %d %d %s %s" % (msg.type, msg.port, msg.flags, msg.sender, msg.mark)


def flag_names(flags: int) -> bytes:
    """Disque's node flags as our gossip's ("pfail,leaving", or "-")."""
    return b",".join(name for bit, name in FLAG_NAMES if flags & bit) or b"-"


def queued_count(mflags: int) -> bytes:
    if mflags & clustermsg.INCR_NACKS:
        return NACK
    if mflags & clustermsg.INCR_DELIV:
        return DELIVERY
    return NOCOUNT


# ---- ours -> clusterMsg -----------------------------------------------------------------


def to_clustermsgs(parts: list[bytes], mark: bytes) -> list[bytes]:
    """Our message as what a Disque node reads: none, one or (one per job) many
    ``clusterMsg``. ``mark``: MARK toward a node not known yet, b"" toward Disque."""
    name, sender, port = parts[0], parts[1], parts[2]
    mtype = TYPE_OF.get(name)
    if mtype is None:
        return []  # ours only (POSTPONE)
    flags = header_flags(parts[3])
    payload = parts[4:]
    if mtype in clustermsg.GOSSIP_TYPES:
        msg = Message(mtype, sender, int(port), flags, mark=mark)
        msg.gossip = gossip_entries(payload)
        return [clustermsg.encode(msg)]
    if mtype == clustermsg.FAIL:
        msg = Message(mtype, sender, int(port), flags, mark=mark)
        msg.about = payload[0]
        return [clustermsg.encode(msg)]
    if mtype in clustermsg.JOBS_TYPES:
        jobs = serialized_jobs(payload)
        sent_as = int(port)
        if mtype == clustermsg.YOURJOBS:  # (no "nothing for you" YOURJOBS)
            return (
                [clustermsg.jobs_message(mtype, sender, sent_as, flags, mark, jobs)] if jobs else []
            )
        # Disque's REPLJOB takes exactly one job
        return [clustermsg.jobs_message(mtype, sender, sent_as, flags, mark, [j]) for j in jobs]
    if mtype in clustermsg.QUEUE_TYPES:
        msg = Message(mtype, sender, int(port), flags, mark=mark)
        msg.queue, msg.aux = payload[0], int(payload[1])
        return [clustermsg.encode(msg)]
    count = payload[1] if name == b"QUEUED" and len(payload) > 1 else NOCOUNT
    head = job_id_header(mtype, sender, port, flags, QUEUED_FLAGS.get(count, 0), mark)
    if name == b"QUEUED":
        return [head + clustermsg.job_id_data(payload[0], 0)]
    if name in IDS_ONLY:
        return [head + clustermsg.job_id_data(jid, 0) for jid in payload]
    # SETACK, GOTACK, ENQUEUE: (ID, number) pairs
    return [
        head
        + clustermsg.job_id_data(payload[i], int(payload[i + 1]) if i + 1 < len(payload) else 0)
        for i in range(0, len(payload), 2)
    ]


def header_flags(sender_flags: bytes) -> int:
    """The node flags a clusterMsg header gives its sender, from our header's."""
    if sender_flags == b"leaving":
        return clustermsg.NODE_MYSELF | clustermsg.NODE_LEAVING
    return clustermsg.NODE_MYSELF


class RepljobMessages:
    """REPLJOBs of one job as Disque reads them, from this node: the job as
    ``serialize_job(job, storage=False)`` made it, as Disque's clusterReplicateJob
    does, not through our fields and back (one conversion instead of three; the
    same bytes go to nodes of ours that take them). The receiver takes the copy as
    active whatever state it says (Disque's REPLJOB handler).

    What comes before the job (header and counts) is the same for every job of one
    size this node replicates: it is kept by size, for the header last asked for
    (this node's ID, port, whether it is leaving, the mark)."""

    def __init__(self) -> None:
        self.sender = b""
        self.port = 0
        self.flags = 0
        self.mark = b""
        self.tail = b""  # the header after totlen
        self.prefixes: dict[int, bytes] = {}  # job size -> header and counts

    def message(
        self, sender: bytes, port: int, leaving: bool, serialized: bytes, mark: bytes
    ) -> bytes:
        flags = clustermsg.NODE_MYSELF | (clustermsg.NODE_LEAVING if leaving else 0)
        if flags != self.flags or mark != self.mark or port != self.port or sender != self.sender:
            self.sender, self.port, self.flags, self.mark = sender, port, flags, mark
            self.tail = clustermsg.header_tail(clustermsg.REPLJOB, sender, port, flags, mark)
            self.prefixes.clear()
        size = len(serialized)
        prefix = self.prefixes.get(size)
        if prefix is None:
            if len(self.prefixes) >= 1024:
                self.prefixes.clear()
            prefix = self.prefixes[size] = clustermsg.jobs_prefix(self.tail, 1, size)
        return prefix + serialized


_job_id_headers: Final[dict[bytes, bytes]] = {}


def job_id_header(
    mtype: int, sender: bytes, port: bytes, flags: int, mflags: int, mark: bytes
) -> bytes:
    """clustermsg.job_id_header, kept: a node says GOTJOB, SETACK, ... with the same
    few headers (its own ID and port) to every C node, for every job."""
    key = b"%d %d %d %s %s %s" % (mtype, flags, mflags, port, sender, mark)
    head = _job_id_headers.get(key)
    if head is None:
        if len(_job_id_headers) >= 256:
            _job_id_headers.clear()
        head = _job_id_headers[key] = clustermsg.job_id_header(
            mtype, sender, int(port), flags, mflags, mark
        )
    return head


def gossip_entries(payload: list[bytes]) -> list[Gossip]:
    """Our gossip's (id, ip, port, flags) entries Disque can use: not those whose
    bus port is not port + 10000 ("port@busport"), which it would not reach."""
    entries = []
    for i in range(0, len(payload) - 3, 4):
        node_id, ip, port, names = payload[i : i + 4]
        if not port.isdigit():
            continue
        named = names.split(b",")
        flags = 0
        for bit, flag in FLAG_NAMES:
            if flag in named:
                flags |= bit
        entries.append(Gossip(node_id, ip.decode(), int(port), flags))
    return entries


def serialized_jobs(payload: list[bytes]) -> list[bytes]:
    jobs = []
    for i in range(0, len(payload) - FIELDS + 1, FIELDS):
        job = job_from_fields(payload[i : i + FIELDS], ACTIVE)
        if job is not None:
            jobs.append(serialize_job(job, storage=False))
    return jobs
