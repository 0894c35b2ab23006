"""Helpers for driving the dashboard against live clusters with the Pilot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from rich.text import Text
from textual.pilot import Pilot

from disque.tls import TLS
from disque_tui.app import DisqueTUI
from disque_tui.poller import Poller, PollerThread
from disque_tui.table import SnapshotTable

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
    pilot: Pilot, predicate: Callable[[], Any], timeout: float = 10.0, message: str = "condition"
) -> Any:
    """Let the app run until `predicate()` is truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # the app may not have drawn that part yet
            last_exc = exc
        await pilot.pause(0.05)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {message}"
        + (f" (last error: {last_exc!r})" if last_exc else "")
    )


async def wait_in_thread(
    pilot: Pilot, predicate: Callable[[], Any], timeout: float = 10.0, message: str = "condition"
) -> Any:
    """Like wait_until, for predicates that talk to the cluster (blocking calls)."""

    async def check() -> Any:
        try:
            return await asyncio.to_thread(predicate)
        except Exception:
            return None

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await pilot.pause(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


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
