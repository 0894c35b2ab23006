"""All of disque-tui's network I/O: discover the cluster, poll every node,
build `ClusterSnapshot`s, and run the few actions the dashboard offers.

`Poller` is plain asyncio. Each node is polled by its own task with its own
deadline, so a slow or dead node never holds the others back: a cycle waits
at most one interval, nodes still in flight are shown "slow" and, past the
per-node timeout, "down". Membership follows HELLO: nodes listed by a
reachable peer appear, nodes no reachable peer lists any more go.

`PollerThread` runs a `Poller` on an event loop of its own in a background
thread, so parsing a thousand QSTAT replies per node never competes with
the UI's event loop; the app receives snapshots through a callback and
awaits actions through `asyncio.wrap_future`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from types import MappingProxyType
from typing import Any

import redis.asyncio as aredis
from redis.exceptions import RedisError

from disque.protocol import server_kind, text
from disque.scan import OutOfQueue, out_of_queue
from disque.tasks.census import tally_tasks
from disque.tls import TLS, handshake_failure
from disque_tui import queries
from disque_tui.queries import NodeReport
from disque_tui.snapshot import (
    ClusterSnapshot,
    JobShow,
    NodeSnapshot,
    NodeViews,
    PeekedJob,
    QueueOnNode,
    QueuePeek,
    QueueSnapshot,
    TaskCensus,
    counter_rate,
    drain_estimate,
    merge_queue,
)

HISTORY = 60  # samples kept for sparklines (one per cycle)
OUT_OF_QUEUE_EVERY = 10.0  # seconds between two JSCANs of a node for jobs in no queue
DRAIN_WINDOW = 10.0  # seconds over which a leaving node's drain rate is measured

NO_RATES = (0.0, 0.0)

SnapshotCallback = Callable[[ClusterSnapshot], None]


def describe_error(exc: BaseException) -> str:
    """One short line for a failed poll."""
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return "timeout"
    tls_failure = handshake_failure(exc)
    if tls_failure is not None:
        return tls_failure
    text = str(exc).strip() or type(exc).__name__
    # asyncio words a refused connection "Connect call failed" (errno 111)
    if "Connection refused" in text or "Connect call failed" in text:
        return "connection refused"
    if "Connection reset by peer" in text:  # (a node killed while a poll read from it)
        return "connection reset"
    return text.splitlines()[0][:120]


# ---------------------------------------------------------------------------
# Per-node state (mutable, private to the poller)
# ---------------------------------------------------------------------------


class NodeState:
    """What the poller knows about one node between cycles."""

    def __init__(self, node_id: str, host: str, port: int, order: int):
        self.id = node_id
        self.host = host
        self.port = port
        self.order = order
        self.client: aredis.Redis | None = None
        self.task: asyncio.Task | None = None
        self.task_started = 0.0
        self.report: NodeReport | None = None
        self.error: str | None = None
        self.last_ok: float | None = None  # monotonic time of the last good poll
        self.latency_ms: float | None = None
        # counters of the previous good poll, for rates: name -> (jobs_in, jobs_out)
        self.prev_counters: dict[str, tuple[int, int]] = {}
        self.prev_time: float | None = None
        self.rates: dict[str, tuple[float, float]] = {}  # only queues that moved
        self.jobs_history: deque[tuple[float, int]] = deque(maxlen=HISTORY)
        self.ops_history: deque[int] = deque(maxlen=HISTORY)
        self.drain_start: int | None = None
        # Its jobs (queries.fetch_out_of_queue), and when read.
        self.out_of_queue: queries.JobScan | None = None
        self.out_of_queue_at: float | None = None

    @property
    def up(self) -> bool:
        return self.error is None and self.report is not None

    def record(self, report: NodeReport, now: float, latency: float) -> None:
        dt = now - self.prev_time if self.prev_time is not None else 0.0
        rates: dict[str, tuple[float, float]] = {}
        counters: dict[str, tuple[int, int]] = {}
        prev = self.prev_counters
        for name, q in report.queues.items():
            before = prev.get(name)
            counters[name] = (q.jobs_in, q.jobs_out)
            if before is not None and dt > 0 and before != counters[name]:
                rates[name] = (
                    counter_rate(before[0], q.jobs_in, dt),
                    counter_rate(before[1], q.jobs_out, dt),
                )
        self.prev_counters, self.rates, self.prev_time = counters, rates, now
        self.report, self.error, self.last_ok = report, None, now
        self.latency_ms = latency * 1000
        info = report.info
        jobs = queries.integer(info.get("registered_jobs"))
        self.jobs_history.append((now, jobs))
        self.ops_history.append(queries.integer(info.get("instantaneous_ops_per_sec")))

    def fail(self, error: str) -> None:
        self.error = error


# ---------------------------------------------------------------------------
# The poller
# ---------------------------------------------------------------------------


class Poller:
    """Polls the cluster reached through host:port; `password` and `tls` apply to
    every node, the ones HELLO lists as well as the seed."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 7711,
        password: str | None = None,
        interval: float = 1.0,
        timeout: float | None = None,
        scan_count: int = 500,
        tls: TLS | None = None,
    ):
        self.host = host
        self.port = port
        self.password = password
        self.tls = tls
        self.interval = interval
        self.timeout = timeout if timeout is not None else max(1.0, 2 * interval)
        self.scan_count = scan_count
        self.nodes: dict[str, NodeState] = {}
        self.cycle = 0
        self.rate_history: deque[Mapping[str, tuple[float, float]]] = deque(maxlen=HISTORY)
        # The last tally of the scans for jobs in no queue, and which scans it read:
        # they change every OUT_OF_QUEUE_EVERY, the snapshots every cycle.
        self._tally_of: tuple[object, ...] = ()
        self._tally: tuple[tuple[OutOfQueue, ...], dict[str, int], TaskCensus] = (
            (),
            {},
            TaskCensus(),
        )
        # The Tasks tab is shown: the scans bring the queued jobs' bodies too.
        self.tasks_wanted = False
        self._order = 0
        self._wake = asyncio.Event()
        self._background: set[asyncio.Task] = set()

    # ---- connections -------------------------------------------------------
    def _client(self, node: NodeState) -> aredis.Redis:
        if node.client is None:
            node.client = queries.connect(
                node.host, node.port, self.password, self.timeout, self.tls
            )
        return node.client

    async def _drop_client(self, node: NodeState) -> None:
        """After a failure the connection state is unknown: start afresh next time."""
        client, node.client = node.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    def _add_node(self, node_id: str, host: str, port: int) -> NodeState:
        node = self.nodes.get(node_id)
        if node is None:
            node = NodeState(node_id, host, port, self._order)
            self._order += 1
            self.nodes[node_id] = node
        return node

    # ---- discovery ----------------------------------------------------------
    async def discover(self) -> None:
        """HELLO the seed and learn every node it lists; raises when the seed
        does not answer (the caller turns that into one line on stderr)."""
        client = queries.connect(self.host, self.port, self.password, self.timeout, self.tls)
        try:
            async with asyncio.timeout(self.timeout):
                hello = await queries.hello(client)
        finally:
            await client.aclose()
        for entry in hello.nodes:
            if entry.id == hello.myid:  # reach the seed the way the user named it
                self._add_node(entry.id, self.host, self.port)
            else:
                self._add_node(entry.id, entry.host or self.host, entry.port)
        if hello.myid not in self.nodes:
            self._add_node(hello.myid, self.host, self.port)

    def _update_membership(self) -> None:
        """Add nodes reachable peers list in HELLO; drop those none of them lists.

        A node is dropped only on the word of others: when at least one other
        reachable node reports and none of them lists it (CLUSTER FORGET).
        """
        reporters = {n.id: n.report.hello for n in self.nodes.values() if n.up}
        for hello in reporters.values():
            for entry in hello.nodes:
                if entry.id not in self.nodes:
                    self._add_node(entry.id, entry.host or self.host, entry.port)
        for node_id in list(self.nodes):
            others = [h for rid, h in reporters.items() if rid != node_id]
            if others and not any(e.id == node_id for h in others for e in h.nodes):
                node = self.nodes.pop(node_id)
                if node.task is not None:
                    node.task.cancel()
                if node.client is not None:
                    task = asyncio.get_running_loop().create_task(node.client.aclose())
                    self._background.add(task)
                    task.add_done_callback(self._background.discard)

    # ---- polling ------------------------------------------------------------
    async def _poll_node(self, node: NodeState) -> None:
        start = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout):
                report = await queries.fetch_node(self._client(node), self.scan_count)
                if self._scan_due(node, start):
                    node.out_of_queue = await queries.fetch_out_of_queue(
                        self._client(node), bodies=self.tasks_wanted
                    )
                    node.out_of_queue_at = start
        except Exception as exc:  # any failure marks this node down, never the poller
            node.fail(describe_error(exc))
            await self._drop_client(node)
            return
        now = time.monotonic()
        if report.hello.myid != node.id:
            # Polled by address, checked by ID: another node (a fresh one, replacing
            # a dead node on its port) is not this one. This ID stays down, with
            # its last figures; the node now there is polled as a node of its own.
            node.fail(
                f"{node.host}:{node.port} now answers as node {report.hello.myid[:8]} (replaced?)"
            )
            await self._drop_client(node)
            if report.hello.myid not in self.nodes:
                self._add_node(report.hello.myid, node.host, node.port)
            return
        node.record(report, now, now - start)

    async def poll_cycle(self) -> ClusterSnapshot:
        """Start a poll of every node not still busy with the previous one, wait
        up to one interval for them, and return the snapshot of what is known."""
        if not self.nodes:
            await self.discover()
        started = time.monotonic()
        for node in self.nodes.values():
            if node.task is None or node.task.done():
                node.task = asyncio.create_task(self._poll_node(node))
                node.task_started = started
        pending = [n.task for n in self.nodes.values() if n.task is not None and not n.task.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.interval)
        self._update_membership()
        self.cycle += 1
        return self.build_snapshot(time.monotonic(), (time.monotonic() - started) * 1000)

    async def run(self, on_snapshot: SnapshotCallback) -> None:
        """Poll forever, handing each snapshot to `on_snapshot`. A cycle that
        fails as a whole (no node known and the seed gone) yields an empty
        snapshot saying why, and the next cycle tries again."""
        try:
            while True:
                begin = time.monotonic()
                try:
                    snapshot = await self.poll_cycle()
                except Exception as exc:  # never let the polling thread die
                    snapshot = ClusterSnapshot(
                        taken_at=time.time(),
                        seed=f"{self.host}:{self.port}",
                        cycle=self.cycle,
                        error=describe_error(exc),
                    )
                on_snapshot(snapshot)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    remaining = self.interval - (time.monotonic() - begin)
                    async with asyncio.timeout(max(0.0, remaining)):
                        await self._wake.wait()
        finally:
            await self.close()

    def want_tasks(self, wanted: bool) -> None:
        if wanted != self.tasks_wanted:
            self.tasks_wanted = wanted
            if wanted:
                self.poll_now()

    def poll_now(self) -> None:
        """Cut the current wait short (the "refresh" key)."""
        self._wake.set()

    async def close(self) -> None:
        for node in self.nodes.values():
            if node.task is not None and not node.task.done():
                node.task.cancel()
        for node in self.nodes.values():
            await self._drop_client(node)

    # ---- snapshot ------------------------------------------------------------
    def build_snapshot(self, now: float, poll_ms: float = 0.0) -> ClusterSnapshot:
        ordered = sorted(self.nodes.values(), key=lambda n: (n.host, n.port, n.order))
        reporters = [n for n in ordered if n.up]
        waiting, copies, tasks = self._scan_tally(ordered, reporters)
        nodes = tuple(
            dataclasses.replace(snap, copies_elsewhere=copies[snap.id])
            if snap.id in copies
            else snap
            for snap in (self._node_snapshot(n, reporters, now) for n in ordered)
        )
        queues = self._merge_queues(ordered, now)
        return ClusterSnapshot(
            taken_at=time.time(),
            seed=self._shown_seed(ordered),
            nodes=nodes,
            queues=queues,
            cycle=self.cycle,
            poll_ms=poll_ms,
            rate_history=tuple(self.rate_history),
            out_of_queue=waiting,
            tasks=tasks,
        )

    def _scan_tally(
        self, ordered: list[NodeState], reporters: list[NodeState]
    ) -> tuple[tuple[OutOfQueue, ...], dict[str, int], TaskCensus]:
        """The jobs in no queue, the copies of the nodes down and the tasks' calls,
        tallied again only when a scan came, a node went up or down, or the Tasks
        tab was shown or hidden."""
        key = (
            tuple((n.id, n.out_of_queue_at) for n in reporters),
            frozenset(n.id for n in ordered if not n.up),
            self.tasks_wanted,
        )
        if key != self._tally_of:
            self._tally_of = key
            self._tally = (
                self._out_of_queue(reporters),
                self._copies_of_down_nodes(ordered, reporters),
                self._tasks(reporters),
            )
        return self._tally

    def _scan_due(self, node: NodeState, now: float) -> bool:
        """A node's jobs are scanned every OUT_OF_QUEUE_EVERY seconds, and at once
        when the Tasks tab wants their bodies and the last scan had none."""
        scan = node.out_of_queue
        if self.tasks_wanted and scan is not None and scan.queued_jobs is None:
            return True
        return node.out_of_queue_at is None or now - node.out_of_queue_at >= OUT_OF_QUEUE_EVERY

    def _tasks(self, reporters: list[NodeState]) -> TaskCensus:
        """Each task's calls, from the nodes' last scans with bodies (none while the
        Tasks tab is hidden); the nodes left out (too many jobs, or no scan yet)."""
        if not self.tasks_wanted:
            return TaskCensus()
        jobs: list[dict[str, Any]] = []
        left_out: list[str] = []
        for node in reporters:
            scan = node.out_of_queue
            if scan is None or scan.queued_jobs is None:
                left_out.append(f"{node.host}:{node.port}")
                continue
            jobs += scan.queued_jobs  # (each says its state, as SHOW does)
            jobs += scan.active
        found = tally_tasks(jobs, int(time.time() * 1000))
        ordered = sorted(found.values(), key=lambda t: t.task)
        return TaskCensus(True, tuple(ordered), tuple(left_out))

    def _shown_seed(self, ordered: list[NodeState]) -> str:
        """The address the dashboard was started with; once no member is there any
        more (the node left and was forgotten), a member up, saying so."""
        seed = f"{self.host}:{self.port}"
        if not ordered or any(f"{n.host}:{n.port}" == seed for n in ordered):
            return seed
        up = next((n for n in ordered if n.up), ordered[0])
        return f"{up.host}:{up.port} (seed {seed} left the cluster)"

    def _copies_of_down_nodes(
        self, ordered: list[NodeState], reporters: list[NodeState]
    ) -> dict[str, int]:
        """Node down -> how many jobs the nodes up hold active copies of that list it
        among their owners (their last scans): jobs it holds too."""
        down = {n.id for n in ordered if not n.up}
        if not down or any(n.out_of_queue is None for n in reporters):
            return {}
        seen: dict[str, set[str]] = {node_id: set() for node_id in down}
        for node in reporters:
            assert node.out_of_queue is not None
            for shown in node.out_of_queue.active:
                owners = shown.get("nodes-delivered")
                for owner in owners if isinstance(owners, list) else ():
                    holder = seen.get(text(owner))
                    if holder is not None:
                        holder.add(text(shown.get("id")))
        return {node_id: len(ids) for node_id, ids in seen.items()}

    def _out_of_queue(self, reporters: list[NodeState]) -> tuple[OutOfQueue, ...]:
        """Jobs queued on none of the nodes up, from their last scans (none while a
        node up has not been scanned, or held too many jobs to scan)."""
        scans = [n.out_of_queue for n in reporters]
        if not reporters or any(scan is None for scan in scans):
            return ()
        queued: set[str] = set()
        active: list[tuple[str, dict[str, Any]]] = []
        for node, scan in zip(reporters, scans, strict=True):
            assert scan is not None
            queued |= scan.queued
            active += [(f"{node.host}:{node.port}", shown) for shown in scan.active]
        found = out_of_queue(queued, active, int(time.time() * 1000))
        return tuple(sorted(found.values(), key=lambda w: (-w.jobs, w.queue)))

    def _node_snapshot(
        self, node: NodeState, reporters: list[NodeState], now: float
    ) -> NodeSnapshot:
        priorities: list[int] = []
        own_priority: int | None = None
        flags: set[str] = set()
        for r in reporters:
            assert r.report is not None
            for entry in r.report.hello.nodes:
                if entry.id == node.id:
                    if r is node:
                        own_priority = entry.priority
                    else:
                        priorities.append(entry.priority)
            for line in r.report.cluster_nodes:
                if line.id == node.id:
                    flags |= line.flags
        flags.discard("myself")
        priority = max(priorities) if priorities else own_priority
        if (
            node.task is not None
            and not node.task.done()
            and node.error is None
            and now - node.task_started > self.interval
        ):
            status = "slow"
        else:
            status = "up" if node.up else "down"
        info = node.report.info if node.report else {}

        def num(key: str) -> int | None:
            return queries.integer(info[key]) if key in info else None

        jobs = num("registered_jobs")
        leaving = "leaving" in flags or priority == 100
        drain = None
        if leaving and node.jobs_history:
            if node.drain_start is None:
                node.drain_start = max(j for _, j in node.jobs_history)
            drain = drain_estimate(list(node.jobs_history), node.drain_start, DRAIN_WINDOW)
        elif not leaving:
            node.drain_start = None
        return NodeSnapshot(
            id=node.id,
            host=node.host,
            port=node.port,
            status=status,
            priority=priority,
            flags=tuple(sorted(flags)),
            error=node.error,
            last_seen_ago=(now - node.last_ok) if node.last_ok is not None else None,
            latency_ms=node.latency_ms,
            jobs=jobs,
            queues=num("registered_queues"),
            clients=num("connected_clients"),
            blocked=num("blocked_clients"),
            # A rate is never shown for a node not answering: it would read as current.
            memory=num("used_memory"),
            ops_per_sec=num("instantaneous_ops_per_sec") if status != "down" else None,
            version=info.get("disque_version", ""),
            server=server_kind(info) if info else "",
            jobs_history=tuple(j for _, j in node.jobs_history),
            ops_history=tuple(node.ops_history),
            drain=drain,
        )

    def _merge_queues(self, ordered: list[NodeState], now: float) -> tuple[QueueSnapshot, ...]:
        """Queues merged across nodes. A node down keeps its last known queues, as
        stale (with their age, no rates, no blocked clients): their jobs are
        stranded there, and must not vanish from the picture."""
        per_queue: dict[str, list[QueueOnNode]] = {}
        wall = time.time()
        for node in ordered:
            if node.report is None:
                continue
            stale = None if node.up else now - (node.last_ok or now)
            rates, node_id, oldest = node.rates, node.id, node.report.oldest
            for name, q in node.report.queues.items():
                in_rate, out_rate = rates.get(name, NO_RATES) if stale is None else NO_RATES
                ctime = oldest.get(name)
                age = max(0.0, wall - ctime / 1e9) if ctime else None
                on = QueueOnNode(
                    node_id,
                    q.length,
                    q.age,
                    q.idle,
                    q.blocked if stale is None else 0,
                    q.import_from,
                    q.import_rate if stale is None else 0,
                    q.jobs_in,
                    q.jobs_out,
                    q.pause,
                    in_rate,
                    out_rate,
                    age,
                    stale,
                )
                same = per_queue.get(name)
                if same is None:
                    per_queue[name] = [on]
                else:
                    same.append(on)
        merged = tuple(merge_queue(name, per_queue[name]) for name in sorted(per_queue))
        self.rate_history.append(
            MappingProxyType(
                {
                    q.name: (float(q.import_rate), q.out_rate)
                    for q in merged
                    if q.import_rate or q.out_rate
                }
            )
        )
        return merged

    # ---- actions and drill-down (on demand, never part of a cycle) ------------
    def _up_nodes(self) -> list[NodeState]:
        return [
            n for n in sorted(self.nodes.values(), key=lambda n: (n.host, n.port, n.order)) if n.up
        ]

    async def qpeek(self, queue: str, count: int = 5) -> tuple[QueuePeek, ...]:
        """The oldest and newest `count` jobs of `queue` on every reachable node."""

        async def one(node: NodeState) -> QueuePeek:
            try:
                async with asyncio.timeout(self.timeout):
                    oldest, newest = await queries.qpeek_both_ends(self._client(node), queue, count)
            except (RedisError, OSError, TimeoutError) as exc:
                return QueuePeek(node.id, f"{node.host}:{node.port}", error=describe_error(exc))
            return QueuePeek(
                node.id,
                f"{node.host}:{node.port}",
                tuple(PeekedJob(*j) for j in oldest),
                tuple(PeekedJob(*j) for j in newest),
            )

        return tuple(await asyncio.gather(*(one(n) for n in self._up_nodes())))

    async def node_views(self, node_id: str) -> NodeViews:
        """Clients, slow log, latency and config of one node (its detail screen)."""
        node = self.nodes.get(node_id)
        if node is None:
            return NodeViews(node_id, "?", error="not a member any more")
        address = f"{node.host}:{node.port}"
        try:
            async with asyncio.timeout(self.timeout):
                clients, slow, latency, config = await queries.node_views(self._client(node))
        except (RedisError, OSError, TimeoutError) as exc:
            return NodeViews(node_id, address, error=describe_error(exc))
        return NodeViews(node_id, address, clients, slow, latency, config)

    async def show(self, job_id: str) -> tuple[JobShow, ...]:
        """SHOW of a job on every reachable node."""

        async def one(node: NodeState) -> JobShow:
            try:
                async with asyncio.timeout(self.timeout):
                    fields = await queries.show(self._client(node), job_id)
            except (RedisError, OSError, TimeoutError) as exc:
                return JobShow(node.id, f"{node.host}:{node.port}", error=describe_error(exc))
            return JobShow(node.id, f"{node.host}:{node.port}", fields)

        return tuple(await asyncio.gather(*(one(n) for n in self._up_nodes())))

    async def pause(self, queue: str, state: str, bcast: bool = True) -> str:
        """PAUSE on the first reachable node, broadcast to the others."""
        errors = []
        for node in self._up_nodes() or list(self.nodes.values()):
            try:
                async with asyncio.timeout(self.timeout):
                    return await queries.pause(self._client(node), queue, state, bcast)
            except (RedisError, OSError, TimeoutError) as exc:
                errors.append(f"{node.host}:{node.port}: {describe_error(exc)}")
        raise RuntimeError("; ".join(errors) or "no reachable node")

    async def set_leaving(self, node_id: str, leaving: bool) -> str:
        node = self.nodes.get(node_id)
        if node is None:
            raise RuntimeError(f"unknown node {node_id[:8]}")
        async with asyncio.timeout(self.timeout):
            return await queries.set_leaving(self._client(node), leaving)


# ---------------------------------------------------------------------------
# Running a poller on its own thread
# ---------------------------------------------------------------------------


class PollerThread:
    """A `Poller` on a background event loop: the `SnapshotSource` the app uses.

    `start` begins polling; each snapshot goes to the callback (called on the
    poller thread: the app must hop to its own loop, e.g. `post_message`).
    Actions are coroutines run on the poller's loop and awaited by the app.
    """

    def __init__(self, poller: Poller):
        self.poller = poller
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task | None = None
        self._ready = threading.Event()

    @property
    def interval(self) -> float:
        return self.poller.interval

    def start(self, on_snapshot: SnapshotCallback) -> None:
        def main() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            asyncio.set_event_loop(loop)
            self._task = loop.create_task(self.poller.run(on_snapshot))
            self._ready.set()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(self._task)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=main, name="disque-tui-poller", daemon=True)
        self._thread.start()
        self._ready.wait(5)

    def stop(self, timeout: float = 3.0) -> None:
        if self.loop is None or self._task is None or self._thread is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            self.loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout)

    def want_tasks(self, wanted: bool) -> None:
        """The Tasks tab is shown (or hidden): scan the jobs' bodies (or stop)."""
        if self.loop is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.poller.want_tasks, wanted)

    def refresh_now(self) -> None:
        if self.loop is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.poller.poll_now)

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        if self.loop is None:
            coro.close()
            raise RuntimeError("poller not started")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return await asyncio.wrap_future(self.submit(coro))

    async def qpeek(self, queue: str, count: int = 5) -> tuple[QueuePeek, ...]:
        return await self._call(self.poller.qpeek(queue, count))

    async def show(self, job_id: str) -> tuple[JobShow, ...]:
        return await self._call(self.poller.show(job_id))

    async def node_views(self, node_id: str) -> NodeViews:
        return await self._call(self.poller.node_views(node_id))

    async def pause(self, queue: str, state: str, bcast: bool = True) -> str:
        return await self._call(self.poller.pause(queue, state, bcast))

    async def set_leaving(self, node_id: str, leaving: bool) -> str:
        return await self._call(self.poller.set_leaving(node_id, leaving))
