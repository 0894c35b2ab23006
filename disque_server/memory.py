"""maxmemory: how much the node uses, and what to do when it is near the limit.

Levels follow Disque: at 75% of maxmemory new jobs are replicated to other
nodes without a local copy (in a cluster), at 95% what is safe to evict is
evicted (acked jobs, idle empty queues, delivered RETRY 0 jobs) and a command
that grows memory is refused with -OOM unless it finds room first
(room_for_command, Disque's freeMemoryIfNeeded).
"""

from __future__ import annotations

import os
import resource
import sys
from typing import TYPE_CHECKING, Final, TypeVar

from disque_server.job import ACKED, ACTIVE, FLAG_DELIVERED

if TYPE_CHECKING:
    from disque_server.server import Server

_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

OK: Final = 0
EXTERNAL_REPL: Final = 1
EVICT: Final = 2
FULL: Final = 3
LEVEL_STARTS: Final = {EXTERNAL_REPL: 0.75, EVICT: 0.95, FULL: 1.0}  # fractions of maxmemory
# Jobs a denyoom command may look at to make room (Disque samples ~10 jobs, 1-2 ms at
# most); the cron's slice, once a second, is larger.
EVICT_BEFORE_COMMAND: Final = 100

# What the data costs, measured on CPython 3.11 (RSS growth over 1M jobs, see
# the README): a job with a 40-byte ID, beside its body: the Job object and
# its numbers, its index and timer entries, its queue entry.
JOB_BYTES: Final = 545
# Jobs.refresh_at when no maxmemory level is near (1 << 61: a short int in compiled
# code, where 1 << 62 is a boxed one, compared through PyObject_RichCompare per ADDJOB)
REFRESH_NEVER: Final = 1 << 61
QUEUE_BYTES: Final = 1200  # a Queue object, its sorted list and scan index entry
CLIENT_BYTES: Final = 3500  # a connection: Client, parser, transport (buffers counted apart)


K = TypeVar("K")
V = TypeVar("V")
# A dict does not shrink when entries are deleted: after a burst it keeps the
# table of its peak. Past these bounds (bytes, and bytes per entry) the cron
# swaps it for a compact copy.
PEAK_TABLE_MIN_BYTES: Final = 8192
PEAK_TABLE_BYTES_PER_ENTRY: Final = 400


def without_peak_capacity(d: dict[K, V]) -> dict[K, V]:
    """``d``, or a compact copy of it when its table is far larger than its entries."""
    size = sys.getsizeof(d)
    if size > PEAK_TABLE_MIN_BYTES and size > PEAK_TABLE_BYTES_PER_ENTRY * len(d):
        return dict(d)
    return d


def rss_bytes() -> int:
    """Resident set size of this process."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def client_buffers(server: Server) -> int:
    """Clients' fixed cost and their input and output buffers."""
    total = 0
    for c in server.clients:
        total += CLIENT_BYTES + c.requests.buffered()
        if c.transport is not None:
            total += c.transport.get_write_buffer_size()
    return total


class Memory:
    """``used``: what the node's data takes, as Disque's used_memory counts what
    its allocator holds: jobs (bodies, IDs, their index, timer and queue
    entries, acknowledged ones included), queues, clients and their buffers,
    the AOF buffers. Jobs and queues are running counters kept by their
    registries (one integer add per job created or deleted); clients and AOF
    buffers are summed by the cron. The interpreter itself is not counted:
    it is ``used_memory_rss`` (the process' resident size)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.buffers = 0  # clients and AOF, summed once a second
        self.used = 0
        self.peak = 0
        self.level = OK
        self.evict_cursor = 0
        self.refreshed_for = (-1, -1, -1)  # used, limit, job bytes the level is for

    def data_bytes(self) -> int:
        server = self.server
        return server.jobs.data_bytes + server.queues.data_bytes + self.buffers

    def sample_buffers(self) -> None:
        aof = self.server.aof
        self.buffers = (
            client_buffers(self.server)
            + sum(map(len, aof.buf))
            + sum(map(len, aof.rewrite_buf or ()))
        )

    def refresh(self) -> int:
        """Compute memory use and the warning level (the cron calls it every tick:
        it is a few additions). Eviction is ``evict_if_needed``'s, once a second."""
        self.used = used = self.data_bytes()
        if used > self.peak:
            self.peak = used
        limit: int = self.server.config["maxmemory"]
        jobs = self.server.jobs
        key = (used, limit, jobs.data_bytes)
        if key == self.refreshed_for:
            return self.level  # an idle tick: nothing to recompute
        self.refreshed_for = key
        if not limit:
            self.level = OK
            jobs.refresh_at = REFRESH_NEVER
        else:
            ratio = used / limit
            self.level = (
                FULL
                if ratio >= 1.0
                else EVICT
                if ratio >= 0.95
                else EXTERNAL_REPL
                if ratio >= 0.75
                else OK
            )
            if self.level < FULL:
                next_at = int(limit * LEVEL_STARTS[self.level + 1])
                jobs.refresh_at = jobs.data_bytes + next_at - used
            else:
                jobs.refresh_at = REFRESH_NEVER
        return self.level

    def evict_if_needed(self) -> int:
        """From 95% (policy acks): free what is safe to free, a slice at a time."""
        if self.level >= EVICT and self.server.config["maxmemory-policy"] == "acks":
            freed = self.evict()
            self.refresh()
            return freed
        return 0

    def room_for_command(self) -> bool:
        """Before a command that grows memory (denyoom) from 95%, as Disque's
        freeMemoryIfNeeded: with policy acks free what is safe to free, a slice
        (idle empty queues only when no job is left), and say whether memory is
        back under 95%; with noeviction there is no room. A refusal is -OOM."""
        server = self.server
        if server.config["maxmemory-policy"] != "acks":
            return False
        if len(server.jobs):
            self.evict_jobs(EVICT_BEFORE_COMMAND)
        else:
            server.queues.evict_idle(0)
        return self.refresh() < EVICT

    def evict(self, budget: int = 10000) -> int:
        """Free what is safe to free, walking the jobs incrementally (JSCAN order):
        at most ``budget`` jobs are looked at per call, so a node with millions
        of jobs never stalls here."""
        return self.evict_jobs(budget) + self.server.queues.evict_idle(0)

    def evict_jobs(self, budget: int) -> int:
        """Acknowledged jobs and delivered RETRY 0 ones, from where the last call
        stopped (JSCAN order), at most ``budget`` looked at."""
        jobs = self.server.jobs
        freed = 0
        self.evict_cursor, ids = jobs.scan(self.evict_cursor, budget)
        for jid in ids:
            job = jobs.lookup(jid)
            if job is not None and (
                job.state == ACKED
                or (job.retry == 0 and job.flags & FLAG_DELIVERED and job.state == ACTIVE)
            ):
                jobs.unregister(job)
                freed += 1
        return freed
