"""Demand (cluster/demand.py): a job reaches a consumer waiting on another node
at once, not at that node's next NEEDJOBS (Disque: up to 30 s later).

The consumer blocks on node B, the cluster goes idle long enough for B's
NEEDJOBS backoff to run (its broadcasts at 0, then 4 s, then 12 s), and a job
is added on node A: it is pushed to B (YOURJOBS) as it is queued.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from testkit.nodes import ClusterOfNodes, Node, ReferenceNode, as_dict, replicates_to_all, wait_for

pytestmark = pytest.mark.timeout(90)

IDLE_S = 5.0  # past B's first NEEDJOBS broadcast and into its 4 s backoff
DELIVERY_BOUND_S = 1.0  # generous: the benchmark's figure is milliseconds


def blocked_on(node: Node, queue: str) -> int:
    return as_dict(node.call("QSTAT", queue)).get(b"blocked", 0)


def block_consumer(node: Node, queue: str) -> redis.Connection:
    """A client blocked in GETJOB TIMEOUT 0 on that node (its reply read later)."""
    conn = redis.Connection(host="127.0.0.1", port=node.port, protocol=2, socket_timeout=30)
    conn.send_command("GETJOB", "TIMEOUT", "0", "FROM", queue)
    wait_for(lambda: blocked_on(node, queue) == 1, message=f"a client blocked on {node}")
    return conn


def seconds_to_reach(conn: redis.Connection, producer: Node, queue: str) -> tuple[float, bytes]:
    """Add a job on the producer; how long until the blocked consumer has it."""
    start = time.monotonic()
    jid = producer.call("ADDJOB", queue, "payload", "0", "REPLICATE", "1", "RETRY", "30")
    reply = conn.read_response()
    elapsed = time.monotonic() - start
    [[got_queue, got_id, body]] = reply
    assert (got_queue, got_id, body) == (queue.encode(), jid, b"payload")
    return elapsed, jid


def test_a_job_reaches_a_consumer_on_another_node_after_an_idle_pause(cluster3) -> None:
    a, b, _ = cluster3
    conn = block_consumer(b, "wait")
    try:
        time.sleep(IDLE_S)  # the scenario: an idle spell (B's broadcasts back off)
        elapsed, jid = seconds_to_reach(conn, a, "wait")
    finally:
        conn.disconnect()
    assert elapsed < DELIVERY_BOUND_S, f"{elapsed:.2f}s from node A to node B's consumer"
    b.call("ACKJOB", jid)


def test_nodes_waiting_on_one_queue_share_its_jobs(cluster3) -> None:
    """Consumers on B and C, jobs added one at a time on A: both get jobs."""
    a, b, c = cluster3
    total = 20
    got: Counter[int] = Counter()
    done = threading.Event()

    def consume(node: Node) -> None:
        with node.client(socket_timeout=30) as client:
            while not done.is_set():
                reply = client.execute_command("GETJOB", "TIMEOUT", "200", "FROM", "shared")
                for _, jid, _ in reply or []:
                    client.execute_command("ACKJOB", jid)
                    got[node.port] += 1
                    if sum(got.values()) >= total:
                        done.set()

    threads = [threading.Thread(target=consume, args=(n,), daemon=True) for n in (b, c)]
    for t in threads:
        t.start()
    wait_for(lambda: blocked_on(b, "shared") and blocked_on(c, "shared"), message="both waiting")
    for i in range(total):
        a.call("ADDJOB", "shared", f"job-{i}", "0", "REPLICATE", "1", "RETRY", "30")
    assert done.wait(20), f"only {sum(got.values())} of {total} jobs consumed: {got}"
    for t in threads:
        t.join(5)
    assert got[b.port] >= total // 4 and got[c.port] >= total // 4, got


def test_jobs_pushed_to_a_consumer_that_left_go_on_to_the_one_that_came(cluster3) -> None:
    """A consumer leaves node A and one starts on node B at once: jobs added on C
    while A's demand lingers are pushed to both in turn; A's go on to B when A
    takes its demand back (2 s), not once A's import rate falls to 0 (5 s) and
    B's backed-off NEEDJOBS asks again (12 s)."""
    a, b, c = cluster3
    conn = block_consumer(a, "moved")
    try:
        _, jid = seconds_to_reach(conn, c, "moved")  # C knows A's demand
    finally:
        conn.disconnect()
    a.call("ACKJOB", jid)
    got: list[bytes] = []
    done = threading.Event()

    def consume_on_b() -> None:
        with b.client(socket_timeout=30) as client:
            while not done.is_set():
                reply = client.execute_command("GETJOB", "TIMEOUT", "200", "FROM", "moved")
                for _, job_id, _ in reply or []:
                    client.execute_command("ACKJOB", job_id)
                    got.append(job_id)
                    if len(got) >= 10:
                        done.set()

    thread = threading.Thread(target=consume_on_b, daemon=True)
    thread.start()
    wait_for(lambda: blocked_on(b, "moved") == 1, message="B's consumer waiting")
    start = time.monotonic()
    for i in range(10):
        c.call("ADDJOB", "moved", f"job-{i}", "0", "REPLICATE", "1", "RETRY", "60")
    finished = done.wait(20)
    took = time.monotonic() - start
    done.set()
    thread.join(5)
    assert finished, f"{len(got)} of 10 jobs reached B's consumer"
    assert took < 5, f"the last job reached B after {took:.1f} s"


def test_a_consumer_gone_takes_its_demand_back(cluster3) -> None:
    """Once B's consumer has stopped waiting (ENOUGHJOBS, DEMAND_LINGER_MS later), a
    job added on A stays on A; while the demand stood, jobs went to B."""
    a, b, _ = cluster3
    conn = block_consumer(b, "gone")
    try:
        _, jid = seconds_to_reach(conn, a, "gone")
    finally:
        conn.disconnect()
    b.call("ACKJOB", jid)
    left = time.monotonic()

    def a_keeps_a_new_job() -> bool:
        a.call("ADDJOB", "gone", "later", "0", "REPLICATE", "1", "RETRY", "30")
        return a.call("QLEN", "gone") > 0  # (a push takes it out in the same loop pass)

    wait_for(a_keeps_a_new_job, timeout=15, interval=0.2, message="the demand withdrawn")
    assert time.monotonic() - left >= 1.5  # not at once: a worker between GETJOBs keeps it


def test_a_paused_queue_is_not_pushed(cluster3) -> None:
    a, b, _ = cluster3
    conn = block_consumer(b, "held")
    try:
        a.call("PAUSE", "held", "out")
        a.call("ADDJOB", "held", "x", "0", "REPLICATE", "1")
        assert a.call("QLEN", "held") == 1
        a.call("PAUSE", "held", "none")  # (not broadcast: only A's pause changes)
        reply = conn.read_response()
    finally:
        conn.disconnect()
    assert reply[0][2] == b"x"
    assert a.call("QLEN", "held") == 0


# ---- with Disque 1.0-rc1's nodes ---------------------------------------------------------


@pytest.fixture
def c_consumer_cluster(tmp_path: Path, reference_binary: str):
    """A C node (the consumer's) and two of ours."""
    nodes = [
        ReferenceNode(tmp_path / "c0", reference_binary, {"cluster-node-timeout": "1500"}),
        Node(tmp_path / "ours1", config={"cluster-node-timeout": "1500"}),
        Node(tmp_path / "ours2", config={"cluster-node-timeout": "1500"}),
    ]
    with ClusterOfNodes.running(nodes) as cluster:
        for node in cluster:
            wait_for(lambda n=node: replicates_to_all(n, 3), message=f"{node} replicates")
        yield cluster


def test_a_c_nodes_needjobs_is_demand_too(c_consumer_cluster) -> None:
    """A C node's consumer, idle: its NEEDJOBS, as it sends it, brings the job at once."""
    c_node, ours, _ = c_consumer_cluster
    conn = block_consumer(c_node, "cwait")
    try:
        time.sleep(IDLE_S)
        elapsed, jid = seconds_to_reach(conn, ours, "cwait")
    finally:
        conn.disconnect()
    assert elapsed < DELIVERY_BOUND_S, f"{elapsed:.2f}s from our node to the C node's consumer"
    c_node.call("ACKJOB", jid)
    wait_for(lambda: ours.call("SHOW", jid) is None, message="the job collected on our node")
