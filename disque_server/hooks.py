"""Hooks: what the modules below server.py call above them.

The node is a one-way stack (see ``disque_server/__init__.py``): a module imports
only the modules below it. Where a lower module must make something happen above
it (a re-queued job told to the other owners, a job's change written to the AOF,
the GC of an acknowledged job, a client's request run through the command table),
it calls a method of ``Hooks``: each one names the event, and ``server.NodeHooks``,
its subclass, is the one place where the call goes on to the layer that acts on
it. ``Hooks`` itself does nothing, as a node with no cluster, no AOF and no
command would. tests/unit/test_layers.py checks that the lower modules make no
other call upward through the server.

``Hooks`` is a native class in the compiled node: a hook call is a C call through
its vtable, not a Python call (some are on every request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from disque_server.ack import AckWait
    from disque_server.client import Client
    from disque_server.job import Job
    from disque_server.queue import Queue

NEVER_MS: Final = 1 << 61  # (a small int for compiled code: 1 << 62 would be boxed)


class Hooks:
    # ---- from the queues (queue.py) ------------------------------------------------
    def job_requeued(self, job: Job, nack: bool) -> None:
        """A job was queued again (a re-queue, or a NACK): the other nodes that hold
        it hear it (QUEUED), and stop re-queueing it themselves."""

    def job_working(self, job: Job) -> None:
        """A job with a RETRY was delivered, and other nodes hold it too: they
        postpone their re-queue as well (WORKING)."""

    def job_timer_changed(self, job: Job, now: int) -> None:
        """A job's state or re-queue time changed: the registry files its timer again
        (``now``: the caller's clock reading in ms)."""

    def queue_drained(self, q: Queue) -> None:
        """A GETJOB took the last job of a queue: federation may ask other nodes for
        more (NEEDJOBS)."""

    def serve_blocked(self, client: Client, q: Queue) -> None:
        """A job is ready in a queue a client is blocked on in GETJOB: reply with it."""

    # ---- from the job registry (registry.py) -------------------------------------------
    def job_changed(self, job: Job) -> None:
        """A job was created, imported or acknowledged: the AOF records it."""

    def job_unregistered(self, job: Job) -> None:
        """A job was forgotten: the AOF, a replication still waiting for its copies,
        and ACKJOB replies waiting for its GC hear it."""

    def gc_time(self, job: Job) -> int:
        """When (ms) the GC of an acknowledged job is to be tried next."""
        return NEVER_MS

    def try_gc(self, job: Job) -> bool:
        """Try the GC of an acknowledged job; True if the job is gone."""
        return False

    def node_leaving(self) -> bool:
        """Whether this node is leaving the cluster (its jobs then never expire)."""
        return False

    def job_will_queue(self, job: Job) -> None:
        """A job's re-queue is due in WILLQUEUE_ADVANCE_MS: the other owners are told
        (WILLQUEUE), so that one of them can claim it."""

    # ---- from blocked clients (blocking.py) ------------------------------------------
    def ack_wait_released(self, wait: AckWait) -> None:
        """An ACKJOB reply held for the GC of its jobs was given (or the client went):
        the GC no longer reports to it (ack.AckWait)."""

    # ---- from the acknowledgements (ack.py) -------------------------------------------
    def alone(self) -> bool:
        """Whether this node is a cluster of one (an acknowledged job is then simply
        deleted)."""
        return True

    def gc_started(self, job: Job) -> bool:
        """One GC attempt of an acknowledged job in a cluster: SETACK to the owners
        still to confirm (cluster/gc.py); True when it could be deleted at once."""
        return False

    def gc_in_flight(self, job: Job) -> bool:
        """A GC attempt is out and every owner still to confirm can answer it soon
        (ACKJOB then waits for it)."""
        return False

    # ---- from the client connections (client.py) --------------------------------------
    def requests_started(self) -> None:
        """A client's requests read this pass are about to run, one after another:
        the commands' clock starts (each command is timed from the end of the one
        before: Server.dispatch)."""

    def request(self, client: Client, argv: list[bytes]) -> None:
        """Run one request: the command table, the checks every command passes, the
        command (Server.dispatch)."""

    def requests_done(self) -> None:
        """The client's requests of this pass have run: a streak of fast commands,
        timed as one, ends (Server.end_streak)."""

    def replies_ready(self, client: Client) -> None:
        """A client has replies to send: they are written once every client of this
        event-loop pass has run (Server.flush_later)."""

    # ---- from maxmemory (eviction.py) --------------------------------------------------
    def client_buffers(self) -> int:
        """What the clients cost: each connection, and its input and output
        buffers (part of used_memory, summed once a second)."""
        return 0

    # ---- from the cluster and the commands ---------------------------------------------
    def leaving_started(self) -> None:
        """This node started leaving the cluster (CLUSTER LEAVING yes): the clients
        blocked in GETJOB are told to go elsewhere (-LEAVING)."""

    def shutdown_requested(self, exit_code: int) -> None:
        """SHUTDOWN: no command runs from now on; the node stops (Server.stop)."""
