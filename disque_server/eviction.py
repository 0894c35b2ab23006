"""Eviction at maxmemory: what is safe to free, and when (memory.py counts).

From 95% of maxmemory (the EVICT level) with ``maxmemory-policy acks``, the cron
frees, a slice a second, what no client can still need: acknowledged jobs,
delivered RETRY 0 jobs (at most once: never delivered again) and idle empty
queues; and a command that grows memory first tries to make room for itself
(Disque's freeMemoryIfNeeded) or is refused with -OOM. It walks the jobs and the
queues (the clients' buffers it asks of the hook ``client_buffers``): it sits
above them all, below the server that calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.job import ACKED, ACTIVE, FLAG_DELIVERED
from disque_server.memory import EVICT

if TYPE_CHECKING:
    from disque_server.server import Server

# Jobs a denyoom command may look at to make room (Disque samples ~10 jobs, 1-2 ms at
# most); the cron's slice, once a second, is larger.
EVICT_BEFORE_COMMAND: Final = 100
EVICT_PER_SECOND: Final = 10_000


def sample_buffers(server: Server) -> None:
    """What the clients and the AOF buffer now (part of used_memory): once a second."""
    aof = server.aof
    server.memory.buffers = (
        server.hooks.client_buffers()
        + sum(map(len, aof.buf))
        + sum(map(len, aof.rewrite_buf or ()))
    )


def evict_if_needed(server: Server) -> int:
    """From 95% (policy acks): free what is safe to free, a slice at a time."""
    if server.memory.level >= EVICT and server.config["maxmemory-policy"] == "acks":
        freed = evict(server)
        server.jobs.refresh_memory()
        return freed
    return 0


def room_for_command(server: Server) -> bool:
    """Before a command that grows memory (denyoom) from 95%, as Disque's
    freeMemoryIfNeeded: with policy acks free what is safe to free, a slice
    (idle empty queues only when no job is left), and say whether memory is
    back under 95%; with noeviction there is no room. A refusal is -OOM."""
    if server.config["maxmemory-policy"] != "acks":
        return False
    if len(server.jobs):
        evict_jobs(server, EVICT_BEFORE_COMMAND)
    else:
        server.queues.evict_idle(0)
    return server.jobs.refresh_memory() < EVICT


def evict(server: Server, budget: int = EVICT_PER_SECOND) -> int:
    """Free what is safe to free, walking the jobs incrementally (JSCAN order):
    at most ``budget`` jobs are looked at per call, so a node with millions
    of jobs never stalls here."""
    return evict_jobs(server, budget) + server.queues.evict_idle(0)


def evict_jobs(server: Server, budget: int) -> int:
    """Acknowledged jobs and delivered RETRY 0 ones, from where the last call
    stopped (JSCAN order), at most ``budget`` looked at."""
    jobs, memory = server.jobs, server.memory
    freed = 0
    memory.evict_cursor, ids = jobs.scan(memory.evict_cursor, budget)
    for jid in ids:
        job = jobs.lookup(jid)
        if job is not None and (
            job.state == ACKED
            or (job.retry == 0 and job.flags & FLAG_DELIVERED and job.state == ACTIVE)
        ):
            jobs.unregister(job)
            freed += 1
    return freed
