"""client-output-buffer-limit: close the clients that do not read their replies.

One class, ``normal``, as in Disque: a client whose output buffer (what the
transport holds, not yet sent) is over the hard limit is closed; over the
soft limit for soft-seconds in a row, too. Checked by the cron, every tick,
only while a limit is set (the default, "normal 0 0 0", sets none).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from disque_server.config import output_limits

if TYPE_CHECKING:
    from disque_server.client import Client
    from disque_server.log import Log


class OutputLimits:
    def __init__(self) -> None:
        self.soft_since: dict[Client, float] = {}  # over the soft limit since (monotonic)
        self.setting = ""  # client-output-buffer-limit as last parsed, and its numbers
        self.limits = (0, 0, 0)

    def enforce(self, clients: dict[Client, None], setting: str, log: Log) -> None:
        """Close the clients over their limits (``setting``: client-output-buffer-limit)."""
        if setting != self.setting:  # parsed once per CONFIG SET, not every tick
            self.setting, self.limits = setting, output_limits(setting)
        hard, soft, seconds = self.limits
        if not hard and not soft:
            self.soft_since.clear()
            return
        now = time.monotonic()
        for gone in [c for c in self.soft_since if c not in clients]:
            del self.soft_since[gone]
        for client in list(clients):
            if client.transport is None or client.closing:
                self.soft_since.pop(client, None)
                continue
            size = client.transport.get_write_buffer_size()
            if hard and size > hard:
                self.close(log, client, size)
                continue
            if soft and size > soft:
                since = self.soft_since.setdefault(client, now)
                if now - since >= seconds:
                    self.close(log, client, size)
            else:
                self.soft_since.pop(client, None)

    def close(self, log: Log, client: Client, size: int) -> None:
        self.soft_since.pop(client, None)
        log.warning(
            "Client %s closed for overcoming of output buffer limits (%d bytes pending).",
            client.addr,
            size,
        )
        client.closing = True
        if client.transport is not None:
            client.transport.abort()  # close() would wait for the buffer to drain
