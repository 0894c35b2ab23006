"""A queue's jobs on every reachable node: JSCAN is one node's view, and a job
lives on several (its copies), so the brokers' flush and join and the periodic
tasks' ticks ask each node HELLO lists.

``out_of_queue`` counts, from what the nodes' JSCANs gave, the jobs that are
queued on no node (``disque --cluster check`` and the dashboard show them). A
job is queued on one node at a time; its other copies are active, each
waiting for its RETRY to stand in. A job active everywhere it is held is in
no queue: no GETJOB gets it until a re-queue. It was delivered and its
consumer has not acknowledged it yet, or it waits for its RETRY (after a
crash, a restart that did not restore queues, a NACK's DELAY), or for its
own DELAY. QLEN and QSTAT count queued jobs only."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from disque.client import Client
from disque.errors import DisqueError
from disque.protocol import PRIORITY_FAILING, text

log = logging.getLogger("disque.scan")

LIVE_STATES = ("wait-repl", "active", "queued")  # every state but acked


def reachable(client: Client) -> list[str]:
    """``host:port`` of the nodes neither failing nor leaving (HELLO, asked now)."""
    return [n.addr for n in client.hello().nodes if n.host and n.priority < PRIORITY_FAILING]


def jobs_everywhere(
    client: Client, queue: str, states: Sequence[str] = LIVE_STATES
) -> dict[str, dict[str, Any]]:
    """{job ID: the job as SHOW shows it} for ``queue``'s jobs in ``states``, over
    the nodes neither failing nor leaving. A node that does not answer is skipped."""
    found: dict[str, dict[str, Any]] = {}
    for node in client.hello().nodes:
        if node.priority >= PRIORITY_FAILING or not node.host:
            continue
        with Client(
            f"{node.host}:{node.port}",
            password=client.password,
            tls=client.tls,
            stay=True,
            max_moves=1,
            socket_timeout=5.0,
            connect_timeout=2.0,
        ) as one:
            try:
                for shown in one.jscan_jobs(queue=queue, states=states):
                    found[text(shown["id"])] = shown
            except DisqueError as exc:
                log.debug("JSCAN QUEUE %s on %s:%d: %s", queue, node.host, node.port, exc)
    return found


@dataclass
class OutOfQueue:
    """The jobs of one queue queued on no node: how many, of which how many are in
    their DELAY, the soonest re-queue (ms from the scan, None when none is set),
    and the nodes that hold them (as the caller names them)."""

    queue: str
    jobs: int = 0
    delayed: int = 0
    next_ms: int | None = None
    nodes: set[str] = field(default_factory=set)

    def add(self, shown: Mapping[str, Any], holder: str, now_ms: int) -> None:
        self.jobs += 1
        self.nodes.add(holder)
        if in_delay(shown, now_ms):
            self.delayed += 1
        due = shown.get("next-requeue-within")
        if isinstance(due, int) and (self.next_ms is None or due < self.next_ms):
            self.next_ms = due


def out_of_queue(
    queued: set[str], active: Iterable[tuple[str, Mapping[str, Any]]], now_ms: int
) -> dict[str, OutOfQueue]:
    """{queue: its jobs queued on no node}, from the IDs of the jobs queued on the
    nodes scanned and the active jobs each holds (holder, the job as JSCAN REPLY
    all shows it). A job active on several nodes counts once."""
    found: dict[str, OutOfQueue] = {}
    counted: set[str] = set()
    for holder, shown in active:
        job_id = text(shown.get("id"))
        if not job_id or job_id in queued:
            continue
        queue = text(shown.get("queue"))
        waiting = found.setdefault(queue, OutOfQueue(queue))
        if job_id in counted:  # another copy, active too: one job, one more holder
            waiting.nodes.add(holder)
            continue
        counted.add(job_id)
        waiting.add(shown, holder, now_ms)
    return found


def in_delay(shown: Mapping[str, Any], now_ms: int) -> bool:
    """Whether the job's DELAY has not ended yet (ctime: ms * 1e6 plus a counter)."""
    delay, ctime = shown.get("delay"), shown.get("ctime")
    if not isinstance(delay, int) or not isinstance(ctime, int) or not delay:
        return False
    return ctime // 1_000_000 + delay * 1000 > now_ms
