"""The kombu transport's exchange bindings, shared through Disque itself, so that
a message published in one process reaches the queues bound in another: the
fanout of Celery's remote control (``celery inspect``, ``control``), the topic
exchange of its events (Flower), and the direct reply exchange whose routing
keys are not queue names.

A binding is a job in ``_kombu.binding.<exchange>`` whose body is
``[routing_key, pattern, queue]`` (JSON), added on every reachable node (one
copy each, RETRY 0: never moved), so any one node's QPEEK reads every binding.
A process reads an exchange's bindings at most once a second, and again at
once when a routing key matches none (a reply queue bound a moment ago);
deleting a queue deletes its bindings on every node. A binding whose process died without
deleting its queue is kept until its TTL (30 days): messages fanned out to it
wait in a queue nobody reads, until their own TTL (kombu's ``expiration``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from disque.client import Client
from disque.errors import DisqueError
from disque.scan import reachable

log = logging.getLogger("disque.kombu")

BINDING_QUEUE = "_kombu.binding.{}"
BINDING_TTL = 30 * 24 * 3600
READ_EVERY = 1.0  # seconds an exchange's bindings are trusted for
READ_AT_MOST = 10_000

Binding = tuple[str, str, str]  # (routing key, pattern, queue), as kombu's tables hold them


class Bindings:
    """Every process's bindings, read and written through Disque."""

    def __init__(self, client: Callable[[], Client], client_on: Callable[[str], Client]) -> None:
        self.client = client
        self.client_on = client_on
        self.lock = threading.Lock()
        self.read_at: dict[str, tuple[float, list[Binding]]] = {}

    def table(self, exchange: str, fresh: bool = False) -> list[Binding]:
        """The exchange's bindings, from one node (each holds them all); read again
        when ``fresh`` (a routing key that matched none: bound a moment ago?)."""
        with self.lock:
            cached = self.read_at.get(exchange)
        if not fresh and cached is not None and time.monotonic() - cached[0] < READ_EVERY:
            return cached[1]
        found: dict[Binding, None] = {}
        for job in self.client().qpeek(BINDING_QUEUE.format(exchange), READ_AT_MOST):
            binding = parse(job.body)
            if binding is not None:
                found[binding] = None
        table = list(found)
        with self.lock:
            self.read_at[exchange] = (time.monotonic(), table)
        return table

    def add(self, exchange: str, binding: Binding) -> None:
        """A binding on every reachable node (unless it is there already)."""
        if binding in self.table(exchange):
            return
        body = json.dumps(list(binding))
        for node in reachable(self.client()):
            try:
                self.client_on(node).add_job(
                    BINDING_QUEUE.format(exchange),
                    body,
                    5000,
                    replicate=1,
                    retry=0,
                    ttl=BINDING_TTL,
                )
            except DisqueError as exc:  # that node's readers miss it until it is added again
                log.warning(
                    "binding of %s to %s not kept on %s: %s", binding[2], exchange, node, exc
                )
        with self.lock:
            self.read_at.pop(exchange, None)

    def remove(self, exchange: str, queue: str) -> None:
        """The queue's bindings to the exchange, deleted on every reachable node."""
        name = BINDING_QUEUE.format(exchange)
        for node in reachable(self.client()):
            try:
                client = self.client_on(node)
                ids = [
                    job.id
                    for job in client.qpeek(name, READ_AT_MOST)
                    if (parse(job.body) or ("", "", ""))[2] == queue
                ]
                if ids:
                    client.ack(*ids)
            except DisqueError as exc:  # it goes at its TTL
                log.info("bindings of %s not deleted on %s: %s", queue, node, exc)
        with self.lock:
            self.read_at.pop(exchange, None)


def parse(body: bytes) -> Binding | None:
    try:
        routing_key, pattern, queue = json.loads(body)
    except (ValueError, TypeError):
        return None
    return (str(routing_key or ""), str(pattern or ""), str(queue))
