"""One client connection: input parsing, dispatch, replies, blocking.

``data_received`` feeds hiredis (or the inline parser for telnet-style
lines), runs every complete command, and writes all replies produced by
that read with one ``write``: pipelined requests cost one syscall.

A client blocked in GETJOB (or a synchronous ADDJOB, in a cluster) stops
executing commands; what it sends meanwhile is kept and run once the
client is unblocked, as Redis does.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import hiredis

from disque_server import resp
from disque_server.config import ConfigError, split_args
from disque_server.resp import RESP2, Protocol

if TYPE_CHECKING:
    from disque_server.queue import Queue
    from disque_server.server import Server

MAX_INLINE = 64 * 1024
QUERY_BUFFER_LIMIT = 1024 * 1024 * 1024
MAX_MULTIBULK = 1024 * 1024
PROTO_MAX_BULK_LEN = 512 * 1024 * 1024
SCAN_PENDING_MAX = 1024 * 1024        # look for absurd lengths in requests this small
_SUSPICIOUS_COUNT = re.compile(rb"\n\*\d{7}")   # a header of 1,000,000+ elements, maybe
OUTPUT_HIGH_WATER = 64 * 1024 * 1024   # stop reading a client that does not read
DEFERRED_LIMIT = 1024 * 1024           # input kept for a blocked client before we stop reading

_client_ids = itertools.count(1)


def multibulk_header_ok(data: bytes) -> bool:
    """Refuse absurd array lengths before hiredis allocates room for them."""
    end = data.find(b"\r", 1, 24)
    if end < 0:
        return len(data) < 24
    count = data[1:end]
    return not count.isdigit() or int(count) <= MAX_MULTIBULK


def oversized_header(buf: bytes) -> str | None:
    """Walk the (incomplete) requests in buf; name the first length over the limits."""
    pos, size = 0, len(buf)
    while pos < size:
        end = buf.find(b"\r\n", pos)
        if buf[pos:pos + 1] != b"*" or end < 0:
            return None
        count = buf[pos + 1:end]
        if not count.isdigit():
            return None
        if int(count) > MAX_MULTIBULK:
            return "invalid multibulk length"
        pos = end + 2
        for _ in range(int(count)):
            end = buf.find(b"\r\n", pos)
            if buf[pos:pos + 1] == b"*":
                return "expected '$', got '*'"     # requests never nest arrays
            if buf[pos:pos + 1] != b"$" or end < 0:
                return None
            length = buf[pos + 1:end]
            if not length.isdigit():
                return None
            if int(length) > PROTO_MAX_BULK_LEN:
                return "invalid bulk length"
            pos = end + 2 + int(length) + 2
            if pos > size:
                return None
    return None


def encoded_length(request: list[bytes]) -> int:
    """Bytes of the canonical RESP encoding of a request."""
    return len(b"*%d\r\n" % len(request)) + sum(
        len(b"$%d\r\n" % len(a)) + len(a) + 2 for a in request)


class Blocked:
    """Why a client waits, and how to wake it."""

    __slots__ = ("kind", "queues", "count", "withcounters", "timer", "on_timeout", "data")

    def __init__(self, kind: str, queues: list[bytes] | None = None, count: int = 1,
                 withcounters: bool = False, on_timeout: Callable[[], None] | None = None,
                 data: Any = None) -> None:
        self.kind = kind
        self.queues = queues or []
        self.count = count
        self.withcounters = withcounters
        self.timer: asyncio.TimerHandle | None = None
        self.on_timeout = on_timeout
        self.data = data


class Client(asyncio.Protocol):
    """The per-connection state; per-request state lives in the handlers."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.id = next(_client_ids)
        self.reader = hiredis.Reader()
        self.inline_buf = b""
        # Where the parser stands: at a request boundary, or inside a request
        # made of these chunks, after these already executed requests.
        self.at_boundary = True
        self.pending: list[bytes] = []
        self.pending_len = 0
        self.pending_requests: list[list[bytes]] = []
        self.pending_dropped = False      # the request in progress grew too big to copy
        self.out: list[bytes] = []
        self.proto: Protocol = RESP2
        self.transport: asyncio.Transport | None = None
        self.addr = "?:0"
        self.fd = -1
        self.name = b""
        self.ctime = self.last_interaction = time.time()
        self.authenticated = not server.config["requirepass"]
        self.blocked: Blocked | None = None
        self.deferred: list[bytes] = []
        self.deferred_len = 0
        self.monitor = False
        self.closing = False
        self.reading_paused = False
        self.last_cmd = b"NULL"

    # ---- asyncio protocol interface -------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            host = peer[0]
            self.addr = f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self.fd = sock.fileno()
        server = self.server
        server.stats.connections_received += 1
        if len(server.clients) >= server.config["maxclients"]:
            server.stats.rejected_connections += 1
            transport.write(b"-ERR max number of clients reached\r\n")
            transport.close()
            self.closing = True
            return
        server.clients[self] = None
        transport.set_write_buffer_limits(high=OUTPUT_HIGH_WATER)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        if self.blocked:
            self.unblock(resume=False)
        self.server.clients.pop(self, None)
        self.server.monitors.pop(self, None)

    def pause_writing(self) -> None:
        # The peer does not read its replies: stop reading its requests.
        if self.transport and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport and self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self.last_interaction = time.time()
        self.server.stats.net_input_bytes += len(data)
        if self.closing:
            return
        if self.blocked:
            self.deferred.append(data)
            self.deferred_len += len(data)
            if self.deferred_len > DEFERRED_LIMIT and self.transport and not self.reading_paused:
                self.reading_paused = True     # TCP back-pressure until it is unblocked
                self.transport.pause_reading()
            return
        self.feed(data)
        self.process_input()
        self.flush()

    # ---- input --------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        if self.inline_buf or (self.at_boundary and data[:1] != b"*"):
            self.inline_buf += data
            return
        if self.at_boundary and not multibulk_header_ok(data):
            self.protocol_error("invalid multibulk length")
            return
        if _SUSPICIOUS_COUNT.search(data) and not self.pending_dropped:
            # A huge array count inside the read: hiredis would allocate for it.
            problem = oversized_header(data if self.at_boundary
                                       else b"".join(self.pending) + data)
            if problem:
                self.protocol_error(problem)
                return
        self.at_boundary = False
        self.reader.feed(data)
        if self.reader.len() > QUERY_BUFFER_LIMIT:
            self.protocol_error("query buffer limit reached")
            return
        # Keep a copy of the request in progress only while it is small: it serves
        # the inline recovery and the length checks, which both look at headers.
        if not self.pending_dropped:
            self.pending.append(data)
            self.pending_len += len(data)
            if self.pending_len > SCAN_PENDING_MAX:
                self.forget_pending(dropped=True)

    def forget_pending(self, dropped: bool = False) -> None:
        self.pending.clear()
        self.pending_len = 0
        self.pending_requests.clear()
        self.pending_dropped = dropped

    def process_input(self) -> None:
        while not self.blocked and not self.closing and self.transport is not None:
            if self.inline_buf:
                if not self.process_inline():
                    return
                continue
            try:
                request = self.reader.gets()
            except (hiredis.ProtocolError, MemoryError, ValueError, TypeError) as exc:
                if not self.recover_inline(str(exc)):
                    self.protocol_error(str(exc).lower() or "invalid multibulk length")
                    return
                continue
            if request is False:
                if self.pending:
                    problem = oversized_header(b"".join(self.pending))
                    if problem:
                        self.protocol_error(problem)
                return
            if type(request) is not list or not all(type(a) is bytes for a in request):
                self.protocol_error("expected a multibulk request of bulk strings")
                return
            if not self.reader.has_data():
                self.at_boundary = True
                self.forget_pending()
            elif not self.pending_dropped:
                self.pending_requests.append(request)
            if request:
                self.execute(request)

    def recover_inline(self, error: str) -> bool:
        """An inline command right after multibulk ones in one read: hiredis cannot
        parse it, so restart from where the last request ended, as an inline line."""
        if "reply type byte" not in error or not self.pending or self.pending_dropped:
            return False
        done = sum(encoded_length(r) for r in self.pending_requests)
        rest = b"".join(self.pending)[done:]
        if not rest or rest[:1] == b"*":
            return False
        self.reader = hiredis.Reader()
        self.at_boundary = True
        self.forget_pending()
        self.inline_buf = rest
        return True

    def process_inline(self) -> bool:
        """Run the complete inline commands of inline_buf (one pass, no re-slicing per
        line); True when multibulk requests follow, False when more input is needed."""
        buf, pos = self.inline_buf, 0
        try:
            while not self.blocked and not self.closing:
                if buf[pos:pos + 1] == b"*":           # back to multibulk requests
                    self.inline_buf, rest = b"", buf[pos:]
                    buf, pos = b"", 0
                    self.feed(rest)
                    return True
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    if len(buf) - pos > MAX_INLINE:
                        self.protocol_error("too big inline request")
                    return False
                line = buf[pos:nl].rstrip(b"\r")
                pos = nl + 1
                try:
                    argv = [a.encode("latin-1") for a in split_args(line.decode("latin-1"))]
                except ConfigError:
                    self.protocol_error("unbalanced quotes in request")
                    return False
                if argv:
                    self.execute(argv)
            return False
        finally:
            if buf:
                self.inline_buf = buf[pos:]

    def protocol_error(self, reason: str) -> None:
        self.server.log.verbose("Protocol error from client %s: %s", self.addr, reason)
        self.out.append(resp.error(f"ERR Protocol error: {reason}"))
        self.close_after_reply()

    # ---- dispatch ----------------------------------------------------------------
    def execute(self, argv: list[bytes]) -> None:
        self.server.dispatch(self, argv)

    # ---- output ------------------------------------------------------------------
    def flush(self) -> None:
        if self.out and self.transport is not None:
            if self.server.aof.buf:
                self.server.aof.flush()     # what a reply confirms is on disk first
            data = b"".join(self.out) if len(self.out) > 1 else self.out[0]
            self.out.clear()
            self.server.stats.net_output_bytes += len(data)
            if not self.transport.is_closing():
                self.transport.write(data)
        if self.closing and self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def close_after_reply(self) -> None:
        self.closing = True

    def kill(self) -> None:
        """CLIENT KILL, SHUTDOWN, timeouts: close now, replies in flight are dropped."""
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def reply(self, data: bytes) -> None:
        self.out.append(data)

    def reply_error(self, msg: str) -> None:
        self.out.append(resp.error(msg))

    def reply_value(self, value: Any) -> None:
        self.out.append(self.proto.encode(value))

    # ---- blocking ------------------------------------------------------------------
    def block(self, blocked: Blocked, timeout_ms: int) -> None:
        self.blocked = blocked
        self.server.stats.blocked_clients += 1
        if timeout_ms > 0:
            blocked.timer = self.server.loop.call_later(timeout_ms / 1000, self.block_timeout)

    def block_timeout(self) -> None:
        blocked = self.blocked
        if blocked is None:
            return
        blocked.timer = None
        if blocked.on_timeout is not None:
            blocked.on_timeout()
        else:
            self.out.append(self.proto.null_array)
        self.unblock()
        self.flush()

    def unblock(self, resume: bool = True) -> None:
        blocked = self.blocked
        if blocked is None:
            return
        self.blocked = None
        self.server.stats.blocked_clients -= 1
        if blocked.timer is not None:
            blocked.timer.cancel()
        if blocked.kind == "getjob":
            self.server.queues.unblock_client(self, blocked.queues)
        elif blocked.kind == "ackjob":
            self.server.acks.forget_wait(blocked.data)
        elif blocked.kind == "refill":
            blocked.data.waiters.pop(self, None)
        if resume and (self.deferred or not self.at_boundary or self.inline_buf):
            self.server.loop.call_soon(self.resume)

    def resume(self) -> None:
        """Run what the client sent while it was blocked."""
        if self.closing or self.blocked:
            return
        deferred, self.deferred = self.deferred, []
        self.deferred_len = 0
        if (self.reading_paused and self.transport is not None
                and self.transport.get_write_buffer_size() < OUTPUT_HIGH_WATER):
            # Paused for the input kept while blocked; stay paused if the
            # client still does not read its replies (resume_writing resumes).
            self.reading_paused = False
            self.transport.resume_reading()
        for data in deferred:
            self.feed(data)
        self.process_input()
        self.flush()

    def serve_blocked_getjob(self, q: Queue) -> None:
        """A job arrived in a queue this client waits on: reply with it and unblock.

        As in Disque, a blocked client gets one job, whatever its COUNT, so
        that jobs arriving together are spread over the waiting clients.
        """
        from disque_server.commands.getjob import reply_jobs

        blocked = self.blocked
        assert blocked is not None
        job = self.server.queues.fetch_job(q)
        self.unblock()
        if job is not None:
            reply_jobs(self, [job], blocked.withcounters)   # may hold us for a refill
        self.flush()

    def info_line(self) -> str:
        now = time.time()
        flags = "b" if self.blocked else ("O" if self.monitor else "N")
        return (f"id={self.id} addr={self.addr} fd={self.fd} name={self.name.decode(errors='replace')} "
                f"age={int(now - self.ctime)} idle={int(now - self.last_interaction)} "
                f"flags={flags} qbuf={self.pending_len + len(self.inline_buf)} qbuf-free=0 "
                f"obl=0 oll={len(self.out)} omem=0 events=r cmd={self.last_cmd.decode(errors='replace').lower()}")
