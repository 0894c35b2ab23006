"""Pure parts of the dashboard, without sockets: reply parsers (on replies as
recorded from Disque 1.0-rc1), merging and rates, formatters."""

from __future__ import annotations

import pytest

from disque_tui import format as fmt
from disque_tui import queries
from disque_tui.snapshot import (
    QueueOnNode,
    counter_rate,
    drain_estimate,
    merge_pause,
    merge_queue,
)

pytestmark = pytest.mark.timeout(10)

CLUSTER_NODES = (
    b"78e24da148cd9c9fc69d2b889eba1abb7bdf05b0 127.0.0.1:7712 noflags 0 1795316026878 connected\n"
    b"5b5ace285121e336847f55fb92f1935774ebfce4 127.0.0.1:7711 myself 0 0 connected\n"
    b"725c0613b8b134d5d1c8b5e88bf61de102c81c10 127.0.0.1:7713 leaving 0 1795316025877 "
    b"connected\n"
)
QSTAT = [
    b"name",
    b"fed",
    b"len",
    1,
    b"age",
    0,
    b"idle",
    0,
    b"blocked",
    0,
    b"import-from",
    [b"78e24da148cd9c9fc69d2b889eba1abb7bdf05b0"],
    b"import-rate",
    60,
    b"jobs-in",
    3,
    b"jobs-out",
    2,
    b"pause",
    b"none",
]


def test_parse_cluster_nodes() -> None:
    lines = queries.parse_cluster_nodes(CLUSTER_NODES)
    assert [sorted(line.flags) for line in lines] == [[], ["myself"], ["leaving"]]
    assert lines[2].address == "127.0.0.1:7713" and lines[2].link == "connected"


def test_parse_cluster_nodes_with_a_bus_port() -> None:
    """A node announcing a bus port other than port + 10000 (NAT) shows ip:port@busport."""
    [line] = queries.parse_cluster_nodes(
        b"%s 10.0.0.2:7711@27711 noflags 0 0 connected\n" % (b"a" * 40)
    )
    assert line.address == "10.0.0.2:7711"


def test_parse_qstat() -> None:
    stat = queries.parse_qstat(QSTAT)
    assert stat is not None
    assert (stat.name, stat.length, stat.import_rate, stat.jobs_in, stat.jobs_out, stat.pause) == (
        "fed",
        1,
        60,
        3,
        2,
        "none",
    )
    assert stat.import_from == ("78e24da148cd9c9fc69d2b889eba1abb7bdf05b0",)
    assert queries.parse_qstat(None) is None


def test_parse_qpeek_and_show() -> None:
    peek = queries.parse_qpeek([[b"q", b"D-1", b"body"], [b"q", b"D-2", b""]])
    assert peek == [("q", "D-1", b"body"), ("q", "D-2", b"")]
    show = queries.parse_show(
        [
            b"id",
            b"D-1",
            b"queue",
            b"q",
            b"state",
            b"queued",
            b"nodes-delivered",
            [b"a", b"b"],
            b"next-requeue-within",
            None,
            b"body",
            b"\xff\x00",
        ]
    )
    assert show == {
        "id": "D-1",
        "queue": "q",
        "state": "queued",
        "nodes-delivered": ["a", "b"],
        "next-requeue-within": None,
        "body": b"\xff\x00",
    }
    assert queries.parse_show(None) is None


def test_merge_queue_sums_and_pause() -> None:
    q = merge_queue(
        "q",
        [
            QueueOnNode(
                "a",
                length=3,
                blocked=1,
                import_rate=5,
                import_from=("b",),
                in_rate=1.0,
                out_rate=2.0,
                pause="out",
            ),
            QueueOnNode(
                "b", length=4, import_rate=1, import_from=("a", "b"), out_rate=0.5, pause="out"
            ),
        ],
    )
    assert (q.length, q.blocked, q.import_rate, q.in_rate, q.out_rate) == (7, 1, 6, 1.0, 2.5)
    assert q.import_from == ("b", "a") and q.pause == "out"
    assert q.on_node("b").length == 4 and q.on_node("c") is None
    assert merge_pause(["none", "in"]) == "mixed"
    single = merge_queue("s", [QueueOnNode("a", length=2, pause="in", out_rate=1.5)])
    assert (single.length, single.pause, single.out_rate) == (2, "in", 1.5)
    assert merge_pause([]) == "none"


def test_queue_history_is_sparse() -> None:
    from disque_tui.snapshot import ClusterSnapshot

    snap = ClusterSnapshot(taken_at=0, seed="x", rate_history=({}, {"q": (1.0, 2.0)}, {}))
    assert snap.queue_history("q") == ((0.0, 1.0, 0.0), (0.0, 2.0, 0.0))
    assert snap.queue_history("idle") == ((0.0,) * 3, (0.0,) * 3)


def test_counter_rate() -> None:
    assert counter_rate(None, 10, 1.0) == 0.0
    assert counter_rate(10, 30, 2.0) == 10.0
    assert counter_rate(30, 5, 1.0) == 0.0  # queue recreated: counter reset


def test_drain_estimate() -> None:
    history = [(0.0, 400), (1.0, 350), (2.0, 300), (3.0, 250)]
    drain = drain_estimate(history, 400)
    assert drain is not None
    assert drain.jobs_left == 250 and drain.rate == pytest.approx(50.0)
    assert drain.eta == pytest.approx(5.0) and drain.progress == pytest.approx(0.375)
    assert drain_estimate([(0.0, 0)], 10).eta == 0.0
    assert drain_estimate([], 10) is None


def test_formatters() -> None:
    assert fmt.human_bytes(512) == "512B" and fmt.human_bytes(31_457_280) == "30.0M"
    assert fmt.duration(42) == "42s" and fmt.duration(185) == "3m05s"
    assert fmt.duration(7800) == "2h10m" and fmt.duration(None) == "-"
    assert fmt.rate(0) == "0" and fmt.rate(2.25) == "2.2" and fmt.rate(120.4) == "120"
    assert fmt.spark([0, 0]) == "▁▁" and fmt.spark([5, 5]) == "▄▄"
    assert fmt.spark([0, 7]) == "▁█" and len(fmt.spark(range(100), 12)) == 12
    assert fmt.bar(0.5, 4) == "██░░"
    assert fmt.preview(b"a\nb") == "a\\nb" and fmt.preview(b"\xff") == "\\xff"
    assert fmt.preview("x" * 100, 10) == "x" * 9 + "…"
