"""A controlled restart: a node stopped cleanly comes back with its queues.

Disque 1.0-rc1 loads a restarted node's queued jobs as active: they are queued
again only when their RETRY fires (5 minutes by default, never for RETRY 0),
and a job still in its DELAY starts it again, unless the operator set
``aof-enqueue-jobs-once`` and stopped the node with ``SHUTDOWN REWRITE-AOF``.
Here every clean stop with ``appendonly yes`` (SHUTDOWN, SIGTERM, SIGINT)
writes that snapshot (``AOF.rewrite_for_shutdown``) and a mark beside it,
``<appendfilename>.clean``: the file's size and modification time. A start
that finds the mark matching the file trusts the states the snapshot holds:

- a job queued then is queued again at once when this node is its only
  owner, or when its RETRY is 0 (it was never delivered: the snapshot was
  written with no client served, so at-most-once holds);
- a queued job with other owners goes through the re-queue path a second
  after the start (``REQUEUE_AFTER_START_MS``): WILLQUEUE to the other owners
  first, so a copy one of them queued while this node was down is not queued
  twice (Disque's own exchange, as when a RETRY fires);
- a job still in its DELAY keeps its due time (the node that made it queues
  it then; a copy's RETRY counts from then);
- a job delivered and not yet acknowledged waits for its RETRY, as with Disque.

The mark is removed once read, before the file is written again: after a
crash (kill -9, power loss) the AOF is a log whose states may be stale (a
delivery is not logged), and Disque's rule holds.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Final

from disque_server.job import (
    FLAG_DELIVERED,
    QUEUED,
    Job,
)
from disque_server.jobs import lifecycle

REQUEUE_AFTER_START_MS: Final = 1000  # WILLQUEUE goes 500 ms before, once links are up


class Restore:
    """How a start reads the AOF's states (fixed before loading): ``enqueue_once``
    (Disque's ``aof-enqueue-jobs-once``: every queued job queued again at once),
    ``clean`` (the file is the snapshot of a clean stop: see the module), ``me``
    (this node's ID: the jobs it made)."""

    def __init__(self, enqueue_once: bool = False, clean: bool = False, me: bytes = b"") -> None:
        self.enqueue_once = enqueue_once
        self.clean = clean
        self.me = me

    def queues_at_once(self, job: Job, state: int) -> bool:
        """Is this job, in ``state`` in the file, queued as it is loaded?"""
        if state != QUEUED:
            return False
        return self.enqueue_once or (
            self.clean and (job.retry == 0 or len(job.nodes_delivered) <= 1)
        )

    def restore_timer(self, job: Job, state: int, now: int) -> None:
        """Set the re-queue time of a job loaded active from a clean stop's snapshot
        (the file has no timers: deserialize_job set Disque's rule)."""
        if not self.clean:
            return
        if state == QUEUED:  # other owners: ask them first (WILLQUEUE)
            # (FLAG_BCAST_QUEUED stays: once queued here, QUEUED tells the others, and
            # of two copies queued at once one leaves its queue, as after a RETRY.)
            lifecycle.willqueue_at(job, now + REQUEUE_AFTER_START_MS)
            return
        due = job.ctime // 1_000_000 + job.delay * 1000
        if job.delay and job.retry and due > now and not job.flags & FLAG_DELIVERED:
            made_here = job.id[2:10] == self.me[:8]
            lifecycle.due_at(job, due if made_here else job.requeue_at(due))


def mark_path(aof_path: str) -> str:
    return aof_path + ".clean"


def write_mark(aof_path: str) -> None:
    """Say that the file at ``aof_path`` is the snapshot of a clean stop."""
    st = os.stat(aof_path)
    tmp = mark_path(aof_path) + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"size": st.st_size, "mtime_ns": st.st_mtime_ns}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, mark_path(aof_path))


def take_mark(aof_path: str) -> bool:
    """Whether the AOF is a clean stop's snapshot, unchanged since (the mark is
    removed: it holds for this start only)."""
    path = mark_path(aof_path)
    try:
        with open(path) as f:
            mark = json.load(f)
    except (OSError, ValueError):
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    try:
        st = os.stat(aof_path)
    except OSError:
        return False
    return (
        isinstance(mark, dict)
        and mark.get("size") == st.st_size
        and mark.get("mtime_ns") == st.st_mtime_ns
    )
