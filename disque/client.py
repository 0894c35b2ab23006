"""The synchronous client: one connection to the best node that answers.

Disque's README ("Client libraries") says what a client does, and this is it:

1. Given one or more ``host:port``, connect to one that answers (tried in
   random order, so clients spread over the seeds).
2. Send HELLO and learn the nodes, their IDs and priorities.
3. On ``-LEAVING``, on a connection refused or closed, move to another node,
   preferring the lowest HELLO priority (1: healthy, 10: possibly failing,
   100: leaving), a bounded number of times, then raise ``NoNodeAvailable``.
4. Optionally (``follow_producers=True``), a consumer moves to the node that
   produces most of the jobs it receives (locality.py).

Commands are retried on the next node only when that cannot run them twice:
a refusal (``-LEAVING``), a connection that could not be opened, or any
command but ADDJOB. An ADDJOB whose connection dropped after it was sent may
have been run: ``ConnectionLost`` says so, and the caller decides (resending
makes at most a second copy of the job: at-least-once).

``aio.AsyncClient`` is the same client for asyncio; commands.py holds what
they share.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import redis

from disque.commands import (
    Address,
    ClientBase,
    add_job_args,
    add_job_args_for,
    failure,
    get_job_args,
    jobs_of,
    jscan_options,
    last_cursor,
    nack_args,
    pairs,
    qscan_options,
)
from disque.errors import ConnectionLost, DisqueError, NoAuth, NoNodeAvailable, reply_error
from disque.job import Job
from disque.protocol import Hello, connect, info_numbers, parse_hello, parse_info, text


class ClientPerThread:
    """A client per thread, made on first use (a redis-py connection is not shared
    between threads): call it for this thread's. What tasks and brokers send with
    from many threads."""

    def __init__(self, make: Callable[[], Client]) -> None:
        self.make = make
        self.local = threading.local()

    def __call__(self) -> Client:
        client: Client | None = getattr(self.local, "client", None)
        if client is None:
            client = self.local.client = self.make()
        return client


class ClientOnNodePerThread:
    """A client per thread and node (``host:port``), made on first use by ``make``
    (one that stays on its node): call it with the node for this thread's."""

    def __init__(self, make: Callable[[str], Client]) -> None:
        self.make = make
        self.local = threading.local()

    def __call__(self, node: str) -> Client:
        clients: dict[str, Client] = self.local.__dict__.setdefault("clients", {})
        client = clients.get(node)
        if client is None:
            client = clients[node] = self.make(node)
        return client


class Client(ClientBase):
    """A Disque client for one or more seed nodes (``"host:port"``)."""

    _conn: redis.Redis | None = None

    # ---- connection -----------------------------------------------------------------
    def connect(self, avoid: Address | None = None, prefer: Address | None = None) -> None:
        """Connect to the best node that answers (``prefer``, then HELLO's order, then
        the seeds), other than ``avoid``; learn the cluster from its HELLO."""
        self.close()
        tried: list[str] = []
        for host, port in self.candidates(avoid, prefer):
            conn = connect(
                host,
                port,
                self.password,
                socket_timeout=self.socket_timeout,
                connect_timeout=self.connect_timeout,
                tls=self.tls,
                raw=True,
            )
            try:
                hello = parse_hello(conn.execute_command("HELLO"))
            except redis.AuthenticationError as exc:
                conn.close()
                raise NoAuth(str(exc)) from None
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                conn.close()
                tried.append(f"{host}:{port} ({exc})")
                continue
            self._conn, self.address = conn, (host, port)
            self.learn(hello)
            return
        raise NoNodeAvailable("no Disque node answered: " + "; ".join(tried or ["none to try"]))

    def hello(self) -> Hello:
        """HELLO, parsed (and remembered: the next move follows it)."""
        hello = parse_hello(self.execute("HELLO"))
        self.learn(hello)
        return hello

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- commands -------------------------------------------------------------------
    def execute(self, *args: Any) -> Any:
        """Run one command, moving to another node when the one it runs on leaves
        or goes away (see the module's docstring for what is sent again)."""
        for _ in range(self.max_moves):
            if self._conn is None:
                self.connect()
            assert self._conn is not None
            try:
                return self._conn.execute_command(*args)
            except redis.RedisError as exc:
                gone, error = self.address, failure(exc, args[0])
                if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
                    self.close()
                if error is not None:
                    raise error from None
                self.connect(avoid=gone)
        raise NoNodeAvailable(f"{args[0]}: still no node to run it after {self.max_moves} moves")

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
    ) -> str:
        """ADDJOB; ``timeout`` in milliseconds (0: as long as replication takes),
        ``delay``, ``retry`` and ``ttl`` in seconds. The new job's ID."""
        args = add_job_args(
            queue, body, timeout, replicate, delay, retry, ttl, maxlen, asynchronous
        )
        return text(self.execute(*args))

    def add_jobs(
        self,
        queue: str,
        bodies: Sequence[str | bytes],
        timeout: int = 0,
        **options: Any,
    ) -> list[str | DisqueError]:
        """Many ADDJOBs to one queue in one round trip (pipelined), each with
        ``add_job``'s options: each one's job ID, or the error it got (NoRepl ...).
        Each job is replicated as asked before its reply comes, as one ADDJOB's.
        A connection lost midway raises ConnectionLost: some may have been added."""
        if not bodies:
            return []
        if self._conn is None:
            self.connect()
        assert self._conn is not None
        pipe = self._conn.pipeline(transaction=False)
        for body in bodies:
            pipe.execute_command(*add_job_args_for(queue, body, timeout, options))
        try:
            replies = pipe.execute(raise_on_error=False)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            self.close()
            raise ConnectionLost(f"ADDJOB x{len(bodies)}: {exc} (some may have run)") from None
        return [
            (failure(reply, "ADDJOB") or reply_error(str(reply)))
            if isinstance(reply, Exception)
            else text(reply)
            for reply in replies
        ]

    def get_job(
        self,
        *queues: str,
        timeout: int | None = None,
        count: int | None = None,
        nohang: bool = False,
        with_counters: bool = False,
    ) -> list[Job]:
        """GETJOB FROM queues; ``timeout`` in milliseconds (None: wait for ever).
        An empty list when none came (NOHANG, or the timeout)."""
        reply = self.execute(*get_job_args(queues, timeout, count, nohang, with_counters))
        jobs = jobs_of(reply, self.address)  # (before a locality move: where they are)
        target = self.producer_to_follow(jobs)
        if target is not None:  # after the jobs came: they are delivered, any node acks
            with contextlib.suppress(DisqueError):
                self.connect(prefer=target)
        return jobs

    def ack(self, *job_ids: str) -> int:
        """ACKJOB: the jobs are done (deleted cluster-wide); how many were known."""
        return int(self.execute("ACKJOB", *job_ids)) if job_ids else 0

    def fast_ack(self, *job_ids: str) -> int:
        """FASTACK: a best-effort ACKJOB with a single broadcast."""
        return int(self.execute("FASTACK", *job_ids)) if job_ids else 0

    def nack(self, *job_ids: str, delay: int | None = None) -> int:
        """NACK: queue the jobs again at once, their nack counter increased; with
        ``delay`` (seconds, this server's NACK ... DELAY) after that long."""
        return int(self.execute(*nack_args(job_ids, delay))) if job_ids else 0

    def working(self, job_id: str) -> int:
        """WORKING: postpone the job's next re-queue; the seconds it was postponed by."""
        return int(self.execute("WORKING", job_id))

    def enqueue(self, *job_ids: str) -> int:
        return int(self.execute("ENQUEUE", *job_ids)) if job_ids else 0

    def dequeue(self, *job_ids: str) -> int:
        return int(self.execute("DEQUEUE", *job_ids)) if job_ids else 0

    def del_job(self, *job_ids: str) -> int:
        """DELJOB: delete the jobs from this node only."""
        return int(self.execute("DELJOB", *job_ids)) if job_ids else 0

    def show(self, job_id: str) -> dict[str, Any] | None:
        """SHOW: the job's fields as a dict (None when unknown here)."""
        return pairs(self.execute("SHOW", job_id))

    def qlen(self, queue: str) -> int:
        return int(self.execute("QLEN", queue))

    def qpeek(self, queue: str, count: int) -> list[Job]:
        """QPEEK: the ``count`` oldest jobs (newest first when negative), left queued."""
        return jobs_of(self.execute("QPEEK", queue, count))

    def qstat(self, queue: str) -> dict[str, Any] | None:
        return pairs(self.execute("QSTAT", queue))

    def pause(self, queue: str, *options: str) -> str:
        """PAUSE queue in|out|all|none|state [bcast]: the queue's pause state."""
        return text(self.execute("PAUSE", queue, *options))

    def qscan(self, *, count: int | None = None, **filters: int) -> Iterator[str]:
        """Every queue name (QSCAN, cursor by cursor); ``minlen``, ``maxlen``,
        ``importrate`` filter as QSCAN's options."""
        for item in self.scan("QSCAN", qscan_options(count, filters)):
            yield text(item)

    def jscan(
        self, *, count: int | None = None, queue: str | None = None, states: Sequence[str] = ()
    ) -> Iterator[str]:
        """Every job ID (JSCAN, cursor by cursor), of a queue and in states if given."""
        for item in self.scan("JSCAN", jscan_options(count, queue, states)):
            yield text(item)

    def jscan_jobs(
        self, *, count: int | None = None, queue: str | None = None, states: Sequence[str] = ()
    ) -> Iterator[dict[str, Any]]:
        """JSCAN ... REPLY all: every job as SHOW shows it (a dict)."""
        for item in self.scan("JSCAN", [*jscan_options(count, queue, states), "REPLY", "all"]):
            shown = pairs(item)
            if shown is not None:
                yield shown

    def scan(self, command: str, options: list[Any]) -> Iterator[Any]:
        cursor: Any = b"0"
        while True:
            cursor, items = self.execute(command, cursor, *options)
            yield from items
            if last_cursor(cursor):
                return

    def info(self, section: str | None = None) -> dict[str, Any]:
        """INFO as {section: {field: value}}."""
        reply = self.execute("INFO", *([section] if section else []))
        return info_numbers(parse_info(reply))
