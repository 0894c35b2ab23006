"""kombu's own integration tests on one broker: the test classes of its sdist's
t/integration/common.py, each subclassed as kombu's t/integration/test_redis.py
does for Redis, with the fixtures they take (``connection``,
``invalid_connection``, ``failover_connection``) on the side's transport.
bench/peer_suites.py copies this file into the unpacked sdist's t/integration/
and runs it twice: PEER_SIDE=redis (kombu's redis:// transport on a
redis-server) and PEER_SIDE=disque (our disque:// transport on a 3-node
cluster). The classes are the same on both sides; only the priority order
differs, as kombu's own Redis tests say: its Redis transport takes lower
numbers first.

Before each test the side's servers are emptied (FLUSHALL; DEBUG FLUSHALL on
every node), so no test sees what another left in a queue.

Environment (set by bench/peer_suites.py): PEER_SIDE, PEER_REDIS
(``host:port``), PEER_DISQUE (the nodes, ``host:port`` separated by spaces),
PEER_DEAD (a ``host:port`` where nothing listens).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import kombu
import pytest

from .common import (
    BaseEventLoop,
    BaseExchangeTypes,
    BaseFailover,
    BaseMessage,
    BasePriority,
    BaseTimeToLive,
    BasicFunctionality,
)
from .peer_sides import NODES, REDIS, SIDE, empty_servers

if SIDE == "disque":
    import disque.brokers.kombu  # noqa: F401  (registers disque:// with kombu)
DEAD = os.environ.get("PEER_DEAD", "127.0.0.1:1")
LIVE = REDIS if SIDE == "redis" else NODES[0]


def url(hostport: str) -> str:
    return f"{SIDE}://{hostport}"


@pytest.fixture(autouse=True)
def emptied() -> None:
    empty_servers()


def released(connection: kombu.Connection) -> Iterator[kombu.Connection]:
    yield connection
    # A test that failed half-way may leave it broken: its release must not turn
    # the failure into a second one (an error at teardown).
    with contextlib.suppress(Exception):
        connection.release()


@pytest.fixture
def connection() -> Iterator[kombu.Connection]:
    """The cluster: the first node in the URL, the others in the transport options
    (how docs/brokers.md says to give a cluster to Celery)."""
    options = {"nodes": NODES[1:]} if SIDE == "disque" else None
    yield from released(kombu.Connection(url(LIVE), transport_options=options))


@pytest.fixture
def invalid_connection() -> Iterator[kombu.Connection]:
    yield from released(kombu.Connection(url(DEAD)))


@pytest.fixture
def failover_connection() -> Iterator[kombu.Connection]:
    """A dead URL first, then a live one: kombu fails over to the second."""
    yield from released(kombu.Connection(f"{url(DEAD)};{url(LIVE)}"))


class TestBasicFunctionality(BasicFunctionality):
    pass


class TestExchangeTypes(BaseExchangeTypes):
    pass


class TestTimeToLive(BaseTimeToLive):
    pass


class TestPriority(BasePriority):
    PRIORITY_ORDER = "desc" if SIDE == "redis" else "asc"


class TestMessage(BaseMessage):
    pass


class TestEventLoop(BaseEventLoop):
    pass


class TestFailover(BaseFailover):
    pass
