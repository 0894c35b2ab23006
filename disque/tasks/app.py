"""Tasks: functions called through Disque, with arguments, options and results.

    from disque.tasks import Tasks

    tasks = Tasks("127.0.0.1:7711", "127.0.0.1:7712")

    @tasks.task(queue="billing", retry=60, max_attempts=5, time_limit=30, result=True)
    def charge(customer: int, eur: int) -> str:
        ...

    handle = charge.send(42, eur=5)        # ADDJOB of a message (message.py)
    receipt = handle.get(timeout=10)       # GETJOB on the call's reply queue
    charge(42, eur=5)                      # a plain call, in this process

    worker = tasks.worker(concurrency=8)   # a disque.Worker: ``disque-worker app:tasks``

A task's job is a Disque job like any other: RETRY, TTL and REPLICATE are
ADDJOB's, ``max_attempts`` and ``time_limit`` the worker's (worker.py), and a
failure is NACKed with a backoff, then dead-lettered, as for any handler.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import math
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from disque.aio import AsyncClient
from disque.client import Client, ClientOnNodePerThread, ClientPerThread
from disque.commands import seed_addresses
from disque.errors import ConnectionLost, DisqueError, NoNodeAvailable
from disque.middleware import Middleware, notify
from disque.protocol import PRIORITY_FAILING
from disque.tasks.message import DEFAULT_ACCEPT, BadMessage, Message, encode_result, serializer
from disque.tasks.results import Result, ResultTimeout, getjob_timeout_ms, read_result
from disque.worker import Call, Reject, Worker, dead_letter_copies

if TYPE_CHECKING:
    from disque.job import Job
    from disque.tasks.periodic import Schedule
    from disque.tasks.stub import Stub
    from disque.tls import TLS

log = logging.getLogger("disque.tasks")

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_QUEUE = "default"
RESULT_TTL = 24 * 3600  # seconds a result waits for its reader
RESULT_RETRY = 30  # a result fetched and not acknowledged (the reader died): back then
ADD_TIMEOUT_MS = 5000  # ADDJOB's replication timeout for a task's message
COPIES_FOR = 5.0  # seconds the number of reachable nodes is trusted for (results' copies)


PER_CALL = frozenset({"queue", "retry", "ttl", "replicate", "result", "serializer", "timeout_ms"})


class UnknownTask(Exception):
    """The worker has no task of that name (it may come with the next deploy:
    retried, then dead-lettered)."""


class SendFailed(DisqueError):
    """``send_many``: some calls were not queued. ``results``: for each call in
    order, its Result, or the error its ADDJOB got."""

    def __init__(self, message: str, results: list[Result[Any] | DisqueError]) -> None:
        super().__init__(message)
        self.results = results


@dataclass(frozen=True)
class TaskOptions:
    """What a task's calls are sent and run with (``Tasks.task`` documents each)."""

    queue: str = DEFAULT_QUEUE
    retry: int | None = None
    ttl: int | None = None
    replicate: int | None = None
    max_attempts: int | None = None
    time_limit: float | None = None
    result: bool = False
    serializer: str = "json"
    timeout_ms: int = ADD_TIMEOUT_MS


class Task(Generic[P, R]):
    """A function registered with ``Tasks.task``: call it to run it here, ``send``
    it to run it on a worker."""

    def __init__(self, tasks: Tasks, fn: Callable[P, R], name: str, options: TaskOptions) -> None:
        self.tasks = tasks
        self.fn = fn
        self.name = name
        self.options = options
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.options.queue}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def send(self, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
        """Queue a call with these arguments; its handle."""
        return self.tasks.send(self, Message(self.name, list(args), kwargs), self.options, None)

    delay = send  # Celery's name

    def send_with_options(
        self,
        *,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        delay: float | None = None,
        **options: Any,
    ) -> Result[R]:
        """Queue a call, some options changed for it: ``delay`` (seconds before it
        can run), and those of ``Tasks.task``'s that travel with the call (``queue``,
        ``retry``, ``ttl``, ``replicate``, ``result``, ``serializer``, ``timeout_ms``)."""
        message = Message(self.name, list(args), dict(kwargs or {}))
        return self.tasks.send(self, message, self.with_options(options), delay)

    def send_many(self, calls: Iterable[Sequence[Any]], **options: Any) -> list[Result[R]]:
        """Queue many calls in one round trip (pipelined ADDJOBs, each replicated as
        one ``send``'s before its reply): each item the positional arguments of one
        call; ``options`` as ``send_with_options``'s, for all. SendFailed when some
        were not queued (its ``results`` says which)."""
        messages = [Message(self.name, list(args)) for args in calls]
        return self.tasks.send_many(self, messages, self.with_options(options))

    def with_options(self, options: dict[str, Any]) -> TaskOptions:
        """The task's options, some changed for one call (those that travel with it:
        ``max_attempts`` and ``time_limit`` are the worker's, set on the task)."""
        wrong = set(options) - PER_CALL
        if wrong:
            raise TypeError(
                f"not an option of one call: {', '.join(sorted(wrong))} (per call: "
                f"{', '.join(sorted(PER_CALL))}, delay)"
            )
        return replace(self.options, **options)

    async def send_async(self, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
        """``send`` for asyncio."""
        message = Message(self.name, list(args), kwargs)
        return await self.tasks.send_async(self, message, self.options, None)


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
        if not stub:
            seed_addresses(nodes)  # a bad seed is an error here, not at the first send
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
        self.copies: tuple[float, int] = (0.0, 0)  # (when learnt, result copies)
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
        result: bool = False,
        serializer: str = ...,
        timeout_ms: int = ...,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(self, *fn: Any, **options: Any) -> Any:
        """Register a function as a task (``@tasks.task`` or ``@tasks.task(...)``).

        ``name``: what messages call it (``module.function``); ``queue``; ``retry``,
        ``ttl``, ``replicate``: ADDJOB's (seconds, copies); ``max_attempts``;
        ``time_limit`` (seconds a run may take); ``result``: callers get the return
        value; ``serializer``: json (default), msgpack or pickle; ``timeout_ms``:
        ADDJOB's replication timeout."""
        name: str | None = options.pop("name", None)
        unknown = set(options) - set(TaskOptions.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown task option(s): {', '.join(sorted(unknown))}")
        task_options = replace(self.defaults, **options)
        serializer(task_options.serializer)  # an unknown one: said now

        def register(function: Callable[P, R]) -> Task[P, R]:
            task_name = name or f"{function.__module__}.{function.__qualname__}"
            if task_name in self.registry:
                raise ValueError(f"two tasks are called {task_name!r}")
            task = Task(self, function, task_name, task_options)
            self.registry[task_name] = task
            return task

        return register(*fn) if fn else register

    def periodic(
        self, every: int, *, name: str | None = None, **options: Any
    ) -> Callable[[Callable[[], R]], Task[[], R]]:
        """Register a task that runs every ``every`` seconds, once per tick across all
        workers (periodic.py: the schedule is a job in the cluster itself)."""
        from disque.tasks.periodic import Schedule

        if every < 1:
            raise ValueError("a periodic task runs at most every second (every >= 1)")

        def register(function: Callable[[], R]) -> Task[[], R]:
            task = self.task(name=name, **options)(function)
            self.schedules[task.name] = Schedule(task.name, every, task.options.queue)
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

    def producer_node(self, job_id: str) -> str | None:
        """The ``host:port`` of the node that made ``job_id`` (the 8 hex digits after
        ``D-`` are its ID's start), from HELLO; None when unknown or failing.

        A result meets its reader there: the worker adds it on the node the call
        was added to, and ``get()`` waits on that node, so no federation (seconds
        when the reader's node asks at the wrong moment) stands between them."""
        client = self.client()
        if not client.nodes:
            client.hello()
        prefix = job_id[2:10]
        for node in client.nodes:
            if node.id.startswith(prefix) and node.host and node.priority < PRIORITY_FAILING:
                return node.addr
        return None

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
        body = self.prepare_send(task, message, options)
        if self.stub is not None:
            return self.stub.add(message, body, options)
        job_id = (client or self.client()).add_job(
            options.queue, body, options.timeout_ms, **add_options(options, delay)
        )
        return Result(self, message.id, job_id, message.reply_to, options.serializer)

    def send_many(
        self, task: Task[Any, Any], messages: list[Message], options: TaskOptions
    ) -> list[Result[Any]]:
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
        body = self.prepare_send(task, message, options)
        if self.stub is not None:
            return self.stub.add(message, body, options)
        client = self.async_client()
        job_id = await client.add_job(
            options.queue, body, options.timeout_ms, **add_options(options, delay)
        )
        return Result(self, message.id, job_id, message.reply_to, options.serializer)

    def prepare_send(self, task: Task[Any, Any], message: Message, options: TaskOptions) -> bytes:
        if options.result:
            message.reply_to = f"{options.queue}:result:{message.id}"
        notify(self.middleware, "before_send", message)
        return message.encode(options.serializer)

    # ---- results ----------------------------------------------------------------------
    def fetch_result(self, result: Result[Any], timeout: float | None) -> dict[str, Any]:
        queue = result._require_reply_queue()
        if self.stub is not None:
            return self.stub.result_of(result)
        client, jobs = self.client(), None
        node = self.producer_node(result.job_id)
        if node is not None:
            client = self.client_on(node)
            try:
                jobs = client.get_job(queue, timeout=getjob_timeout_ms(timeout))
            except NoNodeAvailable:  # that node is gone: the result comes anywhere
                client = self.client()
        if jobs is None:
            jobs = client.get_job(queue, timeout=getjob_timeout_ms(timeout))
        if not jobs:
            raise ResultTimeout(f"no result for {result.message_id} within {timeout} s")
        fields = read_result(jobs[0].body, (*self.accept, result.serializer))
        client.ack(jobs[0].id)
        return fields

    async def fetch_result_async(
        self, result: Result[Any], timeout: float | None
    ) -> dict[str, Any]:
        queue = result._require_reply_queue()
        if self.stub is not None:
            return self.stub.result_of(result)
        client, jobs = self.async_client(), None
        node = self.producer_node(result.job_id)
        if node is not None:
            client = self.async_client(node)
            try:
                jobs = await client.get_job(queue, timeout=getjob_timeout_ms(timeout))
            except NoNodeAvailable:
                client = self.async_client()
        if jobs is None:
            jobs = await client.get_job(queue, timeout=getjob_timeout_ms(timeout))
        if not jobs:
            raise ResultTimeout(f"no result for {result.message_id} within {timeout} s")
        fields = read_result(jobs[0].body, (*self.accept, result.serializer))
        await client.ack(jobs[0].id)
        return fields

    def reply(
        self,
        job_id: str,
        message: Message,
        serializer_name: str,
        value: Any = None,
        error: BaseException | None = None,
    ) -> None:
        """ADDJOB the result (or the error) to the message's reply queue, on the node
        the call was added to (see ``producer_node``), else on any."""
        assert message.reply_to is not None
        try:
            body = encode_result(message.id, serializer_name, value, error)
        except TypeError as exc:  # a value the serializer cannot write: the caller hears it
            body = encode_result(message.id, serializer_name, error=exc)
        if self.stub is not None:
            self.stub.keep_result(message.id, body)
            return
        client = self.client()
        copies = self.result_copies(client)
        node = self.producer_node(job_id)
        if node is not None:
            try:
                self.add_result(self.client_on(node), message.reply_to, body, copies)
                return
            except (NoNodeAvailable, ConnectionLost) as exc:  # (a second copy at worst)
                log.info("result of %s: its node %s is gone (%s): sent anywhere", job_id, node, exc)
        self.add_result(client, message.reply_to, body, copies)

    def add_result(self, client: Client, queue: str, body: bytes, copies: int) -> None:
        client.add_job(
            queue, body, ADD_TIMEOUT_MS, replicate=copies, retry=RESULT_RETRY, ttl=self.result_ttl
        )

    def result_copies(self, client: Client) -> int:
        """2 where two nodes are reachable, else 1 (HELLO, asked every few seconds)."""
        learnt, copies = self.copies
        now = time.monotonic()
        if now - learnt > COPIES_FOR:
            copies = dead_letter_copies(client)
            self.copies = (now, copies)
        return copies

    # ---- running ----------------------------------------------------------------------
    def prepare(self, job: Job) -> Call:
        """The worker's call for a task message (Worker.handler's ``prepare``)."""
        try:
            message, serializer_name = Message.decode(job.body, self.accept)
        except BadMessage as exc:
            return Call(job, raiser(Reject(str(exc))), name="?")
        task = self.registry.get(message.task)
        if task is None:
            error = UnknownTask(f"no task {message.task!r} in this worker")
            call = Call(job, raiser(error), name=message.task, message=message)
        else:
            run = functools.partial(task.fn, *message.args, **message.kwargs)
            options = task.options
            call = Call(
                job,
                run,
                task.is_async,
                task.name,
                options.time_limit,
                options.max_attempts,
                message,
            )
        if message.reply_to is not None:
            call.on_done = functools.partial(self.reply, job.id, message, serializer_name)
            call.on_given_up = lambda exc: self.reply(job.id, message, serializer_name, error=exc)
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
