"""The asyncio client: ``client.Client`` on ``redis.asyncio``, the same seeds,
moves, methods and errors (commands.py holds what they share).

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
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import redis

from disque.commands import (
    Address,
    ClientBase,
    add_job_args,
    failure,
    get_job_args,
    jobs_of,
    jscan_options,
    last_cursor,
    nack_args,
    pairs,
    qscan_options,
)
from disque.errors import DisqueError, NoAuth, NoNodeAvailable
from disque.job import Job
from disque.protocol import Hello, connect_async, info_numbers, parse_hello, parse_info, text

if TYPE_CHECKING:
    import redis.asyncio as aredis


class AsyncClient(ClientBase):
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

    async def hello(self) -> Hello:
        hello = parse_hello(await self.execute("HELLO"))
        self.learn(hello)
        return hello

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

    async def add_job(
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
        args = add_job_args(
            queue, body, timeout, replicate, delay, retry, ttl, maxlen, asynchronous
        )
        return text(await self.execute(*args))

    async def get_job(
        self,
        *queues: str,
        timeout: int | None = None,
        count: int | None = None,
        nohang: bool = False,
        with_counters: bool = False,
    ) -> list[Job]:
        reply = await self.execute(*get_job_args(queues, timeout, count, nohang, with_counters))
        jobs = jobs_of(reply, self.address)
        target = self.producer_to_follow(jobs)
        if target is not None:
            with contextlib.suppress(DisqueError):
                await self.connect(prefer=target)
        return jobs

    async def ack(self, *job_ids: str) -> int:
        return int(await self.execute("ACKJOB", *job_ids)) if job_ids else 0

    async def fast_ack(self, *job_ids: str) -> int:
        return int(await self.execute("FASTACK", *job_ids)) if job_ids else 0

    async def nack(self, *job_ids: str, delay: int | None = None) -> int:
        return int(await self.execute(*nack_args(job_ids, delay))) if job_ids else 0

    async def working(self, job_id: str) -> int:
        return int(await self.execute("WORKING", job_id))

    async def enqueue(self, *job_ids: str) -> int:
        return int(await self.execute("ENQUEUE", *job_ids)) if job_ids else 0

    async def dequeue(self, *job_ids: str) -> int:
        return int(await self.execute("DEQUEUE", *job_ids)) if job_ids else 0

    async def del_job(self, *job_ids: str) -> int:
        return int(await self.execute("DELJOB", *job_ids)) if job_ids else 0

    async def show(self, job_id: str) -> dict[str, Any] | None:
        return pairs(await self.execute("SHOW", job_id))

    async def qlen(self, queue: str) -> int:
        return int(await self.execute("QLEN", queue))

    async def qpeek(self, queue: str, count: int) -> list[Job]:
        return jobs_of(await self.execute("QPEEK", queue, count))

    async def qstat(self, queue: str) -> dict[str, Any] | None:
        return pairs(await self.execute("QSTAT", queue))

    async def pause(self, queue: str, *options: str) -> str:
        return text(await self.execute("PAUSE", queue, *options))

    async def qscan(self, *, count: int | None = None, **filters: int) -> AsyncIterator[str]:
        async for item in self.scan("QSCAN", qscan_options(count, filters)):
            yield text(item)

    async def jscan(
        self, *, count: int | None = None, queue: str | None = None, states: Sequence[str] = ()
    ) -> AsyncIterator[str]:
        async for item in self.scan("JSCAN", jscan_options(count, queue, states)):
            yield text(item)

    async def jscan_jobs(
        self, *, count: int | None = None, queue: str | None = None, states: Sequence[str] = ()
    ) -> AsyncIterator[dict[str, Any]]:
        """JSCAN ... REPLY all: every job as SHOW shows it (a dict)."""
        options = [*jscan_options(count, queue, states), "REPLY", "all"]
        async for item in self.scan("JSCAN", options):
            shown = pairs(item)
            if shown is not None:
                yield shown

    async def scan(self, command: str, options: list[Any]) -> AsyncIterator[Any]:
        cursor: Any = b"0"
        while True:
            cursor, items = await self.execute(command, cursor, *options)
            for item in items:
                yield item
            if last_cursor(cursor):
                return

    async def info(self, section: str | None = None) -> dict[str, Any]:
        reply = await self.execute("INFO", *([section] if section else []))
        return info_numbers(parse_info(reply))
