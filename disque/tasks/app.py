"""Tasks: functions called through Disque, with arguments, options and results.

    from disque.tasks import Tasks

    tasks = Tasks("127.0.0.1:7711", "127.0.0.1:7712")

    @tasks.task(queue="billing", retry=60, max_attempts=5, time_limit=30, result=True)
    def charge(customer: int, eur: int) -> str:
        ...

    handle = charge.send(42, eur=5)        # ADDJOB of a message (message.py)
    receipt = handle.get(timeout=10)       # its result, kept in Disque (results.py)
    charge(42, eur=5)                      # a plain call, in this process

    worker = tasks.worker(concurrency=8)   # a disque.Worker: ``disque-worker app:tasks``

A task's job is a Disque job like any other: RETRY, TTL and REPLICATE are
ADDJOB's, ``max_attempts`` and ``time_limit`` the worker's (worker.py), and a
failure is NACKed with a backoff, then dead-lettered, as for any handler.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import re
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from disque.aio import AsyncClient
from disque.client import Client, ClientOnNodePerThread, ClientPerThread
from disque.commands import seed_addresses
from disque.errors import DisqueError
from disque.middleware import Middleware, notify
from disque.tasks.message import DEFAULT_ACCEPT, BadMessage, Message
from disque.tasks.ratelimit import RateLimit
from disque.tasks.results import Result, reply_queue
from disque.tasks.revoke import Revocations, release_lock, revoke, take_lock
from disque.tasks.run import Outcome, Run
from disque.tasks.store import ADD_TIMEOUT_MS, Store
from disque.tasks.task import (
    DEFAULT_QUEUE,
    UNIQUE_LOCK,
    SendFailed,
    Task,
    TaskOptions,
    UnknownTask,
    check_options,
    worker_options,
)
from disque.worker import Call, Reject, Worker

if TYPE_CHECKING:
    from disque.job import Job
    from disque.tasks.periodic import Schedule
    from disque.tasks.stub import Stub
    from disque.tls import TLS

log = logging.getLogger("disque.tasks")

P = ParamSpec("P")
R = TypeVar("R")
RESULT_TTL = 24 * 3600  # seconds a result is kept for its readers
NODES_VARIABLE = "DISQUE_NODES"  # Tasks() with no node: its seeds


class Tasks:
    """Tasks sent to and run from a Disque cluster (``nodes``: seeds, as ``Client``).

    ``stub=True`` (applications' tests): no node; sent calls wait in memory until
    ``tasks.stub.run_pending()`` runs them (``eager=True``: at once, as sent).
    ``accept``: the serializers a worker reads (pickle only when listed).
    """

    def __init__(
        self,
        *nodes: str | Sequence[str],
        password: str | None = None,
        tls: TLS | None = None,
        queue: str = DEFAULT_QUEUE,
        serializer: str = "json",
        accept: Iterable[str] = DEFAULT_ACCEPT,
        middleware: Iterable[Middleware] = (),
        result_ttl: int = RESULT_TTL,
        stub: bool = False,
        eager: bool = False,
    ) -> None:
        if not stub and not eager:
            nodes = nodes or seeds_from_environment()
            check_seeds(nodes)  # a bad seed is an error here, not at the first send
        self.nodes = nodes
        self.password = password
        self.tls = tls
        self.defaults = TaskOptions(queue=queue, serializer=serializer)
        self.accept = tuple(accept)
        self.middleware = list(middleware)
        self.result_ttl = result_ttl
        self.registry: dict[str, Task[Any, Any]] = {}
        self.schedules: dict[str, Schedule] = {}
        # This thread's client.
        self.client = ClientPerThread(lambda: Client(*nodes, password=password, tls=tls))
        self.async_clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str | None, AsyncClient]
        ] = weakref.WeakKeyDictionary()
        # This thread's client on one node, which never moves (no socket timeout: a
        # result's GETJOB blocks as long as its caller asked).
        self.client_on = ClientOnNodePerThread(
            lambda node: Client(node, password=password, tls=tls, stay=True, connect_timeout=2.0)
        )
        self.store = Store(self)
        self.revocations = Revocations(self)
        self.rate_limits: dict[str, RateLimit] = {}  # task name -> its limit (workers)
        self.stub: Stub | None = None
        if stub or eager:
            from disque.tasks.stub import Stub

            self.stub = Stub(self, eager)

    # ---- registration ---------------------------------------------------------------
    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        *,
        name: str | None = None,
        queue: str = ...,
        retry: int | None = None,
        ttl: int | None = None,
        replicate: int | None = None,
        max_attempts: int | None = None,
        time_limit: float | None = None,
        soft_time_limit: float | None = None,
        track_started: bool = False,
        result: bool = False,
        serializer: str = ...,
        timeout_ms: int = ...,
        unique_for: int | None = None,
        rate_limit: str | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(self, *fn: Any, **options: Any) -> Any:
        """Register a function as a task (``@tasks.task`` or ``@tasks.task(...)``).

        ``name``: what messages call it (``module.function``); ``queue``; ``retry``
        (60), ``ttl``, ``replicate``: ADDJOB's (seconds, copies); ``max_attempts``;
        ``time_limit`` (seconds a run may take); ``soft_time_limit`` (seconds
        before SoftTimeLimitExceeded is raised in a sync task, which may catch it
        and return); ``track_started``: the result's
        state says STARTED while a worker runs it; ``result``: callers get the
        return value; ``serializer``: json (default), msgpack or pickle;
        ``timeout_ms``: ADDJOB's replication timeout; ``unique_for``: seconds a call
        with the same arguments is refused while one is queued or running
        (revoke.py); ``rate_limit``: ``"10/s"``, ``"/m"`` or ``"/h"``, per worker
        process (ratelimit.py)."""
        name: str | None = options.pop("name", None)
        unknown = set(options) - set(TaskOptions.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown task option(s): {', '.join(sorted(unknown))}")
        task_options = replace(self.defaults, **options)
        check_options(task_options)

        def register(function: Callable[P, R]) -> Task[P, R]:
            if task_options.soft_time_limit is not None and inspect.iscoroutinefunction(function):
                raise ValueError("an async def task has a time_limit (cancelled), no soft one")
            task_name = name or f"{function.__module__}.{function.__qualname__}"
            if task_name in self.registry:
                raise ValueError(f"two tasks are called {task_name!r}")
            task = Task(self, function, task_name, task_options)
            self.registry[task_name] = task
            if task_options.rate_limit is not None:
                self.rate_limits[task_name] = RateLimit(task_options.rate_limit)
            return task

        return register(*fn) if fn else register

    def periodic(
        self,
        every: int | None = None,
        *,
        cron: str | None = None,
        timezone: str = "UTC",
        name: str | None = None,
        **options: Any,
    ) -> Callable[[Callable[[], R]], Task[[], R]]:
        """Register a task that runs every ``every`` seconds, or at the times of a
        ``cron`` expression (``"*/15 * * * *"``, in ``timezone``), once per tick
        across all workers (periodic.py: the schedule is a job in the cluster)."""
        from disque.tasks.periodic import Schedule

        if (every is None) == (cron is None):
            raise ValueError("a periodic task says every=<seconds> or cron=<expression>")
        if every is not None and every < 1:
            raise ValueError("a periodic task runs at most every second (every >= 1)")
        if cron is not None:
            Schedule.of_cron("", cron, "", timezone)  # a wrong expression: said now

        def register(function: Callable[[], R]) -> Task[[], R]:
            task = self.task(name=name, **options)(function)
            queue = task.options.queue
            self.schedules[task.name] = (
                Schedule(task.name, every, queue)
                if every is not None
                else Schedule.of_cron(task.name, str(cron), queue, timezone)
            )
            return task

        return register

    # ---- clients ----------------------------------------------------------------------
    def async_client(self, node: str | None = None) -> AsyncClient:
        """This event loop's client (on ``node`` only, when given); a loop gone, its
        clients are forgotten with it."""
        clients = self.async_clients.setdefault(asyncio.get_running_loop(), {})
        client = clients.get(node)
        if client is None:
            seeds = (node,) if node else self.nodes
            client = AsyncClient(*seeds, password=self.password, tls=self.tls, stay=bool(node))
            clients[node] = client
        return client

    # ---- producing --------------------------------------------------------------------
    def send(
        self,
        task: Task[Any, Any],
        message: Message,
        options: TaskOptions,
        delay: float | None,
        client: Client | None = None,
    ) -> Result[Any]:
        """ADDJOB of the message (on ``client``'s node when given)."""
        if options.unique_for is not None:
            self.take_lock(message, options.unique_for)
        body = self.prepare_send(task, message, options)
        if self.stub is not None:
            return self.stub.add(message, body, options)
        try:
            job_id = (client or self.client()).add_job(
                options.queue, body, options.timeout_ms, **add_options(options, delay)
            )
        except DisqueError:
            self.release_lock(message)  # not queued: the next send may try again
            raise
        return Result(self, message.id, job_id, message.reply_to, options.serializer)

    def take_lock(self, message: Message, seconds: int) -> None:
        if self.stub is not None:
            self.stub.take_lock(message)
        else:
            take_lock(self, message, seconds)

    def take_locks(self, messages: list[Message], seconds: int) -> None:
        """Each call's lock, or none of them (AlreadyQueued for the first refused)."""
        taken: list[Message] = []
        try:
            for message in messages:
                self.take_lock(message, seconds)
                taken.append(message)
        except DisqueError:
            for message in taken:
                self.release_lock(message)
            raise

    def release_lock(self, message: Message) -> None:
        lock = message.options.get(UNIQUE_LOCK)
        if self.stub is not None:
            self.stub.release_lock(message)
        elif isinstance(lock, dict):
            release_lock(self, lock)

    def revoke(self, call: Result[Any] | str) -> None:
        """Cancel a call (its handle, or its ID): it does not run if it has not
        started (revoke.py says how); its result says REVOKED."""
        message_id, job_id = (call, None) if isinstance(call, str) else (call.id, call.job_id)
        if self.stub is not None:
            self.stub.revoke(message_id)
            return
        revoke(self, message_id, job_id)

    def result(self, message_id: str, serializer: str = "json") -> Result[Any]:
        """The handle of a call sent with ``result=True``, from its ID alone
        (``handle.id``), in any process: its ``state``, ``get()``, ``forget()``."""
        return Result(self, message_id, None, reply_queue(message_id), serializer)

    def send_many(
        self, task: Task[Any, Any], messages: list[Message], options: TaskOptions
    ) -> list[Result[Any]]:
        if options.unique_for is not None:
            self.take_locks(messages, options.unique_for)
        bodies = [self.prepare_send(task, message, options) for message in messages]
        if self.stub is not None:
            return [
                self.stub.add(m, body, options) for m, body in zip(messages, bodies, strict=True)
            ]
        replies = self.client().add_jobs(
            options.queue, bodies, options.timeout_ms, **add_options(options, None)
        )
        results: list[Result[Any] | DisqueError] = [
            reply
            if isinstance(reply, DisqueError)
            else Result(self, m.id, reply, m.reply_to, options.serializer)
            for m, reply in zip(messages, replies, strict=True)
        ]
        failed = [r for r in results if isinstance(r, DisqueError)]
        if failed:
            raise SendFailed(
                f"{len(failed)} of {len(results)} calls not queued: {failed[0]}", results
            )
        return [r for r in results if isinstance(r, Result)]

    async def send_async(
        self, task: Task[Any, Any], message: Message, options: TaskOptions, delay: float | None
    ) -> Result[Any]:
        if options.unique_for is not None:
            await asyncio.to_thread(self.take_lock, message, options.unique_for)
        body = self.prepare_send(task, message, options)
        if self.stub is not None:
            return self.stub.add(message, body, options)
        client = self.async_client()
        job_id = await client.add_job(
            options.queue, body, options.timeout_ms, **add_options(options, delay)
        )
        return Result(self, message.id, job_id, message.reply_to, options.serializer)

    def send_message(
        self, message: Message, queue: str, add: dict[str, Any], serializer_name: str
    ) -> None:
        """ADDJOB of a message made elsewhere (a workflow's step, canvas.py)."""
        body = message.encode(serializer_name)
        if self.stub is not None:
            self.stub.add(message, body, replace(self.defaults, queue=queue))
            return
        self.client().add_job(
            queue,
            body,
            int(add.get("timeout_ms") or ADD_TIMEOUT_MS),
            replicate=add.get("replicate"),
            retry=add.get("retry"),
            ttl=add.get("ttl"),
        )

    def prepare_send(self, task: Task[Any, Any], message: Message, options: TaskOptions) -> bytes:
        if options.result and message.reply_to is None:
            message.reply_to = reply_queue(message.id)
        notify(self.middleware, "before_send", message)
        return message.encode(options.serializer)

    # ---- results ----------------------------------------------------------------------
    def fetch_result(self, result: Result[Any], timeout: float | None) -> dict[str, Any]:
        result._require_reply_queue()
        if self.stub is not None:
            return self.stub.result_of(result)
        return self.store.fetch(result, timeout)

    async def fetch_result_async(
        self, result: Result[Any], timeout: float | None
    ) -> dict[str, Any]:
        result._require_reply_queue()
        if self.stub is not None:
            return self.stub.result_of(result)
        return await self.store.fetch_async(result, timeout)

    def peek_state(self, result: Result[Any]) -> dict[str, Any]:
        result._require_reply_queue()
        if self.stub is not None:
            return self.stub.state_of(result)
        return self.store.peek(result)

    def forget_result(self, result: Result[Any]) -> None:
        result._require_reply_queue()
        if self.stub is not None:
            self.stub.results.pop(result.message_id, None)
            return
        self.store.forget(result)

    def reply(self, job_id: str, message: Message, body: bytes) -> None:
        """Keep the result (or the error) in the message's reply queue."""
        if self.stub is not None:
            self.stub.keep_result(message.id, body)
            return
        self.store.keep_outcome(job_id, message, body)

    # ---- running ----------------------------------------------------------------------
    def prepare(self, job: Job) -> Call:
        """The worker's call for a task message (Worker.handler's ``prepare``)."""
        try:
            message, serializer_name = Message.decode(job.body, self.accept)
            task = self.registry.get(message.task)
            options = worker_options(task.options, message) if task is not None else None
        except BadMessage as exc:
            return Call(job, raiser(Reject(str(exc))), name="?")
        if self.stub is None and self.revocations.revoked(message.id):
            log.info("call %s of %s revoked: not run", message.id, message.task)
            self.release_lock(message)
            return Call(job, lambda: None, name=message.task, message=message)
        if task is None or options is None:
            error = UnknownTask(f"no task {message.task!r} in this worker")
            call = Call(job, raiser(error), name=message.task, message=message)
        else:
            run = Run(self, job, task, message, serializer_name)
            call = Call(
                job,
                run.run_async if task.is_async else run.run,
                task.is_async,
                task.name,
                options.time_limit,
                options.max_attempts,
                message,
                soft_time_limit=options.soft_time_limit,
            )
            call.on_done = run.done
            if options.track_started:
                call.on_started = run.started
        if (
            message.reply_to is not None
            or message.link
            or message.link_error
            or message.chord is not None
            or UNIQUE_LOCK in message.options
        ):
            outcome = Outcome(self, job, message, serializer_name)
            call.on_given_up = outcome.given_up
            call.on_retried = outcome.retried
        return call

    def queues(self) -> list[str]:
        return list(dict.fromkeys(task.options.queue for task in self.registry.values()))

    def worker(self, **options: Any) -> Worker:
        """A ``disque.Worker`` running these tasks (``options``: Worker's, as
        ``concurrency=8``); periodic tasks tick in it too."""
        if self.stub is not None:
            raise ValueError("a stub Tasks runs its calls with tasks.stub.run_pending()")
        worker = Worker(
            *self.nodes,
            password=self.password,
            tls=self.tls,
            middleware=self.middleware,
            **options,
        )
        for queue in self.queues():
            worker.handler(queue, prepare=self.prepare)(reject_direct_call)
        if self.schedules:
            from disque.tasks.periodic import install

            install(self, worker)
        return worker


def add_options(options: TaskOptions, delay: float | None) -> dict[str, Any]:
    """ADDJOB's options for a message (DELAY in whole seconds, rounded up)."""
    return {
        "replicate": options.replicate,
        "retry": options.retry,
        "ttl": options.ttl,
        "delay": math.ceil(delay) if delay else None,
    }


def raiser(exc: Exception) -> Callable[[], Any]:
    def run() -> Any:
        raise exc

    return run


def reject_direct_call(job: Job) -> None:  # the handler of a task queue: prepare() runs it
    raise DisqueError("a task queue's jobs run through Tasks.prepare")


def seeds_from_environment() -> tuple[str, ...]:
    """``$DISQUE_NODES`` (``host:port``, separated by commas or spaces); an error
    when it is not set."""
    value = os.environ.get(NODES_VARIABLE, "")
    seeds = tuple(seed for seed in re.split(r"[,\s]+", value) if seed)
    if not seeds:
        raise ValueError(
            f"Tasks needs the nodes to send to: Tasks('127.0.0.1:7711', ...), or "
            f"${NODES_VARIABLE}=host:port,... (stub=True for an application's tests)"
        )
    return seeds


def check_seeds(nodes: Sequence[str | Sequence[str]]) -> None:
    """Each seed a ``host:port`` (a bare host, which ``Client`` reads as port 7711,
    is more often a mistake in an application's settings than a wish)."""
    seed_addresses(nodes)
    for node in nodes:
        for seed in [node] if isinstance(node, str) else node:
            host, sep, port = seed.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"a node is host:port, not {seed!r} (e.g. '127.0.0.1:7711')")
