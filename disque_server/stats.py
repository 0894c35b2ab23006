"""The node's counters for INFO stats and the metrics: connections, bytes in and
out, clients blocked, jobs expired, ADDJOB refusals, and the samples behind the
instantaneous rates (the cron takes one a tick). The commands count their own
calls and time (``Command.calls``, ``Command.usec``)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field


@dataclass
class Stats:
    connections_received: int = 0
    rejected_connections: int = 0
    net_input_bytes: int = 0
    net_output_bytes: int = 0
    blocked_clients: int = 0
    expired_jobs: int = 0
    cron_ticks: int = 0  # how often the cron ran, idle or not (INFO timers; not reset)
    cron_ticks_coalesced: int = 0  # of them, slow ticks run by a bus wake-up (Server.cron)
    # ADDJOB refusals by error code (NOREPL, OOM, PAUSED, MAXLEN, ERR): counted on
    # those paths only; the metrics derive the successful ones from the calls.
    addjob_refused: dict[bytes, int] = field(default_factory=dict)
    # instantaneous metrics: (time, commands, input bytes, output bytes) samples
    samples: deque[tuple[float, int, int, int]] = field(default_factory=lambda: deque(maxlen=16))

    def reset(self) -> None:
        """CONFIG RESETSTAT: every counter back to zero but the clients blocked now."""
        self.connections_received = self.rejected_connections = 0
        self.net_input_bytes = self.net_output_bytes = 0
        self.expired_jobs = 0
        self.addjob_refused = {}
        self.samples = deque(maxlen=16)

    def count_refusal(self, command: bytes, code: bytes) -> None:
        if command == b"addjob":
            self.addjob_refused[code] = self.addjob_refused.get(code, 0) + 1

    def sample(self, commands_processed: int) -> None:
        self.samples.append(
            (time.monotonic(), commands_processed, self.net_input_bytes, self.net_output_bytes)
        )

    def rate(self, index: int) -> float:
        if len(self.samples) < 2:
            return 0.0
        t0, t1 = self.samples[0], self.samples[-1]
        dt = t1[0] - t0[0]
        return (t1[index] - t0[index]) / dt if dt > 0 else 0.0
