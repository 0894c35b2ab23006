"""The events timeline: what changed between two snapshots, kept as a log.

Pure (no Textual, no I/O): `changes(before, after)` names what happened between
two consecutive snapshots: a node down or back, flagged PFAIL or FAIL or
cleared, leaving or no longer, joined or forgotten, now running another
server (the progress of a rolling upgrade), a queue paused or resumed.
`EventLog` keeps the last `EVENTS_KEPT`, newest first, as `disque-tui`
receives snapshots, whether or not the Events tab is on screen.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from disque_tui import format as fmt
from disque_tui.snapshot import ClusterSnapshot, NodeSnapshot

EVENTS_KEPT = 1000


@dataclass(frozen=True, slots=True)
class Event:
    at: float  # wall clock (epoch seconds) of the snapshot that showed it
    severity: str  # "error" | "warning" | "info"
    text: str


def node_name(node: NodeSnapshot) -> str:
    return f"node {node.short_id} {node.address}"


def node_changes(before: NodeSnapshot, after: NodeSnapshot) -> Iterator[tuple[str, str]]:
    name = node_name(after)
    if before.status != "down" and after.status == "down":
        why = f": {after.error}" if after.error else ""
        yield "error", f"{name} down{why}"
    elif before.status == "down" and after.status != "down":
        yield "info", f"{name} up again"
    for flag in ("pfail", "fail"):
        if flag in after.flags and flag not in before.flags:
            yield "error", f"{name} flagged {flag.upper()} by the cluster"
        elif flag in before.flags and flag not in after.flags:
            yield "info", f"{name} no longer flagged {flag.upper()}"
    if after.leaving and not before.leaving:
        yield "warning", f"{name} leaving ({after.jobs or 0} jobs to drain)"
    elif before.leaving and not after.leaving:
        yield "info", f"{name} no longer leaving"
    if before.server and after.server and before.server != after.server:
        was = fmt.SERVER_NAMES.get(before.server, before.server)
        now = fmt.SERVER_NAMES.get(after.server, after.server)
        yield "info", f"{name} now runs {now} (was {was})"


def changes(before: ClusterSnapshot, after: ClusterSnapshot) -> list[tuple[str, str]]:
    """(severity, text) of everything that changed from ``before`` to ``after``."""
    found: list[tuple[str, str]] = []
    old_nodes = {n.id: n for n in before.nodes}
    new_ids = {n.id for n in after.nodes}
    for node in after.nodes:
        old = old_nodes.get(node.id)
        if old is None:
            found.append(("info", f"{node_name(node)} joined"))
        else:
            found += node_changes(old, node)
    for node_id, old in old_nodes.items():
        if node_id not in new_ids:
            found.append(("warning", f"{node_name(old)} forgotten by the cluster"))
    for q in after.queues:
        old_q = before.queue(q.name)
        was = old_q.pause if old_q is not None else "none"
        if q.pause != was:
            if q.pause == "none":
                found.append(("info", f"queue {q.name} resumed (was paused {was})"))
            else:
                found.append(("warning", f"queue {q.name} paused {q.pause}"))
    return found


class EventLog:
    """The last EVENTS_KEPT events, newest first, from the snapshots fed to it."""

    def __init__(self, kept: int = EVENTS_KEPT) -> None:
        self.events: deque[Event] = deque(maxlen=kept)
        self.last: ClusterSnapshot | None = None

    def feed(self, snapshot: ClusterSnapshot) -> int:
        """Log what changed since the last snapshot; return how many events."""
        if snapshot.error:
            return 0  # a cycle that polled nothing says nothing of the nodes
        if self.last is None:
            up = snapshot.nodes_up
            self.events.appendleft(
                Event(
                    snapshot.taken_at,
                    "info",
                    f"watching {len(snapshot.nodes)} nodes ({up} up), {len(snapshot.queues)} queues",
                )
            )
            self.last = snapshot
            return 1
        found = changes(self.last, snapshot)
        for severity, text in found:
            self.events.appendleft(Event(snapshot.taken_at, severity, text))
        self.last = snapshot
        return len(found)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)
