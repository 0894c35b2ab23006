"""What the peer suites' fixtures share (dramatiq_conftest.py, kombu_suite.py): the
side they run on and its servers, from the environment bench/peer_suites.py
sets (PEER_SIDE, PEER_REDIS ``host:port``, PEER_DISQUE the nodes' ``host:port``
separated by spaces), and emptying them before each test. bench/peer_suites.py
copies it beside each (tests/ and t/integration/, both packages there)."""

from __future__ import annotations

import os

import pytest
import redis

SIDE = os.environ.get("PEER_SIDE", "")
if SIDE not in ("redis", "disque"):
    raise pytest.UsageError("PEER_SIDE must be redis or disque (bench/peer_suites.py sets it)")
REDIS = os.environ.get("PEER_REDIS", "")
NODES = os.environ.get("PEER_DISQUE", "").split()


def address(hostport: str) -> tuple[str, int]:
    host, _, port = hostport.rpartition(":")
    return host, int(port)


def empty_servers() -> None:
    """Nothing left from the test before: its messages, results, dead letters
    (FLUSHALL; DEBUG FLUSHALL on every node)."""
    if SIDE == "redis":
        host, port = address(REDIS)
        with redis.Redis(host=host, port=port) as client:
            client.flushall()
        return
    for node in NODES:
        host, port = address(node)
        with redis.Redis(host=host, port=port, protocol=2) as client:
            client.execute_command("DEBUG", "FLUSHALL")
