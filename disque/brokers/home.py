"""The node a broker's clients start on, one for all of them (the consuming
thread's, each sending thread's), so that what a process adds is queued where
its own consumer waits.

A client alone picks its seeds in random order, so a broker's clients would
spread over the cluster: a Dramatiq worker's retries and delayed messages
(added again from its worker threads), a kombu channel's requeued messages,
a result stored and then read, would be queued on one node while the consumer
waits on another. Disque then has to move them (federation), and a node that
took jobs of that queue from the others in the last seconds gives none away
(so that a job does not bounce between consumer nodes): they can wait there
for the next NEEDJOBS, seconds later, and a non-blocking read (kombu's
``basic_get``, GETJOB NOHANG) does not see them at all. The first client that
connects picks a node at random, as before (so processes still spread over
the cluster); the others prefer it, and a client that had to go elsewhere (it
left, or went away) makes its node the home.

One home per process and set of seeds (``Home.of``): a Dramatiq broker and its
result backend, kombu's connections (Celery makes several), and a broker made
again (as Dramatiq's own tests do, one per test) share it. A new broker on a
new node would find its queue's jobs pushed to the node its predecessor
consumed on, which keeps them a while (see above).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from disque.client import Client
from disque.commands import Address, seed_addresses
from disque.errors import DisqueError


class Home:
    homes: dict[frozenset[Address], Home] = {}
    homes_lock = threading.Lock()

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.address: Address | None = None

    @classmethod
    def of(cls, nodes: Sequence[object]) -> Home:
        """This process's home for these seeds (as ``Client`` takes them)."""
        key = frozenset(seed_addresses(nodes))
        with cls.homes_lock:
            return cls.homes.setdefault(key, cls())

    def join(self, client: Client) -> Client:
        """Connect the client, to the home node if it answers."""
        with self.lock:
            try:
                client.connect(prefer=self.address)
            except DisqueError:
                return client  # it connects at its first command, and says then what is wrong
            self.address = client.address
        return client
