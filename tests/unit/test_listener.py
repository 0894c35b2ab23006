"""The client port's listener (disque_server/listener.py), in-process on real sockets:
connections waiting to be accepted come in bursts of ACCEPT_BURST a pass, and every
one of them is connected in the end."""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvloop

from disque_server.listener import ACCEPT_BURST, Listener, listening_sockets

WAITING = 3 * ACCEPT_BURST + 10


class CountingListener(Listener):
    """Counts the connections each accept_burst call takes."""

    def __init__(self, *args: object) -> None:
        self.taken, self.bursts = 0, []
        super().__init__(*args)  # type: ignore[arg-type]

    def accept_burst(self) -> None:
        before = self.taken
        super().accept_burst()
        self.bursts.append(self.taken - before)

    def connect(self, conn: socket.socket):  # type: ignore[override]
        self.taken += 1
        return super().connect(conn)


async def accept_all() -> tuple[list[int], int]:
    loop = asyncio.get_running_loop()
    made: list[asyncio.BaseTransport] = []

    class Protocol(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            made.append(transport)

    [sock] = listening_sockets("127.0.0.1", 0, 1024)
    port = sock.getsockname()[1]
    # Connected by the kernel (the backlog) before the listener looks: one big burst.
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(WAITING)]
    listener = CountingListener(loop, sock, Protocol, None, print)
    try:
        for _ in range(200):
            if len(made) == WAITING:
                break
            await asyncio.sleep(0.01)
    finally:
        listener.close()
        for transport in made:
            transport.close()
        for client in clients:
            client.close()
    return listener.bursts, len(made)


def test_waiting_connections_are_accepted_a_burst_a_pass() -> None:
    bursts, connected = uvloop.run(accept_all())
    assert connected == WAITING
    assert sum(bursts) == WAITING
    assert max(bursts) == ACCEPT_BURST  # never more in one pass
    assert len([b for b in bursts if b == ACCEPT_BURST]) >= 3


def test_a_port_in_use_is_the_error_asyncio_gives() -> None:
    [first] = listening_sockets("127.0.0.1", 0, 16)
    try:
        with pytest.raises(OSError, match="error while attempting to bind on address"):
            listening_sockets("127.0.0.1", first.getsockname()[1], 16)
    finally:
        first.close()
