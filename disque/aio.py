"""The asyncio client: ``client.Client`` on ``redis.asyncio``, the same seeds,
moves, methods and errors (every command is written once, in commands.py; this
module is the I/O).

    async with AsyncClient("127.0.0.1:7711") as client:
        await client.add_job("emails", b"...", retry=60)
        for job in await client.get_job("emails", timeout=1000):
            ...
            await client.ack(job.id)

One connection per client (redis-py's pool holds one): commands sent by
concurrent tasks on the same client wait for each other. A consumer task that
blocks in GETJOB wants a client of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import redis

from disque.commands import Address, AsyncCore, Call, Commands, Scan, T, failure, last_cursor
from disque.errors import DisqueError, NoAuth, NoNodeAvailable
from disque.protocol import connect_async, parse_hello

if TYPE_CHECKING:
    import redis.asyncio as aredis


class AsyncClient(Commands, AsyncCore):
    """A Disque client for asyncio, for one or more seed nodes (``"host:port"``)."""

    _conn: aredis.Redis | None = None

    # ---- connection -----------------------------------------------------------------
    async def connect(self, avoid: Address | None = None, prefer: Address | None = None) -> None:
        """Connect to the best node that answers (see ``Client.connect``)."""
        await self.close()
        tried: list[str] = []
        for host, port in self.candidates(avoid, prefer):
            conn = connect_async(
                host,
                port,
                self.password,
                socket_timeout=self.socket_timeout,
                connect_timeout=self.connect_timeout,
                tls=self.tls,
                max_connections=1,
            )
            try:
                hello = parse_hello(await conn.execute_command("HELLO"))
            except redis.AuthenticationError as exc:
                await conn.aclose()
                raise NoAuth(str(exc)) from None
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                await conn.aclose()
                tried.append(f"{host}:{port} ({exc})")
                continue
            self._conn, self.address = conn, (host, port)
            self.learn(hello)
            return
        raise NoNodeAvailable("no Disque node answered: " + "; ".join(tried or ["none to try"]))

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- commands -------------------------------------------------------------------
    async def execute(self, *args: Any) -> Any:
        """Run one command, moving to another node as ``Client.execute`` does."""
        for _ in range(self.max_moves):
            if self._conn is None:
                await self.connect()
            assert self._conn is not None
            try:
                return await self._conn.execute_command(*args)
            except redis.RedisError as exc:
                gone, error = self.address, failure(exc, args[0])
                if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
                    await self.close()
                if error is not None:
                    raise error from None
                await self.connect(avoid=gone)
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
