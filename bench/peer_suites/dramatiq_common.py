"""The helpers Dramatiq's own tests import from ``tests/common.py``, which its sdist
does not ship: bench/peer_suites.py copies this file there. Only what the tests
import, written from how they use it."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from dramatiq import Worker


@contextmanager
def worker(*args: Any, **kwargs: Any) -> Iterator[Worker]:
    """A started Worker, stopped on the way out."""
    started = Worker(*args, **kwargs)
    started.start()
    try:
        yield started
    finally:
        started.stop()


skip_in_ci = pytest.mark.skipif(bool(os.getenv("CI")), reason="timing-sensitive: not in CI")
skip_on_windows = pytest.mark.skipif(platform.system() == "Windows", reason="not on Windows")
skip_on_pypy = pytest.mark.skipif(
    platform.python_implementation() == "PyPy", reason="time limits need CPython"
)

RABBITMQ_USERNAME = os.getenv("RABBITMQ_USERNAME", "guest")
RABBITMQ_PASSWORD = os.getenv("RABBITMQ_PASSWORD", "guest")
try:  # (test_broker.py imports them; only the RabbitMQ tests, left out, use them)
    import pika

    RABBITMQ_CREDENTIALS: Any = pika.credentials.PlainCredentials(
        RABBITMQ_USERNAME, RABBITMQ_PASSWORD
    )
except ImportError:
    RABBITMQ_CREDENTIALS = None
skip_unless_rabbit_mq = pytest.mark.skip(reason="no RabbitMQ here")
