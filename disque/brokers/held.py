"""The jobs a broker's consumer holds unacknowledged (delivered, being processed or
kept for an ETA), kept alive with WORKING every half RETRY so Disque does not
deliver them again behind the consumer's back. Held and forgotten from any
thread; WORKING is sent from the consuming thread, on the connection that
fetched them (the node that delivered them)."""

from __future__ import annotations

import threading
import time

from disque.client import Client
from disque.errors import DisqueError, NoJob


class Held:
    def __init__(self, retry: int) -> None:
        self.retry = retry
        self.lock = threading.Lock()
        self.said: dict[str, float] = {}  # job ID -> when held or last said WORKING

    def __len__(self) -> int:
        with self.lock:
            return len(self.said)

    def hold(self, job_id: str) -> None:
        with self.lock:
            self.said[job_id] = time.monotonic()

    def forget(self, job_id: str) -> None:
        with self.lock:
            self.said.pop(job_id, None)

    def keep_alive(self, client: Client) -> None:
        """WORKING for each job held past half its RETRY since it was last said."""
        now = time.monotonic()
        with self.lock:
            due = [jid for jid, said in self.said.items() if now - said >= self.retry / 2]
        for jid in due:
            try:
                client.working(jid)
            except NoJob:
                pass  # acknowledged meanwhile, or not known on this node
            except DisqueError:
                continue  # tried again next time
            with self.lock:
                if jid in self.said:
                    self.said[jid] = now
