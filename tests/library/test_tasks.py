"""Tasks (disque/tasks) on a real 3-node cluster: calls with arguments, results
read back on another node, failures, time limits, middleware, serializers,
periodic ticks that fire once per period across workers and outlive a node."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from disque import NoRepl
from disque.metrics import WorkerMetrics
from disque.middleware import Middleware
from disque.tasks import Message, ResultTimeout, SendFailed, TaskFailed, Tasks
from disque.worker import Call
from testkit.nodes import ClusterOfNodes, wait_for
from testkit.workers import addr, running

pytestmark = pytest.mark.timeout(120)


class Recorder(Middleware):
    """Every hook call, in order, as (hook, task name)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str]] = []
        self.metas: list[dict[str, str]] = []

    def record(self, hook: str, name: str) -> None:
        with self.lock:
            self.events.append((hook, name))

    def before_send(self, message: Message) -> None:
        message.meta["traceparent"] = f"00-{message.id}-01"
        self.record("before_send", message.task)

    def before(self, call: Call) -> None:
        self.metas.append(dict(call.message.meta))
        self.record("before", call.name)

    def after(self, call: Call, result: Any) -> None:
        self.record("after", call.name)

    def on_failure(self, call: Call, exc: BaseException) -> None:
        self.record("on_failure", call.name)

    def on_retry(self, call: Call, exc: BaseException, delay: int) -> None:
        self.record("on_retry", call.name)

    def on_dead_letter(self, call: Call, exc: BaseException, queue: str) -> None:
        self.record(f"on_dead_letter {queue}", call.name)

    def on_time_limit(self, call: Call, limit: float) -> None:
        self.record("on_time_limit", call.name)

    def hooks(self, name: str) -> list[str]:
        with self.lock:
            return [hook for hook, task in self.events if task == name]


def test_a_task_called_on_one_node_returns_its_result_on_another(
    cluster3: ClusterOfNodes,
) -> None:
    n1, n2, n3 = cluster3
    producer = Tasks(addr(n1))
    consumer = Tasks(addr(n3))
    for app in (producer, consumer):

        @app.task(name="shop.total", queue="shop", result=True, replicate=3)
        def total(prices: list[int], discount: int = 0) -> int:
            return sum(prices) - discount

    handles = [producer.registry["shop.total"].send([i, 10], discount=1) for i in range(20)]
    with running(consumer.worker(concurrency=4, fetch_timeout_ms=200)):
        assert [h.get(timeout=20) for h in handles] == [i + 9 for i in range(20)]
    assert all(h.job_id.startswith("D-") for h in handles)
    # A result is kept for its TTL: read again, by ID, from another node; forgotten, gone.
    reader = Tasks(addr(n2))
    assert [reader.result(h.id).get(timeout=5) for h in handles[:3]] == [9, 10, 11]
    for handle in handles:
        handle.forget()
    assert all(n.call("QLEN", f"result:{h.id}") == 0 for h in handles for n in cluster3)
    assert n2.call("QLEN", "shop") == 0


def test_a_failing_task_reports_its_error_and_is_dead_lettered(cluster3: ClusterOfNodes) -> None:
    n1, _, n3 = cluster3
    recorder = Recorder()
    tasks = Tasks(addr(n1), addr(n3), middleware=[recorder])

    @tasks.task(queue="risky", result=True, max_attempts=2)
    def explode(n: int) -> None:
        raise ValueError(f"bad input {n}")

    handle = explode.send(7)
    with running(tasks.worker(fetch_timeout_ms=200, backoff_base=0.1)):
        with pytest.raises(TaskFailed) as failed:
            handle.get(timeout=30)
    assert (failed.value.type, failed.value.message) == ("ValueError", "bad input 7")
    name = explode.name
    assert recorder.hooks(name) == [
        "before_send",
        "before",
        "on_failure",
        "on_retry",
        "before",
        "on_failure",
        "on_dead_letter risky:dead",
    ]
    records = [
        json.loads(body) for n in cluster3 for _, _, body in n.call("QPEEK", "risky:dead", "10")
    ]
    assert records and {r["attempts"] for r in records} == {2}
    assert recorder.metas[0] == {"traceparent": f"00-{handle.message_id}-01"}


def test_a_task_past_its_time_limit_is_stopped_counted_and_queued_again(
    cluster3: ClusterOfNodes,
) -> None:
    """The first run spins past its limit (in Python: TimeLimitExceeded reaches it);
    the job goes back to the queue, and the second run returns."""
    n1, n2, _ = cluster3
    recorder = Recorder()
    tasks = Tasks(addr(n2), middleware=[recorder])
    runs: list[float] = []
    stopped = threading.Event()

    @tasks.task(queue="slow", result=True, time_limit=0.5, max_attempts=3, retry=30)
    def crunch() -> str:
        runs.append(time.monotonic())
        if len(runs) == 1:
            try:
                while True:
                    time.sleep(0.01)
            finally:
                stopped.set()
        return "done"

    worker = tasks.worker(fetch_timeout_ms=200, backoff_base=0.1)
    worker.metrics = WorkerMetrics(CollectorRegistry())
    handle = crunch.send()
    with running(worker):
        assert handle.get(timeout=30) == "done"
    assert stopped.is_set() and len(runs) == 2
    assert runs[1] - runs[0] < 10, "queued again by the NACK, not after its RETRY of 30 s"
    metrics = worker.metrics
    assert metrics.timed_out.labels("slow", crunch.name)._value.get() == 1  # by task
    assert metrics.failed.labels("slow", crunch.name)._value.get() == 1
    wait_for(
        lambda: metrics.processed.labels("slow", crunch.name)._value.get() == 1,
        timeout=5,
        message="the second run counted processed, under its task",
    )
    assert metrics.processed.labels("slow", "")._value.get() == 0
    assert recorder.hooks(crunch.name)[:4] == [
        "before_send",
        "before",
        "on_time_limit",
        "on_failure",
    ]


def test_async_tasks_and_an_asyncio_caller(cluster3: ClusterOfNodes) -> None:
    n1, _, n3 = cluster3
    tasks = Tasks(addr(n1), addr(n3))

    @tasks.task(queue="aio", result=True)
    async def double(x: int) -> int:
        await asyncio.sleep(0.01)
        return 2 * x

    async def call_them() -> list[int]:
        handles = [await double.send_async(i) for i in range(10)]
        return [await h.get_async(timeout=20) for h in handles]

    with running(tasks.worker(concurrency=8, fetch_timeout_ms=200)):
        assert asyncio.run(call_them()) == [2 * i for i in range(10)]


def test_serializers_bytes_by_msgpack_pickle_only_where_accepted(cluster3: ClusterOfNodes) -> None:
    n1, _, _ = cluster3
    producer = Tasks(addr(n1))
    consumer = Tasks(addr(n1))  # accepts json and msgpack: not pickle
    for app in (producer, consumer):

        @app.task(name="blobs.size", queue="blobs", result=True, serializer="msgpack")
        def size(blob: bytes) -> int:
            return len(blob)

        @app.task(name="blobs.pickled", queue="blobs", result=True, serializer="pickle")
        def pickled(value: object) -> str:
            return repr(value)

    with pytest.raises(TypeError, match="msgpack"):
        Tasks(addr(n1)).task(name="x")(lambda b: b).send(b"\x00")  # JSON cannot carry bytes
    by_msgpack = producer.registry["blobs.size"].send(b"\x00" * 1000)
    by_pickle = producer.registry["blobs.pickled"].send({1, 2})
    with running(consumer.worker(fetch_timeout_ms=200)):
        assert by_msgpack.get(timeout=20) == 1000
        # Refused at once (Reject), never retried; unread, so its caller hears nothing.
        wait_for(lambda: dead_letters(cluster3, "blobs:dead"), timeout=20, message="dead letter")
    assert {r["attempts"] for r in dead_letters(cluster3, "blobs:dead")} == {1}
    assert "accepts json, msgpack" in dead_letters(cluster3, "blobs:dead")[0]["error"]
    with pytest.raises(ResultTimeout):
        by_pickle.get(timeout=0.5)


def dead_letters(nodes: ClusterOfNodes, queue: str) -> list[dict[str, Any]]:
    return [json.loads(body) for n in nodes for _, _, body in n.call("QPEEK", queue, "10") or []]


def test_a_message_written_by_hand_as_another_language_would(cluster3: ClusterOfNodes) -> None:
    n1, n2, _ = cluster3
    tasks = Tasks(addr(n2))
    got: list[Any] = []

    @tasks.task(name="mail.send", queue="mail")
    def send_mail(to: str, subject: str = "") -> None:
        got.append((to, subject))

    body = '{"v": 1, "id": "abc", "task": "mail.send", "args": ["ada@example.com"], "kwargs": {"subject": "hi"}}'
    n1.call("ADDJOB", "mail", body, "5000", "REPLICATE", "2")
    with running(tasks.worker(fetch_timeout_ms=200)):
        wait_for(lambda: got == [("ada@example.com", "hi")], timeout=20, message="the task ran")
    wait_for(
        lambda: all(n.call("QLEN", "mail") == 0 for n in cluster3), timeout=10, message="acked"
    )


def test_an_unknown_task_is_retried_then_dead_lettered(cluster3: ClusterOfNodes) -> None:
    n1, _, _ = cluster3
    producer, consumer = Tasks(addr(n1)), Tasks(addr(n1))

    @producer.task(name="new.feature", queue="deploy", result=True, max_attempts=2)
    def new_feature() -> None: ...

    @consumer.task(name="old.feature", queue="deploy")
    def old_feature() -> None: ...

    handle = producer.registry["new.feature"].send()
    with running(consumer.worker(fetch_timeout_ms=200, backoff_base=0.1, max_attempts=2)):
        with pytest.raises(TaskFailed, match="UnknownTask"):
            handle.get(timeout=30)


def test_a_periodic_task_fires_once_per_tick_across_workers_and_outlives_a_node(
    cluster3: ClusterOfNodes,
) -> None:
    """Two workers (each its own clients, as two processes) started at once,
    every=2: one call a tick, not two; then a node holding a copy of the tick is
    killed, and the ticks go on."""
    fired: list[float] = []
    workers = []
    seeds = [addr(n) for n in cluster3]
    for _ in range(2):
        app = Tasks(seeds)

        @app.periodic(every=2, name="cron.heartbeat", queue="cron", replicate=2)
        def heartbeat() -> None:
            fired.append(time.monotonic())

        workers.append(app.worker(fetch_timeout_ms=200))
    with running(*workers):
        wait_for(lambda: len(fired) >= 2, timeout=20, message="two ticks")
        count = len(fired)
        time.sleep(6.5)
        assert 2 <= len(fired) - count <= 4, f"{len(fired) - count} calls in 6.5 s at every=2"
        owners = [
            n for n in cluster3 if n.call("JSCAN", "0", "QUEUE", "periodic:cron.heartbeat")[1]
        ]
        assert len(owners) == 2, "the tick has two copies"
        owners[0].kill()
        count = len(fired)
        # The tick's other copy is queued after its RETRY (5 s), and reaches a worker
        # on a third node through federation: seconds, up to Disque's NEEDJOBS backoff.
        wait_for(lambda: len(fired) >= count + 3, timeout=75, message="ticks after a node died")
    gaps = [b - a for a, b in zip(fired, fired[1:], strict=False)]
    assert min(gaps) > 1.0, f"two calls in one tick: {gaps}"


def test_send_many_queues_calls_in_one_round_trip_and_says_which_failed(
    cluster3: ClusterOfNodes,
) -> None:
    n1, _, n3 = cluster3
    producer, consumer = Tasks(addr(n1)), Tasks(addr(n3))
    for app in (producer, consumer):

        @app.task(name="batch.square", queue="batch", result=True, replicate=2)
        def square(x: int) -> int:
            return x * x

    handles = producer.registry["batch.square"].send_many((i,) for i in range(300))
    assert len({h.job_id for h in handles}) == 300
    with running(consumer.worker(concurrency=8, fetch_timeout_ms=200)):
        assert [h.get(timeout=30) for h in handles] == [i * i for i in range(300)]
    with pytest.raises(SendFailed, match="3 of 3 calls not queued: .*NOREPL") as failed:
        producer.registry["batch.square"].send_many([(1,), (2,), (3,)], replicate=5)
    assert all(isinstance(r, NoRepl) for r in failed.value.results)


def test_pickle_runs_end_to_end_where_the_worker_accepts_it(cluster3: ClusterOfNodes) -> None:
    """A worker told to accept pickle runs a pickled call; the caller reads the
    pickled result (the call's own serializer) without accepting pickle itself."""
    n1, _, n3 = cluster3
    producer = Tasks(addr(n1))
    consumer = Tasks(addr(n3), accept=("json", "msgpack", "pickle"))
    for app in (producer, consumer):

        @app.task(name="sets.union", queue="sets", result=True, serializer="pickle")
        def union(a: frozenset[int], b: frozenset[int]) -> frozenset[int]:
            return a | b

    handle = producer.registry["sets.union"].send(frozenset({1}), frozenset({2}))
    with running(consumer.worker(fetch_timeout_ms=200)):
        assert handle.get(timeout=20) == frozenset({1, 2})
