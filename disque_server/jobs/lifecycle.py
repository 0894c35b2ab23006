"""What happens to a job, one verb each: the only code above the job module that
writes a job's re-queue time (``qtime``) and its flags. Commands, the cluster,
the AOF and the restart call these; the awake time is the registry's
(``Jobs.update_awake``), and tests/unit/test_job_state_owner.py fails on a write
anywhere else. Disque's C code sets these fields where it stands (job.c,
queue.c, cluster.c); here a change to re-queue behaviour has one place.

The flags (job.py): FLAG_BCAST_WILLQUEUE, this owner announces its re-queue
500 ms early; FLAG_BCAST_QUEUED, its next queueing is a re-queue to tell the
other owners of (QUEUED); FLAG_NACK_DELAYED, the next timed re-queue is a NACK
... DELAY's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from disque_server.job import (
    FLAG_BCAST_QUEUED,
    FLAG_BCAST_WILLQUEUE,
    FLAG_NACK_DELAYED,
    FLAG_UNPLACED,
    Job,
)

if TYPE_CHECKING:
    from disque_server.jobs.registry import Jobs


def added(job: Job, now: int) -> None:
    """ADDJOB: first due when its DELAY ends, else when its RETRY does."""
    job.qtime = now + (job.delay if job.delay else job.retry) * 1000


def requeue_later(jobs: Jobs, job: Job, now: int) -> None:
    """Someone has the job in hand (WORKING; another owner queued or delivered it;
    this node gave it away): an owner's next re-queue is a RETRY from now, and a
    pending NACK ... DELAY is void."""
    job.flags &= ~FLAG_NACK_DELAYED
    if job.retry:
        job.flags |= FLAG_BCAST_WILLQUEUE
        job.qtime = job.requeue_at(now)
    jobs.update_awake(job)


def postponed_until(jobs: Jobs, job: Job, at: int) -> None:
    """Another owner's NACK ... DELAY (POSTPONE): no re-queue here before ``at``."""
    job.flags &= ~FLAG_NACK_DELAYED
    if at > job.qtime:
        if job.retry:
            job.flags |= FLAG_BCAST_WILLQUEUE
        job.qtime = at
    jobs.update_awake(job)


def nack_delayed(jobs: Jobs, job: Job, at: int) -> None:
    """NACK ... DELAY here: queued again at ``at``, as a NACK."""
    job.flags |= FLAG_NACK_DELAYED | (FLAG_BCAST_WILLQUEUE if job.retry else 0)
    job.qtime = at
    jobs.update_awake(job)


def queued_now(job: Job) -> None:
    """ENQUEUE or NACK: a pending NACK ... DELAY is void."""
    job.flags &= ~FLAG_NACK_DELAYED


def due_after_delay(jobs: Jobs, job: Job, delay: int) -> None:
    """Another node asks us to queue it once its DELAY (seconds) ends."""
    job.qtime = job.ctime // 1_000_000 + delay * 1000
    jobs.update_awake(job)


def copy_arrived(job: Job) -> None:
    """A replica (REPLJOB) makes this node an owner: its re-queues are news for the
    other owners, and announced first when the job re-queues at all."""
    job.flags |= FLAG_BCAST_QUEUED | (FLAG_BCAST_WILLQUEUE if job.retry else 0)


def first_queueing_here(job: Job) -> None:
    """Queued here for the first time (ENQUEUE from another node, a move, a load):
    not a re-queue, so no QUEUED goes out."""
    job.flags &= ~FLAG_BCAST_QUEUED


def moved_here(job: Job) -> None:
    """A job this node did not hold, moved here (YOURJOBS): no timer flag of the
    sender's, and its first queueing here is not a re-queue."""
    job.flags = 0


def willqueue_at(job: Job, at: int) -> None:
    """Re-queued at ``at``, announced first (a clean restart's queued jobs)."""
    job.flags |= FLAG_BCAST_WILLQUEUE
    job.qtime = at


def due_at(job: Job, at: int) -> None:
    """Re-queued at ``at`` (a clean restart's delayed job keeps its due time)."""
    job.qtime = at


def loaded_flags(job: Job, flags: int) -> None:
    """The flags of this project's earlier AOF records: the old process's timer
    flag dropped, the announcement rule of the loaded job kept."""
    job.flags = (flags & ~FLAG_UNPLACED) | (job.flags & FLAG_BCAST_WILLQUEUE)
