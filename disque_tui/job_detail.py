"""`JobDetailScreen`: SHOW of one job in full (state, nacks, additional
deliveries, owners, timers, body preview) as the preferred node knows it,
and the job's state on every other reachable node."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Label, Static

from disque_tui import format as fmt
from disque_tui.snapshot import ClusterSnapshot, JobShow

BODY_LIMIT = 2000


def owner_names(ids: list[str], snapshot: ClusterSnapshot | None) -> str:
    if not ids:
        return "-"
    out = []
    for node_id in ids:
        node = snapshot.node(node_id) if snapshot else None
        out.append(f"{node_id[:8]} ({node.address})" if node else node_id[:8])
    return ", ".join(out)


def field_value(key: str, value: Any, snapshot: ClusterSnapshot | None) -> str:
    if value is None:
        return "(nil)"
    if key in ("nodes-delivered", "nodes-confirmed"):
        return owner_names(list(value), snapshot)
    if key == "ctime" and isinstance(value, int):
        seconds = value / 1e9
        return f"{value} ({time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(seconds))})"
    if key in ("ttl", "delay", "retry"):
        return f"{value} s"
    if key in ("next-requeue-within", "next-awake-within") and isinstance(value, int):
        return f"{value} ms ({fmt.duration(value / 1000)})"
    return str(value)


def render_show(
    primary: JobShow, shows: tuple[JobShow, ...], snapshot: ClusterSnapshot | None
) -> Group:
    fields = primary.fields or {}
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    state_style = {"queued": "green", "active": "yellow", "acked": "dim"}
    for key, raw in fields.items():  # in SHOW's own order, as the node gave them
        if key != "body":
            value = field_value(key, raw, snapshot)
            table.add_row(
                key, Text(value, style=state_style.get(value, "") if key == "state" else "")
            )
    body = fields.get("body")
    size = len(body) if isinstance(body, bytes | str) else 0
    table.add_row("body", Text(f"{size} bytes", style="dim"))
    nodes = Table(
        title="on each node",
        title_justify="left",
        title_style="bold",
        show_edge=False,
        pad_edge=False,
    )
    for col in ("node", "address", "state", "nacks", "add. deliveries"):
        nodes.add_column(col)
    for show in shows:
        name = show.node_id[:8]
        if show.error:
            nodes.add_row(name, show.address, Text(show.error, style="red"), "", "")
        elif show.fields is None:
            nodes.add_row(name, show.address, Text("not known", style="dim"), "", "")
        else:
            f = show.fields
            nodes.add_row(
                name + (" *" if show is primary else ""),
                show.address,
                str(f.get("state")),
                str(f.get("nacks")),
                str(f.get("additional-deliveries")),
            )
    preview = Text(fmt.preview(body, BODY_LIMIT) if body is not None else "(nil)")
    return Group(table, Text(""), Text("body preview", style="bold"), preview, Text(""), nodes)


def pick_primary(shows: tuple[JobShow, ...], prefer_node: str | None) -> JobShow | None:
    known = [s for s in shows if s.fields]
    for s in known:
        if s.node_id == prefer_node:
            return s
    for s in known:
        if s.fields and s.fields.get("state") == "queued":
            return s
    return known[0] if known else None


class JobDetailScreen(Screen):
    DEFAULT_CSS = """
    JobDetailScreen #job-title { height: 1; padding: 0 1; text-style: bold;
        background: $primary; color: $text; width: 100%; }
    JobDetailScreen #job-status { height: 1; width: 100%; padding: 0 1; color: $text-muted; }
    JobDetailScreen VerticalScroll { height: 1fr; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape,backspace", "back", "Back"),
        Binding("r", "reload", "Reload"),
    ]

    def __init__(self, job_id: str, prefer_node: str | None = None) -> None:
        super().__init__()
        self.job_id = job_id
        self.prefer_node = prefer_node
        self.shows: tuple[JobShow, ...] = ()

    def compose(self) -> ComposeResult:
        yield Label(f"Job {self.job_id}", id="job-title")
        yield Label("fetching SHOW…", id="job-status")
        with VerticalScroll():
            yield Static(id="job-fields")
        yield Footer()

    def on_mount(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        self.query_one("#job-status", Label).update("fetching SHOW…")
        self.run_worker(self._load(), exclusive=True, group="show")

    async def _load(self) -> None:
        try:
            shows = await self.app.source.show(self.job_id)
        except Exception as exc:  # shown, never raised into the UI
            self.query_one("#job-status", Label).update(Text(f"SHOW failed: {exc}", style="red"))
            return
        self.show_job(shows)

    def show_job(self, shows: tuple[JobShow, ...]) -> None:
        self.shows = shows
        primary = pick_primary(shows, self.prefer_node)
        status = self.query_one("#job-status", Label)
        body = self.query_one("#job-fields", Static)
        if primary is None:
            status.update(
                Text(
                    "no reachable node knows this job (acked, expired or never existed)",
                    style="yellow",
                )
            )
            body.update("")
            return
        status.update(
            f"SHOW from {primary.node_id[:8]} ({primary.address}) · known on "
            f"{sum(1 for s in shows if s.fields)} of {len(shows)} nodes"
        )
        body.update(render_show(primary, shows, getattr(self.app, "snapshot", None)))

    def action_back(self) -> None:
        self.dismiss()
