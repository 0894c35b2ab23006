#!/usr/bin/env python3
"""Task libraries side by side: RQ, arq, Dramatiq and Celery on redis-server,
``disque.tasks`` on one node of ours and on three with REPLICATE 2.

    python bench/task_libraries.py [--tasks 10000] [--runs 3] [--only dramatiq,disque]

For each library, with the same harness: ``--tasks`` no-op tasks, whose body
does one INCR on a side redis-server, are enqueued from one process with the
library's own API (timed in that process: enqueues/s) three ways: one call
at a time; by concurrent producers (16 threads on a synchronous API, 64
sends awaited at once on an asyncio one: arq's and ours), each call
returning once its task is queued; and in bulk where the library has an API
for it (RQ's ``enqueue_many``, our ``send_many``). Then one worker
process of the library's own command drains them (timed from the first
INCR seen to the last: tasks/s). Worker settings: 8 at once (RQ's
SimpleWorker runs one). The libraries run in turn, the order turning at
every run; medians are printed as Markdown, with each figure over the
fastest other library's (#40: disque >= 3x on both), and the task's body
alone in 8 threads with no queue (the ceiling of any 8-thread worker).
Progress on stderr.
Needs redis-server and the libraries (``pip install rq arq dramatiq celery``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import form_cluster  # noqa: E402
from single_node import (  # noqa: E402
    Server,
    command,
    environment,
    say,
    start_node,
    start_redis,
)

APPS = {
    "rq": """
        from redis import Redis
        from rq import Queue

        def task():
            side.incr("done")

        def enqueue(n):
            queue = Queue("bench", connection=Redis(port=BROKER))
            for _ in range(n):
                queue.enqueue(task)

        def enqueue_bulk(n):  # Queue.enqueue_many: one pipeline a chunk
            queue = Queue("bench", connection=Redis(port=BROKER))
            for start in range(0, n, 1000):
                count = min(1000, n - start)
                queue.enqueue_many([Queue.prepare_data(task) for _ in range(count)])

        def enqueue_concurrent(n):
            queue = Queue("bench", connection=Redis(port=BROKER))
            in_threads(n, lambda: queue.enqueue(task))
    """,
    "arq": """
        import asyncio
        from arq.connections import RedisSettings, create_pool

        async def task(ctx):
            side.incr("done")

        class WorkerSettings:
            functions = [task]
            redis_settings = RedisSettings(port=BROKER)
            max_jobs = 8

        async def enqueue_all(n):
            pool = await create_pool(RedisSettings(port=BROKER))
            for _ in range(n):
                await pool.enqueue_job("task")

        def enqueue(n):
            asyncio.run(enqueue_all(n))

        async def enqueue_at_once(n):
            pool = await create_pool(RedisSettings(port=BROKER))
            await in_tasks(n, lambda: pool.enqueue_job("task"))

        def enqueue_concurrent(n):
            asyncio.run(enqueue_at_once(n))
    """,
    "dramatiq": """
        import dramatiq
        from dramatiq.brokers.redis import RedisBroker

        dramatiq.set_broker(RedisBroker(url=f"redis://127.0.0.1:{BROKER}"))

        @dramatiq.actor(queue_name="bench")
        def task():
            side.incr("done")

        def enqueue(n):
            for _ in range(n):
                task.send()

        def enqueue_concurrent(n):
            in_threads(n, task.send)
    """,
    "celery": """
        from celery import Celery

        app = Celery("app_celery", broker=f"redis://127.0.0.1:{BROKER}/0")

        @app.task
        def task():
            side.incr("done")

        def enqueue(n):
            for _ in range(n):
                task.delay()

        def enqueue_concurrent(n):
            in_threads(n, task.delay)
    """,
    "disque": """
        from disque.tasks import Tasks

        tasks = Tasks(*DISQUE.split())

        @tasks.task(queue="bench", replicate=REPLICATE)
        def task():
            side.incr("done")

        def enqueue(n):
            for _ in range(n):
                task.send()

        def enqueue_bulk(n):  # Task.send_many: pipelined ADDJOBs, 1,000 a round trip
            for start in range(0, n, 1000):
                task.send_many(() for _ in range(min(1000, n - start)))

        def enqueue_concurrent(n):  # each send_async awaited until its job is replicated
            asyncio.run(in_tasks(n, task.send_async))
    """,
}
HEADER = """
import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from redis import Redis

BROKER = int(os.environ.get("BENCH_BROKER", "0"))
DISQUE = os.environ.get("BENCH_DISQUE", "")
REPLICATE = int(os.environ.get("BENCH_REPLICATE", "1"))
side = Redis(port=int(os.environ["BENCH_SIDE"]))


def in_threads(n, send):  # concurrent producers for a synchronous API: THREADS threads
    with ThreadPoolExecutor(THREADS) as pool:
        for _ in pool.map(lambda _: send(), range(n)):
            pass


async def in_tasks(n, send):  # for an asyncio API: AT_ONCE sends awaited at a time
    at_once = asyncio.Semaphore(AT_ONCE)

    async def one():
        async with at_once:
            await send()

    await asyncio.gather(*(one() for _ in range(n)))


THREADS, AT_ONCE = 16, 64
"""


@dataclass(frozen=True)
class Entry:
    label: str
    app: str  # APPS key
    nodes: int = 0  # disque nodes (0: the library runs on redis-server)

    def worker_argv(self, bin_dir: Path) -> list[str]:
        module = f"app_{self.app}"
        return {
            "rq": [
                str(bin_dir / "rq"),
                "worker",
                "--url",
                "redis://127.0.0.1:{broker}",
                "--worker-class",
                "rq.worker.SimpleWorker",
                "bench",
            ],
            "arq": [str(bin_dir / "arq"), f"{module}.WorkerSettings"],
            "dramatiq": [str(bin_dir / "dramatiq"), module, "-p", "1", "-t", "8"],
            "celery": [
                str(bin_dir / "celery"),
                "-A",
                module,
                "worker",
                "--pool",
                "threads",
                "-c",
                "8",
                "-l",
                "warning",
            ],
            "disque": [
                str(bin_dir / "disque-worker"),
                f"{module}:tasks",
                "-c",
                "8",
                "--log-level",
                "warning",
            ],
        }[self.app]


ENTRIES = (
    Entry("RQ (SimpleWorker)", "rq"),
    Entry("arq (max_jobs 8)", "arq"),
    Entry("Dramatiq (1 process, 8 threads)", "dramatiq"),
    Entry("Celery (threads, 8)", "celery"),
    Entry("disque.tasks, 1 node (concurrency 8)", "disque", nodes=1),
    Entry("disque.tasks, 3 nodes, REPLICATE 2", "disque", nodes=3),
)


@dataclass
class Sample:
    enqueue: float  # per second, one call at a time
    drain: float
    bulk: float | None = None  # per second, the library's bulk API (where it has one)
    concurrent: float = 0.0  # per second, concurrent producers in one process (below)


def write_apps(tmp: Path) -> None:
    for name, body in APPS.items():
        (tmp / f"app_{name}.py").write_text(HEADER + textwrap.dedent(body))


def counter(side: Server) -> int:
    value = command(side.port, "GET", "done")
    return int(value) if value else 0


def timed_enqueue(entry: Entry, tmp: Path, env: dict[str, str], tasks: int, how: str) -> float:
    """Tasks enqueued a second by ``app.<how>(tasks)``, timed in the producer (imports
    not counted)."""
    timed = (
        f"import time, app_{entry.app} as a; t = time.perf_counter(); a.{how}({tasks}); "
        f"print({tasks} / (time.perf_counter() - t))"
    )
    enqueued = subprocess.run(
        [sys.executable, "-c", timed], cwd=tmp, env=env, check=True, capture_output=True, text=True
    )
    return float(enqueued.stdout.split()[-1])


def run_entry(entry: Entry, tmp: Path, env: dict[str, str], side: Server, tasks: int) -> Sample:
    """A third of the tasks (half, without a bulk API) sent by concurrent producers
    (16 threads on a synchronous API, 64 sends awaited at once on an asyncio one),
    a third in bulk, the rest one at a time; then all drained."""
    bulk = None
    share = tasks // 3 if "def enqueue_bulk" in APPS[entry.app] else tasks // 2
    command(side.port, "SET", "done", "0")
    concurrent = timed_enqueue(entry, tmp, env, share, "enqueue_concurrent")
    if "def enqueue_bulk" in APPS[entry.app]:  # measured, then drained with the rest
        bulk = timed_enqueue(entry, tmp, env, share, "enqueue_bulk")
    enqueue = timed_enqueue(entry, tmp, env, tasks - share * (2 if bulk else 1), "enqueue")
    argv = [
        a.format(broker=env["BENCH_BROKER"]) for a in entry.worker_argv(Path(sys.executable).parent)
    ]
    with open(tmp / f"worker-{entry.app}.log", "a") as log:
        worker = subprocess.Popen(
            argv, cwd=tmp, env=env, stdout=log, stderr=log, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 600
        while (first := counter(side)) == 0:
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError(f"{entry.label}: no task ran (see worker-{entry.app}.log)")
            time.sleep(0.01)
        t0 = time.perf_counter()
        while (done := counter(side)) < tasks:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{entry.label}: {done} of {tasks} done")
            time.sleep(0.01)
        drain = (done - first) / (time.perf_counter() - t0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    return Sample(enqueue, drain, bulk, concurrent)


BODY_ALONE = """
import os, threading, time
from redis import Redis

side, n = Redis(port=int(os.environ["BENCH_SIDE"])), int(os.environ["BENCH_TASKS"])
def body(k):
    for _ in range(k):
        side.incr("alone")
threads = [threading.Thread(target=body, args=(n // 8,)) for _ in range(8)]
t = time.perf_counter()
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(n // 8 * 8 / (time.perf_counter() - t))
"""


def body_alone(env: dict[str, str], tasks: int) -> float:
    """The task's body run ``tasks`` times in 8 threads of one process, no queue at all:
    the most a worker of 8 threads could drain (a ceiling for every library)."""
    ran = subprocess.run(
        [sys.executable, "-c", BODY_ALONE],
        env={**env, "BENCH_TASKS": str(tasks)},
        check=True,
        capture_output=True,
        text=True,
    )
    return float(ran.stdout.split()[-1])


@contextlib.contextmanager
def servers(tmp: Path) -> Iterator[tuple[Server, Server, list[Server]]]:
    started: list[Server] = []
    try:
        side = start_redis(tmp / "side")
        started.append(side)
        broker = start_redis(tmp / "broker")
        started.append(broker)
        nodes = [start_node(tmp, f"node{i}") for i in range(4)]
        started += nodes
        form_cluster(nodes[1:])  # node0 alone; nodes 1-3 a cluster
        yield side, broker, nodes
    finally:
        for server in started:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated: rq,arq,dramatiq,celery,disque")
    args = parser.parse_args(argv)
    entries = [e for e in ENTRIES if not args.only or e.app in args.only.split(",")]
    samples: dict[str, list[Sample]] = {e.label: [] for e in entries}
    ceiling: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-tasks-") as name:
        tmp = Path(name)
        for sub in ("side", "broker"):
            (tmp / sub).mkdir()
        write_apps(tmp)
        with servers(tmp) as (side, broker, nodes):
            cluster = nodes[1:]
            base = {**os.environ, "PYTHONPATH": str(tmp), "BENCH_SIDE": str(side.port)}
            for run in range(args.runs):
                order = entries[run % len(entries) :] + entries[: run % len(entries)]
                for entry in order:
                    seeds = [nodes[0]] if entry.nodes == 1 else cluster
                    env = {
                        **base,
                        "BENCH_BROKER": str(broker.port),
                        "BENCH_DISQUE": " ".join(f"127.0.0.1:{n.port}" for n in seeds),
                        "BENCH_REPLICATE": "2" if entry.nodes == 3 else "1",
                    }
                    command(broker.port, "FLUSHALL")
                    sample = run_entry(entry, tmp, env, side, args.tasks)
                    samples[entry.label].append(sample)
                    say(
                        f"run {run + 1} {entry.label}: enqueue {sample.enqueue:,.0f}/s, "
                        f"concurrent {sample.concurrent:,.0f}/s, "
                        f"bulk {sample.bulk or 0:,.0f}/s, drain {sample.drain:,.0f}/s"
                    )
                ceiling.append(body_alone(base, args.tasks))
                say(f"run {run + 1} the body alone, 8 threads: {ceiling[-1]:,.0f}/s")
    print(markdown(samples, args, statistics.median(ceiling)))
    return 0


def markdown(samples: dict[str, list[Sample]], args: argparse.Namespace, ceiling: float) -> str:
    medians = {
        label: Sample(
            statistics.median(s.enqueue for s in runs),
            statistics.median(s.drain for s in runs),
            statistics.median(s.bulk for s in runs) if runs[0].bulk else None,
            statistics.median(s.concurrent for s in runs),
        )
        for label, runs in samples.items()
    }
    others = [m for label, m in medians.items() if not label.startswith("disque")]
    best_enqueue = max((m.enqueue for m in others), default=0.0)
    best_drain = max((m.drain for m in others), default=0.0)
    best_bulk = max((m.bulk or 0.0 for m in others), default=0.0)
    best_concurrent = max((m.concurrent for m in others), default=0.0)
    lines = [
        "| library | enqueue one at a time, tasks/s | / fastest other | concurrent producers, "
        "tasks/s | / fastest other | bulk enqueue, tasks/s | / fastest other "
        "| one worker process drains, tasks/s | / fastest other |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, m in medians.items():
        e = f"{m.enqueue / best_enqueue:.2f}" if best_enqueue else "-"
        c = f"{m.concurrent / best_concurrent:.2f}" if best_concurrent else "-"
        b = f"{m.bulk:,.0f}" if m.bulk else "-"
        br = f"{m.bulk / best_bulk:.2f}" if m.bulk and best_bulk else "-"
        d = f"{m.drain / best_drain:.2f}" if best_drain else "-"
        lines.append(
            f"| {label} | {m.enqueue:,.0f} | {e} | {m.concurrent:,.0f} | {c} | {b} | {br} "
            f"| {m.drain:,.0f} | {d} |"
        )
    lines.append("")
    lines.append(
        f"The task's body alone (its INCR in 8 threads of one process, no queue): "
        f"{ceiling:,.0f}/s, the most an 8-thread worker could drain; 3x the fastest other "
        f"library's drain is {3 * best_drain / ceiling:.0%} of it."
    )
    lines.append("")
    lines.append(
        f"{args.runs} runs of {args.tasks:,} tasks each, medians; the task does one INCR on a "
        f"side redis-server; {environment()}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
