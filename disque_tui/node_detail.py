"""`NodeDetailScreen`: one node drilled down (enter on a node): its clients
(CLIENT LIST), slow log (SLOWLOG GET), latency events (LATENCY LATEST) and
configuration (CONFIG GET *), a tab each, fetched through the app's source
when the screen opens and on `r`: what dolphie and k9s users reach for on one
server."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, TabbedContent, TabPane

from disque_tui.snapshot import NodeViews

CLIENT_COLUMNS = ["id", "addr", "name", "age", "idle", "flags", "cmd", "qbuf", "omem"]
SLOWLOG_COLUMNS = ["id", "when", "µs", "command"]
LATENCY_COLUMNS = ["event", "when", "last ms", "max ms"]
CONFIG_COLUMNS = ["directive", "value"]
TABLES = (
    ("clients", "Clients", CLIENT_COLUMNS),
    ("slowlog", "Slow log", SLOWLOG_COLUMNS),
    ("latency", "Latency", LATENCY_COLUMNS),
    ("config", "Config", CONFIG_COLUMNS),
)


def clock(unix: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(unix)) if unix else "-"


class NodeDetailScreen(Screen):
    DEFAULT_CSS = """
    NodeDetailScreen #node-title { height: 1; padding: 0 1; text-style: bold;
        background: $primary; color: $text; width: 100%; }
    NodeDetailScreen #node-status { height: 1; width: 100%; padding: 0 1;
        color: $text-muted; }
    NodeDetailScreen DataTable { height: 1fr; }
    """
    BINDINGS = [
        Binding("escape,backspace", "back", "Back"),
        Binding("r", "reload", "Reload"),
    ]

    def __init__(self, node_id: str, address: str = "") -> None:
        super().__init__()
        self.node_id = node_id
        self.address = address
        self.views: NodeViews | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Node {self.node_id[:8]} {self.address}", id="node-title")
            yield Label("fetching…", id="node-status")
            with TabbedContent(initial="clients"):
                for key, title, _ in TABLES:
                    with TabPane(title, id=key):
                        yield DataTable(id=f"node-{key}", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        for key, _, columns in TABLES:
            self.query_one(f"#node-{key}", DataTable).add_columns(*columns)
        self.action_reload()

    def action_reload(self) -> None:
        self.query_one("#node-status", Label).update("fetching…")
        self.run_worker(self._load(), exclusive=True, group="node-views")

    async def _load(self) -> None:
        try:
            views = await self.app.source.node_views(self.node_id)
        except Exception as exc:  # shown, never raised into the UI
            self.query_one("#node-status", Label).update(Text(f"failed: {exc}", style="red"))
            return
        self.show_views(views)

    def show_views(self, views: NodeViews) -> None:
        self.views = views
        status = self.query_one("#node-status", Label)
        if views.error:
            status.update(Text(f"{views.address}: {views.error}", style="red"))
            return
        self.fill(
            "clients",
            [[c.get(column, "") for column in CLIENT_COLUMNS] for c in views.clients],
        )
        self.fill(
            "slowlog",
            [[str(i), clock(at), f"{us:,}", command] for i, at, us, command in views.slowlog],
        )
        self.fill(
            "latency",
            [[event, clock(at), str(last), str(most)] for event, at, last, most in views.latency],
        )
        self.fill("config", [[name, value] for name, value in views.config])
        status.update(
            f"{len(views.clients)} clients · {len(views.slowlog)} slow log entries · "
            f"{len(views.latency)} latency events · {len(views.config)} directives · r: reload"
        )

    def fill(self, key: str, rows: list[list[str]]) -> None:
        table = self.query_one(f"#node-{key}", DataTable)
        table.clear()
        for row in rows:
            table.add_row(*row)

    def action_back(self) -> None:
        self.dismiss()
