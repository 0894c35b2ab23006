"""One client connection: its life, dispatch, replies, blocking.

``data_received`` hands each read to the connection's ``RequestReader``
(request_reader.py: bytes in, requests out), runs every complete request,
and writes all replies produced by that read with one ``write``: pipelined
requests cost one syscall.

A client blocked in GETJOB (or a synchronous ADDJOB, in a cluster) stops
running requests; what it sends meanwhile is kept by its reader and run
once the client is unblocked, as Redis does.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final, cast

from disque_server import resp
from disque_server.memory import CLIENT_BYTES
from disque_server.request_reader import RequestError, RequestReader
from disque_server.resp import RESP2, Protocol

if TYPE_CHECKING:
    from disque_server.commands import Command
    from disque_server.jobs.blocking import Blocked
    from disque_server.state import NodeState

OUTPUT_HIGH_WATER: Final = 64 * 1024 * 1024  # stop reading a client that does not read
DEFERRED_LIMIT: Final = 1024 * 1024  # input kept for a blocked client before we stop reading
# Requests one client runs in one event-loop pass: past that the rest of its input waits
# for the next pass (resume), so a long pipeline read at once (uvloop reads up to 256 KB)
# does not hold the other clients and the timers for its whole length.
RUN_BUDGET: Final = 256

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

    def __init__(self, server: NodeState) -> None:
        self.server = server
        self.id = next(_client_ids)
        self.requests = RequestReader()
        self.out: list[bytes] = []
        self.proto: Protocol = RESP2
        self.transport: asyncio.Transport | None = None
        self.addr = "?:0"
        self.fd = -1
        self.name = b""
        self.ctime = self.last_interaction = time.time()
        self.authenticated = not server.config["requirepass"]
        self.blocked: Blocked | None = None
        self.monitor = False
        self.closing = False
        self.reading_paused = False
        self.writing_paused = False  # its replies pile up: run no more of its requests
        self.last_cmd: Command | None = None  # (CLIENT LIST's cmd=)
        self.last_cmd_name = b""  # the argv[0] last_cmd was found by (see dispatch)
        self.flush_due = False  # its replies go out at the end of the event-loop pass
        # (Interpreted, CPython 3.11 drops the compact layout of instance attributes past
        # 29 of them, and each request costs 12% more: keep few.)

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
        server.hooks.next_tick_changed()  # (an idle node's slow tick: the full rate, now)
        self.transport.set_write_buffer_limits(high=OUTPUT_HIGH_WATER)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        if self.blocked:
            self.unblock(resume=False)
        self.server.clients.pop(self, None)
        self.server.monitors.pop(self, None)

    def pause_writing(self) -> None:
        # The peer does not read its replies: stop reading its requests, and stop
        # running those already read (one read of small requests can hold 250 KB of
        # them, and their replies are many times that).
        self.writing_paused = True
        if self.transport and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.transport and self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()
        if self.requests.has_input():
            self.server.loop.call_soon(self.resume)

    def data_received(self, data: bytes) -> None:
        self.last_interaction = self.server.clock_s
        self.server.stats.net_input_bytes += len(data)
        if self.closing:
            return
        requests = self.requests
        requests.feed(data)
        if self.blocked:
            # Kept for when the client is unblocked; past a limit, TCP back-pressure.
            if (
                requests.deferred_len > DEFERRED_LIMIT
                and self.transport is not None
                and not self.reading_paused
            ):
                self.reading_paused = True
                self.transport.pause_reading()
            return
        self.process_input()
        self.flush_soon()

    # ---- input --------------------------------------------------------------------
    def process_input(self) -> None:
        """Run the complete requests of the input in order, until it is used up, the
        client blocks or is closing; past RUN_BUDGET requests the rest waits for the
        next event-loop pass."""
        hooks = self.server.hooks
        hooks.requests_started()
        self.run_requests()
        hooks.requests_done()  # (a streak of fast commands ends with the pass)

    def run_requests(self) -> None:
        requests = self.requests
        server = self.server
        hooks = server.hooks  # (a native class: each request is a C call, Hooks.request)
        budget = RUN_BUDGET
        while (
            not self.blocked
            and not self.closing
            and not self.writing_paused
            and self.transport is not None
        ):
            budget -= 1
            if budget < 0:
                self.flush_soon()  # (queued first: these replies go before the next pass)
                server.loop.call_soon(self.resume)
                return
            try:
                argv = requests.next_request()
            except RequestError as exc:
                self.protocol_error(str(exc))
                return
            if argv is None:
                return
            hooks.request(self, argv)

    def protocol_error(self, reason: str) -> None:
        self.server.log.verbose("Protocol error from client %s: %s", self.addr, reason)
        self.out.append(resp.error(f"ERR Protocol error: {reason}"))
        self.close_after_reply()

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

    def flush_soon(self) -> None:
        """Write the replies once the event loop has run every client it read this
        pass, as Disque does before it sleeps: the writes of a pass go out together,
        so a peer woken by the first finds the others ready (each wake-up of a
        sleeping peer costs the node a scheduler call in the kernel)."""
        if not self.flush_due:
            self.flush_due = True
            self.server.hooks.replies_ready(self)

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
        if resume and self.requests.has_input():
            self.server.loop.call_soon(self.resume)

    def resume(self) -> None:
        """Run what the client sent while it was blocked, or what was left for the
        next event-loop pass (RUN_BUDGET)."""
        if self.closing or self.blocked:
            return
        if (
            self.reading_paused
            and not self.writing_paused
            and self.transport is not None
            and self.transport.get_write_buffer_size() < OUTPUT_HIGH_WATER
        ):
            # Paused for the input kept while blocked; stay paused while the
            # client does not read its replies (resume_writing resumes).
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
            f"flags={flags} qbuf={self.requests.buffered()} qbuf-free=0 "
            f"obl=0 oll={len(self.out)} omem=0 events=r cmd={self.last_cmd.name if self.last_cmd else 'NULL'}"
        )


def buffered_bytes(clients: Iterable[Client]) -> int:
    """What the clients cost in used_memory: each connection's fixed cost, and its
    input and output buffers."""
    total = 0
    for c in clients:
        total += CLIENT_BYTES + c.requests.buffered()
        if c.transport is not None:
            total += c.transport.get_write_buffer_size()
    return total
