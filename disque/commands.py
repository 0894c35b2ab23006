"""What the synchronous and the asyncio clients share: the seeds and what HELLO
taught, the choice of a node, the command lines of the job commands and the
reading of their replies, and what a failed command means. Only the I/O
differs between ``client.Client`` and ``aio.AsyncClient``."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import redis

from disque.errors import ConnectionLost, DisqueError, Leaving, NoAuth, reply_error
from disque.job import Job
from disque.locality import Locality
from disque.protocol import Hello, Node, by_priority, text
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


def nack_args(job_ids: Sequence[str], delay: int | None) -> list[Any]:
    return ["NACK", *job_ids, *(["DELAY", delay] if delay is not None else [])]


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
