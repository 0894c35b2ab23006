"""A Celery app on Disque for tests: its module, run by Celery's own worker, and
the same app in the test's process (the caller), each with its seeds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent

APP = """
    import disque.brokers.kombu
    from celery import Celery

    app = Celery("app", broker="disque://{seed}", backend="disque://{seed}")
    app.conf.broker_transport_options = {{"nodes": {others!r}, "replicate": 2, "retry": 5}}
    app.conf.result_backend_transport_options = {{"nodes": {others!r}}}
    app.conf.task_acks_late = True
    app.conf.broker_connection_retry_on_startup = True

    @app.task
    def add(x, y):
        return x + y

    @app.task
    def total(values):
        return sum(values)

    @app.task
    def explode():
        raise ValueError("no")
"""


def write_app(tmp_path: Path, seeds: list[str]) -> None:
    """app.py in ``tmp_path``, on ``seeds`` (the first one first)."""
    (tmp_path / "app.py").write_text(textwrap.dedent(APP.format(seed=seeds[0], others=seeds[1:])))


def caller(seeds: list[str]) -> Any:
    """The app in this process (import disque.brokers.kombu first: it registers disque://)."""
    from celery import Celery

    app = Celery("app", broker=f"disque://{seeds[0]}", backend=f"disque://{seeds[0]}")
    app.conf.broker_transport_options = {"nodes": seeds[1:], "replicate": 2, "retry": 5}
    app.conf.result_backend_transport_options = {"nodes": seeds[1:]}
    return app


def start(
    tmp_path: Path, name: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``celery -A app <args>`` in ``tmp_path``, its output in ``<name>.log``."""
    with open(tmp_path / f"{name}.log", "w") as log:
        return subprocess.Popen(
            [str(BIN / "celery"), "-A", "app", *args],
            cwd=tmp_path,
            stdout=log,
            stderr=log,
            env={**os.environ, "PYTHONPATH": str(tmp_path), **(env or {})},
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (Celery's warm shutdown), killed when it does not stop."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
