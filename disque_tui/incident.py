"""What needs attention in a `ClusterSnapshot`: the problems, and the queues
that matter, problems first. Pure functions (no Textual, no I/O), shared by
the first screen of the dashboard and by `disque-tui --once`.

A problem is one of: a node down (with how long, and why), a node flagged
PFAIL or FAIL by the cluster, a node leaving (jobs left, ETA), jobs stranded
on a node that is down (its last known queues), a queue that grows while
nothing consumes it, jobs held in no queue (delivered and not acknowledged,
or waiting for their RETRY: QLEN misses them). Queues are ranked: stranded, not draining, paused,
then the longest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from disque_tui import format as fmt
from disque_tui.snapshot import ClusterSnapshot, NodeSnapshot, QueueSnapshot

# The queues that matter: at most this many rows on the first screen (the
# Queues panel has them all).
WATCH_ROWS = 100


@dataclass(frozen=True, slots=True)
class Problem:
    severity: str  # "error" | "warning"
    text: str


# ---- nodes -----------------------------------------------------------------------


def node_state(node: NodeSnapshot) -> str:
    """`up`, `DOWN 12s ago`, `slow 3s ago`: since the last good poll."""
    if node.status == "up":
        return "up"
    ago = "never seen" if node.last_seen_ago is None else f"{fmt.duration(node.last_seen_ago)} ago"
    return f"{'DOWN' if node.status == 'down' else node.status} {ago}"


def node_problems(node: NodeSnapshot) -> list[Problem]:
    name = f"node {node.short_id} {node.address}"
    flags = ",".join(f for f in node.flags if f in ("pfail", "fail"))
    if node.status == "down":
        why = f": {node.error}" if node.error else ""
        seen = f" ({flags})" if flags else ""
        held = ""
        if node.copies_elsewhere:
            held = (
                f"; it holds {node.copies_elsewhere} jobs copied on the nodes up (queued "
                "again there after their RETRY)"
            )
        return [Problem("error", f"{name} {node_state(node)}{seen}{why}{held}")]
    found = []
    if node.status == "slow":
        found.append(
            Problem(
                "warning",
                f"{name} slow: its poll is overdue "
                f"(last answer {fmt.duration(node.last_seen_ago)} ago)",
            )
        )
    if flags:
        found.append(Problem("error", f"{name} flagged {flags.upper()} by the cluster"))
    if node.leaving:
        found.append(Problem("warning", f"{name} leaving: {drain_text(node)}"))
    return found


def drain_text(node: NodeSnapshot) -> str:
    d = node.drain
    if d is None:
        return f"{fmt.number(node.jobs)} jobs left"
    eta = fmt.duration(d.eta) if d.eta is not None else "unknown (nothing moves)"
    return f"{d.jobs_left} jobs left, {fmt.rate(d.rate)} jobs/s, ETA {eta}"


# ---- queues ----------------------------------------------------------------------


def queue_issue(q: QueueSnapshot) -> str:
    """The queue's problem in a few words, or ""."""
    issues = []
    if q.stranded:
        issues.append(f"{q.stranded} stranded")
    if q.not_draining:
        issues.append("not draining")
    if q.pause != "none":
        issues.append(f"paused {q.pause}")
    return ", ".join(issues)


def queue_rank(q: QueueSnapshot) -> tuple[int, int, str]:
    """Sort key, problems first: stranded, not draining, paused, then the longest."""
    if q.stranded:
        level = 0
    elif q.not_draining:
        level = 1
    elif q.pause != "none":
        level = 2
    else:
        level = 3
    return (level, -q.length, q.name)


def queues_that_matter(snapshot: ClusterSnapshot, limit: int = WATCH_ROWS) -> list[QueueSnapshot]:
    """Queues with a problem or with jobs, problems first: what the first screen lists."""
    interesting = [
        q
        for q in snapshot.queues
        if q.length or q.blocked or q.in_rate or q.out_rate or q.pause != "none"
    ]
    return sorted(interesting, key=queue_rank)[:limit]


def queue_problems(snapshot: ClusterSnapshot) -> list[Problem]:
    found = []
    for q in sorted(snapshot.queues, key=queue_rank):
        if q.stranded:
            where = ", ".join(
                snapshot.short_name(on.node_id)
                for on in q.per_node
                if on.stale is not None and on.length
            )
            found.append(
                Problem(
                    "error",
                    f"{q.stranded} jobs of queue {q.name} stranded on "
                    f"down node {where} (as of "
                    f"{fmt.duration(q.stale_age)} ago)",
                )
            )
        if q.not_draining:
            found.append(
                Problem(
                    "warning",
                    f"queue {q.name} not draining: "
                    f"+{fmt.rate(q.in_rate)}/s in, 0 out, "
                    f"{q.live_length} queued",
                )
            )
    return found


def out_of_queue_problems(snapshot: ClusterSnapshot) -> list[Problem]:
    """A warning a queue whose jobs are in no queue (not all in their DELAY): QLEN
    does not count them, and no consumer gets them until they are queued again."""
    found = []
    for w in snapshot.out_of_queue:
        if w.jobs == w.delayed:
            continue
        due = f", next re-queue in {fmt.duration(w.next_ms / 1000)}" if w.next_ms else ""
        found.append(
            Problem(
                "warning",
                f"{w.jobs} jobs of queue {w.queue} in no queue{due}: delivered and not "
                "acknowledged yet, or waiting for their RETRY",
            )
        )
    return found


def problems(snapshot: ClusterSnapshot) -> list[Problem]:
    """Every problem, nodes first, errors before warnings within each."""
    if snapshot.error:
        return [Problem("error", f"cannot poll the cluster: {snapshot.error}")]
    found = [p for node in snapshot.nodes for p in node_problems(node)]
    found.sort(key=lambda p: p.severity != "error")
    return found + queue_problems(snapshot) + out_of_queue_problems(snapshot)


def summary(snapshot: ClusterSnapshot) -> str:
    """The header's numbers: nodes up, job copies, unique queued jobs, stranded jobs,
    and, in a cluster of C Disque nodes and ours, how many of each."""
    text = (
        f"{snapshot.nodes_up}/{len(snapshot.nodes)} nodes up │ "
        f"{snapshot.total_jobs} job copies │ {snapshot.total_queued} queued in "
        f"{len(snapshot.queues)} queues"
    )
    if snapshot.total_stranded:
        text += f" │ {snapshot.total_stranded} stranded"
    servers = [node.server for node in snapshot.nodes]
    c_nodes, ours = servers.count("C"), servers.count("python")
    if c_nodes and ours:  # a rolling upgrade under way: how far it has got
        text += f" │ mixed: {c_nodes} C, {ours} python"
    return text


# ---- plain text (disque-tui --once) ------------------------------------------------

NODE_COLUMNS = (
    "node",
    "address",
    "state",
    "pri",
    "flags",
    "jobs",
    "queues",
    "cli",
    "blk",
    "mem",
    "ops/s",
    "server",
)
QUEUE_COLUMNS = (
    "queue",
    "problem",
    "len",
    "oldest",
    "in/s",
    "out/s",
    "import/s",
    "blocked",
    "pause",
)


def node_cells(node: NodeSnapshot) -> list[str]:
    """A node's row as text. Figures of a node down are its last known ones: the
    state says when they were current (`DOWN 32s ago`), rates are `-`."""
    return [
        node.short_id,
        node.address,
        node_state(node),
        fmt.number(node.priority),
        ",".join(node.flags) or "-",
        fmt.number(node.jobs),
        fmt.number(node.queues),
        fmt.number(node.clients),
        fmt.number(node.blocked),
        fmt.human_bytes(node.memory),
        fmt.number(node.ops_per_sec),
        node.server or "-",
    ]


def queue_cells(q: QueueSnapshot) -> list[str]:
    return [
        q.name,
        queue_issue(q) or "-",
        str(q.length),
        fmt.duration(q.oldest),
        fmt.rate(q.in_rate),
        fmt.rate(q.out_rate),
        str(q.import_rate),
        str(q.blocked),
        q.pause,
    ]


def plain_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    numeric = [
        all(_numeric(row[i]) for row in rows) and any(row[i] != "-" for row in rows)
        for i in range(len(header))
    ]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(w) if num else cell.ljust(w)
            for cell, w, num in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    return [line(header)] + [line(row) for row in rows]


def _numeric(text: str) -> bool:
    return text == "-" or text.replace(".", "", 1).isdigit()


def incident_text(snapshot: ClusterSnapshot) -> str:
    """The first screen as plain text: header, problems, nodes, queues that matter."""
    import time

    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snapshot.taken_at))
    lines = [f"disque-tui {snapshot.seed} │ {summary(snapshot)} │ {when}", ""]
    found = problems(snapshot)
    if found:
        lines.append(f"Problems ({len(found)}):")
        lines += [f"  {'ERR ' if p.severity == 'error' else 'WARN'} {p.text}" for p in found]
    else:
        lines.append("No problem: every node up, no queue stranded or stuck.")
    lines += ["", "Nodes:"]
    lines += [
        "  " + row for row in plain_table(NODE_COLUMNS, [node_cells(n) for n in snapshot.nodes])
    ]
    watched = queues_that_matter(snapshot)
    lines += ["", f"Queues that matter ({len(watched)} of {len(snapshot.queues)}, problems first):"]
    if watched:
        lines += [
            "  " + row for row in plain_table(QUEUE_COLUMNS, [queue_cells(q) for q in watched])
        ]
    else:
        lines.append("  (none: every queue is empty and idle)")
    return "\n".join(lines) + "\n"
