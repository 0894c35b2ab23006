"""LATENCY and INFO latency: how long the event loop was held. The cron measures
how late it ran (a stall: something held the loop that long); a stall of at
least latency-monitor-threshold ms is an ``event-loop`` latency event, as
Redis's latency monitor keeps them (its time, the latest, the worst)."""

from __future__ import annotations

import time


class LatencyMonitor:
    def __init__(self) -> None:
        self.events: dict[str, tuple[int, int, int]] = {}  # event -> (time, latest, worst)
        self.max_stall_ms = 0  # the worst stall the cron saw (INFO latency, the metrics)

    def record_stall(self, stall_ms: int, threshold_ms: int) -> None:
        """How late the cron ran: the loop was busy that long."""
        if stall_ms <= 0:
            return
        self.max_stall_ms = max(self.max_stall_ms, stall_ms)
        if threshold_ms and stall_ms >= threshold_ms:
            _, _, worst = self.events.get("event-loop", (0, 0, 0))
            self.events["event-loop"] = (int(time.time()), stall_ms, max(worst, stall_ms))

    def latest(self) -> list[tuple[str, int, int, int]]:
        """LATENCY LATEST: (event, time, latest, worst) for each event seen."""
        return [(name, *values) for name, values in self.events.items()]

    def reset(self) -> None:
        self.events.clear()
        self.max_stall_ms = 0
