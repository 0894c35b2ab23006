"""`disque --cluster dead-letters` and disque/dead_letters.py on three real nodes:
dead letters made by a real Worker whose handler raises, listed once each from a
node that is not the one they were made on, replayed (one by --id, then the
rest) and handled by a worker, gone from every node after; and bad input: an
unknown queue, a body that is not a dead-letter record, a bad --id, no terminal."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pexpect
import pytest
from clihelpers import CliResult

from disque import Client, Job, Worker
from disque.dead_letters import DeadLetter, list_dead_letters, replay
from testkit.nodes import ClusterOfNodes, Node, wait_for
from testkit.workers import addr, running

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)


def no_traceback(result: CliResult) -> None:
    assert "Traceback" not in result.out + result.err, result.out + result.err


def held_anywhere(cluster: ClusterOfNodes, job_id: str) -> list[int]:
    """The ports of the nodes that still know the job (SHOW)."""
    return [node.port for node in cluster if node.call("SHOW", job_id) is not None]


class Seen:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: list[bytes] = []

    def add(self, job: Job) -> None:
        with self.lock:
            self.bodies.append(job.body)

    def sorted(self) -> list[bytes]:
        with self.lock:
            return sorted(self.bodies)


def make_dead_letters(cluster: ClusterOfNodes, bodies: list[str]) -> list[DeadLetter]:
    """A worker on node 0 whose handler always raises: each job, added on node 0,
    is dead-lettered to orders:dead after two attempts; listed from node 1 once
    both copies of each are seen (a scan that began before a dead letter was made
    sees it on the nodes scanned after only)."""
    worker = Worker(
        addr(cluster[0]), max_attempts=2, backoff_base=1, backoff_cap=1, fetch_timeout_ms=200
    )

    @worker.handler("orders")
    def always_fails(job: Job) -> None:
        raise ValueError(f"boom on {job.body.decode()}")

    with Client(addr(cluster[0])) as producer:
        for body in bodies:
            producer.add_job("orders", body, retry=30)
    with Client(addr(cluster[1]), stay=True) as client, running(worker):
        return wait_for(
            lambda: (
                (found := list_dead_letters(client, "orders"))
                and len(found) == len(bodies)
                and all(len(letter.holders) == 2 for letter in found)
                and found
            ),
            timeout=30,
            message="the dead letters, both copies of each",
        )


def test_dead_letters_are_listed_once_replayed_and_handled(
    cluster3: ClusterOfNodes, run_cli
) -> None:
    letters = make_dead_letters(cluster3, ["o1", "o2"])
    by_body = {letter.body: letter for letter in letters}
    assert set(by_body) == {b"o1", b"o2"}
    for letter in letters:
        assert letter.queue == "orders" and letter.dead_queue == "orders:dead"
        assert letter.attempts == 2 and letter.body is not None
        assert letter.error == f"ValueError: boom on {letter.body.decode()}"
        assert letter.node is not None and len(letter.holders) == 2  # 2 copies, one queued
        assert letter.original_id and letter.replayable

    # Listed from node 2, once each, with either name of the queue.
    listed = run_cli("--cluster", "dead-letters", addr(cluster3[2]), "orders")
    no_traceback(listed)
    assert listed.returncode == 0, listed.out + listed.err
    for letter in letters:
        assert listed.out.count(letter.id) == 1, listed.out
    assert "ValueError: boom on o1" in listed.out
    assert listed.out.splitlines()[0].split() == [
        "id",
        "queued_on",
        "queue",
        "attempts",
        "age",
        "error",
    ]  # in a pipe: a plain table, no title
    as_json = run_cli("--json", "--cluster", "dead-letters", addr(cluster3[2]), "orders:dead")
    assert as_json.returncode == 0, as_json.err
    rows = json.loads(as_json.out)
    assert sorted(row["body"] for row in rows) == ["o1", "o2"]
    assert {row["id"] for row in rows} == {letter.id for letter in letters}
    assert all(row["queue"] == "orders" and row["attempts"] == 2 for row in rows)

    # Without a terminal and without --yes: nothing is replayed.
    first = by_body[b"o1"]
    refused = run_cli("--cluster", "dead-letters", addr(cluster3[1]), "orders", "--replay")
    no_traceback(refused)
    assert refused.returncode == 1 and "Give --yes to replay them" in refused.out + refused.err
    assert len(held_anywhere(cluster3, first.id)) == 2

    # One by --id: the worker gets it back, the dead letter goes from every node.
    seen = Seen()
    worker = Worker(addr(cluster3[2]), fetch_timeout_ms=200)
    worker.handler("orders")(seen.add)
    with running(worker):
        one = run_cli(
            "--cluster",
            "dead-letters",
            addr(cluster3[1]),
            "orders",
            "--replay",
            "--id",
            first.id,
            "--yes",
        )
        no_traceback(one)
        assert one.returncode == 0, one.out + one.err
        assert f"{first.id}: back on orders as D-" in one.out
        assert "1 dead letter replayed and acknowledged in orders:dead." in one.out
        wait_for(lambda: seen.sorted() == [b"o1"], timeout=20, message="o1 handled again")
        wait_for(lambda: not held_anywhere(cluster3, first.id), message="o1's dead letter gone")
        with Client(addr(cluster3[0]), stay=True) as client:
            assert [letter.id for letter in list_dead_letters(client, "orders")] == [
                by_body[b"o2"].id
            ]
        # The rest, all of them, as JSON.
        rest = run_cli(
            "--json", "--cluster", "dead-letters", addr(cluster3[0]), "orders", "--replay", "--yes"
        )
        no_traceback(rest)
        assert rest.returncode == 0, rest.out + rest.err
        [done] = json.loads(rest.out)
        assert done["id"] == by_body[b"o2"].id and done["queue"] == "orders"
        assert done["job_id"].startswith("D-") and done["error"] is None
        wait_for(lambda: seen.sorted() == [b"o1", b"o2"], timeout=20, message="o2 handled")
        wait_for(lambda: not held_anywhere(cluster3, done["id"]), message="o2's dead letter gone")
    empty = run_cli("--cluster", "dead-letters", addr(cluster3[1]), "orders")
    assert empty.returncode == 0 and "No dead letters in orders:dead." in empty.out, empty.out
    assert seen.sorted() == [b"o1", b"o2"]  # each handled once


def test_replay_from_the_library_adds_first_then_acknowledges(cluster3: ClusterOfNodes) -> None:
    [letter] = [letter for letter in make_dead_letters(cluster3, ["a", "b"]) if letter.body == b"a"]
    with Client(addr(cluster3[2]), stay=True) as client:
        [outcome] = replay(client, [letter])
        assert outcome.ok and outcome.job_id is not None, outcome.error
        shown = client.show(outcome.job_id)
        assert shown is not None and shown["queue"] == b"orders" and shown["body"] == b"a"
        assert shown["repl"] == 3  # as many copies as the cluster allows
        # A second replay of the same dead letter (listed before) adds nothing.
        [again] = replay(client, [letter])
        assert again.job_id is None and "no longer queued" in (again.error or "")
    assert sum(node.call("QLEN", "orders") for node in cluster3) == 1


def test_bad_input_is_one_line_not_a_traceback(cluster3: ClusterOfNodes, run_cli, cli_env) -> None:
    seed = addr(cluster3[0])
    unknown = run_cli("--cluster", "dead-letters", seed, "nosuchqueue")
    no_traceback(unknown)
    assert unknown.returncode == 0 and "No dead letters in nosuchqueue:dead." in unknown.out
    as_json = run_cli("--json", "--cluster", "dead-letters", seed, "nosuchqueue")
    assert as_json.returncode == 0 and json.loads(as_json.out) == []
    nothing = run_cli("--cluster", "dead-letters", seed, "nosuchqueue", "--replay", "--yes")
    assert nothing.returncode == 0 and "nothing to replay" in nothing.out, nothing.out

    # A body that is not a dead-letter record: listed with why, never replayed.
    junk = cluster3[1].call("ADDJOB", "junk:dead", "not json", "0", "REPLICATE", "2").decode()
    listed = run_cli("--cluster", "dead-letters", seed, "junk")
    no_traceback(listed)
    assert listed.returncode == 0, listed.out + listed.err
    assert any(line.startswith(f"{junk}  127.0.0.1:") for line in listed.out.splitlines())
    assert f"[WARN] {junk} (127.0.0.1:{cluster3[1].port}) is not a dead-letter record" in listed.out
    assert "its body is not JSON" in listed.out
    replayed = run_cli("--cluster", "dead-letters", seed, "junk", "--replay", "--yes")
    no_traceback(replayed)
    assert replayed.returncode == 1
    assert f"[ERR] {junk} is not a dead-letter record: its body is not JSON" in replayed.out
    assert cluster3[1].call("QLEN", "junk:dead") == 1

    # A bad --id, a missing queue, a node that is not there.
    bad_id = run_cli(
        "--cluster", "dead-letters", seed, "junk", "--replay", "--id", "D-nope", "--yes"
    )
    no_traceback(bad_id)
    assert bad_id.returncode == 1 and "No dead letter D-nope in junk:dead" in bad_id.out
    assert "Nothing was replayed." in bad_id.out
    usage = run_cli("--cluster", "dead-letters", seed)
    assert usage.returncode == 1 and usage.err.startswith("Usage: disque --cluster dead-letters")
    down = run_cli("--cluster", "dead-letters", "127.0.0.1:1", "orders")
    assert down.returncode == 1 and "[ERR] 127.0.0.1:1: cannot connect" in down.out, down.out

    # At a terminal: asked, and "no" changes nothing.
    cluster3[1].call("ADDJOB", "orders:dead", '{"queue": "orders", "body": "x"}', "0")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "disque_cli", "--cluster", "dead-letters", seed, "orders", "--replay"],
        env=cli_env,
        encoding="utf-8",
        timeout=30,
        cwd=str(ROOT),
    )
    child.expect("Replay 1 dead letter to its queue\\? Type 'yes' to go on: ")
    child.sendline("no")
    child.expect("Aborted: nothing was changed.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert cluster3[1].call("QLEN", "orders:dead") == 1
    assert sum(node.call("QLEN", "orders") for node in cluster3) == 0


def test_a_node_that_does_not_answer_is_named(cluster3: ClusterOfNodes, run_cli) -> None:
    cluster3[1].call("ADDJOB", "orders:dead", '{"queue": "orders", "body": "x"}', "0")
    down: Node = cluster3[2]
    down.pause()
    try:
        result = run_cli(
            "--cluster", "dead-letters", addr(cluster3[0]), "orders", "--timeout", "1", timeout=40
        )
    finally:
        down.resume()
    no_traceback(result)
    assert result.returncode == 1
    assert f"[ERR] 127.0.0.1:{down.port}: " in result.out, result.out
    assert "orders:dead" not in result.err and result.out.count("D-") == 1  # the one listed
