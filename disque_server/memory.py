"""maxmemory: how much the node uses, and the level that tells what to do.

Levels follow Disque: at 75% of maxmemory new jobs are replicated to other
nodes without a local copy (in a cluster), at 95% what is safe to evict is
evicted (acked jobs, idle empty queues, delivered RETRY 0 jobs) and a command
that grows memory is refused with -OOM unless it finds room first. This module
counts; what is evicted and when is ``eviction``'s, which walks the jobs and
queues above it.
"""

from __future__ import annotations

import os
import resource
import sys
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from disque_server.config import Config

_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

OK: Final = 0
EXTERNAL_REPL: Final = 1
EVICT: Final = 2
FULL: Final = 3
LEVEL_STARTS: Final = {EXTERNAL_REPL: 0.75, EVICT: 0.95, FULL: 1.0}  # fractions of maxmemory

# What the data costs, measured on CPython 3.11 (RSS growth over 1M jobs, see
# docs/server.md): a job with a 40-byte ID, beside its body: the Job object and
# its numbers, its index and timer entries, its queue entry.
JOB_BYTES: Final = 545
# Memory.refresh_at when no maxmemory level is near (1 << 61: a short int in compiled
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


class Memory:
    """``used``: what the node's data takes, as Disque's used_memory counts what
    its allocator holds: jobs (bodies, IDs, their index, timer and queue
    entries, acknowledged ones included), queues, clients and their buffers,
    the AOF buffers. Jobs and queues are running counters kept by their
    registries (one integer add per job created or deleted); clients and AOF
    buffers are summed by the cron (eviction.sample_buffers). The interpreter
    itself is not counted: it is ``used_memory_rss`` (the process' resident size).
    ``refresh`` takes the registries' counters from its caller
    (``Jobs.refresh_memory``): this module looks at nothing above it."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.buffers = 0  # clients and AOF, summed once a second
        self.used = 0
        self.peak = 0
        self.level = OK
        self.evict_cursor = 0  # where eviction's walk of the jobs goes on (JSCAN order)
        self.refreshed_for = (-1, -1, -1)  # used, limit, job bytes the level is for
        # The jobs' data_bytes past which the next level starts: crossing it refreshes
        # the level at once, not at the next cron tick (Jobs.register).
        self.refresh_at = REFRESH_NEVER

    def refresh(self, jobs_bytes: int, queues_bytes: int) -> int:
        """Compute memory use and the warning level from the jobs' and the queues'
        counters (the cron does every tick: it is a few additions)."""
        self.used = used = jobs_bytes + queues_bytes + self.buffers
        if used > self.peak:
            self.peak = used
        limit: int = self.config["maxmemory"]
        key = (used, limit, jobs_bytes)
        if key == self.refreshed_for:
            return self.level  # an idle tick: nothing to recompute
        self.refreshed_for = key
        if not limit:
            self.level = OK
            self.refresh_at = REFRESH_NEVER
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
                self.refresh_at = jobs_bytes + next_at - used
            else:
                self.refresh_at = REFRESH_NEVER
        return self.level
