"""`disque --cluster create | check | info | call | leave` against real clusters."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pexpect
import pytest
from clihelpers import CliResult

from testkit.nodes import (
    ClusterOfNodes,
    ReferenceNode,
    as_dict,
    free_port,
    job_with_second_owner,
    replicates_to_all,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(45)


def addr(node) -> str:
    return f"127.0.0.1:{node.port}"


def known_ids(node) -> set[str]:
    return {line.split()[0] for line in node.call("CLUSTER", "NODES").decode().splitlines()}


def node_id(node) -> str:
    return node.call("CLUSTER", "MYID").decode()


def no_traceback(result: CliResult) -> None:
    assert "Traceback" not in result.out + result.err, result.err


def table_rows(text: str) -> dict[str, list[str]]:
    """Plain table lines (the format in a pipe) by address."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 2 and re.fullmatch(r"127\.0\.0\.1:\d+", fields[1]):
            rows[fields[1]] = fields
    return rows


class Consumer(threading.Thread):
    """GETJOB + ACKJOB on one node until `wanted` jobs are acknowledged or stopped."""

    def __init__(self, node, queue: str, wanted: int) -> None:
        super().__init__(daemon=True)
        self.node, self.queue, self.wanted = node, queue, wanted
        self.acked = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with self.node.client() as client:
            while self.acked < self.wanted and not self.stop.is_set():
                jobs = client.execute_command(
                    "GETJOB", "TIMEOUT", 200, "COUNT", 10, "FROM", self.queue
                )
                for _queue, job_id, _body in jobs or []:
                    client.execute_command("ACKJOB", job_id)
                    self.acked += 1


# ---- create ---------------------------------------------------------------------------


def test_create_meets_every_node_and_waits_for_the_mesh(start_cluster, run_cli) -> None:
    cluster = start_cluster(3, mesh=False)
    result = run_cli("--cluster", "create", *(addr(n) for n in cluster))
    assert result.returncode == 0, result.out + result.err
    ids = {node_id(n) for n in cluster}
    for n in cluster:  # full mesh as soon as create returns: no waiting here
        assert known_ids(n) == ids
        info = n.call("CLUSTER", "INFO").decode()
        assert "cluster_reachable_nodes:2" in info
    rows = table_rows(result.out)
    assert set(rows) == {addr(n) for n in cluster}
    for n in cluster:
        short_id, _address, flags, jobs, queues, server = rows[addr(n)]
        assert node_id(n).startswith(short_id) and len(short_id) == 8
        assert (flags, jobs, queues, server) == ("-", "0", "0", "python")
    assert "[OK] All 3 nodes know and reach each other." in result.out
    # Again on a complete cluster: nothing to meet, same answer.
    assert run_cli("--cluster", "create", *(addr(n) for n in cluster)).returncode == 0


def test_create_stops_before_meeting_when_a_node_is_down(start_cluster, run_cli) -> None:
    cluster = start_cluster(2, mesh=False)
    dead = free_port()
    result = run_cli("--cluster", "create", addr(cluster[0]), addr(cluster[1]), f"127.0.0.1:{dead}")
    no_traceback(result)
    assert result.returncode == 1
    assert f"[ERR] 127.0.0.1:{dead}: cannot connect: Connection refused" in result.out
    assert "no node was met" in result.out
    assert known_ids(cluster[0]) == {node_id(cluster[0])}


def test_cluster_usage_errors(run_cli) -> None:
    cases = [
        (["--cluster", "create", "127.0.0.1:7711"], "at least two nodes"),
        (["--cluster", "create", "127.0.0.1:7711", "nohost"], "Invalid address 'nohost'"),
        (["--cluster", "check"], "Usage: disque --cluster check host:port"),
        (["--cluster", "leave", "127.0.0.1:7711", "--bogus"], "Unrecognized option"),
        (["--cluster", "leave", "127.0.0.1:7711", "--timeout", "soon"], "Invalid number"),
        (
            ["--cluster", "check", "127.0.0.1:7711", "--shutdown"],
            "Unrecognized option for --cluster check: '--shutdown' (usage: disque --cluster "
            "check host:port [--timeout SECS])",
        ),
        (["--cluster", "frobnicate"], "Unknown --cluster subcommand 'frobnicate'"),
    ]
    for args, message in cases:
        result = run_cli(*args)
        no_traceback(result)
        assert result.returncode == 1 and message in result.err, (args, result.err)
    listing = run_cli("--cluster", "help")
    assert listing.returncode == 0
    assert all(verb in listing.out for verb in ("create", "check", "info", "call", "leave"))
    assert "  leave         host:port [--yes] [--shutdown] [--timeout SECS]\n" in listing.out


# ---- check ----------------------------------------------------------------------------


def test_check_a_healthy_cluster(start_cluster, run_cli) -> None:
    cluster = start_cluster(3)
    result = run_cli("--cluster", "check", addr(cluster[1]))
    assert result.returncode == 0, result.out
    assert "[ERR]" not in result.out
    assert "[OK] All 3 nodes are reachable." in result.out
    assert "[OK] All nodes agree about the cluster: 3 members." in result.out
    assert "[OK] No node is flagged PFAIL or FAIL." in result.out
    report = json.loads(run_cli("--json", "--cluster", "check", addr(cluster[0])).out)
    assert report["healthy"] is True
    assert {node["id"] for node in report["nodes"]} == {node_id(n) for n in cluster}


def test_check_shows_jobs_queued_on_no_node(start_cluster, run_cli) -> None:
    """A job delivered and not acknowledged (or waiting for its RETRY after a
    restart) is in no queue: QLEN misses it, the check names its queue."""
    cluster = start_cluster(3)
    a, b = cluster[0], cluster[1]
    taken = [a.call("ADDJOB", "orders", f"o{i}", "0", "REPLICATE", "2") for i in range(3)]
    a.call("GETJOB", "COUNT", "3", "FROM", "orders")  # delivered, not acknowledged
    a.call("ADDJOB", "orders", "still queued", "0", "REPLICATE", "2")
    b.call("ADDJOB", "reports", "later", "0", "DELAY", "600")
    result = run_cli("--cluster", "check", addr(b))
    assert result.returncode == 0, result.out  # a warning, not an error
    line = next(x for x in result.out.splitlines() if "orders:" in x)
    assert re.match(r"\[WARN\] orders: 3 jobs queued on no node \(next re-queue in [45]m ", line)
    assert addr(a) in line and "delivered and not acknowledged yet" in line
    assert "[OK] 1 job in their DELAY (reports)." in result.out
    report = json.loads(run_cli("--json", "--cluster", "check", addr(a)).out)
    orders = next(w for w in report["waiting"] if w["queue"] == "orders")
    assert orders["jobs"] == len(taken) and orders["delayed"] == 0
    assert 240_000 < orders["next_requeue_ms"] <= 300_000
    for jid in taken:
        a.call("ACKJOB", jid)
    wait_for(
        lambda: (
            "[OK] 1 job in their DELAY" in run_cli("--cluster", "check", addr(a)).out
            and "orders:" not in run_cli("--cluster", "check", addr(a)).out
        ),
        10,
        message="the check clean once acknowledged",
    )


def test_check_fails_when_a_node_is_killed(start_cluster, run_cli) -> None:
    cluster = start_cluster(3)
    victim_id = node_id(cluster[2])
    cluster[2].kill()
    wait_for(
        lambda: cluster.flags_of(cluster[0], cluster[2]) & {"pfail", "fail"},
        10,
        message="the others to flag the killed node",
    )
    result = run_cli("--cluster", "check", addr(cluster[0]))
    no_traceback(result)
    assert result.returncode == 1
    assert (
        f"[ERR] {addr(cluster[2])} ({victim_id[:8]}) is unreachable: cannot connect: "
        "Connection refused"
    ) in result.out
    assert re.search(
        rf"\[ERR\] {addr(cluster[2])} \({victim_id[:8]}\) is flagged P?FAIL by "
        rf"{re.escape(addr(cluster[0]))}",
        result.out,
    ), result.out
    report = json.loads(run_cli("--json", "--cluster", "check", addr(cluster[1])).out)
    assert report["healthy"] is False


def test_check_fails_when_a_node_is_paused(start_cluster, run_cli) -> None:
    cluster = start_cluster(3)
    cluster[1].pause()
    try:
        started = time.monotonic()
        result = run_cli("--cluster", "check", addr(cluster[0]), "--timeout", "1")
        assert time.monotonic() - started < 10
    finally:
        cluster[1].resume()
    no_traceback(result)
    assert result.returncode == 1
    assert re.search(
        rf"\[ERR\] {addr(cluster[1])} \(\w{{8}}\) is unreachable: no reply "
        r"within 1s",
        result.out,
    ), result.out


def test_check_through_a_dead_seed(run_cli) -> None:
    port = free_port()
    result = run_cli("--cluster", "check", f"127.0.0.1:{port}")
    no_traceback(result)
    assert result.returncode == 1
    assert result.out.strip() == (f"[ERR] 127.0.0.1:{port}: cannot connect: Connection refused")


# ---- info and call -----------------------------------------------------------------------


def test_info_per_node(start_cluster, run_cli) -> None:
    cluster = start_cluster(3)
    for i in range(4):
        cluster[0].call("ADDJOB", "q1", f"job{i}", 0, "REPLICATE", 1)
    cluster[1].call("ADDJOB", "q2", "job", 0, "REPLICATE", 1)
    cluster[1].call("ADDJOB", "q3", "taken", 0, "REPLICATE", 1)
    cluster[1].call("GETJOB", "FROM", "q3")  # delivered, not acknowledged: in no queue
    result = run_cli("--cluster", "info", addr(cluster[2]))
    assert result.returncode == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == [
        "id",
        "address",
        "flags",
        "jobs",
        "queues",
        "unqueued",
        "clients",
        "blocked",
        "memory",
        "ops/s",
        "leaving",
    ]
    rows = table_rows(result.out)
    assert rows[addr(cluster[0])][2:6] == ["-", "4", "1", "0"]
    assert rows[addr(cluster[1])][2:6] == ["-", "2", "2", "1"]
    assert rows[addr(cluster[2])][2:6] == ["-", "0", "0", "0"]
    assert all(row[-1] == "no" for row in rows.values())
    assert all(re.fullmatch(r"[\d.]+[BKMG]", row[8]) for row in rows.values())
    # -p instead of host:port; JSON for pipelines.
    text = run_cli("-p", str(cluster[0].port), "--json", "--cluster", "info").out
    assert text.startswith('[{"id":"'), "compact separators"
    data = json.loads(text)
    by_address = {node["address"]: node for node in data}
    assert by_address[addr(cluster[0])]["jobs"] == 4
    # used_memory is the data (issue 14), not the interpreter: bytes, and jobs cost some.
    assert all(isinstance(node["memory"], int) for node in data), "memory in bytes"
    assert by_address[addr(cluster[0])]["memory"] > 4 * 100
    assert by_address[addr(cluster[0])]["id"] == node_id(cluster[0])
    cluster[1].call("CLUSTER", "LEAVING", "yes")
    data = json.loads(run_cli("--json", "--cluster", "info", addr(cluster[0])).out)
    assert [
        (node["leaving"], node["flags"]) for node in data if node["address"] == addr(cluster[1])
    ] == [(True, "leaving")]


def test_info_reports_a_dead_node_and_fails(start_cluster, run_cli) -> None:
    cluster = start_cluster(3)
    cluster[2].kill()
    result = run_cli("--cluster", "info", addr(cluster[0]))
    no_traceback(result)
    assert result.returncode == 1
    assert set(table_rows(result.out)) == {addr(n) for n in cluster}
    errors = [line for line in result.out.splitlines() if line.startswith("[ERR]")]
    assert errors == [
        f"[ERR] {addr(cluster[2])} ({known_id_prefix(cluster, 2)}): "
        "cannot connect: Connection refused"
    ]


def replaced_node(start_cluster, workdir: Path):
    """Three nodes; the third killed, seen FAIL, replaced by a fresh node (a new ID)
    on its port and met again: (cluster, old ID, the fresh node)."""
    cluster = start_cluster(3)
    old_id = node_id(cluster[2])
    cluster[2].kill()
    wait_for(
        lambda: "fail" in cluster.flags_of(cluster[0], cluster[2]),
        15,
        message="the killed node to be seen FAIL",
    )
    fresh = cluster[2].replaced(workdir)
    cluster[0].call("CLUSTER", "MEET", "127.0.0.1", str(fresh.port))
    new_id = node_id(fresh)
    for observer in cluster[:2]:
        wait_for(
            lambda o=observer: (
                new_id in known_ids(o)
                and not any(
                    "handshake" in line for line in o.call("CLUSTER", "NODES").decode().splitlines()
                )
            ),
            15,
            message="the new node to be known",
        )
    return cluster, old_id, fresh


def test_check_and_info_tell_a_replaced_node_from_its_successor(
    start_cluster, run_cli, tmp_path
) -> None:
    cluster, old_id, fresh = replaced_node(start_cluster, tmp_path / "fresh")
    try:
        new_id = node_id(fresh)
        check = run_cli("--cluster", "check", addr(cluster[0]))
        info = run_cli("--cluster", "info", addr(cluster[0]))
        as_json = json.loads(run_cli("--json", "--cluster", "info", addr(cluster[0])).out)
        # What check suggests makes the cluster whole again.
        run_cli("--cluster", "call", addr(cluster[0]), "cluster", "forget", old_id)
        wait_for(
            lambda: run_cli("--cluster", "check", addr(cluster[0])).returncode == 0,
            15,
            message="check to pass once the old ID is forgotten",
        )
    finally:
        fresh.terminate()
    for result in (check, info):
        no_traceback(result)
        assert result.returncode == 1, result.out
    # One row per node ID: the old one down (its address answers as another node),
    # the new one up; never a duplicate, never "all reachable".
    lines = check.out.splitlines()
    row_ids = [
        line.split()[0]
        for line in lines
        if re.match(r"[0-9a-f]{8} ", line) and line.split()[1] == addr(fresh)
    ]
    assert sorted(row_ids) == sorted([old_id[:8], new_id[:8]]), check.out
    assert "All 4 nodes are reachable" not in check.out
    assert not any(line.startswith("[OK] All") and "reachable" in line for line in lines)
    assert (
        f"[ERR] {addr(fresh)} ({old_id[:8]}) is unreachable: {addr(fresh)} now answers "
        f"as node {new_id[:8]} (replaced?)"
    ) in lines, check.out
    assert f"[ERR] {addr(fresh)} ({old_id[:8]}) is flagged FAIL by " in check.out
    assert re.search(
        rf"^\[ERR\] {addr(fresh)} is held by 2 node IDs \(\w{{8}}, \w{{8}}\): forget "
        rf"the one that is gone with `disque --cluster call {addr(cluster[0])} "
        rf"cluster forget {old_id}`$",
        check.out,
        re.M,
    ), check.out
    rows = [line.split() for line in info.out.splitlines() if re.match(r"[0-9a-f]{8} ", line)]
    assert sorted(row[0] for row in rows if row[1] == addr(fresh)) == sorted(
        [old_id[:8], new_id[:8]]
    ), info.out
    header = info.out.splitlines()[0].split()
    assert "flags" in header, info.out
    flags = {row[0]: row[header.index("flags")] for row in rows}
    assert "fail" in flags[old_id[:8]] and flags[new_id[:8]] == "-", info.out
    by_id = {row["id"]: row for row in as_json}
    assert by_id[old_id]["jobs"] is None and "fail" in by_id[old_id]["flags"]
    assert by_id[new_id]["jobs"] == 0 and by_id[new_id]["error"] is None


def known_id_prefix(cluster, index: int) -> str:
    """The ID of cluster[index] as cluster[0] lists it (the node itself may be dead)."""
    for line in cluster[0].call("CLUSTER", "NODES").decode().splitlines():
        if line.split()[1].endswith(f":{cluster[index].port}"):
            return line.split()[0][:8]
    raise AssertionError("node not listed")


def test_call_runs_a_command_on_every_node(start_cluster, run_cli) -> None:
    cluster = start_cluster(3)
    cluster[0].call("ADDJOB", "q", "body", 0)
    result = run_cli("--cluster", "call", addr(cluster[0]), "QLEN", "q")
    assert result.returncode == 0, result.err
    assert result.out.splitlines()[0] == ">>> Calling QLEN q on 3 nodes"
    replies = dict(line.split(": ", 1) for line in result.out.splitlines()[1:])
    assert replies == {addr(cluster[0]): "1", addr(cluster[1]): "0", addr(cluster[2]): "0"}
    # Terminal rendering (typed replies) and JSON lines.
    typed = run_cli("--no-raw", "--cluster", "call", addr(cluster[1]), "cluster", "myid")
    for n in cluster:
        assert f'{addr(n)}: "{node_id(n)}"' in typed.out
    lines = run_cli("--json", "--cluster", "call", addr(cluster[2]), "hello").out.splitlines()
    hellos = [json.loads(line) for line in lines]
    assert {h["node"] for h in hellos} == {addr(n) for n in cluster}
    assert all(h["reply"]["id"] == h["id"] and len(h["reply"]["nodes"]) == 3 for h in hellos)
    # An error reply is rendered like any reply; a dead node is one line and exit 1.
    cluster[1].kill()
    result = run_cli("--cluster", "call", addr(cluster[0]), "qlen")
    no_traceback(result)
    assert result.returncode == 1
    assert f"{addr(cluster[0])}: ERR wrong number of arguments" in result.out
    assert re.search(
        rf"^\[ERR\] {addr(cluster[1])} \(\w{{8}}\): cannot connect: Connection "
        "refused$",
        result.out,
        re.M,
    ), result.out


def test_call_returns_within_its_timeout_on_a_paused_node(start_cluster, run_cli) -> None:
    cluster = start_cluster(3)
    cluster[2].pause()
    try:
        started = time.monotonic()
        result = run_cli("--cluster", "call", addr(cluster[0]), "qlen", "q")  # 5 s a reply
        took = time.monotonic() - started
        assert 4 < took < 15, took
        shorter = run_cli("--cluster", "call", addr(cluster[0]), "qlen", "q", "--timeout", "1")
        assert time.monotonic() - started - took < 6
    finally:
        cluster[2].resume()
    for run in (result, shorter):
        no_traceback(run)
        assert run.returncode == 1
        assert f"{addr(cluster[1])}: 0" in run.out  # the others answered
    assert re.search(rf"\[ERR\] {addr(cluster[2])} \(\w{{8}}\): no reply within 5s", result.out)
    assert re.search(rf"\[ERR\] {addr(cluster[2])} \(\w{{8}}\): no reply within 1s", shorter.out)
    assert "--timeout" not in shorter.out  # taken as the option, not sent as arguments


# ---- leave ----------------------------------------------------------------------------


def leave_process(cli_env, node, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "disque_cli", "--cluster", "leave", addr(node), *extra],
        cwd=ROOT,
        env=cli_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def is_leaving(node) -> bool:
    return node.call("CLUSTER", "LEAVING") == b"yes"


def _lines_until(proc: subprocess.Popen, start: str) -> list[str]:
    """The lines a running process prints, up to the first that starts with `start`."""
    lines: list[str] = []
    while not lines or not lines[-1].startswith(start):
        line = proc.stdout.readline()
        assert line, "".join(lines) + f"\n(ended before a line starting {start!r})"
        lines.append(line)
    return lines


def test_leave_drains_jobs_then_forgets_the_node(start_cluster, cli_env) -> None:
    cluster = start_cluster(3)
    leaving, consumer_node = cluster[0], cluster[1]
    for i in range(20):
        leaving.call("ADDJOB", "work", f"job{i}", 0, "REPLICATE", 1)
    assert leaving.info()["registered_jobs"] == 20
    gone_id = node_id(leaving)
    proc = leave_process(cli_env, leaving, "--yes", "--timeout", "30")
    consumer = Consumer(consumer_node, "work", 20)
    try:
        # The consumer starts once the drain is watched, so that progress is seen.
        seen = _lines_until(proc, "    jobs left: 20/20")
        assert is_leaving(leaving)
        consumer.start()
        out, err = proc.communicate(timeout=35)
        out = "".join(seen) + out
    finally:
        consumer.stop.set()
        proc.kill()
    assert proc.returncode == 0, out + err
    assert consumer.acked == 20
    assert leaving.info()["registered_jobs"] == 0
    for other in cluster[1:]:
        assert gone_id not in known_ids(other)
    assert "Drained: 20 jobs left" in out, out
    assert f"[OK] {addr(cluster[1])}" in out and f"forgot {gone_id[:8]}" in out
    assert "left the cluster" in out and "Traceback" not in err


def test_leave_is_not_held_up_by_acks_waiting_for_a_node_that_left(start_cluster, run_cli) -> None:
    """An acknowledged job whose garbage collection waits only on a node that was
    forgotten can never be collected (Disque keeps it until its TTL): the node
    holding it can still leave, once the drain stalls on such jobs alone."""
    cluster = start_cluster(3)
    leaving, other, departed = cluster
    jid = leaving.call("ADDJOB", "q", "job", 0, "REPLICATE", 3, "RETRY", 60)
    departed_id = node_id(departed)
    departed.kill()
    for node in (leaving, other):
        assert node.call("CLUSTER", "FORGET", departed_id) == b"OK"
    assert leaving.call("ACKJOB", jid) == 1
    wait_for(
        lambda: as_dict(other.call("SHOW", jid)).get(b"state") == b"acked",
        message="the ACK on the other node",
    )
    assert leaving.info()["registered_jobs"] == 1  # waiting for the departed node
    result = run_cli("--cluster", "leave", addr(leaving), "--yes", "--timeout", "30", timeout=60)
    assert result.returncode == 0, result.out + result.err
    assert "1 acknowledged job stay" in result.out, result.out
    assert node_id(leaving) not in known_ids(other)


def test_leave_goes_on_when_the_node_dies_while_draining(start_cluster, cli_env) -> None:
    cluster = start_cluster(3)
    leaving = cluster[0]
    for i in range(5):
        leaving.call("ADDJOB", "nobody-reads", f"job{i}", 0, "REPLICATE", 1)
    gone_id = node_id(leaving)
    proc = leave_process(cli_env, leaving, "--yes", "--shutdown")
    try:
        wait_for(lambda: is_leaving(leaving), 10, message="CLUSTER LEAVING yes")
        leaving.kill()
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err
    assert "went away while draining with 5 jobs still on it" in out
    assert "nothing to shut down" in out
    for other in cluster[1:]:
        assert gone_id not in known_ids(other)
        assert f"[OK] {addr(other)}" in out


def test_leave_reports_an_unreachable_member_and_shuts_down(start_cluster, run_cli) -> None:
    cluster = start_cluster(3)
    leaving, dead = cluster[0], cluster[2]
    gone_id = node_id(leaving)
    dead.kill()
    result = run_cli("--cluster", "leave", addr(leaving), "--yes", "--shutdown")
    no_traceback(result)
    assert result.returncode == 1
    assert gone_id not in known_ids(cluster[1])
    assert re.search(rf"^\[ERR\] {addr(dead)} \(\w{{8}}\): cannot connect", result.out, re.M)
    assert f"[OK] {addr(leaving)} shut down." in result.out
    wait_for(lambda: not leaving.is_running(), 10, message="the node to exit")
    summary = {
        line.split()[0]: line.split(None, 3)[1:]
        for line in result.out.splitlines()
        if line.startswith("127.0.0.1:")
    }  # address, id, role, result
    assert summary[addr(leaving)][1:] == ["leaving", "leaving; no job left; shut down"]
    assert summary[addr(cluster[1])][1:] == ["other", "forgot it"]
    assert summary[addr(dead)][1] == "other"
    assert summary[addr(dead)][2].startswith("could not forget it: cannot connect")


def test_a_node_that_left_does_not_rejoin_when_started_again(start_cluster, run_cli) -> None:
    cluster = start_cluster(3)
    leaving = cluster[2]
    gone_id = node_id(leaving)
    result = run_cli("--cluster", "leave", addr(leaving), "--yes", "--shutdown")
    assert result.returncode == 0, result.out
    assert f"[OK] {addr(leaving)} forgot its peers" in result.out
    wait_for(lambda: not leaving.is_running(), 10, message="the node to exit")
    leaving.start()  # from its old directory: its nodes.conf
    assert known_ids(leaving) == {gone_id}  # it knows no peer: nothing to rejoin
    assert leaving.call("CLUSTER", "LEAVING") == b"yes"  # and says it left
    for other in cluster[:2]:
        assert gone_id not in known_ids(other)
    check = run_cli("--cluster", "check", addr(cluster[0]))
    assert check.returncode == 0 and "All 2 nodes are reachable" in check.out


def test_leave_on_a_terminal_asks_and_shows_progress(start_cluster, spawn) -> None:
    cluster = start_cluster(3)
    leaving = cluster[2]
    for i in range(10):
        leaving.call("ADDJOB", "tty", f"job{i}", 0, "REPLICATE", 1)
    child = spawn("--cluster", "leave", addr(leaving), timeout=20)
    child.expect("Removing 127.0.0.1")
    child.expect("Type 'yes' to go on: ")
    child.sendline("yes")
    child.expect("draining")
    child.expect("jobs moved")
    consumer = Consumer(cluster[0], "tty", 10)
    consumer.start()
    child.expect(r"Drained: 10 jobs left")
    child.expect("left the cluster")
    child.expect(pexpect.EOF)
    child.close()
    consumer.stop.set()
    assert child.exitstatus == 0
    assert "Traceback" not in child.before


def test_leave_can_be_refused(start_cluster, spawn) -> None:
    cluster = start_cluster(2)
    child = spawn("--cluster", "leave", addr(cluster[0]))
    child.expect("Type 'yes' to go on: ")
    child.sendline("no")
    child.expect("Aborted: nothing was changed.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert not is_leaving(cluster[0])


def test_leave_without_a_terminal_refuses_unless_yes(start_cluster, cli_env) -> None:
    cluster = start_cluster(2)
    leaving = cluster[1]
    leaving.call("ADDJOB", "kept", "job", 0, "REPLICATE", 1)
    proc = leave_process(cli_env, leaving)  # stdin: /dev/null, as from cron or ssh
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err
    assert (
        "[ERR] Standard input is not a terminal, so nobody can confirm: nothing was "
        "changed. Give --yes to remove the node without asking."
    ) in out
    assert not is_leaving(leaving)
    assert node_id(leaving) in known_ids(cluster[0])
    assert leaving.info()["registered_jobs"] == 1


@pytest.mark.timeout(60)
def test_leave_a_ten_node_cluster(start_cluster, run_cli) -> None:
    cluster = start_cluster(10)
    leaving = cluster[4]
    gone_id = node_id(leaving)
    result = run_cli("--cluster", "leave", addr(leaving), "--yes", "--shutdown", timeout=40)
    assert result.returncode == 0, result.out + result.err
    assert result.out.count(f"forgot {gone_id[:8]}") == 9
    for other in cluster:
        if other is not leaving:
            assert gone_id not in known_ids(other)
    wait_for(lambda: not leaving.is_running(), 10, message="the node to exit")
    check = run_cli("--cluster", "check", addr(cluster[0]))
    assert check.returncode == 0, check.out
    assert "All 9 nodes are reachable" in check.out


def test_password_applies_to_every_node(start_cluster, run_cli) -> None:
    cluster = start_cluster(3, config={"requirepass": "s3cret"}, mesh=False)
    addresses = [addr(n) for n in cluster]
    result = run_cli("-a", "s3cret", "--no-auth-warning", "--cluster", "create", *addresses)
    assert result.returncode == 0, result.out
    check = run_cli("-a", "s3cret", "--no-auth-warning", "--cluster", "check", addresses[0])
    assert check.returncode == 0, check.out
    wrong = run_cli("-a", "nope", "--no-auth-warning", "--cluster", "info", addresses[1])
    no_traceback(wrong)
    assert wrong.returncode == 1
    assert wrong.out.strip().startswith(f"[ERR] {addresses[1]}: AUTH failed: ERR")
    missing = run_cli("--cluster", "call", addresses[1], "ping")
    assert missing.returncode == 1 and "NOAUTH" in missing.out


def test_leave_without_consumers_explains_and_stops_at_the_timeout(start_cluster, run_cli) -> None:
    cluster = start_cluster(2)
    leaving = cluster[1]
    for i in range(3):
        leaving.call("ADDJOB", "idle-queue", f"job{i}", 0, "REPLICATE", 1)
    for i in range(2):  # delivered, never acknowledged: queued on no node
        leaving.call("ADDJOB", "taken", f"t{i}", 0, "REPLICATE", 1, "RETRY", 600)
    assert len(leaving.call("GETJOB", "COUNT", 2, "FROM", "taken")) == 2
    result = run_cli("--cluster", "leave", addr(leaving), "--yes", "--timeout", "6")
    no_traceback(result)
    assert result.returncode == 1
    text = " ".join(result.out.split())  # (the note wraps)
    assert (
        f"No job has left {addr(leaving)} for 5s. It hands its queued jobs to the other "
        "nodes; a job it holds goes once acknowledged"
    ) in text
    assert re.search(r"Queued on no node: taken \(2, next re-queue in (9m|10m) [0-9]+s\)", text)
    other = addr(cluster[0])  # handed over, queued there, a copy kept here
    assert f"Copies of jobs queued on other nodes: idle-queue (3, queued on {other})" in text
    assert cluster[0].call("QLEN", "idle-queue") == 3
    assert f"[ERR] 5 jobs still on {addr(leaving)} after 6s." in result.out
    # Not forgotten, still leaving, jobs still there: ready for another run.
    assert node_id(leaving) in known_ids(cluster[0])
    assert is_leaving(leaving) and leaving.info()["registered_jobs"] == 5


def test_leave_names_the_stray_copies_a_c_disque_node_holds(
    tmp_path: Path, reference_binary: str, run_cli
) -> None:
    """Three C Disque nodes. A job on A (owners A and B) that federation moved to L is
    on no list there (Disque's receiveYourJobs), so it stays on L once the ACK on A
    collected it everywhere else: leave cannot drain it, and says which job it is
    and how to end it; the ACKJOB it suggests does, and leave then completes."""
    config = {"cluster-node-timeout": "1500"}
    nodes = [ReferenceNode(tmp_path / f"c{i}", reference_binary, dict(config)) for i in range(3)]
    with ClusterOfNodes.running(nodes) as cluster:
        for node in cluster:
            wait_for(lambda n=node: replicates_to_all(n, 3), message=f"{node} replicates")
        a, leaving, b = nodes
        jid, queue = job_with_second_owner(a, b, retry=1)
        wait_for(lambda: leaving.info()["registered_jobs"] == 0, 10, message="L holds none")
        [[_, got, _]] = leaving.call("GETJOB", "TIMEOUT", "10000", "FROM", queue)
        assert got == jid  # moved from A (NEEDJOBS, YOURJOBS)
        assert a.call("ACKJOB", jid) == 1
        wait_for(lambda: a.call("SHOW", jid) is None and b.call("SHOW", jid) is None, 10)
        result = run_cli("--cluster", "leave", addr(leaving), "--yes", "--timeout", "8", timeout=60)
        no_traceback(result)
        assert result.returncode == 1, result.out
        assert "Stray copies here: 1." in result.out, result.out
        assert "Stray copies among them: 1" in result.out and jid.decode() in result.out
        assert leaving.call("ACKJOB", jid) == 1
        result = run_cli(
            "--cluster", "leave", addr(leaving), "--yes", "--timeout", "30", timeout=60
        )
        assert result.returncode == 0, result.out + result.err
        assert node_id(leaving) not in known_ids(a)
