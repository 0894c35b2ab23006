"""The events timeline (disque_tui/events.py): what changed between snapshots,
from real snapshot objects; and the Events tab, rendered."""

from __future__ import annotations

import dataclasses

from textual.pilot import Pilot
from tui_fixtures import FixedSource, fixed_snapshot, incident_snapshot
from tui_live import wait_until

from disque_tui.app import DisqueTUI
from disque_tui.events import EventLog, changes
from disque_tui.snapshot import ClusterSnapshot


def with_node(snapshot: ClusterSnapshot, index: int, **fields) -> ClusterSnapshot:
    nodes = list(snapshot.nodes)
    nodes[index] = dataclasses.replace(nodes[index], **fields)
    return dataclasses.replace(snapshot, nodes=tuple(nodes))


def test_a_node_down_flagged_and_back() -> None:
    before = fixed_snapshot()
    node = before.nodes[0]
    down = with_node(before, 0, status="down", error="connection refused", flags=("pfail",))
    assert changes(before, down) == [
        ("error", f"node {node.short_id} {node.address} down: connection refused"),
        ("error", f"node {node.short_id} {node.address} flagged PFAIL by the cluster"),
    ]
    back = with_node(down, 0, status="up", error=None, flags=())
    assert changes(down, back) == [
        ("info", f"node {node.short_id} {node.address} up again"),
        ("info", f"node {node.short_id} {node.address} no longer flagged PFAIL"),
    ]
    assert changes(before, before) == []


def test_an_upgrade_leaving_and_a_pause_are_events() -> None:
    before = with_node(fixed_snapshot(), 0, server="C", priority=1, flags=())
    node = before.nodes[0]
    after = with_node(before, 0, server="python")
    assert changes(before, after) == [
        ("info", f"node {node.short_id} {node.address} now runs disque-py (was C Disque)")
    ]
    leaving = with_node(before, 0, flags=("leaving",), jobs=12)
    assert ("warning", f"node {node.short_id} {node.address} leaving (12 jobs to drain)") in (
        changes(before, leaving)
    )
    q = next(q for q in before.queues if q.pause == "none")
    paused = dataclasses.replace(
        before,
        queues=tuple(dataclasses.replace(x, pause="out") if x is q else x for x in before.queues),
        _queue_index={},
    )
    assert changes(before, paused) == [("warning", f"queue {q.name} paused out")]
    assert changes(paused, before) == [("info", f"queue {q.name} resumed (was paused out)")]


def test_joined_and_forgotten_nodes() -> None:
    before = fixed_snapshot()
    gone = dataclasses.replace(before, nodes=before.nodes[1:])
    first = before.nodes[0]
    assert changes(before, gone) == [
        ("warning", f"node {first.short_id} {first.address} forgotten by the cluster")
    ]
    assert changes(gone, before) == [("info", f"node {first.short_id} {first.address} joined")]


def test_the_log_keeps_the_newest_first_and_skips_failed_cycles() -> None:
    log = EventLog(kept=3)
    snap = fixed_snapshot()
    assert log.feed(snap) == 1 and next(iter(log)).text.startswith("watching ")
    assert log.feed(dataclasses.replace(snap, error="cannot connect")) == 0
    node = snap.nodes[0]
    for status in ("down", "up", "down", "up"):
        log.feed(with_node(snap, 0, status=status))
    assert len(log) == 3
    assert [e.text for e in log][0] == f"node {node.short_id} {node.address} up again"


def test_events_screen(snap_compare) -> None:
    """The fixed cluster, then the incident (a node killed, one replaced, one
    leaving): the timeline says what changed, newest first."""
    source = FixedSource()

    async def incident(pilot: Pilot) -> None:
        await wait_until(pilot, lambda: pilot.app.snapshots_seen == 1, 2.0, "the first snapshot")
        assert source.callback is not None
        source.callback(incident_snapshot())
        await wait_until(pilot, lambda: pilot.app.snapshots_seen == 2, 2.0, "the second snapshot")
        await pilot.press("3")

    app = DisqueTUI(source, seed="127.0.0.1:7711")
    assert snap_compare(app, terminal_size=(100, 30), run_before=incident)
