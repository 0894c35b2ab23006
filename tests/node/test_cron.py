"""The cron's rate: hz ticks a second, a quarter of that on an idle node (no client
connected, no job registered) and on a quiet one (jobs, no client, no timer due
soon: Server.cron_period), counted by the node itself (INFO timers' cron_ticks)."""

from __future__ import annotations

import time

import pytest

from testkit.nodes import Node, wait_for

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


def test_a_quiet_node_ticks_at_a_quarter_of_hz(node: Node) -> None:
    """Jobs held, no client connected, no timer due soon (RETRY 300 by default):
    most nodes of a large cluster, holding copies of jobs added elsewhere."""
    with node.client() as client:
        client.execute_command("ADDJOB", "q", "x", 0)
    time.sleep(0.5)
    start = cron_ticks(node)
    time.sleep(WINDOW_S)
    ticks = cron_ticks(node) - start
    assert ticks <= 10, f"{ticks} ticks in {WINDOW_S}s with a job held and no client"


def test_a_quiet_node_wakes_for_its_first_job_timer(start_node) -> None:
    """hz 2: a tick every 0.5 s, every 2 s when quiet. A job delivered with RETRY 1
    is queued again 1.0-1.1 s later, not at the next slow tick."""
    node = start_node(config={"hz": "2"})
    with node.client() as client:
        jid = client.execute_command("ADDJOB", "q", "x", 0, "RETRY", 1)
        [[_, got, _]] = client.execute_command("GETJOB", "NOHANG", "FROM", "q")
        assert got == jid
    start = time.monotonic()
    wait_for(lambda: node.call("QLEN", "q") == 1, 10, message="the job queued again")
    elapsed = time.monotonic() - start
    assert 0.9 <= elapsed < 1.8, f"queued again after {elapsed:.2f}s"
