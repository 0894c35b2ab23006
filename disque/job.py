"""A job as GETJOB and QPEEK return it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from disque.protocol import text


@dataclass(frozen=True, slots=True)
class Job:
    """One job: its ID, queue and body, and with ``with_counters`` (GETJOB
    WITHCOUNTERS) how many times it was negatively acknowledged and delivered
    again beyond the first time (0 otherwise). ``node``: the ``host:port`` of the
    node that delivered it (GETJOB), where its NACK and WORKING belong."""

    id: str
    queue: str
    body: bytes
    nacks: int = 0
    additional_deliveries: int = 0
    node: str = field(default="", compare=False)

    @property
    def at_most_once(self) -> bool:
        """A RETRY 0 job: delivered at most once, never queued again. Disque's IDs
        say it: their last four hex digits (the TTL in minutes) are even."""
        return int(self.id[-4:], 16) % 2 == 0

    @property
    def producer_id(self) -> str:
        """The first 8 hex digits of the ID of the node that created the job."""
        return self.id[2:10]

    @classmethod
    def from_reply(cls, entry: list[Any], node: str = "") -> Job:
        """[queue, id, body] or, WITHCOUNTERS, [queue, id, body, "nacks", n,
        "additional-deliveries", n]; ``node``: where it came from."""
        queue, jid, body = entry[0], entry[1], entry[2]
        counters: dict[str, Any] = {
            text(k): v for k, v in zip(entry[3::2], entry[4::2], strict=False)
        }
        return cls(
            id=text(jid),
            queue=text(queue),
            body=body if isinstance(body, bytes) else text(body).encode(),
            nacks=int(counters.get("nacks", 0)),
            additional_deliveries=int(counters.get("additional-deliveries", 0)),
            node=node,
        )
