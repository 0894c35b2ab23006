"""Python's cyclic garbage collector, kept off the millions of jobs.

A full collection walks every container object: about 250 ms with 1M jobs
queued, an event-loop stall that the 25%-growth rule of CPython repeats
whenever a big queue turns over. Jobs (and queues) hold no reference
cycles, so the collector has nothing to find among them: at every cron
tick everything that survived is frozen (``gc.freeze``, a constant-time
list splice) and collections only ever walk what was allocated since. In case
something long-lived does form a cycle, everything is thawed and collected
once an hour (FULL_COLLECT_EVERY_S), the one stall this keeps.

This is Python's memory GC, not Disque's ACK garbage collection (jobs/ack.py,
cluster/gc.py).
"""

from __future__ import annotations

import gc
import time
from typing import Final

FULL_COLLECT_EVERY_S: Final = 3600


class Collector:
    def __init__(self) -> None:
        # Young collections over short-lived request objects only: rarer is cheaper.
        gc.set_threshold(50_000, 20, 20)
        self.last_full = time.monotonic()

    def cron(self) -> None:
        now = time.monotonic()
        if now - self.last_full >= FULL_COLLECT_EVERY_S:
            self.last_full = now
            gc.unfreeze()
            gc.collect()
        gc.freeze()
