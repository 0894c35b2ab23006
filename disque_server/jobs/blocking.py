"""Why a client waits, and how it stops waiting.

A client blocks in GETJOB (empty queues), in a synchronous ADDJOB (the
replication), in ACKJOB (the GC of its jobs), or before its next command
while the queue it drained is refilled. The client holds one of these
objects while it waits; each knows what a timeout replies and what the
wait registered elsewhere, to undo it when the client stops waiting
(served, timed out, disconnected). ``Client.block`` and ``Client.unblock``
do the rest, the same for every kind.

``data`` is what the client waits for (a replication, an ACKJOB reply, a
refill): whoever finishes it wakes the client only if ``data`` is still
that object.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from disque_server.client import Client


class Blocked:
    """A wait with no timeout reply and nothing to undo."""

    __slots__ = ("data", "timer")

    def __init__(self, data: Any = None) -> None:
        self.data = data
        self.timer: asyncio.TimerHandle | None = None

    def timed_out(self, client: Client) -> None:
        """The reply a timeout gives (none: the client goes on with its next command)."""

    def release(self, client: Client) -> None:
        """Undo what the wait registered: the client stopped waiting."""


class BlockedGetJob(Blocked):
    """GETJOB on empty queues: the queues list the client, and serve it a job."""

    __slots__ = ("queues", "count", "withcounters")

    def __init__(self, queues: list[bytes], count: int, withcounters: bool) -> None:
        super().__init__()
        self.queues = queues
        self.count = count
        self.withcounters = withcounters

    def timed_out(self, client: Client) -> None:
        client.reply(client.proto.null_array)

    def release(self, client: Client) -> None:
        client.server.queues.unblock_client(client, self.queues)


class BlockedAddJob(Blocked):
    """A synchronous ADDJOB until the job is replicated (data: the Replication). It has
    no timer of its own: the replication cron replies NOREPL at the deadline."""

    __slots__ = ()


class BlockedAckJob(Blocked):
    """An ACKJOB reply held until the GC of its jobs finished (data: ack.AckWait, listed
    under each job ID in Acks.waits); a timeout gives the reply at once."""

    __slots__ = ()

    def timed_out(self, client: Client) -> None:
        client.reply(self.data.reply)

    def release(self, client: Client) -> None:
        client.server.acks.forget_wait(self.data)  # (the same package: jobs/ack.py)


class BlockedRefill(Blocked):
    """The next command of a client that drained a queue, held until the NEEDJOBS
    refill it caused is answered (data: federation.Refill, listing its waiters)."""

    __slots__ = ()

    def release(self, client: Client) -> None:
        self.data.waiters.pop(client, None)
