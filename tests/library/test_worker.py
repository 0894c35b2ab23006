"""The worker (disque/worker.py, ``disque-worker``) on real nodes: jobs handled and
acknowledged, failures retried with a backoff and dead-lettered, long jobs kept
with WORKING, SIGTERM, a node killed or leaving under a running worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from disque import Client, ConnectionLost, Job, NoNodeAvailable, Retry, Worker
from disque.worker import backoff
from testkit.nodes import ClusterOfNodes, Node, free_port, wait_for

BIN = Path(sys.executable).parent


def addr(node: Node) -> str:
    return f"127.0.0.1:{node.port}"


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """The worker in a thread (no signal handlers: not the main thread's business)."""
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(timeout=worker.grace + 15)
        assert not thread.is_alive(), "the worker did not stop"


class Seen:
    """What handlers were given, thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: Counter[bytes] = Counter()
        self.times: list[float] = []

    def add(self, job: Job) -> None:
        with self.lock:
            self.bodies[job.body] += 1
            self.times.append(time.monotonic())

    def total(self) -> int:
        with self.lock:
            return sum(self.bodies.values())


def test_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff(n, 1.0, 10.0) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    assert backoff(1, 0.1, 5.0) == 1  # NACK DELAY takes whole seconds


def test_handlers_run_and_their_jobs_are_acknowledged(node: Node) -> None:
    seen = Seen()
    worker = Worker(addr(node), concurrency=4, fetch_timeout_ms=200)
    worker.handler("emails")(seen.add)
    worker.handler("sms")(seen.add)
    with Client(addr(node)) as client:
        for i in range(30):
            client.add_job("emails", f"e{i}", retry=60)
        for i in range(10):
            client.add_job("sms", f"s{i}", retry=60)
        with running(worker):
            wait_for(lambda: seen.total() == 40, timeout=20, message="40 jobs handled")
            wait_for(lambda: not list(client.jscan()), timeout=10, message="every job acknowledged")
    assert set(seen.bodies.values()) == {1}, "a job handled twice with no failure"


def fail_to_the_dead_letter_queue(node: Node, seen: Seen) -> tuple[Worker, str]:
    """One job, a handler that always raises, three attempts: run until the job is in
    jobs:dead; the worker and the job's ID."""
    worker = Worker(addr(node), max_attempts=3, backoff_base=1, backoff_cap=1, fetch_timeout_ms=200)

    @worker.handler("jobs")
    def always_fails(job: Job) -> None:
        seen.add(job)
        raise ValueError("boom")

    with Client(addr(node)) as client:
        jid = client.add_job("jobs", "payload", retry=60)
        with running(worker):
            wait_for(lambda: client.qlen("jobs:dead") == 1, timeout=20, message="a dead letter")
    assert seen.total() == 3
    return worker, jid


def test_a_failing_job_is_retried_with_backoff_then_dead_lettered(node: Node) -> None:
    seen = Seen()
    worker, jid = fail_to_the_dead_letter_queue(node, seen)
    assert worker.nack_delay is True
    with Client(addr(node)) as client:
        gaps = [b - a for a, b in zip(seen.times, seen.times[1:], strict=False)]
        assert min(gaps) > 0.8, f"NACK DELAY not honoured: retried after {gaps}"
        [dead] = client.get_job("jobs:dead", nohang=True)
        record = json.loads(dead.body)
        assert record == {
            "queue": "jobs",
            "id": jid,
            "attempts": 3,
            "body": "payload",
            "error": "ValueError: boom",
        }
        assert client.show(jid) is None  # the original is acknowledged


def test_retry_asks_for_its_own_delay(node: Node) -> None:
    seen = Seen()
    worker = Worker(addr(node), fetch_timeout_ms=200)

    @worker.handler("later")
    def not_yet(job: Job) -> None:
        seen.add(job)
        if seen.total() == 1:
            raise Retry(delay=2)

    with Client(addr(node)) as client:
        client.add_job("later", "x", retry=60)
        with running(worker):
            wait_for(lambda: seen.total() == 2, timeout=15, message="the second try")
    assert seen.times[1] - seen.times[0] > 1.8


def test_working_keeps_a_long_job_from_being_queued_again(node: Node) -> None:
    """RETRY 2 and a 4.5 s handler: without WORKING the job would be queued again
    after 2 s and the worker's free slot would run it a second time."""
    seen = Seen()
    worker = Worker(addr(node), concurrency=2, fetch_timeout_ms=200)

    @worker.handler("long")
    def slow(job: Job) -> None:
        seen.add(job)
        time.sleep(4.5)

    with Client(addr(node)) as client:
        jid = client.add_job("long", "x", retry=2)
        with running(worker):
            wait_for(lambda: client.show(jid) is None, timeout=20, message="the job acknowledged")
    assert seen.total() == 1


def test_async_handlers_run_as_tasks(node: Node) -> None:
    import asyncio

    seen = Seen()
    worker = Worker(addr(node), concurrency=5, fetch_timeout_ms=200)

    @worker.handler("io")
    async def fetch(job: Job) -> None:
        await asyncio.sleep(0.05)
        seen.add(job)

    with Client(addr(node)) as client:
        for i in range(20):
            client.add_job("io", f"{i}", retry=60)
        with running(worker):
            wait_for(lambda: seen.total() == 20, timeout=20, message="20 async jobs")
            wait_for(lambda: client.qlen("io") == 0 and not list(client.jscan()), timeout=10)


def test_the_monitor_hook_gets_queue_sizes(node: Node) -> None:
    sizes: list[dict[str, int]] = []
    worker = Worker(addr(node), fetch_timeout_ms=200)
    worker.handler("busy", dead_letter=None)(lambda job: time.sleep(10))
    worker.monitor(every=0.2)(sizes.append)
    with Client(addr(node)) as client:
        for _ in range(5):
            client.add_job("busy", "x", retry=60)
        worker.concurrency = 1
        worker.grace = 0.1
        with running(worker):
            # One job running, one fetched ahead (waiting its turn), three queued.
            wait_for(lambda: sizes and sizes[-1] == {"busy": 3}, timeout=10, message="QLEN 3")


def app_module(tmp_path: Path, node: Node) -> Path:
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            f"""
            import pathlib, time
            from disque import Worker

            worker = Worker("127.0.0.1:{node.port}", fetch_timeout_ms=200)
            mark = pathlib.Path(__file__).with_name("mark")

            @worker.handler("slow")
            def slow(job):
                mark.write_text("started")
                time.sleep(float(job.body))
                mark.write_text("finished")
            """
        )
    )
    return tmp_path / "mark"


def start_worker(tmp_path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "disque-worker"), "app:worker", *args],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigterm_lets_the_running_handler_finish(tmp_path: Path, node: Node) -> None:
    mark = app_module(tmp_path, node)
    with Client(addr(node)) as client:
        jid = client.add_job("slow", "2", retry=60)
        proc = start_worker(tmp_path)
        try:
            wait_for(lambda: mark.exists(), timeout=20, message="the handler started")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0, proc.stderr.read() if proc.stderr else ""
        finally:
            proc.kill()
        assert mark.read_text() == "finished"
        assert client.show(jid) is None


def test_sigterm_past_the_grace_period_queues_the_job_again(tmp_path: Path, node: Node) -> None:
    mark = app_module(tmp_path, node)
    with Client(addr(node)) as client:
        jid = client.add_job("slow", "30", retry=60)
        proc = start_worker(tmp_path, "--grace", "0.5")
        try:
            wait_for(lambda: mark.exists(), timeout=20, message="the handler started")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            proc.kill()
        assert mark.read_text() == "started"
        assert client.qlen("slow") == 1  # NACKed: another worker gets it at once
        shown = client.show(jid)
        assert shown is not None and shown["nacks"] == 1


def test_the_worker_command_refuses_what_it_cannot_run(tmp_path: Path, node: Node) -> None:
    app_module(tmp_path, node)
    for args, message in [
        (["nosuchmodule:worker"], "No module named 'nosuchmodule'"),
        (["app:nothing"], "app:nothing: no disque.Worker or disque.tasks.Tasks there"),
        (["app:worker", "--queues", "other"], "no handler for queue(s): other"),
    ]:
        proc = subprocess.run(
            [str(BIN / "disque-worker"), *args], cwd=tmp_path, capture_output=True, text=True
        )
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_no_node_to_work_with_is_a_clear_error(tmp_path: Path, node: Node) -> None:
    app_module(tmp_path, node)
    node.kill()
    proc = subprocess.run(
        [str(BIN / "disque-worker"), "app:worker"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1 and "no Disque node answered" in proc.stderr
    assert "Traceback" not in proc.stderr


def produce(seeds: list[str], queue: str, bodies: list[str], stop: threading.Event) -> list[str]:
    """Add every body once, replicated to 2 nodes; an ADDJOB whose connection dropped
    is sent again (at-least-once: it may make a second copy)."""
    sent: list[str] = []
    with Client(*seeds) as client:
        for body in bodies:
            while not stop.is_set():
                try:
                    client.add_job(queue, body, replicate=2, retry=2)
                    sent.append(body)
                    break
                except (ConnectionLost, NoNodeAvailable):
                    time.sleep(0.1)
            time.sleep(0.005)
    return sent


def test_no_job_lost_when_the_workers_node_is_killed(cluster3: ClusterOfNodes) -> None:
    """Producers and a worker run; the node the worker fetches from is killed. Every
    job is handled at least once. A job can be handled twice (at-least-once): one
    acknowledged on the killed node only, or queued again by a surviving copy after
    its RETRY while the worker's ACK was lost with the node; such duplicates are
    counted, not refused."""
    seeds = [addr(n) for n in cluster3]
    seen = Seen()
    worker = Worker(*seeds, concurrency=4, fetch_timeout_ms=200)
    worker.handler("orders")(seen.add)
    bodies = [f"order-{i}" for i in range(150)]
    stop = threading.Event()
    result: list[list[str]] = []
    producer = threading.Thread(
        target=lambda: result.append(produce(seeds, "orders", bodies, stop)), daemon=True
    )
    with running(worker):
        producer.start()
        wait_for(lambda: seen.total() >= 30, timeout=20, message="30 jobs handled")
        fetching = worker.fetching.address
        victim = next(n for n in cluster3 if n.port == fetching[1])
        victim.kill()
        producer.join(timeout=60)
        stop.set()
        assert result and result[0] == bodies
        wait_for(
            lambda: set(seen.bodies) >= {body.encode() for body in bodies},
            timeout=60,
            message="every job handled after the kill",
        )
    twice = sum(1 for n in seen.bodies.values() if n > 1)
    assert twice <= len(bodies) // 2, f"{twice} jobs handled more than once"


def test_a_leaving_node_sends_the_worker_elsewhere(cluster3: ClusterOfNodes) -> None:
    seeds = [addr(n) for n in cluster3]
    seen = Seen()
    worker = Worker(*seeds, fetch_timeout_ms=200)
    worker.handler("tasks")(seen.add)
    with running(worker):
        wait_for(lambda: worker.fetching and worker.fetching.address, timeout=10)
        fetching = worker.fetching.address
        leaving = next(n for n in cluster3 if n.port == fetching[1])
        leaving.call("CLUSTER", "LEAVING", "yes")
        other = next(n for n in cluster3 if n is not leaving)
        with Client(addr(other)) as client:
            for i in range(10):
                client.add_job("tasks", f"t{i}", retry=60, replicate=2)  # (none on a leaving node)
        wait_for(lambda: seen.total() == 10, timeout=30, message="10 jobs handled elsewhere")
        assert worker.fetching.address != fetching


def test_against_c_disque_nack_falls_back_to_plain(c_disque: Node) -> None:
    worker, jid = fail_to_the_dead_letter_queue(c_disque, Seen())
    assert worker.nack_delay is False
    with Client(addr(c_disque)) as client:
        assert client.show(jid) is None


def test_against_c_disque_a_job_round_trip(c_disque: Node) -> None:
    with Client(addr(c_disque)) as client:
        jid = client.add_job("emails", b"hello", retry=60)
        [job] = client.get_job("emails", timeout=1000, with_counters=True)
        assert job == Job(jid, "emails", b"hello")
        assert client.ack(jid) == 1
        assert client.get_job("emails", nohang=True) == []


# The worker's guide (the README's "Workers" section before the docs site).
LIBRARY_DOC = Path(__file__).resolve().parents[2] / "docs" / "library.md"


def test_the_readme_worker_example_runs_with_metrics(
    tmp_path: Path, cluster3: ClusterOfNodes
) -> None:
    """The docs' worker app.py (docs/library.md), on this test's cluster, run by
    disque-worker with --metrics-port: its jobs are handled, and Prometheus
    counts them."""
    section = LIBRARY_DOC.read_text().split("### Workers", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    for i, node in enumerate(cluster3):
        code = code.replace(f"127.0.0.1:{7711 + i}", addr(node))
    (tmp_path / "app.py").write_text(code)
    metrics_port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "disque-worker"), "app:worker", "--metrics-port", str(metrics_port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        with Client(addr(cluster3[1])) as client:
            ids = [client.add_job("emails", f"mail{i}@example.com", retry=5) for i in range(3)]
            wait_for(
                lambda: all(client.show(jid) is None for jid in ids),
                timeout=20,
                message="the README worker's jobs acknowledged",
            )

        def processed() -> float:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as page:
                text = page.read().decode()
            line = 'disque_worker_jobs_processed_total{queue="emails",task=""} '
            return float(text.split(line, 1)[1].split("\n", 1)[0]) if line in text else 0.0

        wait_for(lambda: processed() == 3.0, timeout=10, message="3 jobs in the metrics")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert sorted(line for line in out.splitlines() if line.startswith("sending")) == [
        "sending mail0@example.com",
        "sending mail1@example.com",
        "sending mail2@example.com",
    ]
