"""A clean restart with no stall (disque_server/restart.py): a node stopped with
SHUTDOWN or SIGTERM comes back with its queues as they were, its delayed jobs
due when they were due; after kill -9, Disque's rule (active until RETRY)."""

from __future__ import annotations

import time

import pytest
import redis

from testkit.nodes import ClusterOfNodes, Node, wait_for

AOF = {"appendonly": "yes", "appendfsync": "everysec"}


def shutdown(node: Node, *options: str) -> None:
    """SHUTDOWN (it does not reply), and the process gone with exit code 0."""
    with node.client() as c:
        with pytest.raises(redis.ConnectionError):
            c.execute_command("SHUTDOWN", *options)
    assert node.proc is not None
    node.proc.wait(30)
    assert node.proc.returncode == 0


def queued_within(node: Node, queue: str, n: int, seconds: float) -> float:
    """Seconds from now until QLEN ``queue`` is ``n`` (fails past ``seconds``)."""
    start = time.monotonic()
    wait_for(lambda: node.call("QLEN", queue) == n, seconds, message=f"QLEN {queue} = {n}")
    return time.monotonic() - start


@pytest.mark.parametrize("stop", ["SHUTDOWN", "SIGTERM"])
def test_a_clean_restart_queues_its_jobs_again_at_once(start_node, stop):
    node = start_node(config=AOF)
    ids = [node.call("ADDJOB", "q", f"j{i}", "0", "RETRY", "300") for i in range(100)]
    delayed = node.call("ADDJOB", "later", "x", "0", "DELAY", "200", "RETRY", "300")
    added = time.time()
    if stop == "SHUTDOWN":
        shutdown(node)
    else:
        assert node.terminate() == 0
    node.start()
    queued_within(node, "q", 100, 2)
    assert [j[1] for j in node.call("QPEEK", "q", "100")] == ids  # in their order
    assert node.call("QLEN", "later") == 0
    due_in_ms = node.show(delayed)[b"next-requeue-within"]
    expected = (added + 200 - time.time()) * 1000
    assert expected - 2000 <= due_in_ms <= expected + 1000  # (Disque's rule: 500 s)
    assert "clean stop's snapshot" in node.log()


def test_retry_zero_jobs_keep_at_most_once_across_a_clean_restart(start_node):
    node = start_node(config=AOF)
    taken = node.call("ADDJOB", "q", "delivered", "0", "RETRY", "0")
    assert node.call("GETJOB", "FROM", "q")[0][1] == taken
    waiting = node.call("ADDJOB", "q", "never delivered", "0", "RETRY", "0")
    node.restart()
    assert node.call("QLEN", "q") == 1  # the one delivered is not queued again
    assert node.call("GETJOB", "FROM", "q")[0][1] == waiting


def test_after_kill_9_a_restart_keeps_disques_rule(start_node):
    node = start_node(config=AOF)
    node.call("ADDJOB", "q", "x", "0", "RETRY", "300")
    node.restart()  # a clean stop, then
    assert node.call("QLEN", "q") == 1
    node.call("ADDJOB", "q", "y", "0", "RETRY", "300")
    time.sleep(1.5)  # (everysec: on disk)
    node.kill()
    node.start()
    assert node.call("QLEN", "q") == 0  # active until their RETRY, as Disque
    assert not (node.dir / "disque.aof.clean").exists()


def test_an_aof_changed_after_the_clean_stop_is_not_trusted(start_node):
    node = start_node(config=AOF)
    node.call("ADDJOB", "q", "x", "0", "RETRY", "300")
    node.terminate()
    with open(node.dir / "disque.aof", "ab") as f:  # another process appended to it
        f.write(b"*2\r\n$6\r\nDELJOB\r\n$40\r\nD-00000000-000000000000000000000000-0000\r\n")
    node.start()
    assert node.call("QLEN", "q") == 0


def test_without_aof_nothing_is_marked(start_node):
    node = start_node()
    node.call("ADDJOB", "q", "x", "0")
    node.restart()
    assert node.call("QLEN", "q") == 0
    assert not list(node.dir.glob("*.clean"))


def test_a_replicated_job_comes_back_queued_once_in_the_cluster(start_cluster):
    cluster = start_cluster(2, config=AOF)
    a, b = cluster[0], cluster[1]
    jid = a.call("ADDJOB", "q", "x", "0", "REPLICATE", "2", "RETRY", "300")
    assert b.show(jid)[b"state"] == b"active"
    a.restart()
    queued_within(a, "q", 1, 3)  # WILLQUEUE to b first, then queued here
    # Queued here, it is news for b (QUEUED): b's own RETRY starts again.
    wait_for(lambda: b.show(jid)[b"next-requeue-within"] > 290_000, 5, message="b postponed")
    assert b.call("QLEN", "q") == 0


def test_a_copy_queued_elsewhere_while_down_is_not_queued_twice(start_cluster):
    cluster: ClusterOfNodes = start_cluster(2, config=AOF)
    a, b = cluster[0], cluster[1]
    jid = a.call("ADDJOB", "q", "x", "0", "REPLICATE", "2", "RETRY", "2")
    shutdown(a)
    wait_for(lambda: b.call("QLEN", "q") == 1, 10, message="b queues its copy (RETRY 2)")
    a.start()
    wait_for(lambda: a.show(jid).get(b"next-requeue-within", 0) > 1500, 5, message="postponed")
    assert a.call("QLEN", "q") == 0  # b answered QUEUED to its WILLQUEUE
    assert b.call("QLEN", "q") == 1


def test_a_clean_stop_leaves_no_rewrite_behind(start_node):
    """The snapshot grows the AOF past its rewrite threshold: no tick may start a
    background rewrite between it and the exit (its temporary file was left)."""
    node = start_node(
        config={**AOF, "auto-aof-rewrite-min-size": "1", "auto-aof-rewrite-percentage": "1"}
    )
    with node.client() as c:
        pipe = c.pipeline(transaction=False)
        for i in range(5000):
            pipe.execute_command("ADDJOB", "q", f"job {i}", "0", "RETRY", "300")
        pipe.execute()
    shutdown(node)
    assert not list(node.dir.glob("temp-rewriteaof*")), list(node.dir.iterdir())
    assert (
        "Background append only file rewriting started"
        not in node.log().split("AOF rewritten for a controlled restart")[-1]
    )
    node.start()
    queued_within(node, "q", 5000, 5)
