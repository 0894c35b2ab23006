"""The Job: its fields, states, ID format, SHOW rendering, and its serialization
(the fields REPLJOB and YOURJOBS carry, and the AOF's LOADJOB records).

A job ID is ``D-<node8>-<random24>-<ttl4>`` (40 bytes): the first 8 hex
digits of the creating node's ID, 144 random bits in base64, and the TTL in
minutes as 4 hex digits, forced odd for at-least-once jobs and even for
at-most-once (RETRY 0) jobs, so any node can tell them apart from the ID alone.
"""

from __future__ import annotations

import binascii
import random
import time
from typing import Final

from mypy_extensions import i64, mypyc_attr

from disque_server import BUILD
from disque_server.clock import now_ms

# Job states, in Disque's order; the names are what SHOW and JSCAN STATE use.
WAIT_REPL: Final = 1
ACTIVE: Final = 2
QUEUED: Final = 3
ACKED: Final = 4
STATE_NAMES: Final = {
    WAIT_REPL: b"wait-repl",
    ACTIVE: b"active",
    QUEUED: b"queued",
    ACKED: b"acked",
}
STATE_BY_NAME: Final = {v: k for k, v in STATE_NAMES.items()}

# Job flags.
FLAG_DELIVERED: Final = 1  # handed to a client at least once (GETJOB)
FLAG_BCAST_QUEUED: Final = 2  # next enqueue is a re-queue: tell the other owners
FLAG_BCAST_WILLQUEUE: Final = 4  # send WILLQUEUE before re-queueing (awake 500 ms early)
FLAG_UNPLACED: Final = 8  # awake time set, not yet filed in a timer bucket (jobs/registry.py)
FLAG_NACK_DELAYED: Final = 16  # NACK ... DELAY: the next timed re-queue is that NACK's

ID_LEN: Final = 40
WILLQUEUE_ADVANCE_MS: Final = 500

_random_bytes: Final = random.Random().randbytes
_b2a_base64: Final = binascii.b2a_base64
_random: Final = random.random


def time_error_ms(retry_s: int) -> int:
    """The re-queue jitter (Disque's name): a random part added to a re-queue time,
    so a job's owners do not all wake at once."""
    return int(_random() * (500 if retry_s >= 5 else retry_s * 100))


RANDOM_POOL_IDS: Final = 1024  # IDs' random parts drawn at once: one call, not one each


class RandomPool:
    """The random part of job IDs: 144 random bits as 24 base64 characters at a time,
    from a pool refilled RANDOM_POOL_IDS at once (18 bytes encode to 24 characters
    with no padding, so the pool encodes in one call and is cut every 24 characters)."""

    def __init__(self) -> None:
        self.pool = b""
        self.pos = 0

    def take24(self) -> bytes:
        pos = self.pos
        if pos >= len(self.pool):
            self.pool = _b2a_base64(_random_bytes(18 * RANDOM_POOL_IDS), newline=False)
            pos = 0
        self.pos = pos + 24
        return self.pool[pos : pos + 24]


_pool: Final = RandomPool()


def generate_job_id(node_id: bytes, ttl: int, retry: int) -> bytes:
    """A fresh job ID for a job created on this node."""
    # Only the random part changes from job to job: the rest is built once.
    prefix = _id_prefixes.get(node_id) or _id_prefix(node_id)
    suffix = _id_suffixes.get(ttl if retry else -ttl) or _id_suffix(ttl, retry)
    return b"".join((prefix, _pool.take24(), suffix))


_id_prefixes: Final[dict[bytes, bytes]] = {}
_id_suffixes: Final[dict[int, bytes]] = {}


def _id_prefix(node_id: bytes) -> bytes:
    prefix = _id_prefixes[node_id] = b"D-%s-" % node_id[:8]
    return prefix


def _id_suffix(ttl: int, retry: int) -> bytes:
    """The TTL in minutes: odd for at-least-once jobs, even for at-most-once ones."""
    minutes = min(ttl // 60, 0xFFFF)
    minutes = (minutes | 1) if retry else (minutes & 0xFFFE)
    if len(_id_suffixes) >= 4096:
        _id_suffixes.clear()
    suffix = _id_suffixes[ttl if retry else -ttl] = b"-%04x" % minutes
    return suffix


_shared_ints: Final[dict[int, int]] = {}
COMPILED: Final = BUILD == "mypyc"


def shared_int(value: int) -> int:
    """One int object for a value many jobs hold (expire second, RETRY).

    Ints above 256 are objects of their own: 32 bytes a job each otherwise. Compiled
    (mypyc), a job keeps its ints in C fields, not as objects: nothing to share."""
    if COMPILED:
        return value
    shared = _shared_ints.get(value)
    if shared is None:
        if len(_shared_ints) >= 4096:
            _shared_ints.clear()
        shared = _shared_ints[value] = value
    return shared


_D: Final = ord("D")
_ZERO: Final = ord("0")
_NINE: Final = ord("9")
_DASH: Final = ord("-")


def valid_job_id(jid: bytes) -> bool:
    # (bytes indexed give small ints, which are shared: no slice is made)
    return (
        len(jid) == ID_LEN
        and jid[10] == _DASH
        and jid[35] == _DASH
        and jid[0] == _D
        and jid[1] == _DASH
    )


# One hex digit as Disque's hexToInt reads it: either case, anything else is 0 and the
# other digits keep their places; a NUL byte is 16 (strchr finds the charset's end).
_HEX_DIGIT: Final = {ch: int(chr(ch), 16) for ch in b"0123456789abcdefABCDEF"} | {0: 16}


def ttl_minutes_from_id(jid: bytes) -> int:
    """The TTL field of an ID (chars 36-39) as Disque reads it, even from a foreign ID."""
    minutes = 0
    for ch in jid[36:40]:
        minutes = (minutes << 4) | _HEX_DIGIT.get(ch, 0)
    return minutes


def is_at_least_once_id(jid: bytes) -> bool:
    """The TTL field of the ID is odd for at-least-once jobs."""
    return bool(ttl_minutes_from_id(jid) & 1)


# acyclic: a job refers to bytes, ints and tuples of bytes only, never back to
# anything that holds it, so the cyclic garbage collector need not track (and
# walk) the millions a node holds. (mypyc; the pure build ignores it.)
@mypyc_attr(acyclic=True)
class Job:
    """One job. ``__slots__`` because a node holds millions of them."""

    __slots__ = (
        "id",
        "queue",
        "state",
        "body",
        "ctime",
        "etime",
        "qtime",
        "awake",
        "delay",
        "retry",
        "repl",
        "nacks",
        "deliveries",
        "flags",
        "nodes_delivered",
        "nodes_confirmed",
        "gc_retry",
    )

    def __init__(self, jid: bytes, state: int, ttl_etime: int, retry: int) -> None:
        self.id = jid
        self.queue: bytes | None = None
        self.state = state
        self.body: bytes | None = None
        self.ctime = 0  # ms * 1e6 + counter: the queue order
        self.etime = ttl_etime  # absolute expire time, unix seconds
        self.qtime = 0  # absolute next (re)queue time, ms; 0 = never
        self.awake = 0  # absolute next time the job needs attention, ms
        self.delay = 0
        self.retry = retry
        self.repl = 1
        self.nacks = 0
        self.deliveries = 0  # additional deliveries (re-queues after the first)
        self.flags = 0
        # Tuples, shared where possible: most jobs carry the same small sets.
        self.nodes_delivered: tuple[bytes, ...] = ()
        self.nodes_confirmed: tuple[bytes, ...] = ()
        self.gc_retry = 0

    def requeue_at(self, now: int, delay_s: int = 0) -> int:
        """The re-queue rule, written once: when this job is next queued again,
        RETRY seconds from ``now`` (ms; after ``delay_s`` more, for a copy whose
        DELAY has still to run), plus a jitter so its owners do not all wake at
        once (Disque's jobReplicationAckTimer / updateJobRequeueTime)."""
        return now + (delay_s + self.retry) * 1000 + time_error_ms(self.retry)

    def show_pairs(self, now_ms: int) -> list[tuple[bytes, object]]:
        """The 15 fields of SHOW and JSCAN REPLY ALL, in Disque's order."""
        return [
            (b"id", self.id),
            (b"queue", self.queue),
            (b"state", STATE_NAMES[self.state]),
            (b"repl", self.repl),
            (b"ttl", self.etime - now_ms // 1000),
            (b"ctime", self.ctime),
            (b"delay", self.delay),
            (b"retry", self.retry),
            (b"nacks", self.nacks),
            (b"additional-deliveries", self.deliveries),
            (b"nodes-delivered", list(self.nodes_delivered)),
            (b"nodes-confirmed", list(self.nodes_confirmed)),
            (b"next-requeue-within", self.qtime - now_ms if self.qtime else None),
            (b"next-awake-within", self.awake - now_ms if self.awake else None),
            (b"body", self.body),
        ]

    def __repr__(self) -> str:
        return f"<Job {self.id.decode()} {STATE_NAMES[self.state].decode()}>"


class CtimeClock:
    """Strictly increasing ctime values: milliseconds * 1e6 plus a counter."""

    __slots__ = ("prev",)

    def __init__(self) -> None:
        self.prev = 0

    def next(self, now_ms: int = 0) -> int:
        """``now_ms``: the caller's clock reading, when it has one."""
        ms: i64 = now_ms or int(time.time() * 1000)
        ctime: i64 = ms * 1_000_000  # (i64: see Jobs.update_awake)
        if ctime <= self.prev:
            ctime = self.prev + 1
        self.prev = ctime
        return ctime


# ---- a job as byte strings: REPLJOB and YOURJOBS on the bus, LOADJOB in the AOF ----

FIELDS: Final = 12

# Queue names and node ID lists many received jobs carry: one object for all.
SHARED_MAX: Final = 4096
_shared_names: Final[dict[bytes, bytes]] = {}
_shared_node_ids: Final[dict[bytes, tuple[bytes, ...]]] = {}
_shared_node_id_runs: Final[dict[bytes, tuple[bytes, ...]]] = {}


def shared_name(name: bytes) -> bytes:
    value = _shared_names.get(name)
    if value is None:
        if len(_shared_names) >= SHARED_MAX:
            _shared_names.clear()
        value = _shared_names[name] = name
    return value


def shared_node_ids(field: bytes) -> tuple[bytes, ...]:
    """The node IDs of a space-separated list, as one tuple shared by equal lists."""
    value = _shared_node_ids.get(field)
    if value is None:
        if len(_shared_node_ids) >= SHARED_MAX:
            _shared_node_ids.clear()
        value = _shared_node_ids[field] = tuple(field.split())
    return value


def shared_node_id_run(run: bytes) -> tuple[bytes, ...]:
    """The node IDs of a run of 40-byte IDs end to end (a serialized job's), as one
    tuple shared by equal runs: the slicing was a third of a deserialize_job."""
    value = _shared_node_id_runs.get(run)
    if value is None:
        if len(_shared_node_id_runs) >= SHARED_MAX:
            _shared_node_id_runs.clear()
        value = _shared_node_id_runs[run] = tuple(
            run[i : i + ID_LEN] for i in range(0, len(run) - ID_LEN + 1, ID_LEN)
        )
    return value


def job_to_fields(job: Job) -> list[bytes]:
    return [
        job.id,
        job.queue or b"",
        job.body or b"",
        b"%d" % job.repl,
        b"%d" % job.etime,
        b"%d" % job.ctime,
        b"%d" % job.delay,
        b"%d" % job.retry,
        b"%d" % job.nacks,
        b"%d" % job.deliveries,
        b"%d" % job.qtime,
        b" ".join(job.nodes_delivered),
    ]


def field_int(field: bytes) -> int:
    """A number field of a job (``b"%d"``), as int() reads it: plain digits read
    one by one in compiled code (int() of bytes was 5% of a replica's CPU under
    REPLICATE 3: a call through the int type, a string parse), the rest by int()."""
    n: i64 = len(field)
    if 0 < n <= 18:
        value: i64 = 0
        i: i64 = 0
        while i < n:
            digit: i64 = field[i]
            if digit < _ZERO or digit > _NINE:
                return int(field)
            value = value * 10 + digit - _ZERO
            i += 1
        return value
    return int(field)


def job_from_fields(fields: list[bytes], state: int) -> Job | None:
    """A Job from its fields, or None when they are malformed.

    As Disque's deserializeJob, a copy received (REPLJOB, YOURJOBS) or
    loaded from the AOF does not take the sender's queue time: it first
    considers queueing after DELAY + RETRY (+ jitter) from now, announced by
    WILLQUEUE, so the origin, not every copy, queues a DELAYed job when the
    delay ends, and after a restart the owners do not all queue at once.
    A RETRY 0 job keeps its queue time (it has one owner, which queues it
    once when its DELAY ends)."""
    if len(fields) != FIELDS or not valid_job_id(fields[0]):
        return None
    try:
        repl, etime, ctime = field_int(fields[3]), field_int(fields[4]), field_int(fields[5])
        delay, retry, nacks = field_int(fields[6]), field_int(fields[7]), field_int(fields[8])
        deliveries, qtime = field_int(fields[9]), field_int(fields[10])
    except ValueError:
        return None
    job = Job(fields[0], state, shared_int(etime), shared_int(retry))
    job.queue = shared_name(fields[1])
    job.body = fields[2]
    job.repl, job.ctime, job.delay = repl, ctime, delay
    job.nacks, job.deliveries = nacks, deliveries
    if retry:
        job.flags |= FLAG_BCAST_WILLQUEUE
        job.qtime = job.requeue_at(now_ms(), delay)
    else:
        job.qtime = qtime
    job.nodes_delivered = shared_node_ids(fields[11])
    return job
