"""`HelpScreen`: every key binding of the dashboard, by panel (`?`)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "Everywhere",
        [
            ("1 / 2 / 3 / 4", "overview / all the queues / events timeline / tasks"),
            ("tab", "next widget (nodes, queues that matter, ...)"),
            ("r", "poll now"),
            ("ctrl+p", "command palette (Screenshot saves an SVG)"),
            ("?", "this help"),
            ("q, ctrl+c", "quit"),
        ],
    ),
    (
        "Overview",
        [
            ("↑ ↓", "select a node (its details below the table)"),
            ("enter", "on a node: its clients, slow log, latency and config"),
            ("l", "mark the node leaving / not leaving (CLUSTER LEAVING)"),
            ("enter", "in the queues that matter: open the queue"),
            ("p", "in the queues that matter: pause or resume the queue"),
        ],
    ),
    (
        "Queues",
        [
            ("enter", "open the queue: oldest and newest jobs on each node"),
            ("/", "filter by name (enter or esc returns to the table)"),
            ("s / S", "sort by the next column / reverse; or click a header"),
            ("p", "pause or resume the queue: in, out, all, none (PAUSE ... BCAST)"),
        ],
    ),
    (
        "Node, queue and job details",
        [
            ("enter", "show the job under the cursor (SHOW)"),
            ("r", "fetch again"),
            ("esc, backspace", "back"),
        ],
    ),
]


def help_table() -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for section, keys in KEYS:
        table.add_row(Text(section, style="bold underline"), "")
        for key, what in keys:
            table.add_row(key, what)
        table.add_row("", "")
    return table


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 80; max-width: 95%; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 2;
    }
    """
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = "disque-tui keys"
            yield Static(help_table())

    def action_close(self) -> None:
        self.dismiss(None)
