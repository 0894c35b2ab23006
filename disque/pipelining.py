"""One connection to a node on which concurrent commands are pipelined (``aio.AsyncClient``'s).

Each command is written as soon as a task issues it, without waiting for the
replies of those before it; the replies come back in the order the commands
went (RESP), and each wakes its own caller (ioredis calls this
auto-pipelining). Every caller still gets its own reply: an ADDJOB's job ID
comes once the job is replicated, as on a connection of its own. What it
saves is the round trip each command waited for on redis-py's connection:
a web app whose requests each add a job adds them several times faster.

A command whose reply is slow (a blocking GETJOB) holds back the replies
after it, so a consumer that blocks wants a client of its own.

Errors are redis-py's (``redis.ResponseError`` and its kinds, read from the
error reply by redis-py's own parser; ``redis.ConnectionError``,
``redis.TimeoutError``), so ``commands.failure`` reads them as it reads the
synchronous client's.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

import hiredis
import redis
from redis._parsers.base import BaseParser

if TYPE_CHECKING:
    from disque.tls import TLS


class _ErrorReply(Exception):
    """An error reply as hiredis gives it (turned into redis-py's kind on arrival)."""


class NotSent(redis.ConnectionError):
    """The command was not written: the connection had closed or was retiring (a
    move by another task). Safe to send again, ADDJOB included."""


class PipelinedConnection(asyncio.Protocol):
    """A connection whose commands (``execute``) may be many in flight at once."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader(replyError=_ErrorReply)
        self.waiting: deque[asyncio.Future[Any]] = deque()  # one a command sent, in order
        self.lost: redis.ConnectionError | None = None
        self.retiring = False  # close once the replies in flight have come

    # ---- asyncio.Protocol -----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            try:
                reply = self.reader.gets()
            except hiredis.ProtocolError as exc:
                self.abort(redis.ConnectionError(f"Protocol error: {exc}"))
                return
            if reply is False:
                break
            if not self.waiting:
                self.abort(redis.ConnectionError("a reply no command asked for"))
                return
            future = self.waiting.popleft()
            if future.done():  # its caller gave up (cancelled): the order stays
                continue
            if isinstance(reply, _ErrorReply):
                future.set_exception(BaseParser.parse_error(str(reply)))
            else:
                future.set_result(reply)
        if self.retiring and not self.waiting:
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.lost is None:
            reason = "Connection closed by server." if exc is None else str(exc)
            self.lost = redis.ConnectionError(reason)
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(self.lost)

    # ---- commands -------------------------------------------------------------------
    async def execute(self, args: tuple[Any, ...], timeout: float | None = None) -> Any:
        """Send one command now and wait for its reply (``timeout``: seconds, then
        ``redis.TimeoutError`` and the connection closed, as redis-py does)."""
        if self.lost is not None or self.transport is None or self.retiring:
            raise NotSent(str(self.lost or "Connection closed."))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        self.transport.write(hiredis.pack_command(args))
        if timeout is None:
            return await future
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self.abort(redis.ConnectionError("a command before it timed out"))
            raise redis.TimeoutError("Timeout reading from socket") from None

    def retire(self) -> None:
        """Close once the commands in flight have their replies (a client moving
        to another node does not fail the commands of other tasks)."""
        self.retiring = True
        if not self.waiting:
            self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self, reason: redis.ConnectionError) -> None:
        self.lost = reason
        if self.transport is not None:
            self.transport.abort()


async def open_connection(
    host: str,
    port: int,
    password: str | None = None,
    *,
    connect_timeout: float | None = None,
    tls: TLS | None = None,
) -> PipelinedConnection:
    """Connect (and AUTH): redis.ConnectionError when the node cannot be reached,
    redis.AuthenticationError when it refuses the password."""
    loop = asyncio.get_running_loop()
    context = tls.context() if tls is not None else None
    try:
        _, conn = await asyncio.wait_for(
            loop.create_connection(PipelinedConnection, host, port, ssl=context),
            connect_timeout,
        )
    except (TimeoutError, OSError) as exc:
        reason = str(exc) or type(exc).__name__
        raise redis.ConnectionError(f"Error connecting to {host}:{port}: {reason}") from None
    if password:
        try:
            await conn.execute(("AUTH", password), connect_timeout)
        except redis.ResponseError as exc:
            conn.close()
            raise redis.AuthenticationError(str(exc)) from None
    return conn
