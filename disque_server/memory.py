"""maxmemory: how much the node uses, and what to do when it is near the limit.

Levels follow Disque: at 75% of maxmemory new jobs are replicated to other
nodes without a local copy (in a cluster), at 95% what is safe to evict is
evicted (acked jobs, idle empty queues, delivered RETRY 0 jobs), at 100%
commands that grow memory are refused with -OOM.
"""

from __future__ import annotations

import os
import resource
from typing import TYPE_CHECKING

from disque_server.job import ACKED, ACTIVE, FLAG_DELIVERED

if TYPE_CHECKING:
    from disque_server.server import Server

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

OK, EXTERNAL_REPL, EVICT, FULL = 0, 1, 2, 3


def rss_bytes() -> int:
    """Resident set size of this process."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Memory:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.used = rss_bytes()
        self.peak = self.used
        self.level = OK
        self.evict_cursor = 0

    def refresh(self) -> int:
        """Sample memory use and compute the warning level (called by the cron)."""
        self.used = rss_bytes()
        self.peak = max(self.peak, self.used)
        limit = self.server.config["maxmemory"]
        if not limit:
            self.level = OK
        else:
            ratio = self.used / limit
            self.level = (FULL if ratio >= 1.0 else EVICT if ratio >= 0.95
                          else EXTERNAL_REPL if ratio >= 0.75 else OK)
        if self.level >= EVICT:
            self.evict()
        return self.level

    @property
    def full(self) -> bool:
        return self.level >= FULL

    def evict(self, budget: int = 10000) -> int:
        """Free what is safe to free, walking the jobs incrementally (JSCAN order):
        at most ``budget`` jobs are looked at per call, so a node with millions
        of jobs never stalls here."""
        server = self.server
        freed = 0
        self.evict_cursor, ids = server.jobs.scan(self.evict_cursor, budget)
        for jid in ids:
            job = server.jobs.lookup(jid)
            if job is not None and (job.state == ACKED or (
                    job.retry == 0 and job.flags & FLAG_DELIVERED and job.state == ACTIVE)):
                server.jobs.unregister(job)
                freed += 1
        freed += server.queues.evict_idle(0)
        return freed
