"""Real node objects for in-process tests: a Server built as the node builds it
(not started: no socket, no file) and its Client. The node runs compiled
(mypyc), and compiled code checks every argument's type, so a stand-in of
another class fails there; these are the real classes in both builds."""

from __future__ import annotations

import asyncio
import functools

from disque_server.client import Client
from disque_server.config import Config
from disque_server.log import Log
from disque_server.server import Server


@functools.cache
def shared_server() -> Server:
    """One Server for the tests that only need one to exist (its event loop is
    never run: it only has to be there when the server is built)."""
    return new_server()


def new_server() -> Server:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Server(Config(), Log("warning"))
    finally:
        asyncio.set_event_loop(None)


def new_client(server: Server | None = None) -> Client:
    """A client with no connection: what it is sent stays in ``client.out``."""
    return Client(server or shared_server())


def replies(client: Client) -> list[bytes]:
    """What the client was sent since the last call."""
    sent = list(client.out)
    client.out.clear()
    return sent
