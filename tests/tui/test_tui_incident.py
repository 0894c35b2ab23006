"""The overview's logic, on the fixed incident (tui_fixtures): the problems it
names, the queues it ranks first, and `--once`'s plain text."""

from __future__ import annotations

import pytest
import redis
from tui_fixtures import N1, N4, N5, fixed_snapshot, incident_snapshot

from disque_tui.incident import (
    incident_text,
    problems,
    queue_issue,
    queues_that_matter,
    summary,
)
from disque_tui.poller import describe_error
from disque_tui.snapshot import QueueOnNode, merge_queue

pytestmark = pytest.mark.timeout(10)


def test_every_problem_is_named_nodes_first() -> None:
    texts = [(p.severity, p.text) for p in problems(incident_snapshot())]
    assert texts == [
        ("error", "node 0c31bf49 127.0.0.1:7714 DOWN 12s ago (fail): connection refused"),
        (
            "error",
            "node 9a4f0e1d 127.0.0.1:7715 DOWN 1m35s ago (fail): 127.0.0.1:7715 now "
            "answers as node e1f2a3b4 (replaced?)",
        ),
        ("warning", "node 725c0613 127.0.0.1:7713 leaving: 120 jobs left, 40 jobs/s, ETA 3s"),
        ("error", "20 jobs of queue reports stranded on down node 0c31bf49 (as of 12s ago)"),
        ("error", "7 jobs of queue audit stranded on down node 0c31bf49 (as of 12s ago)"),
        ("warning", "queue orders not draining: +50/s in, 0 out, 900 queued"),
    ]


def test_queues_that_matter_problems_first() -> None:
    snapshot = incident_snapshot()
    watched = queues_that_matter(snapshot)
    # stranded, not draining, paused, then by length; the empty idle queue left out
    assert [q.name for q in watched] == ["reports", "audit", "orders", "emails", "jobs"]
    assert [queue_issue(q) for q in watched] == [
        "20 stranded, paused mixed",
        "7 stranded",
        "not draining",
        "paused out",
        "",
    ]
    reports = snapshot.queue("reports")
    assert (reports.length, reports.stranded, reports.live_length) == (44, 20, 24)
    assert reports.on_node(N4).stale == 12.0 and reports.on_node(N1).stale is None


def test_a_queue_not_draining() -> None:
    def queue(length: int, in_rate: float, out_rate: float, stale: float | None = None):
        return merge_queue(
            "q", [QueueOnNode(N1, length=length, in_rate=in_rate, out_rate=out_rate, stale=stale)]
        )

    assert queue(10, 5.0, 0.0).not_draining
    assert not queue(10, 5.0, 1.0).not_draining  # consumed, if slowly
    assert not queue(10, 0.0, 0.0).not_draining  # idle: nothing comes in either
    assert not queue(0, 5.0, 0.0).not_draining  # what comes in goes (imported)
    assert not queue(10, 0.0, 0.0, stale=3.0).not_draining  # stranded, said so instead


def test_header_counts_copies_and_unique_queued_jobs() -> None:
    snapshot = incident_snapshot()
    assert summary(snapshot) == (
        "4/6 nodes up │ 1634 job copies │ 2534 queued in 6 queues │ 27 stranded"
        " │ mixed: 3 C, 3 python"  # a rolling upgrade half done (down nodes counted)
    )
    assert snapshot.total_stranded == 27
    assert summary(fixed_snapshot()).endswith(
        "1634 job copies │ 1634 queued in 3 queues │ mixed: 2 C, 2 python"
    )


def test_no_problem_says_so() -> None:
    snapshot = fixed_snapshot()
    calm = type(snapshot)(
        taken_at=snapshot.taken_at,
        seed=snapshot.seed,
        nodes=snapshot.nodes[:2],
        queues=snapshot.queues[1:2],
    )
    assert problems(calm) == []
    assert "No problem: every node up, no queue stranded or stuck." in incident_text(calm)
    assert "mixed" not in incident_text(calm)  # one kind of server: nothing to say


def test_plain_text_of_the_overview() -> None:
    text = incident_text(incident_snapshot())
    assert "\x1b" not in text
    lines = text.splitlines()
    assert lines[0] == (
        "disque-tui 127.0.0.1:7711 │ 4/6 nodes up │ 1634 job copies │ 2534 "
        "queued in 6 queues │ 27 stranded │ mixed: 3 C, 3 python │ 2026-11-22 02:53:46"
    )
    assert "Problems (6):" in lines
    assert "  ERR  20 jobs of queue reports stranded on down node 0c31bf49 (as of 12s ago)" in lines
    # A node down keeps its last figures; its state says how old they are, and it
    # shows no rate (ops/s "-"), and the server it ran (C: a rolling upgrade had not
    # reached it). The old and the new node at one address are two rows.
    down = next(line for line in lines if line.startswith("  " + N4[:8]))
    assert down.split()[2:5] == ["DOWN", "12s", "ago"] and down.split()[-2:] == ["-", "C"]
    assert lines[lines.index("Nodes:") + 1].split()[-2:] == ["ops/s", "server"]
    assert next(line for line in lines if line.startswith("  " + N1[:8])).endswith("  python")
    assert sum(line.startswith("  " + N5[:8]) for line in lines) == 1
    assert (
        sum(
            "127.0.0.1:7715" in line and line.startswith("  ")
            for line in lines
            if not line.startswith("  ERR")
        )
        == 2
    )
    queue_header = lines.index("Queues that matter (5 of 6, problems first):")
    assert lines[queue_header + 2].split()[:4] == ["reports", "20", "stranded,", "paused"]


def test_a_slow_node_is_a_warning() -> None:
    from dataclasses import replace

    from disque_tui.incident import node_problems

    node = replace(fixed_snapshot().nodes[0], status="slow", last_seen_ago=3.0)
    assert [(p.severity, p.text) for p in node_problems(node)] == [
        ("warning", "node 5b5ace28 127.0.0.1:7711 slow: its poll is overdue (last answer 3s ago)")
    ]


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 7714)"),
            "connection refused",
        ),
        (
            redis.ConnectionError(
                "Error while reading from 127.0.0.1:7714 : (104, 'Connection reset by peer')"
            ),
            "connection reset",
        ),
        (TimeoutError(), "timeout"),
    ],
)
def test_a_failed_poll_is_one_short_line(error: BaseException, line: str) -> None:
    assert describe_error(error) == line
