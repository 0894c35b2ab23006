"""Celery on Disque through the kombu transport (disque/brokers/kombu.py), with
Celery's own ``celery worker`` on a real 3-node cluster: tasks with acks_late,
retries, countdowns, and a node killed mid-run with no task lost."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from testkit.nodes import ClusterOfNodes, Node, wait_for

celery = pytest.importorskip("celery")
kombu = pytest.importorskip("kombu")

import disque.brokers.kombu  # noqa: E402, F401  (registers disque://)

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(180)


def addr(node: Node) -> str:
    return f"127.0.0.1:{node.port}"


def celery_app(seeds: list[str]) -> celery.Celery:
    app = celery.Celery("app", broker=f"disque://{seeds[0]}")
    app.conf.broker_transport_options = {"nodes": seeds[1:], "replicate": 2, "retry": 5}
    app.conf.task_acks_late = True
    return app


def write_app(tmp_path: Path, seeds: list[str], backend: str | None = None) -> Path:
    done = tmp_path / "done.txt"
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            f"""
            import disque.brokers.kombu
            from celery import Celery

            app = Celery("app", broker="disque://{seeds[0]}")
            app.conf.broker_transport_options = {{
                "nodes": {seeds[1:]!r}, "replicate": 2, "retry": 5
            }}
            app.conf.task_acks_late = True
            app.conf.worker_prefetch_multiplier = 4
            app.conf.broker_connection_retry_on_startup = True
            app.conf.result_backend = {backend!r}
            tries = {{}}

            def record(line):
                with open({str(done)!r}, "a") as out:  # O_APPEND: one line per write
                    out.write(line + "\\n")

            @app.task
            def count_words(n, text):
                record(f"{{n}} {{len(text.split())}}")

            @app.task(bind=True, max_retries=5, default_retry_delay=1)
            def flaky(self, n):
                tries[n] = tries.get(n, 0) + 1
                if tries[n] < 3:
                    raise self.retry()
                record(f"flaky {{n}} {{tries[n]}}")
            """
        )
    )
    return done


def start_worker(tmp_path: Path) -> subprocess.Popen[str]:
    """Celery's worker, its log to a file (a pipe nobody reads would fill and block it)."""
    with open(tmp_path / "worker.log", "w") as log:
        return subprocess.Popen(
            [str(BIN / "celery"), "-A", "app", "worker", "--pool", "threads", "-c", "4"],
            cwd=tmp_path,
            stderr=log,
            stdout=log,
            text=True,
        )


def lines(done: Path) -> list[str]:
    return done.read_text().splitlines() if done.exists() else []


def stop(proc: subprocess.Popen[str], tmp_path: Path) -> str:
    """SIGTERM (Celery's warm shutdown); its log. Killed when it does not stop."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    return (tmp_path / "worker.log").read_text()


def test_celerys_own_worker_runs_tasks_retries_and_countdowns(
    tmp_path: Path, cluster3: ClusterOfNodes
) -> None:
    seeds = [addr(n) for n in cluster3]
    done = write_app(tmp_path, seeds)
    app = celery_app(seeds)
    app.send_task("app.flaky", args=(1,))
    sent = time.monotonic()
    app.send_task("app.count_words", args=(7, "a b c d"), countdown=2)
    proc = start_worker(tmp_path)
    try:
        wait_for(lambda: "flaky 1 3" in lines(done), timeout=40, message="retried twice, then done")
        wait_for(lambda: "7 4" in lines(done), timeout=40, message="the countdown task ran")
        assert time.monotonic() - sent >= 1.5
    finally:
        stderr = stop(proc, tmp_path)
    assert "Traceback" not in stderr.replace("Retry in 1s", ""), stderr[-3000:]
    wait_for(
        lambda: all(n.call("QLEN", "celery") == 0 for n in cluster3),
        timeout=10,
        message="nothing left queued",
    )


def test_celerys_own_worker_loses_nothing_when_a_node_dies(
    tmp_path: Path, cluster3: ClusterOfNodes
) -> None:
    seeds = [addr(n) for n in cluster3]
    done = write_app(tmp_path, seeds)
    app = celery_app(seeds)
    total = 300
    for n in range(total):
        app.send_task("app.count_words", args=(n, "lorem ipsum dolor"))

    def handled() -> set[int]:
        return {int(line.split()[0]) for line in lines(done)}

    proc = start_worker(tmp_path)
    try:
        wait_for(lambda: len(handled()) >= total // 4, timeout=60, message="a quarter done")
        cluster3[1].kill()
        assert len(handled()) < total, "killed while tasks were left"
        wait_for(lambda: len(handled()) == total, timeout=90, message="every task done")
    finally:
        stderr = stop(proc, tmp_path)
    assert handled() == set(range(total)), stderr[-3000:]


def test_rpc_replies_cross_nodes_none_lost_none_late(
    tmp_path: Path, cluster3: ClusterOfNodes
) -> None:
    """The caller on node 1, Celery's worker on node 2: each of 100 replies (rpc://,
    reply messages through the transport) comes back well within a timeout
    shorter than Disque's NEEDJOBS backoff (docs/cluster.md, "Demand")."""
    n1, n2, _ = cluster3
    write_app(tmp_path, [addr(n2)], backend="rpc://")
    app = celery_app([addr(n1)])
    app.conf.result_backend = "rpc://"
    proc = start_worker(tmp_path)
    try:
        # (the first call also waits for the worker to start)
        app.send_task("app.count_words", args=(0, "a b")).get(timeout=60)
        for n in range(1, 101):
            reply = app.send_task("app.count_words", args=(n, "a b"))
            assert reply.get(timeout=5) is None, n
    finally:
        stderr = stop(proc, tmp_path)
    assert "Traceback" not in stderr, stderr[-3000:]


def test_a_wrong_address_fails_at_connect_as_with_other_transports() -> None:
    from testkit.nodes import free_port

    nowhere = f"disque://127.0.0.1:{free_port()}"
    options = {"max_retries": 1}  # (kombu retries default_channel's connection)
    for connect in (
        lambda c: c.connect(),
        lambda c: c.channel(),
        lambda c: c.default_channel,
    ):
        with kombu.Connection(nowhere, transport_options=options) as connection:
            errors = (kombu.exceptions.OperationalError, *connection.connection_errors)
            with pytest.raises(errors, match="no Disque node"):
                connect(connection)
