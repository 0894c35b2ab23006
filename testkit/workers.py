"""Workers of the library run in threads for a test, and stopped after it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from disque import Worker
from testkit.nodes import Node


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
