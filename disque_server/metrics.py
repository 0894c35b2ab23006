"""Prometheus metrics (beyond Disque): ``/metrics`` on ``metrics-port``.

Off by default. The endpoint listens on ``metrics-bind`` (else on the
addresses the client port uses) and speaks HTTPS when the node has a
certificate (``tls-cert-file``/``tls-key-file``; ``tls-auth-clients`` then
applies to scrapers too).

Nothing is added to the request path: ``NodeCollector`` reads, at scrape
time and on the node's own event loop, what the node counts anyway (INFO's
fields, per-command calls and time, queue stats, cluster state). The only
counters that exist for the metrics are on paths that are not hot: ADDJOB
refusals (``Stats.addjob_refused``; the successful ADDJOBs are derived from
the calls) and one increment per handled bus message, by type.

Each node reports itself; Prometheus scrapes every node and aggregates.
Per-queue series are capped by ``metrics-max-queues``, the longest queues
first; ``disque_queues_not_exported`` says how many were left out.
"""

from __future__ import annotations

import asyncio
import heapq
import ssl
import time
from collections import Counter
from collections.abc import Iterator
from operator import attrgetter
from typing import TYPE_CHECKING, Final, cast

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from disque_server import DISQUE_VERSION, tls
from disque_server.commands import commands_processed
from disque_server.job import STATE_NAMES
from disque_server.jobs.queue import PAUSED_IN, PAUSED_OUT

if TYPE_CHECKING:
    from disque_server.jobs.queue import Queue
    from disque_server.state import NodeState

ADDJOB_OUTCOMES: Final = (b"NOREPL", b"OOM", b"PAUSED", b"MAXLEN", b"ERR")
MAX_REQUEST: Final = 8192  # bytes of request line and headers
REQUEST_TIMEOUT: Final = 10.0  # seconds a connection may take to send its request

_state: Final = attrgetter("state")


class NodeCollector:
    """Reads the node's state when Prometheus scrapes (runs on the event loop)."""

    def __init__(self, server: NodeState) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        yield from self.node()
        yield from self.jobs()
        yield from self.queues()
        yield from self.clients_and_commands()
        yield from self.addjob_replies()
        yield from self.cluster()
        yield from self.aof()
        yield from self.memory()

    # ---- the node ------------------------------------------------------------------
    def node(self) -> Iterator[Metric]:
        s = self.server
        info = GaugeMetricFamily(
            "disque_node_info", "This node: ID and version (value 1)", labels=["id", "version"]
        )
        info.add_metric([s.cluster.myself.id.decode(), DISQUE_VERSION], 1)
        yield info
        yield GaugeMetricFamily(
            "disque_uptime_seconds",
            "Seconds since the node started",
            value=time.time() - s.start_time,
        )
        yield GaugeMetricFamily(
            "disque_event_loop_max_stall_seconds",
            "Worst event-loop stall seen by the cron since start or LATENCY RESET",
            value=s.latency.max_stall_ms / 1000,
        )

    # ---- jobs and queues -----------------------------------------------------------
    def jobs(self) -> Iterator[Metric]:
        counts: Counter[int] = Counter()
        for part in self.server.jobs.by_id.parts:  # C loops: ~75 ns a job
            if part is not None:
                counts.update(map(_state, part.values()))
        family = GaugeMetricFamily(
            "disque_jobs", "Jobs known to this node, by state", labels=["state"]
        )
        for state, name in STATE_NAMES.items():
            family.add_metric([name.decode()], counts[state])
        yield family

    def queues(self) -> Iterator[Metric]:
        all_queues = self.server.queues.by_name.values()
        cap = self.server.config["metrics-max-queues"]
        shown: list[Queue] = (
            list(all_queues) if len(all_queues) <= cap else heapq.nlargest(cap, all_queues, key=len)
        )
        yield GaugeMetricFamily(
            "disque_queues", "Queues registered on this node", value=len(all_queues)
        )
        yield GaugeMetricFamily(
            "disque_queues_not_exported",
            "Queues left out of the per-queue series (metrics-max-queues; longest kept)",
            value=len(all_queues) - len(shown),
        )
        labels = ["queue"]
        length = GaugeMetricFamily("disque_queue_length", "Jobs queued", labels=labels)
        jobs_in = CounterMetricFamily("disque_queue_jobs_in", "Jobs queued so far", labels=labels)
        jobs_out = CounterMetricFamily(
            "disque_queue_jobs_out", "Jobs delivered so far", labels=labels
        )
        rate = GaugeMetricFamily(
            "disque_queue_import_rate",
            "Jobs per second imported from other nodes lately",
            labels=labels,
        )
        blocked = GaugeMetricFamily(
            "disque_queue_blocked_clients", "Clients blocked in GETJOB on the queue", labels=labels
        )
        paused = GaugeMetricFamily(
            "disque_queue_paused",
            "1 when the queue is paused in this direction",
            labels=["queue", "direction"],
        )
        for q in shown:
            name = [q.name.decode(errors="backslashreplace")]
            length.add_metric(name, len(q.jobs))
            jobs_in.add_metric(name, q.jobs_in)
            jobs_out.add_metric(name, q.jobs_out)
            rate.add_metric(name, q.import_rate)
            blocked.add_metric(name, len(q.clients))
            paused.add_metric([*name, "in"], int(bool(q.flags & PAUSED_IN)))
            paused.add_metric([*name, "out"], int(bool(q.flags & PAUSED_OUT)))
        yield from (length, jobs_in, jobs_out, rate, blocked, paused)

    # ---- clients and commands --------------------------------------------------------
    def clients_and_commands(self) -> Iterator[Metric]:
        s = self.server
        yield GaugeMetricFamily(
            "disque_connected_clients", "Client connections", value=len(s.clients)
        )
        yield GaugeMetricFamily(
            "disque_blocked_clients",
            "Clients blocked (GETJOB, synchronous ADDJOB, ACKJOB)",
            value=s.stats.blocked_clients,
        )
        yield CounterMetricFamily(
            "disque_connections_received",
            "Client connections accepted",
            value=s.stats.connections_received,
        )
        yield CounterMetricFamily(
            "disque_commands_processed", "Commands run", value=commands_processed(s.command_list)
        )
        calls = CounterMetricFamily("disque_command_calls", "Calls, by command", labels=["command"])
        seconds = CounterMetricFamily(
            "disque_command_duration_seconds", "Time spent running the command", labels=["command"]
        )
        for cmd in s.command_list:
            if cmd.calls:
                calls.add_metric([cmd.name], cmd.calls)
                seconds.add_metric([cmd.name], cmd.usec)
        yield calls
        yield seconds

    def addjob_replies(self) -> Iterator[Metric]:
        """Refusals are counted where they happen; "ok" is the rest of the calls, less
        the synchronous ADDJOBs still waiting for their replicas."""
        s = self.server
        refused = s.stats.addjob_refused
        waiting = sum(
            1
            for rep in s.cluster.replications.values()
            if rep.client is not None and not rep.asynchronous
        )
        calls = s.commands[b"addjob"].calls
        family = CounterMetricFamily(
            "disque_addjob_replies", "ADDJOB replies, by outcome", labels=["outcome"]
        )
        # OOM is refused before the command runs: it is not in the calls.
        ok = calls - waiting - sum(n for code, n in refused.items() if code != b"OOM")
        family.add_metric(["ok"], max(ok, 0))
        for code in ADDJOB_OUTCOMES:
            family.add_metric([code.decode()], refused.get(code, 0))
        yield family

    # ---- the cluster ---------------------------------------------------------------
    def cluster(self) -> Iterator[Metric]:
        cluster = self.server.cluster
        others = [n for n in cluster.nodes.values() if n is not cluster.myself]
        yield GaugeMetricFamily(
            "disque_cluster_known_nodes", "Nodes known, this one included", value=cluster.size
        )
        yield GaugeMetricFamily(
            "disque_cluster_reachable_nodes",
            "Other nodes a job can be replicated to: not flagged PFAIL, FAIL, handshake "
            "or leaving (Disque's reachable nodes)",
            value=cluster.replication_candidates_count(),
        )
        yield GaugeMetricFamily(
            "disque_cluster_failing_nodes",
            "Other nodes flagged PFAIL or FAIL",
            value=sum(1 for n in others if n.failing),
        )
        yield GaugeMetricFamily(
            "disque_cluster_leaving_nodes",
            "Other nodes that are leaving the cluster",
            value=sum(1 for n in others if "leaving" in n.flags),
        )
        yield GaugeMetricFamily(
            "disque_leaving", "1 when this node is leaving the cluster", value=int(cluster.leaving)
        )
        received = CounterMetricFamily(
            "disque_bus_messages_received", "Cluster bus messages handled, by type", labels=["type"]
        )
        for mtype, n in sorted(cluster.received_by_type.items()):
            received.add_metric([mtype.decode()], n)
        yield received
        yield CounterMetricFamily(
            "disque_bus_messages_sent", "Cluster bus messages sent", value=cluster.messages_sent
        )

    # ---- persistence and memory ------------------------------------------------------
    def aof(self) -> Iterator[Metric]:
        aof = self.server.aof
        on = aof.state != "off"
        yield GaugeMetricFamily("disque_aof_enabled", "1 when the AOF is on", value=int(on))
        yield GaugeMetricFamily(
            "disque_aof_rewrite_in_progress",
            "1 during an AOF rewrite",
            value=int(aof.rewriting),
        )
        yield GaugeMetricFamily(
            "disque_aof_last_write_ok",
            "0 after a failed AOF write (writes are refused: MISCONF)",
            value=int(not aof.last_write_error),
        )
        yield GaugeMetricFamily(
            "disque_aof_last_bgrewrite_ok",
            "0 when the last AOF rewrite failed",
            value=int(aof.last_bgrewrite_ok),
        )
        yield GaugeMetricFamily(
            "disque_aof_size_bytes", "Size of the AOF", value=aof.current_size if on else 0
        )
        yield GaugeMetricFamily(
            "disque_aof_fsync_pending",
            "1 when written AOF data waits for its fsync",
            value=int(on and (aof.fsync_pending or aof.fsync_running)),
        )
        # appendfsync always fsyncs before replying: nothing written is ever unsynced.
        always = self.server.config["appendfsync"] == "always"
        last = time.time() if always else time.time() - (time.monotonic() - aof.last_fsync)
        yield GaugeMetricFamily(
            "disque_aof_last_fsync_timestamp_seconds",
            "When the AOF was last fsynced (now with appendfsync always)",
            value=last if on else 0,
        )

    def memory(self) -> Iterator[Metric]:
        self.server.jobs.refresh_memory()  # (an idle node's cron does not: Server.cron)
        m = self.server.memory
        yield GaugeMetricFamily(
            "disque_memory_used_bytes",
            "Memory as maxmemory counts it (jobs and queues now, buffers sampled each second)",
            value=m.used,
        )
        yield GaugeMetricFamily(
            "disque_memory_peak_bytes", "Highest used memory seen", value=m.peak
        )
        yield GaugeMetricFamily(
            "disque_maxmemory_bytes",
            "The maxmemory limit (0: none)",
            value=self.server.config["maxmemory"],
        )
        yield GaugeMetricFamily(
            "disque_job_body_bytes",
            "Bytes of job bodies held (the data itself)",
            value=self.body_bytes(),
        )

    def body_bytes(self) -> int:
        total = 0
        for part in self.server.jobs.by_id.parts:
            if part is not None:
                total += sum(map(len, map(_body, part.values())))
        return total


_body: Final = attrgetter("body")


def registry_for(server: NodeState) -> CollectorRegistry:
    """The node's collector and the process' own (CPU, RSS, open files)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeCollector(server))
    ProcessCollector(registry=registry)
    return registry


# ---- the HTTP endpoint ---------------------------------------------------------------


class MetricsHTTP(asyncio.Protocol):
    """One scrape: read a GET request, answer it, close (HTTP/1.1, one request)."""

    def __init__(self, registry: CollectorRegistry, loop: asyncio.AbstractEventLoop) -> None:
        self.registry = registry
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.timer = loop.call_later(REQUEST_TIMEOUT, self.close)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.timer.cancel()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_REQUEST:
                self.respond(431, b"text/plain", b"request header too large\n")
            return
        head = self.buf[:end].decode("latin-1").split("\r\n")
        words = head[0].split()
        headers = dict(line.split(":", 1) for line in head[1:] if ":" in line)
        headers = {k.strip().lower(): v.strip() for k, v in headers.items()}
        if len(words) != 3 or not words[2].startswith("HTTP/"):
            self.respond(400, b"text/plain", b"bad request\n")
        elif words[0] not in ("GET", "HEAD"):
            self.respond(405, b"text/plain", b"only GET\n", [b"Allow: GET, HEAD"])
        elif words[1].split("?", 1)[0] not in ("/metrics", "/"):
            self.respond(404, b"text/plain", b"see /metrics\n")
        else:
            encoder, content_type = choose_encoder(headers.get("accept", ""))
            body = encoder(self.registry)
            self.respond(
                200, content_type.encode(), b"" if words[0] == "HEAD" else body, length=len(body)
            )

    def respond(
        self,
        status: int,
        content_type: bytes,
        body: bytes,
        extra: list[bytes] | None = None,
        length: int | None = None,
    ) -> None:
        reason = {
            200: b"OK",
            400: b"Bad Request",
            404: b"Not Found",
            405: b"Method Not Allowed",
            431: b"Request Header Fields Too Large",
        }[status]
        head = [
            b"HTTP/1.1 %d %s" % (status, reason),
            b"Content-Type: " + content_type,
            b"Content-Length: %d" % (len(body) if length is None else length),
            b"Connection: close",
            *(extra or []),
        ]
        assert self.transport is not None
        self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def start(server: NodeState, client_hosts: list[str | None]) -> list[asyncio.AbstractServer]:
    """Listen on metrics-port (HTTPS when the node has a certificate), on metrics-bind
    or else where the client port listens. The listeners, for the server to close."""
    config = server.config
    port = config["metrics-port"]
    hosts: list[str | None] = list(config["metrics-bind"].split()) or client_hosts
    context: ssl.SSLContext | None = None
    if config["tls-cert-file"] and config["tls-key-file"]:
        context = tls.server_context(config)
    registry = registry_for(server)
    listeners: list[asyncio.AbstractServer] = []
    for host in hosts:
        try:
            srv = await server.loop.create_server(
                lambda: MetricsHTTP(registry, server.loop),
                host,
                port,
                reuse_address=True,
                ssl=context,
            )
        except OSError:
            if host == "::1":
                continue
            raise
        listeners.append(srv)
    server.log.notice(
        "Prometheus metrics on %s://%s:%d/metrics",
        "https" if context else "http",
        hosts[0] or "*",
        port,
    )
    return listeners
