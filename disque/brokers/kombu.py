"""A kombu transport on Disque, so Celery runs on a Disque cluster.

    import disque.brokers.kombu  # registers disque:// with kombu

    app = Celery("shop", broker="disque://127.0.0.1:7711")
    app.conf.broker_transport_options = {"nodes": ["127.0.0.1:7712"], "replicate": 2}
    app.conf.task_acks_late = True

    # celery -A shop worker   (Celery's own worker command)

(Or, without the import: ``broker_transport="disque.brokers.kombu:Transport"``.)

A kombu message is a Disque job: the message (kombu's JSON envelope: body,
headers, properties) is the job's body, its queue the job's queue, and the
delivery tag the job's ID. How kombu's parts map onto Disque's:

* publish: ADDJOB (``replicate``, ``retry``, ``ttl`` from the transport
  options; Disque's defaults otherwise). A direct exchange this process has
  no binding for routes to the queue named by the routing key.
* consume: one GETJOB over every queue consumed (by every channel of the
  connection: Celery's worker consumes its tasks and its remote control on
  two), up to the prefetch, blocking up to a second: no polling loop.
* ack: ACKJOB. reject with requeue (and messages left unacknowledged when a
  worker stops): NACK, so another worker gets them at once; reject without
  requeue: ACKJOB (dropped).
* A message held unacknowledged (a long task with ``acks_late``, a task with
  an ETA or countdown, which Celery keeps in the worker) gets WORKING every
  half RETRY, so it is not delivered twice. A worker that dies stops sending
  it, and Disque delivers its messages again after their RETRY
  (``retry``, default 60 s). Half the message's TTL (12 h by default) is the
  longest Disque lets WORKING postpone it: longer ETAs are delivered again.

Exchanges: direct, topic and fanout. Their bindings are kept in Disque
itself (bindings.py), so a message published in one process reaches queues
bound in another: Celery's remote control (``celery inspect``, ``control``,
revoke), its events (Flower) and the replies to them work. A direct exchange
nobody bound routes to the queue its routing key names. Priorities: none
(Disque has none). ``_size`` is the QLEN of one node. A message's
``expiration`` is its job's TTL. Results: ``backend="disque://..."`` keeps
them in Disque too (celery_backend.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from queue import Empty
from typing import Any

from kombu.transport import TRANSPORT_ALIASES, virtual

from disque.brokers.bindings import Bindings
from disque.brokers.held import Held
from disque.brokers.home import Home
from disque.client import Client, ClientOnNodePerThread, ClientPerThread
from disque.errors import ConnectionLost, DisqueError, NoNodeAvailable
from disque.scan import jobs_everywhere

DEFAULT_PORT = 7711
DEFAULT_RETRY = 60
FETCH_TIMEOUT_MS = 1000
FETCH_COUNT = 10  # with no prefetch limit


class Channel(virtual.Channel):
    """One kombu channel: a client for publishing and acknowledging (any thread)
    and one for fetching (the consuming thread)."""

    do_restore = True
    supports_fanout = True  # through the bindings kept in Disque (bindings.py)

    def __init__(self, connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        options = self.connection.client.transport_options
        self.replicate: int | None = options.get("replicate")
        self.retry: int = int(options.get("retry", DEFAULT_RETRY))
        self.ttl: int | None = options.get("ttl")
        self.client = ClientPerThread(self.new_client)  # acks come from Celery's threads
        self.client_on = ClientOnNodePerThread(self.new_client_on)
        self.fetching = self.new_client()
        self.bindings = Bindings(self.client, self.client_on)
        # A wrong address fails here, at connect() or channel(), as with kombu's
        # other transports, not at the first publish.
        self.fetching.hello()
        self.held = Held(self.retry)  # delivered to kombu, not yet acked or rejected

    # ---- clients ----------------------------------------------------------------------
    def seeds(self) -> list[str]:
        conninfo = self.connection.client
        seeds = [f"{conninfo.hostname or '127.0.0.1'}:{conninfo.port or DEFAULT_PORT}"]
        return seeds + list(conninfo.transport_options.get("nodes", []))

    def new_client(self) -> Client:
        """A client on this process's home node (home.py): what a channel publishes
        or requeues is where every channel fetches."""
        password = self.connection.client.password or None
        seeds = self.seeds()
        return Home.of(seeds).join(Client(*seeds, password=password))

    def new_client_on(self, node: str) -> Client:
        password = self.connection.client.password or None
        return Client(node, password=password, stay=True, connect_timeout=2.0)

    # ---- queues -----------------------------------------------------------------------
    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        pass  # a Disque queue exists while it holds jobs

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        return True

    def _delete(self, queue: str, *args: Any, **kwargs: Any) -> None:
        self._purge(queue)

    def _size(self, queue: str) -> int:
        return self.client().qlen(queue)

    def _purge(self, queue: str) -> int:
        ids = list(jobs_everywhere(self.client(), queue))
        for start in range(0, len(ids), 500):
            self.client().ack(*ids[start : start + 500])
        return len(ids)

    # ---- exchanges ------------------------------------------------------------------
    def get_table(self, exchange: str, fresh: bool = False) -> list[tuple[str, str, str]]:
        """This process's bindings of the exchange and every other's (bindings.py)."""
        local = self.state.exchanges.get(exchange, {}).get("table", [])
        shared = self.bindings.table(exchange, fresh)
        return list(dict.fromkeys([*map(tuple, local), *shared]))

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        self.bindings.add(exchange, (routing_key or "", pattern or "", queue))

    def queue_unbind(
        self,
        queue: str,
        exchange: str | None = None,
        routing_key: str = "",
        arguments: Any = None,
        **kwargs: Any,
    ) -> None:
        super().queue_unbind(queue, exchange, routing_key, arguments, **kwargs)
        if exchange:
            self.bindings.remove(exchange, queue)

    def queue_delete(
        self, queue: str, if_unused: bool = False, if_empty: bool = False, **kwargs: Any
    ) -> Any:
        for exchange, _, _ in list(self.state.queue_bindings(queue)):
            self.bindings.remove(exchange, queue)
        return super().queue_delete(queue, if_unused, if_empty, **kwargs)

    def _lookup(self, exchange: str, routing_key: str, default: Any = None) -> list[str]:
        """The queues bound in any process; a direct exchange no one bound routes
        to the queue its routing key names (a worker's own task queues)."""
        if not exchange:
            return [routing_key or default]
        kind = self.typeof(exchange)
        queues = list(kind.lookup(self.get_table(exchange), exchange, routing_key, None))
        if not queues:  # bound a moment ago in another process?
            queues = list(kind.lookup(self.get_table(exchange, True), exchange, routing_key, None))
        if queues:
            return queues
        if kind.type == "direct":
            return [routing_key]
        return [default] if default is not None else []

    def _put_fanout(
        self, exchange: str, message: dict[str, Any], routing_key: str, **kwargs: Any
    ) -> None:
        for queue in dict.fromkeys(queue for _, _, queue in self.get_table(exchange)):
            self._put(queue, message)

    # ---- messages ---------------------------------------------------------------------
    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        try:
            self.client().add_job(
                queue,
                json.dumps(message),
                5000,
                replicate=self.replicate,
                retry=self.retry,
                ttl=expiration(message) or self.ttl,
            )
        except (ConnectionLost, NoNodeAvailable) as exc:
            raise self.connection.connection_errors[0](str(exc)) from None

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        jobs = self.fetching.get_job(queue, nohang=True)
        if not jobs:
            raise Empty()
        return self.received(jobs[0].id, jobs[0].body)

    def received(self, job_id: str, body: bytes) -> dict[str, Any]:
        """The kombu message in a job, its delivery tag the job's ID."""
        message: dict[str, Any] = json.loads(body)
        message["properties"]["delivery_tag"] = job_id
        self.held.hold(job_id)
        return message

    def drain_events(
        self, timeout: float | None = None, callback: Callable[..., Any] | None = None
    ) -> None:
        """One GETJOB over every queue consumed (blocking up to a second), each
        job handed to kombu; WORKING for what is held past half its RETRY."""
        self.held.keep_alive(self.fetching)
        if not (self._consumers and self.qos.can_consume()):
            raise Empty()
        wait = (
            FETCH_TIMEOUT_MS
            if timeout is None
            else max(1, min(FETCH_TIMEOUT_MS, int(timeout * 1000)))
        )
        if not drain_together([self], callback or self.connection._deliver, wait):
            raise Empty()

    def basic_ack(self, delivery_tag: str, multiple: bool = False) -> None:
        self.held.forget(delivery_tag)
        try:
            self.client().ack(delivery_tag)
        finally:
            super().basic_ack(delivery_tag)

    def basic_reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self.held.forget(delivery_tag)
        try:
            if requeue:
                self.client().nack(delivery_tag)
            else:
                self.client().ack(delivery_tag)
        finally:
            self.qos.ack(delivery_tag)  # released here: no copy put back by kombu

    def _restore(self, message: Any) -> None:
        """An unacknowledged message at close (or basic_recover): NACK, queued again."""
        self.held.forget(message.delivery_tag)
        self.client().nack(message.delivery_tag)

    def close(self) -> None:
        super().close()  # (restores what is unacknowledged first)
        self.fetching.close()


class Transport(virtual.Transport):
    Channel = Channel
    default_port = DEFAULT_PORT  # type: ignore[assignment]  # (kombu types it None)
    polling_interval = 0  # drain_events blocks in GETJOB: no sleep between polls
    driver_type = "disque"
    driver_name = "disque"
    connection_errors = (OSError, NoNodeAvailable)  # type: ignore[assignment]
    channel_errors = (DisqueError,)
    implements = virtual.Transport.implements.extend(
        asynchronous=False,
        exchange_type=frozenset(["direct", "topic", "fanout"]),
        heartbeats=False,
    )

    def driver_version(self) -> str:
        from importlib.metadata import version

        return version("disque-py-client")

    def drain_events(self, connection: Any, timeout: Any = None, **kwargs: Any) -> Any:
        """One GETJOB over the queues of every channel consuming: a channel waiting
        alone in its GETJOB would keep the others' messages waiting up to a second
        (Celery's worker consumes its tasks and its remote control on two)."""
        started = time.monotonic()
        while True:
            channels: list[Channel] = list(self.channels or ())
            consuming = [c for c in channels if c._consumers and c.qos.can_consume()]
            if len(consuming) <= 1:
                left = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
                super().drain_events(connection, left)
                return
            left_ms = FETCH_TIMEOUT_MS
            if timeout is not None:
                left_ms = int((timeout - (time.monotonic() - started)) * 1000)
                if left_ms <= 0:
                    raise TimeoutError()
            for channel in channels:  # (full ones too: their held messages need WORKING)
                channel.held.keep_alive(channel.fetching)
            if drain_together(consuming, self._deliver, min(FETCH_TIMEOUT_MS, left_ms)):
                return


TRANSPORT_ALIASES.setdefault("disque", "disque.brokers.kombu:Transport")


def drain_together(
    channels: list[Channel], deliver: Callable[[dict[str, Any], str], None], wait_ms: int
) -> bool:
    """GETJOB over the queues the channels consume, each job held by and delivered
    to the channel consuming its queue; whether any came."""
    owners = {queue: channel for channel in channels for queue in channel._active_queues}
    count = sum(c.qos.can_consume_max_estimate() or FETCH_COUNT for c in channels)
    fetching = channels[0].fetching
    try:
        jobs = fetching.get_job(*owners, timeout=max(1, wait_ms), count=count)
    except (ConnectionLost, NoNodeAvailable) as exc:
        raise channels[0].connection.connection_errors[0](str(exc)) from None
    for job in jobs:
        deliver(owners[job.queue].received(job.id, job.body), job.queue)
    return bool(jobs)


def expiration(message: dict[str, Any]) -> int | None:
    """A message's TTL in whole seconds from kombu's ``expiration`` (ms), if set."""
    value = message.get("properties", {}).get("expiration")
    try:
        return max(1, -(-int(float(value)) // 1000)) if value is not None else None
    except (TypeError, ValueError):
        return None
