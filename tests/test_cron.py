"""The cron's rate: hz ticks a second, a quarter of that on an idle node (no client
connected, no job registered: Server.cron_period)."""

from __future__ import annotations

import time

import pytest
from nodes import Node

pytestmark = pytest.mark.timeout(40)

WINDOW_S = 2.0


def sleeps(node: Node) -> int:
    """How many times the node's main thread went to sleep (one per event-loop wait
    that blocked: a wait between two cron ticks, when nothing else comes)."""
    assert node.proc is not None
    with open(f"/proc/{node.proc.pid}/status") as f:
        line = next(line for line in f if line.startswith("voluntary_ctxt_switches"))
    return int(line.split()[1])


def wake_ups(node: Node) -> int:
    before = sleeps(node)
    time.sleep(WINDOW_S)
    return sleeps(node) - before


def test_an_idle_node_ticks_at_a_quarter_of_hz(node: Node) -> None:
    # hz 10: about 20 ticks in the window with a client connected, about 5 without.
    idle = wake_ups(node)
    with node.client() as client:
        client.ping()  # (connected: the next tick is at the full rate)
        time.sleep(0.5)
        busy = wake_ups(node)
    assert idle <= 10, f"{idle} wake-ups in {WINDOW_S}s with no client"
    assert busy >= 14, f"{busy} wake-ups in {WINDOW_S}s with a client connected"


def test_a_node_holding_jobs_ticks_at_hz(node: Node) -> None:
    with node.client() as client:
        client.execute_command("ADDJOB", "q", "x", 0)
    time.sleep(0.5)
    ticks = wake_ups(node)
    assert ticks >= 14, f"{ticks} wake-ups in {WINDOW_S}s with a job registered"
