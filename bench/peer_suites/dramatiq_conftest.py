"""The fixtures of Dramatiq's own tests (its sdist ships tests/ without their
conftest.py), on one broker: bench/peer_suites.py copies this file to the
unpacked suite's tests/conftest.py and runs the suite twice, with PEER_SIDE=redis
(Dramatiq's RedisBroker on a redis-server) and PEER_SIDE=disque (our
DisqueBroker on a 3-node cluster).

Every broker fixture the tests ask for (``stub_broker``, ``redis_broker``) is the
side's broker, so the tests written for the stub broker run on a real one too;
the workers are the ones Dramatiq's suite makes (32 threads; 100 ms between
fetches for ``stub_worker``). Before each test the side's servers are emptied
(FLUSHALL; DEBUG FLUSHALL on every node), so no test sees another's messages.

Environment (set by bench/peer_suites.py): PEER_SIDE, PEER_REDIS
(``host:port``), PEER_DISQUE (the nodes, ``host:port`` separated by spaces).
"""

from __future__ import annotations

from collections.abc import Iterator

import dramatiq
import pytest
from dramatiq import Broker, Worker
from dramatiq.rate_limits import RateLimiterBackend
from dramatiq.rate_limits.backends import RedisBackend as RedisRateLimiterBackend
from dramatiq.rate_limits.backends import StubBackend as StubRateLimiterBackend
from dramatiq.results import ResultBackend

from .peer_sides import NODES, REDIS, SIDE, empty_servers


def new_broker() -> Broker:
    if SIDE == "redis":
        from dramatiq.brokers.redis import RedisBroker

        return RedisBroker(url=f"redis://{REDIS}")
    from disque.brokers.dramatiq import DisqueBroker

    return DisqueBroker(*NODES)


@pytest.fixture
def broker() -> Iterator[Broker]:
    empty_servers()
    broker = new_broker()
    broker.emit_after("process_boot")
    dramatiq.set_broker(broker)
    yield broker
    broker.flush_all()
    broker.close()


@pytest.fixture
def stub_broker(broker: Broker) -> Broker:
    return broker


@pytest.fixture
def redis_broker(broker: Broker) -> Broker:
    return broker


@pytest.fixture
def stub_worker(stub_broker: Broker) -> Iterator[Worker]:
    worker = Worker(stub_broker, worker_timeout=100, worker_threads=32)
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture
def redis_worker(redis_broker: Broker) -> Iterator[Worker]:
    worker = Worker(redis_broker, worker_threads=32)
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture
def result_backend() -> ResultBackend:
    """Dramatiq's Redis result backend, or ours (DisqueBackend) on the cluster."""
    if SIDE == "redis":
        from dramatiq.results.backends import RedisBackend

        return RedisBackend(url=f"redis://{REDIS}")
    from disque.brokers.dramatiq import DisqueBackend

    return DisqueBackend(*NODES)


@pytest.fixture
def redis_result_backend(result_backend: ResultBackend) -> ResultBackend:
    return result_backend


@pytest.fixture
def rate_limiter_backend() -> RateLimiterBackend:
    """Dramatiq's Redis rate-limiter backend; on Disque, which has none (no atomic
    counters to build one on), Dramatiq's in-process stub: the tests asking for
    one (group callbacks) run their worker in this process, where it is exact."""
    if SIDE == "redis":
        return RedisRateLimiterBackend(url=f"redis://{REDIS}")
    return StubRateLimiterBackend()
