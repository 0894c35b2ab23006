"""Jobs out of sight, for the cluster manager: held by the cluster, queued on no
node (what they are and why: ``disque.scan``, whose ``out_of_queue`` counts
them). Read here with JSCAN (``STATE queued`` IDs, ``STATE active`` with every
field), which C Disque answers too, up to ``SCAN_MAX`` jobs a node and state,
so that a check stays quick on a large node and says when it stopped short;
turned into --cluster check's findings, --cluster info's column and leave's
stall message.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from disque.commands import pairs
from disque.protocol import text
from disque.scan import OutOfQueue, out_of_queue
from disque_cli.cluster import Member, NodeDown, plural

SCAN_MAX = 100_000  # jobs read from one node, each state
SCAN_COUNT = 1000


def describe(w: OutOfQueue) -> str:
    """``q: 62 jobs queued on no node (next re-queue in 4m 50s), held by ...``."""
    what = f"{w.queue}: {plural(w.jobs, 'job')} queued on no node"
    if w.next_ms is not None:
        what += f" (next re-queue in {duration(w.next_ms)})"
    why = "delivered and not acknowledged yet, or waiting for their RETRY"
    if w.delayed == w.jobs:
        why = "in their DELAY"
    elif w.delayed:
        why += f"; {w.delayed} in their DELAY"
    return f"{what}, held by {', '.join(sorted(w.nodes))}: {why}"


@dataclass
class Scan:
    """What the nodes hold out of sight, by queue; ``partial``: nodes whose jobs
    were not all read (SCAN_MAX, or an error)."""

    by_queue: dict[str, OutOfQueue] = field(default_factory=dict)
    partial: list[str] = field(default_factory=list)
    by_node: dict[str, int] = field(default_factory=dict)  # label -> copies it holds of them
    # holder label -> (queue, label of the node that has the job queued) -> active copies
    elsewhere: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)

    @property
    def jobs(self) -> int:
        return sum(w.jobs for w in self.by_queue.values())

    def sorted(self) -> list[OutOfQueue]:
        return sorted(self.by_queue.values(), key=lambda w: (-w.jobs, w.queue))

    def findings(self, shown: int = 10) -> list[tuple[str, str]]:
        """--cluster check's lines: a WARN a queue (the largest first), one OK line
        for queues whose jobs are all in their DELAY, or one OK line for none."""
        findings = []
        waiting = [w for w in self.sorted() if w.jobs > w.delayed]
        for w in waiting[:shown]:
            findings.append(("WARN", describe(w)))
        if len(waiting) > shown:
            rest = sum(w.jobs for w in waiting[shown:])
            findings.append(("WARN", f"... and {plural(rest, 'job')} more in other queues"))
        delayed = [w for w in self.sorted() if w.jobs == w.delayed]
        if delayed:
            names = ", ".join(w.queue for w in delayed[:5]) + (", ..." if len(delayed) > 5 else "")
            count = sum(w.jobs for w in delayed)
            findings.append(("OK", f"{plural(count, 'job')} in their DELAY ({names})."))
        if not self.by_queue:
            findings.append(("OK", "Every job not acknowledged is queued on some node."))
        for label in self.partial:
            findings.append(
                ("WARN", f"{label}: not every job read (over {SCAN_MAX:,}, or JSCAN failed)")
            )
        return findings

    def rows(self) -> list[dict[str, Any]]:
        """For --json: a dict a queue."""
        return [
            {
                "queue": w.queue,
                "jobs": w.jobs,
                "delayed": w.delayed,
                "next_requeue_ms": w.next_ms,
                "nodes": sorted(w.nodes),
            }
            for w in self.sorted()
        ]


def waiting_jobs(members: Sequence[Member]) -> Scan:
    """The jobs of ``members`` (reachable nodes) that none of them has queued."""
    scan = Scan()
    queued_on: dict[str, str] = {}  # job ID -> the node that has it queued
    active: list[tuple[str, dict[str, Any]]] = []
    for member in members:
        try:
            for job_id in ids(member, "queued"):
                queued_on[text(job_id)] = member.label
            for shown in jobs(member, "active"):
                active.append((member.label, shown))
        except (ShortScan, NodeDown, TypeError, ValueError):
            scan.partial.append(member.label)
    scan.by_queue = out_of_queue(set(queued_on), active, int(time.time() * 1000))
    for holder, shown in active:
        where = queued_on.get(text(shown.get("id")))
        if where is None:
            scan.by_node[holder] = scan.by_node.get(holder, 0) + 1
        else:
            copies = scan.elsewhere.setdefault(holder, {})
            key = (text(shown.get("queue")), where)
            copies[key] = copies.get(key, 0) + 1
    return scan


class ShortScan(Exception):
    """A node holds more than SCAN_MAX jobs in one state."""


def ids(member: Member, state: str) -> Iterator[bytes]:
    for item in jscan(member, state, "id"):
        if isinstance(item, bytes):
            yield item


def jobs(member: Member, state: str) -> Iterator[dict[str, Any]]:
    for item in jscan(member, state, "all"):
        if isinstance(item, list):
            yield pairs(item) or {}


def jscan(member: Member, state: str | None, reply: str, most: int = SCAN_MAX) -> Iterator[Any]:
    """JSCAN ... [STATE state] REPLY reply, page by page; ShortScan past ``most``
    items; ValueError on a reply that is not JSCAN's."""
    cursor: Any = b"0"
    seen = 0
    states = ("STATE", state) if state else ()
    while True:
        page_reply = member.call("JSCAN", cursor, "COUNT", SCAN_COUNT, *states, "REPLY", reply)
        if not isinstance(page_reply, list) or len(page_reply) != 2:
            raise ValueError(f"JSCAN: unexpected reply {page_reply!r}")
        cursor, page = page_reply
        for item in page or []:
            seen += 1
            if seen > most:
                raise ShortScan(member.label)
            yield item
        if cursor in (b"0", 0):
            return


def duration(ms: int) -> str:
    """``4m 50s``, ``1h 5m``, ``800ms``: a re-queue time as a person reads it."""
    if ms < 1000:
        return f"{max(ms, 0)}ms"
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m"
