"""The Tasks tab against a real 3-node cluster, driven with the Pilot: each
task's calls queued, running, failed and dead-lettered, counted once however
many copies they have, and the jobs' bodies scanned only while the tab shows."""

from __future__ import annotations

import pytest
from tui_live import SIZE, cell, live_app, row_keys, run, wait_until

from disque.tasks import Tasks
from testkit.nodes import wait_for
from testkit.workers import addr, running

pytestmark = pytest.mark.timeout(90)


def test_the_tasks_tab_counts_each_tasks_calls(start_cluster) -> None:
    cluster = start_cluster(3)
    tasks = Tasks(addr(cluster[0]))

    @tasks.task(name="shop.charge", queue="billing", replicate=2)
    def charge(customer: int) -> None: ...

    @tasks.task(name="shop.refund", queue="refunds", replicate=2, max_attempts=1)
    def refund(customer: int) -> None:
        raise ValueError("no")

    for customer in range(5):
        charge.send(customer)
    refund.send(1)
    # A worker that knows only refund: its call is dead-lettered; charge's wait.
    only_refund = Tasks(addr(cluster[1]))
    only_refund.task(name="shop.refund", queue="refunds", max_attempts=1)(refund.fn)
    with running(only_refund.worker(fetch_timeout_ms=200)):
        wait_for(
            lambda: sum(n.call("QLEN", "refunds:dead") for n in cluster) == 1,
            timeout=20,
            message="refund dead-lettered",
        )
    # One call fetched and not acknowledged (running), one fetched and NACKed (failed).
    [[_, held, _]] = cluster[0].call("GETJOB", "FROM", "billing")
    [[_, nacked, _]] = cluster[0].call("GETJOB", "FROM", "billing")
    cluster[0].call("NACK", nacked)
    cluster[2].call("ADDJOB", "plain", "not a task", 0)  # left out: no task message

    async def scenario() -> None:
        app = live_app(cluster[0].port)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.snapshot and app.snapshot.nodes_up == 3)
            assert not app.snapshot.tasks.scanned  # no body read while the tab is hidden
            await pilot.press("4")
            table = app.main_screen.query_one("#tasks-table")
            await wait_until(
                pilot,
                lambda: row_keys(table) == ["shop.charge", "shop.refund"],
                message="both tasks listed",
            )
            row = [cell(table, "shop.charge", c) for c in ("queued", "running", "failed", "dead")]
            assert row == ["4", "1", "1", "0"]
            assert cell(table, "shop.refund", "dead") == "1"
            assert cell(table, "shop.charge", "queues") == "billing"
            await pilot.press("1")
            await wait_until(pilot, lambda: not app.snapshot.tasks.scanned, message="scan off")
            await pilot.press("q")

    run(scenario())
    assert held
