"""The client port: listening sockets that accept a bounded burst per event-loop pass.

uvloop's own server (``loop.create_server``) accepts every pending connection in
one callback: 10,000 clients connecting while the node was busy come in bursts of
hundreds, about 26 µs each (the transport, the protocol, the kernel), so a burst
holds the event loop, its timers and every other client for 10 ms and more. Here
a listening socket is watched with ``add_reader`` and accepts at most
ACCEPT_BURST connections a pass; the socket stays readable while more wait, so
the rest come on the next passes, between the other events. Each accepted socket
becomes a transport with ``connect_accepted_socket`` (TLS included), a task each:
about 10 µs more per connection than uvloop's own accept, for no burst over
ACCEPT_BURST (scale.py, 10,000 clients connecting: worst stall 1-15 ms before,
1-3 ms with it).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from typing import Final, cast

ACCEPT_BURST: Final = 64  # connections accepted per event-loop pass and listening socket


def as_protocol(protocol: object) -> asyncio.Protocol:
    """A connection of the node (Client, BusLink) as the event loop takes it. They are
    native classes when mypyc compiles the node, and a native class cannot derive from
    asyncio.Protocol, a Python class; they have its methods, which is all the loop
    calls (neither asyncio nor uvloop checks the class)."""
    return cast(asyncio.Protocol, protocol)


class Listener:
    """One listening TCP socket (as an asyncio server: ``close()`` stops it)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
        ssl_context: ssl.SSLContext | None,
        on_error: Callable[[str], None],
    ) -> None:
        self.loop = loop
        self.sock = sock
        self.protocol_factory = protocol_factory
        self.ssl_context = ssl_context
        self.on_error = on_error
        self.connecting: set[asyncio.Task[None]] = set()  # (the loop keeps tasks weakly)
        loop.add_reader(sock.fileno(), self.accept_burst)

    def accept_burst(self) -> None:
        for _ in range(ACCEPT_BURST):
            try:
                conn, _addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return  # none left
            except OSError as exc:  # out of file descriptors...: the next pass retries
                self.on_error(f"Accepting a client connection: {exc.strerror or exc}")
                return
            conn.setblocking(False)
            task = self.loop.create_task(self.connect(conn))
            self.connecting.add(task)
            task.add_done_callback(self.connecting.discard)

    async def connect(self, conn: socket.socket) -> None:
        try:
            await self.loop.connect_accepted_socket(
                self.protocol_factory, conn, ssl=self.ssl_context
            )
        except OSError:  # a failed TLS handshake (SSLError), a peer gone already...
            conn.close()  # ... costs that connection only

    def close(self) -> None:
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()


def listening_sockets(host: str | None, port: int, backlog: int) -> list[socket.socket]:
    """Bound and listening sockets for host (None: every interface, IPv4 and IPv6), as
    asyncio's create_server makes them (SO_REUSEADDR, IPv6 sockets IPv6 only)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as err:  # the text asyncio gives (the logs and scripts know it)
                raise OSError(
                    err.errno,
                    f"error while attempting to bind on address {address!r}: "
                    f"{(err.strerror or str(err)).lower()}",
                ) from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks
