"""ACK garbage collection: SETACK, GOTACK, DELJOB.

The node holding an acknowledged job sends SETACK to every node that may
have a copy and is not yet confirmed (to every node, for a dummy ACK whose
owners are unknown). Each answers GOTACK saying whether it knew the job;
a node that knows more possible owners than the sender runs its own GC
instead. When every owner confirmed, DELJOB deletes the copies and the local
job. A dummy ACK is dropped once an owner (which then does the GC) or every
node answered. Until then the GC is retried with a growing backoff, so an
ACK survives owners being down or partitioned away.

Beyond Disque: a node remembers the jobs it collected lately that a Disque
node owned too (``Collected``), and answers a stray copy's WILLQUEUE, QUEUED
or YOURJOBS with SETACK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.cluster.node import C_NODE, HANDSHAKE
from disque_server.job import ACKED, WAIT_REPL, Job

if TYPE_CHECKING:
    from disque_server.cluster import Cluster, Handler
    from disque_server.cluster.bus import BusLink
    from disque_server.cluster.node import ClusterNode


# The collected jobs remembered (oldest forgotten first): about 100 bytes each.
COLLECTED_MAX: Final = 65_536


class Collected:
    """IDs of acknowledged jobs this node deleted lately, among whose owners was a
    Disque node.

    Why: Disque's receiveYourJobs adds no node to a moved job's owners, and its
    sender keeps its copy (active, queued again after RETRY). A copy that went
    from one Disque node to another is then on no list: acknowledged and collected
    elsewhere, it comes back at each RETRY, is delivered again, and a leaving node
    holding it never drains. Its WILLQUEUE and QUEUED still reach the owners it
    knows: one of ours that collected the job tells it that it was acknowledged
    (an ACK is final, and job IDs are never reused). Nodes of ours list every
    node a job moves to (federation.py), so a job only they owned needs none."""

    __slots__ = ("ids",)

    def __init__(self) -> None:
        self.ids: dict[bytes, None] = {}  # (insertion order: the oldest first)

    def add(self, job_id: bytes) -> None:
        ids = self.ids
        ids[job_id] = None
        if len(ids) > COLLECTED_MAX:
            del ids[next(iter(ids))]

    def __contains__(self, job_id: bytes) -> bool:
        return job_id in self.ids


def job_collected(cluster: Cluster, job: Job) -> None:
    """An acknowledged job was deleted here: remember it if a Disque node owned it."""
    nodes = cluster.nodes
    for node_id in job.nodes_delivered:
        node = nodes.get(node_id)
        if node is not None and node.kind == C_NODE:
            cluster.collected.add(job.id)
            return


def answer_stray_copy(cluster: Cluster, sender: ClusterNode, job_id: bytes) -> bool:
    """A node spoke of a job unknown here (WILLQUEUE, QUEUED, YOURJOBS): if this
    node collected it, SETACK (claiming no owner: the sender runs the GC of its
    copy). True when it did."""
    if job_id not in cluster.collected:
        return False
    cluster.send(sender, b"SETACK", [job_id, b"0"])
    return True


def is_dummy(job: Job) -> bool:
    return not job.nodes_delivered


def all_node_ids(cluster: Cluster) -> list[bytes]:
    return [n.id for n in cluster.nodes.values() if HANDSHAKE not in n.flags]


def start_gc(cluster: Cluster, job: Job) -> bool:
    """One GC attempt: True when the job could be deleted right away."""
    me = cluster.myself.id
    if me not in job.nodes_confirmed:
        job.nodes_confirmed = job.nodes_confirmed + (me,)
    dummy = is_dummy(job)
    confirmed = job.nodes_confirmed  # (a few IDs: no sets built per job)
    if (not dummy and all(n in confirmed for n in job.nodes_delivered)) or (
        dummy and cluster.size == 1
    ):
        cluster.server.jobs.unregister(job)
        return True
    targets = all_node_ids(cluster) if dummy else job.nodes_delivered
    cluster.send_batched_to_ids(
        [n for n in targets if n not in job.nodes_confirmed],
        b"SETACK",
        job.id,
        b"%d" % len(job.nodes_delivered),
    )
    return False


def in_flight(cluster: Cluster, job: Job) -> bool:
    """A GC attempt is out and every owner still to confirm can answer it soon."""
    if cluster.server.jobs.lookup(job.id) is not job or job.state != ACKED or is_dummy(job):
        return False
    confirmed = job.nodes_confirmed
    return all(cluster.is_reachable(n) for n in job.nodes_delivered if n not in confirmed)


def send_deljob(cluster: Cluster, job: Job) -> None:
    me = cluster.myself.id
    cluster.send_batched_to_ids([n for n in job.nodes_delivered if n != me], b"DELJOB", job.id)


# ---- message handlers -------------------------------------------------------------------
# SETACK and GOTACK carry (job ID, value) pairs, DELJOB job IDs: one or many, as the
# sender batched what it had to say in one event-loop pass.


def pairs(payload: list[bytes]) -> list[tuple[bytes, bytes]]:
    """(ID, value) pairs of a batched message; a lone ID has the value b""."""
    return [
        (payload[i], payload[i + 1] if i + 1 < len(payload) else b"")
        for i in range(0, len(payload), 2)
    ]


def on_setack(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    for jid, may_have in pairs(payload):
        setack(cluster, sender, jid, int(may_have) if may_have else 0)


def setack(cluster: Cluster, sender: ClusterNode, jid: bytes, may_have: int) -> None:
    server = cluster.server
    job = server.jobs.lookup(jid)
    if job is not None and job.state != ACKED:
        if job.state == WAIT_REPL:
            cluster.replications.pop(job.id, None)
        server.acks.acknowledge_job(job)
    if job is None or len(job.nodes_delivered) <= may_have:
        cluster.send_batched(sender, b"GOTACK", jid, b"1" if job is not None else b"0")
    else:
        # We know more nodes that may have it than the sender: our GC, not its.
        server.acks.try_gc(job)


def on_gotack(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    for jid, known in pairs(payload):
        gotack(cluster, sender, jid, known == b"1")


def gotack(cluster: Cluster, sender: ClusterNode, jid: bytes, known: bool) -> None:
    server = cluster.server
    job = server.jobs.lookup(jid)
    if job is None or job.state != ACKED:
        return
    dummy = is_dummy(job)
    if dummy and known:
        server.jobs.unregister(job)  # an owner was reached: the GC is its job now
        return
    if known or sender.id in job.nodes_delivered:
        if sender.id not in job.nodes_delivered:
            job.nodes_delivered = job.nodes_delivered + (sender.id,)
        if sender.id not in job.nodes_confirmed:
            job.nodes_confirmed = job.nodes_confirmed + (sender.id,)
    if dummy:
        if sender.id not in job.nodes_confirmed:
            job.nodes_confirmed = job.nodes_confirmed + (sender.id,)
        if len(job.nodes_confirmed) >= cluster.size:
            server.jobs.unregister(job)  # nobody in the cluster knows it
        return
    if set(job.nodes_delivered) <= set(job.nodes_confirmed):
        send_deljob(cluster, job)
        server.jobs.unregister(job)


def on_deljob(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    server = cluster.server
    for jid in payload:
        job = server.jobs.lookup(jid)
        if job is not None:
            server.jobs.unregister(job)


HANDLERS: Final[dict[bytes, Handler]] = {
    b"SETACK": on_setack,
    b"GOTACK": on_gotack,
    b"DELJOB": on_deljob,
}
