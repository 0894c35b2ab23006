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

``aio.AsyncClient`` is the same client for asyncio: every command is written
once, in commands.py; this module is the I/O.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import redis

from disque.commands import (
    Address,
    Call,
    Commands,
    Scan,
    SyncCore,
    T,
    add_job_args_for,
    failure,
    last_cursor,
)
from disque.errors import ConnectionLost, DisqueError, NoAuth, NoNodeAvailable, reply_error
from disque.protocol import connect, parse_hello, text


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


class Client(Commands, SyncCore):
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

    def run(self, call: Call[T]) -> T:
        """Send one command (commands.py says which) and read its reply."""
        if not call.args:
            return call.read(None, None)
        value = call.read(self.execute(*call.args), self.address)
        if call.then is not None:
            target = call.then(value)
            if target is not None:  # (consumer locality: a move is never an error)
                with contextlib.suppress(DisqueError):
                    self.connect(prefer=target)
        return value

    def iterate(self, scan: Scan[T]) -> Iterator[T]:
        """A cursor command's items, cursor by cursor."""
        cursor: Any = b"0"
        while True:
            cursor, items = self.execute(scan.command, cursor, *scan.options)
            for item in items:
                value = scan.read(item)
                if value is not None:
                    yield value
            if last_cursor(cursor):
                return

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
