"""Disque 1.0-rc1's cluster bus message, ``clusterMsg`` (cluster.h), as bytes and back.

Mixed clusters (C nodes and ours on one bus): sans-IO, no sockets and no
cluster state, so it is tested against a live C node and against itself.
``dialect.py`` translates these messages to ours and back; ``bus.py`` reads
and writes them on links to C nodes.

A message is a 144-byte header, integers in network byte order::

    sig "DbuZ"  totlen u32  ver u16 (1)  notused u16  type u16  count u16
    sender[40]  myip[46]  notused[34]  port u16  flags u16  state u8  mflags[3]

(Disque zeroes ``notused``; our nodes put ``mark`` there, which tells another
node of ours that the sender reads our own framing too.)

then the data of its type:

* PING, PONG, MEET: ``count`` gossip entries of 104 bytes: nodename[40]
  ping_sent u32  pong_received u32  ip[46]  port u16  flags u16  (6 unused);
* FAIL: the failing node's name[40];
* REPLJOB, YOURJOBS: numjobs u32, datasize u32, then the jobs, each as
  ``serialize.serialize_job(job, storage=False)`` (its own length first);
* GOTJOB, ENQUEUE, QUEUED, WORKING, SETACK, GOTACK, DELJOB, WILLQUEUE: a job
  ID[40] and aux u32 (SETACK: the nodes that may hold it; ENQUEUE: a delay;
  GOTACK: whether the job was known);
* NEEDJOBS, PAUSE: aux u32 (the jobs wanted; the pause flags), the queue
  name's length u32, the name.

``decode`` applies the length checks of Disque's ``clusterProcessPacket``: a
message whose ``totlen`` disagrees with its type's layout is refused.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

from disque_server.serialize import u32_little

SIG: Final = b"DbuZ"
VERSION: Final = 1  # CLUSTER_PROTO_VER
HEADER: Final = struct.Struct("!4sIHHHH40s46s34sHHB3s")
HEADER_LEN: Final = HEADER.size  # 144
GOSSIP: Final = struct.Struct("!40sII46sHHHI")
GOSSIP_LEN: Final = GOSSIP.size  # 104
JOB_ID: Final = struct.Struct("!40sI")
JOB_ID_LEN: Final = JOB_ID.size  # 44
COUNTS: Final = struct.Struct("!II")  # numjobs/datasize, aux/qnamelen
COUNTS_LEN: Final = COUNTS.size  # 8
NAME_LEN: Final = 40
IP_LEN: Final = 46

# Message types (CLUSTERMSG_TYPE_*).
PING: Final = 0
PONG: Final = 1
MEET: Final = 2
FAIL: Final = 3
REPLJOB: Final = 4
GOTJOB: Final = 5
ENQUEUE: Final = 6
QUEUED: Final = 7
SETACK: Final = 8
WILLQUEUE: Final = 9
GOTACK: Final = 10
DELJOB: Final = 11
NEEDJOBS: Final = 12
YOURJOBS: Final = 13
WORKING: Final = 14
PAUSE: Final = 15
TYPE_NAMES: Final = {
    PING: b"PING",
    PONG: b"PONG",
    MEET: b"MEET",
    FAIL: b"FAIL",
    REPLJOB: b"REPLJOB",
    GOTJOB: b"GOTJOB",
    ENQUEUE: b"ENQUEUE",
    QUEUED: b"QUEUED",
    SETACK: b"SETACK",
    WILLQUEUE: b"WILLQUEUE",
    GOTACK: b"GOTACK",
    DELJOB: b"DELJOB",
    NEEDJOBS: b"NEEDJOBS",
    YOURJOBS: b"YOURJOBS",
    WORKING: b"WORKING",
    PAUSE: b"PAUSE",
}
GOSSIP_TYPES: Final = frozenset((PING, PONG, MEET))
JOBS_TYPES: Final = frozenset((REPLJOB, YOURJOBS))
JOB_ID_TYPES: Final = frozenset(
    (GOTJOB, ENQUEUE, QUEUED, WORKING, SETACK, GOTACK, DELJOB, WILLQUEUE)
)
QUEUE_TYPES: Final = frozenset((NEEDJOBS, PAUSE))

# Node flags (CLUSTER_NODE_*), in the header and in gossip entries.
NODE_PFAIL: Final = 1
NODE_FAIL: Final = 2
NODE_MYSELF: Final = 4
NODE_HANDSHAKE: Final = 8
NODE_NOADDR: Final = 16
NODE_MEET: Final = 32
NODE_LEAVING: Final = 128

# mflags[0] (CLUSTERMSG_FLAG0_*).
NOREPLY: Final = 1
INCR_NACKS: Final = 2
INCR_DELIV: Final = 4


class MessageError(ValueError):
    """Bytes that are not a message Disque 1.0-rc1 would process."""


@dataclass
class Gossip:
    """What a PING, PONG or MEET says about one other node."""

    name: bytes
    ip: str
    port: int
    flags: int = 0
    ping_sent: int = 0  # seconds, as Disque sends them (mstime / 1000)
    pong_received: int = 0


@dataclass
class Message:
    """One bus message; the fields its type does not use keep their defaults."""

    type: int
    sender: bytes
    port: int
    flags: int = 0
    state: int = 0  # the sender's cluster state: 0 ok
    mflags: int = 0
    gossip: list[Gossip] = field(default_factory=list)
    about: bytes = b""  # FAIL: the failing node's name
    jobs: list[bytes] = field(default_factory=list)  # REPLJOB, YOURJOBS: serialized jobs
    job_id: bytes = b""
    aux: int = 0  # the job ID types' aux, NEEDJOBS' count, PAUSE's flags
    queue: bytes = b""  # NEEDJOBS, PAUSE
    mark: bytes = b""  # in the header's unused bytes: b"" from Disque, dialect.MARK from ours


def padded(value: bytes, size: int) -> bytes:
    if len(value) > size:
        raise MessageError(f"{value[:20]!r}... is longer than {size} bytes")
    return value.ljust(size, b"\0")


def unpadded(value: bytes) -> bytes:
    return value.split(b"\0", 1)[0]


def encode(msg: Message) -> bytes:
    """The message as Disque's clusterMsg."""
    if msg.type in GOSSIP_TYPES:
        data = b"".join(
            GOSSIP.pack(
                padded(g.name, NAME_LEN),
                g.ping_sent,
                g.pong_received,
                padded(g.ip.encode(), IP_LEN),
                g.port,
                g.flags,
                0,
                0,
            )
            for g in msg.gossip
        )
        count = len(msg.gossip)
    elif msg.type == FAIL:
        data, count = padded(msg.about, NAME_LEN), 0
    elif msg.type in JOBS_TYPES:
        jobs = b"".join(msg.jobs)
        data, count = COUNTS.pack(len(msg.jobs), len(jobs)) + jobs, 0
    elif msg.type in JOB_ID_TYPES:
        data, count = JOB_ID.pack(padded(msg.job_id, NAME_LEN), msg.aux), 0
    elif msg.type in QUEUE_TYPES:
        data, count = COUNTS.pack(msg.aux, len(msg.queue)) + msg.queue, 0
    else:
        raise MessageError(f"unknown message type {msg.type}")
    header = pack_header(
        msg.type, count, msg.sender, msg.port, msg.flags, msg.mflags, msg.mark, len(data)
    )
    return header + data


def pack_header(
    mtype: int,
    count: int,
    sender: bytes,
    port: int,
    flags: int,
    mflags: int,
    mark: bytes,
    data_len: int,
    state: int = 0,
) -> bytes:
    """The 144-byte header of a message of ``data_len`` bytes after it."""
    return HEADER.pack(
        SIG,
        HEADER_LEN + data_len,
        VERSION,
        0,
        mtype,
        count,
        padded(sender, NAME_LEN),
        b"",
        mark,
        port,
        flags,
        state,
        bytes((mflags & 0xFF, 0, 0)),
    )


def job_id_header(
    mtype: int, sender: bytes, port: int, flags: int, mflags: int, mark: bytes
) -> bytes:
    """The header of a job ID message (GOTJOB, SETACK, ...): the same for every job,
    so a node saying it of many jobs packs it once (``+ job_id_data(...)`` each)."""
    return pack_header(mtype, 0, sender, port, flags, mflags, mark, JOB_ID_LEN)


def jobs_message(
    mtype: int, sender: bytes, port: int, flags: int, mark: bytes, jobs: list[bytes]
) -> bytes:
    """A REPLJOB or YOURJOBS of serialized jobs (``encode`` without a Message: a
    node of ours sends one per job replicated to a C node)."""
    data = b"".join(jobs) if len(jobs) != 1 else jobs[0]
    tail = header_tail(mtype, sender, port, flags, mark)
    return jobs_prefix(tail, len(jobs), len(data)) + data


_jobs_prefixes: Final[dict[tuple[bytes, int, int], bytes]] = {}


def jobs_prefix(tail: bytes, numjobs: int, size: int) -> bytes:
    """What comes before ``size`` bytes of jobs: the header and the counts, made
    once: the same for every job of one size a node replicates."""
    key = (tail, numjobs, size)
    prefix = _jobs_prefixes.get(key)
    if prefix is None:
        if len(_jobs_prefixes) >= 1024:
            _jobs_prefixes.clear()
        totlen = HEADER_LEN + COUNTS_LEN + size
        prefix = SIG + totlen.to_bytes(4, "big") + tail + COUNTS.pack(numjobs, size)
        _jobs_prefixes[key] = prefix
    return prefix


_header_tails: Final[dict[tuple[int, bytes, int, int, bytes], bytes]] = {}


def header_tail(mtype: int, sender: bytes, port: int, flags: int, mark: bytes) -> bytes:
    """A header after its totlen (count 0, state ok, no mflags), packed once: a node
    sends every REPLJOB with the same few (its own name, port and flags)."""
    key = (mtype, sender, port, flags, mark)
    tail = _header_tails.get(key)
    if tail is None:
        if len(_header_tails) >= 256:
            _header_tails.clear()
        tail = _header_tails[key] = pack_header(mtype, 0, sender, port, flags, 0, mark, 0)[8:]
    return tail


def job_id_data(job_id: bytes, aux: int) -> bytes:
    if len(job_id) == NAME_LEN and aux == 0:  # (a job ID: GOTJOB, DELJOB, ... of each job)
        return job_id + b"\0\0\0\0"
    return JOB_ID.pack(padded(job_id, NAME_LEN), aux)


def message_length(buf: bytes, pos: int = 0) -> int:
    """The length of the message at ``buf[pos:]`` (its first 8 bytes), or 0 when
    fewer than 8 bytes are there. MessageError when it is not a message."""
    if len(buf) - pos < 8:
        return 0
    if buf[pos : pos + 4] != SIG:
        raise MessageError("no DbuZ signature")
    totlen = u32_big(buf, pos + 4)
    if totlen < HEADER_LEN:
        raise MessageError(f"a message of {totlen} bytes is shorter than its header")
    return totlen


def u32_big(buf: bytes, pos: int) -> int:
    """A header's u32 (network order), read by index as serialize.u32_little reads
    a job's: on every message a C node sends."""
    return buf[pos] << 24 | buf[pos + 1] << 16 | buf[pos + 2] << 8 | buf[pos + 3]


def decode(buf: bytes) -> Message:
    """One whole message (``buf`` holds exactly it), with Disque's length checks."""
    if len(buf) < HEADER_LEN:
        raise MessageError("shorter than a header")
    (sig, totlen, ver, _, mtype, count, sender, _ip, mark, port, flags, state, mflags) = (
        HEADER.unpack_from(buf)
    )
    if sig != SIG:
        raise MessageError("no DbuZ signature")
    if ver != VERSION:
        raise MessageError(f"bus protocol version {ver}, not {VERSION}")
    if totlen != len(buf):
        raise MessageError(f"totlen {totlen} but {len(buf)} bytes")
    msg = Message(mtype, sender, port, flags, state, mflags[0])
    if mark[0]:
        msg.mark = unpadded(mark)
    data = memoryview(buf)[HEADER_LEN:]
    if mtype in GOSSIP_TYPES:
        expect(len(data) == GOSSIP_LEN * count, mtype, totlen)
        for i in range(count):
            name, ping_sent, pong_received, ip, gport, gflags, _, _ = GOSSIP.unpack_from(
                data, i * GOSSIP_LEN
            )
            msg.gossip.append(
                Gossip(
                    name,
                    unpadded(ip).decode(errors="replace"),
                    gport,
                    gflags,
                    ping_sent,
                    pong_received,
                )
            )
    elif mtype == FAIL:
        expect(len(data) == NAME_LEN, mtype, totlen)
        msg.about = bytes(data)
    elif mtype in JOBS_TYPES:
        expect(len(data) >= COUNTS_LEN, mtype, totlen)
        numjobs, datasize = COUNTS.unpack_from(data)
        expect(len(data) == COUNTS_LEN + datasize, mtype, totlen)
        msg.jobs = split_jobs(buf, numjobs, HEADER_LEN + COUNTS_LEN)
    elif mtype in JOB_ID_TYPES:
        expect(len(data) == JOB_ID_LEN, mtype, totlen)
        msg.job_id, msg.aux = JOB_ID.unpack_from(data)
    elif mtype in QUEUE_TYPES:
        expect(len(data) >= COUNTS_LEN, mtype, totlen)
        msg.aux, qnamelen = COUNTS.unpack_from(data)
        expect(len(data) == COUNTS_LEN + qnamelen, mtype, totlen)
        msg.queue = bytes(data[COUNTS_LEN:])
    else:
        raise MessageError(f"unknown message type {mtype}")
    return msg


def expect(ok: bool, mtype: int, totlen: int) -> None:
    if not ok:
        name = TYPE_NAMES.get(mtype, b"?").decode()
        raise MessageError(f"a {name} of {totlen} bytes does not match its layout")


def split_jobs(data: bytes, numjobs: int, pos: int = 0, end: int = -1) -> list[bytes]:
    """The serialized jobs of a REPLJOB or YOURJOBS (``data[pos:end]``, to its end
    by default), each with its length prefix."""
    jobs = []
    if end < 0:
        end = len(data)
    for _ in range(numjobs):
        if pos + 4 > end:
            raise MessageError("a job's length past the end of the message")
        stop = pos + 4 + u32_little(data, pos)  # (the job's own length prefix)
        if stop > end:
            raise MessageError("a job past the end of the message")
        jobs.append(data[pos:stop])
        pos = stop
    if pos != end:
        raise MessageError("bytes after the jobs")
    return jobs
