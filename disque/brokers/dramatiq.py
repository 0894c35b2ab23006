"""A Dramatiq broker on Disque: keep your actors, run them on a Disque cluster.

    import dramatiq
    from disque.brokers.dramatiq import DisqueBroker

    dramatiq.set_broker(DisqueBroker("127.0.0.1:7711", "127.0.0.1:7712"))

    @dramatiq.actor(max_retries=3)
    def count_words(url): ...

    # dramatiq app        (Dramatiq's own worker command)

A message is a Disque job whose body is Dramatiq's encoded message, on a queue
of the actor's queue name. How Dramatiq's parts map onto Disque's:

* ``enqueue(message, delay=ms)``: ADDJOB, with DELAY (the whole seconds) and
  the message's ``eta`` for a delay: Disque holds the job the whole seconds,
  then Dramatiq's worker holds it until its eta (to the millisecond, as for
  its own brokers' delayed messages) and enqueues it again; no delay queue is
  consumed. Retries (Dramatiq's Retries middleware) come back this way, so a
  138 ms backoff is 138 ms.
* The consumer GETJOBs up to its prefetch at once. A message being processed
  gets WORKING every half RETRY (sent from the consumer thread), so a long
  actor is not delivered twice; a worker that dies stops sending it, and
  Disque queues its messages again after their RETRY (``retry``, default 60 s):
  at-least-once, as Dramatiq's own brokers, with no heartbeat keys.
* ack: ACKJOB. nack (a message that failed for good): ADDJOB of it to
  ``<queue>.XQ`` (kept ``dead_message_ttl``, 7 days), then ACKJOB.
* requeue (a worker stopping with prefetched messages): NACK, so another
  worker gets them at once.
* ``DisqueBackend``: Dramatiq's Results middleware on Disque: a result is a
  job on its own queue; reading it is a GETJOB (federation finds it on any
  node), then a NACK so that it can be read again until its TTL.

What it does not do: priorities across queues (Disque has none: actor
``priority`` orders messages inside one worker only, as in the Redis broker),
and ``join`` counts the messages Disque holds for the queue on every node.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

import dramatiq
from dramatiq.broker import Broker, Consumer, MessageProxy
from dramatiq.common import current_millis, q_name, xq_name
from dramatiq.errors import ConnectionClosed, QueueJoinTimeout, QueueNotFound
from dramatiq.message import Message
from dramatiq.results import ResultBackend, ResultMissing, ResultTimeout
from dramatiq.results.backend import DEFAULT_TIMEOUT, Missing

from disque.brokers.held import Held
from disque.brokers.home import Home
from disque.client import Client, ClientPerThread
from disque.errors import ConnectionLost, DisqueError, NoNodeAvailable
from disque.job import Job
from disque.scan import jobs_everywhere
from disque.tls import TLS
from disque.worker import dead_letter_copies

JOB_ID = "disque_job_id"  # the message option holding its job's ID
DEFAULT_RETRY = 60
DEFAULT_TTL = 24 * 3600
DEAD_MESSAGE_TTL = 7 * 24 * 3600
ADD_TIMEOUT_MS = 5000


class DisqueBroker(Broker):
    """Dramatiq's broker on a Disque cluster (``nodes``: seeds, as ``disque.Client``).

    ``replicate``: copies of each message (Disque's default when None: 3, or
    fewer nodes); ``retry``: seconds before a message whose worker went silent
    is delivered again; ``ttl``: seconds a message lives (a delayed one: its
    delay more)."""

    def __init__(
        self,
        *nodes: str | Sequence[str],
        password: str | None = None,
        tls: TLS | None = None,
        replicate: int | None = None,
        retry: int = DEFAULT_RETRY,
        ttl: int = DEFAULT_TTL,
        dead_message_ttl: int = DEAD_MESSAGE_TTL,
        middleware: list[dramatiq.Middleware] | None = None,
    ) -> None:
        super().__init__(middleware=middleware)
        self.nodes = nodes
        self.password = password
        self.tls = tls
        self.replicate = replicate
        self.retry = retry
        self.ttl = ttl
        self.dead_message_ttl = dead_message_ttl
        self.queues: set[str] = set()
        self.home = Home.of(nodes)  # one node for all its clients (home.py)
        self.client = ClientPerThread(self.new_client)  # (Dramatiq acks from its threads)
        self.client()  # a bad seed is an error now

    def new_client(self) -> Client:
        return self.home.join(Client(*self.nodes, password=self.password, tls=self.tls))

    def consume(self, queue_name: str, prefetch: int = 1, timeout: int = 30000) -> Consumer:
        if queue_name not in self.queues:
            raise QueueNotFound(queue_name)
        return DisqueConsumer(self, queue_name, prefetch, timeout)

    def declare_queue(self, queue_name: str) -> None:
        if queue_name not in self.queues:
            self.emit_before("declare_queue", queue_name)
            self.queues.add(queue_name)
            self.emit_after("declare_queue", queue_name)

    def enqueue(self, message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        queue_name = q_name(message.queue_name)
        if queue_name not in self.queues:
            raise QueueNotFound(queue_name)
        if delay:
            # Disque holds the whole seconds (DELAY); Dramatiq's worker holds the rest
            # until the eta, as it does for its own brokers' delayed messages.
            eta = current_millis() + delay
            message = message.copy(queue_name=queue_name, options={"eta": eta})
        else:
            message = message.copy(queue_name=queue_name)
        seconds = delay // 1000 if delay else 0
        self.emit_before("enqueue", message, delay)
        ttl = self.ttl + math.ceil(delay / 1000) if delay else self.ttl
        job_id = self.add(queue_name, message.encode(), self.retry, ttl, seconds)
        # The message as its consumer will get it (with its job's ID), as Dramatiq's
        # own brokers return it: CurrentMessage's message equals the one sent.
        message = message.copy(options={JOB_ID: job_id})
        self.emit_after("enqueue", message, delay)
        return message

    def add(self, queue: str, body: bytes, retry: int, ttl: int, delay: int = 0) -> str:
        try:
            return self.client().add_job(
                queue,
                body,
                ADD_TIMEOUT_MS,
                replicate=self.replicate,
                retry=retry,
                ttl=ttl,
                delay=delay or None,
            )
        except (ConnectionLost, NoNodeAvailable) as exc:
            raise ConnectionClosed(exc) from None

    def dead_letter(self, message: MessageProxy) -> None:
        """A message that failed for good: to ``<queue>.XQ``, then acknowledged (when
        it is a job of ours: one that was not delivered by Disque has none)."""
        job_id = message.options.get(JOB_ID)
        body = message.copy(options={JOB_ID: None}).encode()  # (a proxy passes copy on)
        self.add(xq_name(message.queue_name), body, self.dead_message_ttl, self.dead_message_ttl)
        if job_id:
            self.client().ack(job_id)

    def get_declared_queues(self) -> set[str]:
        return set(self.queues)

    def get_declared_delay_queues(self) -> set[str]:
        return set()  # Disque delays jobs itself (ADDJOB DELAY)

    def live_jobs(self, queue_name: str) -> set[str]:
        """The IDs of the queue's jobs not acknowledged, on every reachable node."""
        return set(jobs_everywhere(self.client(), queue_name))

    def flush(self, queue_name: str) -> None:
        """Drop every message of the queue, on every reachable node."""
        ids = list(self.live_jobs(q_name(queue_name)))
        for start in range(0, len(ids), 500):
            self.client().ack(*ids[start : start + 500])

    def flush_all(self) -> None:
        for queue_name in self.queues:
            self.flush(queue_name)

    def join(self, queue_name: str, *, timeout: int | None = None) -> None:
        """Wait until no message of the queue is left anywhere (tests)."""
        deadline = None if timeout is None else time.monotonic() + timeout / 1000
        while self.live_jobs(q_name(queue_name)):
            if deadline is not None and time.monotonic() > deadline:
                raise QueueJoinTimeout(queue_name)
            time.sleep(0.1)


class DisqueConsumer(Consumer):
    """GETJOB in batches up to the prefetch; WORKING for the messages being
    processed, every half RETRY; ack and nack from the worker threads."""

    def __init__(self, broker: DisqueBroker, queue_name: str, prefetch: int, timeout: int) -> None:
        self.broker = broker
        self.queue_name = queue_name
        self.prefetch = prefetch
        self.timeout = timeout
        self.fetching = broker.new_client()  # the consumer thread's own
        self.cache: list[Job] = []
        self.held = Held(broker.retry)  # messages handed to Dramatiq, not yet acked

    def __next__(self) -> MessageProxy | None:
        self.held.keep_alive(self.fetching)
        if not self.cache:
            room = self.prefetch - len(self.held)
            if room <= 0:
                time.sleep(min(self.timeout, 100) / 1000)
                return None
            try:
                self.cache = self.fetching.get_job(
                    self.queue_name, timeout=max(1, self.timeout), count=room
                )
            except (ConnectionLost, NoNodeAvailable) as exc:
                raise ConnectionClosed(exc) from None
            if not self.cache:
                return None
        job = self.cache.pop(0)
        message = Message.decode(job.body).copy(options={JOB_ID: job.id})
        self.held.hold(job.id)
        return MessageProxy(message)

    def forget(self, message: MessageProxy) -> str | None:
        """The message's job ID, no longer held; None for a message Disque did not
        deliver (Dramatiq's worker must not fail on one: its issue #320)."""
        job_id: str | None = message.options.get(JOB_ID)
        if job_id:
            self.held.forget(job_id)
        return job_id

    def ack(self, message: MessageProxy) -> None:
        job_id = self.forget(message)
        if not job_id:
            return
        try:
            self.broker.client().ack(job_id)
        except (ConnectionLost, NoNodeAvailable) as exc:
            raise ConnectionClosed(exc) from None

    def nack(self, message: MessageProxy) -> None:
        self.forget(message)
        try:
            self.broker.dead_letter(message)
        except (ConnectionLost, NoNodeAvailable) as exc:
            raise ConnectionClosed(exc) from None

    def requeue(self, messages: Iterable[MessageProxy]) -> None:
        """Queue again at once (NACK) what this worker took and will not process."""
        ids = [job_id for message in messages if (job_id := self.forget(message))]
        ids += [job.id for job in self.cache]
        self.cache = []
        if ids:
            try:
                self.fetching.nack(*ids)
            except DisqueError:
                pass  # Disque queues them again after their RETRY

    def close(self) -> None:
        self.requeue([])
        self.fetching.close()


class DisqueBackend(ResultBackend):
    """Dramatiq's result backend on Disque: each result a job on the queue named
    by its message key, read with GETJOB and put back with NACK."""

    def __init__(
        self,
        *nodes: str | Sequence[str],
        password: str | None = None,
        tls: TLS | None = None,
        namespace: str = "dramatiq-results",
        encoder: Any = None,
    ) -> None:
        super().__init__(namespace=namespace, encoder=encoder)
        self.nodes = nodes
        self.password = password
        self.tls = tls
        self.home = Home.of(nodes)  # results stored and read on one node (home.py)
        self.client = ClientPerThread(
            lambda: self.home.join(Client(*nodes, password=password, tls=tls))
        )

    def get_result(
        self, message: Message[Any], *, block: bool = False, timeout: int | None = None
    ) -> Any:
        key = self.build_message_key(message)
        wait = (timeout if timeout is not None else DEFAULT_TIMEOUT) if block else 1
        started = current_millis()
        client = self.client()
        jobs = client.get_job(key, timeout=max(1, wait))
        if not jobs:
            if block and current_millis() - started >= wait:
                raise ResultTimeout(message)
            raise ResultMissing(message)
        client.nack(jobs[0].id)  # left for the next read, until its TTL
        return self.unwrap_result(self.encoder.decode(jobs[0].body))

    def _get(self, message_key: str) -> Any:
        jobs = self.client().get_job(message_key, timeout=1)
        if not jobs:
            return Missing
        self.client().nack(jobs[0].id)
        return self.encoder.decode(jobs[0].body)

    def _store(self, message_key: str, result: Any, ttl: int) -> None:
        seconds = max(1, math.ceil(ttl / 1000))
        self.client().add_job(
            message_key,
            self.encoder.encode(result),
            ADD_TIMEOUT_MS,
            replicate=dead_letter_copies(self.client()),
            retry=min(30, seconds),
            ttl=seconds,
        )
