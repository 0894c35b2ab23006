"""Containers and NAT (beyond Disque): cluster-port and cluster-announce-*.

Each node listens on its own loopback address ("inside its container") and
announces another one, where a port forwarder run by the test (the NAT, as
Docker's published ports) passes connections on to it. Nothing listens on
an announced address at the inside ports, nor on the inside address at the
announced ports: the cluster forms, and serves clients, only if every node
uses what the others announce.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
import redis

from testkit.nodes import ClusterOfNodes, Node, free_port, links_up, wait_for
from testkit.processes import ROOT


def loopback_alias_usable(ip: str) -> bool:
    with socket.socket() as s:
        try:
            s.bind((ip, 0))
        except OSError:
            return False
    return True


class Forwarder:
    """TCP port forwarding on its own event loop thread; counts connections."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.servers: list[asyncio.AbstractServer] = []
        self.connections: dict[tuple[str, int], int] = {}

    def forward(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.connections[listen] = 0

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections[listen] += 1
            try:
                up_reader, up_writer = await asyncio.open_connection(*target)
            except OSError:
                writer.close()
                return
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(handle, *listen, reuse_address=True), self.loop
        ).result(10)
        self.servers.append(server)

    def close(self) -> None:
        async def stop() -> None:
            for server in self.servers:
                server.close()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


@pytest.fixture
def forwarder() -> Iterator[Forwarder]:
    f = Forwarder()
    yield f
    f.close()


class NattedNode:
    """A node inside (`inside`: ip, port, bus port) announcing `outside` addresses."""

    def __init__(
        self, node: Node, inside: tuple[str, int, int], outside: tuple[str, int, int]
    ) -> None:
        self.node, self.inside, self.outside = node, inside, outside

    def client(self, outside: bool = False) -> redis.Redis:
        ip, port, _ = self.outside if outside else self.inside
        return redis.Redis(host=ip, port=port, protocol=2, socket_timeout=10)

    def call(self, *args: object, outside: bool = False) -> object:
        with self.client(outside) as c:
            return c.execute_command(*args)


def natted_cluster(tmp_path, forwarder: Forwarder) -> list[NattedNode]:
    inside_ips = [f"127.0.0.{31 + i}" for i in range(3)]
    outside_ips = [f"127.0.0.{41 + i}" for i in range(3)]
    if not all(map(loopback_alias_usable, inside_ips + outside_ips)):
        pytest.skip("127.0.0.x addresses other than 127.0.0.1 cannot be bound here")
    nodes = []
    for i in range(3):
        port, bus, announced = free_port(), free_port(), free_port()
        # Node 0 announces a bus port of its own choice; the others announced port
        # + 10000, which is what CLUSTER MEET reaches.
        announced_bus = free_port() if i == 0 else announced + 10000
        inside = (inside_ips[i], port, bus)
        outside = (outside_ips[i], announced, announced_bus)
        forwarder.forward(outside[:2], inside[:2])
        forwarder.forward((outside[0], outside[2]), (inside[0], inside[2]))
        node = Node(
            tmp_path / f"n{i}",
            port=port,
            config={
                "bind": inside[0],
                "cluster-port": str(bus),
                "cluster-node-timeout": "1500",
                "cluster-announce-ip": outside[0],
                "cluster-announce-port": str(announced),
                "cluster-announce-bus-port": str(announced_bus),
            },
        )
        nodes.append(NattedNode(node.start(wait=False), inside, outside))
    for n in nodes:
        wait_for(lambda n=n: n.call("PING"), 30, message=f"node on {n.inside[0]}")
    return nodes


def test_nodes_behind_nat_form_a_cluster_and_serve_jobs(tmp_path, forwarder):
    nodes = natted_cluster(tmp_path, forwarder)
    try:
        # MEET with the announced addresses (node 0 meets: its bus port is not port+10000).
        for a, b in ((nodes[0], nodes[1]), (nodes[1], nodes[2])):
            assert a.call("CLUSTER", "MEET", b.outside[0], b.outside[1]) == b"OK"
        wait_for(
            lambda: all(links_up(n) == 2 for n in nodes),
            30,
            message="a full mesh",
        )

        expected = {f"{n.outside[0]}:{n.outside[1]}" for n in nodes[1:]}
        expected.add(f"{nodes[0].outside[0]}:{nodes[0].outside[1]}@{nodes[0].outside[2]}")
        for n in nodes:
            lines = n.call("CLUSTER", "NODES").decode().splitlines()
            assert {line.split()[1] for line in lines} == expected
            hello = n.call("HELLO")
            assert {(e[1].decode(), int(e[2])) for e in hello[2:]} == {
                (m.outside[0], m.outside[1]) for m in nodes
            }
        for n in nodes:  # every bus link went through the NAT
            assert forwarder.connections[(n.outside[0], n.outside[2])] >= 2
        # The cluster manager finds every node at its announced address (ip:port@busport).
        check = subprocess.run(
            [
                sys.executable,
                "-m",
                "disque_cli",
                "--cluster",
                "check",
                f"{nodes[1].outside[0]}:{nodes[1].outside[1]}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert check.returncode == 0, check.stdout + check.stderr
        assert f"{nodes[0].outside[0]}:{nodes[0].outside[1]}" in check.stdout

        jid = nodes[0].call("ADDJOB", "q", "across the NAT", 0, "REPLICATE", 3)
        assert all(n.call("SHOW", jid) for n in nodes)
        # A client outside reaches node 2 at its announced address; the job comes over.
        with nodes[2].client(outside=True) as c:
            [[queue, got, body]] = c.execute_command("GETJOB", "TIMEOUT", 5000, "FROM", "q")
            assert (got, body) == (jid, b"across the NAT")
            assert c.execute_command("ACKJOB", jid) == 1
        wait_for(
            lambda: not any(n.call("SHOW", jid) for n in nodes),
            15,
            message="the acknowledged job gone from every node",
        )
    finally:
        for n in nodes:
            n.node.terminate()


def test_create_meets_a_node_behind_nat_at_its_announced_bus_port(tmp_path, forwarder):
    """Node 0's announced bus port is not port + 10000: node 1, meeting it, must be
    told (CLUSTER MEET ip port bus-port); --cluster create reads it off node 0."""
    nodes = natted_cluster(tmp_path, forwarder)
    try:
        order = (nodes[1], nodes[0], nodes[2])
        create = subprocess.run(
            [
                sys.executable,
                "-m",
                "disque_cli",
                "--cluster",
                "create",
                *(f"{n.outside[0]}:{n.outside[1]}" for n in order),
            ],
            capture_output=True,
            text=True,
            timeout=90,
            cwd=ROOT,
        )
        assert create.returncode == 0, create.stdout + create.stderr
        assert forwarder.connections[(nodes[0].outside[0], nodes[0].outside[2])] >= 1
        for n in nodes:
            assert "cluster_reachable_nodes:2" in n.call("CLUSTER", "INFO").decode()
    finally:
        for n in nodes:
            n.node.terminate()


def test_cluster_nodes_file_keeps_announced_bus_ports(tmp_path, forwarder):
    nodes = natted_cluster(tmp_path, forwarder)
    try:
        assert nodes[0].call("CLUSTER", "MEET", nodes[1].outside[0], nodes[1].outside[1])
        wait_for(
            lambda: "cluster_reachable_nodes:1" in nodes[1].call("CLUSTER", "INFO").decode(),
            30,
            message="node 1 reaching node 0",
        )
        nodes[1].node.terminate()
        nodes[1].node.start(wait=False)
        wait_for(
            lambda: links_up(nodes[1]) == 1,
            30,
            message="node 1 linked to node 0 again after a restart (nodes.conf)",
        )
        text = nodes[1].call("CLUSTER", "NODES").decode()
        assert f"{nodes[0].outside[0]}:{nodes[0].outside[1]}@{nodes[0].outside[2]}" in text
    finally:
        for n in nodes:
            n.node.terminate()


def test_bad_announce_values_are_refused(tmp_path):
    for key, value in (
        ("cluster-announce-ip", "not-an-ip"),
        ("cluster-port", "70000"),
        ("cluster-announce-bus-port", "-1"),
    ):
        node = Node(tmp_path / key, config={key: value})
        node.start(wait=False)
        assert node.proc.wait(15) == 1
        assert f"Invalid argument for '{key}'" in node.proc.stderr.read().decode()


def test_cluster_port_moves_the_bus(start_node):
    bus = free_port()
    moved = start_node(config={"cluster-port": str(bus), "cluster-node-timeout": "1500"})
    plain = start_node(config={"cluster-node-timeout": "1500"})
    assert f"cluster bus on port {bus}" in moved.log()
    # The moved node meets: its peer learns the bus port from its MEET.
    assert moved.call("CLUSTER", "MEET", "127.0.0.1", plain.port) == b"OK"
    ClusterOfNodes([moved, plain]).wait_full_mesh()
    assert f"127.0.0.1:{moved.port}@{bus} " in plain.call("CLUSTER", "NODES").decode()


def test_meet_with_a_bus_port_reaches_a_moved_bus(start_node):
    bus = free_port()
    moved = start_node(config={"cluster-port": str(bus), "cluster-node-timeout": "1500"})
    plain = start_node(config={"cluster-node-timeout": "1500"})
    # The plain node meets: told the bus port (Redis 7's third argument), it finds it.
    assert plain.call("CLUSTER", "MEET", "127.0.0.1", moved.port, bus) == b"OK"
    ClusterOfNodes([moved, plain]).wait_full_mesh()
    assert f"127.0.0.1:{moved.port}@{bus} " in plain.call("CLUSTER", "NODES").decode()
    # Met again with the bus port it has (port + 10000 said explicitly): still one node.
    assert moved.call("CLUSTER", "MEET", "127.0.0.1", plain.port, plain.port + 10000) == b"OK"
    assert len(moved.call("CLUSTER", "NODES").decode().splitlines()) == 2
