"""The client core: every command once, for the synchronous and the asyncio
client alike, and what they share (the seeds and what HELLO taught, the choice
of a node, what a failed command means). Only the I/O differs between
``client.Client`` and ``aio.AsyncClient``.

A command is written once, as a method of ``Commands`` that says what to send
and how to read the reply (a ``Call``), decorated with ``@command``:

    @command
    def qlen(self, queue: str) -> Call[int]:
        return Call(("QLEN", queue), as_int)

``Client.qlen(queue)`` then sends it and returns the int; ``AsyncClient.qlen``
returns an awaitable of it (the decorator binds the method to the client's own
``run``, as redis-py's command mixins call the client's ``execute_command``).
The scans (``@scan``) are iterators on one and async iterators on the other.
"""

from __future__ import annotations

import functools
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import redis

from disque.errors import ConnectionLost, DisqueError, Leaving, NoAuth, reply_error
from disque.job import Job
from disque.locality import Locality
from disque.protocol import Hello, Node, by_priority, info_numbers, parse_hello, parse_info, text
from disque.tls import TLS

DEFAULT_NODE = "127.0.0.1:7711"
MAX_MOVES = 3  # nodes tried for one command before NoNodeAvailable
LEAVING_PRIORITY = 100

Address = tuple[str, int]


def parse_address(address: str) -> Address:
    """``host:port``, ``[v6]:port`` or ``host`` (port 7711)."""
    host, sep, port = address.rpartition(":")
    if not sep or "]" in port:
        host, port = address, "7711"
    host = host.strip("[]")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a host:port address: {address!r}")
    return host or "127.0.0.1", int(port)


def seed_addresses(nodes: Sequence[object]) -> list[Address]:
    """The seeds a client is given: ``"host:port"`` strings, each given alone or in
    lists or tuples (``Client(["a:7711", "b:7712"])``, as redis-py's
    ``startup_nodes``); anything else is a TypeError that says what it got."""
    seeds: list[Address] = []
    for node in nodes:
        if isinstance(node, str):
            seeds.append(parse_address(node))
        elif isinstance(node, list | tuple) and all(isinstance(n, str) for n in node):
            seeds += [parse_address(n) for n in node]
        else:
            raise TypeError(f'a node is a "host:port" string (or a list of them), not {node!r:.80}')
    return seeds or [parse_address(DEFAULT_NODE)]


class ClientBase:
    """The state of a client, whatever does its I/O."""

    def __init__(
        self,
        *nodes: str | Sequence[str],
        password: str | None = None,
        tls: TLS | None = None,
        socket_timeout: float | None = None,
        connect_timeout: float = 5.0,
        max_moves: int = MAX_MOVES,
        follow_producers: bool = False,
        stay: bool = False,
    ) -> None:
        self.seeds = seed_addresses(nodes)
        # stay: run every command on the first seed, never another node (a job's
        # NACK, WORKING and SHOW belong to the node that delivered it).
        self.stay = stay
        if stay:
            self.seeds = self.seeds[:1]
        self.password = password
        self.tls = tls
        self.socket_timeout = socket_timeout
        self.connect_timeout = connect_timeout
        self.max_moves = max_moves
        self.nodes: list[Node] = []  # from the last HELLO, best first
        self.myid = ""  # the ID of the node connected to
        self.address: Address | None = None
        # Consumer locality (locality.py): move to the node producing most jobs received.
        self.locality = Locality() if follow_producers else None

    def candidates(self, avoid: Address | None, prefer: Address | None = None) -> list[Address]:
        """``prefer``, the nodes HELLO listed, best first, then the seeds in random
        order; ``avoid`` last. A client that stays: its one seed."""
        if self.stay:
            return list(self.seeds)
        known = [(n.host, n.port) for n in by_priority(self.nodes) if n.host]
        seeds = random.sample(self.seeds, len(self.seeds))
        ordered = list(dict.fromkeys(([prefer] if prefer else []) + known + seeds))
        if avoid is not None and len(ordered) > 1:
            ordered = [a for a in ordered if a != avoid] + ([avoid] if avoid in ordered else [])
        return ordered

    def learn(self, hello: Hello) -> None:
        """Remember what HELLO said: the node's ID, the nodes best first."""
        self.myid = hello.myid
        self.nodes = by_priority(hello.nodes)

    def producer_to_follow(self, jobs: list[Job]) -> Address | None:
        """Count where the jobs were produced; the node to move to when that one
        produces most of them (consumer locality), else None."""
        if self.locality is None or not jobs:
            return None
        self.locality.observe(job.producer_id for job in jobs)
        prefix = self.locality.suggest(self.myid)
        if prefix is None:
            return None
        self.locality.moved()
        for node in self.nodes:
            if node.id.startswith(prefix) and node.host and node.priority < LEAVING_PRIORITY:
                return node.host, node.port
        return None


def failure(exc: Exception, command: Any) -> DisqueError | None:
    """What a command that raised ``exc`` means: the error to raise, or None when it
    is safe to send it again on another node (a refusal: -LEAVING; a connection
    that failed, for any command but ADDJOB, which may have run)."""
    if isinstance(exc, redis.AuthenticationError):
        return NoAuth(str(exc))
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        if str(command).upper() == "ADDJOB":
            return ConnectionLost(f"{command} may or may not have run: {exc}")
        return None
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        return reply_error(f"OOM {exc}")
    if isinstance(exc, redis.ResponseError):
        error = reply_error(str(exc))
        return None if isinstance(error, Leaving) else error
    return DisqueError(f"{command}: {exc}")


# ---- command lines and replies ---------------------------------------------------------
def add_job_args(
    queue: str,
    body: str | bytes,
    timeout: int,
    replicate: int | None,
    delay: int | None,
    retry: int | None,
    ttl: int | None,
    maxlen: int | None,
    asynchronous: bool,
) -> list[Any]:
    args: list[Any] = ["ADDJOB", queue, body, timeout]
    for name, value in (
        ("REPLICATE", replicate),
        ("DELAY", delay),
        ("RETRY", retry),
        ("TTL", ttl),
        ("MAXLEN", maxlen),
    ):
        if value is not None:
            args += [name, value]
    if asynchronous:
        args.append("ASYNC")
    return args


def add_job_args_for(
    queue: str, body: str | bytes, timeout: int, options: dict[str, Any]
) -> list[Any]:
    """ADDJOB's command line from ``add_job``'s keyword options."""
    unknown = set(options) - {"replicate", "delay", "retry", "ttl", "maxlen", "asynchronous"}
    if unknown:
        raise TypeError(f"unknown ADDJOB option(s): {', '.join(sorted(unknown))}")
    return add_job_args(
        queue,
        body,
        timeout,
        options.get("replicate"),
        options.get("delay"),
        options.get("retry"),
        options.get("ttl"),
        options.get("maxlen"),
        bool(options.get("asynchronous", False)),
    )


def get_job_args(
    queues: Sequence[str],
    timeout: int | None,
    count: int | None,
    nohang: bool,
    with_counters: bool,
) -> list[Any]:
    if not queues:
        raise ValueError("get_job needs at least one queue")
    args: list[Any] = ["GETJOB"]
    if nohang:
        args.append("NOHANG")
    if timeout is not None:
        args += ["TIMEOUT", timeout]
    if count is not None:
        args += ["COUNT", count]
    if with_counters:
        args.append("WITHCOUNTERS")
    return [*args, "FROM", *queues]


def qscan_options(count: int | None, filters: dict[str, int]) -> list[Any]:
    options: list[Any] = [] if count is None else ["COUNT", count]
    for name, value in filters.items():
        options += [name.upper(), value]
    return options


def jscan_options(count: int | None, queue: str | None, states: Sequence[str]) -> list[Any]:
    options: list[Any] = [] if count is None else ["COUNT", count]
    if queue is not None:
        options += ["QUEUE", queue]
    for state in states:
        options += ["STATE", state]
    return options


def jobs_of(reply: Any, node: Address | None = None) -> list[Job]:
    """GETJOB's or QPEEK's jobs; ``node``: the address they came from."""
    where = f"{node[0]}:{node[1]}" if node else ""
    return [Job.from_reply(entry, where) for entry in reply or ()]


def last_cursor(cursor: Any) -> bool:
    return cursor in (b"0", "0", 0)


def pairs(reply: Any) -> dict[str, Any] | None:
    """A flat [name, value, ...] reply as a dict with str names; None for nil."""
    if reply is None:
        return None
    if not isinstance(reply, list):
        raise DisqueError(f"unexpected reply {reply!r:.200}")
    return {text(k): v for k, v in zip(reply[::2], reply[1::2], strict=False)}


# ---- one command, written once ---------------------------------------------------------
T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One command to send (``args``; empty: nothing to send, the reply is None),
    how to read its reply (``read(reply, node)``, ``node``: the address it came
    from) and, with ``then``, a node to move to after it (consumer locality)."""

    args: tuple[Any, ...]
    read: Callable[[Any, Address | None], T]
    then: Callable[[T], Address | None] | None = None


@dataclass(frozen=True, slots=True)
class Scan(Generic[T]):
    """A cursor command (QSCAN, JSCAN) and how to read each item (None: skipped)."""

    command: str
    options: list[Any]
    read: Callable[[Any], T | None]


class SyncCore(ClientBase):
    """A client whose commands return their value (``client.Client``)."""

    def run(self, call: Call[T]) -> T:
        raise NotImplementedError

    def iterate(self, scan: Scan[T]) -> Iterator[T]:
        raise NotImplementedError


class AsyncCore(ClientBase):
    """A client whose commands return awaitables (``aio.AsyncClient``)."""

    async def run(self, call: Call[T]) -> T:
        raise NotImplementedError

    def iterate(self, scan: Scan[T]) -> AsyncIterator[T]:
        raise NotImplementedError


class command(Generic[P, T]):  # noqa: N801 (a decorator, named as one)
    """A method of ``Commands`` that builds a ``Call``, bound to the client's own
    ``run``: on a ``Client`` it returns the reply's value, on an ``AsyncClient``
    an awaitable of it."""

    def __init__(self, build: Callable[Concatenate[Any, P], Call[T]]) -> None:
        self.build = build
        self.name = build.__name__
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, client: None, owner: type | None = None) -> command[P, T]: ...
    @overload
    def __get__(self, client: SyncCore, owner: type | None = None) -> Callable[P, T]: ...
    @overload
    def __get__(
        self, client: AsyncCore, owner: type | None = None
    ) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, client: Any, owner: type | None = None) -> Any:
        if client is None:
            return self
        build, run = self.build, client.run

        @functools.wraps(build)
        def bound(*args: P.args, **kwargs: P.kwargs) -> Any:
            return run(build(client, *args, **kwargs))

        client.__dict__[self.name] = bound  # the next lookups find it at once
        return bound


class scan(Generic[P, T]):  # noqa: N801 (a decorator, named as one)
    """A method of ``Commands`` that builds a ``Scan``: an iterator of its items on
    a ``Client``, an async iterator on an ``AsyncClient``."""

    def __init__(self, build: Callable[Concatenate[Any, P], Scan[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, client: None, owner: type | None = None) -> scan[P, T]: ...
    @overload
    def __get__(self, client: SyncCore, owner: type | None = None) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(
        self, client: AsyncCore, owner: type | None = None
    ) -> Callable[P, AsyncIterator[T]]: ...
    def __get__(self, client: Any, owner: type | None = None) -> Any:
        if client is None:
            return self
        build = self.build

        @functools.wraps(build)
        def bound(*args: P.args, **kwargs: P.kwargs) -> Any:
            return client.iterate(build(client, *args, **kwargs))

        return bound


# ---- readers: a reply as the value a command returns ---------------------------------
def as_int(reply: Any, node: Address | None) -> int:
    return int(reply)


def as_text(reply: Any, node: Address | None) -> str:
    return text(reply)


def as_pairs(reply: Any, node: Address | None) -> dict[str, Any] | None:
    return pairs(reply)


def as_jobs(reply: Any, node: Address | None) -> list[Job]:
    return jobs_of(reply, node)


def as_hello(reply: Any, node: Address | None) -> Hello:
    return parse_hello(reply)


def as_info(reply: Any, node: Address | None) -> dict[str, Any]:
    return info_numbers(parse_info(reply))


def jobs_by_id(name: str, job_ids: Sequence[str], *options: Any) -> Call[int]:
    """A command over job IDs that answers a count; none given: 0, nothing sent."""
    if not job_ids:
        return Call((), lambda reply, node: 0)
    return Call((name, *job_ids, *options), as_int)


class Commands(ClientBase):
    """Disque's commands, each once: what to send and how to read the reply."""

    @command
    def hello(self) -> Call[Hello]:
        """HELLO, parsed (and remembered: the next move follows it)."""
        return Call(("HELLO",), as_hello, then=self.learn)

    @command
    def add_job(
        self,
        queue: str,
        body: str | bytes,
        timeout: int = 0,
        *,
        replicate: int | None = None,
        delay: int | None = None,
        retry: int | None = None,
        ttl: int | None = None,
        maxlen: int | None = None,
        asynchronous: bool = False,
    ) -> Call[str]:
        """ADDJOB; ``timeout`` in milliseconds (0: as long as replication takes),
        ``delay``, ``retry`` and ``ttl`` in seconds. The new job's ID."""
        args = add_job_args(
            queue, body, timeout, replicate, delay, retry, ttl, maxlen, asynchronous
        )
        return Call(tuple(args), as_text)

    @command
    def get_job(
        self,
        *queues: str,
        timeout: int | None = None,
        count: int | None = None,
        nohang: bool = False,
        with_counters: bool = False,
    ) -> Call[list[Job]]:
        """GETJOB FROM queues; ``timeout`` in milliseconds (None: wait for ever).
        An empty list when none came (NOHANG, or the timeout). A client that
        follows producers may move after the jobs came (they are delivered, any
        node acknowledges them); each job's ``node`` says where it came from."""
        args = get_job_args(queues, timeout, count, nohang, with_counters)
        return Call(tuple(args), as_jobs, then=self.producer_to_follow)

    @command
    def ack(self, *job_ids: str) -> Call[int]:
        """ACKJOB: the jobs are done (deleted cluster-wide); how many were known."""
        return jobs_by_id("ACKJOB", job_ids)

    @command
    def fast_ack(self, *job_ids: str) -> Call[int]:
        """FASTACK: a best-effort ACKJOB with a single broadcast."""
        return jobs_by_id("FASTACK", job_ids)

    @command
    def nack(self, *job_ids: str, delay: int | None = None) -> Call[int]:
        """NACK: queue the jobs again at once, their nack counter increased; with
        ``delay`` (seconds, this server's NACK ... DELAY) after that long."""
        return jobs_by_id("NACK", job_ids, *(["DELAY", delay] if delay is not None else []))

    @command
    def working(self, job_id: str) -> Call[int]:
        """WORKING: postpone the job's next re-queue; the seconds it was postponed by."""
        return Call(("WORKING", job_id), as_int)

    @command
    def enqueue(self, *job_ids: str) -> Call[int]:
        """ENQUEUE: queue the jobs (if not queued already); how many were queued."""
        return jobs_by_id("ENQUEUE", job_ids)

    @command
    def dequeue(self, *job_ids: str) -> Call[int]:
        """DEQUEUE: take the jobs out of their queue; how many were queued."""
        return jobs_by_id("DEQUEUE", job_ids)

    @command
    def del_job(self, *job_ids: str) -> Call[int]:
        """DELJOB: delete the jobs from this node only."""
        return jobs_by_id("DELJOB", job_ids)

    @command
    def show(self, job_id: str) -> Call[dict[str, Any] | None]:
        """SHOW: the job's fields as a dict (None when unknown here)."""
        return Call(("SHOW", job_id), as_pairs)

    @command
    def qlen(self, queue: str) -> Call[int]:
        """QLEN: how many jobs the queue holds on this node."""
        return Call(("QLEN", queue), as_int)

    @command
    def qpeek(self, queue: str, count: int) -> Call[list[Job]]:
        """QPEEK: the ``count`` oldest jobs (newest first when negative), left queued."""
        return Call(("QPEEK", queue, count), lambda reply, node: jobs_of(reply))

    @command
    def qstat(self, queue: str) -> Call[dict[str, Any] | None]:
        """QSTAT: the queue's figures as a dict (None when it does not exist)."""
        return Call(("QSTAT", queue), as_pairs)

    @command
    def pause(self, queue: str, *options: str) -> Call[str]:
        """PAUSE queue in|out|all|none|state [bcast]: the queue's pause state."""
        return Call(("PAUSE", queue, *options), as_text)

    @command
    def info(self, section: str | None = None) -> Call[dict[str, Any]]:
        """INFO as {section: {field: value}}, numbers as numbers."""
        return Call(("INFO", *([section] if section else [])), as_info)

    @scan
    def qscan(self, *, count: int | None = None, **filters: int) -> Scan[str]:
        """Every queue name (QSCAN, cursor by cursor); ``minlen``, ``maxlen``,
        ``importrate`` filter as QSCAN's options."""
        return Scan("QSCAN", qscan_options(count, filters), text)

    @scan
    def jscan(
        self, *, count: int | None = None, queue: str | None = None, states: Sequence[str] = ()
    ) -> Scan[str]:
        """Every job ID (JSCAN, cursor by cursor), of a queue and in states if given."""
        return Scan("JSCAN", jscan_options(count, queue, states), text)

    @scan
    def jscan_jobs(
        self, *, count: int | None = None, queue: str | None = None, states: Sequence[str] = ()
    ) -> Scan[dict[str, Any]]:
        """JSCAN ... REPLY all: every job as SHOW shows it (a dict)."""
        return Scan("JSCAN", [*jscan_options(count, queue, states), "REPLY", "all"], pairs)
