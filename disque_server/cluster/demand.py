"""Demand: which other nodes have consumers waiting on which queues.

Beyond Disque. Disque moves jobs to consumers by pull only: a node whose
clients wait on an empty queue broadcasts NEEDJOBS at once, then backing
off from 2 s doubling to 30 s. A job added afterwards on a node where no
consumer waits stays there until the next broadcast: up to 30 s while a
consumer waits on the next node.

Here a NEEDJOBS is also remembered, as a lease: that node wants jobs of
that queue for DEMAND_TTL_MS (its broadcasts, at most BCAST_MAX_MS apart
while its clients wait, renew it). A job queued where no client waits for
it goes at once to a node that wants it (federation.push_jobs, a YOURJOBS,
as an answer to NEEDJOBS would be). A node of ours also announces at once
when clients start waiting on a queue (federation.need_jobs), and takes its
demand back with ENOUGHJOBS when they have stopped waiting for
DEMAND_LINGER_MS (a worker between two GETJOBs does not toggle it). Disque
nodes send NEEDJOBS as always, and never get ENOUGHJOBS (dialect.py drops
it); their leases lapse.

The table is by queue name, not in the Queue (an idle queue is evicted,
the demand for it is not), and ``Queues.wanted_elsewhere`` is this very
dict: the queue side's one test per job queued with no client waiting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from disque_server.cluster.node import ClusterNode

# A NEEDJOBS stands for this long: longer than a waiting node's broadcasts are
# apart (federation.BCAST_MAX_MS, 30 s), so that they renew it.
DEMAND_TTL_MS: Final = 35_000
# A node of ours takes back its demand for a queue (ENOUGHJOBS) once no client has
# waited on it for this long.
DEMAND_LINGER_MS: Final = 2000


class Demand:
    """Queue name -> the other nodes that want its jobs, and until when (ms)."""

    __slots__ = ("by_queue", "turn")

    def __init__(self) -> None:
        self.by_queue: dict[bytes, dict[bytes, int]] = {}
        self.turn: dict[bytes, int] = {}  # queue -> pushes so far (whose turn is next)

    def wanted(self, queue: bytes, node_id: bytes, until: int) -> None:
        """That node's clients wait on the queue (a NEEDJOBS)."""
        nodes = self.by_queue.get(queue)
        if nodes is None:
            nodes = self.by_queue[queue] = {}
        nodes[node_id] = until

    def withdrawn(self, queue: bytes, node_id: bytes) -> None:
        """That node's clients stopped waiting on the queue (ENOUGHJOBS)."""
        nodes = self.by_queue.get(queue)
        if nodes is not None:
            nodes.pop(node_id, None)
            if not nodes:
                self.forget_queue(queue)

    def forget_node(self, node_id: bytes) -> None:
        """A node forgotten, reset or gone: it wants nothing any more."""
        for queue in list(self.by_queue):
            self.withdrawn(queue, node_id)

    def forget_queue(self, queue: bytes) -> None:
        del self.by_queue[queue]
        self.turn.pop(queue, None)

    def targets(
        self, queue: bytes, now: int, nodes: dict[bytes, ClusterNode], excluded: frozenset[str]
    ) -> list[ClusterNode]:
        """The nodes to give the queue's jobs to now, in turn: each that wants them,
        its lease running, linked and with none of the ``excluded`` flags (failing,
        leaving). Lapsed leases and unknown nodes are dropped. Each call starts
        one further along, so that nodes waiting on one queue share its jobs."""
        wanting = self.by_queue.get(queue)
        if wanting is None:
            return []
        found: list[ClusterNode] = []
        for node_id, until in list(wanting.items()):
            node = nodes.get(node_id)
            if until < now or node is None:
                del wanting[node_id]
            elif node.link is not None and excluded.isdisjoint(node.flags):
                found.append(node)
        if not wanting:
            self.forget_queue(queue)
            return []
        if len(found) > 1:
            turn = self.turn.get(queue, 0)
            self.turn[queue] = turn + 1
            start = turn % len(found)
            found = found[start:] + found[:start]
        return found
