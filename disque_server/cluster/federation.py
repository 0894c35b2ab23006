"""Federation: NEEDJOBS, YOURJOBS, and PAUSE propagation.

A node whose clients wait on an empty queue asks the others for jobs with
NEEDJOBS: broadcast to every reachable node (the first time at once, then
with a backoff from 2 s doubling up to 30 s), and ad hoc to the nodes that
recently provided jobs (from 25 ms doubling up to 2 s); and at once when a
queue that is importing drains. A node with queued jobs answers YOURJOBS
with some of them (all it was asked for only if it has twice as many, else
half, at least one), unless the queue is paused in output or it is itself
importing. Moved jobs stay owned by the sender (active, re-queued at its
retry time if never acknowledged), except RETRY 0 jobs, which move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from disque_server.clock import now_ms, time_error_ms
from disque_server.cluster.serialize import FIELDS, job_from_fields, job_to_fields
from disque_server.job import ACTIVE, FLAG_BCAST_WILLQUEUE
from disque_server.queue import PAUSED_IN, PAUSED_OUT, Queue

if TYPE_CHECKING:
    from disque_server.cluster import Cluster
    from disque_server.cluster.bus import BusLink
    from disque_server.cluster.node import ClusterNode

BCAST_MIN_MS, BCAST_MAX_MS = 2000, 30_000
ADHOC_MIN_MS, ADHOC_MAX_MS = 25, 2000
MIN_REQUEST, MAX_REQUEST = 5, 100


def need_jobs(cluster: Cluster, name: bytes, reached_zero: bool = False) -> None:
    """Ask other nodes for jobs of this queue (Disque's needJobsForQueue)."""
    if cluster.leaving or cluster.size == 1:
        return
    q = cluster.server.queues.lookup(name)
    if q is None:
        return
    rate = q.import_rate
    if reached_zero and rate == 0:
        return
    now = now_ms()
    responders = q.valid_responders(now)
    to_fetch = rate // len(responders) if responders else MIN_REQUEST
    to_fetch = max(MIN_REQUEST, min(MAX_REQUEST, to_fetch))
    bcast_delay = min(BCAST_MIN_MS * (1 << min(q.needjobs_bcast_attempt, 16)), BCAST_MAX_MS)
    if now - q.needjobs_bcast_time > bcast_delay:
        q.needjobs_bcast_time = now
        q.needjobs_bcast_attempt += 1
        cluster.broadcast(b"NEEDJOBS", [name, b"1"])
    adhoc_delay = min(ADHOC_MIN_MS * (1 << min(q.needjobs_adhoc_attempt, 16)), ADHOC_MAX_MS)
    if responders and (reached_zero or now - q.needjobs_adhoc_time > adhoc_delay):
        q.needjobs_adhoc_time = now
        q.needjobs_adhoc_attempt += 1
        cluster.send_to_ids(responders, b"NEEDJOBS", [name, b"%d" % to_fetch])


def on_queue_drained(cluster: Cluster, q: Queue) -> None:
    """A queue ran out of jobs: if it was importing, ask again at once."""
    need_jobs(cluster, q.name, reached_zero=True)


def cron(cluster: Cluster, now: int) -> None:
    """Keep asking for the queues with clients waiting (backoffs apply)."""
    for q in list(cluster.server.queues.with_clients):
        if q.clients and not q.jobs:
            need_jobs(cluster, q.name)


# ---- message handlers ------------------------------------------------------------------

def on_needjobs(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    server = cluster.server
    q = server.queues.lookup(payload[0])
    count = int(payload[1])
    if q is None or not q.jobs or q.flags & PAUSED_OUT or q.import_rate > 0:
        return
    qlen = len(q.jobs)
    give = count if qlen >= count * 2 else qlen // 2
    give = max(give, 1)
    now = now_ms()
    fields: list[bytes] = []
    for _ in range(min(give, qlen)):
        job = q.jobs.pop(0)
        q.jobs_out += 1
        job.state = ACTIVE
        if sender.id not in job.nodes_delivered:
            job.nodes_delivered = job.nodes_delivered + (sender.id,)
        fields += job_to_fields(job)
        if job.retry == 0:
            server.jobs.unregister(job)          # at-most-once: the job moves
        else:
            job.flags |= FLAG_BCAST_WILLQUEUE    # still ours until acknowledged
            job.qtime = now + job.retry * 1000 + time_error_ms(job.retry)
            server.jobs.update_awake(job)
            server.on_job_changed(job)
    cluster.send(sender, b"YOURJOBS", fields)


def on_yourjobs(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    server = cluster.server
    now = now_ms()
    me = cluster.myself.id
    for i in range(0, len(payload) - FIELDS + 1, FIELDS):
        job = job_from_fields(payload[i:i + FIELDS], ACTIVE)
        if job is None:
            continue
        local = server.jobs.lookup(job.id)
        if local is not None:
            if local.state != ACTIVE:
                continue          # queued already, or acknowledged here (maybe a dummy ACK)
            server.queues.enqueue_job(local)
            job = local
        else:
            if me not in job.nodes_delivered:
                job.nodes_delivered = job.nodes_delivered + (me,)
            job.flags = 0   # its first queueing here is not a re-queue
            q = server.queues.lookup(job.queue)
            if q is not None:
                job.queue = q.name
            server.jobs.register(job)
            server.queues.enqueue_job(job)
            server.on_job_changed(job)
        q = server.queues.create(job.queue)
        q.count_import()
        if sender.id not in q.needjobs_responders:
            q.needjobs_bcast_attempt = 0     # a new source: broadcast sooner next time
        q.needjobs_responders[sender.id] = now
        q.needjobs_adhoc_attempt = 0


def on_pause(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    server = cluster.server
    flags = int(payload[1]) & (PAUSED_IN | PAUSED_OUT)
    q = server.queues.lookup(payload[0])
    if q is None and flags:
        q = server.queues.create(payload[0])
    if q is not None:
        server.queues.set_pause(q, flags)


HANDLERS = {b"NEEDJOBS": on_needjobs, b"YOURJOBS": on_yourjobs, b"PAUSE": on_pause}
