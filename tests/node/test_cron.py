"""The cron's rate: hz ticks a second, a quarter of that on an idle node (no client
connected, no job registered: Server.cron_period), counted by the node itself
(INFO timers' cron_ticks)."""

from __future__ import annotations

import time

import pytest

from testkit.nodes import Node

pytestmark = pytest.mark.timeout(40)

WINDOW_S = 2.0


def cron_ticks(node: Node) -> int:
    """How many times the node's cron ran (a connection opened and closed to ask)."""
    with node.client() as client:
        return int(client.info("timers")["cron_ticks"])


def test_an_idle_node_ticks_at_a_quarter_of_hz(node: Node) -> None:
    # hz 10: about 20 ticks in the window with a client connected, about 5 without.
    cron_ticks(node)
    time.sleep(0.5)  # (the tick after the asking client left: the idle period starts)
    start = cron_ticks(node)
    time.sleep(WINDOW_S)
    idle = cron_ticks(node) - start
    with node.client() as client:
        client.ping()  # (connected: the next tick is at the full rate)
        time.sleep(0.5)
        start = cron_ticks(node)
        time.sleep(WINDOW_S)
        busy = cron_ticks(node) - start
    assert idle <= 10, f"{idle} ticks in {WINDOW_S}s with no client"
    assert busy >= 14, f"{busy} ticks in {WINDOW_S}s with a client connected"


def test_a_node_holding_jobs_ticks_at_hz(node: Node) -> None:
    with node.client() as client:
        client.execute_command("ADDJOB", "q", "x", 0)
    time.sleep(0.5)
    start = cron_ticks(node)
    time.sleep(WINDOW_S)
    ticks = cron_ticks(node) - start
    assert ticks >= 14, f"{ticks} ticks in {WINDOW_S}s with a job registered"
