"""AOF persistence: durability across kill -9, restarts, rewrite, bad files, check tool."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import hiredis
import pytest
import redis

from testkit.nodes import Node, wait_for
from testkit.processes import StartError

AOF_ALWAYS = {"appendonly": "yes", "appendfsync": "always"}


def aof_path(node: Node) -> Path:
    return node.dir / "disque.aof"


def job_ids(node: Node) -> set[bytes]:
    return set(node.call("JSCAN", "0", "BUSYLOOP")[1])


def test_jobs_survive_kill_9_with_appendfsync_always(start_node):
    node = start_node(config=AOF_ALWAYS)
    ids = {node.call("ADDJOB", "q", f"job{i}", "0") for i in range(50)}
    acked = next(iter(ids))
    node.call("ACKJOB", acked)
    node.kill()
    node.start()
    assert job_ids(node) == ids - {acked}
    # Loaded jobs are active, not queued: the retry timer queues them again.
    assert node.call("QLEN", "q") == 0
    show = dict(zip(*[iter(node.call("SHOW", next(iter(ids - {acked}))))] * 2, strict=True))
    assert show[b"state"] == b"active"


def test_jobs_survive_kill_9_with_everysec(start_node):
    node = start_node(config={"appendonly": "yes", "appendfsync": "everysec"})
    ids = {node.call("ADDJOB", "q", f"job{i}", "0") for i in range(20)}
    node.kill()
    node.start()
    assert job_ids(node) == ids


def test_loaded_jobs_are_requeued_by_their_retry_timer(start_node):
    node = start_node(config=AOF_ALWAYS)
    jid = node.call("ADDJOB", "q", "body", "0", "RETRY", "1")
    node.kill()
    node.start()
    got = wait_for(lambda: node.call("GETJOB", "NOHANG", "FROM", "q"), 10, message="re-queue")
    assert got[0][1] == jid


def test_info_persistence_reports_the_aof(start_node):
    node = start_node(config=AOF_ALWAYS)
    info = node.info("persistence")
    assert info["aof_enabled"] == 1
    assert info["aof_state"] == "on"
    assert info["aof_last_write_status"] == "ok"


def test_config_set_appendonly_creates_the_file_from_current_state(start_node):
    node = start_node()
    ids = {node.call("ADDJOB", "q", f"j{i}", "0") for i in range(10)}
    assert not aof_path(node).exists()
    assert node.call("CONFIG", "SET", "appendonly", "yes") == b"OK"
    wait_for(lambda: node.info("persistence")["aof_state"] == "on", 10, message="AOF on")
    more = node.call("ADDJOB", "q", "after", "0")
    node.kill()
    node.start(wait=False)
    node.config["appendonly"] = "yes"
    node.terminate()
    node.start()
    assert job_ids(node) == ids | {more}


def test_bgrewriteaof_under_load_loses_nothing(start_node):
    node = start_node(config=AOF_ALWAYS)
    with node.client() as c:  # pipelined: one fsync a batch, not one a job
        pipe = c.pipeline(transaction=False)
        for i in range(2000):
            pipe.execute_command("ADDJOB", "q", f"j{i}", "0")
        pipe.execute()
    stop = threading.Event()
    added: list[bytes] = []

    def load() -> None:
        with node.client() as c:
            while not stop.is_set():
                added.append(c.execute_command("ADDJOB", "q", "during", "0"))

    writer = threading.Thread(target=load)
    writer.start()
    try:
        wait_for(lambda: len(added) >= 50, 10, message="the writer under way")
        assert node.call("BGREWRITEAOF")  # redis-py turns the status into True
        assert "Background append only file rewriting started" in node.log()
        wait_for(
            lambda: (
                node.info("persistence")["aof_rewrite_in_progress"] == 0
                and node.info("persistence")["aof_last_bgrewrite_status"] == "ok"
            ),
            30,
            message="rewrite done",
        )
    finally:
        stop.set()
        writer.join(10)
    before = job_ids(node)
    assert len(before) == 2000 + len(added)
    node.kill()
    node.start()
    assert job_ids(node) == before


def aof_records(node: Node) -> list[list[bytes]]:
    reader = hiredis.Reader()
    reader.feed(aof_path(node).read_bytes())
    records = []
    while (record := reader.gets()) is not False:
        records.append(record)
    return records


def test_a_rewrite_writes_each_job_once(start_node):
    node = start_node(config=AOF_ALWAYS)
    with node.client() as c:  # pipelined: one fsync a batch, not one a job
        pipe = c.pipeline(transaction=False)
        for i in range(20000):
            pipe.execute_command("ADDJOB", "q", f"j{i}", "0")
        ids = set(pipe.execute())
    node.call("ACKJOB", *list(ids)[:100])
    assert node.call("BGREWRITEAOF")
    wait_for(lambda: not node.info("persistence")["aof_rewrite_in_progress"], 30, message="rewrite")
    records = aof_records(node)
    assert [r[0] for r in records] == [b"LOADJOB"] * (len(ids) - 100)
    assert len({r[1][4:44] for r in records}) == len(ids) - 100  # (the ID in the head)


def test_jobs_changed_while_the_rewrite_walks_come_back_as_they_ended(start_node):
    """The rewrite writes the job index part by part between commands: jobs acked,
    deleted and added while it walks (before and after their part was written)
    are loaded back as they ended."""
    node = start_node(config=AOF_ALWAYS)
    with node.client() as c:
        pipe = c.pipeline(transaction=False)
        for i in range(100000):
            pipe.execute_command("ADDJOB", "q", f"j{i}", "0", "RETRY", "600")
        ids = pipe.execute()
        acked, deleted, added = ids[::7], ids[1::7], []
        assert c.execute_command("BGREWRITEAOF")
        c.execute_command("ACKJOB", *acked[:1000])  # (IDs in every part of the index)
        added.append(c.execute_command("ADDJOB", "q", "new", "0", "RETRY", "600"))
        assert c.info("persistence")["aof_rewrite_in_progress"] == 1, "the walk ended already"
        for i in range(1000, len(acked), 1000):
            c.execute_command("ACKJOB", *acked[i : i + 1000])
            added.append(c.execute_command("ADDJOB", "q", f"new{i}", "0", "RETRY", "600"))
        for i in range(0, len(deleted), 1000):
            c.execute_command("DELJOB", *deleted[i : i + 1000])
        wait_for(
            lambda: not c.info("persistence")["aof_rewrite_in_progress"], 30, message="rewrite"
        )
        assert c.info("persistence")["aof_last_bgrewrite_status"] == "ok"
    expected = (set(ids) - set(acked) - set(deleted)) | set(added)
    assert job_ids(node) == expected
    node.kill()
    node.start()
    assert job_ids(node) == expected


def test_controlled_restart_restores_queues_in_order_with_retry_zero_jobs(tmp_path, start_node):
    conf = tmp_path / "disque.conf"
    conf.write_text("# controlled restart test\nhz 10\n")
    node = start_node(args=[str(conf)])  # appendonly is off
    ids = [node.call("ADDJOB", "q", f"j{i}", "0") for i in range(5)]
    ids.append(node.call("ADDJOB", "q", "at-most-once", "0", "RETRY", "0"))
    delivered = node.call("ADDJOB", "other", "taken", "0")
    node.call("GETJOB", "FROM", "other")
    assert node.call("CONFIG", "SET", "aof-enqueue-jobs-once", "yes") == b"OK"
    assert node.call("CONFIG", "REWRITE") == b"OK"
    with node.client() as c:
        with pytest.raises(redis.ConnectionError):  # SHUTDOWN does not reply
            c.execute_command("SHUTDOWN", "REWRITE-AOF")
    node.proc.wait(10)
    assert node.proc.returncode == 0
    node.start()
    assert [j[1] for j in node.call("QPEEK", "q", "10")] == ids
    assert node.call("QLEN", "other") == 0  # delivered: stays active
    assert node.call("SHOW", delivered) is not None
    assert node.call("CONFIG", "GET", "aof-enqueue-jobs-once") == [b"aof-enqueue-jobs-once", b"no"]
    assert "aof-enqueue-jobs-once no" in conf.read_text()
    assert "# controlled restart test" in conf.read_text()


def test_truncated_aof_is_loaded_and_cut_with_aof_load_truncated(start_node):
    node = start_node(config=AOF_ALWAYS)
    ids = {node.call("ADDJOB", "q", f"j{i}", "0") for i in range(5)}
    node.kill()
    with open(aof_path(node), "ab") as f:
        f.write(b"*15\r\n$7\r\nLOADJOB\r\n$6\r\nqueu")
    size_before = aof_path(node).stat().st_size
    node.start()
    assert job_ids(node) == ids
    assert aof_path(node).stat().st_size < size_before
    assert "aof-load-truncated" in node.log()


def test_truncated_aof_refused_without_aof_load_truncated(start_node):
    node = start_node(config=AOF_ALWAYS)
    node.call("ADDJOB", "q", "x", "0")
    node.kill()
    good = aof_path(node).stat().st_size
    with open(aof_path(node), "ab") as f:
        f.write(b"*2\r\n$6\r\nDELJOB\r\n$40\r\nD-")
    node.config["aof-load-truncated"] = "no"
    with pytest.raises(StartError, match=f"offset {good}"):
        node.start()
    assert "Traceback" not in node.proc.stderr.read().decode() if node.proc.stderr else True


def test_corrupt_aof_stops_start_with_offset_and_no_traceback(start_node):
    node = start_node(config=AOF_ALWAYS)
    node.call("ADDJOB", "q", "x", "0")
    node.kill()
    good = aof_path(node).stat().st_size
    with open(aof_path(node), "ab") as f:
        f.write(b"this is not RESP at all\r\n" * 3)
    with pytest.raises(StartError) as err:
        node.start()
    message = str(err.value)
    assert f"offset {good}" in message
    assert "Traceback" not in message


def test_check_aof_finds_and_fixes_a_truncated_file(start_node):
    node = start_node(config=AOF_ALWAYS)
    ids = {node.call("ADDJOB", "q", f"j{i}", "0") for i in range(3)}
    node.kill()
    path = aof_path(node)
    good = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"*2\r\n$6\r\nDELJ")
    check = [sys.executable, "-m", "disque_server.check_aof"]
    res = subprocess.run(
        [*check, str(path)], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert res.returncode == 1
    assert f"ok_up_to={good}" in res.stdout
    res = subprocess.run(
        [*check, "--fix", str(path)], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert res.returncode == 0 and "truncated" in res.stdout
    assert path.stat().st_size == good
    res = subprocess.run([*check, str(path)], capture_output=True, text=True)
    assert res.returncode == 0 and "valid" in res.stdout
    node.config["aof-load-truncated"] = "no"
    node.start()
    assert job_ids(node) == ids


def test_mass_kill_of_a_cluster_with_aof_still_delivers(start_cluster):
    cluster = start_cluster(3, config=AOF_ALWAYS)
    jid = cluster[0].call("ADDJOB", "q", "precious", "5000", "REPLICATE", "3", "RETRY", "1")
    for node in cluster:
        node.kill()
    for node in cluster:
        node.start()
    cluster.wait_full_mesh()

    def delivered() -> bytes | None:
        for node in cluster:
            got = node.call("GETJOB", "NOHANG", "FROM", "q")
            if got:
                return got[0][1]
        return None

    assert wait_for(delivered, 20, message="the job delivered after the mass restart") == jid


def test_aof_with_a_resp3_map_is_a_format_error_not_a_traceback(start_node):
    node = start_node(config=AOF_ALWAYS)
    node.kill()
    aof_path(node).write_bytes(b"%1\r\n*0\r\n$1\r\nx\r\n")
    with pytest.raises(StartError) as err:
        node.start()
    assert "Bad file format" in str(err.value) and "offset 0" in str(err.value)
    assert "Traceback" not in str(err.value)
