"""The `disque` package (disque/): the client applications import, on real nodes.

What Disque's README asks of a client library: connect to a seed that answers,
learn the nodes with HELLO, move to another node on -LEAVING or when the node
goes away; jobs as objects; errors as classes carrying the node's message."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

from disque import (
    AsyncClient,
    BadId,
    Client,
    Job,
    MaxLen,
    NoNodeAvailable,
    NoRepl,
    OutOfMemory,
    Paused,
    ReplyError,
    parse_address,
)
from disque.locality import Locality
from testkit.nodes import ClusterOfNodes, Node, free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]


def addr(node: Node) -> str:
    return f"127.0.0.1:{node.port}"


def test_a_job_round_trip_on_one_node(either_node: Node) -> None:
    with Client(addr(either_node)) as client:
        jid = client.add_job("emails", b"hello", retry=60)
        assert re.fullmatch(r"D-[0-9a-f]{8}-[A-Za-z0-9+/]{24}-[0-9a-f]{4}", jid)
        assert client.qlen("emails") == 1
        [peeked] = client.qpeek("emails", 1)
        assert peeked.id == jid
        [job] = client.get_job("emails", timeout=1000, with_counters=True)
        assert job == Job(jid, "emails", b"hello", nacks=0, additional_deliveries=0)
        assert job.producer_id == client.myid[:8]
        shown = client.show(jid)
        assert shown is not None and shown["state"] == b"active"
        assert client.ack(jid) == 1
        assert client.show(jid) is None
        assert client.get_job("emails", nohang=True) == []
        assert client.qstat("emails") is not None


def test_options_reach_the_node(either_node: Node) -> None:
    with Client(addr(either_node)) as client:
        jid = client.add_job("q", "x", ttl=100, retry=10, delay=50)
        shown = client.show(jid)
        assert shown is not None
        assert (shown["state"], shown["ttl"] > 90, shown["retry"]) == (b"active", True, 10)
        assert client.nack(jid) == 1  # queued at once, not after its DELAY
        assert client.qlen("q") == 1
        assert client.dequeue(jid) == 1
        assert client.qlen("q") == 0
        assert client.del_job(jid) == 1
        assert list(client.qscan()) == ["q"]  # (empty, not yet evicted)
        ids = [client.add_job("scan", f"j{n}") for n in range(30)]
        assert sorted(client.jscan(queue="scan", count=7)) == sorted(ids)


def test_errors_are_classes_with_the_node_s_message(either_node: Node) -> None:
    with Client(addr(either_node)) as client:
        with pytest.raises(NoRepl, match="^NOREPL "):
            client.add_job("q", "x", replicate=3)
        client.add_job("short", "x")
        with pytest.raises(MaxLen) as err:
            client.add_job("short", "y", maxlen=1)
        assert err.value.code == "MAXLEN" and "MAXLEN" in str(err.value)
        client.pause("paused", "in")
        with pytest.raises(Paused):
            client.add_job("paused", "x")
        with pytest.raises(BadId):
            client.ack("not-an-id")
        with pytest.raises(ReplyError) as err:
            client.execute("NOSUCHCOMMAND")
        assert err.value.code == "ERR" and str(err.value).startswith("ERR unknown command")
        either_node.call("CONFIG", "SET", "maxmemory", "1")
        with pytest.raises(OutOfMemory, match="^OOM command not allowed"):
            client.add_job("q", "x")


def test_no_node_answers_is_one_clear_error() -> None:
    ports = [free_port(), free_port()]
    client = Client(*(f"127.0.0.1:{p}" for p in ports), connect_timeout=1)
    with pytest.raises(NoNodeAvailable) as err:
        client.qlen("q")
    for port in ports:
        assert f"127.0.0.1:{port}" in str(err.value)


def test_hello_lists_the_cluster_and_a_seed_that_is_down_is_skipped(
    cluster3: ClusterOfNodes,
) -> None:
    down = free_port()
    with Client(f"127.0.0.1:{down}", addr(cluster3[1])) as client:
        hello = client.hello()
        assert len(hello.nodes) == 3
        assert client.address == ("127.0.0.1", cluster3[1].port)


def test_a_leaving_node_sends_the_client_to_another(cluster3: ClusterOfNodes) -> None:
    first = cluster3[0]
    with Client(addr(first)) as client:
        client.hello()
        assert client.address == ("127.0.0.1", first.port)
        first.call("CLUSTER", "LEAVING", "yes")
        # A GETJOB that would wait, on a leaving node, is refused with -LEAVING:
        # the client moves to another node and waits there.
        assert client.get_job("q", timeout=100) == []
        assert client.address != ("127.0.0.1", first.port)
        jid = client.add_job("q", "x", replicate=2)
        assert client.show(jid) is not None


def test_a_node_killed_under_the_client(cluster3: ClusterOfNodes) -> None:
    first = cluster3[0]
    with Client(addr(first)) as client:
        jid = client.add_job("q", "x", replicate=3)
        first.kill()
        # The connection is gone: QLEN runs again on another node.
        assert client.qlen("q") in (0, 1)
        assert client.address != ("127.0.0.1", first.port)
        wait_for(lambda: client.show(jid) is not None, 5, message="a copy on the new node")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:7712", ("127.0.0.1", 7712)),
        ("example.org", ("example.org", 7711)),
        ("[::1]:7711", ("::1", 7711)),
        ("[::1]", ("::1", 7711)),
    ],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


def test_parse_address_refuses_a_bad_port() -> None:
    with pytest.raises(ValueError, match="not a host:port"):
        parse_address("host:99999")


@pytest.mark.parametrize("page", ["README.md", "docs/library.md"])
def test_the_readme_example_runs(node: Node, page: str) -> None:
    """The "Using Disque from Python" example of the README and of the docs'
    library page, on this test's node."""
    text = (ROOT / page).read_text()
    section = text.split("## Using Disque from Python", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    code = code.replace("127.0.0.1:7711", addr(node))
    scope: dict[str, object] = {}
    exec(compile(code, page, "exec"), scope)  # noqa: S102 (our own docs)
    assert scope["done"] == [b'{"to": "ada@example.com"}']


def test_the_async_client_does_what_the_client_does(cluster3: ClusterOfNodes) -> None:
    async def scenario() -> None:
        first = cluster3[0]
        async with AsyncClient(addr(first)) as client:
            jid = await client.add_job("aq", b"hello", retry=60, replicate=3)
            [job] = await client.get_job("aq", timeout=1000, with_counters=True)
            assert job == Job(jid, "aq", b"hello")
            assert [q async for q in client.qscan()] == ["aq"]
            assert [j async for j in client.jscan(queue="aq")] == [jid]
            assert await client.nack(jid) == 1 and await client.qlen("aq") == 1
            with pytest.raises(BadId):
                await client.ack("not-an-id")
            # -LEAVING: the client moves, as the synchronous one does.
            first.call("CLUSTER", "LEAVING", "yes")
            assert await client.get_job("other", timeout=100) == []
            assert client.address != ("127.0.0.1", first.port)
            assert await client.ack(jid) == 1

    asyncio.run(scenario())


def test_a_consumer_follows_its_producers(cluster3: ClusterOfNodes) -> None:
    """Jobs made on node 0, a consumer connected to node 1 with follow_producers:
    once most of what it received came from node 0, it moves there, once."""
    producer_node, consumer_node = cluster3[0], cluster3[1]
    with Client(addr(producer_node)) as producer:
        ids = {producer.add_job("made-on-0", f"{i}", replicate=1, retry=60) for i in range(80)}
    received: set[str] = set()
    deadline = time.monotonic() + 30
    with Client(addr(consumer_node), follow_producers=True) as consumer:
        while len(received) < len(ids) and time.monotonic() < deadline:
            jobs = consumer.get_job("made-on-0", timeout=1000, count=10)
            consumer.ack(*(job.id for job in jobs))
            received.update(job.id for job in jobs)
        assert consumer.address == ("127.0.0.1", producer_node.port)
        assert consumer.locality is not None and consumer.locality.moves == 1
    assert received == ids


def test_locality_moves_only_on_a_clear_majority_and_not_twice_in_a_row() -> None:
    locality = Locality(window=100, share=0.75, min_jobs=20, cooldown=60)
    locality.observe(["aaaaaaaa"] * 19)
    assert locality.suggest("bbbbbbbb-node") is None  # too few jobs yet
    locality.observe(["aaaaaaaa"])
    assert locality.suggest("aaaaaaaa-node") is None  # already there
    assert locality.suggest("bbbbbbbb-node") == "aaaaaaaa"
    locality.moved()
    locality.observe(["cccccccc"] * 50)
    assert locality.suggest("aaaaaaaa-node") is None  # within the cooldown
    mixed = Locality(window=100, share=0.75, min_jobs=20, cooldown=0)
    mixed.observe(["aaaaaaaa", "cccccccc"] * 30)
    assert mixed.suggest("bbbbbbbb-node") is None  # no clear majority: stay
