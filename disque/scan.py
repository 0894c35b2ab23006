"""A queue's jobs on every reachable node: JSCAN is one node's view, and a job
lives on several (its copies), so the brokers' flush and join and the periodic
tasks' ticks ask each node HELLO lists."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from disque.client import Client
from disque.errors import DisqueError
from disque.protocol import PRIORITY_FAILING, text

log = logging.getLogger("disque.scan")

LIVE_STATES = ("wait-repl", "active", "queued")  # every state but acked


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
