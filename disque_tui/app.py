"""`DisqueTUI`: the dashboard application.

It gets snapshots from a `SnapshotSource` (the live `PollerThread`, or a
fixed snapshot in tests), keeps the latest one, and redraws the panel on
screen from it; it never talks to the network itself. Actions that change
the cluster (pause a queue, mark a node leaving) go through `ConfirmScreen`
and then to the source.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from rich.markup import escape
from rich.text import Text
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, TabbedContent, TabPane

from disque_tui.confirm import ConfirmScreen
from disque_tui.events import EventLog
from disque_tui.events_view import EventsView
from disque_tui.help_screen import HelpScreen
from disque_tui.incident import summary
from disque_tui.incident_view import IncidentView
from disque_tui.node_detail import NodeDetailScreen
from disque_tui.nodes_view import NodesView
from disque_tui.queue_detail import QueueDetailScreen
from disque_tui.queues_view import QueuesView
from disque_tui.snapshot import ClusterSnapshot, JobShow, NodeViews, QueuePeek
from disque_tui.tasks_view import TasksView


class SnapshotSource(Protocol):
    """Where the app's data comes from, and where its actions go."""

    def start(self, on_snapshot: Callable[[ClusterSnapshot], None]) -> None: ...
    def stop(self) -> None: ...
    def refresh_now(self) -> None: ...
    async def qpeek(self, queue: str, count: int = 5) -> tuple[QueuePeek, ...]: ...
    async def show(self, job_id: str) -> tuple[JobShow, ...]: ...
    async def node_views(self, node_id: str) -> NodeViews: ...
    async def pause(self, queue: str, state: str, bcast: bool = True) -> str: ...
    async def set_leaving(self, node_id: str, leaving: bool) -> str: ...
    def want_tasks(self, wanted: bool) -> None: ...


PAUSE_CHOICES = [("in", "in", "i"), ("out", "out", "o"), ("all", "all", "a"), ("none", "none", "n")]


def status_line(snapshot: ClusterSnapshot | None, seed: str) -> Text:
    out = Text()
    out.append("disque-tui", style="bold")
    if snapshot is None:
        out.append(f" {seed} │ ")
        out.append("connecting…", style="yellow")
        return out
    down = len(snapshot.nodes) - snapshot.nodes_up
    out.append(f" {snapshot.seed} │ ")
    nodes, rest = summary(snapshot).split(" │ ", 1)
    out.append(nodes, style="bold red" if down else "bold green")
    when = time.strftime("%H:%M:%S", time.localtime(snapshot.taken_at))
    if snapshot.error:
        out.append(f" │ {snapshot.error}", style="bold red")
    # Job copies: registered_jobs counts a job once per node holding it; queued
    # jobs are unique (a job is queued on one node at a time).
    out.append(f" │ {rest} │ poll {snapshot.poll_ms:.0f}ms │ {when}")
    return out


class DisqueTUI(App):
    TITLE = "disque-tui"
    CSS = """
    #status { height: 1; width: 100%; padding: 0 1; background: $panel; }
    TabbedContent { height: 1fr; }
    TabPane { padding: 0; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("1", "show_tab('overview')", "Overview"),
        Binding("2", "show_tab('queues')", "Queues"),
        Binding("3", "show_tab('events')", "Events"),
        Binding("4", "show_tab('tasks')", "Tasks"),
        Binding("r", "refresh", "Refresh"),
        Binding("l", "toggle_leaving", "Leaving"),
        Binding("p", "pause_queue", "Pause"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("s", "sort", "Sort"),
        Binding("S", "reverse_sort", "Reverse", show=False),
        Binding("escape", "unfocus_filter", show=False),
    ]

    class SnapshotReady(Message):
        """The source has a new snapshot (posted from the poller thread)."""

    def __init__(
        self, source: SnapshotSource, seed: str = "", screenshot_dir: str | None = None, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.seed = seed
        self.screenshot_dir = screenshot_dir
        self.snapshot: ClusterSnapshot | None = None
        self._latest: ClusterSnapshot | None = None
        self._latest_lock = threading.Lock()
        self.snapshots_seen = 0
        self.events = EventLog()  # fed every snapshot, on screen or not
        self._exit_requested = False

    # ---- layout ------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Label(status_line(None, self.seed), id="status")
        with TabbedContent(initial="overview"):
            with TabPane("Overview [1]", id="overview"):
                yield IncidentView(id="incident-view")
            with TabPane("Queues [2]", id="queues"):
                yield QueuesView(id="queues-view")
            with TabPane("Events [3]", id="events"):
                yield EventsView(id="events-view")
            with TabPane("Tasks [4]", id="tasks"):
                yield TasksView(id="tasks-view")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#nodes-table").focus()
        self.source.start(self._receive)

    def on_unmount(self) -> None:
        self.source.stop()

    async def action_quit(self) -> None:
        self._exit_requested = True
        self.exit()

    # The panels live on the main screen; App.query_one would search the screen
    # on top (a dialog, a drill-down), so they are found from the bottom one.
    @property
    def main_screen(self) -> Screen:
        return self.screen_stack[0]

    @property
    def nodes_view(self) -> NodesView:
        return self.main_screen.query_one(NodesView)

    @property
    def incident_view(self) -> IncidentView:
        return self.main_screen.query_one(IncidentView)

    @property
    def queues_view(self) -> QueuesView:
        return self.main_screen.query_one(QueuesView)

    @property
    def active_tab(self) -> str:
        return self.main_screen.query_one(TabbedContent).active

    # ---- snapshots -------------------------------------------------------------
    def _receive(self, snapshot: ClusterSnapshot) -> None:
        """Called on the source's thread: keep only the latest, wake the UI once.
        A UI slower than the poller skips snapshots instead of queueing them."""
        with self._latest_lock:
            pending = self._latest is not None
            self._latest = snapshot
        if not pending:
            self.post_message(self.SnapshotReady())

    def on_disque_tui_snapshot_ready(self, _: SnapshotReady) -> None:
        with self._latest_lock:
            snapshot, self._latest = self._latest, None
        if snapshot is None or not self.screen_stack or self._exit_requested:
            return
        try:
            self.apply_snapshot(snapshot)
        except NoMatches:  # the app is tearing its screens down
            pass

    def apply_snapshot(self, snapshot: ClusterSnapshot) -> None:
        """Redraw what is on screen from `snapshot` (hidden panels wait for their tab)."""
        self.snapshot = snapshot
        self.snapshots_seen += 1
        self.events.feed(snapshot)
        # fixed-size line: no need to lay the screen out again
        self.main_screen.query_one("#status", Label).update(
            status_line(snapshot, self.seed), layout=False
        )
        self._render_active()
        for screen in self.screen_stack[1:]:
            show = getattr(screen, "show_snapshot", None)
            if show is not None:
                show(snapshot)

    def _render_active(self) -> None:
        if self.snapshot is None:
            return
        if self.active_tab == "queues":
            self.queues_view.show(self.snapshot)
        elif self.active_tab == "events":
            self.main_screen.query_one(EventsView).show(self.events)
        elif self.active_tab == "tasks":
            self.main_screen.query_one(TasksView).show(self.snapshot)
        else:
            self.incident_view.show(self.snapshot)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.source.want_tasks(self.active_tab == "tasks")
        self._render_active()
        table = {"queues": "#queues-table", "events": "#events-table", "tasks": "#tasks-table"}.get(
            self.active_tab, "#nodes-table"
        )
        self.main_screen.query_one(table).focus()
        self.refresh_bindings()

    # ---- bindings shown where they apply ---------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        on_main = len(self.screen_stack) == 1
        if action == "toggle_leaving":
            return on_main and self.active_tab == "overview"
        if action == "pause_queue":
            return on_main
        if action in ("filter", "sort", "reverse_sort"):
            return on_main and self.active_tab == "queues"
        if action in ("show_tab", "refresh"):
            return on_main
        return True

    # ---- actions --------------------------------------------------------------------
    def action_show_tab(self, tab: str) -> None:
        self.main_screen.query_one(TabbedContent).active = tab

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_refresh(self) -> None:
        self.source.refresh_now()

    def action_filter(self) -> None:
        self.queues_view.focus_filter()

    def action_unfocus_filter(self) -> None:
        if isinstance(self.focused, Input):
            self.queues_view.table.focus()

    def action_sort(self) -> None:
        self.queues_view.sort_by(None)

    def action_reverse_sort(self) -> None:
        self.queues_view.reverse_sort()

    def on_queues_view_open_queue(self, message: QueuesView.OpenQueue) -> None:
        self.open_queue(message.name)

    def on_incident_view_open_queue(self, message: IncidentView.OpenQueue) -> None:
        self.open_queue(message.name)

    def open_queue(self, name: str) -> None:
        self.push_screen(QueueDetailScreen(name))

    def on_nodes_view_open_node(self, message: NodesView.OpenNode) -> None:
        self.push_screen(NodeDetailScreen(message.node_id, message.address))

    def action_pause_queue(self) -> None:
        queue = (
            self.queues_view.selected_queue()
            if self.active_tab == "queues"
            else self.incident_view.selected_queue()
        )
        if queue is None:
            self.notify("no queue selected", severity="warning")
            return
        self.confirm_pause(queue.name, queue.pause)

    def confirm_pause(self, name: str, current: str = "none") -> None:
        q = escape(name)
        question = (
            f"Queue [b]{q}[/b] is paused: [b]{current}[/b].\n"
            f"Pause it in (no ADDJOB), out (no GETJOB), all, or none (resume)\n"
            f"on every node: PAUSE {q} <state> BCAST"
        )

        def done(state: str | None) -> None:
            if state:
                self.run_worker(self._pause(name, state), group="action")

        self.push_screen(ConfirmScreen("Pause queue", question, PAUSE_CHOICES), done)

    async def _pause(self, name: str, state: str) -> None:
        try:
            reply = await self.source.pause(name, state, True)
        except Exception as exc:  # reported, never raised into the UI
            self.notify(f"PAUSE {name} {state} failed: {exc}", severity="error")
            return
        self.notify(f"queue {name}: pause {reply} (broadcast)")
        self.source.refresh_now()

    def action_toggle_leaving(self) -> None:
        node = self.nodes_view.selected_node()
        if node is None:
            self.notify("no node selected", severity="warning")
            return
        self.confirm_leaving(node.id, node.address, not node.leaving)

    def confirm_leaving(self, node_id: str, address: str, leaving: bool) -> None:
        verb = "leaving" if leaving else "not leaving"
        explain = (
            "It will stop accepting jobs and hand its jobs to other nodes."
            if leaving
            else "It will accept jobs again."
        )
        question = (
            f"Mark node [b]{node_id[:8]}[/b] ({address}) as [b]{verb}[/b]?\n{explain}\n"
            f"(CLUSTER LEAVING {'yes' if leaving else 'no'})"
        )

        def done(answer: str | None) -> None:
            if answer == "yes":
                self.run_worker(self._set_leaving(node_id, leaving), group="action")

        self.push_screen(
            ConfirmScreen("Cluster leaving", question, [("yes", f"Mark {verb}", "y")]), done
        )

    async def _set_leaving(self, node_id: str, leaving: bool) -> None:
        try:
            await self.source.set_leaving(node_id, leaving)
        except Exception as exc:  # reported, never raised into the UI
            self.notify(f"CLUSTER LEAVING failed: {exc}", severity="error")
            return
        self.notify(f"node {node_id[:8]} marked {'leaving' if leaving else 'not leaving'}")
        self.source.refresh_now()

    # ---- screenshots ----------------------------------------------------------------
    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """The palette's Screenshot: an SVG in --screenshot-dir (default: the current
        directory), saved at once; the notice says where, or why not."""
        directory = Path(path or self.screenshot_dir or ".").expanduser()
        try:
            saved = self.save_screenshot(filename, str(directory), time_format)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            self.notify(
                f"Screenshot not saved in {directory.resolve()}: {reason}",
                title="Screenshot",
                severity="error",
                timeout=10,
            )
            return None
        self.notify(f"Screenshot saved to {Path(saved).resolve()}", title="Screenshot", timeout=10)
        return saved

    # ---- command palette ----------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Overview",
            "Show the problems, the nodes and the queues that matter",
            lambda: self.action_show_tab("overview"),
        )
        yield SystemCommand(
            "Queues", "Show the queues panel", lambda: self.action_show_tab("queues")
        )
        yield SystemCommand("Refresh", "Poll every node now", self.action_refresh)
        yield SystemCommand("Help", "Show the key bindings", self.action_help)
        snapshot = self.snapshot
        if snapshot is None:
            return
        for node in snapshot.nodes:
            leaving = not node.leaving
            yield SystemCommand(
                f"{'Mark leaving' if leaving else 'Mark not leaving'}: {node.short_id} "
                f"{node.address}",
                "CLUSTER LEAVING on that node (asks first)",
                lambda n=node, lv=leaving: self.confirm_leaving(n.id, n.address, lv),
            )
        for q in snapshot.queues[:200]:
            yield SystemCommand(
                f"Open queue: {q.name}",
                f"len {q.length}, pause {q.pause}",
                lambda name=q.name: self.open_queue(name),
            )
            yield SystemCommand(
                f"Pause queue: {q.name}",
                "PAUSE ... BCAST (asks first)",
                lambda name=q.name, cur=q.pause: self.confirm_pause(name, cur),
            )
