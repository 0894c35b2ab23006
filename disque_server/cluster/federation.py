"""Federation: NEEDJOBS, YOURJOBS, and PAUSE propagation.

A node whose clients wait on an empty queue asks the others for jobs with
NEEDJOBS: broadcast to every reachable node (the first time at once, then
with a backoff from 2 s doubling up to 30 s), and ad hoc to the nodes that
recently provided jobs (from 25 ms doubling up to 2 s); and at once when a
queue that is importing drains. A node with queued jobs answers YOURJOBS
with some of them (all it was asked for only if it has twice as many, else
half, at least one), unless the queue is paused in output or it is itself
importing. Moved jobs stay owned by the sender (active, re-queued at its
retry time if never acknowledged), except RETRY 0 jobs, which move.

Beyond Disque, a NEEDJOBS is also demand (demand.py): until its sender's clients
stop waiting, a job queued here with no client of this node waiting for it goes
to that node at once (push_jobs), rather than waiting for its next NEEDJOBS (up
to 30 s). A node of ours asks at once whenever clients start waiting on a queue,
and takes the demand back with ENOUGHJOBS when they stop. A leaving node gives
its queued jobs away without being asked (hand_over).

Every NEEDJOBS gets an answer: a node with nothing to give sends YOURJOBS
with just the queue name. So a node knows when the refill it asked for
after a GETJOB drained a queue is complete, and holds that client's next
command until then (at most REFILL_WAIT_MAX_MS): the consumer that emptied
the queue sees the refill it caused, as it does with the C node, whose
bus round trip beats a client's, and its next GETJOB finds the jobs
instead of blocking for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.clock import now_ms
from disque_server.cluster import gc
from disque_server.cluster.demand import DEMAND_LINGER_MS, DEMAND_TTL_MS
from disque_server.cluster.node import NOT_CANDIDATE
from disque_server.job import (
    ACTIVE,
    FIELDS,
    job_from_fields,
    job_to_fields,
)
from disque_server.jobs import lifecycle
from disque_server.jobs.blocking import BlockedRefill
from disque_server.jobs.queue import PAUSED_IN, PAUSED_OUT, Queue

if TYPE_CHECKING:
    from disque_server.client import Client
    from disque_server.cluster import Cluster, Handler
    from disque_server.cluster.bus import BusLink
    from disque_server.cluster.node import ClusterNode

BCAST_MIN_MS: Final = 2000
BCAST_MAX_MS: Final = 30_000
ADHOC_MIN_MS: Final = 25
ADHOC_MAX_MS: Final = 2000
MIN_REQUEST: Final = 5
MAX_REQUEST: Final = 100
HAND_OVER_BATCH: Final = 500  # jobs of one queue a leaving node gives away a tick
REFILL_WAIT_MAX_MS: Final = 10


class Refill:
    """NEEDJOBS sent when a queue drained, until every asked node answered."""

    __slots__ = ("pending", "deadline", "waiters")

    def __init__(self, pending: set[bytes], deadline: int) -> None:
        self.pending = pending  # node IDs yet to answer
        self.deadline = deadline
        self.waiters: dict[Client, None] = {}  # clients held until it is done


def need_jobs(cluster: Cluster, name: bytes, reached_zero: bool = False) -> None:
    """Ask other nodes for jobs of this queue (Disque's needJobsForQueue)."""
    if cluster.leaving or cluster.size == 1:
        return
    q = cluster.server.queues.lookup(name)
    if q is None:
        return
    rate = q.import_rate
    if reached_zero and rate == 0:
        return
    now = now_ms()
    responders = q.valid_responders(now)
    to_fetch = rate // len(responders) if responders else MIN_REQUEST
    to_fetch = max(MIN_REQUEST, min(MAX_REQUEST, to_fetch))
    bcast_delay = min(BCAST_MIN_MS * (1 << min(q.needjobs_bcast_attempt, 16)), BCAST_MAX_MS)
    # Clients start waiting here: every node hears it now, whatever the backoff (the
    # demand it records lets it push jobs as they come: demand.py).
    starts_waiting = bool(q.clients) and name not in cluster.waiting
    if starts_waiting:
        cluster.waiting[name] = now
    if starts_waiting or now - q.needjobs_bcast_time > bcast_delay:
        q.needjobs_bcast_time = now
        q.needjobs_bcast_attempt += 1
        cluster.broadcast(b"NEEDJOBS", [name, b"1"])
    adhoc_delay = min(ADHOC_MIN_MS * (1 << min(q.needjobs_adhoc_attempt, 16)), ADHOC_MAX_MS)
    if responders and (reached_zero or now - q.needjobs_adhoc_time > adhoc_delay):
        q.needjobs_adhoc_time = now
        q.needjobs_adhoc_attempt += 1
        asked = {
            node_id
            for node_id in responders
            if cluster.send_to_id(node_id, b"NEEDJOBS", [name, b"%d" % to_fetch])
        }
        if reached_zero and asked:
            cluster.refills[name] = Refill(asked, now + REFILL_WAIT_MAX_MS)


def on_queue_drained(cluster: Cluster, q: Queue) -> None:
    """A queue ran out of jobs: if it was importing, ask again at once."""
    need_jobs(cluster, q.name, reached_zero=True)


def hold_for_refill(cluster: Cluster, client: Client, queue: bytes) -> None:
    """The client just drained this queue: run its next command after the refill."""
    refill = cluster.refills.get(queue)
    if refill is None or client.blocked is not None:
        return
    left = refill.deadline - now_ms()
    if left <= 0:
        return
    refill.waiters[client] = None
    client.block(BlockedRefill(refill), left)


def refill_answered(cluster: Cluster, queue: bytes, node_id: bytes) -> None:
    refill = cluster.refills.get(queue)
    if refill is None:
        return
    refill.pending.discard(node_id)
    if not refill.pending:
        del cluster.refills[queue]
        release_refill_waiters(refill)


def release_refill_waiters(refill: Refill) -> None:
    for client in list(refill.waiters):
        if client.blocked is not None and client.blocked.data is refill:
            client.unblock()


def push_jobs(cluster: Cluster, q: Queue) -> None:
    """Jobs queued here that no client of this node waits for, in a queue whose
    clients wait on other nodes: given to those nodes now (YOURJOBS), shared in
    turn, at most MAX_REQUEST to a node at once. What an answer to NEEDJOBS
    would not give is not pushed either (gives_jobs)."""
    if q.clients or not gives_jobs(cluster, q):
        return
    targets = cluster.demand.targets(q.name, now_ms(), cluster.nodes, NOT_CANDIDATE)
    if not targets:
        return
    share = min(MAX_REQUEST, -(-len(q.jobs) // len(targets)))  # (rounded up)
    for node in targets:
        if not q.jobs:
            break
        cluster.send(node, b"YOURJOBS", give_jobs(cluster, q, node, share))


def hand_over(cluster: Cluster, now: int) -> None:
    """A leaving node does not wait to be asked: each tick, up to HAND_OVER_BATCH
    jobs of each of its queues go to the other nodes (YOURJOBS), to those whose
    clients wait for the queue (demand) if any, else shared among every node
    linked, up and not leaving. Consumers elsewhere get them even while their
    own queues never empty (a steady flow, when nobody sends NEEDJOBS), and with
    no consumer anywhere they wait on a node that stays. They stay this node's
    until acknowledged (give_jobs), so the drain ends with their ACKs."""
    others: list[ClusterNode] | None = None
    for q in cluster.server.queues:
        if not q.jobs or q.flags & PAUSED_OUT:
            continue
        targets = cluster.demand.targets(q.name, now, cluster.nodes, NOT_CANDIDATE)
        if not targets:
            if others is None:
                others = [
                    n
                    for n in cluster.nodes.values()
                    if n is not cluster.myself
                    and n.link is not None
                    and NOT_CANDIDATE.isdisjoint(n.flags)
                ]
            targets = others
        if not targets:
            return  # nowhere to go: the leave waits (the drain says so)
        share = -(-min(len(q.jobs), HAND_OVER_BATCH) // len(targets))  # (rounded up)
        for node in targets:
            if not q.jobs:
                break
            cluster.send(node, b"YOURJOBS", give_jobs(cluster, q, node, share))


def gives_jobs(cluster: Cluster, q: Queue) -> bool:
    """Whether the queue has jobs for other nodes (a NEEDJOBS answer, a push): not
    when paused in output, nor while it imports jobs for clients that wait here
    (a job does not bounce between consumer nodes). Jobs pushed
    here after the last client left (its demand lingers) go on to the nodes whose
    clients wait, not only once the import rate has fallen to 0 (5 s) and one of
    them asks again (its NEEDJOBS backoff: up to 30 s)."""
    importing = q.import_rate != 0 and q.name in cluster.waiting
    return bool(q.jobs) and not q.flags & PAUSED_OUT and not importing


def give_jobs(cluster: Cluster, q: Queue, node: ClusterNode, count: int) -> list[bytes]:
    """Take up to ``count`` of the queue's oldest jobs for that node: a YOURJOBS'
    fields. Each stays ours, active, to be queued again at its retry time unless
    acknowledged (the node joins its owners), except RETRY 0 jobs, which move."""
    server = cluster.server
    now = now_ms()
    fields: list[bytes] = []
    for _ in range(min(count, len(q.jobs))):
        job = q.jobs.popleft()
        q.jobs_out += 1
        job.state = ACTIVE
        if node.id not in job.nodes_delivered:
            job.nodes_delivered = job.nodes_delivered + (node.id,)
        fields += job_to_fields(job)
        if job.retry == 0:
            server.jobs.unregister(job)  # at-most-once: the job moves
        else:
            lifecycle.requeue_later(server.jobs, job, now)  # still ours until acknowledged
            server.aof.loadjob(job)  # (the AOF sits below the cluster)
    return fields


def cron(cluster: Cluster, now: int) -> None:
    """Keep asking for the queues with clients waiting (backoffs apply); take the
    demand back for those no client has waited on for DEMAND_LINGER_MS; while
    leaving, hand the queued jobs over."""
    if cluster.waiting:
        withdraw_demand(cluster, now)
    if cluster.leaving and len(cluster.server.queues):
        hand_over(cluster, now)
    if cluster.refills:
        for name, refill in list(cluster.refills.items()):
            if now > refill.deadline:
                del cluster.refills[name]  # an asked node died or is slow: stop waiting
                release_refill_waiters(refill)
    if not cluster.server.queues.with_clients:
        return  # (the common idle tick: no copy of an empty table)
    for q in list(cluster.server.queues.with_clients):
        if q.clients and not q.jobs:
            need_jobs(cluster, q.name)


def withdraw_demand(cluster: Cluster, now: int) -> None:
    """One ENOUGHJOBS naming the queues whose clients have stopped waiting here
    for DEMAND_LINGER_MS (a node leaving has none waiting: its clients were
    told). One message for them all: a reply queue read once per task call
    (disque.tasks' results) is one name in the tick's message, not a broadcast."""
    queues = cluster.server.queues
    done: list[bytes] = []
    for name, since in list(cluster.waiting.items()):
        q = queues.lookup(name)
        if q is not None and q.clients:
            cluster.waiting[name] = now
        elif now - since > DEMAND_LINGER_MS:
            del cluster.waiting[name]
            done.append(name)
            if q is not None and q.jobs:
                push_jobs(cluster, q)  # what was pushed here meanwhile goes on
    if done:
        cluster.broadcast(b"ENOUGHJOBS", done)


# ---- message handlers ------------------------------------------------------------------


def on_needjobs(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    server = cluster.server
    q = server.queues.lookup(payload[0])
    count = int(payload[1])
    cluster.demand.wanted(payload[0], sender.id, now_ms() + DEMAND_TTL_MS)
    if q is None or not gives_jobs(cluster, q):
        cluster.send(sender, b"YOURJOBS", [payload[0]])  # nothing for you
        return
    qlen = len(q.jobs)
    give = count if qlen >= count * 2 else qlen // 2
    cluster.send(sender, b"YOURJOBS", give_jobs(cluster, q, sender, max(give, 1)))


def on_enoughjobs(
    cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]
) -> None:
    """The sender's clients stopped waiting on these queues (a node of ours)."""
    for name in payload:
        cluster.demand.withdrawn(name, sender.id)


def on_yourjobs(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    server = cluster.server
    if len(payload) == 1:
        refill_answered(cluster, payload[0], sender.id)  # no jobs to give
        return
    now = now_ms()
    me = cluster.myself.id
    queues: set[bytes] = set()
    for i in range(0, len(payload) - FIELDS + 1, FIELDS):
        job = job_from_fields(payload[i : i + FIELDS], ACTIVE)
        if job is None:
            continue
        local = server.jobs.lookup(job.id)
        if local is None and gc.answer_stray_copy(cluster, sender, job.id):
            if job.queue is not None:
                queues.add(job.queue)  # (the refill asked for is answered still)
            continue  # acknowledged and collected here: not delivered again
        if local is not None:
            if local.state != ACTIVE:
                continue  # queued already, or acknowledged here (maybe a dummy ACK)
            # A move, not a re-queue: no QUEUED, no delivery counted (as Disque's
            # receiveYourJobs), even though this node held a copy already.
            lifecycle.first_queueing_here(local)
            server.queues.enqueue_job(local)
            job = local
        elif me not in job.nodes_delivered:
            job.nodes_delivered = job.nodes_delivered + (me,)
        if job.retry and sender.id not in job.nodes_delivered:
            # The sender keeps its copy (active, to be queued again after RETRY):
            # the ACK's SETACK and DELJOB must reach it. Disque's receiveYourJobs
            # adds neither node, so a copy moved through a C node that had it by
            # YOURJOBS was out of every list: acknowledged elsewhere, it came back
            # each RETRY, delivered again, and a leaving node never drained.
            job.nodes_delivered = job.nodes_delivered + (sender.id,)
        if local is None:
            lifecycle.moved_here(job)
            q = server.queues.lookup(job.queue)
            if q is not None:
                job.queue = q.name
            server.jobs.register(job)
            server.queues.enqueue_job(job)
            server.aof.loadjob(job)  # (the AOF sits below the cluster)
        assert job.queue is not None  # a job moved by YOURJOBS was queued
        q = server.queues.create(job.queue)
        q.count_import()
        if sender.id not in q.needjobs_responders:
            q.needjobs_bcast_attempt = 0  # a new source: broadcast sooner next time
        q.needjobs_responders[sender.id] = now
        q.needjobs_adhoc_attempt = 0
        queues.add(q.name)
    for name in queues:
        refill_answered(cluster, name, sender.id)


def on_pause(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    server = cluster.server
    flags = int(payload[1]) & (PAUSED_IN | PAUSED_OUT)
    q = server.queues.lookup(payload[0])
    if q is None and flags:
        q = server.queues.create(payload[0])
    if q is not None:
        server.queues.set_pause(q, flags)


HANDLERS: Final[dict[bytes, Handler]] = {
    b"NEEDJOBS": on_needjobs,
    b"YOURJOBS": on_yourjobs,
    b"ENOUGHJOBS": on_enoughjobs,
    b"PAUSE": on_pause,
}
