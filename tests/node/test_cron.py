"""The cron's rate: hz ticks a second; on an idle node (no client connected, no job
registered) and on a quiet one (jobs, no client, no timer due soon), a tick when
the failure detector next has work, about once a protocol period, at most a
second apart (Server.cron_period), run by a bus message read after its time
where one comes (Server.run_cron_now). Counted by the node itself (INFO timers'
cron_ticks, cron_ticks_coalesced)."""

from __future__ import annotations

import time

import pytest

from testkit.nodes import Node, wait_for

pytestmark = pytest.mark.timeout(40)

WINDOW_S = 2.0


def cron_ticks(node: Node, field: str = "cron_ticks") -> int:
    """How many times the node's cron ran (a connection opened and closed to ask)."""
    with node.client() as client:
        return int(client.info("timers")[field])


def ticks_of(node: Node) -> tuple[int, int]:
    """cron_ticks and cron_ticks_coalesced, in one INFO (one connection)."""
    with node.client() as client:
        timers = client.info("timers")
    return int(timers["cron_ticks"]), int(timers["cron_ticks_coalesced"])


def test_an_idle_node_ticks_about_once_a_second(node: Node) -> None:
    # hz 10: about 20 ticks in the window with a client connected. Without, a lone
    # node's detector has nothing to probe: a tick a second (it was 5 at hz / 4).
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
    assert idle <= 4, f"{idle} ticks in {WINDOW_S}s with no client"
    assert busy >= 14, f"{busy} ticks in {WINDOW_S}s with a client connected"


def test_a_client_connecting_brings_the_full_rate_at_once(node: Node) -> None:
    """The slow tick of an idle node (a second away) moves to 1 / hz when a client
    connects (Server.reschedule_slow_tick): 3 ticks in its first 0.35 s."""
    cron_ticks(node)
    time.sleep(1.2)  # (idle: a slow tick set)
    with node.client() as client:
        start = int(client.info("timers")["cron_ticks"])
        time.sleep(0.35)
        ticks = int(client.info("timers")["cron_ticks"]) - start
    assert ticks >= 2, f"{ticks} ticks in the first 0.35s of a client"


def test_a_quiet_node_ticks_about_once_a_second(node: Node) -> None:
    """Jobs held, no client connected, no timer due soon (RETRY 300 by default):
    most nodes of a large cluster, holding copies of jobs added elsewhere."""
    with node.client() as client:
        client.execute_command("ADDJOB", "q", "x", 0)
    time.sleep(0.5)
    start = cron_ticks(node)
    time.sleep(WINDOW_S)
    ticks = cron_ticks(node) - start
    assert ticks <= 4, f"{ticks} ticks in {WINDOW_S}s with a job held and no client"


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


def test_an_idle_cluster_node_ticks_about_once_a_protocol_period(cluster3) -> None:
    """Node timeout 1500 ms, 2 peers: a probe every 750 ms (detector.protocol_period).
    The tick set for a probe's half period moves to the next probe once the probe
    is answered (Server.defer_slow_tick): about 4 ticks in 3 s, where ticking
    twice a period made 8."""
    node = cluster3[0]
    cron_ticks(node)
    time.sleep(1.0)  # (the ticks after the asking client left)
    start = cron_ticks(node)
    time.sleep(3.0)
    ticks = cron_ticks(node) - start
    assert 2 <= ticks <= 6, f"{ticks} ticks in 3s, idle, in a cluster of three"


def test_a_quiet_node_under_bus_traffic_runs_its_ticks_in_the_reads(cluster3) -> None:
    """A node holding copies of jobs added elsewhere, none due soon: it keeps its
    slow ticks (a copy's timer, far off, does not bring the full rate back: it did,
    at each probe answered, before Jobs.first_awake), and they run when a REPLJOB is
    read after their time, not each in a wake-up of its own.

    How many run in reads is a figure of the machine's load (a node not scheduled
    for the slack, SLOW_TICK_SLACK_S, has its timer fire first), not asserted here:
    docs/benchmarks.md has it, from bench/scale_out.py's wake-ups. Here: the rate
    stays slow, and the ticks do run in reads (none did without run_cron_now)."""
    a, b, _ = cluster3
    ticks_of(b)
    time.sleep(1.0)
    start, coalesced = ticks_of(b)  # (one INFO: its client brings one tick at 1 / hz)
    with a.client() as client:
        deadline = time.monotonic() + 4.5  # six protocol periods
        while time.monotonic() < deadline:  # a REPLJOB to b every ~5 ms
            client.execute_command("ADDJOB", "q", "x", 0, "REPLICATE", 3)
            time.sleep(0.005)
    end, end_coalesced = ticks_of(b)
    ticks, run_in_reads = end - start, end_coalesced - coalesced
    # About one a period, and the one after the asking client: 7 (45 at 1 / hz, 11 or
    # more before Jobs.first_awake). A stall makes fewer, never more.
    assert ticks <= 9, f"{ticks} ticks in 4.5s on a quiet node"
    assert run_in_reads >= 1, f"none of {ticks} ticks ran in a read"
