"""Acknowledgements and job garbage collection (Disque's ack.c).

On a lone node an acknowledged job is simply deleted. In a cluster the
ACK is spread with SETACK to every node that may have a copy, and the job
is deleted (DELJOB) once all of them confirmed with GOTACK; until then the
GC is retried with a growing backoff.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from disque_server.clock import now_ms
from disque_server.job import ACKED, Job

if TYPE_CHECKING:
    from disque_server.server import Server

GC_RETRY_MIN_MS = 1000
GC_RETRY_MAX_MS = 60_000


class Acks:
    def __init__(self, server: Server) -> None:
        self.server = server

    def acknowledge_job(self, job: Job) -> None:
        """Move a job to the acked state (ACKJOB, SETACK)."""
        if job.state == ACKED:
            return
        self.server.queues.dequeue_job(job)
        job.state = ACKED
        job.qtime = 0
        job.nodes_confirmed = ()     # collected again by the GC
        self.server.jobs.update_awake(job)
        self.server.on_job_changed(job)

    def try_gc(self, job: Job) -> None:
        """Delete the job here and on the other owners once they know of the ACK."""
        if job.state != ACKED:
            return
        if self.server.cluster.size == 1:
            self.server.jobs.unregister(job)
            return
        job.gc_retry = min(job.gc_retry + 1, 10)
        if not self.server.cluster.start_gc(job):
            self.server.jobs.update_awake(job)

    def next_gc_time(self, job: Job) -> int:
        delay = min(GC_RETRY_MIN_MS * (2 ** job.gc_retry), GC_RETRY_MAX_MS)
        return now_ms() + delay + random.randint(0, 500)
