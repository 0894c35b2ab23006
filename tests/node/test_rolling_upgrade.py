"""A rolling upgrade from Disque 1.0-rc1, node by node, under load (#39).

A 3-node C Disque cluster (AOF on) takes jobs from producers and gives them
to consumers for the whole run. Each node in turn is stopped and started
again as our node on its own directory: its nodes.conf (same ID, same
peers) and its AOF (its jobs). Then the other way: a node of ours added,
an old C node made to leave with ``disque --cluster leave`` (its jobs moved
by the consumers on the others), and one node of ours rolled back to C
Disque on its directory. ``disque --cluster check`` at every step.

The ledger: every job an ADDJOB answered with an ID is delivered to a
consumer by the end (lost 0), which acknowledges it; a few are delivered
twice, when a node went down between GETJOB and ACKJOB (RETRY brings them
back). Needs a built C Disque (skipped, saying so, where there is none).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from testkit.nodes import ClusterOfNodes, Node, ReferenceNode, replicates_to_all, wait_for

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"cluster-node-timeout": "1500", "appendonly": "yes"}
QUEUE = "upgrade"
QUEUE_BACKLOG = "backlog"


class Traffic:
    """Producers and consumers on the cluster's nodes, and what they saw.

    ``nodes`` is read at every call: the test swaps a node object for the one
    it started on the same port, and a client only knows host:port anyway.
    Errors (a node down, NOREPL while a node is away, -LEAVING) are counted
    and retried elsewhere, as an application would."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.added: set[bytes] = set()
        self.delivered: dict[bytes, int] = {}
        self.acked: set[bytes] = set()
        self.errors = 0
        self.lock = threading.Lock()
        self.producing = threading.Event()
        self.consuming = threading.Event()
        self.threads = [
            threading.Thread(target=self.produce, daemon=True),
            threading.Thread(target=self.consume, daemon=True),
            threading.Thread(target=self.consume, daemon=True),
        ]

    def __enter__(self) -> Traffic:
        self.producing.set()
        self.consuming.set()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.producing.clear()
        self.consuming.clear()
        for thread in self.threads:
            thread.join(10)

    def client(self) -> redis.Redis:
        port = random.choice([n.port for n in self.nodes])
        return redis.Redis(port=port, protocol=2, socket_timeout=5, socket_connect_timeout=1)

    def produce(self) -> None:
        n = 0
        while self.producing.is_set():
            n += 1
            try:
                with self.client() as c:
                    jid = c.execute_command(
                        "ADDJOB", QUEUE, f"job {n}", "5000", "REPLICATE", "2", "RETRY", "2"
                    )
                with self.lock:
                    self.added.add(jid)
            except redis.RedisError:
                self.count_error()
            time.sleep(0.01)

    def consume(self) -> None:
        while self.consuming.is_set():
            try:
                with self.client() as c:
                    jobs = c.execute_command(
                        "GETJOB", "TIMEOUT", "300", "COUNT", "10", "FROM", QUEUE
                    )
                    for _, jid, _ in jobs or []:
                        with self.lock:
                            self.delivered[jid] = self.delivered.get(jid, 0) + 1
                        c.execute_command("ACKJOB", jid)
                        with self.lock:
                            self.acked.add(jid)
            except redis.RedisError:
                self.count_error()

    def count_error(self) -> None:
        with self.lock:
            self.errors += 1
        time.sleep(0.05)

    def finish(self) -> None:
        """Producers stopped, consumers on until every accepted job reached one."""
        self.producing.clear()
        self.threads[0].join(10)
        wait_for(lambda: not self.lost(), timeout=60, message="every job delivered")

    def lost(self) -> set[bytes]:
        """Jobs an ADDJOB accepted that no consumer got yet. (Not "not acked": an
        ACKJOB whose reply was cut by a node going down may have been done.)"""
        with self.lock:
            return self.added - self.delivered.keys()


def cluster_check(node: Node) -> dict:
    """``disque --cluster check`` as an operator runs it, as JSON."""
    proc = subprocess.run(
        [sys.executable, "-m", "disque_cli", "--cluster", "check", f"127.0.0.1:{node.port}"]
        + ["--json"],
        capture_output=True,
        timeout=30,
        cwd=ROOT,
        text=True,
    )
    report = json.loads(proc.stdout)
    errors = [f["text"] for f in report["findings"] if f["level"] == "ERR"]
    assert report["healthy"] and proc.returncode == 0, errors
    return report


def healthy_mesh(cluster: ClusterOfNodes, nodes: list[Node]) -> list[str]:
    """A full mesh of ``nodes`` where each takes ADDJOB REPLICATE 2 and
    --cluster check finds nothing wrong: the servers its table shows, by port."""
    cluster.wait_full_mesh(nodes=nodes)
    for node in nodes:
        wait_for(lambda n=node: replicates_to_all(n, 2), message=f"{node} replicates")
    report: dict = {}

    def clean() -> bool:
        report.update(cluster_check(nodes[0]))
        return not problems(report)

    wait_for(clean, message="a clean check")
    servers = {row["address"]: row["server"] for row in report["nodes"]}
    return [servers[f"127.0.0.1:{node.port}"] for node in nodes]


def problems(report: dict) -> list[str]:
    return [f["text"] for f in report["findings"] if f["level"] != "OK"]


def wait_delivered(traffic: Traffic, jobs: int) -> None:
    """Producers on, until ``jobs`` more jobs went through."""
    target = len(traffic.acked) + jobs
    wait_for(lambda: len(traffic.acked) >= target, timeout=30, message=f"{jobs} more jobs")


def add_backlog(node: Node, count: int = 10) -> list[bytes]:
    """Jobs added on ``node`` (so it holds each), queued until drain() takes them."""
    return [
        node.call("ADDJOB", QUEUE_BACKLOG, f"backlog {i}", "0", "REPLICATE", "2", "RETRY", "5")
        for i in range(count)
    ]


def drain(nodes: list[Node], queue: str, jobs: set[bytes]) -> None:
    """Take and acknowledge ``jobs`` from ``queue``, from whichever node has them."""
    left = set(jobs)

    def take() -> bool:
        for node in nodes:
            for _, jid, _ in node.call("GETJOB", "NOHANG", "COUNT", "100", "FROM", queue) or []:
                node.call("ACKJOB", jid)
                left.discard(jid)
        return not left

    wait_for(take, timeout=60, interval=0.2, message=f"{len(left)} backlog jobs delivered")


def c_disque_nodes(tmp_path: Path, binary: str) -> list[Node]:
    """The cluster before the upgrade: three C Disque nodes, AOF on."""
    return [ReferenceNode(tmp_path / f"node{i}", binary, dict(CONFIG)) for i in range(3)]


def upgraded(old: Node) -> Node:
    """Stop a C node and start ours on its directory and port."""
    old.terminate()
    return Node(old.dir, port=old.port, config=dict(CONFIG)).start()


def rolled_back(old: Node, binary: str) -> Node:
    old.terminate()
    return ReferenceNode(old.dir, binary, dict(CONFIG), port=old.port).start()


@pytest.mark.timeout(420)
def test_a_c_disque_cluster_upgraded_node_by_node_under_load_loses_no_job(
    tmp_path: Path, reference_binary: str
) -> None:
    nodes = c_disque_nodes(tmp_path, reference_binary)
    with ClusterOfNodes.running(nodes) as cluster:
        healthy_mesh(cluster, nodes)
        ids_before = cluster.node_ids()
        with Traffic(nodes) as traffic:
            wait_delivered(traffic, 50)
            # 1. Each C node in turn becomes ours, on its own directory: the jobs
            # it holds (a backlog nobody consumes yet) come back from its AOF.
            backlog: list[bytes] = []
            for i in range(3):
                held = add_backlog(nodes[i])
                nodes[i] = upgraded(nodes[i])
                assert all(nodes[i].call("SHOW", jid) is not None for jid in held)
                backlog += held
                servers = healthy_mesh(cluster, nodes)
                assert servers == ["python"] * (i + 1) + ["C"] * (2 - i)
                wait_delivered(traffic, 50)
            assert cluster.node_ids() == ids_before  # each kept its ID (nodes.conf)
            assert not any(isinstance(n, ReferenceNode) for n in nodes)
            # 2. Back: one node of ours rolled back to C Disque on its directory.
            held = add_backlog(nodes[0])
            nodes[0] = rolled_back(nodes[0], reference_binary)
            assert all(nodes[0].call("SHOW", jid) is not None for jid in held)
            backlog += held
            assert healthy_mesh(cluster, nodes) == ["C", "python", "python"]
            wait_delivered(traffic, 50)
            drain(nodes, QUEUE_BACKLOG, set(backlog))
            traffic.finish()
        assert traffic.added and not traffic.lost()


@pytest.mark.timeout(420)
def test_a_node_of_ours_added_and_an_old_c_node_made_to_leave_loses_no_job(
    tmp_path: Path, reference_binary: str
) -> None:
    nodes = c_disque_nodes(tmp_path, reference_binary)
    with ClusterOfNodes.running(nodes) as cluster:
        healthy_mesh(cluster, nodes)
        with Traffic(nodes[1:]) as traffic:
            wait_delivered(traffic, 50)
            for i in range(3):
                old = nodes[i]
                new = Node(tmp_path / f"new{i}", config=dict(CONFIG)).start()
                cluster.nodes.append(new)
                assert new.call("CLUSTER", "MEET", "127.0.0.1", str(old.port)) == b"OK"
                healthy_mesh(cluster, [n for n in cluster.nodes if n.is_running()])
                # Clients go to the others; the old node drains and leaves.
                traffic.nodes = [n for n in cluster.nodes if n.is_running() and n is not old]
                leave = subprocess.run(
                    [sys.executable, "-m", "disque_cli", "--cluster", "leave"]
                    + [f"127.0.0.1:{old.port}", "--yes", "--shutdown", "--timeout", "60"],
                    capture_output=True,
                    timeout=90,
                    cwd=ROOT,
                    text=True,
                )
                assert leave.returncode == 0, (
                    leave.stdout + leave.stderr + repr(old.call("JSCAN", "0", "REPLY", "all"))
                )
                wait_for(lambda o=old: not o.is_running(), message=f"{old} stopped")
                survivors = [n for n in cluster.nodes if n.is_running()]
                healthy_mesh(cluster, survivors)
                wait_delivered(traffic, 50)
            assert not any(isinstance(n, ReferenceNode) and n.is_running() for n in cluster)
            traffic.finish()
        assert traffic.added and not traffic.lost()
