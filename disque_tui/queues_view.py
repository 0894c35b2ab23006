"""The queues panel: every queue of the cluster merged across nodes, sortable
by any column and filtered by name, with import-rate and throughput
sparklines of the selected queue.

Rendered from a `ClusterSnapshot` only. Enter on a row posts `OpenQueue`;
the app opens the drill-down and owns the pause action.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, Label, Sparkline

from disque_tui import format as fmt
from disque_tui.snapshot import ClusterSnapshot, QueueSnapshot
from disque_tui.table import SnapshotTable

PAUSE_STYLE = {
    "none": "dim",
    "in": "bold yellow",
    "out": "bold yellow",
    "all": "bold red",
    "mixed": "bold magenta",
}

# column key -> (label, sort key); per-node columns are added per snapshot
FIXED_COLUMNS: dict[str, tuple[str, Callable[[QueueSnapshot], Any]]] = {
    "name": ("name", lambda q: q.name),
    "total": ("len", lambda q: q.length),
    "blocked": ("blocked", lambda q: q.blocked),
    "import": ("import/s", lambda q: q.import_rate),
    "from": ("import from", lambda q: len(q.import_from)),
    "in": ("in/s", lambda q: q.in_rate),
    "out": ("out/s", lambda q: q.out_rate),
    "pause": ("pause", lambda q: q.pause),
}
NODE_PREFIX = "node:"
# Rows drawn at most: the table is for reading, the filter and the sort find
# the rest, and redrawing ten thousand rows a second would tax the UI.
MAX_ROWS = 500


class QueuesView(Vertical):
    DEFAULT_CSS = """
    QueuesView #queue-filter { height: 1; border: none; padding: 0 1; margin: 0; }
    QueuesView #queue-filter:focus { background: $boost; }
    QueuesView #queue-info { height: 1; width: 100%; padding: 0 1; }
    QueuesView .queue-graph { height: 1; padding: 0 1; }
    QueuesView .queue-graph Label { width: 12; }
    QueuesView .queue-graph Sparkline { width: 1fr; }
    """

    class OpenQueue(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.snapshot: ClusterSnapshot | None = None
        self.sort_column = "name"
        self.sort_reverse = False
        self.filter_text = ""
        self.max_rows = MAX_ROWS
        self.matching = 0
        self.shown_queues: list[QueueSnapshot] = []

    def compose(self) -> ComposeResult:
        yield Input(placeholder="/ filter queues by name", id="queue-filter")
        yield SnapshotTable(id="queues-table")
        yield Label("", id="queue-info")
        with Horizontal(classes="queue-graph"):
            yield Label("import/s")
            yield Sparkline([], id="queue-import-spark")
        with Horizontal(classes="queue-graph"):
            yield Label("out/s")
            yield Sparkline([], id="queue-out-spark")

    def on_mount(self) -> None:
        self.query_one(Input).cursor_blink = False

    @property
    def table(self) -> SnapshotTable:
        return self.query_one(SnapshotTable)

    # ---- rendering -------------------------------------------------------------
    def columns(self, snapshot: ClusterSnapshot) -> list[tuple[str, str]]:
        cols = [("name", "name"), ("total", "len")]
        cols += [(NODE_PREFIX + n.id, n.id[:6]) for n in snapshot.nodes]
        cols += [
            (k, label) for k, (label, _) in FIXED_COLUMNS.items() if k not in ("name", "total")
        ]
        return cols

    def sort_key(self) -> Callable[[QueueSnapshot], Any]:
        if self.sort_column.startswith(NODE_PREFIX):
            node_id = self.sort_column[len(NODE_PREFIX) :]

            def by_node(q: QueueSnapshot) -> int:
                on = q.on_node(node_id)
                return on.length if on else -1

            return by_node
        return FIXED_COLUMNS.get(self.sort_column, FIXED_COLUMNS["name"])[1]

    def row(self, q: QueueSnapshot, snapshot: ClusterSnapshot) -> list[str | Text]:
        cells: list[str | Text] = [q.name, str(q.length)]
        for node in snapshot.nodes:
            on = q.on_node(node.id)
            if on is None:
                cells.append(Text("-", style="dim"))
            elif on.stale is not None:  # last known, on a node down: stranded
                cells.append(Text(f"{on.length}?", style="dim italic red"))
            else:
                cells.append(str(on.length))
        cells.append(Text(str(q.blocked), style="bold cyan") if q.blocked else "0")
        cells.append(str(q.import_rate))
        cells.append(" ".join(snapshot.short_name(i)[:6] for i in q.import_from) or "-")
        cells.append(fmt.rate(q.in_rate))
        cells.append(fmt.rate(q.out_rate))
        cells.append(Text(q.pause, style=PAUSE_STYLE.get(q.pause, "")))
        return cells

    def show(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        table = self.table
        columns = self.columns(snapshot)
        if self.sort_column not in dict(columns):
            self.sort_column, self.sort_reverse = "name", False
        arrow = " ▼" if self.sort_reverse else " ▲"
        table.set_columns(
            [(k, label + arrow if k == self.sort_column else label) for k, label in columns]
        )
        needle = self.filter_text.lower()
        queues = (
            [q for q in snapshot.queues if needle in q.name.lower()]
            if needle
            else list(snapshot.queues)
        )
        key = self.sort_key()
        queues.sort(key=lambda q: (key(q), q.name), reverse=self.sort_reverse)
        self.matching = len(queues)
        queues = queues[: self.max_rows]
        self.shown_queues = queues
        table.show_rows([(q.name, self.row(q, snapshot)) for q in queues])
        self._show_selected()

    def rerender(self) -> None:
        if self.snapshot is not None:
            self.show(self.snapshot)

    def selected_queue(self) -> QueueSnapshot | None:
        if self.snapshot is None:
            return None
        key = self.table.selected_key
        return self.snapshot.queue(key) if key else None

    def _show_selected(self) -> None:
        q = self.selected_queue()
        info = self.query_one("#queue-info", Label)
        imports = self.query_one("#queue-import-spark", Sparkline)
        out = self.query_one("#queue-out-spark", Sparkline)
        total = len(self.snapshot.queues) if self.snapshot else 0
        shown = f"{len(self.shown_queues)} of {total} queues"
        if self.filter_text:
            shown += f" matching '{self.filter_text}'"
        if self.matching > len(self.shown_queues):
            shown += f", first {self.max_rows} of {self.matching}: filter to narrow"
        if q is None:
            info.update(shown, layout=False)
            imports.data, out.data = [], []
            return
        info.update(
            Text.assemble(
                (q.name, "bold"),
                f"  len {q.length} · import "
                f"{q.import_rate}/s · out {fmt.rate(q.out_rate)}/s · "
                f"pause {q.pause}  ",
                (f"({shown})", "dim"),
            ),
            layout=False,
        )
        import_rates, throughput = self.snapshot.queue_history(q.name)
        imports.data = list(import_rates)
        out.data = list(throughput)

    # ---- sorting and filtering ----------------------------------------------------
    def sort_by(self, column: str | None = None) -> None:
        """Sort by `column` (again: reverse); None cycles to the next column."""
        if self.snapshot is None:
            return
        keys = [k for k, _ in self.columns(self.snapshot)]
        if column is None:
            i = keys.index(self.sort_column) if self.sort_column in keys else -1
            column = keys[(i + 1) % len(keys)]
        elif column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
            self.rerender()
            return
        self.sort_column = column
        # names read best from A, numbers from the largest
        self.sort_reverse = column not in ("name", "pause")
        self.rerender()

    def reverse_sort(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.rerender()

    def focus_filter(self) -> None:
        self.query_one(Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.filter_text = event.value.strip()
        self.rerender()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.table.focus()

    def on_snapshot_table_header_selected(self, event: SnapshotTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(event.column)

    def on_snapshot_table_row_highlighted(self, event: SnapshotTable.RowHighlighted) -> None:
        event.stop()
        self._show_selected()

    def on_snapshot_table_row_selected(self, event: SnapshotTable.RowSelected) -> None:
        event.stop()
        if event.key is not None:
            self.post_message(self.OpenQueue(event.key))
