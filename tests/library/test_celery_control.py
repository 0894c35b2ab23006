"""Celery's remote control and events on the Disque transport, with Celery's own
worker and commands on a real 3-node cluster: the fanout and topic exchanges
they need are kept in Disque (disque/brokers/bindings.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import urllib.request
from pathlib import Path

import pytest

from testkit.nodes import ClusterOfNodes, free_port, wait_for
from testkit.workers import addr

celery = pytest.importorskip("celery")

import disque.brokers.kombu  # noqa: E402, F401  (registers disque://)

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(180)

APP = """
    import time
    import disque.brokers.kombu
    from celery import Celery

    app = Celery("app", broker="disque://{seed}", backend="disque://{seed}")
    app.conf.broker_transport_options = {{"nodes": {others!r}, "replicate": 2, "retry": 5}}
    app.conf.result_backend_transport_options = {{"nodes": {others!r}}}
    app.conf.broker_connection_retry_on_startup = True

    @app.task
    def add(x, y):
        return x + y

    @app.task
    def slow(seconds):
        time.sleep(seconds)
        return seconds
"""


def celery_command(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "celery"), "-A", "app", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )


def caller(seeds: list[str]) -> celery.Celery:
    app = celery.Celery("app", broker=f"disque://{seeds[0]}", backend=f"disque://{seeds[0]}")
    app.conf.broker_transport_options = {"nodes": seeds[1:], "replicate": 2, "retry": 5}
    app.conf.result_backend_transport_options = {"nodes": seeds[1:]}
    return app


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
    with open(tmp_path / "flower.log", "w") as log:
        flower = subprocess.Popen(
            [str(BIN / "celery"), "-A", "app", "flower", f"--port={port}", "--address=127.0.0.1"],
            cwd=tmp_path,
            stdout=log,
            stderr=log,
            # (Flower 2 serves its API to anyone only when told to)
            env={**os.environ, "PYTHONPATH": str(tmp_path), "FLOWER_UNAUTHENTICATED_API": "true"},
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
        flower.send_signal(signal.SIGTERM)
        try:
            flower.wait(timeout=20)
        except subprocess.TimeoutExpired:
            flower.kill()


def test_inspect_ping_control_revoke_and_events(tmp_path: Path, cluster3: ClusterOfNodes) -> None:
    n1, n2, n3 = cluster3
    (tmp_path / "app.py").write_text(
        textwrap.dedent(APP.format(seed=addr(n2), others=[addr(n3), addr(n1)]))
    )
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 (closed below)
    worker = subprocess.Popen(
        [
            str(BIN / "celery"),
            "-A",
            "app",
            "worker",
            "--pool",
            "threads",
            "-c",
            "2",
            "-n",
            "w1@here",
            "-E",
            "-l",
            "info",
        ],
        cwd=tmp_path,
        stdout=log,
        stderr=log,
    )
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
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        log.close()
