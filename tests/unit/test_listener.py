"""The client port's listener (disque_server/listener.py), in-process on real sockets:
connections waiting to be accepted come in bursts of ACCEPT_BURST a pass, and every
one of them is connected in the end."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter

import pytest
import uvloop

from disque_server.listener import ACCEPT_BURST, Listener, listening_sockets

WAITING = 3 * ACCEPT_BURST + 10


async def accept_all() -> tuple[list[int], int]:
    """Connections made per event-loop pass. The listener is the node's own class
    (compiled, it cannot be subclassed or patched), so the count is taken from
    outside: a callback that re-arms itself runs once a pass and numbers the
    passes, and the protocol factory notes the pass it is called in. The
    connections of one burst are made together, in the pass after the accept."""
    loop = asyncio.get_running_loop()
    made: list[asyncio.BaseTransport] = []
    passes = [0]
    per_pass: Counter[int] = Counter()

    def tick() -> None:
        passes[0] += 1
        loop.call_soon(tick)

    class Protocol(asyncio.Protocol):
        def __init__(self) -> None:
            per_pass[passes[0]] += 1

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            made.append(transport)

    [sock] = listening_sockets("127.0.0.1", 0, 1024)
    port = sock.getsockname()[1]
    # Connected by the kernel (the backlog) before the listener looks: one big burst.
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(WAITING)]
    listener = Listener(loop, sock, Protocol, None, print)
    tick()
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
    return [per_pass[p] for p in sorted(per_pass)], len(made)


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
