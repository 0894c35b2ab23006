"""Talking to Disque nodes from Spark tasks: seeds, HELLO, connections, JSCAN.

Everything here is plain redis-py (RESP2) through ``disque.protocol`` so
it runs in any Python worker that can import ``redis``; nothing keeps a socket
between calls unless the caller holds the returned client.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import redis

from disque import protocol as client
from disque.commands import parse_address
from disque.errors import DisqueError  # the package's one error hierarchy
from disque.protocol import Node, by_priority
from disque.tls import TLS, handshake_failure

DEFAULT_NODES = "127.0.0.1:7711"

# Field names of SHOW / JSCAN REPLY ALL, and the column each one becomes.
JOB_FIELDS = {
    b"id": "id",
    b"queue": "queue",
    b"state": "state",
    b"repl": "repl",
    b"ttl": "ttl",
    b"ctime": "ctime",
    b"delay": "delay",
    b"retry": "retry",
    b"nacks": "nacks",
    b"additional-deliveries": "additional_deliveries",
    b"nodes-delivered": "nodes_delivered",
    b"nodes-confirmed": "nodes_confirmed",
    b"next-requeue-within": "next_requeue_within",
    b"next-awake-within": "next_awake_within",
    b"body": "body",
}


def parse_seeds(nodes: str | None) -> list[tuple[str, int]]:
    """'h1:7711,h2:7712' -> [('h1', 7711), ('h2', 7712)]; a bare host means port 7711
    (``disque.commands.parse_address``, as every client of the package reads one)."""
    seeds = []
    for item in (nodes or DEFAULT_NODES).split(","):
        item = item.strip()
        if not item:
            continue
        try:
            seeds.append(parse_address(item))
        except ValueError:
            raise DisqueError(
                f"disque: bad node address {item!r} in option 'nodes' "
                "(expected host:port,host:port...)"
            ) from None
    if not seeds:
        raise DisqueError("disque: option 'nodes' lists no node")
    return seeds


def connect(
    host: str,
    port: int,
    password: str | None = None,
    socket_timeout: float = 30.0,
    tls: TLS | None = None,
) -> redis.Redis:
    """A RESP2 client, authenticated if a password is given, over TLS if `tls` is
    given, that never retries (the callers choose another node instead)."""
    return client.connect(
        host, port, password, socket_timeout=socket_timeout, connect_timeout=5.0, tls=tls
    )


def hello_nodes(reply: Any, seed_host: str, seed_port: int | None = None) -> list[Node]:
    """HELLO's nodes, as reached from here.

    A node that never met another one does not know its own IP and reports
    an empty one: the host we reached it on is used instead. With `seed_port`,
    the answering node's own entry gets that port: HELLO lists client ports,
    not tls-ports, and the seed is known to answer where we reached it.
    """
    try:
        hello = client.parse_hello(reply)
    except client.HelloError as exc:
        raise DisqueError(f"disque: {exc}") from None
    nodes = []
    for node in hello.nodes:
        node = replace(node, host=node.host or seed_host)
        nodes.append(replace(node, port=seed_port) if seed_port and node.id == hello.myid else node)
    return nodes


def discover(
    seeds: list[tuple[str, int]], password: str | None = None, tls: TLS | None = None
) -> list[Node]:
    """Every node of the cluster, from the first seed (random order) that answers HELLO."""
    errors = []
    for host, port in random.sample(seeds, len(seeds)):
        try:
            with connect(host, port, password, socket_timeout=10.0, tls=tls) as c:
                return hello_nodes(c.execute_command("HELLO"), host, port if tls else None)
        except (redis.RedisError, OSError) as exc:
            errors.append(f"{host}:{port}: {describe(exc)}")
    raise DisqueError("disque: no seed node answered HELLO (" + "; ".join(errors) + ")")


def describe(exc: BaseException) -> str:
    """A connection failure in one line; a failed TLS handshake says why."""
    return handshake_failure(exc) or str(exc)


def connect_best(
    seeds: list[tuple[str, int]],
    password: str | None = None,
    exclude: set[str] | frozenset[str] = frozenset(),
    socket_timeout: float = 30.0,
    tls: TLS | None = None,
) -> tuple[redis.Redis, Node]:
    """Connect to the best node HELLO offers (not one of `exclude`, ids or host:port).

    Leaving nodes (priority 100) are used only when nothing else answers.
    """
    nodes = [
        n
        for n in by_priority(discover(seeds, password, tls))
        if n.id not in exclude and n.addr not in exclude
    ]
    errors = []
    for node in nodes:
        link = connect(node.host, node.port, password, socket_timeout, tls)
        try:
            link.ping()
            return link, node
        except (redis.RedisError, OSError) as exc:
            link.close()
            errors.append(f"{node.addr}: {describe(exc)}")
    detail = ("; ".join(errors)) if errors else "every known node was excluded"
    raise DisqueError(f"disque: no node accepted a connection ({detail})")


def job_from_pairs(flat: list[Any]) -> dict[str, Any]:
    """A flat SHOW / JSCAN REPLY ALL array (30 elements) as a dict keyed by column name."""
    job: dict[str, Any] = {}
    for key, value in zip(flat[::2], flat[1::2], strict=True):
        name = JOB_FIELDS.get(key)
        if name is None:
            continue
        if isinstance(value, bytes) and name not in ("body",):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, list):
            value = [v.decode() if isinstance(v, bytes) else str(v) for v in value]
        job[name] = value
    return job


def jscan_jobs(
    client: redis.Redis,
    count: int = 1000,
    queue: str | None = None,
    states: list[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Every job of one node (JSCAN ... REPLY all), each once, as column dicts."""
    args: list[Any] = ["COUNT", count]
    if queue is not None:
        args += ["QUEUE", queue]
    for state in states or ():
        args += ["STATE", state]
    args += ["REPLY", "all"]
    seen: set[bytes] = set()
    cursor = b"0"
    while True:
        reply = client.execute_command("JSCAN", cursor, *args)
        cursor, items = reply[0], reply[1]
        for flat in items:
            jid = flat[1] if len(flat) > 1 else None
            if jid in seen:  # JSCAN may return an element twice
                continue
            seen.add(jid)
            yield job_from_pairs(flat)
        if cursor in (b"0", 0, "0"):
            return
