"""`QueueDetailScreen`: one queue drilled down. QSTAT of the queue on every
node (from the live snapshots) and its oldest and newest jobs on every node
(QPEEK, fetched through the app's source when the screen opens or on `r`).
Enter on a job opens `JobDetailScreen`."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label

from disque_tui import format as fmt
from disque_tui.job_detail import JobDetailScreen
from disque_tui.snapshot import ClusterSnapshot, QueuePeek

PEEK_COUNT = 5

STAT_COLUMNS = [
    "node",
    "len",
    "blocked",
    "pause",
    "in/s",
    "out/s",
    "import/s",
    "import from",
    "age",
    "idle",
    "jobs-in",
    "jobs-out",
    "address",
]
JOB_COLUMNS = ["node", "end", "job id", "body"]


class QueueDetailScreen(Screen):
    DEFAULT_CSS = """
    QueueDetailScreen #queue-title { height: 1; padding: 0 1; text-style: bold;
        background: $primary; color: $text; width: 100%; }
    QueueDetailScreen #queue-stats { height: auto; max-height: 8; }
    QueueDetailScreen #peek-status { height: 1; width: 100%; padding: 0 1;
        color: $text-muted; }
    QueueDetailScreen #queue-jobs { height: 1fr; }
    """
    BINDINGS = [
        Binding("escape,backspace", "back", "Back"),
        Binding("r", "reload", "Reload"),
        Binding("enter", "open_job", "Show job", show=True),
    ]

    def __init__(self, queue: str, peek_count: int = PEEK_COUNT) -> None:
        super().__init__()
        self.queue = queue
        self.peek_count = peek_count
        self.peeks: tuple[QueuePeek, ...] = ()
        self.jobs: dict[str, tuple[str, str]] = {}  # row key -> (job id, node id)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Queue {self.queue}", id="queue-title")
            yield DataTable(id="queue-stats", cursor_type="none", show_cursor=False)
            yield Label("fetching QPEEK…", id="peek-status")
            yield DataTable(id="queue-jobs", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#queue-stats", DataTable).add_columns(*STAT_COLUMNS)
        self.query_one("#queue-jobs", DataTable).add_columns(*JOB_COLUMNS)
        snapshot = getattr(self.app, "snapshot", None)
        if snapshot is not None:
            self.show_snapshot(snapshot)
        self.query_one("#queue-jobs", DataTable).focus()
        self.action_reload()

    # ---- live QSTAT ------------------------------------------------------------
    def show_snapshot(self, snapshot: ClusterSnapshot) -> None:
        table = self.query_one("#queue-stats", DataTable)
        q = snapshot.queue(self.queue)
        table.clear()
        title = self.query_one("#queue-title", Label)
        if q is None:
            title.update(f"Queue {self.queue} (not on any reachable node)")
            return
        title.update(
            f"Queue {q.name} · len {q.length} · blocked {q.blocked} · import "
            f"{q.import_rate}/s · in {fmt.rate(q.in_rate)}/s · out "
            f"{fmt.rate(q.out_rate)}/s · pause {q.pause}"
        )
        for on in q.per_node:
            node = snapshot.node(on.node_id)
            table.add_row(
                snapshot.short_name(on.node_id),
                str(on.length),
                str(on.blocked),
                on.pause,
                fmt.rate(on.in_rate),
                fmt.rate(on.out_rate),
                str(on.import_rate),
                " ".join(snapshot.short_name(i) for i in on.import_from) or "-",
                fmt.duration(on.age),
                fmt.duration(on.idle),
                str(on.jobs_in),
                str(on.jobs_out),
                node.address if node else "?",
            )

    # ---- QPEEK ------------------------------------------------------------------
    def action_reload(self) -> None:
        self.query_one("#peek-status", Label).update("fetching QPEEK…")
        self.run_worker(self._load(), exclusive=True, group="peek")

    async def _load(self) -> None:
        try:
            peeks = await self.app.source.qpeek(self.queue, self.peek_count)
        except Exception as exc:  # shown, never raised into the UI
            self.query_one("#peek-status", Label).update(Text(f"QPEEK failed: {exc}", style="red"))
            return
        self.show_peeks(peeks)

    def show_peeks(self, peeks: tuple[QueuePeek, ...]) -> None:
        self.peeks = peeks
        snapshot: ClusterSnapshot | None = getattr(self.app, "snapshot", None)
        table = self.query_one("#queue-jobs", DataTable)
        table.clear()
        self.jobs = {}
        total = 0
        for peek in peeks:
            name = snapshot.short_name(peek.node_id) if snapshot else peek.node_id[:8]
            if peek.error:
                table.add_row(name, "", Text(peek.error, style="red"), "")
                continue
            rows = [("oldest", i, j) for i, j in enumerate(peek.oldest, 1)]
            oldest_ids = {j.id for j in peek.oldest}
            rows += [
                ("newest", i, j) for i, j in enumerate(peek.newest, 1) if j.id not in oldest_ids
            ]
            if not rows:
                table.add_row(name, "", Text("empty", style="dim"), "")
            for end, i, job in rows:
                key = f"{peek.node_id}:{end}:{i}"
                self.jobs[key] = (job.id, peek.node_id)
                table.add_row(name, f"{end} {i}", job.id, fmt.preview(job.body, 40), key=key)
                total += 1
        self.query_one("#peek-status", Label).update(
            f"oldest and newest {self.peek_count} jobs on each node (QPEEK): {total} shown"
            " · enter: SHOW"
        )

    def action_open_job(self) -> None:
        table = self.query_one("#queue-jobs", DataTable)
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if key in self.jobs:
            job_id, node_id = self.jobs[key]
            self.app.push_screen(JobDetailScreen(job_id, prefer_node=node_id))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_job()

    def action_back(self) -> None:
        self.dismiss()
