"""Rate limits, per worker process, as Celery's: ``@tasks.task(rate_limit="10/s")``
starts at most 10 calls of the task a second in each worker process, evenly
spaced (a call waits its turn in its handler thread, its job kept alive by the
worker's WORKING like any running job's).

Per process, not cluster-wide: a cluster-wide limit needs a shared counter,
and Disque's only atomic one is a queue's length on one node (MAXLEN), which
would put one node in the path of every call. N worker processes run a task at
most N times its rate.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


class RateLimit:
    """Starts spaced by ``interval`` seconds."""

    def __init__(self, text: str) -> None:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*/\s*([smh])\s*", text)
        if match is None or float(match[1]) <= 0:
            raise ValueError(
                f'a rate limit is "<calls>/s", "/m" or "/h" (e.g. "10/s"), not {text!r}'
            )
        self.text = text
        self.interval = UNITS[match[2]] / float(match[1])
        self.next_start = 0.0
        self.lock = threading.Lock()

    def turn(self) -> float:
        """Seconds to wait before this start (the slot is taken)."""
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_start)
            self.next_start = start + self.interval
            return start - now

    def wait(self) -> None:
        delay = self.turn()
        if delay > 0:
            time.sleep(delay)

    async def wait_async(self) -> None:
        delay = self.turn()
        if delay > 0:
            await asyncio.sleep(delay)
