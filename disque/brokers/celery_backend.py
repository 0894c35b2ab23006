"""A Celery result backend on Disque: results, states, groups and chords kept in
the cluster itself, no Redis or database beside it.

    app = Celery("shop", broker="disque://127.0.0.1:7711", backend="disque://127.0.0.1:7711")
    app.conf.result_backend_transport_options = {"nodes": ["127.0.0.1:7712"]}

(``disque://`` names it through the ``celery.result_backends`` entry point of
disque-py-client; or ``result_backend="disque.brokers.celery_backend:DisqueBackend"``
with the URL in ``result_backend_transport_options["url"]``.)

Celery's key-value backend asks for get, set and delete; on Disque a key is a
queue and its value the newest job there:

* A key lives on two nodes picked by the key among the cluster's nodes (in the
  order of their IDs, so every worker and caller picks the same two): the
  value is added on each as a job of its own (REPLICATE 1, RETRY 0: never
  queued again, never moved; TTL ``result_expires``), so one node lost leaves
  the other's copy, in its queue, where a QPEEK finds it.
* get: QPEEK of the newest job on the first of the two that answers, then
  the other nodes (a node back from the dead, the cluster grown).
* set: ADDJOB on both, then ACKJOB of the older values there (a state replaced
  by the next, STARTED by SUCCESS).
* delete: ACKJOB of every value of the key on both.

Chords: Celery's ``chord_unlock`` task (its way for a backend without an
atomic counter) waits for the group's results, polling them through this
backend once a second, then sends the callback. Disque's only atomic counter
is a queue's length on one node (MAXLEN), which would make one node every
chord's; chords wait a second or so more, and lose no part to a node lost.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any
from urllib.parse import urlsplit

from celery.backends.base import KeyValueStoreBackend
from celery.exceptions import ImproperlyConfigured

from disque.client import Client, ClientOnNodePerThread, ClientPerThread
from disque.commands import seed_addresses
from disque.errors import ConnectionLost, DisqueError, NoNodeAvailable
from disque.protocol import text

log = logging.getLogger("disque.celery")

DEFAULT_PORT = 7711
COPIES = 2  # nodes a key's value is kept on
ADD_TIMEOUT_MS = 5000
PEEK_AT_MOST = 100  # older values of a key cleared at once


class DisqueBackend(KeyValueStoreBackend):
    """Celery's results in Disque (see the module)."""

    supports_autoexpire = True
    supports_native_join = False
    implements_incr = False  # chords through Celery's chord_unlock

    def __init__(self, app: Any, url: str | None = None, **kwargs: Any) -> None:
        super().__init__(app, url=url, **kwargs)
        options = dict(self.app.conf.get("result_backend_transport_options") or {})
        self.seeds = seeds_of(url or options.get("url") or "", options.get("nodes", ()))
        password = options.get("password") or password_of(url or options.get("url") or "")
        self.client = ClientPerThread(lambda: Client(*self.seeds, password=password))
        self.client_on = ClientOnNodePerThread(
            lambda node: Client(node, password=password, stay=True, connect_timeout=2.0)
        )
        self.ttl = int(self.expires) if self.expires else None

    # ---- where a key lives ---------------------------------------------------------
    def nodes_of(self, key: str) -> list[str]:
        """The nodes to look for a key on, its two first: every node by ID, from the
        one the key's hash picks."""
        client = self.client()
        if not client.nodes:
            client.hello()
        ring = sorted((n for n in client.nodes if n.host), key=lambda n: n.id)
        if not ring:
            return [f"{client.address[0]}:{client.address[1]}"] if client.address else []
        start = int(hashlib.sha1(key.encode()).hexdigest(), 16) % len(ring)
        return [ring[(start + i) % len(ring)].addr for i in range(len(ring))]

    def on(self, node: str) -> Client:
        return self.client_on(node)

    # ---- key-value ------------------------------------------------------------------
    def get(self, key: bytes | str) -> bytes | None:
        name = text(key)
        for node in self.nodes_of(name):
            try:
                newest = self.on(node).qpeek(name, -1)
            except (NoNodeAvailable, ConnectionLost):
                continue
            if newest:
                return newest[0].body
        return None

    def mget(self, keys: list[bytes | str]) -> list[bytes | None]:
        return [self.get(key) for key in keys]

    def set(self, key: bytes | str, value: bytes | str) -> None:
        name = text(key)
        body = value.encode() if isinstance(value, str) else value
        kept = 0
        for node in self.nodes_of(name):
            if kept == COPIES:
                break
            try:
                client = self.on(node)
                new = client.add_job(name, body, ADD_TIMEOUT_MS, replicate=1, retry=0, ttl=self.ttl)
                older = [job.id for job in client.qpeek(name, PEEK_AT_MOST) if job.id != new]
                if older:
                    client.ack(*older)
                kept += 1
            except (NoNodeAvailable, ConnectionLost) as exc:
                log.info("result %s not kept on %s (%s): on the next node", name, node, exc)
        if not kept:
            raise DisqueError(f"result {name} kept on no node: none answered")

    def delete(self, key: bytes | str) -> None:
        name = text(key)
        for node in self.nodes_of(name):
            try:
                client = self.on(node)
                jobs = client.qpeek(name, PEEK_AT_MOST)
                if jobs:
                    client.ack(*(job.id for job in jobs))
            except (NoNodeAvailable, ConnectionLost):
                continue

    def expire(self, key: bytes | str, value: int) -> None:
        pass  # each value is added with the TTL result_expires


def with_port(host: str) -> str:
    has_port = not host.endswith("]") and host.rsplit(":", 1)[-1].isdigit() and ":" in host
    return host if has_port else f"{host}:{DEFAULT_PORT}"


def password_of(url: str) -> str | None:
    return urlsplit(url).password if url else None


def seeds_of(url: str, nodes: Any) -> list[str]:
    """``disque://host:port[,host:port...]`` and the ``nodes`` option, as seeds."""
    parts = urlsplit(url) if url else None
    if parts is not None and parts.scheme not in ("disque", ""):
        raise ImproperlyConfigured(f"not a disque:// result backend URL: {url!r}")
    hosts = parts.netloc.rsplit("@", 1)[-1] if parts is not None else ""
    seeds = [with_port(host) for host in hosts.split(",") if host]
    seeds += [str(n) for n in (nodes or ())]
    if not seeds:
        raise ImproperlyConfigured("a disque:// result backend names a node: disque://host:port")
    try:
        seed_addresses(seeds)
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(f"result backend: {exc}") from None
    return seeds
