"""One client connection: input parsing, dispatch, replies, blocking.

``data_received`` feeds hiredis (or the inline parser for telnet-style
lines), runs every complete command, and writes all replies produced by
that read with one ``write``: pipelined requests cost one syscall.

hiredis allocates room for an array as soon as it reads its count, so a
few bytes can cost gigabytes and seconds. The headers that could make it
do so (an array inside a request, a huge count) are looked at before
hiredis reads them; see ``feed_more``. A read of plain requests is fed
whole, as before: the checks cost one regular-expression scan per read.

A client blocked in GETJOB (or a synchronous ADDJOB, in a cluster) stops
executing commands; what it sends meanwhile is kept and run once the
client is unblocked, as Redis does.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import socket
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Final, cast

import hiredis

from disque_common.splitargs import SplitError, split_args
from disque_server import resp
from disque_server.resp import (
    AGGREGATE_TYPES,
    BYTES_ONLY,
    CUT,
    NESTED,
    RESP2,
    RESP_TYPES,
    STAR,
    Framing,
    Protocol,
    byte_name,
    count_problem,
    feed_array_inside,
    next_array_header,
)

if TYPE_CHECKING:
    from disque_server.blocking import Blocked
    from disque_server.commands import Command
    from disque_server.server import Server

MAX_INLINE: Final = 64 * 1024
QUERY_BUFFER_LIMIT: Final = 1024 * 1024 * 1024
MAX_MULTIBULK: Final = 1024 * 1024
PROTO_MAX_BULK_LEN: Final = 512 * 1024 * 1024
SCAN_PENDING_MAX: Final = 1024 * 1024  # past this, follow the request header by header instead
FOLLOW_MAX_REQUESTS: Final = 8  # ... or inside one after fewer requests than this
OUTPUT_HIGH_WATER: Final = 64 * 1024 * 1024  # stop reading a client that does not read
DEFERRED_LIMIT: Final = 1024 * 1024  # input kept for a blocked client before we stop reading

_BIG_LENGTH: Final = re.compile(rb"\$\d{9}")  # maybe over PROTO_MAX_BULK_LEN
NOT_BULK_STRINGS: Final = "expected a multibulk request of bulk strings"
SMALL_READ: Final = 16 * 1024  # its requests' elements are checked by a join
# Requests one client runs in one event-loop pass: past that the rest of its input waits
# for the next pass (resume), so a long pipeline read at once (uvloop reads up to 256 KB)
# does not hold the other clients and the timers for its whole length.
RUN_BUDGET: Final = 256
_join: Final = b"".join

_client_ids: Final = itertools.count(1)


def set_keepalive(sock: socket.socket, interval: int) -> None:
    """tcp-keepalive, as Redis' anetKeepAlive: probes after ``interval`` seconds
    idle, then every interval/3, dropped after 3 unanswered."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, interval)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(interval // 3, 1))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
    except OSError:
        pass


class Client:
    """The per-connection state; per-request state lives in the handlers."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.id = next(_client_ids)
        self.reader = hiredis.Reader()
        self.inline_buf = b""
        # Where the parser stands: at a request boundary, or inside a request; then
        # hiredis was given these pieces since the last boundary, and returned that many
        # requests from them (or framing follows the stream, header by header).
        self.at_boundary = True
        self.pending: list[bytes] = []
        self.pending_len = 0
        self.pending_count = 0
        self.framing: Framing | None = None
        # The read being fed to hiredis piece by piece, where in it, and whether a
        # request start was checked in it (clean: small arrays need no look).
        self.chunk = b""
        self.chunk_pos = 0
        self.clean = False
        self.out: list[bytes] = []
        self.proto: Protocol = RESP2
        self.transport: asyncio.Transport | None = None
        self.addr = "?:0"
        self.fd = -1
        self.name = b""
        self.ctime = self.last_interaction = time.time()
        self.authenticated = not server.config["requirepass"]
        self.blocked: Blocked | None = None
        self.deferred: deque[bytes] = deque()  # reads not looked at yet (kept while blocked)
        self.deferred_len = 0
        self.monitor = False
        self.closing = False
        self.reading_paused = False
        self.last_cmd: Command | None = None  # (CLIENT LIST's cmd=)
        # No more than 29 attributes: past that, CPython 3.11 drops the compact layout
        # of instance attributes, and each request costs 12% more in process_input.

    # ---- asyncio protocol interface -------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's does not subclass asyncio.Transport: no isinstance).
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        server = self.server
        sock = transport.get_extra_info("socket")
        if isinstance(peer, tuple):
            host = peer[0]
            self.addr = f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
            if server.config["tcp-keepalive"] and sock is not None:
                set_keepalive(sock, server.config["tcp-keepalive"])
        elif sock is not None and sock.family == socket.AF_UNIX:  # shown as Redis does
            self.addr = f"{server.config['unixsocket']}:0"
        if sock is not None:
            self.fd = sock.fileno()
        server.stats.connections_received += 1
        if len(server.clients) >= server.config["maxclients"]:
            server.stats.rejected_connections += 1
            self.transport.write(b"-ERR max number of clients reached\r\n")
            transport.close()
            self.closing = True
            return
        server.clients[self] = None
        self.transport.set_write_buffer_limits(high=OUTPUT_HIGH_WATER)

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
        self.last_interaction = self.server.clock_s
        self.server.stats.net_input_bytes += len(data)
        if self.closing:
            return
        if self.blocked or self.deferred or self.chunk_pos < len(self.chunk):
            # Kept in order: also a read that comes between an unblock and the resume
            # it scheduled waits for the reads kept before it.
            self.deferred.append(data)
            self.deferred_len += len(data)
            if self.blocked:
                if (
                    self.deferred_len > DEFERRED_LIMIT
                    and self.transport
                    and not self.reading_paused
                ):
                    self.reading_paused = True  # TCP back-pressure until unblocked
                    self.transport.pause_reading()
                return
        elif (
            self.at_boundary
            and data[0] == STAR
            and not self.inline_buf
            and (data[2:3] == b"\r" or not count_problem(data, 0, MAX_MULTIBULK))
            and next_array_header(data, 1, True) == len(data)
        ):
            self.run_read(data)
            self.flush()
            return
        else:
            self.chunk, self.chunk_pos, self.clean = data, 0, False
            if self.at_boundary and not self.inline_buf and not self.feed_more():
                self.flush()  # (a protocol error, or a cut header)
                return
        self.process_input()
        self.flush()

    def run_read(self, data: bytes) -> None:
        """The common read: requests from a boundary, no array header to look at first
        (what feed_more would find). It is fed whole and run as process_input would;
        wherever that stops inside the read (a client that blocks, a request cut by the
        end of the read, a parse error), the state is left as process_input's own after
        feeding the read in one piece, and process_input goes on from there."""
        reader = self.reader
        reader.feed(data)
        self.framing = None  # (as feed_more at a boundary)
        gets, dispatch, has_data = reader.gets, self.server.dispatch, reader.has_data
        small = len(data) <= SMALL_READ
        done = 0
        while True:
            try:
                request = gets()
            except (hiredis.ProtocolError, MemoryError, ValueError, TypeError) as exc:
                self.keep_read(data, done)
                if not self.parse_failed(exc):
                    return
                break
            if request is False:
                self.keep_read(data, done)  # a request cut by the end of the read
                break
            if type(request) is not list:
                self.protocol_error(NOT_BULK_STRINGS)
                return
            try:
                # Every element a bytes object (no integer, array, null...): joining
                # them checks it for a third of what a look at each type costs, as
                # long as the copy is small.
                if small:
                    _join(request)
                elif not BYTES_ONLY.issuperset(map(type, request)):
                    raise TypeError
            except TypeError:
                self.protocol_error(NOT_BULK_STRINGS)
                return
            done += 1
            if request:
                dispatch(self, request)
            if not has_data():
                return  # the common end: all run, at a boundary
            if self.blocked or self.closing or done >= RUN_BUDGET:
                self.keep_read(data, done)
                if done >= RUN_BUDGET:
                    self.server.loop.call_soon(self.resume)  # the rest next pass
                return
        self.process_input()

    def keep_read(self, data: bytes, done: int) -> None:
        """The state process_input has after feeding ``data`` whole from a boundary
        and getting ``done`` requests out of it."""
        self.chunk, self.chunk_pos, self.clean = data, len(data), True
        self.at_boundary = False
        self.pending.append(data)
        self.pending_len = len(data)
        self.pending_count = done

    # ---- input --------------------------------------------------------------------
    def process_input(self) -> None:
        """Run the complete requests of the input in order, until it is used up, the
        client blocks or is closing; past RUN_BUDGET steps the rest waits for the next
        event-loop pass."""
        budget = RUN_BUDGET
        while not self.blocked and not self.closing and self.transport is not None:
            budget -= 1
            if budget < 0:
                self.server.loop.call_soon(self.resume)
                return
            if self.inline_buf:
                if not self.process_inline() and (
                    self.blocked or self.closing or not self.more_inline()
                ):
                    return
                continue
            reader = self.reader  # (replaced by recover_inline)
            try:
                request = reader.gets()
            except (hiredis.ProtocolError, MemoryError, ValueError, TypeError) as exc:
                if not self.parse_failed(exc):
                    return
                continue
            if request is False:
                if self.at_boundary and self.chunk_pos >= len(self.chunk) and not self.deferred:
                    return  # all run (the common end of a read)
                if not self.feed_more():
                    return
                continue
            if type(request) is not list or not BYTES_ONLY.issuperset(map(type, request)):
                self.protocol_error(NOT_BULK_STRINGS)
                return
            if reader.has_data():
                self.pending_count += 1
            else:
                self.at_boundary = True
                self.forget_pending()
            if request:
                self.server.dispatch(self, request)

    def feed_more(self) -> bool:
        """Give hiredis the next piece of input: the rest of the read, or up to the next
        array header it must not read unchecked. False when there is nothing to give (all
        used, or the rest of a header still to come) or the client is closing.

        Such a header is looked at once hiredis has run everything before it, and its
        state then says what the header is: at a request boundary, a request start (its
        count is checked); everything consumed but no boundary, an element (an array:
        refused); input left over, hiredis is inside a payload and the header is payload
        bytes, so from there ``framing`` follows the stream header by header, checking
        each one, to the next request boundary (it also skips payloads without looking
        at them). Lengths do not make hiredis allocate: they are checked once the read is
        used up and hiredis waits inside a request."""
        while True:
            chunk, pos = self.chunk, self.chunk_pos
            if pos >= len(chunk):
                # The read is used up inside a request. One of a few requests (big ones):
                # follow it header by header, which skips its payload without scanning
                # it, and checks its lengths. Else (a pipeline cut anywhere) only a bulk
                # length that may go over PROTO_MAX_BULK_LEN needs a look; one cut by the
                # end of the read goes unseen, which costs nothing but the early error:
                # hiredis allocates nothing for a length, and QUERY_BUFFER_LIMIT holds.
                if (
                    not self.at_boundary
                    and self.framing is None
                    and (self.pending_count < FOLLOW_MAX_REQUESTS or _BIG_LENGTH.search(chunk))
                ):
                    if not self.start_framing():
                        return False
                self.chunk, self.chunk_pos = b"", 0
                if not self.deferred or not self.load_chunk():
                    return False
                continue
            if self.at_boundary:
                # What does not start with '*' is an inline command at the start of a
                # read; further on, what hiredis does not know (RESP values are read,
                # and refused when they are no array).
                kind = chunk[pos]
                if kind != STAR and (pos == 0 or kind not in RESP_TYPES):
                    self.inline_buf, self.chunk, self.chunk_pos = chunk[pos:], b"", 0
                    self.framing = None
                    return True
                if kind in AGGREGATE_TYPES and chunk[pos + 2 : pos + 3] != b"\r":
                    problem = count_problem(chunk, pos, MAX_MULTIBULK)
                    if problem == CUT:
                        if not self.load_chunk():
                            return False
                        continue
                    if problem:
                        self.protocol_error(problem)
                        return False
                self.framing = None
                self.clean = True
                end = next_array_header(chunk, pos + 1, True)
            elif self.framing is not None:
                # Up to a bad header: what comes before it runs first, then the walk
                # from there finds it again.
                end, outcome = self.framing.walk(chunk, pos, 1)
                if end == pos:  # a bad header, or a boundary hiredis misses
                    self.protocol_error(
                        "invalid request framing"
                        if outcome in (Framing.END, Framing.BOUNDARY, Framing.INLINE)
                        else outcome
                    )
                    return False
            else:
                end = next_array_header(chunk, pos, self.clean)
                if end == pos:
                    past = pos + 1
                    fed = feed_array_inside(self.reader, chunk, pos)
                    if fed == NESTED:
                        self.protocol_error(f"expected '$', got '{byte_name(chunk[pos])}'")
                        return False
                    if fed:
                        self.pending.append(chunk[pos:past])
                        self.pending_len += 1
                        self.chunk_pos = pos = past
                    # Payload bytes. Follow the request header by header if that means
                    # walking few requests; else feed on to the next header to look at
                    # (a payload full of them costs 1 us each: 3 times what plain
                    # requests cost per byte, no more).
                    if self.pending_count < FOLLOW_MAX_REQUESTS:
                        if not self.start_framing():
                            return False
                        continue
                    end = next_array_header(chunk, past, self.clean)
                    if end == pos:
                        continue
            if (
                self.framing is None
                and self.pending
                and self.pending_len + end - pos > SCAN_PENDING_MAX
            ):
                # A request too big to keep a copy of: follow it header by header.
                if not self.start_framing():
                    return False
                continue
            self.chunk_pos = end
            self.at_boundary = False
            if self.framing is not None:
                self.reader.feed(chunk, pos, end - pos)
            else:
                piece = chunk if pos == 0 and end == len(chunk) else chunk[pos:end]
                self.reader.feed(piece)
                # A copy of what hiredis holds of the request in progress: it serves the
                # inline recovery, and to start framing mid-request.
                self.pending.append(piece)
                self.pending_len += len(piece)
            if self.reader.len() > QUERY_BUFFER_LIMIT:
                self.protocol_error("query buffer limit reached")
                return False
            return True

    def load_chunk(self) -> bool:
        """Take the next read, after what is left of the current one (a header cut by
        the end of the read): False when no read is waiting."""
        if not self.deferred:
            return False
        data = self.deferred.popleft()
        self.deferred_len -= len(data)
        rest = self.chunk[self.chunk_pos :]
        self.chunk = rest + data if rest else data
        self.chunk_pos = 0
        self.clean = False
        return True

    def start_framing(self) -> bool:
        """Follow the stream header by header from here on. Where hiredis stands comes
        from walking what it was given since the last request boundary."""
        framing = Framing(MAX_MULTIBULK, PROTO_MAX_BULK_LEN)
        _, outcome = framing.walk(b"".join(self.pending))
        if outcome != Framing.END:
            # An array nested in a request, small enough to pass unchecked: the request
            # would be refused anyway.
            self.protocol_error(outcome if outcome != Framing.INLINE else "invalid request framing")
            return False
        self.framing = framing
        self.forget_pending()
        return True

    def forget_pending(self) -> None:
        self.pending.clear()
        self.pending_len = 0
        self.pending_count = 0

    def parse_failed(self, exc: Exception) -> bool:
        """hiredis refused the input: True when it was an inline command after
        multibulk ones (run as such: go on), else a protocol error (False)."""
        if self.recover_inline(str(exc)):
            return True
        self.protocol_error(str(exc).lower() or "invalid multibulk length")
        return False

    def recover_inline(self, error: str) -> bool:
        """An inline command right after multibulk ones in one read: hiredis cannot
        parse it, so restart from where the last request ended, as an inline line. That
        is found by walking what hiredis was given since the last boundary as hiredis
        did, past the requests it returned: they may use any encoding it accepts
        (simple strings for bulk ones, and so on)."""
        if "reply type byte" not in error or not self.pending:
            return False
        buf = b"".join(self.pending)
        end, outcome = Framing(MAX_MULTIBULK, PROTO_MAX_BULK_LEN).walk(buf, 0, self.pending_count)
        if outcome != Framing.BOUNDARY or end >= len(buf) or buf[end] in RESP_TYPES:
            return False  # the bad byte is inside a request
        self.inline_buf = buf[end:] + self.chunk[self.chunk_pos :]
        self.chunk, self.chunk_pos = b"", 0
        self.reader = hiredis.Reader()
        self.at_boundary = True
        self.clean = False
        self.forget_pending()
        return True

    def more_inline(self) -> bool:
        """Append the next read to the inline line in progress; False when none waits."""
        if self.chunk_pos < len(self.chunk):
            data = self.chunk[self.chunk_pos :]
        elif self.deferred:
            data = self.deferred.popleft()
            self.deferred_len -= len(data)
        else:
            return False
        self.chunk, self.chunk_pos = b"", 0
        self.inline_buf += data
        return True

    def process_inline(self) -> bool:
        """Run the complete inline commands of inline_buf (one pass, no re-slicing per
        line); True when multibulk requests follow, False when more input is needed."""
        buf, pos = self.inline_buf, 0
        try:
            while not self.blocked and not self.closing:
                if buf[pos : pos + 1] == b"*":  # back to multibulk requests
                    self.inline_buf, self.chunk, self.chunk_pos = b"", buf[pos:], 0
                    buf, pos = b"", 0
                    return True
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    if len(buf) - pos > MAX_INLINE:
                        self.protocol_error("too big inline request")
                    return False
                line = buf[pos:nl].rstrip(b"\r")
                pos = nl + 1
                try:
                    argv = split_args(line)
                except SplitError:
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
        out, transport = self.out, self.transport
        if out and transport is not None:
            server = self.server
            if server.aof.buf:
                server.aof.flush()  # what a reply confirms is on disk first
            data = b"".join(out) if len(out) > 1 else out[0]
            out.clear()
            server.stats.net_output_bytes += len(data)
            if not transport.is_closing():
                transport.write(data)
        if self.closing and transport is not None and not transport.is_closing():
            transport.close()

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

    # ---- blocking (what the client waits for: blocking.py) -----------------------------
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
        blocked.timed_out(self)
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
        blocked.release(self)
        if resume and (
            self.deferred
            or not self.at_boundary
            or self.inline_buf
            or self.chunk_pos < len(self.chunk)
        ):
            self.server.loop.call_soon(self.resume)

    def resume(self) -> None:
        """Run what the client sent while it was blocked, or what was left for the
        next event-loop pass (RUN_BUDGET)."""
        if self.closing or self.blocked:
            return
        if (
            self.reading_paused
            and self.transport is not None
            and self.transport.get_write_buffer_size() < OUTPUT_HIGH_WATER
        ):
            # Paused for the input kept while blocked; stay paused if the
            # client still does not read its replies (resume_writing resumes).
            self.reading_paused = False
            self.transport.resume_reading()
        self.process_input()
        self.flush()

    def info_line(self) -> str:
        now = time.time()
        flags = "b" if self.blocked else ("O" if self.monitor else "N")
        return (
            f"id={self.id} addr={self.addr} fd={self.fd} name={self.name.decode(errors='replace')} "
            f"age={int(now - self.ctime)} idle={int(now - self.last_interaction)} "
            f"flags={flags} qbuf={self.pending_len + len(self.inline_buf)} qbuf-free=0 "
            f"obl=0 oll={len(self.out)} omem=0 events=r cmd={self.last_cmd.name if self.last_cmd else 'NULL'}"
        )
