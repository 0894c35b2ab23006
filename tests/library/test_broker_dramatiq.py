"""Dramatiq on Disque (disque/brokers/dramatiq.py), with Dramatiq's own Worker and
its own ``dramatiq`` command, on a real 3-node cluster: actors, retries, delays,
results, dead letters, and a node killed mid-run with no message lost."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from testkit.nodes import ClusterOfNodes, Node, wait_for

dramatiq = pytest.importorskip("dramatiq")

from dramatiq.middleware import Retries  # noqa: E402
from dramatiq.results import Results  # noqa: E402

from disque.brokers.dramatiq import DisqueBackend, DisqueBroker  # noqa: E402

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(180)


def addr(node: Node) -> str:
    return f"127.0.0.1:{node.port}"


@contextmanager
def dramatiq_worker(broker: DisqueBroker, threads: int = 4) -> Iterator[None]:
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=200)
    worker.start()
    try:
        yield
    finally:
        worker.stop()


@pytest.fixture
def broker(cluster3: ClusterOfNodes) -> Iterator[DisqueBroker]:
    seeds = [addr(n) for n in cluster3]
    broker = DisqueBroker(seeds, replicate=2, retry=20)
    for middleware in broker.middleware:
        if isinstance(middleware, Retries):
            middleware.min_backoff, middleware.max_backoff = 100, 500
    broker.add_middleware(Results(backend=DisqueBackend(seeds)))
    dramatiq.set_broker(broker)
    yield broker
    broker.close()


def test_actors_retries_delays_results_and_dead_letters(
    broker: DisqueBroker, cluster3: ClusterOfNodes
) -> None:
    runs: list[str] = []

    @dramatiq.actor(store_results=True, max_retries=3)
    def count_words(text: str) -> int:
        runs.append(text)
        if text == "flaky" and runs.count(text) < 3:
            raise ConnectionError("the page did not load")
        return len(text.split())

    @dramatiq.actor(max_retries=1)
    def always_fails() -> None:
        raise ValueError("never works")

    counted = count_words.send("one two three")
    flaky = count_words.send("flaky")
    delayed = count_words.send_with_options(args=("a b",), delay=2000)
    sent = time.monotonic()
    always_fails.send()
    with dramatiq_worker(broker):
        assert counted.get_result(block=True, timeout=20_000) == 3
        assert flaky.get_result(block=True, timeout=20_000) == 1
        assert delayed.get_result(block=True, timeout=20_000) == 2
        assert time.monotonic() - sent >= 1.5, "the delay was kept"
        assert runs.count("flaky") == 3
        assert counted.get_result() == 3, "a result reads twice"
        wait_for(
            lambda: any(n.call("QLEN", "default.XQ") for n in cluster3),
            timeout=20,
            message="the failing message dead-lettered",
        )
        broker.join("default", timeout=20_000)


def write_app(tmp_path: Path, seeds: list[str]) -> Path:
    done = tmp_path / "done.txt"
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            f"""
            import os
            import dramatiq
            from disque.brokers.dramatiq import DisqueBroker

            dramatiq.set_broker(DisqueBroker({seeds!r}, replicate=2, retry=5))

            @dramatiq.actor(max_retries=20, min_backoff=100, max_backoff=1000)
            def count_words(n, text):
                with open({str(done)!r}, "a") as out:  # O_APPEND: one line per write
                    out.write(f"{{n}} {{len(text.split())}}\\n")
            """
        )
    )
    return done


def test_dramatiqs_own_worker_command_loses_nothing_when_a_node_dies(
    tmp_path: Path, cluster3: ClusterOfNodes
) -> None:
    seeds = [addr(n) for n in cluster3]
    done = write_app(tmp_path, seeds)
    broker = DisqueBroker(seeds, replicate=2, retry=5)  # a lost copy queued again soon
    dramatiq.set_broker(broker)

    @dramatiq.actor(actor_name="count_words")
    def count_words(n: int, text: str) -> None: ...

    total = 400
    for n in range(total):
        count_words.send(n, "lorem ipsum dolor")
    with open(tmp_path / "worker.log", "w") as log:  # (a pipe nobody reads fills up)
        proc = subprocess.Popen(
            [str(BIN / "dramatiq"), "app", "--processes", "1", "--threads", "4"],
            cwd=tmp_path,
            stderr=log,
            text=True,
        )

    def handled() -> set[int]:
        lines = done.read_text().splitlines() if done.exists() else []
        return {int(line.split()[0]) for line in lines}

    try:
        wait_for(lambda: len(handled()) >= total // 4, timeout=60, message="a quarter done")
        cluster3[1].kill()  # mid-run: its copies, its clients and its queue gone
        assert len(handled()) < total, "killed while messages were left"
        wait_for(lambda: len(handled()) == total, timeout=90, message="every message handled")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        stderr = (tmp_path / "worker.log").read_text()
    assert handled() == set(range(total)), stderr[-3000:]
    assert all(line.endswith(" 3") for line in done.read_text().splitlines())


Across = tuple[DisqueBroker, DisqueBroker, DisqueBackend]


@pytest.fixture
def across(cluster3: ClusterOfNodes) -> Iterator[Across]:
    """The producer's broker on node 1, the workers' on node 2 (results kept there),
    and a result reader on node 3."""
    n1, n2, n3 = cluster3
    producer = DisqueBroker([addr(n1)], replicate=2, retry=20)
    workers = DisqueBroker([addr(n2)], replicate=2, retry=20)
    workers.add_middleware(Results(backend=DisqueBackend(addr(n2))))
    producer.declare_queue("default")
    yield producer, workers, DisqueBackend(addr(n3))
    producer.close()
    workers.close()


def test_results_cross_three_nodes_none_lost_none_late(across: Across) -> None:
    """Sent on node 1, run by a worker on node 2, its results read on node 3: each
    result comes well within a timeout shorter than Disque's NEEDJOBS backoff
    (which let a result wait up to 30 s before the push: docs/cluster.md)."""
    producer, workers, reader = across

    @dramatiq.actor(broker=workers, store_results=True)
    def double(n: int) -> int:
        return 2 * n

    with dramatiq_worker(workers):
        for i in range(100):
            message = producer.enqueue(double.message(i))
            assert reader.get_result(message, block=True, timeout=5_000) == 2 * i, i


def test_dramatiqs_pipeline_across_three_nodes(across: Across) -> None:
    """Dramatiq's own pipeline (each actor's result passed to the next by its
    Pipelines middleware): sent on node 1, run on node 2, the last result read on
    node 3."""
    producer, workers, reader = across

    @dramatiq.actor(broker=workers, store_results=True)
    def add(x: int, y: int) -> int:
        return x + y

    @dramatiq.actor(broker=workers, store_results=True)
    def times_ten(x: int) -> int:
        return 10 * x

    pipe = dramatiq.pipeline(
        [add.message(2, 2), times_ten.message(), add.message(1)], broker=producer
    )
    with dramatiq_worker(workers):
        pipe.run()
        last = pipe.messages[-1]
        assert reader.get_result(last, block=True, timeout=20_000) == 41  # (2 + 2) * 10 + 1


def test_delays_and_backoffs_under_a_second(across: Across) -> None:
    """Sent on node 1, run on node 2: a 300 ms delay runs 0.3 to 1.3 s later, and a
    retry's 138 ms backoff within a second (Disque holds whole seconds, Dramatiq's
    worker the rest, until the message's eta)."""
    producer, workers, _ = across
    for middleware in workers.middleware:
        if isinstance(middleware, Retries):
            middleware.min_backoff, middleware.max_backoff = 138, 138
    ran: dict[str, list[float]] = {}

    @dramatiq.actor(broker=workers, max_retries=1)
    def stamp(name: str, fail_first: bool) -> None:
        ran.setdefault(name, []).append(time.monotonic())
        if fail_first and len(ran[name]) == 1:
            raise ValueError("once")

    with dramatiq_worker(workers):
        producer.enqueue(stamp.message("warm-up", False))
        wait_for(lambda: "warm-up" in ran, timeout=20, message="the worker started")
        sent = time.monotonic()
        producer.enqueue(stamp.message("delayed", False), delay=300)
        producer.enqueue(stamp.message("retried", True))
        wait_for(lambda: "delayed" in ran, timeout=10, message="the delayed message ran")
        wait_for(lambda: len(ran.get("retried", [])) == 2, timeout=10, message="retried")
    assert 0.3 <= ran["delayed"][0] - sent <= 1.3, ran["delayed"][0] - sent
    first, second = ran["retried"]
    assert second - first < 1.0, second - first
