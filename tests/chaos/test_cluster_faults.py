"""Targeted fault tests: what the chaos runs need from the cluster layer.

Each test pins one behaviour a Jepsen-style run depends on; the ones marked
xfail document server bugs found while writing the chaos suite (see the
reason strings) and pass once those are fixed.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
import redis
from chaos_harness import ChaosNode, Partitioner, gid_base

from testkit.nodes import ClusterOfNodes, wait_for

pytestmark = pytest.mark.timeout(150)


def loopback_alias_usable(ip: str) -> bool:
    try:
        with socket.socket() as s:
            s.bind((ip, 0))
    except OSError:
        return False
    return True


def cluster_info(host: str, port: int) -> dict[str, str]:
    with redis.Redis(host=host, port=port, protocol=2, socket_timeout=5) as c:
        text = c.execute_command("CLUSTER", "INFO").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


# Fixed SERVER BUG: with --bind, outgoing bus connections were not bound to the bind
# address, so peers recorded 127.0.0.1 for every node and could not connect back.
def test_nodes_bound_to_their_own_loopback_address_form_a_mesh(tmp_path: Path) -> None:
    """Per-node addresses (127.0.0.2, .3, .4) are what address-based partitions need."""
    ips = [f"127.0.0.{i + 2}" for i in range(3)]
    if not all(loopback_alias_usable(ip) for ip in ips):
        pytest.skip("127.0.0.x addresses other than 127.0.0.1 cannot be bound here")
    nodes = [
        ChaosNode(tmp_path / f"n{i}", config={"cluster-node-timeout": "1500", "bind": ip})
        for i, ip in enumerate(ips)
    ]
    try:
        for n in nodes:
            n.start(wait=False)
        for n, ip in zip(nodes, ips, strict=True):
            wait_for(
                lambda n=n, ip=ip: redis.Redis(host=ip, port=n.port, socket_timeout=1).ping(),
                30,
                message=f"node on {ip}",
            )
        for i in range(len(nodes) - 1):
            with redis.Redis(host=ips[i], port=nodes[i].port, protocol=2) as c:
                assert c.execute_command("CLUSTER", "MEET", ips[i + 1], nodes[i + 1].port) == b"OK"

        def meshed() -> bool:
            return all(
                cluster_info(ip, n.port)["cluster_reachable_nodes"] == "2"
                for n, ip in zip(nodes, ips, strict=True)
            )

        wait_for(meshed, 12, interval=0.2, message="a full mesh of nodes on 127.0.0.2-4")
        for n, ip in zip(nodes, ips, strict=True):
            with redis.Redis(host=ip, port=n.port, protocol=2) as c:
                text = c.execute_command("CLUSTER", "NODES").decode()
            addresses = {line.split()[1].rsplit(":", 1)[0] for line in text.splitlines()}
            assert addresses == set(ips), text
    finally:
        for n in nodes:
            n.terminate()


# Fixed SERVER BUG: a bus link whose PING got no PONG for half the node timeout was
# never dropped and reconnected, so a healed partition stayed cut until TCP retried.
def test_partition_heals_within_a_few_node_timeouts(tmp_path: Path) -> None:
    partitioner = Partitioner()
    reason = partitioner.unavailable_reason()
    if reason:
        pytest.skip(f"needs partitions: {reason}")
    nodes = [
        ChaosNode(
            tmp_path / f"n{i}", config={"cluster-node-timeout": "1500"}, gid=gid_base() + 8 + i
        )
        for i in range(3)
    ]
    with ClusterOfNodes.running(nodes) as cluster:  # type: ignore[arg-type]
        try:
            partitioner.partition([[nodes[0]], nodes[1:]])
            cut = time.monotonic()
            wait_for(
                lambda: "fail" in cluster.flags_of(nodes[1], nodes[0]),
                20,
                message="node1 to mark node0 as failing",
            )
            # 20 s: long enough for TCP to back off several times on the dropped links
            # (retransmissions at about 0.2 0.6 1.4 3 6.2 12.6 25.4 s).
            time.sleep(max(0.0, 20 - (time.monotonic() - cut)))
            partitioner.heal()
            t0 = time.monotonic()
            cluster.wait_full_mesh(timeout=60)
            healed = time.monotonic() - t0
            assert healed < 5, f"the mesh came back {healed:.1f}s after the partition healed"
        finally:
            partitioner.uninstall()
