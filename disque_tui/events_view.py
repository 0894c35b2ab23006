"""The Events tab: the timeline of what changed in the cluster (events.py),
newest first: nodes down or up, flagged PFAIL or FAIL, leaving, joined or
forgotten, upgraded to another server; queues paused or resumed."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label

from disque_tui.events import EventLog
from disque_tui.table import SnapshotTable

EVENT_COLUMNS = [("when", "time"), ("what", "event")]
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": ""}
MARK = {"error": "✖ ", "warning": "▲ ", "info": "· "}


class EventsView(Vertical):
    DEFAULT_CSS = """
    EventsView #events-info { height: 1; padding: 0 1; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield Label("", id="events-info")
        yield SnapshotTable(id="events-table")

    def on_mount(self) -> None:
        self.query_one(SnapshotTable).set_columns(EVENT_COLUMNS)

    def show(self, log: EventLog) -> None:
        rows = []
        for n, event in enumerate(log):
            when = time.strftime("%H:%M:%S", time.localtime(event.at))
            text = Text(MARK[event.severity] + event.text, style=SEVERITY_STYLE[event.severity])
            rows.append((str(len(log) - n), [when, text]))
        self.query_one(SnapshotTable).show_rows(rows)
        self.query_one("#events-info", Label).update(
            f"{len(log)} events since disque-tui started (newest first)"
        )
