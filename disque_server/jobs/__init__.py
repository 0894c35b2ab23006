"""A job's life on this node, in one package (Disque's job.c, queue.c and ack.c).

- ``queue``     the queues: jobs ordered by ctime, blocked GETJOB clients, pause;
  enqueue (the first queueing and every re-queue), dequeue, delivery
- ``registry``  the jobs known here: lookup by ID, the awake timers, and
  ``process_job``: expire, WILLQUEUE, re-queue, GC
- ``ack``       acknowledgements and the GC's retries; ACKJOB replies held for it
- ``blocking``  why a client waits: GETJOB on empty queues, an ACKJOB reply held
  for the GC, a synchronous ADDJOB, a refill

The three call each other directly: a re-queue is ``Jobs.process_job`` ->
``Queues.enqueue_job`` -> ``Jobs.update_awake``; an acknowledged job's timer asks
``Acks`` when to try its GC, and tries it. The re-queue time itself is
``Job.requeue_at`` (job.py), written once. What must happen above the package (a
re-queue told to the other owners, a change written to the AOF, the cluster's
GC) is a method of ``hooks.JobEvents``, which ``cluster.events.ClusterJobEvents``
carries out: a re-queue never passes through the server. ``build`` makes the
three and wires them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from disque_server.jobs.ack import Acks
from disque_server.jobs.queue import Queues
from disque_server.jobs.registry import Jobs

if TYPE_CHECKING:
    import asyncio

    from disque_server.hooks import Hooks, JobEvents
    from disque_server.log import Log
    from disque_server.memory import Memory


def build(
    hooks: Hooks, events: JobEvents, memory: Memory, log: Log, loop: asyncio.AbstractEventLoop
) -> tuple[Jobs, Queues, Acks]:
    """The registry, the queues and the acknowledgements of a node, each given the
    others it calls, and what it tells above (``events``: the cluster and the AOF;
    ``hooks``: a blocked client to serve, a timer due before the next tick)."""
    queues = Queues(hooks, events, loop)
    acks = Acks(events)
    jobs = Jobs(events, memory, log, queues, acks)
    jobs.hooks = hooks
    queues.registry = jobs
    acks.jobs, acks.queues = jobs, queues
    return jobs, queues, acks
