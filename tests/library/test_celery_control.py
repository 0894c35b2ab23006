"""Celery's remote control and events on the Disque transport, with Celery's own
worker and commands on a real 3-node cluster: the fanout and topic exchanges
they need are kept in Disque (disque/brokers/bindings.py)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest

from testkit.celery_apps import BIN, caller, start, stop, write_app
from testkit.nodes import ClusterOfNodes, free_port, wait_for
from testkit.workers import addr

celery = pytest.importorskip("celery")

import disque.brokers.kombu  # noqa: E402, F401  (registers disque://)

pytestmark = pytest.mark.timeout(180)


def celery_command(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "celery"), "-A", "app", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )


def receive_events(app: celery.Celery, events: list[dict]) -> None:
    """Celery's event receiver (what Flower and `celery events` use), for a while."""
    with app.connection_for_read() as connection:
        receiver = app.events.Receiver(connection, handlers={"*": events.append})
        try:
            receiver.capture(limit=None, timeout=60, wakeup=True)
        except Exception:  # the test's time is up, or the cluster went
            pass


def check_flower(tmp_path: Path, app: celery.Celery) -> None:
    """Flower, on this transport: its HTTP API lists the worker (remote control) and
    the tasks it saw finish (events)."""
    pytest.importorskip("flower")
    port = free_port()
    flower = start(
        tmp_path,
        "flower",
        "flower",
        f"--port={port}",
        "--address=127.0.0.1",
        env={"FLOWER_UNAUTHENTICATED_API": "true"},  # (Flower 2 serves its API to anyone only so)
    )
    try:

        def api(path: str) -> dict:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as page:
                return json.loads(page.read())

        workers = wait_for(
            lambda: api("/api/workers?refresh=1"), timeout=60, message="Flower lists workers"
        )
        assert "w1@here" in workers, workers
        again = app.send_task("app.add", args=(4, 4))
        assert again.get(timeout=30) == 8
        tasks = wait_for(
            lambda: (found := api("/api/tasks")) and again.id in found and found,
            timeout=60,
            message="Flower lists the finished task",
        )
        assert tasks[again.id]["state"] == "SUCCESS", tasks[again.id]
    finally:
        stop(flower)


def test_inspect_ping_control_revoke_and_events(tmp_path: Path, cluster3: ClusterOfNodes) -> None:
    n1, n2, n3 = cluster3
    write_app(tmp_path, [addr(n2), addr(n3), addr(n1)])
    worker_options = ["--pool", "threads", "-c", "2", "-n", "w1@here", "-E", "-l", "info"]
    worker = start(tmp_path, "worker", "worker", *worker_options)
    try:
        wait_for(
            lambda: "ready" in (tmp_path / "worker.log").read_text(),
            timeout=60,
            message="the worker is ready",
        )
        ping = celery_command(tmp_path, "inspect", "ping", "--timeout", "5")
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert "w1@here: OK" in ping.stdout and "pong" in ping.stdout, ping.stdout
        app = caller([addr(n1), addr(n3)])  # the caller on node 1, the worker on node 2
        events: list[dict] = []
        receiving = threading.Thread(target=receive_events, args=(app, events), daemon=True)
        receiving.start()
        later = app.send_task("app.add", args=(1, 1), countdown=6)
        revoke = celery_command(tmp_path, "control", "revoke", later.id, "--timeout", "5")
        assert revoke.returncode == 0 and "w1@here: OK" in revoke.stdout, revoke.stdout
        stats = celery_command(tmp_path, "inspect", "stats", "--timeout", "5")
        assert '"transport": "disque"' in stats.stdout, stats.stdout
        active = celery_command(tmp_path, "inspect", "active", "--timeout", "5")
        assert "w1@here: OK" in active.stdout, active.stdout
        limit = celery_command(
            tmp_path, "control", "rate_limit", "app.add", "100/s", "--timeout", "5"
        )
        assert "new rate limit set successfully" in limit.stdout, limit.stdout
        done = app.send_task("app.add", args=(2, 3))
        assert done.get(timeout=30) == 5
        wait_for(
            lambda: "Discarding revoked task" in (tmp_path / "worker.log").read_text(),
            timeout=30,
            message="the revoked task discarded",
        )
        wait_for(
            lambda: {"worker-heartbeat", "task-succeeded"} <= {e["type"] for e in events},
            timeout=30,
            message="the worker's events received",
        )
        succeeded = [e for e in events if e["type"] == "task-succeeded"]
        assert succeeded[0]["uuid"] == done.id
        check_flower(tmp_path, app)
        # (a worker told to shut down stops without a reply, on any broker)
        celery_command(tmp_path, "control", "shutdown", "--timeout", "2")
        assert worker.wait(timeout=30) == 0  # it heard, and stopped
    finally:
        stop(worker)
