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
    from disque_server.aof import AOF
    from disque_server.config import Config
    from disque_server.hooks import Hooks
    from disque_server.jobs.queue import Queues
    from disque_server.jobs.registry import Jobs
    from disque_server.memory import Memory

# Jobs a denyoom command may look at to make room (Disque samples ~10 jobs, 1-2 ms at
# most); the cron's slice, once a second, is larger.
EVICT_BEFORE_COMMAND: Final = 100
EVICT_PER_SECOND: Final = 10_000


class Eviction:
    """What maxmemory frees, given the parts it walks and measures."""

    def __init__(
        self, config: Config, memory: Memory, jobs: Jobs, queues: Queues, aof: AOF, hooks: Hooks
    ) -> None:
        self.config = config
        self.memory = memory
        self.jobs = jobs
        self.queues = queues
        self.aof = aof
        self.hooks = hooks  # (the clients' buffers: client_buffers)

    def sample_buffers(self) -> None:
        """What the clients and the AOF buffer now (part of used_memory): once a second."""
        aof = self.aof
        self.memory.buffers = (
            self.hooks.client_buffers()
            + sum(map(len, aof.buf))
            + sum(map(len, aof.rewrite_buf or ()))
        )

    def evict_if_needed(self) -> int:
        """From 95% (policy acks): free what is safe to free, a slice at a time."""
        if self.memory.level >= EVICT and self.config["maxmemory-policy"] == "acks":
            freed = self.evict()
            self.jobs.refresh_memory()
            return freed
        return 0

    def room_for_command(self) -> bool:
        """Before a command that grows memory (denyoom) from 95%, as Disque's
        freeMemoryIfNeeded: with policy acks free what is safe to free, a slice
        (idle empty queues only when no job is left), and say whether memory is
        back under 95%; with noeviction there is no room. A refusal is -OOM."""
        if self.config["maxmemory-policy"] != "acks":
            return False
        if len(self.jobs):
            self.evict_jobs(EVICT_BEFORE_COMMAND)
        else:
            self.queues.evict_idle(0)
        return self.jobs.refresh_memory() < EVICT

    def evict(self, budget: int = EVICT_PER_SECOND) -> int:
        """Free what is safe to free, walking the jobs incrementally (JSCAN order):
        at most ``budget`` jobs are looked at per call, so a node with millions
        of jobs never stalls here."""
        return self.evict_jobs(budget) + self.queues.evict_idle(0)

    def evict_jobs(self, budget: int) -> int:
        """Acknowledged jobs and delivered RETRY 0 ones, from where the last call
        stopped (JSCAN order), at most ``budget`` looked at."""
        jobs, memory = self.jobs, self.memory
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
