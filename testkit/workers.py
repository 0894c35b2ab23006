"""Workers of the library run in threads for a test, and stopped after it."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from disque import Worker
from testkit.nodes import Node

BIN = Path(sys.executable).parent


def addr(node: Node) -> str:
    return f"127.0.0.1:{node.port}"


@contextmanager
def running(*workers: Worker) -> Iterator[None]:
    """The workers run in threads while the block runs; each stopped (within its
    grace period) after it."""
    threads = [
        threading.Thread(target=w.run, kwargs={"install_signals": False}, daemon=True)
        for w in workers
    ]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for worker in workers:
            worker.stop()
        for thread, worker in zip(threads, workers, strict=True):
            thread.join(timeout=worker.grace + 15)
            assert not thread.is_alive(), "the worker did not stop"


def run_beside_worker(
    cwd: Path, worker_args: list[str], script: list[str], env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], str]:
    """``disque-worker <worker_args>`` in ``cwd`` while ``script`` runs there (both with
    ``env``); the script's outcome and the worker's log. The worker is stopped with
    SIGTERM and must exit 0."""
    log_path = cwd / "worker.log"
    with open(log_path, "w") as log:
        worker = subprocess.Popen(
            [str(BIN / "disque-worker"), *worker_args], cwd=cwd, env=env, stdout=log, stderr=log
        )
    try:
        ran = subprocess.run(script, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, log_path.read_text()[-3000:]
    finally:
        worker.kill()
    return ran, log_path.read_text()
