"""What the modules below server.py tell and ask the layers above them.

The node is a one-way stack (disque_server/layers.py): a module imports only the
modules below it. Where a lower module must make something happen above it, it
calls a method of one of two classes, each method named after the event:

- ``JobEvents``: what a job's life (the jobs package) tells the cluster and the
  AOF (a re-queue told to the other owners, a change written to the AOF, the
  cluster's GC), and what it asks of the cluster (alone? leaving?).
  ``cluster.events.ClusterJobEvents`` acts on it: a re-queue goes from the
  registry to the queue to the cluster, never through the server.
- ``Hooks``: the rest, the server's own business: a blocked client to serve, the
  client connections' requests and replies, maxmemory's count of their
  buffers, leaving and shutdown. ``server.NodeHooks`` acts on it.

Each class itself does nothing, as a lone node with no AOF and no command
would. tests/unit/test_layers.py checks that the lower modules make no other
call upward through the server. Both are native classes in the compiled node:
a call is a C call through a vtable, not a Python call (some are on every
request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from disque_server.client import Client
    from disque_server.job import Job
    from disque_server.jobs.queue import Queue


class JobEvents:
    """What the jobs package tells the cluster and the AOF, and asks the cluster."""

    # ---- events: from the queues (jobs/queue.py) ---------------------------------------
    def job_requeued(self, job: Job, nack: bool) -> None:
        """A job was queued again (a re-queue, or a NACK): the other nodes that hold
        it hear it (QUEUED), and stop re-queueing it themselves."""

    def job_working(self, job: Job) -> None:
        """A job with a RETRY was delivered, and other nodes hold it too: they
        postpone their re-queue as well (WORKING)."""

    def job_postponed(self, job: Job, delay_ms: int) -> None:
        """NACK ... DELAY (beyond Disque) holds a job for ``delay_ms``: the other nodes
        that hold it must not queue it earlier either (POSTPONE)."""

    def queue_drained(self, q: Queue) -> None:
        """A GETJOB took the last job of a queue: federation may ask other nodes for
        more (NEEDJOBS)."""

    def queue_wanted_elsewhere(self, q: Queue) -> None:
        """Jobs were queued where no client waits for them, and clients of other
        nodes wait on that queue: federation gives them the jobs (YOURJOBS)."""

    # ---- events: from the registry (jobs/registry.py) and the acks (jobs/ack.py) -------
    def job_changed(self, job: Job) -> None:
        """A job was created, imported or acknowledged: the AOF records it."""

    def job_unregistered(self, job: Job) -> None:
        """A job was forgotten: the AOF and a replication still waiting for its
        copies hear it."""

    def job_will_queue(self, job: Job) -> None:
        """A job's re-queue is due in WILLQUEUE_ADVANCE_MS: the other owners are told
        (WILLQUEUE), so that one of them can claim it."""

    def gc_started(self, job: Job) -> bool:
        """One GC attempt of an acknowledged job in a cluster: SETACK to the owners
        still to confirm (cluster/gc.py); True when it could be deleted at once."""
        return False

    # ---- queries -----------------------------------------------------------------------
    def node_leaving(self) -> bool:
        """Whether this node is leaving the cluster (its jobs then never expire)."""
        return False

    def alone(self) -> bool:
        """Whether this node is a cluster of one (an acknowledged job is then simply
        deleted)."""
        return True

    def gc_in_flight(self, job: Job) -> bool:
        """A GC attempt is out and every owner still to confirm can answer it soon
        (ACKJOB then waits for it)."""
        return False


class Hooks:
    """The server's own business, called from below it (server.NodeHooks)."""

    # ---- from the queues (jobs/queue.py) -----------------------------------------------
    def serve_blocked(self, client: Client, q: Queue) -> None:
        """A job is ready in a queue a client is blocked on in GETJOB: reply with it."""

    # ---- from the client connections (client.py) ---------------------------------------
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

    # ---- from the job timers (jobs/registry.py) ----------------------------------------
    def timer_due_sooner(self, at: int) -> None:
        """A job's timer is due (``at``, ms) before the cron's next tick, which an
        idle or quiet node set late: the tick comes at that time
        (Server.tick_sooner)."""

    # ---- from the cluster bus and the clients (cluster/, client.py) ---------------------
    def bus_read(self) -> None:
        """A bus link read data: a wake-up that the slow tick of an idle or quiet
        node, once its time has come, shares rather than having one of its own
        (Server.run_cron_now)."""

    def next_tick_changed(self) -> None:
        """What the slow tick of an idle or quiet node was set from changed: a
        probe was answered (the tick can wait for the next one), a suspicion or a
        report arrived, a client connected (it must come sooner). The tick moves
        (Server.reschedule_slow_tick)."""

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
