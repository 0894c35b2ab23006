"""Job replication: REPLJOB, GOTJOB, ENQUEUE.

ADDJOB sends REPLJOB to REPLICATE-1 reachable nodes (REPLICATE when the
node replicates externally: leaving, or short of memory) and, unless
ASYNC, keeps the client blocked until that many GOTJOB arrived (a GOTJOB
lists every job its sender took a copy of in one event-loop pass). While it is
slow, one more node is tried every 50 ms and unconfirmed ones are asked
again; at the ms-timeout the client gets -NOREPL and the partial copies are
deleted (best effort). Once replicated, the job is queued here, or, with
external replication, on one of the nodes holding it (ENQUEUE).
"""

from __future__ import annotations

import random
from collections.abc import Container
from typing import TYPE_CHECKING, Final

from disque_server.clock import pick
from disque_server.job import (
    ACTIVE,
    FIELDS,
    ID_LEN,
    WAIT_REPL,
    Job,
    job_from_fields,
)
from disque_server.jobs import lifecycle
from disque_server.jobs.blocking import BlockedAddJob
from disque_server.jobs.queue import PAUSED_IN
from disque_server.serialize import SerializeError, deserialize_job

if TYPE_CHECKING:
    from disque_server.client import Client
    from disque_server.cluster import Cluster, Handler
    from disque_server.cluster.bus import BusLink
    from disque_server.cluster.node import ClusterNode

RETRY_TICK_MS: Final = 50  # add one more node this often while replication is slow
RESEND_MS: Final = 500  # ask unconfirmed nodes again this often
# A cron tick's new jobs go to REPLICA_WINDOW * copies of the candidates (unless
# too few of those have a link: then to any).
REPLICA_WINDOW: Final = 2
ASYNC_DEADLINE_MS: Final = 60_000

NOREPL_TIMEOUT: Final = (
    b"-NOREPL Timeout reached before replicating to the requested number of nodes\r\n"
)
NOREPL_REMOVED: Final = (
    b"-NOREPL job removed (expired?) before the requested replication level was achieved\r\n"
)

_random: Final = random.random


class Replication:
    """A job being replicated, and the client waiting for it (if synchronous)."""

    __slots__ = (
        "job",
        "client",
        "needed",
        "targets",
        "confirmed",
        "deadline",
        "extrepl",
        "asynchronous",
        "last_tick",
        "last_resend",
        "flushes",
    )

    def __init__(
        self,
        job: Job,
        client: Client | None,
        needed: int,
        deadline: int,
        extrepl: bool,
        asynchronous: bool,
        now: int,
        flushes: int,
    ) -> None:
        self.job = job
        self.client = client
        self.needed = needed
        self.targets: list[bytes] = []
        self.confirmed: set[bytes] = set()
        self.deadline = deadline
        self.extrepl = extrepl
        self.asynchronous = asynchronous
        self.last_tick = self.last_resend = now
        # Jobs.flushes when it started: the job is still registered while they are
        # equal (unregistering a job ends its replication: job_removed).
        self.flushes = flushes


class Owners:
    """A new job's nodes-delivered (this node first unless it replicates externally,
    then the targets), as one tuple for the jobs replicated to the same nodes in a
    row, as a replica shares its copies' (shared_node_id_run), not a tuple each: the
    serializer joins it once for them all (serialize.node_ids)."""

    __slots__ = ("first", "targets", "owners")

    def __init__(self) -> None:
        self.first: tuple[bytes, ...] = ()
        self.targets: list[bytes] = []
        self.owners: tuple[bytes, ...] = ()

    def of(self, first: tuple[bytes, ...], targets: list[bytes]) -> tuple[bytes, ...]:
        if first != self.first or targets != self.targets:
            # A copy: the cron adds nodes to a slow job's own list (Replication.targets).
            self.first, self.targets = first, list(targets)
            self.owners = first + tuple(targets)
        return self.owners


_owners: Final = Owners()


def candidates(cluster: Cluster, exclude: Container[bytes], count: int) -> list[ClusterNode]:
    """Up to ``count`` candidates with a link, not asked yet, chosen at random.

    As Disque's clusterReplicateJob: no link, no REPLJOB; the cron tries one
    more node every 50 ms, so a link that comes up gets the job then.

    In a large cluster, from a window of a few candidates drawn at random for
    each cron tick (``Cluster.replica_window``), else drawn at random from
    all of them: nothing per job walks all the nodes. Disque draws each job's
    nodes from all of them; then, in a cluster of 25 nodes, the REPLJOBs of
    one event-loop pass go out one or two a link, and each wakes a process of
    its own. Drawn from the window, they go out in a few writes, each peer
    takes many in one wake-up, and over a second the copies spread as evenly."""
    pool = cluster.replication_candidates()
    size = len(pool)
    if size > 4 * count:
        window = cluster.replica_window
        if len(window) < REPLICA_WINDOW * count:
            window = cluster.replica_window = pick(list(pool), REPLICA_WINDOW * count)
        chosen = [
            n for n in pick(window, len(window)) if n.link is not None and n.id not in exclude
        ]
        if len(chosen) >= count:
            return chosen[:count]
        for _ in range(8 * count):
            node = pool[int(_random() * size)]
            if node.link is not None and node.id not in exclude and node not in chosen:
                chosen.append(node)
                if len(chosen) == count:
                    return chosen
    eligible = [n for n in pool if n.link is not None and n.id not in exclude]
    # All of them (a small cluster's every job): any order, no draw.
    return eligible if len(eligible) <= count else pick(eligible, count)


def replicate_new_job(
    cluster: Cluster,
    client: Client,
    job: Job,
    additional: int,
    timeout_ms: int,
    asynchronous: bool,
    extrepl: bool,
    now: int,
) -> None:
    deadline = now + (timeout_ms or ASYNC_DEADLINE_MS) if (timeout_ms or asynchronous) else 0
    server = cluster.server
    rep = Replication(
        job,
        None if asynchronous else client,
        additional,
        deadline,
        extrepl,
        asynchronous,
        now,
        server.jobs.flushes,
    )
    targets = candidates(cluster, (), additional)
    rep.targets = [n.id for n in targets]
    job.nodes_delivered = _owners.of(() if extrepl else cluster.myself_only, rep.targets)
    cluster.replications[job.id] = rep
    if not extrepl:
        server.jobs.register(job)  # WAIT_REPL: visible to SHOW while replicating
    send_repljob(cluster, job, rep.targets)
    if asynchronous:
        if not extrepl:
            server.jobs.start(job)
        client.reply(b"+%s\r\n" % job.id)
        return
    # No timer of its own: at the ms-timeout the cron replies NOREPL (replication_failed).
    client.block(BlockedAddJob(rep), 0)


def send_repljob(cluster: Cluster, job: Job, node_ids: list[bytes]) -> None:
    cluster.send_repljob_to_ids(node_ids, job)


def cron(cluster: Cluster, now: int) -> None:
    cluster.replica_window = []  # the next jobs go to other candidates
    for rep in list(cluster.replications.values()):
        if rep.deadline and now >= rep.deadline:
            replication_failed(cluster, rep)
            continue
        if rep.client is not None and rep.client.closing and not rep.asynchronous:
            rep.client = None  # the client left: finish the job anyway, reply to nobody
        if now - rep.last_tick >= RETRY_TICK_MS:
            rep.last_tick = now
            more = candidates(cluster, set(rep.targets), 1)
            if more:
                extra = more[0].id
                rep.targets.append(extra)
                rep.job.nodes_delivered = rep.job.nodes_delivered + (extra,)
                # To every target, confirmed or not, as Disque's clusterReplicateJob:
                # each copy must know every owner, or the re-queue exchange
                # (WILLQUEUE, QUEUED) misses the new one and two nodes queue the job.
                send_repljob(cluster, rep.job, rep.targets)
        if now - rep.last_resend >= RESEND_MS:
            rep.last_resend = now
            send_repljob(cluster, rep.job, [t for t in rep.targets if t not in rep.confirmed])


def replication_achieved(cluster: Cluster, rep: Replication) -> None:
    job = rep.job
    del cluster.replications[job.id]
    server = cluster.server
    if rep.extrepl:
        # No local copy: ask one of the holders to queue it.
        holder = random.choice(sorted(rep.confirmed))
        cluster.send_to_ids([holder], b"ENQUEUE", [job.id, b"%d" % job.delay])
    elif not rep.asynchronous and rep.flushes == server.jobs.flushes and job.state == WAIT_REPL:
        server.jobs.activate(job)
    client = rep.client
    if client is not None and client.blocked is not None and client.blocked.data is rep:
        client.reply(b"+%s\r\n" % job.id)
        client.unblock()
        client.flush()


def replication_failed(cluster: Cluster, rep: Replication) -> None:
    """The ms-timeout came first: the client gets NOREPL, the copies are deleted."""
    job = rep.job
    cluster.replications.pop(job.id, None)
    server = cluster.server
    cluster.send_to_ids(rep.targets, b"DELJOB", [job.id])  # best effort cleanup
    if not rep.asynchronous:
        local = server.jobs.lookup(job.id)
        if local is job:
            server.jobs.unregister(job)
    reply_norepl(cluster, rep, NOREPL_TIMEOUT)


def job_removed(cluster: Cluster, job: Job) -> None:
    """A job still replicating was removed here (its TTL ran out, DELJOB, ...):
    stop sending it. As Disque's unregisterJob, a client waiting for its copies
    gets NOREPL at once and the copies made so far are deleted; an ASYNC job's
    copies expire or are deleted on their own."""
    rep = cluster.replications.pop(job.id, None)
    if rep is None or job.state != WAIT_REPL:
        return
    cluster.send_to_ids(rep.targets, b"DELJOB", [job.id])
    reply_norepl(cluster, rep, NOREPL_REMOVED)


def reply_norepl(cluster: Cluster, rep: Replication, error: bytes) -> None:
    client = rep.client
    if client is not None and client.blocked is not None and client.blocked.data is rep:
        client.reply(error)
        cluster.server.stats.count_refusal(b"addjob", b"NOREPL")
        client.unblock()
        client.flush()


# ---- message handlers ------------------------------------------------------------------------


def on_repljob(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    """Jobs (one or many) a node of ours is adding, each either serialized as Disque
    does, in one part (from a node our PONG told we take that:
    dialect.SERIALIZED_JOBS), or as FIELDS fields, the first its 40-byte ID (from an
    older node of ours; never 40 bytes serialized). A job that does not read is
    skipped: no GOTJOB, as Disque. (A C node's come as Jobs:
    Cluster.handle_repljobs.)"""
    i = 0
    end = len(payload)
    while i < end:
        job: Job | None = None
        if len(payload[i]) == ID_LEN:
            job = job_from_fields(payload[i : i + FIELDS], ACTIVE)
            i += FIELDS
        else:
            job = serialized_copy(payload[i])
            i += 1
        if job is not None:
            keep_copy(cluster, sender, job)


def serialized_copy(data: bytes) -> Job | None:
    """The job a REPLJOB serialized (active, as every copy received), or None."""
    try:
        job, stop = deserialize_job(data, storage=False)
    except SerializeError:
        return None
    return job if stop == len(data) else None


def keep_copy(cluster: Cluster, sender: ClusterNode, job: Job) -> None:
    """Keep a copy of a job another node is adding, and confirm with GOTJOB."""
    server = cluster.server
    existing = server.jobs.lookup(job.id)
    if existing is not None:
        merged = dict.fromkeys(existing.nodes_delivered + job.nodes_delivered)
        existing.nodes_delivered = tuple(merged)
        cluster.send_batched(sender, b"GOTJOB", job.id)
        return
    q = server.queues.lookup(job.queue)
    if (q is not None and q.flags & PAUSED_IN) or server.memory.level or cluster.leaving:
        return  # no GOTJOB: the origin will try another node (Disque: from 75% of maxmemory)
    if q is not None:
        job.queue = q.name
    # A copy here is an owner: its re-queues are news for the others.
    lifecycle.copy_arrived(job)
    server.jobs.register(job)
    server.aof.loadjob(job)  # (the AOF sits below the cluster)
    cluster.send_batched(sender, b"GOTJOB", job.id)


def on_gotjob(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    """The sender holds a copy of each of these jobs."""
    for jid in payload:
        rep = cluster.replications.get(jid)
        if rep is None or sender.id not in rep.targets:
            continue
        rep.confirmed.add(sender.id)
        if len(rep.confirmed) >= rep.needed:
            replication_achieved(cluster, rep)


def on_enqueue(cluster: Cluster, sender: ClusterNode, link: BusLink, payload: list[bytes]) -> None:
    """A node without a copy asks us to queue a job we hold."""
    server = cluster.server
    job = server.jobs.lookup(payload[0])
    if job is None or job.state != ACTIVE:
        return  # unknown, queued already, or acknowledged: never revive an ACK
    q = server.queues.lookup(job.queue)
    if q is not None and q.flags & PAUSED_IN:
        return
    delay = (
        int(payload[1])
        if len(payload) > 1 and payload[1].isdigit() and len(payload[1]) <= 10
        else 0
    )
    if delay and job.state == ACTIVE:
        lifecycle.due_after_delay(server.jobs, job, delay)
        return
    lifecycle.first_queueing_here(job)
    server.queues.enqueue_job(job)
    server.aof.loadjob(job)  # (the AOF sits below the cluster)


HANDLERS: Final[dict[bytes, Handler]] = {
    b"REPLJOB": on_repljob,
    b"GOTJOB": on_gotjob,
    b"ENQUEUE": on_enqueue,
}
