"""Consumer locality, the optional point 3 of Disque's "Client libraries": a
consumer that gets most of its jobs from a node other than the one it is
connected to moves there, so the jobs stop crossing the cluster (federation:
NEEDJOBS / YOURJOBS) on their way to it.

A job ID names the node that produced it (``D-<first 8 hex of its ID>-...``).
``Locality`` keeps the producers of the last jobs received; it suggests a move
when one other node produced most of them. The hysteresis keeps a consumer from
flapping between nodes that produce alike: a clear majority (``share``) of at
least ``min_jobs`` jobs received since the last move, and no move within
``cooldown`` seconds of the last one.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Iterable


class Locality:
    def __init__(
        self, window: int = 200, share: float = 0.75, min_jobs: int = 50, cooldown: float = 10.0
    ) -> None:
        self.recent: deque[str] = deque(maxlen=window)
        self.share = share
        self.min_jobs = min_jobs
        self.cooldown = cooldown
        self.moved_at = float("-inf")
        self.moves = 0

    def observe(self, producers: Iterable[str]) -> None:
        """Count where jobs just received were produced (their ID prefixes)."""
        self.recent.extend(producers)

    def suggest(self, connected_id: str) -> str | None:
        """The ID prefix of the node to move to, or None to stay."""
        if len(self.recent) < self.min_jobs or time.monotonic() - self.moved_at < self.cooldown:
            return None
        prefix, count = Counter(self.recent).most_common(1)[0]
        if connected_id.startswith(prefix) or count < self.share * len(self.recent):
            return None
        return prefix

    def moved(self) -> None:
        """A move was made (or found impossible): start counting afresh."""
        self.recent.clear()
        self.moved_at = time.monotonic()
        self.moves += 1
