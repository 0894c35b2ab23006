"""The nodes table of the first screen: one row per node of the cluster, and
the selected node in detail (full ID, errors, drain progress when leaving).
A node down keeps its last figures, greyed: they are as of its last poll.

Rendered from a `ClusterSnapshot` only; the "mark leaving" action lives in
the app, which asks this panel which node is selected.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from disque_tui import format as fmt
from disque_tui.snapshot import ClusterSnapshot, NodeSnapshot
from disque_tui.table import SnapshotTable

COLUMNS = [
    ("node", "node"),
    ("address", "address"),
    ("status", "status"),
    ("priority", "pri"),
    ("flags", "flags"),
    ("jobs", "jobs"),
    ("queues", "queues"),
    ("clients", "cli"),
    ("blocked", "blk"),
    ("memory", "mem"),
    ("ops", "ops/s"),
    # C or python: which nodes a rolling upgrade has reached (after the figures,
    # which an 80-column terminal shows first)
    ("server", "server"),
    ("trend", "jobs trend"),
    ("drain", "drain"),
]

STATUS_STYLE = {"up": "green", "slow": "bold yellow", "down": "bold red"}


def status_text(node: NodeSnapshot) -> Text:
    """ "up", or "DOWN 12s ago" / "slow 3s ago" (since the last good poll)."""
    if node.status == "up":
        return Text("up", style="green")
    ago = "never seen" if node.last_seen_ago is None else f"{fmt.duration(node.last_seen_ago)} ago"
    label = "DOWN" if node.status == "down" else node.status
    return Text(f"{label} {ago}", style=STATUS_STYLE[node.status])


def flags_text(node: NodeSnapshot) -> Text:
    if not node.flags:
        return Text("-", style="dim")
    style = "bold red" if node.failing else "bold yellow" if node.leaving else ""
    return Text(",".join(node.flags), style=style)


def drain_text(node: NodeSnapshot) -> Text:
    d = node.drain
    if d is None:
        return Text("")
    eta = fmt.duration(d.eta) if d.eta is not None else "?"
    return Text(f"{d.jobs_left} left {fmt.rate(d.rate)}/s ETA {eta}", style="bold yellow")


# The figures of a node down are its last known ones: greyed, never drawn as live.
STALE_STYLE = "dim italic"


def node_row(node: NodeSnapshot) -> list[str | Text]:
    down = node.status != "up"
    row_style = "red" if node.status == "down" else "yellow" if node.status == "slow" else ""
    if node.leaving and not down:
        row_style = "bold yellow"
    figure_style = STALE_STYLE if node.status == "down" else row_style

    def cell(value: str, style: str = row_style) -> str | Text:
        return Text(value, style=style) if style else value

    def figure(value: str) -> str | Text:
        return cell(value, figure_style)

    priority = fmt.number(node.priority)
    return [
        Text.assemble(("● ", STATUS_STYLE[node.status]), (node.short_id, row_style)),
        cell(node.address),
        status_text(node),
        Text(priority, style="bold red" if (node.priority or 0) >= 10 else row_style),
        flags_text(node),
        figure(fmt.number(node.jobs)),
        figure(fmt.number(node.queues)),
        figure(fmt.number(node.clients)),
        figure(fmt.number(node.blocked)),
        figure(fmt.human_bytes(node.memory)),
        figure(fmt.number(node.ops_per_sec)),
        figure(node.server or "-"),
        Text(
            fmt.spark(node.jobs_history, 12), style="dim cyan" if node.status == "down" else "cyan"
        ),
        drain_text(node),
    ]


def node_detail(node: NodeSnapshot) -> Text:
    out = Text()
    out.append(node.id, style="bold")
    out.append(f"  {node.address}")
    if node.version:
        out.append(f"  disque {node.version}", style="dim")
    if node.server:
        out.append(f" · {fmt.SERVER_NAMES.get(node.server, node.server)}", style="dim")
    out.append("\n")
    if node.status == "up":
        out.append("up", style="bold green")
        if node.latency_ms is not None:
            out.append(f" · polled in {node.latency_ms:.0f} ms")
    else:
        out.append(node.status.upper(), style=STATUS_STYLE[node.status])
        seen = (
            "never seen"
            if node.last_seen_ago is None
            else f"last seen {fmt.duration(node.last_seen_ago)} ago"
        )
        out.append(f" · {seen}")
        if node.error:
            out.append(f" · {node.error}", style="red")
    out.append(f" · priority {fmt.number(node.priority)}")
    out.append(f" · flags {','.join(node.flags) or 'none'}\n")
    if node.status == "down" and node.last_seen_ago is not None:
        out.append(f"as of {fmt.duration(node.last_seen_ago)} ago: ", style=STALE_STYLE)
    out.append(
        f"jobs {fmt.number(node.jobs)} · queues {fmt.number(node.queues)}"
        f" · clients {fmt.number(node.clients)} ({fmt.number(node.blocked)} blocked)"
        f" · memory {fmt.human_bytes(node.memory)} · {fmt.number(node.ops_per_sec)} ops/s"
    )
    if node.drain is not None:
        d = node.drain
        out.append("\nleaving ", style="bold yellow")
        out.append(fmt.bar(d.progress, 20), style="yellow")
        eta = fmt.duration(d.eta) if d.eta is not None else "unknown"
        out.append(
            f" {d.progress:.0%} drained · {d.jobs_left} jobs left"
            f" · {fmt.rate(d.rate)} jobs/s · ETA {eta}"
        )
    return out


class NodesView(Vertical):
    DEFAULT_CSS = """
    NodesView { height: auto; }
    NodesView #nodes-table { height: auto; max-height: 16; }
    NodesView #node-detail { height: auto; max-height: 4; padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.snapshot: ClusterSnapshot | None = None

    def compose(self) -> ComposeResult:
        yield SnapshotTable(id="nodes-table")
        yield Static(id="node-detail")

    def on_mount(self) -> None:
        self.query_one(SnapshotTable).set_columns(COLUMNS)

    class OpenNode(Message):
        """Enter on a node: its clients, slow log, latency and config."""

        def __init__(self, node_id: str, address: str) -> None:
            super().__init__()
            self.node_id = node_id
            self.address = address

    def on_snapshot_table_row_selected(self, event: SnapshotTable.RowSelected) -> None:
        event.stop()
        node = self.selected_node()
        if node is not None:
            self.post_message(self.OpenNode(node.id, node.address))

    @property
    def table(self) -> SnapshotTable:
        return self.query_one(SnapshotTable)

    def show(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.table.show_rows([(n.id, node_row(n)) for n in snapshot.nodes])
        self._show_detail()

    def selected_node(self) -> NodeSnapshot | None:
        if self.snapshot is None:
            return None
        key = self.table.selected_key
        return self.snapshot.node(key) if key else None

    def _show_detail(self) -> None:
        node = self.selected_node()
        detail = self.query_one("#node-detail", Static)
        if node is None:
            detail.update("no node selected")
            return
        detail.update(node_detail(node))

    def on_snapshot_table_row_highlighted(self, event: SnapshotTable.RowHighlighted) -> None:
        event.stop()
        self._show_detail()
