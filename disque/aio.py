"""The asyncio client: ``client.Client`` on ``redis.asyncio``, the same seeds,
moves, methods and errors (every command is written once, in commands.py; this
module is the I/O).

    async with AsyncClient("127.0.0.1:7711") as client:
        await client.add_job("emails", b"...", retry=60)
        for job in await client.get_job("emails", timeout=1000):
            ...
            await client.ack(job.id)

One connection per client, on which the commands of concurrent tasks are
pipelined (pipelining.py): each is sent at once and gets its own reply, so
many tasks adding jobs through one client do not wait for each other's round
trips. A reply that is slow to come (a blocking GETJOB) holds back those
after it: a consumer task that blocks wants a client of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import redis

from disque.commands import Address, AsyncCore, Call, Commands, Scan, T, failure, last_cursor
from disque.errors import DisqueError, NoAuth, NoNodeAvailable
from disque.pipelining import NotSent, PipelinedConnection, open_connection
from disque.protocol import parse_hello


class AsyncClient(Commands, AsyncCore):
    """A Disque client for asyncio, for one or more seed nodes (``"host:port"``)."""

    _conn: PipelinedConnection | None = None
    _connecting: asyncio.Lock | None = None

    # ---- connection -----------------------------------------------------------------
    async def connect(self, avoid: Address | None = None, prefer: Address | None = None) -> None:
        """Connect to the best node that answers (see ``Client.connect``). The
        connection left behind closes once its commands in flight have their
        replies (other tasks' commands are not failed by a move)."""
        async with self.connecting():
            await self._connect(avoid, prefer)

    async def connection_after(
        self, failed: PipelinedConnection | None, avoid: Address | None = None
    ) -> PipelinedConnection:
        """The connection to use now that ``failed`` did not do (None: there was
        none): a new one, unless another task has made one since (many tasks see
        the same failure; one of them reconnects)."""
        async with self.connecting():
            if self._conn is None or self._conn is failed:
                await self._connect(avoid, None)
            assert self._conn is not None
            return self._conn

    def connecting(self) -> asyncio.Lock:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        return self._connecting

    async def _connect(self, avoid: Address | None, prefer: Address | None) -> None:
        self.retire()
        tried: list[str] = []
        for host, port in self.candidates(avoid, prefer):
            conn: PipelinedConnection | None = None
            try:
                conn = await open_connection(
                    host, port, self.password, connect_timeout=self.connect_timeout, tls=self.tls
                )
                hello = parse_hello(await conn.execute(("HELLO",), self.connect_timeout))
            except redis.AuthenticationError as exc:
                raise NoAuth(str(exc)) from None
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                if conn is not None:
                    conn.close()
                tried.append(f"{host}:{port} ({exc})")
                continue
            self._conn, self.address = conn, (host, port)
            self.learn(hello)
            return
        raise NoNodeAvailable("no Disque node answered: " + "; ".join(tried or ["none to try"]))

    def retire(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.retire()

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- commands -------------------------------------------------------------------
    async def execute(self, *args: Any) -> Any:
        """Run one command, moving to another node as ``Client.execute`` does."""
        conn = self._conn
        for _ in range(self.max_moves):
            if conn is None:
                conn = await self.connection_after(None)
            try:
                return await conn.execute(args, self.socket_timeout)
            except NotSent:  # (another task moved the client, or the link was lost)
                conn = await self.connection_after(conn)
                continue
            except redis.RedisError as exc:
                gone, error = self.address, failure(exc, args[0])
                if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
                    conn.close()
                if error is not None:
                    raise error from None
                conn = await self.connection_after(conn, avoid=gone)
        raise NoNodeAvailable(f"{args[0]}: still no node to run it after {self.max_moves} moves")

    async def run(self, call: Call[T]) -> T:
        """Send one command (commands.py says which) and read its reply."""
        if not call.args:
            return call.read(None, None)
        value = call.read(await self.execute(*call.args), self.address)
        if call.then is not None:
            target = call.then(value)
            if target is not None:  # (consumer locality: a move is never an error)
                with contextlib.suppress(DisqueError):
                    await self.connect(prefer=target)
        return value

    async def iterate(self, scan: Scan[T]) -> AsyncIterator[T]:
        """A cursor command's items, cursor by cursor."""
        cursor: Any = b"0"
        while True:
            cursor, items = await self.execute(scan.command, cursor, *scan.options)
            for item in items:
                value = scan.read(item)
                if value is not None:
                    yield value
            if last_cursor(cursor):
                return
