"""Helpers for driving the dashboard against live clusters with the Pilot."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from rich.text import Text
from textual.pilot import Pilot

from disque.tls import TLS
from disque_tui.app import DisqueTUI
from disque_tui.poller import Poller, PollerThread
from disque_tui.table import SnapshotTable
from testkit.polling import Poll

INTERVAL = 0.2
SIZE = (100, 30)


def live_app(
    port: int,
    interval: float = INTERVAL,
    timeout: float | None = None,
    password: str | None = None,
    tls: TLS | None = None,
) -> DisqueTUI:
    """The dashboard polling the node on `port` (and through it the cluster)."""
    poller = Poller("127.0.0.1", port, password, interval=interval, timeout=timeout, tls=tls)
    return DisqueTUI(PollerThread(poller), seed=f"127.0.0.1:{port}")


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Tests are plain functions: each runs its scenario on a fresh event loop."""
    return asyncio.run(coro)


async def wait_until(
    pilot: Pilot,
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    message: str = "condition",
    interval: float = 0.05,
) -> Any:
    """Let the app run until `predicate()` is truthy; fail after `timeout` seconds."""
    poll = Poll(predicate, timeout, message)
    while (value := poll.value()) is None:
        await pilot.pause(interval)
    return value


async def wait_in_thread(
    pilot: Pilot, predicate: Callable[[], Any], timeout: float = 10.0, message: str = "condition"
) -> Any:
    """Like wait_until, for predicates that talk to the cluster (blocking calls: run in
    a thread, so the app keeps drawing)."""
    poll = Poll(predicate, timeout, message)
    while True:
        try:
            value = await asyncio.to_thread(predicate)
        except Exception as exc:
            poll.last_exc = exc
            value = None
        if value:
            return value
        poll.check_deadline()
        await pilot.pause(0.05)


def cell(table: SnapshotTable, key: str, column: str) -> str:
    """The text shown for the row of `key` (node ID, queue name) in `column`."""
    return table.text(key, column)


def cell_style(table: SnapshotTable, key: str, column: str) -> str:
    value = table.value(key, column)
    if not isinstance(value, Text):
        return ""
    return " ".join([str(value.style)] + [str(s.style) for s in value.spans])


def row_keys(table: SnapshotTable) -> list[str]:
    return table.keys
