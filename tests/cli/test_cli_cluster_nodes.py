"""A node's life with `disque --cluster`: add-node, del-node, set-timeout, and create
and add-node refusing to merge two clusters unless confirmed (redis-cli 7's)."""

from __future__ import annotations

import contextlib
import shlex
import sys
from pathlib import Path

import pexpect
import pytest
import redis
from clihelpers import CliResult

from testkit.nodes import ClusterOfNodes, wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(90)


def addr(node) -> str:
    return f"127.0.0.1:{node.port}"


def node_id(node) -> str:
    return node.call("CLUSTER", "MYID").decode()


def known_ids(node) -> set[str]:
    return {line.split()[0] for line in node.call("CLUSTER", "NODES").decode().splitlines()}


def no_traceback(result: CliResult) -> None:
    assert "Traceback" not in result.out + result.err, result.err


def two_clusters(start_cluster) -> tuple[ClusterOfNodes, ClusterOfNodes]:
    return start_cluster(2), start_cluster(2)


def test_create_refuses_to_merge_two_clusters_unless_confirmed(start_cluster, run_cli) -> None:
    a, b = two_clusters(start_cluster)
    result = run_cli("--cluster", "create", addr(a[0]), addr(b[0]))
    no_traceback(result)
    assert result.returncode == 1
    assert "already belongs to a cluster of 2 nodes: creating this one merges them" in result.out
    assert "Give --yes to go on without asking" in result.out + result.err
    assert known_ids(a[0]) == {node_id(n) for n in a}  # nothing was met
    merged = run_cli("--cluster", "create", addr(a[0]), addr(b[0]), "--yes")
    assert merged.returncode == 0, merged.out
    wait_for(lambda: len(known_ids(a[1])) == 4, 20, message="one cluster of 4")


def test_add_node_joins_a_new_node_and_refuses_a_merge(start_cluster, start_node, run_cli) -> None:
    cluster, other = two_clusters(start_cluster)
    new = start_node(config={"cluster-node-timeout": "1500"})
    result = run_cli("--cluster", "add-node", addr(new), addr(cluster[1]))
    assert result.returncode == 0, result.out + result.err
    assert "joined: all 3 nodes know and reach each other" in result.out
    assert known_ids(cluster[0]) == {node_id(n) for n in [*cluster, new]}
    again = run_cli("--cluster", "add-node", addr(new), addr(cluster[0]))
    assert again.returncode == 0 and "is a member already" in again.out
    refused = run_cli("--cluster", "add-node", addr(other[0]), addr(cluster[0]))
    no_traceback(refused)
    assert refused.returncode == 1
    assert "belongs to another cluster of 2 nodes" in refused.out
    assert node_id(other[0]) not in known_ids(cluster[0])


def test_add_node_asks_on_a_terminal(start_cluster, cli_env) -> None:
    cluster, other = two_clusters(start_cluster)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "disque_cli", "--cluster", "add-node", addr(other[0]), addr(cluster[0])],
        env=cli_env,
        encoding="utf-8",
        timeout=30,
    )
    child.expect("Merge the two clusters\\? Type 'yes' to go on: ")
    child.sendline("no")
    child.expect("Aborted: nothing was changed.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert node_id(other[0]) not in known_ids(cluster[0])


def test_del_node_forgets_a_dead_node_by_its_short_id(start_cluster, run_cli) -> None:
    cluster = start_cluster(3)
    dead = cluster[2]
    dead_id = node_id(dead)
    up = run_cli("--cluster", "del-node", addr(cluster[0]), dead_id[:8], "--yes")
    assert up.returncode == 1 and f"--cluster leave {addr(dead)}" in up.out, up.out
    dead.kill()
    leave = run_cli("--cluster", "leave", addr(dead), "--yes")
    assert leave.returncode == 1 and "`disque --cluster del-node HOST:PORT NODE_ID`" in leave.out
    asked = run_cli("--cluster", "del-node", addr(cluster[0]), dead_id[:8])
    assert asked.returncode == 1 and "Give --yes" in asked.out + asked.err
    assert dead_id in known_ids(cluster[1])
    unknown = run_cli("--cluster", "del-node", addr(cluster[0]), "ffffffffff", "--yes")
    assert unknown.returncode == 1 and "knows no node 'ffffffffff'" in unknown.out
    result = run_cli("--cluster", "del-node", addr(cluster[0]), dead_id[:8], "--yes")
    no_traceback(result)
    assert result.returncode == 0, result.out
    assert f"Node {dead_id} is forgotten by all 2 other nodes." in result.out
    for node in cluster[:2]:
        assert dead_id not in known_ids(node)
    check = run_cli("--cluster", "check", addr(cluster[1]))
    assert check.returncode == 0, check.out


def test_set_timeout_sets_and_saves_it_on_every_node(tmp_path, start_node, run_cli) -> None:
    nodes = []
    for i in range(2):
        conf = tmp_path / f"n{i}.conf"
        conf.write_text("# set-timeout test\n")
        nodes.append(start_node(args=[str(conf)]))
    cluster = ClusterOfNodes(nodes)
    cluster.join()
    result = run_cli("--cluster", "set-timeout", addr(nodes[0]), "4321")
    assert result.returncode == 0, result.out
    assert "[OK] All 2 nodes have cluster-node-timeout 4321." in result.out
    for i, node in enumerate(nodes):
        assert node.call("CONFIG", "GET", "cluster-node-timeout")[1] == b"4321"
        assert "cluster-node-timeout 4321" in (tmp_path / f"n{i}.conf").read_text()
    bad = run_cli("--cluster", "set-timeout", addr(nodes[0]), "soon")
    assert bad.returncode == 1 and "Usage: disque --cluster set-timeout" in bad.err


def test_restart_brings_a_node_back_with_its_queues(start_cluster, run_cli) -> None:
    cluster = start_cluster(3, config={"appendonly": "yes"})
    node = cluster[0]
    for i in range(50):
        node.call("ADDJOB", "work", f"job {i}", 0, "REPLICATE", 2, "RETRY", 300)
    old_id = node_id(node)
    start = " ".join(
        [f"PYTHONPATH={shlex.quote(str(ROOT))}", *map(shlex.quote, node.command_line())]
    )
    try:
        result = run_cli("--cluster", "restart", addr(node), "--start", start, "--yes", timeout=60)
        no_traceback(result)
        assert result.returncode == 0, result.out + result.err
        assert f"[OK] {addr(node)} stopped (SHUTDOWN)." in result.out
        assert "answers again, with its own ID" in result.out
        assert "[OK] All 3 nodes see each other again." in result.out
        assert f"[OK] {addr(node)} restarted: 50 jobs queued (50 before)." in result.out
        assert node_id(node) == old_id and node.call("QLEN", "work") == 50
    finally:
        with contextlib.suppress(redis.RedisError):
            node.call("SHUTDOWN")  # (started by the verb: not the fixture's process)


def test_restart_refuses_to_lose_jobs_without_an_aof(start_cluster, run_cli) -> None:
    cluster = start_cluster(2)
    cluster[0].call("ADDJOB", "work", "x", 0, "REPLICATE", 1)
    result = run_cli("--cluster", "restart", addr(cluster[0]))
    no_traceback(result)
    assert result.returncode == 1
    assert "has appendonly no: the 1 job it holds would come back only from" in result.out
    assert "Nothing was changed" in result.out
    assert cluster[0].call("PING")  # still up
