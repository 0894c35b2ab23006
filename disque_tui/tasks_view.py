"""The Tasks tab: each task's calls in the cluster (disque.tasks.census), queued,
running, failed at least once, and dead-lettered, by task name. Counting them
means reading the jobs' bodies, so the nodes' jobs are scanned with their
bodies only while this tab is shown (every 10 s, as the scan for jobs in no
queue), never for a node holding more than 100,000 jobs."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label

from disque_tui.snapshot import ClusterSnapshot
from disque_tui.table import SnapshotTable

TASK_COLUMNS = [
    ("task", "task"),
    ("queues", "queues"),
    ("queued", "queued"),
    ("running", "running"),
    ("failed", "failed ≥1"),
    ("dead", "dead"),
]


class TasksView(Vertical):
    DEFAULT_CSS = """
    TasksView #tasks-info { height: 1; padding: 0 1; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield Label("", id="tasks-info")
        yield SnapshotTable(id="tasks-table")

    def on_mount(self) -> None:
        self.query_one(SnapshotTable).set_columns(TASK_COLUMNS)

    def show(self, snapshot: ClusterSnapshot) -> None:
        census = snapshot.tasks
        rows: list[tuple[str, list[str | Text]]] = []
        for tally in census.tasks:
            rows.append(
                (
                    tally.task,
                    [
                        tally.task,
                        ", ".join(sorted(tally.queues)),
                        str(tally.queued),
                        str(tally.running),
                        Text(str(tally.failed), style="yellow" if tally.failed else ""),
                        Text(str(tally.dead), style="bold red" if tally.dead else ""),
                    ],
                )
            )
        self.query_one(SnapshotTable).show_rows(rows)
        self.query_one("#tasks-info", Label).update(info_line(snapshot))


def info_line(snapshot: ClusterSnapshot) -> str:
    census = snapshot.tasks
    if not census.scanned:
        return "scanning the nodes' jobs for task calls…"
    calls = sum(t.queued + t.running for t in census.tasks)
    line = f"{len(census.tasks)} tasks, {calls} calls in the cluster (scanned every 10 s)"
    if census.left_out:
        line += f"; not counted: {', '.join(census.left_out)} (too many jobs, or not scanned yet)"
    return line
