"""Commands on jobs by ID: ACKJOB FASTACK DELJOB SHOW WORKING NACK ENQUEUE DEQUEUE LOADJOB."""

from __future__ import annotations

from typing import TYPE_CHECKING

from disque_server.clock import now_ms
from disque_server.cluster import gc
from disque_server.commands.args import BADID, parse_ll, validate_job_ids
from disque_server.job import (
    ACKED,
    ACTIVE,
    FLAG_DELIVERED,
    QUEUED,
    Job,
    is_at_least_once_id,
    ttl_minutes_from_id,
    valid_job_id,
)
from disque_server.jobs import lifecycle
from disque_server.resp import integer

if TYPE_CHECKING:
    from disque_server.client import Client


def ackjob_command(c: Client, argv: list[bytes]) -> None:
    if not validate_job_ids(c, argv):
        return
    server = c.server
    cluster = server.cluster
    if cluster.size == 1:
        ackjob_alone(c, argv)
        return
    known = 0
    collecting: list[Job] = []
    for jid in argv[1:]:
        job = server.jobs.lookup(jid)
        if job is None and cluster.size > 1 and not cluster.leaving and is_at_least_once_id(jid):
            job = create_dummy_ack(c, jid)
        if job is not None and job.state != ACKED:
            server.acks.acknowledge_job(job)
            known += 1
        if job is not None and not server.acks.try_gc(job):
            collecting.append(job)  # (a job deleted at once has no GC to wait for)
    if cluster.size > 1:
        server.acks.reply_after_gc(c, collecting, integer(known))
    else:
        c.reply(integer(known))


def ackjob_alone(c: Client, argv: list[bytes]) -> None:
    """ACKJOB on a node with no peers: nobody else has a copy, so an acknowledged
    job is deleted at once (what the GC of an ACK comes to with no other owner)."""
    jobs = c.server.jobs
    known = 0
    for i in range(1, len(argv)):
        job = jobs.lookup(argv[i])
        if job is not None:
            if job.state != ACKED:
                known += 1
            jobs.unregister(job)
    c.reply(integer(known))


def create_dummy_ack(c: Client, jid: bytes) -> Job:
    """Keep the ACK of a job we never saw, in case its owners are partitioned away."""
    server = c.server
    job = Job(jid, ACKED, now_ms() // 1000 + ttl_minutes_from_id(jid) * 60, 0)
    job.repl = 3
    server.jobs.register(job)
    return job


def fastack_command(c: Client, argv: list[bytes]) -> None:
    if not validate_job_ids(c, argv):
        return
    server = c.server
    known = 0
    for jid in argv[1:]:
        job = server.jobs.lookup(jid)
        if job is None:
            if server.cluster.size > 1:
                server.cluster.broadcast(b"DELJOB", [jid])
            continue
        known += 1
        gc.send_deljob(server.cluster, job)
        server.jobs.unregister(job)
    c.reply(integer(known))


def deljob_command(c: Client, argv: list[bytes]) -> None:
    if not validate_job_ids(c, argv):
        return
    jobs = c.server.jobs
    known = 0
    for i in range(1, len(argv)):
        job = jobs.lookup(argv[i])
        if job is not None:
            jobs.unregister(job)
            known += 1
    c.reply(integer(known))


def show_command(c: Client, argv: list[bytes]) -> None:
    if not valid_job_id(argv[1]):
        c.reply(BADID)
        return
    job = c.server.jobs.lookup(argv[1])
    if job is None:
        c.reply(c.proto.null)
        return
    c.reply_value(dict(job.show_pairs(now_ms())))


def working_command(c: Client, argv: list[bytes]) -> None:
    if not valid_job_id(argv[1]):
        c.reply(BADID)
        return
    server = c.server
    job = server.jobs.lookup(argv[1])
    if job is None:
        c.reply(b"-NOJOB Job not known in the context of this node.\r\n")
        return
    if job.state == ACKED:
        c.reply(b"-NOJOB Job already acknowledged.\r\n")
        return
    now = now_ms()
    created = job.ctime // 1_000_000
    ttl = job.etime * 1000 - created
    if ttl > 0 and now - created > ttl // 2:
        c.reply(
            b"-TOOLATE Half of job TTL already elapsed, you are no longer allowed to "
            b"postpone the next delivery.\r\n"
        )
        return
    postpone_requeue(c, job, now)
    server.job_events.job_working(job)
    c.reply(integer(job.retry))


def postpone_requeue(c: Client, job: Job, now: int) -> None:
    """WORKING: the job is being processed; re-queue it only one retry period later."""
    server = c.server
    if job.state == QUEUED:
        server.queues.dequeue_job(job)
    lifecycle.requeue_later(server.jobs, job, now)


def enqueue_command(c: Client, argv: list[bytes]) -> None:
    enqueue_generic(c, argv, nack=False)


def nack_command(c: Client, argv: list[bytes]) -> None:
    if len(argv) > 3 and argv[-2].lower() == b"delay":
        nack_delayed(c, argv[1:-2], argv[-1])
        return
    enqueue_generic(c, argv, nack=True)


def nack_delayed(c: Client, ids: list[bytes], delay_arg: bytes) -> None:
    """NACK id ... DELAY seconds (beyond Disque): each job is queued again after the
    delay, on one node, as a NACK's re-queue; the other owners are told not to queue
    their copies earlier (POSTPONE)."""
    delay = parse_ll(delay_arg)
    if delay is None or delay < 0:
        c.reply(b"-ERR DELAY time must be a non negative number\r\n")
        return
    if not delay:
        enqueue_generic(c, [b"nack", *ids], nack=True)
        return
    if not validate_job_ids(c, ids, 0):
        return
    server = c.server
    requeue_at = now_ms() + delay * 1000
    nacked = 0
    for jid in ids:
        job = server.jobs.lookup(jid)
        if job is None or job.state != ACTIVE or (job.retry == 0 and job.flags & FLAG_DELIVERED):
            continue  # what plain NACK could not queue again either
        lifecycle.nack_delayed(server.jobs, job, requeue_at)
        server.job_events.job_postponed(job, delay * 1000)
        nacked += 1
    c.reply(integer(nacked))


def enqueue_generic(c: Client, argv: list[bytes], nack: bool) -> None:
    if not validate_job_ids(c, argv):
        return
    server = c.server
    enqueued = 0
    for jid in argv[1:]:
        job = server.jobs.lookup(jid)
        if job is not None and job.state == ACTIVE:
            lifecycle.queued_now(job)
            if server.queues.enqueue_job(job, nack):
                enqueued += 1
    c.reply(integer(enqueued))


def dequeue_command(c: Client, argv: list[bytes]) -> None:
    if not validate_job_ids(c, argv):
        return
    server = c.server
    dequeued = 0
    for jid in argv[1:]:
        job = server.jobs.lookup(jid)
        if job is not None and server.queues.dequeue_job(job):
            dequeued += 1
    c.reply(integer(dequeued))


def loadjob_command(c: Client, argv: list[bytes]) -> None:
    c.reply(b"-ERR LOADJOB is a special command only processed from AOF\r\n")
