"""The asyncio client's one connection, on which concurrent commands are pipelined
(disque/pipelining.py): each gets its own reply, an error stays its command's, a
move leaves the commands in flight their replies, and a node lost mid-flight
fails only what may have run. On our node and on C Disque 1.0-rc1."""

from __future__ import annotations

import asyncio
import time

import pytest

from disque import AsyncClient, BadId, Client, NoAuth
from disque.tls import TLS
from testkit.nodes import ClusterOfNodes, Node, wait_for

pytestmark = pytest.mark.timeout(60)


def addr(node: Node) -> str:
    return f"127.0.0.1:{node.port}"


def connections_received(node: Node) -> int:
    return int(node.info("stats")["total_connections_received"])


def test_concurrent_commands_share_one_connection_each_with_its_own_reply(
    either_node: Node,
) -> None:
    with Client(addr(either_node)) as sync:
        for i in range(10):
            for _ in range(i):
                sync.add_job(f"q{i}", b"x", retry=60)
    before = connections_received(either_node)

    async def scenario() -> tuple[list[int], list[str]]:
        async with AsyncClient(addr(either_node)) as client:
            lengths = [client.qlen(f"q{k % 10}") for k in range(200)]
            adds = [client.add_job("new", f"{k}".encode(), retry=60) for k in range(200)]
            # Interleaved: replies must come back to the command that asked.
            replies = await asyncio.gather(
                *(c for pair in zip(lengths, adds, strict=True) for c in pair)
            )
            return list(replies[0::2]), list(replies[1::2])

    lengths, ids = asyncio.run(scenario())
    assert lengths == [k % 10 for k in range(200)]
    assert len(set(ids)) == 200 and all(i.startswith("D-") for i in ids)
    # One connection for the 400 commands (and the HELLO): pipelined, not pooled.
    # (The other one is this check's own INFO.)
    assert connections_received(either_node) - before == 2
    with Client(addr(either_node)) as sync:
        assert sync.qlen("new") == 200
        bodies = {job.body for job in sync.get_job("new", count=200, nohang=True)}
    assert bodies == {f"{k}".encode() for k in range(200)}


def test_an_error_reply_fails_its_own_command_only(either_node: Node) -> None:
    async def scenario() -> list[object]:
        async with AsyncClient(addr(either_node)) as client:
            calls = [client.add_job("e", b"ok", retry=60) for _ in range(20)]
            calls.insert(10, client.ack("not-an-id"))
            return list(await asyncio.gather(*calls, return_exceptions=True))

    results = asyncio.run(scenario())
    assert isinstance(results[10], BadId)
    rest = results[:10] + results[11:]
    assert all(isinstance(r, str) and r.startswith("D-") for r in rest), rest
    assert either_node.call("QLEN", "e") == 20


def test_a_move_leaves_the_commands_in_flight_their_replies(cluster3: ClusterOfNodes) -> None:
    """A blocked GETJOB is in flight on node 0 when the client moves to node 1:
    the old connection closes only after that GETJOB's reply (a job added for
    it), and the next commands go to node 1."""
    first, second = cluster3[0], cluster3[1]

    async def scenario() -> list[object]:
        async with AsyncClient(addr(first)) as client:
            await client.qlen("warm")  # connected to node 0
            waiting = asyncio.create_task(client.get_job("held", timeout=10_000))
            await asyncio.to_thread(
                wait_for, lambda: int(first.info("clients")["blocked_clients"]) == 1, 10
            )
            await client.connect(prefer=("127.0.0.1", second.port))
            assert client.address == ("127.0.0.1", second.port)
            assert await client.qlen("held") == 0  # asked of node 1
            # Still blocked on node 0: its connection was not closed by the move.
            assert int(first.info("clients")["blocked_clients"]) == 1
            first.call("ADDJOB", "held", "for the waiter", "0")
            jobs = await waiting
            assert [j.body for j in jobs] == [b"for the waiter"]
            return list(jobs)

    asyncio.run(scenario())
    # The old connection closed once its GETJOB had its reply (1: this check's INFO).
    wait_for(lambda: int(first.info("clients")["connected_clients"]) == 1, 10)


def test_a_node_lost_fails_what_may_have_run_and_the_client_moves(
    cluster3: ClusterOfNodes,
) -> None:
    """SIGKILL of the node under a blocked GETJOB: the GETJOB, which had not
    returned a job, runs again on another node; commands after it go there."""
    first = cluster3[0]

    async def scenario() -> None:
        async with AsyncClient(*(addr(n) for n in cluster3)) as client:
            await client.hello()
            await client.connect(prefer=("127.0.0.1", first.port))
            waiting = asyncio.create_task(client.get_job("lost", timeout=1500))
            await asyncio.to_thread(
                wait_for, lambda: int(first.info("clients")["blocked_clients"]) == 1, 10
            )
            first.kill()
            started = time.monotonic()
            assert await waiting == []  # timed out again on a live node
            assert time.monotonic() - started >= 1.0
            assert client.address is not None and client.address[1] != first.port
            assert await client.qlen("lost") == 0

    asyncio.run(scenario())


def test_the_password_is_sent_and_a_wrong_one_is_noauth(start_node) -> None:
    node = start_node(config={"requirepass": "s3cret"})

    async def scenario() -> None:
        async with AsyncClient(addr(node), password="s3cret") as client:
            assert await client.qlen("q") == 0
        with pytest.raises(NoAuth):
            async with AsyncClient(addr(node), password="wrong") as client:
                await client.qlen("q")

    asyncio.run(scenario())


def test_tls_with_the_pipelined_connection(start_tls_node, certs: dict[str, str]) -> None:
    node, tls_port = start_tls_node()

    async def scenario() -> list[str]:
        tls = TLS(cacert=certs["ca"])
        async with AsyncClient(f"127.0.0.1:{tls_port}", tls=tls) as client:
            return list(await asyncio.gather(*(client.add_job("t", b"x") for _ in range(20))))

    assert len(set(asyncio.run(scenario()))) == 20
    assert node.call("QLEN", "t") == 20


def test_an_addjob_not_written_is_sent_again_not_failed(node: Node) -> None:
    """The client's connection is retiring (a move another task began) when an
    ADDJOB comes: it was never written, so it goes out on a new connection
    instead of failing as "may or may not have run"."""

    async def scenario() -> str:
        async with AsyncClient(addr(node)) as client:
            await client.qlen("warm")
            assert client._conn is not None
            client._conn.retire()  # what a move does to the connection it leaves
            return await client.add_job("resent", b"x")

    assert asyncio.run(scenario()).startswith("D-")
    assert node.call("QLEN", "resent") == 1
