"""Where a job's events go in a cluster (hooks.JobEvents): to the other owners
over the bus (QUEUED, WORKING, WILLQUEUE, NEEDJOBS, SETACK), and to the AOF.

The jobs package calls these directly: a re-queue is registry -> queue -> here
-> the cluster's links, with no stop in the server. What the other owners do
with these messages is requeue.py's (the protocol) and gc.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from disque_server.cluster import federation, gc, replication
from disque_server.cluster.requeue import DELIVERY, NACK
from disque_server.hooks import JobEvents
from disque_server.job import ACKED, WAIT_REPL

if TYPE_CHECKING:
    from disque_server.aof import AOF
    from disque_server.cluster import Cluster
    from disque_server.job import Job
    from disque_server.jobs.queue import Queue


class ClusterJobEvents(JobEvents):
    """The cluster's and the AOF's side of a job's life."""

    cluster: Cluster  # (set once the cluster and the AOF exist: server.Server)
    aof: AOF

    def job_requeued(self, job: Job, nack: bool) -> None:
        cluster = self.cluster
        cluster.send_to_ids(
            cluster.other_owners(job), b"QUEUED", [job.id, NACK if nack else DELIVERY]
        )

    def job_working(self, job: Job) -> None:
        cluster = self.cluster
        cluster.send_batched_to_ids(cluster.other_owners(job), b"WORKING", job.id)

    def job_postponed(self, job: Job, delay_ms: int) -> None:
        """Nodes that do not know POSTPONE ignore it (their retry timer stands)."""
        cluster = self.cluster
        ids = cluster.other_owners(job)
        cluster.send_batched_to_ids(ids, b"POSTPONE", job.id, b"%d" % delay_ms)

    def queue_drained(self, q: Queue) -> None:
        cluster = self.cluster
        if cluster.size > 1:
            federation.on_queue_drained(cluster, q)

    def queue_wanted_elsewhere(self, q: Queue) -> None:
        federation.push_jobs(self.cluster, q)

    def job_changed(self, job: Job) -> None:
        self.aof.loadjob(job)

    def job_unregistered(self, job: Job) -> None:
        if job.state != WAIT_REPL:  # (a job waiting for its copies is not in the AOF)
            self.aof.deljob(job)
        cluster = self.cluster
        if job.state == ACKED:
            gc.job_collected(cluster, job)
        if cluster.replications:  # it may be replicating still (a client waiting)
            replication.job_removed(cluster, job)

    def job_will_queue(self, job: Job) -> None:
        cluster = self.cluster
        cluster.send_to_ids(cluster.other_owners(job), b"WILLQUEUE", [job.id])

    def gc_started(self, job: Job) -> bool:
        return gc.start_gc(self.cluster, job)

    def node_leaving(self) -> bool:
        return self.cluster.leaving

    def alone(self) -> bool:
        return self.cluster.size == 1

    def gc_in_flight(self, job: Job) -> bool:
        return gc.in_flight(self.cluster, job)
