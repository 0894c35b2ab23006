"""A job as GETJOB and QPEEK return it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from disque.protocol import text


@dataclass(frozen=True, slots=True)
class Job:
    """One job: its ID, queue and body, and with ``with_counters`` (GETJOB
    WITHCOUNTERS) how many times it was negatively acknowledged and delivered
    again beyond the first time (0 otherwise)."""

    id: str
    queue: str
    body: bytes
    nacks: int = 0
    additional_deliveries: int = 0

    @property
    def producer_id(self) -> str:
        """The first 8 hex digits of the ID of the node that created the job."""
        return self.id[2:10]

    @classmethod
    def from_reply(cls, entry: list[Any]) -> Job:
        """[queue, id, body] or, WITHCOUNTERS, [queue, id, body, "nacks", n,
        "additional-deliveries", n]."""
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
        )
