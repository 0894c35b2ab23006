"""The poller alone (no UI) against real nodes: discovery, membership
following HELLO, per-node deadlines, rates, QSCAN paging, raw replies."""

from __future__ import annotations

import asyncio
import time

import pytest
from tui_live import run

from disque_tui.poller import Poller

pytestmark = pytest.mark.timeout(60)


async def cycles_until(poller: Poller, predicate, timeout: float = 15.0, message: str = ""):
    deadline = time.monotonic() + timeout
    snapshot = None
    while time.monotonic() < deadline:
        snapshot = await poller.poll_cycle()
        if predicate(snapshot):
            return snapshot
        await asyncio.sleep(poller.interval)
    raise AssertionError(f"timed out waiting for {message}; last snapshot: {snapshot}")


def test_discovery_and_membership(start_cluster, start_node) -> None:
    cluster = start_cluster(3)
    ids = {i.decode() for i in cluster.node_ids()}
    newcomer = start_node(config={"cluster-node-timeout": "1500"}, name="newcomer")
    new_id = newcomer.call("CLUSTER", "MYID").decode()

    async def scenario() -> None:
        poller = Poller("127.0.0.1", cluster[1].port, interval=0.2)
        try:
            snap = await cycles_until(poller, lambda s: s.nodes_up == 3, message="3 nodes")
            assert {n.id for n in snap.nodes} == ids
            assert [n.port for n in snap.nodes] == sorted(n.port for n in snap.nodes)

            # a node that meets the cluster appears
            cluster[0].call("CLUSTER", "MEET", "127.0.0.1", str(newcomer.port))
            snap = await cycles_until(
                poller,
                lambda s: s.node(new_id) is not None and s.node(new_id).up,
                message="newcomer appears",
            )
            assert snap.node(new_id).port == newcomer.port

            # a node the cluster forgets goes
            newcomer.kill()
            await cycles_until(
                poller, lambda s: s.node(new_id).status == "down", message="newcomer down"
            )
            for node in cluster:
                node.call("CLUSTER", "FORGET", new_id)
            snap = await cycles_until(
                poller, lambda s: s.node(new_id) is None, message="forgotten node dropped"
            )
            assert {n.id for n in snap.nodes} == ids
        finally:
            await poller.close()

    run(scenario())


def test_a_seed_that_left_is_not_shown_as_the_seed(start_cluster) -> None:
    cluster = start_cluster(3)
    seed = cluster[2]
    seed_id = seed.call("CLUSTER", "MYID").decode()

    async def scenario() -> None:
        poller = Poller("127.0.0.1", seed.port, interval=0.2)
        try:
            snap = await cycles_until(poller, lambda s: s.nodes_up == 3, message="3 nodes")
            assert snap.seed == f"127.0.0.1:{seed.port}"
            seed.kill()
            for node in cluster[:2]:
                node.call("CLUSTER", "FORGET", seed_id)
            snap = await cycles_until(
                poller, lambda s: s.node(seed_id) is None, message="the seed forgotten"
            )
            assert snap.seed.endswith(f" (seed 127.0.0.1:{seed.port} left the cluster)")
            assert snap.seed.split()[0] in {f"127.0.0.1:{n.port}" for n in cluster[:2]}
        finally:
            await poller.close()

    run(scenario())


def test_a_frozen_node_does_not_delay_the_cycle(start_cluster) -> None:
    cluster = start_cluster(3)
    frozen_id = cluster[2].call("CLUSTER", "MYID").decode()

    async def scenario() -> None:
        poller = Poller("127.0.0.1", cluster[0].port, interval=0.3, timeout=2.0)
        try:
            await cycles_until(poller, lambda s: s.nodes_up == 3)
            cluster[2].pause()
            try:
                started = time.monotonic()
                snap = await poller.poll_cycle()
                # the cycle ends after one interval, not after the 2 s node timeout
                assert time.monotonic() - started < 1.0
                assert snap.node(frozen_id).status in ("slow", "up")
                snap = await cycles_until(
                    poller, lambda s: s.node(frozen_id).status == "slow", message="slow"
                )
                snap = await cycles_until(
                    poller,
                    lambda s: s.node(frozen_id).status == "down",
                    message="down after the timeout",
                )
                assert snap.node(frozen_id).error == "timeout"
                assert snap.nodes_up == 2
                assert snap.node(frozen_id).last_seen_ago >= 2.0
            finally:
                cluster[2].resume()
            await cycles_until(poller, lambda s: s.nodes_up == 3, message="back up")
        finally:
            await poller.close()

    run(scenario())


def test_queues_paged_and_rated(start_node) -> None:
    node = start_node()
    with node.client() as c:
        pipe = c.pipeline(transaction=False)
        for i in range(120):
            pipe.execute_command("ADDJOB", f"pq{i:03d}", "x", 0)
        pipe.execute()

    async def scenario() -> None:
        poller = Poller("127.0.0.1", node.port, interval=0.2, scan_count=7)
        try:
            snap = await poller.poll_cycle()
            assert len(snap.queues) == 120  # 18 QSCAN pages of COUNT 7
            assert snap.queue("pq000").length == 1
            assert snap.nodes[0].queues == 120 and snap.nodes[0].jobs == 120
            await asyncio.sleep(0.2)
            with node.client() as c:
                for _ in range(10):
                    c.execute_command("ADDJOB", "pq000", "y", 0)
                c.execute_command("GETJOB", "COUNT", 4, "FROM", "pq000")
            snap = await poller.poll_cycle()
            q = snap.queue("pq000")
            assert q.length == 7
            assert q.in_rate > 0 and q.out_rate > 0
            imports, throughput = snap.queue_history("pq000")
            assert throughput[-1] == q.out_rate and len(imports) == 2
            assert snap.queue_history("pq001") == ((0.0, 0.0), (0.0, 0.0))
            assert len(snap.nodes[0].jobs_history) == 2
        finally:
            await poller.close()

    run(scenario())


def test_node_views_read_a_real_node(start_node) -> None:
    """The node detail's clients, slow log, latency events and config, from a node."""
    node = start_node()
    node.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    node.call("CONFIG", "SET", "latency-monitor-threshold", "1")
    with node.client() as c:
        c.execute_command("CLIENT", "SETNAME", "watched")
        c.execute_command("ADDJOB", "q", "x", 0)

        async def scenario() -> None:
            poller = Poller("127.0.0.1", node.port, interval=0.2)
            try:
                snap = await poller.poll_cycle()
                views = await poller.node_views(snap.nodes[0].id)
                assert views.error is None
                assert any(client.get("name") == "watched" for client in views.clients)
                assert any(command.startswith("ADDJOB q x") for *_, command in views.slowlog)
                assert ("port", str(node.port)) in views.config
                gone = await poller.node_views("f" * 40)
                assert gone.error == "not a member any more"
            finally:
                await poller.close()

        run(scenario())


def test_a_rolling_upgrade_shows_which_server_each_node_runs(start_node, c_disque) -> None:
    """Half way through a rolling upgrade: a C Disque node and one of ours in one
    cluster. Both say disque_version 1.0-rc1; the server column tells them apart."""
    ours = start_node()
    ours.call("CLUSTER", "MEET", "127.0.0.1", str(c_disque.port))
    c_id = c_disque.call("CLUSTER", "MYID").decode()
    our_id = ours.call("CLUSTER", "MYID").decode()

    async def scenario() -> None:
        poller = Poller("127.0.0.1", ours.port, interval=0.2)
        try:
            snap = await cycles_until(poller, lambda s: s.nodes_up == 2, message="both nodes")
            assert snap.node(c_id).server == "C"
            assert snap.node(our_id).server == "python"
            assert snap.node(c_id).version == snap.node(our_id).version == "1.0-rc1"
        finally:
            await poller.close()

    run(scenario())


def test_discover_fails_cleanly_when_nothing_answers() -> None:
    from testkit.nodes import free_port

    async def scenario() -> None:
        poller = Poller("127.0.0.1", free_port(), interval=0.2)
        with pytest.raises(Exception, match="(?i)refused|connect"):
            await poller.discover()
        await poller.close()

    run(scenario())
