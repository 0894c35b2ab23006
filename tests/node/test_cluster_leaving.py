"""A node leaving the cluster: external replication, -LEAVING, HELLO priority, drain."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from testkit.nodes import links_up, wait_for

ROOT = Path(__file__).resolve().parents[2]


def priority_of(observer, node) -> bytes:
    return {e[2]: e[3] for e in observer.call("HELLO")[2:]}[str(node.port).encode()]


def test_leaving_node_advertises_and_refuses_blocking_getjob(cluster3):
    a, b, c = cluster3
    assert c.call("CLUSTER", "LEAVING", "yes") == b"OK"
    assert c.call("CLUSTER", "LEAVING") == b"yes"
    with pytest.raises(redis.ResponseError, match="LEAVING"):
        c.call("GETJOB", "FROM", "emptyqueue")
    wait_for(lambda: priority_of(a, c) == b"100", 5, message="priority 100 seen by a")
    assert "leaving" in cluster3.flags_of(a, c)
    assert priority_of(c, c) == b"100"
    assert c.call("CLUSTER", "LEAVING", "no") == b"OK"
    wait_for(lambda: priority_of(a, c) == b"1", 5, message="priority back to 1")


def reachable_nodes(node) -> int:
    info = node.call("CLUSTER", "INFO").decode()
    return int(info.split("cluster_reachable_nodes:")[1].split()[0])


def test_reachable_nodes_are_the_replication_candidates(cluster3):
    """cluster_reachable_nodes is Disque's reachable_nodes_count, the nodes a job can be
    replicated to: a leaving node, still linked, is not one."""
    a, b, c = cluster3
    assert reachable_nodes(a) == 2
    c.call("CLUSTER", "LEAVING", "yes")
    wait_for(lambda: reachable_nodes(a) == 1, 5, message="a leaving node not counted")
    assert links_up(a) == 2
    assert a.call("ADDJOB", "q", "x", "0", "REPLICATE", "2")
    with pytest.raises(redis.ResponseError, match="NOREPL"):
        a.call("ADDJOB", "q", "x", "0", "REPLICATE", "3")
    c.call("CLUSTER", "LEAVING", "no")
    wait_for(lambda: reachable_nodes(a) == 2, 5, message="counted again")


def test_leaving_node_replicates_externally(cluster3):
    a, b, c = cluster3
    c.call("CLUSTER", "LEAVING", "yes")
    wait_for(lambda: "leaving" in cluster3.flags_of(a, c), 5, message="leaving flag")
    jid = c.call("ADDJOB", "lq", "body", "5000", "REPLICATE", "2")
    assert c.call("SHOW", jid) is None
    assert c.info("jobs")["registered_jobs"] == 0
    assert a.call("SHOW", jid) and b.call("SHOW", jid)
    wait_for(lambda: a.call("QLEN", "lq") + b.call("QLEN", "lq") == 1, 5, message="queued once")


def test_clients_blocked_on_a_node_that_starts_leaving_are_told(cluster3):
    c = cluster3[2]
    with c.client(socket_timeout=10) as blocked:
        import threading

        out: dict = {}

        def wait() -> None:
            try:
                blocked.execute_command("GETJOB", "TIMEOUT", "8000", "FROM", "nothing")
            except redis.ResponseError as exc:
                out["err"] = str(exc)

        t = threading.Thread(target=wait)
        t.start()
        wait_for(lambda: c.info("clients")["blocked_clients"] == 1, 5, message="client blocked")
        c.call("CLUSTER", "LEAVING", "yes")
        t.join(10)
    assert out.get("err", "").startswith("LEAVING")


def test_leaving_node_drains_to_zero(cluster3):
    a, b, c = cluster3
    ids = [c.call("ADDJOB", "dq", f"j{i}", "5000", "REPLICATE", "1") for i in range(20)]
    c.call("CLUSTER", "LEAVING", "yes")
    got = []
    with a.client(socket_timeout=30) as cl:
        while len(got) < 20:
            reply = cl.execute_command("GETJOB", "TIMEOUT", "10000", "FROM", "dq")
            assert reply is not None
            for _, jid, _ in reply:
                got.append(jid)
                cl.execute_command("ACKJOB", jid)
    assert sorted(got) == sorted(ids)
    wait_for(lambda: c.info("jobs")["registered_jobs"] == 0, 15, message="leaving node drained")


class Flow:
    """Producers and polling consumers on the nodes that stay: they send no NEEDJOBS,
    and a leave must not wait for one."""

    def __init__(self, nodes, queue: str) -> None:
        self.nodes, self.queue = nodes, queue
        self.stop = threading.Event()
        self.acked: set[bytes] = set()
        self.threads = [
            threading.Thread(target=self.produce, args=(n,), daemon=True) for n in nodes
        ] + [threading.Thread(target=self.consume, args=(n,), daemon=True) for n in nodes]

    def __enter__(self) -> Flow:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)

    def produce(self, node) -> None:
        with node.client() as c:
            while not self.stop.is_set():
                c.execute_command("ADDJOB", self.queue, "new", 0, "REPLICATE", 2, "RETRY", 60)
                time.sleep(0.01)

    def consume(self, node) -> None:
        """A polling consumer (GETJOB NOHANG, a pause when empty): it never blocks,
        so its node never asks the others for jobs."""
        with node.client() as c:
            while not self.stop.is_set():
                jobs = c.execute_command("GETJOB", "NOHANG", "COUNT", 50, "FROM", self.queue)
                for _, jid, _ in jobs or []:
                    c.execute_command("ACKJOB", jid)
                    self.acked.add(jid)
                if not jobs:
                    time.sleep(0.01)


@pytest.mark.timeout(120)
def test_a_leave_under_load_hands_2000_jobs_over_within_30s(start_cluster):
    """The leaving node gives its queued jobs away each tick (federation.hand_over):
    with producers and consumers busy on the other nodes, nobody asks for them."""
    cluster = start_cluster(3)
    a, b, leaving = cluster
    with leaving.client() as c:
        pipe = c.pipeline(transaction=False)
        for i in range(2000):
            pipe.execute_command("ADDJOB", "work", f"old {i}", 0, "REPLICATE", 2, "RETRY", 60)
        held = set(pipe.execute())
    assert leaving.call("QLEN", "work") == 2000
    with Flow([a, b], "work") as flow:
        time.sleep(1)  # the flow is steady
        started = time.monotonic()
        leave = subprocess.run(
            [sys.executable, "-m", "disque_cli", "--cluster", "leave", f"127.0.0.1:{leaving.port}"]
            + ["--yes", "--timeout", "60"],
            capture_output=True,
            text=True,
            timeout=90,
            cwd=ROOT,
        )
        took = time.monotonic() - started
    assert leave.returncode == 0, leave.stdout + leave.stderr
    assert took < 30, f"the leave took {took:.1f} s"
    assert held <= flow.acked  # every job it held was delivered and acknowledged
