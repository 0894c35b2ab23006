"""disque_spark.client: seeds and HELLO parsing (no server, no Spark)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from disque.protocol import Node, by_priority  # noqa: E402
from disque_spark.client import (  # noqa: E402
    DisqueError,
    hello_nodes,
    job_from_pairs,
    parse_seeds,
)


def test_parse_seeds():
    assert parse_seeds(None) == [("127.0.0.1", 7711)]
    assert parse_seeds(" h1:7712, h2 ,[::1]:7000,") == [("h1", 7712), ("h2", 7711), ("::1", 7000)]
    with pytest.raises(DisqueError, match="bad node address"):
        parse_seeds("h1:port")
    with pytest.raises(DisqueError, match="lists no node"):
        parse_seeds(" , ")


def test_hello_nodes_and_priority():
    reply = [
        1,
        b"aa",
        [b"aa", b"", b"7711", b"1"],
        [b"bb", b"10.0.0.2", b"7712", b"100"],
        [b"cc", b"10.0.0.3", b"7713", b"1"],
    ]
    nodes = hello_nodes(reply, "seed.example")
    assert nodes[0] == Node("aa", "seed.example", 7711, 1)  # empty IP: the seed's host
    assert nodes[1].addr == "10.0.0.2:7712" and nodes[1].priority == 100
    assert by_priority(nodes)[-1].id == "bb"
    with pytest.raises(DisqueError, match="unexpected HELLO"):
        hello_nodes([2, b"x"], "h")


def test_hello_nodes_reach_the_seed_where_it_answered():
    """Over TLS the seed's own entry gets the port we reached it on (its tls-port):
    HELLO lists client ports."""
    reply = [1, b"aa", [b"aa", b"10.0.0.1", b"7711", b"1"], [b"bb", b"10.0.0.2", b"7712", b"1"]]
    nodes = hello_nodes(reply, "seed.example", 7811)
    assert [n.addr for n in nodes] == ["10.0.0.1:7811", "10.0.0.2:7712"]


def test_job_from_pairs():
    flat = [
        b"id",
        b"D-1",
        b"queue",
        b"q",
        b"state",
        b"queued",
        b"repl",
        1,
        b"ttl",
        60,
        b"ctime",
        5,
        b"delay",
        0,
        b"retry",
        6,
        b"nacks",
        2,
        b"additional-deliveries",
        3,
        b"nodes-delivered",
        [b"n1"],
        b"nodes-confirmed",
        [],
        b"next-requeue-within",
        None,
        b"next-awake-within",
        10,
        b"body",
        b"\xff",
    ]
    job = job_from_pairs(flat)
    assert job["id"] == "D-1" and job["state"] == "queued" and job["body"] == b"\xff"
    assert job["additional_deliveries"] == 3 and job["nodes_delivered"] == ["n1"]
    assert job["next_requeue_within"] is None
