"""The dashboard against real 3-node clusters, driven with the Pilot: what it
shows follows the cluster, faults show without stalling it, and its actions
change the cluster (checked with a plain client)."""

from __future__ import annotations

import asyncio
import time

import pytest
from rich.console import Console
from textual.widgets import Static
from tui_live import (
    SIZE,
    cell,
    cell_style,
    live_app,
    row_keys,
    run,
    wait_in_thread,
    wait_until,
)

from disque_tui.confirm import ConfirmScreen
from disque_tui.job_detail import JobDetailScreen
from disque_tui.queue_detail import QueueDetailScreen

pytestmark = pytest.mark.timeout(60)


def ids_of(cluster) -> list[str]:
    return [i.decode() for i in cluster.node_ids()]


def rendered(renderable) -> str:
    console = Console(width=120, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def test_nodes_and_queues_appear_and_follow_the_cluster(start_cluster) -> None:
    cluster = start_cluster(3)
    ids = ids_of(cluster)
    cluster[0].call("ADDJOB", "tui-a", "job-0", 0, "REPLICATE", 1)

    async def scenario() -> None:
        app = live_app(cluster[0].port)
        async with app.run_test(size=SIZE) as pilot:
            nodes = app.nodes_view.table
            await wait_until(
                pilot,
                lambda: sorted(row_keys(nodes)) == sorted(ids) and app.snapshot.nodes_up == 3,
                message="3 nodes up",
            )
            await wait_until(pilot, lambda: cell(nodes, ids[0], "jobs") == "1")
            assert cell(nodes, ids[1], "status") == "up"
            assert cell(nodes, ids[1], "address") == f"127.0.0.1:{cluster[1].port}"

            await pilot.press("2")
            queues = app.queues_view.table
            await wait_until(pilot, lambda: "tui-a" in row_keys(queues), message="queue row")
            assert cell(queues, "tui-a", "total") == "1"
            assert cell(queues, "tui-a", "node:" + ids[0]) == "1"

            for i in range(5):
                cluster[1].call("ADDJOB", "tui-a", f"job-{i + 1}", 0, "REPLICATE", 1)
            cluster[2].call("ADDJOB", "tui-b", "other", 0, "REPLICATE", 1)
            await wait_until(
                pilot, lambda: cell(queues, "tui-a", "total") == "6", message="len 6 after ADDJOB"
            )
            assert cell(queues, "tui-a", "node:" + ids[1]) == "5"
            await wait_until(pilot, lambda: "tui-b" in row_keys(queues))
            await wait_until(pilot, lambda: float(cell(queues, "tui-a", "in")) == 0.0)

            # sorting by length, then filtering by name
            app.queues_view.sort_by("total")
            await pilot.pause()
            assert row_keys(queues)[0] == "tui-a"
            await pilot.press("slash", *"tui-b", "enter")
            await wait_until(pilot, lambda: row_keys(queues) == ["tui-b"], message="filter")

            await pilot.press("1")
            await wait_until(pilot, lambda: cell(nodes, ids[1], "jobs") == "5")
            await pilot.press("q")
        assert app.return_code == 0
        assert not app.source._thread.is_alive()

    run(scenario())


def test_dead_and_frozen_nodes_do_not_stall_the_rest(start_cluster) -> None:
    cluster = start_cluster(3)
    ids = ids_of(cluster)

    async def scenario() -> None:
        app = live_app(cluster[0].port)
        async with app.run_test(size=SIZE) as pilot:
            nodes = app.nodes_view.table
            await wait_until(pilot, lambda: app.snapshot and app.snapshot.nodes_up == 3)

            # SIGSTOP: connections hang; the node goes slow, then down, alone
            cluster[1].pause()
            try:
                await wait_until(
                    pilot,
                    lambda: app.snapshot.node(ids[1]).status == "down",
                    message="frozen node down",
                )
                seen, start = app.snapshots_seen, time.monotonic()
                cluster[0].call("ADDJOB", "tui-live", "x", 0, "REPLICATE", 1)
                await wait_until(
                    pilot,
                    lambda: cell(nodes, ids[0], "jobs") == "1",
                    timeout=3,
                    message="others keep updating",
                )
                await pilot.pause(1.0)
                rate = (app.snapshots_seen - seen) / (time.monotonic() - start)
                assert rate >= 2, f"only {rate:.1f} snapshots/s while a node is frozen"
                assert "DOWN" in cell(nodes, ids[1], "status")
                assert "red" in cell_style(nodes, ids[1], "status")
            finally:
                cluster[1].resume()
            await wait_until(
                pilot,
                lambda: app.snapshot.node(ids[1]).status == "up",
                message="resumed node up again",
            )

            # SIGKILL: refused connections; shown down with the time since last seen
            cluster[2].kill()
            await wait_until(
                pilot, lambda: "DOWN" in cell(nodes, ids[2], "status"), message="killed node down"
            )
            await wait_until(pilot, lambda: "s ago" in cell(nodes, ids[2], "status"))
            assert "red" in cell_style(nodes, ids[2], "address")
            await wait_until(
                pilot,
                lambda: (
                    "pfail" in cell(nodes, ids[2], "flags")
                    or "fail" in cell(nodes, ids[2], "flags")
                ),
                timeout=10,
                message="cluster flags the dead node",
            )
            cluster[1].call("ADDJOB", "tui-live", "y", 0, "REPLICATE", 1)
            await wait_until(pilot, lambda: cell(nodes, ids[1], "jobs") == "1")
            assert app.snapshot.nodes_up == 2

    run(scenario())


def test_pause_queue_action_changes_the_cluster(start_cluster) -> None:
    cluster = start_cluster(3)
    cluster[0].call("ADDJOB", "tui-p", "x", 0, "REPLICATE", 1)
    cluster[0].call("ADDJOB", "tui-other", "x", 0, "REPLICATE", 1)

    def pause_states() -> set[bytes]:
        return {n.call("PAUSE", "tui-p", "state") for n in cluster}

    async def scenario() -> None:
        app = live_app(cluster[0].port)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("2")
            queues = app.queues_view.table
            await pilot.press("slash", *"tui-p", "enter")
            await wait_until(pilot, lambda: row_keys(queues) == ["tui-p"])

            await pilot.press("p")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("escape")  # cancelled: nothing changes
            await pilot.pause(0.3)
            assert pause_states() == {b"none"}

            await pilot.press("p")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("o")
            await wait_in_thread(
                pilot,
                lambda: pause_states() == {b"out"},
                message="PAUSE out broadcast to every node",
            )
            await wait_until(pilot, lambda: cell(queues, "tui-p", "pause") == "out")
            assert cluster[1].call("PAUSE", "tui-other", "state") == b"none"

            await pilot.press("p")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.click("#choice-all")
            await wait_in_thread(pilot, lambda: pause_states() == {b"all"})

            await pilot.press("p")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("n")
            await wait_in_thread(pilot, lambda: pause_states() == {b"none"})
            await wait_until(pilot, lambda: cell(queues, "tui-p", "pause") == "none")

    run(scenario())


def test_leaving_action_changes_the_cluster(start_cluster) -> None:
    cluster = start_cluster(3)
    ids = ids_of(cluster)
    for i in range(30):
        cluster[2].call("ADDJOB", "tui-drain", f"job-{i}", 0)

    async def scenario() -> None:
        app = live_app(cluster[0].port)
        async with app.run_test(size=SIZE) as pilot:
            nodes = app.nodes_view.table
            await wait_until(
                pilot, lambda: ids[2] in row_keys(nodes) and app.snapshot.nodes_up == 3
            )
            nodes.select_key(ids[2])
            await pilot.press("l")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await wait_in_thread(
                pilot,
                lambda: "leaving" in cluster.flags_of(cluster[0], cluster[2]),
                message="CLUSTER LEAVING yes seen by the cluster",
            )
            await wait_until(pilot, lambda: "leaving" in cell(nodes, ids[2], "flags"))
            await wait_until(
                pilot,
                lambda: "left" in cell(nodes, ids[2], "drain"),
                message="drain progress shown",
            )
            assert "yellow" in cell_style(nodes, ids[2], "address")
            detail = str(app.nodes_view.query_one("#node-detail", Static).content)
            assert "leaving" in detail and "drained" in detail

            await pilot.press("l")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await wait_in_thread(
                pilot,
                lambda: "leaving" not in cluster.flags_of(cluster[0], cluster[2]),
                message="CLUSTER LEAVING no",
            )
            await wait_until(pilot, lambda: cell(nodes, ids[2], "drain") == "")

    run(scenario())


def test_drill_down_shows_qpeek_and_show(start_cluster) -> None:
    cluster = start_cluster(3)
    ids = ids_of(cluster)
    first = cluster[0].call("ADDJOB", "tui-d", "oldest body", 0).decode()
    cluster[0].call("ADDJOB", "tui-d", "newest body", 0)
    other = cluster[1].call("ADDJOB", "tui-d", "on node 1", 0, "REPLICATE", 1).decode()

    async def scenario() -> None:
        app = live_app(cluster[0].port)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("2")
            queues = app.queues_view.table
            await wait_until(
                pilot, lambda: "tui-d" in row_keys(queues) and cell(queues, "tui-d", "total") == "3"
            )
            queues.select_key("tui-d")
            await pilot.press("enter")
            screen = await wait_until(
                pilot,
                lambda: (
                    isinstance(app.screen, QueueDetailScreen) and app.screen.peeks and app.screen
                ),
            )
            by_node = {p.node_id: p for p in screen.peeks}
            expected = cluster[0].call("QPEEK", "tui-d", 5)
            assert [j.id for j in by_node[ids[0]].oldest] == [e[1].decode() for e in expected]
            assert by_node[ids[0]].oldest[0].body == b"oldest body"
            assert by_node[ids[0]].newest[0].body == b"newest body"
            assert [j.id for j in by_node[ids[1]].oldest] == [other]
            assert by_node[ids[2]].oldest == ()
            stats = screen.query_one("#queue-stats")
            await wait_until(pilot, lambda: stats.row_count == 2)

            jobs = screen.query_one("#queue-jobs")
            row = next(
                i
                for i, key in enumerate(jobs.rows)
                if screen.jobs.get(key.value, ("",))[0] == first
            )
            jobs.move_cursor(row=row)
            await pilot.press("enter")  # the oldest job on node 0
            job = await wait_until(
                pilot,
                lambda: isinstance(app.screen, JobDetailScreen) and app.screen.shows and app.screen,
            )
            assert job.job_id == first
            show = {s.node_id: s for s in job.shows}
            assert show[ids[0]].fields["state"] == "queued"
            assert show[ids[0]].fields["body"] == b"oldest body"
            assert show[ids[0]].fields["nacks"] == 0
            text = rendered(job.query_one("#job-fields", Static).content)
            for expected_text in (
                "queued",
                "additional-deliveries",
                "nodes-delivered",
                "oldest body",
                first[:10],
            ):
                assert expected_text in text
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, QueueDetailScreen))
            await pilot.press("escape")
            await wait_until(pilot, lambda: len(app.screen_stack) == 1)
            await pilot.press("ctrl+c")
        assert app.return_code == 0

    run(scenario())


def test_a_killed_node_keeps_its_queues_as_stranded(start_cluster) -> None:
    """A queue held only by a node that dies (REPLICATE 1) stays on screen, stale:
    its 20 jobs are stranded, said in the problem strip, the header and the
    queues; the node's row keeps its last figures greyed, and no rate."""
    cluster = start_cluster(3)
    ids = ids_of(cluster)
    for i in range(20):
        cluster[2].call("ADDJOB", "only-there", f"job-{i}", 0, "REPLICATE", 1)

    async def scenario() -> None:
        app = live_app(cluster[0].port)
        async with app.run_test(size=(160, 45)) as pilot:
            nodes, watch = app.nodes_view.table, app.incident_view.watch_table
            await wait_until(
                pilot,
                lambda: cell(watch, "only-there", "total") == "20",
                message="the queue on the node about to die",
            )
            assert cell(nodes, ids[2], "ops") != "-"
            # the oldest job's age, from its SHOW ctime
            assert cell(watch, "only-there", "oldest").endswith("s")
            cluster[2].kill()
            await wait_until(
                pilot, lambda: "DOWN" in cell(nodes, ids[2], "status"), message="killed node down"
            )
            # (a poll reading from the node as it died sees a reset; the next ones are refused)
            await wait_until(
                pilot,
                lambda: app.snapshot.node(ids[2]).error == "connection refused",
                message="the killed node refuses connections",
            )
            snapshot = app.snapshot
            assert snapshot.queue("only-there").stranded == 20
            assert cell(watch, "only-there", "problem") == "20 stranded"
            assert "down, as of" in cell(watch, "only-there", "where")
            assert watch.keys[0] == "only-there", "problems first"
            strip = str(app.incident_view.query_one("#problems", Static).content)
            assert "20 jobs of queue only-there stranded on down node " + ids[2][:8] in strip
            assert "20 stranded" in str(app.query_one("#status").content)
            # last figures kept, greyed; the rate is not current, so not shown
            assert cell(nodes, ids[2], "jobs") == "20"
            assert "dim" in cell_style(nodes, ids[2], "jobs")
            assert cell(nodes, ids[2], "ops") == "-"
            await pilot.press("2")
            queues = app.queues_view.table
            await wait_until(pilot, lambda: "only-there" in row_keys(queues))
            assert cell(queues, "only-there", "node:" + ids[2]) == "20?"

    run(scenario())


def test_a_node_replaced_on_its_port_is_a_new_node(start_cluster, tmp_path) -> None:
    """Polled by address, checked by ID: a fresh node on a dead node's port is not
    the dead node. The old ID is down ("now answers as ..."); once met, the new
    ID is a node of its own; the count of nodes up stays true."""
    cluster = start_cluster(3)
    ids = ids_of(cluster)

    async def scenario() -> None:
        app = live_app(cluster[0].port)
        async with app.run_test(size=(160, 45)) as pilot:
            nodes = app.nodes_view.table
            await wait_until(pilot, lambda: app.snapshot and app.snapshot.nodes_up == 3)
            fresh = await asyncio.to_thread(cluster[2].replaced, tmp_path / "fresh")
            try:
                new_id = fresh.call("CLUSTER", "MYID").decode()
                await wait_until(
                    pilot,
                    lambda: (
                        "now answers as node " + new_id[:8]
                        in (app.snapshot.node(ids[2]).error or "")
                    ),
                    message="the old ID down, its address answering another",
                )
                assert app.snapshot.node(ids[2]).status == "down"
                assert app.snapshot.nodes_up == 2
                # The operator meets the new node once the cluster has failed the old one.
                await wait_in_thread(
                    pilot,
                    lambda: "fail" in cluster.flags_of(cluster[0], cluster[2]),
                    timeout=15,
                    message="the old ID FAIL in the cluster",
                )
                await asyncio.to_thread(
                    cluster[0].call, "CLUSTER", "MEET", "127.0.0.1", str(fresh.port)
                )
                await wait_until(
                    pilot,
                    lambda: new_id in row_keys(nodes) and app.snapshot.node(new_id).status == "up",
                    timeout=20,
                    message="the new node, met, as a node of its own",
                )
                assert cell(nodes, new_id, "address") == cell(nodes, ids[2], "address")
                assert "DOWN" in cell(nodes, ids[2], "status")
                assert app.snapshot.nodes_up == 3 and len(app.snapshot.nodes) == 4
            finally:
                await asyncio.to_thread(fresh.terminate)

    run(scenario())
