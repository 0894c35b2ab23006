"""Fixed data for the dashboard: a `ClusterSnapshot` built by hand from values
recorded on a 3-node cluster (IDs and replies as in the reference
transcripts), and `FixedSource`, a `SnapshotSource` that serves it without
any network, so snapshot tests render the same SVG every time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from disque_tui.snapshot import (
    ClusterSnapshot,
    Drain,
    JobShow,
    NodeSnapshot,
    NodeViews,
    PeekedJob,
    QueueOnNode,
    QueuePeek,
    merge_queue,
)

N1 = "5b5ace285121e336847f55fb92f1935774ebfce4"
N2 = "78e24da148cd9c9fc69d2b889eba1abb7bdf05b0"
N3 = "725c0613b8b134d5d1c8b5e88bf61de102c81c10"
N4 = "0c31bf49727d5fdbff485fb2ac53bfc230d30344"
TAKEN_AT = 1795316026.0  # 2026-11-22 03:33:46 UTC

JOB1 = "D-5b5ace28-KF8cXGCRERe/v+yj41M5uZln-05a1"
JOB2 = "D-5b5ace28-h5LVFe7+fl6e3pOmpnL9/Yal-05a1"
JOB3 = "D-78e24da1-XHWISMxz86oDgwGeXr/393jO-05a1"


def fixed_snapshot() -> ClusterSnapshot:
    nodes = (
        NodeSnapshot(
            N1,
            "127.0.0.1",
            7711,
            status="up",
            priority=1,
            flags=(),
            last_seen_ago=0.2,
            latency_ms=4.0,
            jobs=1204,
            queues=3,
            clients=4,
            blocked=1,
            memory=31_457_280,
            ops_per_sec=812,
            version="1.0-rc1",
            jobs_history=(900, 950, 1010, 1080, 1100, 1150, 1204),
            ops_history=(700, 750, 812),
            server="python",
        ),
        NodeSnapshot(
            N2,
            "127.0.0.1",
            7712,
            status="up",
            priority=1,
            flags=(),
            last_seen_ago=0.2,
            latency_ms=5.0,
            jobs=310,
            queues=2,
            clients=2,
            blocked=0,
            memory=28_835_840,
            ops_per_sec=95,
            version="1.0-rc1",
            jobs_history=(200, 250, 260, 280, 300, 305, 310),
            server="python",
        ),
        NodeSnapshot(
            N3,
            "127.0.0.1",
            7713,
            status="up",
            priority=100,
            flags=("leaving",),
            last_seen_ago=0.2,
            latency_ms=6.0,
            jobs=120,
            queues=2,
            clients=1,
            blocked=0,
            memory=27_262_976,
            ops_per_sec=40,
            version="1.0-rc1",
            jobs_history=(400, 350, 300, 250, 200, 160, 120),
            drain=Drain(jobs_left=120, start_jobs=400, rate=40.0, eta=3.0),
            server="C",
        ),
        NodeSnapshot(
            N4,
            "127.0.0.1",
            7714,
            status="down",
            priority=10,
            flags=("pfail",),
            error="connection refused",
            last_seen_ago=12.0,
            jobs=None,
            jobs_history=(50, 50, 50),
            server="C",
        ),
    )
    jobs = merge_queue(
        "jobs",
        [
            QueueOnNode(
                N1,
                length=1100,
                age=3600,
                idle=0,
                blocked=1,
                jobs_in=52_000,
                jobs_out=50_900,
                in_rate=120.0,
                out_rate=110.0,
            ),
            QueueOnNode(
                N2,
                length=300,
                age=3500,
                idle=1,
                import_from=(N1,),
                import_rate=60,
                jobs_in=9_000,
                jobs_out=8_700,
                in_rate=30.0,
                out_rate=25.5,
            ),
            QueueOnNode(N3, length=100, age=3400, idle=2, jobs_in=500, jobs_out=400, out_rate=40.0),
        ],
    )
    emails = merge_queue(
        "emails",
        [
            QueueOnNode(N1, length=100, age=86_000, idle=30, pause="out"),
            QueueOnNode(N2, length=10, age=86_000, idle=30, pause="out"),
        ],
    )
    reports = merge_queue(
        "reports",
        [
            QueueOnNode(N1, length=4, age=120, idle=5, jobs_in=4),
            QueueOnNode(N3, length=20, age=100, idle=4, pause="in", jobs_in=20),
        ],
    )
    # the recent import rate and throughput of "jobs" (idle queues are not listed)
    history = tuple(
        {"jobs": (float(i), float(o))}
        for i, o in zip(
            (0, 10, 30, 45, 60, 55, 60), (90, 120, 150, 160, 170, 175, 175.5), strict=True
        )
    )
    return ClusterSnapshot(
        taken_at=TAKEN_AT,
        seed="127.0.0.1:7711",
        nodes=nodes,
        queues=(emails, jobs, reports),
        cycle=42,
        poll_ms=18.0,
        rate_history=history,
    )


SHOW_FIELDS = {
    "id": JOB1,
    "queue": "jobs",
    "state": "queued",
    "repl": 3,
    "ttl": 86400,
    "ctime": 1795316016932000000,
    "delay": 0,
    "retry": 300,
    "nacks": 2,
    "additional-deliveries": 1,
    "nodes-delivered": [N1, N2, N3],
    "nodes-confirmed": [],
    "next-requeue-within": 299496,
    "next-awake-within": 299496,
    "body": b'{"to": "ops@example.com", "subject": "nightly report", "attempt": 3}',
}


def fixed_peeks(queue: str = "jobs") -> tuple[QueuePeek, ...]:
    return (
        QueuePeek(
            N1,
            "127.0.0.1:7711",
            oldest=(
                PeekedJob(queue, JOB1, SHOW_FIELDS["body"]),
                PeekedJob(queue, JOB2, b"resize image 42"),
            ),
            newest=(
                PeekedJob(queue, JOB2, b"resize image 42"),
                PeekedJob(queue, JOB1, SHOW_FIELDS["body"]),
            ),
        ),
        QueuePeek(
            N2,
            "127.0.0.1:7712",
            oldest=(PeekedJob(queue, JOB3, b"\x00\x01binary"),),
            newest=(PeekedJob(queue, JOB3, b"\x00\x01binary"),),
        ),
        QueuePeek(N3, "127.0.0.1:7713"),
    )


def fixed_shows(job_id: str = JOB1) -> tuple[JobShow, ...]:
    active = dict(SHOW_FIELDS, id=job_id, state="active")
    return (
        JobShow(N1, "127.0.0.1:7711", dict(SHOW_FIELDS, id=job_id)),
        JobShow(N2, "127.0.0.1:7712", active),
        JobShow(N3, "127.0.0.1:7713", None),
    )


class FixedSource:
    """A `SnapshotSource` that serves one snapshot and records the actions."""

    def __init__(self, snapshot: ClusterSnapshot | None = None):
        self.snapshot = snapshot or fixed_snapshot()
        self.actions: list[tuple] = []
        self.tasks_wanted: list[bool] = []  # what the app told of its Tasks tab
        self.callback: Callable[[ClusterSnapshot], None] | None = None

    def start(self, on_snapshot: Callable[[ClusterSnapshot], None]) -> None:
        self.callback = on_snapshot
        on_snapshot(self.snapshot)

    def stop(self) -> None:
        self.callback = None

    def refresh_now(self) -> None:
        if self.callback is not None:
            self.callback(self.snapshot)

    async def qpeek(self, queue: str, count: int = 5) -> tuple[QueuePeek, ...]:
        await asyncio.sleep(0)
        return fixed_peeks(queue)

    async def show(self, job_id: str) -> tuple[JobShow, ...]:
        await asyncio.sleep(0)
        return fixed_shows(job_id)

    async def pause(self, queue: str, state: str, bcast: bool = True) -> str:
        self.actions.append(("pause", queue, state, bcast))
        return state

    async def set_leaving(self, node_id: str, leaving: bool) -> str:
        self.actions.append(("leaving", node_id, leaving))
        return "OK"

    def want_tasks(self, wanted: bool) -> None:
        self.tasks_wanted.append(wanted)

    async def node_views(self, node_id: str) -> NodeViews:
        await asyncio.sleep(0)
        return fixed_node_views(node_id)


def fixed_node_views(node_id: str = N1) -> NodeViews:
    """CLIENT LIST, SLOWLOG GET, LATENCY LATEST and CONFIG GET as a node of ours
    answers them (recorded, then cut short)."""
    clients = (
        {"id": "7", "addr": "10.0.0.21:51862", "name": "worker-1", "age": "3120",
         "idle": "0", "flags": "b", "cmd": "getjob", "qbuf": "0", "omem": "0"},
        {"id": "9", "addr": "10.0.0.22:40414", "name": "", "age": "12", "idle": "2",
         "flags": "N", "cmd": "addjob", "qbuf": "0", "omem": "0"},
    )  # fmt: skip
    slowlog = ((3, int(TAKEN_AT) - 40, 15_210, "JSCAN 0 COUNT 1000 REPLY all"),)
    latency = (("command", int(TAKEN_AT) - 40, 15, 21),)
    config = (("appendonly", "yes"), ("cluster-node-timeout", "3000"), ("port", "7711"))
    return NodeViews(node_id, "127.0.0.1:7711", clients, slowlog, latency, config)


# ---- an incident: a node killed with jobs on it, a node replaced, a queue stuck ----------

N5 = "9a4f0e1d6c2b8a7f3e5d1c0b9a8f7e6d5c4b3a21"  # killed, then replaced on 7715 by N6
N6 = "e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4"


def incident_snapshot() -> ClusterSnapshot:
    """The fixed cluster during an incident: N4 (7714) killed 12 s ago holding 20 jobs
    of "reports" and 7 of "audit" (REPLICATE 1), N5 replaced on 7715 by a fresh N6,
    "orders" filling up with nothing consuming it, N3 leaving."""
    base = fixed_snapshot()
    n4 = replace(
        base.nodes[3],
        flags=("fail",),
        jobs=27,
        queues=2,
        clients=3,
        blocked=0,
        memory=26_214_400,
        ops_per_sec=None,
    )
    n5 = NodeSnapshot(
        N5,
        "127.0.0.1",
        7715,
        status="down",
        priority=10,
        flags=("fail",),
        error="127.0.0.1:7715 now answers as node e1f2a3b4 (replaced?)",
        last_seen_ago=95.0,
        jobs=0,
        queues=0,
        clients=0,
        blocked=0,
        memory=25_165_824,
        server="C",
    )
    n6 = NodeSnapshot(
        N6,
        "127.0.0.1",
        7715,
        status="up",
        priority=1,
        last_seen_ago=0.2,
        latency_ms=3.0,
        jobs=0,
        queues=0,
        clients=1,
        blocked=0,
        memory=24_117_248,
        ops_per_sec=2,
        version="1.0-rc1",
        jobs_history=(0, 0, 0),
        server="python",
    )
    queues = {q.name: q for q in base.queues}
    reports = merge_queue(
        "reports",
        [
            *queues["reports"].per_node,
            QueueOnNode(N4, length=20, age=900, idle=12, oldest=870.0, stale=12.0),
        ],
    )
    audit = merge_queue(
        "audit", [QueueOnNode(N4, length=7, age=4000, idle=12, oldest=3600.0, stale=12.0)]
    )
    orders = merge_queue(
        "orders",
        [
            QueueOnNode(N1, length=900, age=600, idle=0, jobs_in=900, in_rate=50.0, oldest=590.0),
            QueueOnNode(N2, length=0, age=600, idle=0, blocked=0),
        ],
    )
    idle = merge_queue("idle", [QueueOnNode(N2, length=0, age=50, idle=50)])
    jobs = replace(queues["jobs"], oldest=42.0)
    return replace(
        base,
        nodes=(*base.nodes[:3], n4, n5, n6),
        queues=(audit, queues["emails"], idle, jobs, orders, reports),
        _queue_index={},
    )
