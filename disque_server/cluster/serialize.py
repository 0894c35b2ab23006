"""Jobs as lists of byte strings, for REPLJOB, YOURJOBS (and the AOF)."""

from __future__ import annotations

from disque_server.clock import now_ms, time_error_ms
from disque_server.job import FLAG_BCAST_WILLQUEUE, Job, shared_int, valid_job_id

FIELDS = 12

# Queue names and node ID lists many received jobs carry: one object for all.
_shared: dict[bytes, object] = {}


def shared(key: bytes, make: object) -> object:
    value = _shared.get(key)
    if value is None:
        if len(_shared) >= 4096:
            _shared.clear()
        value = _shared[key] = make(key)  # type: ignore[operator]
    return value


def _same(b: bytes) -> bytes:
    return b


def _node_ids(b: bytes) -> tuple[bytes, ...]:
    return tuple(b.split())


def job_to_fields(job: Job) -> list[bytes]:
    return [job.id, job.queue or b"", job.body or b"", b"%d" % job.repl, b"%d" % job.etime,
            b"%d" % job.ctime, b"%d" % job.delay, b"%d" % job.retry, b"%d" % job.nacks,
            b"%d" % job.deliveries, b"%d" % job.qtime, b" ".join(job.nodes_delivered)]


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
        nums = [int(f) for f in fields[3:11]]
    except ValueError:
        return None
    repl, etime, ctime, delay, retry, nacks, deliveries, qtime = nums
    job = Job(fields[0], state, shared_int(etime), shared_int(retry))
    job.queue = shared(fields[1], _same)  # type: ignore[assignment]
    job.body = fields[2]
    job.repl, job.ctime, job.delay = repl, ctime, delay
    job.nacks, job.deliveries = nacks, deliveries
    if retry:
        job.flags |= FLAG_BCAST_WILLQUEUE
        job.qtime = now_ms() + (delay + retry) * 1000 + time_error_ms(retry)
    else:
        job.qtime = qtime
    job.nodes_delivered = shared(fields[11], _node_ids)  # type: ignore[assignment]
    return job
