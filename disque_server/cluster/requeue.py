"""Re-queueing in a cluster: WILLQUEUE, QUEUED, WORKING.

Every owner of an unacknowledged job has a re-queue timer. 500 ms before it
fires an owner sends WILLQUEUE: owners that have the job queued answer
QUEUED (the timer is postponed), owners that have it acked answer SETACK.
When an owner re-queues it broadcasts QUEUED: the others postpone their own
timer, and if two owners queued it at once, one of them dequeues its copy
(``keeps_queued_copy``), so one node, not all, delivers it again. WORKING
(and a delivery, which starts the retry period) postpones every owner.
An owner that collected the job answers a WILLQUEUE or QUEUED about it with
SETACK (gc.Collected: a stray copy a Disque node moved).
POSTPONE (beyond Disque: ``NACK ... DELAY``) holds every other owner's copy
until the delay has passed, so the NACKing node re-queues it first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.clock import now_ms
from disque_server.cluster import gc
from disque_server.job import (
    ACKED,
    QUEUED,
    Job,
    time_error_ms,
)
from disque_server.jobs import lifecycle

if TYPE_CHECKING:
    from disque_server.cluster import Cluster, Handler
    from disque_server.cluster.bus import BusLink
    from disque_server.cluster.node import ClusterNode

NACK: Final = b"nack"
DELIVERY: Final = b"deliv"
NOCOUNT: Final = b"-"
MAX_POSTPONE_MS: Final = 10 * 365 * 86400 * 1000  # a POSTPONE beyond this is not believed
POSTPONE_MARGIN_MS: Final = 1000  # the other owners' copies wait this much past a NACK's delay


def job_rank(node_id: bytes, job_id: bytes) -> bytes:
    """A node ID XORed with the job ID's random part (24 bytes from offset 11)."""
    rnd = job_id[11:35]
    return bytes(b ^ rnd[i % 24] for i, b in enumerate(node_id))


def keeps_queued_copy(me: bytes, other: bytes, job_id: bytes) -> bool:
    """Two owners queued the same job: does ``me`` keep its copy? As Disque's
    compareNodeIDsByJob, the greater ID XORed with the job's random bits keeps it,
    so which node delivers again changes from job to job."""
    return job_rank(me, job_id) > job_rank(other, job_id)


def postpone(cluster: Cluster, job: Job) -> None:
    """Another owner re-queued or delivered it."""
    lifecycle.requeue_later(cluster.server.jobs, job, now_ms())


# ---- message handlers ------------------------------------------------------------------


def on_willqueue(
    cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]
) -> None:
    job = cluster.server.jobs.lookup(payload[0])
    if job is None:
        gc.answer_stray_copy(cluster, sender, payload[0])
        return
    if job.state == QUEUED:
        cluster.send(sender, b"QUEUED", [job.id, NOCOUNT])
    elif job.state == ACKED:
        cluster.send(sender, b"SETACK", [job.id, b"%d" % len(job.nodes_delivered)])


def on_queued(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    server = cluster.server
    job = server.jobs.lookup(payload[0])
    if job is None:
        gc.answer_stray_copy(cluster, sender, payload[0])
        return
    if job.state == ACKED:
        return
    if job.state == QUEUED and not keeps_queued_copy(cluster.myself.id, sender.id, job.id):
        server.queues.dequeue_job(job)
    count = payload[1] if len(payload) > 1 else NOCOUNT
    if count == NACK:
        job.nacks += 1
    elif count == DELIVERY:
        job.deliveries += 1
    postpone(cluster, job)


def on_working(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    """Job IDs (one or many: the sender batches a pass's deliveries)."""
    server = cluster.server
    for jid in payload:
        job = server.jobs.lookup(jid)
        if job is None or job.state == ACKED:
            continue
        if job.state == QUEUED:
            server.queues.dequeue_job(job)
        postpone(cluster, job)


def on_postpone(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    """Pairs of job ID and delay in ms: NACK ... DELAY on the sender. A queued copy
    leaves its queue (as for WORKING); no copy re-queues before the delay, and
    the others wait a second (and the usual jitter) more: the sender's re-queue
    comes first and counts the NACK; they stand in for it if it fails."""
    server = cluster.server
    now = now_ms()
    for i in range(0, len(payload) - 1, 2):
        job = server.jobs.lookup(payload[i])
        delay_ms = int(payload[i + 1])
        if job is None or job.state == ACKED or not 0 <= delay_ms <= MAX_POSTPONE_MS:
            continue
        if job.state == QUEUED:
            server.queues.dequeue_job(job)
        at = now + delay_ms + POSTPONE_MARGIN_MS + time_error_ms(max(job.retry, 1))
        lifecycle.postponed_until(server.jobs, job, at)


HANDLERS: Final[dict[bytes, Handler]] = {
    b"WILLQUEUE": on_willqueue,
    b"QUEUED": on_queued,
    b"WORKING": on_working,
    b"POSTPONE": on_postpone,
}
