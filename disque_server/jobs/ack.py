"""Acknowledgements and job garbage collection (Disque's ack.c).

On a lone node an acknowledged job is simply deleted. In a cluster the
ACK is spread with SETACK to every node that may have a copy, and the job
is deleted (DELJOB) once all of them confirmed with GOTACK; until then the
GC is retried with a growing backoff.

ACKJOB replies once the GC finished, when every owner that still has to
confirm is reachable (waiting at most ACK_SYNC_MAX_MS): the ACK then lives
on every owner before the client hears "done", so a node dying right after
the reply cannot cause a second delivery, and a SHOW after ACKJOB finds the
job gone, as with Disque. With an owner down the reply comes at once and
the GC goes on in the background.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Final

from disque_server.clock import now_ms
from disque_server.job import ACKED, Job
from disque_server.jobs.blocking import BlockedAckJob

if TYPE_CHECKING:
    from disque_server.client import Client
    from disque_server.hooks import JobEvents
    from disque_server.jobs.queue import Queues
    from disque_server.jobs.registry import Jobs

GC_RETRY_MIN_MS: Final = 1000
GC_RETRY_MAX_MS: Final = 60_000
ACK_SYNC_MAX_MS: Final = 100


class AckWait:
    """An ACKJOB reply held until the GC of its jobs finished."""

    __slots__ = ("client", "pending", "reply")

    def __init__(self, client: Client, pending: set[bytes], reply: bytes) -> None:
        self.client = client
        self.pending = pending
        self.reply = reply


class Acks:
    """Acknowledged jobs: their state, their GC, the ACKJOB replies waiting for it."""

    jobs: Jobs  # (jobs.build sets them: an acknowledged job leaves its queue, and
    queues: Queues  # its timer is the GC's)

    def __init__(self, events: JobEvents) -> None:
        self.events = events  # the AOF, and the cluster's GC (hooks.JobEvents)
        self.waits: dict[bytes, list[AckWait]] = {}  # job ID -> ACKJOB replies held for it

    def acknowledge_job(self, job: Job) -> None:
        """Move a job to the acked state (ACKJOB, SETACK)."""
        if job.state == ACKED:
            return
        self.queues.dequeue_job(job)
        job.state = ACKED
        job.qtime = 0
        job.nodes_confirmed = ()  # collected again by the GC
        self.jobs.update_awake(job)
        self.events.job_changed(job)

    def try_gc(self, job: Job) -> bool:
        """Delete the job here and on the other owners once they know of the ACK.
        True when it is gone from this node already (no other owner to wait for)."""
        if job.state != ACKED:
            return False
        events = self.events
        if events.alone():
            self.jobs.unregister(job)
            return True
        job.gc_retry = min(job.gc_retry + 1, 10)
        if events.gc_started(job):
            return True
        self.jobs.update_awake(job)
        return False

    def next_gc_time(self, job: Job) -> int:
        delay = min(GC_RETRY_MIN_MS << job.gc_retry, GC_RETRY_MAX_MS)
        # (random.random is C; random.randint(0, 500) is interpreted Python, and was
        # 8% of the CPU of a node acknowledging jobs in a cluster)
        return now_ms() + delay + int(random.random() * 501)

    # ---- ACKJOB replies held until the GC is done ------------------------------------
    def reply_after_gc(self, client: Client, jobs: list[Job], reply: bytes) -> None:
        """Reply now, or once the GC of every job whose owners are all reachable is done."""
        events = self.events
        pending = {job.id for job in jobs if events.gc_in_flight(job)}
        if not pending:
            client.reply(reply)
            return
        wait = AckWait(client, pending, reply)
        for jid in pending:
            self.waits.setdefault(jid, []).append(wait)
        client.block(BlockedAckJob(wait), ACK_SYNC_MAX_MS)

    def on_job_gone(self, jid: bytes) -> None:
        """A job left this node: wake the ACKJOB replies that waited only for it."""
        for wait in self.waits.pop(jid, ()):
            wait.pending.discard(jid)
            client = wait.client
            if not wait.pending and client.blocked is not None and client.blocked.data is wait:
                client.reply(wait.reply)
                client.unblock()
                client.flush()

    def forget_wait(self, wait: AckWait) -> None:
        """The client stopped waiting (timeout, disconnection)."""
        for jid in wait.pending:
            waits = self.waits.get(jid)
            if waits is not None and wait in waits:
                waits.remove(wait)
                if not waits:
                    del self.waits[jid]
