"""The first screen: what needs attention, on one screen.

From the top: a strip naming every problem (nodes down, PFAIL or FAIL, a node
leaving with its drain ETA, jobs stranded on a dead node, queues not
draining), the nodes, then the queues that matter, problems first, with
length, oldest job's age, rates and blocked clients. The Queues panel keeps
the full list. Rendered from a `ClusterSnapshot` only (see incident.py).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Label, Static

from disque_tui import format as fmt
from disque_tui.incident import problems, queue_issue, queues_that_matter
from disque_tui.nodes_view import STALE_STYLE, NodesView
from disque_tui.queues_view import PAUSE_STYLE
from disque_tui.snapshot import ClusterSnapshot, QueueSnapshot
from disque_tui.table import SnapshotTable

WATCH_COLUMNS = [
    ("name", "queue"),
    ("problem", "problem"),
    ("total", "len"),
    ("oldest", "oldest job"),
    ("in", "in/s"),
    ("out", "out/s"),
    ("import", "import/s"),
    ("blocked", "blocked"),
    ("where", "on nodes"),
    ("pause", "pause"),
]


def problem_strip(snapshot: ClusterSnapshot, lines: int = 8) -> Text:
    """One line per problem, errors first; past `lines`, the count of the rest."""
    found = problems(snapshot)
    if not found:
        return Text("✔ no problem: every node up, no queue stranded or stuck", style="bold green")
    shown = found if len(found) <= lines else found[: max(1, lines - 1)]
    out = Text()
    for i, problem in enumerate(shown):
        if i:
            out.append("\n")
        error = problem.severity == "error"
        out.append("✖ " if error else "▲ ", style="bold red" if error else "bold yellow")
        out.append(problem.text, style="red" if error else "yellow")
    if len(shown) < len(found):
        out.append(
            f"\n… and {len(found) - len(shown)} more (a taller terminal, or "
            "disque-tui --once, shows them all)",
            style="dim",
        )
    return out


def where_text(q: QueueSnapshot, snapshot: ClusterSnapshot) -> Text:
    """`5b5ace28:1100 78e24da1:300`, a down node's share greyed with its age."""
    out = Text()
    for on in q.per_node:
        if not on.length:
            continue
        if out:
            out.append(" ")
        name = snapshot.short_name(on.node_id)
        if on.stale is None:
            out.append(f"{name}:{on.length}")
        else:
            out.append(
                f"{name}:{on.length} (down, as of {fmt.duration(on.stale)} ago)",
                style=STALE_STYLE + " red",
            )
    return out or Text("-", style="dim")


def watch_row(q: QueueSnapshot, snapshot: ClusterSnapshot) -> list[str | Text]:
    issue = queue_issue(q)
    severity = "bold red" if q.stranded else "bold yellow" if issue else "dim"
    return [
        Text(q.name, style="bold" if issue else ""),
        Text(issue or "-", style=severity),
        str(q.length),
        fmt.duration(q.oldest),
        fmt.rate(q.in_rate),
        Text(fmt.rate(q.out_rate), style="bold yellow" if q.not_draining else ""),
        str(q.import_rate),
        Text(str(q.blocked), style="bold cyan") if q.blocked else "0",
        where_text(q, snapshot),
        Text(q.pause, style=PAUSE_STYLE.get(q.pause, "")),
    ]


class IncidentView(Vertical):
    DEFAULT_CSS = """
    IncidentView #problems { height: auto; padding: 0 1; }
    IncidentView #nodes-table { scrollbar-size-horizontal: 0; }
    IncidentView #watch-title { height: 1; width: 100%; padding: 0 1; background: $panel;
                                text-style: bold; }
    IncidentView #watch-table { height: 1fr; }
    """

    class OpenQueue(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def compose(self) -> ComposeResult:
        yield Static(id="problems")
        yield NodesView(id="nodes-view")
        yield Label("", id="watch-title")
        yield SnapshotTable(id="watch-table")

    def on_mount(self) -> None:
        self.watch_table.set_columns(WATCH_COLUMNS)

    @property
    def watch_table(self) -> SnapshotTable:
        return self.query_one("#watch-table", SnapshotTable)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.snapshot: ClusterSnapshot | None = None

    def show(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        # A fifth of the height for problems: the nodes and queues must show too.
        lines = max(3, self.size.height // 5) if self.size.height else 8
        self.query_one("#problems", Static).update(problem_strip(snapshot, lines))
        self.query_one(NodesView).show(snapshot)
        watched = queues_that_matter(snapshot)
        self.query_one("#watch-title", Label).update(
            f"Queues that matter: {len(watched)} of {len(snapshot.queues)}, problems first "
            "(all of them: 2)"
        )
        self.watch_table.show_rows([(q.name, watch_row(q, snapshot)) for q in watched])

    def selected_queue(self) -> QueueSnapshot | None:
        """The queue under the cursor of the queues that matter (for `p`)."""
        key = self.watch_table.selected_key
        return self.snapshot.queue(key) if key and self.snapshot else None

    def on_snapshot_table_row_selected(self, event: SnapshotTable.RowSelected) -> None:
        if event.table is self.watch_table and event.key is not None:
            event.stop()
            self.post_message(self.OpenQueue(event.key))
