"""A job as Disque 1.0-rc1's bytes: its ``serializeJob`` and ``deserializeJob``
(job.c), the payload of the AOF's ``LOADJOB <serialized job>`` records, so a
node of ours loads a C Disque's AOF and C Disque loads ours.

The layout, all integers little endian::

    u32  length of what follows
    68 bytes, the head of C's ``struct job``:
         id[40]  state:4|gc_retry:4 (u8)  flags (u8)  repl (u16)  etime (u32)
         ctime (u64)  delay (u32)  retry (u32)  num_nacks (u16)  num_deliv (u16)
    u32 + bytes  queue name
    u32 + bytes  body
    u32 + 40 bytes each: the IDs of the nodes that may hold a copy

``storage`` (SER_STORAGE, the AOF) keeps the state and an absolute expire
time; a message (SER_MESSAGE, the bus) makes the expire time relative and
drops the delivered flag. C's states count from 0 and its flag bits differ
from ours: both are mapped here. What Disque's layout has no room for (the
queue time of a NACK DELAY, the nodes that confirmed a copy) is not kept, as
in Disque: a loaded job considers re-queueing after DELAY + RETRY from now.
"""

from __future__ import annotations

import struct
from typing import Final

from disque_server.clock import now_ms, now_s
from disque_server.job import (
    ACKED,
    ACTIVE,
    FLAG_BCAST_QUEUED,
    FLAG_BCAST_WILLQUEUE,
    FLAG_DELIVERED,
    ID_LEN,
    QUEUED,
    WAIT_REPL,
    Job,
    shared_int,
    shared_name,
    shared_node_id_run,
    valid_job_id,
)

HEAD: Final = struct.Struct("<I40sBBHIQIIHH")  # the length prefix, then C's struct job
HEAD_LEN: Final = HEAD.size  # 72: 4 + JOB_STRUCT_SER_LEN (68)
NODE_ID_LEN: Final = 40  # CLUSTER_NAMELEN
MIN_LEN: Final = HEAD_LEN + 12  # the three u32 counts of the variable part
# HEAD as pack_job packs it: ctime as two u32s (low, then high), the same bytes. For
# a "Q", CPython converts an int by its generic byte loop (_PyLong_AsByteArray),
# for an "I" by a short one: an eighth of the cost of serializing a job.
PACKED_HEAD: Final = HEAD.format[1:].replace("Q", "II")

# C's JOB_STATE_* and JOB_FLAG_* against ours.
C_STATE: Final = {WAIT_REPL: 0, ACTIVE: 1, QUEUED: 2, ACKED: 3}
STATE_OF_C: Final = {c: ours for ours, c in C_STATE.items()}
C_BCAST_QUEUED: Final = 1
C_BCAST_WILLQUEUE: Final = 2
C_DELIVERED: Final = 4
U16_MAX: Final = 0xFFFF
U32_MAX: Final = 0xFFFFFFFF


class SerializeError(ValueError):
    """Bytes that are not a serialized job."""


def c_flags(flags: int) -> int:
    return (
        (C_BCAST_QUEUED if flags & FLAG_BCAST_QUEUED else 0)
        | (C_BCAST_WILLQUEUE if flags & FLAG_BCAST_WILLQUEUE else 0)
        | (C_DELIVERED if flags & FLAG_DELIVERED else 0)
    )


def flags_of_c(flags: int) -> int:
    return (
        (FLAG_BCAST_QUEUED if flags & C_BCAST_QUEUED else 0)
        | (FLAG_BCAST_WILLQUEUE if flags & C_BCAST_WILLQUEUE else 0)
        | (FLAG_DELIVERED if flags & C_DELIVERED else 0)
    )


class JoinedIds:
    """The node-ID tuple node_ids joined last, and what it gave. Jobs in a row share
    one tuple (a replica's copies: shared_node_id_run; a node's new jobs:
    replication.Owners), so most are joined once for many jobs."""

    __slots__ = ("ids", "count", "joined")

    def __init__(self) -> None:
        self.ids: tuple[bytes, ...] = ()
        self.count = 0
        self.joined = b""


_joined_ids: Final = JoinedIds()


def node_ids(job: Job) -> tuple[int, bytes]:
    """How many node IDs the job names, and the IDs end to end (40 bytes each)."""
    ids = job.nodes_delivered
    last = _joined_ids
    if ids is last.ids:
        return last.count, last.joined
    joined = b"".join(ids)
    last.ids = ids
    if len(joined) != NODE_ID_LEN * len(ids):  # (never, but the count must be true)
        ids = tuple(n for n in ids if len(n) == NODE_ID_LEN)
        joined = b"".join(ids)
    last.count, last.joined = len(ids), joined
    return len(ids), joined


def serialize_job(job: Job, storage: bool = True) -> bytes:
    """The job as Disque's serializeJob writes it (``storage``: SER_STORAGE)."""
    flags = c_flags(job.flags)
    etime = job.etime
    if not storage:
        now = now_s()
        etime = etime - now + 1 if etime >= now else 1
        flags &= ~C_DELIVERED
    return pack_job(job, flags, etime, False)


def loadjob_record(job: Job) -> bytes:
    """The AOF's ``LOADJOB <serialized job>`` (Disque's AOFLoadJob) as RESP, packed by
    one Struct call per job (a rewrite writes millions: two copies of each, the
    serialized job and then its framing, cost a third more)."""
    return pack_job(job, c_flags(job.flags), job.etime, True)


def pack_job(job: Job, flags: int, etime: int, framed: bool) -> bytes:
    """The serialized job (with C's ``flags`` and expire time ``etime``), as a
    LOADJOB record when ``framed``, in one Struct call (job_layout)."""
    queue = job.queue or b""
    body = job.body or b""
    count, nodes = node_ids(job)
    packer, prefix, suffix, length = job_layout(len(queue), len(body), len(nodes), framed)
    return packer.pack(
        prefix,
        length,
        job.id,
        C_STATE[job.state],
        flags,
        min(job.repl, U16_MAX),
        min(max(etime, 0), U32_MAX),
        job.ctime & U32_MAX,
        job.ctime >> 32,
        min(job.delay, U32_MAX),
        min(job.retry, U32_MAX),
        min(job.nacks, U16_MAX),
        min(job.deliveries, U16_MAX),
        len(queue),
        queue,
        len(body),
        body,
        count,
        nodes,
        suffix,
    )


# (queue, body, node IDs lengths) -> (a Struct packing the whole job, the LOADJOB
# record's RESP prefix and suffix or b"", the serialized job's length), plain and
# framed: most jobs of a node share a few shapes.
Layout = tuple[struct.Struct, bytes, bytes, int]
_plain_layouts: Final[dict[tuple[int, int, int], Layout]] = {}
_framed_layouts: Final[dict[tuple[int, int, int], Layout]] = {}


class LastLayout:
    """The shape job_layout was last asked for, and its layout: jobs in a row are
    mostly of one shape, and three compares cost less than a tuple key's hash."""

    __slots__ = ("queue_len", "body_len", "nodes_len", "layout")

    def __init__(self) -> None:
        self.queue_len = self.body_len = self.nodes_len = -1  # (no shape yet)
        self.layout: Layout = (HEAD, b"", b"", 0)


_last_plain: Final = LastLayout()
_last_framed: Final = LastLayout()


def job_layout(queue_len: int, body_len: int, nodes_len: int, framed: bool) -> Layout:
    """How a job of that shape packs in one call (a job replicated to C nodes was
    six pieces and a join)."""
    last = _last_framed if framed else _last_plain
    if last.body_len == body_len and last.queue_len == queue_len and last.nodes_len == nodes_len:
        return last.layout
    last.layout = shape_layout(queue_len, body_len, nodes_len, framed)
    last.queue_len, last.body_len, last.nodes_len = queue_len, body_len, nodes_len
    return last.layout


def shape_layout(queue_len: int, body_len: int, nodes_len: int, framed: bool) -> Layout:
    layouts = _framed_layouts if framed else _plain_layouts
    shape = (queue_len, body_len, nodes_len)
    known = layouts.get(shape)
    if known is None:
        if len(layouts) >= 4096:
            layouts.clear()
        length = HEAD_LEN - 4 + 12 + queue_len + body_len + nodes_len
        prefix = b"*2\r\n$7\r\nLOADJOB\r\n$%d\r\n" % (length + 4) if framed else b""
        suffix = b"\r\n" if framed else b""
        layout = f"<{len(prefix)}s{PACKED_HEAD}I{queue_len}sI{body_len}sI{nodes_len}s{len(suffix)}s"
        known = layouts[shape] = (struct.Struct(layout), prefix, suffix, length)
    return known


def deserialize_job(data: bytes, pos: int = 0, storage: bool = True) -> tuple[Job, int]:
    """The job serialized at ``data[pos:]`` and the offset after it; SerializeError
    when the bytes are not one. As Disque's deserializeJob: a message's job is
    active with an absolute expire time; a stored one keeps its state; either
    considers re-queueing after DELAY + RETRY from now."""
    end = len(data)
    if end - pos < MIN_LEN:
        raise SerializeError("shorter than a job")
    # HEAD's fields read by index, not with HEAD.unpack_from: a call, a tuple and
    # eleven objects, a fifth of a replica's work on a job, compiled.
    stop = pos + 4 + u32_little(data, pos)
    if stop > end:
        raise SerializeError("length prefix past the end")
    jid = data[pos + 4 : pos + 4 + ID_LEN]
    if not valid_job_id(jid):
        raise SerializeError("not a job ID")
    state_byte = data[pos + 44]
    state = STATE_OF_C.get(state_byte & 0x0F) if storage else ACTIVE
    if state is None:
        raise SerializeError(f"unknown job state {state_byte & 0x0F}")
    flags = data[pos + 45]
    repl = data[pos + 46] | data[pos + 47] << 8
    etime = u32_little(data, pos + 48)
    ctime = u32_little(data, pos + 52) | u32_little(data, pos + 56) << 32
    delay = u32_little(data, pos + 60)
    retry = u32_little(data, pos + 64)
    nacks = data[pos + 68] | data[pos + 69] << 8
    deliv = data[pos + 70] | data[pos + 71] << 8
    p = pos + HEAD_LEN
    queue, p = counted(data, p, stop, 1)
    body, p = counted(data, p, stop, 1)
    nodes, p = counted(data, p, stop, NODE_ID_LEN)
    if p != stop:
        raise SerializeError("length prefix does not match the fields")
    now = now_ms()
    if not storage:
        etime = now // 1000 + etime
    job = Job(jid, state, shared_int(etime), shared_int(retry))
    job.queue = shared_name(queue)
    job.body = body
    job.repl, job.ctime, job.delay = repl, ctime, delay
    job.nacks, job.deliveries = nacks, deliv
    job.flags = flags_of_c(flags) & ~FLAG_BCAST_WILLQUEUE
    job.nodes_delivered = shared_node_id_run(nodes)
    if retry:
        job.flags |= FLAG_BCAST_WILLQUEUE
        job.qtime = job.requeue_at(now, delay)
    else:
        # An at-most-once job is queued once: when its DELAY ends, if that is still
        # to come (Disque forgets it: qtime 0); never again once it may have been.
        due = ctime // 1_000_000 + delay * 1000
        job.qtime = due if delay and due > now and not flags & C_DELIVERED else 0
    return job, stop


def counted(data: bytes, pos: int, stop: int, unit: int) -> tuple[bytes, int]:
    """A u32 count of ``unit``-byte items and the items, ending before ``stop``."""
    if pos + 4 > stop:
        raise SerializeError("truncated field")
    count = u32_little(data, pos)
    pos += 4
    size = count * unit
    if pos + size > stop:
        raise SerializeError("field past the end of the job")
    return data[pos : pos + size], pos + size


def u32_little(data: bytes, pos: int) -> int:
    """A little-endian u32 (the layout's counts and lengths), read by index: a Struct's
    unpack_from is a call and a tuple, about 100 ns compiled against 7, and a job
    replicated from a C node has four of them."""
    return data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16 | data[pos + 3] << 24


assert HEAD_LEN == 4 + ID_LEN + 28  # C's JOB_STRUCT_SER_LEN is 68 (deserialize_job's offsets)
