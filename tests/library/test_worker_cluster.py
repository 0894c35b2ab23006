"""The worker on three nodes, producers on one node and the worker on another
(#38): jobs move between nodes (federation), so their counters, their NACK,
WORKING and SHOW, and the dead letters meet what a single node never shows.
Every failure path of the worker runs here: retry and backoff, WORKING, dead
letters, RETRY 0, SIGTERM, a node killed, ``run()`` returning."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from test_worker import BIN, addr, app_module, running, start_worker

from disque import AsyncClient, Client, Job, Worker
from disque.client import ClientPerThread
from disque.metrics import WorkerMetrics
from testkit.nodes import ClusterOfNodes, Node, as_dict, free_port, wait_for


class Runs:
    """Each handler run, per job ID: when it started and ended; how many ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.starts: dict[str, list[float]] = defaultdict(list)
        self.active: dict[str, int] = defaultdict(int)
        self.overlaps = 0  # runs that started while the same job was running

    def start(self, job: Job) -> int:
        """Record a run; which run of the job this is (1 for the first)."""
        with self.lock:
            self.starts[job.id].append(time.monotonic())
            self.active[job.id] += 1
            if self.active[job.id] > 1:
                self.overlaps += 1
            return len(self.starts[job.id])

    def end(self, job: Job) -> None:
        with self.lock:
            self.active[job.id] -= 1

    def count(self, jid: str) -> int:
        with self.lock:
            return len(self.starts[jid])

    def gaps(self, jid: str) -> list[float]:
        with self.lock:
            times = self.starts[jid]
            return [b - a for a, b in zip(times, times[1:], strict=False)]


class SplitWorker(Worker):
    """A worker whose fetching connection is on one node and whose handler threads'
    connections are on another: what a worker seeded with every node gets by chance
    on a cluster, made certain."""

    def __init__(self, fetch_on: Node, threads_on: Node, **options: object) -> None:
        super().__init__(addr(fetch_on), **options)  # type: ignore[arg-type]
        self.threads_on = addr(threads_on)
        self.fetch_thread: threading.Thread | None = None
        self.handler_clients = ClientPerThread(lambda: self.kept(Client(self.threads_on)))

    def run(self, install_signals: bool = True) -> None:
        self.fetch_thread = threading.current_thread()
        super().run(install_signals)

    def client(self) -> Client:
        if threading.current_thread() is self.fetch_thread:
            return super().client()
        return self.handler_clients()


def produce(node: Node, queue: str, n: int, **options: object) -> list[str]:
    with Client(addr(node)) as client:
        return [client.add_job(queue, f"{queue}-{i}", **options) for i in range(n)]  # type: ignore[arg-type]


def known_anywhere(cluster: ClusterOfNodes, jid: str) -> bool:
    return any(n.call("SHOW", jid) is not None for n in cluster if n.is_running())


def acked_everywhere(cluster: ClusterOfNodes, jid: str) -> bool:
    """Every running node has forgotten the job or holds it acknowledged (its GC
    waits for an owner that is down)."""
    return all(
        as_dict(n.call("SHOW", jid)).get(b"state", b"acked") == b"acked"
        for n in cluster
        if n.is_running()
    )


def dead_letters(nodes: list[Node], queue: str) -> list[dict]:
    """The dead-letter records queued on ``nodes`` (QPEEK is per node)."""
    records = []
    for node in nodes:
        for _, jid, body in node.call("QPEEK", queue, "100") or []:
            records.append({**json.loads(body), "record_id": jid.decode(), "on": node})
    return records


def test_failing_twice_then_succeeding_runs_three_times_with_backoff(
    cluster3: ClusterOfNodes, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's story: producers on node 1 (REPLICATE 3: every node holds a
    copy), the worker on node 2, a handler that fails twice then succeeds,
    max_attempts=3: three runs per job, never two at once, 1 s then 2 s apart,
    every job acknowledged cluster-wide, and each failure logged with its traceback."""
    n1, n2, _ = cluster3
    runs = Runs()
    worker = Worker(addr(n2), concurrency=4, max_attempts=3, fetch_timeout_ms=200)

    @worker.handler("orders")
    def flaky(job: Job) -> None:
        try:
            if runs.start(job) <= 2:
                raise ConnectionError(f"payment service down for {job.body.decode()}")
        finally:
            runs.end(job)

    ids = produce(n1, "orders", 6, retry=30)
    with caplog.at_level(logging.WARNING, logger="disque.worker"), running(worker):
        wait_for(
            lambda: all(not known_anywhere(cluster3, jid) for jid in ids),
            timeout=30,
            message="every job acknowledged on every node",
        )
    assert {jid: runs.count(jid) for jid in ids} == dict.fromkeys(ids, 3)
    assert runs.overlaps == 0
    for jid in ids:
        first, second = runs.gaps(jid)
        assert 0.9 < first < 1.9 and 1.9 < second < 3.3, (jid, first, second)
    assert caplog.text.count("Traceback") == 2 * len(ids)
    assert "payment service down for orders-0" in caplog.text
    assert not n1.call("QLEN", "orders:dead") and not n2.call("QLEN", "orders:dead")


def test_nack_goes_to_the_node_that_delivered_the_job(cluster3: ClusterOfNodes) -> None:
    """The job lives on node 1 (REPLICATE 1) and is delivered by node 2; the
    handler thread's own connection is on node 3, which never saw it. The NACK
    must reach node 2: then the job runs again after the 1 s backoff, not after
    its 30 s RETRY."""
    n1, n2, n3 = cluster3
    runs = Runs()
    worker = SplitWorker(n2, n3, max_attempts=3, fetch_timeout_ms=200)

    @worker.handler("split")
    def fails_once(job: Job) -> None:
        if runs.start(job) == 1:
            runs.end(job)
            raise ValueError("first try fails")
        runs.end(job)

    [jid] = produce(n1, "split", 1, replicate=1, retry=30)
    with running(worker):
        wait_for(lambda: runs.count(jid) == 2, timeout=10, message="the second run")
        wait_for(lambda: not known_anywhere(cluster3, jid), timeout=10, message="acknowledged")
    [gap] = runs.gaps(jid)
    assert 0.9 < gap < 1.9


def test_working_goes_to_the_node_that_delivered_the_job(cluster3: ClusterOfNodes) -> None:
    """RETRY 2 and a 5 s handler: WORKING must reach the node that delivered the
    job (node 2, the handler thread's connection being on node 3, which has no
    copy), or the job is queued again and runs twice at once."""
    n1, n2, n3 = cluster3
    runs = Runs()
    worker = SplitWorker(n2, n3, concurrency=2, fetch_timeout_ms=200)

    @worker.handler("long")
    def slow(job: Job) -> None:
        runs.start(job)
        time.sleep(5)
        runs.end(job)

    [jid] = produce(n1, "long", 1, replicate=1, retry=2)
    with running(worker):
        wait_for(lambda: not known_anywhere(cluster3, jid), timeout=20, message="acknowledged")
    assert runs.count(jid) == 1 and runs.overlaps == 0


def test_dead_letters_have_two_copies_and_outlive_their_node(cluster3: ClusterOfNodes) -> None:
    """A handler that always fails, max_attempts=3: every job ends in
    ``<queue>:dead`` as a record on 2 nodes; the node that took the records is
    killed, and the records are queued again by their other copy."""
    n1, n2, n3 = cluster3
    worker = Worker(addr(n2), max_attempts=3, fetch_timeout_ms=200, dead_letter_retry=2)

    @worker.handler("mail")
    def always_fails(job: Job) -> None:
        raise RuntimeError("mailbox full")

    ids = produce(n1, "mail", 4, retry=30)
    everywhere = list(cluster3)
    with running(worker):
        wait_for(
            lambda: len(dead_letters(everywhere, "mail:dead")) == 4,
            timeout=30,
            message="4 dead letters",
        )
    records = dead_letters(everywhere, "mail:dead")
    assert sorted(r["id"] for r in records) == sorted(ids)
    assert {r["attempts"] for r in records} == {3}
    assert {r["error"] for r in records} == {"RuntimeError: mailbox full"}
    for record in records:
        shown = as_dict(record["on"].call("SHOW", record["record_id"]))
        assert len(shown[b"nodes-delivered"]) == 2, shown
    assert all(not known_anywhere(cluster3, jid) for jid in ids)  # the jobs: acknowledged

    holder = records[0]["on"]
    holder.kill()
    survivors = [n for n in cluster3 if n is not holder]
    wait_for(
        lambda: sorted(r["id"] for r in dead_letters(survivors, "mail:dead")) == sorted(ids),
        timeout=20,
        message="the dead letters queued again on the surviving nodes",
    )


def test_a_failing_retry_0_job_is_dropped_and_said_so(
    cluster3: ClusterOfNodes, caplog: pytest.LogCaptureFixture
) -> None:
    """A RETRY 0 job is delivered at most once: when its handler fails it is gone.
    The worker says so (with the traceback), counts it, and acknowledges it, or,
    when the route asks, dead-letters it."""
    n1, n2, _ = cluster3
    worker = Worker(addr(n2), fetch_timeout_ms=200)
    worker.metrics = WorkerMetrics(CollectorRegistry())
    runs = Runs()

    def fails(job: Job) -> None:
        runs.start(job)
        runs.end(job)
        raise KeyError("no such user")

    worker.handler("once")(fails)
    worker.handler("kept", dead_letter_at_most_once=True)(fails)
    [dropped] = produce(n1, "once", 1, replicate=1, retry=0)
    [kept] = produce(n1, "kept", 1, replicate=1, retry=0)
    with caplog.at_level(logging.WARNING, logger="disque.worker"), running(worker):
        wait_for(lambda: dead_letters(list(cluster3), "kept:dead"), timeout=15, message="kept")
        wait_for(lambda: "is dropped" in caplog.text, timeout=15, message="the drop said")
    assert runs.count(dropped) == 1 and runs.count(kept) == 1
    assert f"job {dropped} of once failed and is dropped" in caplog.text
    assert "KeyError: 'no such user'" in caplog.text and "Traceback" in caplog.text
    assert worker.metrics.dropped.labels("once", "")._value.get() == 1
    assert not dead_letters(list(cluster3), "once:dead")
    wait_for(lambda: not known_anywhere(cluster3, dropped), message="the dropped job acked")


def test_the_delivering_node_killed_mid_run_nack_goes_elsewhere(
    cluster3: ClusterOfNodes, caplog: pytest.LogCaptureFixture
) -> None:
    """The node that delivered a running job dies before the handler fails: the
    NACK goes to a node holding a copy (REPLICATE 3), and the job runs again after
    the backoff, not after its RETRY of 30 s."""
    n1, n2, n3 = cluster3
    runs = Runs()
    killed = threading.Event()
    worker = SplitWorker(n2, n3, fetch_timeout_ms=200)

    @worker.handler("jobs")
    def fails_after_the_kill(job: Job) -> None:
        run = runs.start(job)
        runs.end(job)
        if run == 1:
            assert killed.wait(10)
            raise OSError("lost the upstream")

    [jid] = produce(n1, "jobs", 1, replicate=3, retry=30)
    with caplog.at_level(logging.INFO, logger="disque.worker"), running(worker):
        wait_for(lambda: runs.count(jid) == 1, timeout=10, message="the first run")
        n2.kill()
        killed.set()
        wait_for(lambda: runs.count(jid) == 2, timeout=15, message="the second run")
        wait_for(lambda: acked_everywhere(cluster3, jid), timeout=10, message="acknowledged")
    assert f"127.0.0.1:{n2.port}, which delivered job {jid}, is gone" in caplog.text


def worker_script(tmp_path: Path, seeds: list[str], sleep: float) -> Path:
    """An application that runs a Worker itself and stops it once the handler runs."""
    script = tmp_path / "app_run.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, threading, time
            from disque import Worker

            worker = Worker({seeds!r}, grace=0.5, fetch_timeout_ms=200)
            started = threading.Event()

            @worker.handler("slow")
            def slow(job):
                started.set()
                time.sleep({sleep})

            threading.Thread(target=lambda: started.wait() and worker.stop(), daemon=True).start()
            worker.run()
            print("returned", flush=True)
            """
        )
    )
    return script


def test_run_returns_and_the_process_exits_at_once(
    tmp_path: Path, cluster3: ClusterOfNodes
) -> None:
    """``Worker.run()`` from the application's own code, a handler still running
    past the grace period: run returns, the job is NACKed, and the process exits
    then, not when the handler would have ended (60 s)."""
    n1, n2, _ = cluster3
    [jid] = produce(n1, "slow", 1, retry=60)
    script = worker_script(tmp_path, [addr(n2)], sleep=60)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout == "returned\n", proc.stderr
    assert time.monotonic() - started < 20
    nacks = [as_dict(n.call("SHOW", jid)).get(b"nacks") for n in cluster3]
    assert 1 in nacks  # queued again by the NACK, on the node that delivered it


def test_sigterm_past_the_grace_period_nacks_on_the_delivering_node(
    tmp_path: Path, cluster3: ClusterOfNodes
) -> None:
    """``disque-worker`` on node 2, the job made on node 1: SIGTERM past the grace
    period NACKs the job where it was delivered, so it is queued there at once."""
    n1, n2, _ = cluster3
    app_module(tmp_path, n2)  # (its handler sleeps the job's body, in seconds)
    with Client(addr(n1)) as client:
        jid = client.add_job("slow", "30", retry=60)
    proc = start_worker(tmp_path, "--grace", "0.5")
    try:
        wait_for(lambda: (tmp_path / "mark").exists(), timeout=20, message="the handler ran")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
    assert n2.call("QLEN", "slow") == 1
    assert as_dict(n2.call("SHOW", jid))[b"nacks"] == 1


def test_a_list_of_nodes_is_taken_wherever_nodes_are(cluster3: ClusterOfNodes) -> None:
    """``Client(["a:7711", "b:7712"])`` as redis-py's cluster client takes
    startup nodes; anything but strings is a TypeError that says what it got."""
    import asyncio

    seeds = [addr(n) for n in cluster3]
    with Client(seeds) as client:
        jid = client.add_job("listed", "x", retry=60)
        assert client.address is not None and f"127.0.0.1:{client.address[1]}" in seeds
    with Client(seeds[:1], seeds[1], tuple(seeds[2:])) as client:
        assert len(client.seeds) == 3 and client.show(jid) is not None

    async def asynchronous() -> bool:
        async with AsyncClient(seeds) as client:
            return await client.show(jid) is not None  # (REPLICATE 3: on every node)

    assert asyncio.run(asynchronous())
    assert Worker(seeds).nodes == (seeds,)
    for bad in (7711, [7711], None):
        with pytest.raises(TypeError, match='a node is a "host:port" string'):
            Client(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Worker(7711)  # type: ignore[arg-type]


# The worker's guide (the README's "Workers" section before the docs site).
LIBRARY_DOC = Path(__file__).resolve().parents[2] / "docs" / "library.md"


def readme_worker_walkthrough() -> tuple[str, str]:
    """The worker's ``app.py`` and its walkthrough script (docs/library.md)."""
    section = LIBRARY_DOC.read_text().split("### Workers", 1)[1].split("\n## ", 1)[0]
    app = section.split("```python", 1)[1].split("```", 1)[0]
    script = section.split("Walkthrough:", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return app, script


def test_the_readme_walkthrough_runs_as_written(tmp_path: Path, cluster3: ClusterOfNodes) -> None:
    """The walkthrough on this test's three nodes (their ports for 7711-7713), its
    ``sleep`` replaced by a wait for what it waits for (every mail sent, the dead
    letter written): jobs handled while a node stops, the failing one
    dead-lettered and shown by qpeek, the worker stopped."""
    app, script = readme_worker_walkthrough()
    for i, node in enumerate(cluster3):
        app = app.replace(f"127.0.0.1:{7711 + i}", addr(node))
        script = script.replace(f"-p {7711 + i}", f"-p {node.port}")
        script = script.replace(
            "for p in 7712 7713", f"for p in {cluster3[1].port} {cluster3[2].port}"
        )
    script = script.replace("9109", str(free_port(bus=False)))
    (tmp_path / "app.py").write_text(app)
    (tmp_path / "wait_dead.py").write_text(  # (a wait where the docs sleep)
        textwrap.dedent(
            f"""
            import pathlib, time
            from disque import Client

            def done():
                dead = sum(Client(a).qlen("emails:dead") for a in {[addr(n) for n in cluster3[1:]]!r})
                sent = set(pathlib.Path("worker.log").read_text().split())
                return dead == 1 and all(f"mail{{i}}@example.com" in sent for i in range(1, 201))

            deadline = time.monotonic() + 40
            while not done():
                assert time.monotonic() < deadline, "not every job handled after 40 s"
                time.sleep(0.1)
            """
        )
    )
    sleep = next(line for line in script.splitlines() if line.startswith("sleep "))
    script = script.replace(sleep, f"{sys.executable} wait_dead.py")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    # In a session of its own: whatever happens, the worker it starts in the
    # background dies with the test (left running, it would find a later test's node
    # on a port its own node had, and block GETJOBs there).
    proc = subprocess.Popen(
        ["bash", "-e", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 0, stderr
    log = (tmp_path / "worker.log").read_text()
    assert "sending mail1@example.com" in log and "sending mail200@example.com" in log
    assert log.count("Traceback") == 3  # one a failure
    assert "dead-lettered to emails:dead after 3 attempts: ValueError: no address" in log
    [record] = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert record["body"] == "nobody" and record["attempts"] == 3
