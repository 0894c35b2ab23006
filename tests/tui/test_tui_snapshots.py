"""SVG snapshots of every screen, rendered from the FIXED snapshot of
tui_fixtures (no cluster, times in UTC, no animations) at 100x30.

After a deliberate change of the look: `pytest tests/tui --snapshot-update`,
then review the SVGs under __snapshots__/ before committing them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_fixtures import FixedSource, incident_snapshot
from tui_live import wait_until

from disque_tui.app import DisqueTUI
from disque_tui.confirm import ConfirmScreen
from disque_tui.job_detail import JobDetailScreen
from disque_tui.node_detail import NodeDetailScreen
from disque_tui.queue_detail import QueueDetailScreen

pytestmark = pytest.mark.timeout(30)

SIZE = (100, 30)


def fixed_app() -> DisqueTUI:
    return DisqueTUI(FixedSource(), seed="127.0.0.1:7711")


async def until(pilot: Pilot, predicate: Callable[[], Any]) -> None:
    """The screen reached a state: checked every 10 ms, for up to 2 s."""
    await wait_until(pilot, predicate, timeout=2.0, message="the screen", interval=0.01)


def test_overview_screen(snap_compare) -> None:
    """The first screen: problems, nodes (a leaving node with drain progress,
    selected; a down node in red), the queues that matter."""

    async def select_leaving(pilot: Pilot) -> None:
        await pilot.press("down", "down")

    assert snap_compare(fixed_app(), terminal_size=SIZE, run_before=select_leaving)


def test_overview_screen_80x24(snap_compare) -> None:
    assert snap_compare(fixed_app(), terminal_size=(80, 24))


def test_overview_during_an_incident(snap_compare) -> None:
    """The README's screen, 160x45: a node killed with jobs on it (its row greyed,
    its queues kept as stranded), a node replaced on its port by a new ID (two
    rows), a queue growing with nothing consuming it, a node leaving; the killed
    node selected."""

    async def select_killed(pilot: Pilot) -> None:
        await pilot.press("down", "down", "down")

    app = DisqueTUI(FixedSource(incident_snapshot()), seed="127.0.0.1:7711")
    assert snap_compare(app, terminal_size=(160, 45), run_before=select_killed)


def test_overview_during_an_incident_80x24(snap_compare) -> None:
    """Too many problems for a small terminal: the strip says how many more."""
    app = DisqueTUI(FixedSource(incident_snapshot()), seed="127.0.0.1:7711")
    assert snap_compare(app, terminal_size=(80, 24))


def test_queues_screen_sorted_by_length(snap_compare) -> None:
    async def sort(pilot: Pilot) -> None:
        await pilot.press("2")
        pilot.app.queues_view.sort_by("total")

    assert snap_compare(fixed_app(), terminal_size=SIZE, run_before=sort)


def test_queues_screen_filtered(snap_compare) -> None:
    assert snap_compare(fixed_app(), terminal_size=SIZE, press=["2", "slash", "r", "e", "enter"])


def test_queue_detail(snap_compare) -> None:
    async def open_queue(pilot: Pilot) -> None:
        await pilot.press("2", "down", "enter")
        await until(
            pilot,
            lambda: isinstance(pilot.app.screen, QueueDetailScreen) and pilot.app.screen.peeks,
        )

    assert snap_compare(fixed_app(), terminal_size=SIZE, run_before=open_queue)


def test_job_detail(snap_compare) -> None:
    async def open_job(pilot: Pilot) -> None:
        await pilot.press("2", "down", "enter")
        await until(
            pilot,
            lambda: isinstance(pilot.app.screen, QueueDetailScreen) and pilot.app.screen.peeks,
        )
        await pilot.press("enter")
        await until(
            pilot, lambda: isinstance(pilot.app.screen, JobDetailScreen) and pilot.app.screen.shows
        )

    assert snap_compare(fixed_app(), terminal_size=SIZE, run_before=open_job)


def test_pause_dialog(snap_compare) -> None:
    async def ask(pilot: Pilot) -> None:
        await pilot.press("2", "p")
        await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen))

    assert snap_compare(fixed_app(), terminal_size=SIZE, run_before=ask)


def test_help_screen(snap_compare) -> None:
    assert snap_compare(fixed_app(), terminal_size=SIZE, press=["question_mark"])


def test_actions_reach_the_source() -> None:
    """Confirmed actions go to the source with the right arguments; cancelled ones don't."""
    import asyncio

    async def scenario() -> list[tuple]:
        source = FixedSource()
        app = DisqueTUI(source, seed="127.0.0.1:7711")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("down", "down", "l")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("escape", "up", "l")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await pilot.press("2", "down", "p")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("i")
            await until(pilot, lambda: len(source.actions) == 2)
        return source.actions

    from tui_fixtures import N2

    assert asyncio.run(scenario()) == [("leaving", N2, True), ("pause", "jobs", "in", True)]


def test_command_palette_offers_the_actions() -> None:
    import asyncio

    from textual.command import CommandPalette

    async def scenario() -> list[tuple]:
        source = FixedSource()
        app = DisqueTUI(source, seed="127.0.0.1:7711")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("ctrl+p")
            await until(pilot, lambda: isinstance(app.screen, CommandPalette))
            await pilot.press(*"Pause queue: reports")
            await pilot.pause(0.3)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("n")
            await until(pilot, lambda: len(source.actions) == 1)
        return source.actions

    assert asyncio.run(scenario()) == [("pause", "reports", "none", True)]


@pytest.mark.parametrize("where", ["current directory", "--screenshot-dir", "missing dir"])
def test_screenshot_says_where_or_why_not(tmp_path, monkeypatch, where: str) -> None:
    """The palette's Screenshot saves to the current directory (or --screenshot-dir)
    and says where; when it cannot, it says why."""
    import asyncio

    from textual.command import CommandPalette

    monkeypatch.chdir(tmp_path)
    directory = {
        "current directory": None,
        "--screenshot-dir": str(tmp_path / "shots"),
        "missing dir": str(tmp_path / "nowhere"),
    }[where]
    (tmp_path / "shots").mkdir()

    async def scenario() -> list[str]:
        app = DisqueTUI(FixedSource(), seed="127.0.0.1:7711", screenshot_dir=directory)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("ctrl+p")
            await until(pilot, lambda: isinstance(app.screen, CommandPalette))
            await pilot.press(*"Screenshot")
            await pilot.pause(0.3)
            await pilot.press("enter")
            await until(pilot, lambda: app._notifications)
            return [str(n.message) for n in app._notifications]

    messages = asyncio.run(scenario())
    saved = sorted(tmp_path.rglob("*.svg"))
    if where == "missing dir":
        assert saved == []
        assert messages == [
            f"Screenshot not saved in {tmp_path / 'nowhere'}: No such file or directory"
        ]
    else:
        folder = tmp_path if directory is None else tmp_path / "shots"
        assert [p.parent for p in saved] == [folder]
        assert messages == [f"Screenshot saved to {saved[0]}"]


@pytest.mark.parametrize(
    ("image", "snapshot"),
    [
        ("tui.svg", "test_overview_during_an_incident.svg"),
        ("tui-queues.svg", "test_queues_screen_sorted_by_length.svg"),
    ],
)
def test_readme_images_are_the_snapshots(image: str, snapshot: str) -> None:
    """The README and docs/tui.md show what the tests check: after --snapshot-update,
    copy them."""
    root = Path(__file__).resolve().parents[2]
    assert (root / "docs" / image).read_bytes() == (
        Path(__file__).parent / "__snapshots__" / "test_tui_snapshots" / snapshot
    ).read_bytes(), f"cp tests/tui/__snapshots__/test_tui_snapshots/{snapshot} docs/{image}"


def test_a_queue_that_matters_opens_with_enter_and_pauses_with_p() -> None:
    import asyncio

    async def scenario() -> str:
        app = DisqueTUI(FixedSource(incident_snapshot()), seed="127.0.0.1:7711")
        async with app.run_test(size=(160, 45)) as pilot:
            await until(pilot, lambda: app.incident_view.watch_table.keys)
            assert app.incident_view.watch_table.keys[:3] == ["reports", "audit", "orders"]
            await pilot.press("tab")
            assert app.focused is app.incident_view.watch_table
            await pilot.press("down", "enter")
            await until(pilot, lambda: isinstance(app.screen, QueueDetailScreen))
            name = app.screen.queue
            await pilot.press("escape")
            await until(pilot, lambda: len(app.screen_stack) == 1)
            await pilot.press("p")  # pause the queue under the cursor: audit
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("o")
            await until(pilot, lambda: app.source.actions)
            assert app.source.actions == [("pause", "audit", "out", True)]
            return name

    assert asyncio.run(scenario()) == "audit"


def test_node_detail(snap_compare) -> None:
    """Enter on a node: its clients, then its slow log."""

    async def open_node(pilot: Pilot) -> None:
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(pilot.app.screen, NodeDetailScreen))
        await until(pilot, lambda: pilot.app.screen.views is not None)

    assert snap_compare(fixed_app(), terminal_size=SIZE, run_before=open_node)


def open_tab(tab: str):
    """Enter on a node, then one tab of its detail screen."""

    async def run_before(pilot: Pilot) -> None:
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(pilot.app.screen, NodeDetailScreen))
        await until(pilot, lambda: pilot.app.screen.views is not None)
        pilot.app.screen.query_one("TabbedContent").active = tab

    return run_before


def test_node_detail_slow_log(snap_compare) -> None:
    assert snap_compare(fixed_app(), terminal_size=SIZE, run_before=open_tab("slowlog"))


def test_node_detail_latency(snap_compare) -> None:
    assert snap_compare(fixed_app(), terminal_size=SIZE, run_before=open_tab("latency"))


def test_node_detail_config(snap_compare) -> None:
    assert snap_compare(fixed_app(), terminal_size=SIZE, run_before=open_tab("config"))
