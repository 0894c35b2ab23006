"""What the node's parts share: the pieces of one node, as the client connections,
the cluster, the commands and the metrics see them (uvicorn's ServerState).

``server.Server`` is a ``NodeState``: it builds these pieces, and adds what only
the server does (listeners, dispatch, the cron, shutdown). The modules below it
type ``NodeState``, never ``Server``: what they may ask of the server itself is a
method of ``hooks.Hooks``, and mypy holds them to that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

    from disque_server.aof import AOF
    from disque_server.client import Client
    from disque_server.cluster import Cluster
    from disque_server.cluster.events import ClusterJobEvents
    from disque_server.collector import Collector
    from disque_server.commands import Command
    from disque_server.config import Config
    from disque_server.eviction import Eviction
    from disque_server.hooks import Hooks
    from disque_server.job import CtimeClock
    from disque_server.jobs.ack import Acks
    from disque_server.jobs.queue import Queues
    from disque_server.jobs.registry import Jobs
    from disque_server.latency import LatencyMonitor
    from disque_server.log import Log
    from disque_server.memory import Memory
    from disque_server.output_limits import OutputLimits
    from disque_server.slowlog import SlowLog
    from disque_server.stats import Stats
    from disque_server.watchdog import Watchdog


class NodeState:
    """The pieces of one node (set by ``Server.__init__``)."""

    config: Config
    log: Log
    loop: asyncio.AbstractEventLoop
    start_time: float
    clock_s: float  # time.time() as of the last cron tick
    run_id: str
    stats: Stats
    ctime_clock: CtimeClock
    hooks: Hooks  # what the server does for the layers below it
    memory: Memory
    job_events: ClusterJobEvents  # what a job's life tells the cluster and the AOF
    jobs: Jobs
    queues: Queues
    acks: Acks
    aof: AOF
    eviction: Eviction
    collector: Collector
    watchdog: Watchdog
    output_limits: OutputLimits
    slowlog: SlowLog
    latency: LatencyMonitor
    cluster: Cluster
    clients: dict[Client, None]
    monitors: dict[Client, None]
    commands: dict[bytes, Command]
    command_list: list[Command]
