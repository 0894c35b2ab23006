"""Real node objects for in-process tests: a Server built as the node builds it
(not started: no socket, no file) and its Client. The node runs compiled
(mypyc), and compiled code checks every argument's type, so a stand-in of
another class fails there; these are the real classes in both builds."""

from __future__ import annotations

import asyncio
import functools

from disque_server import jobs
from disque_server.client import Client
from disque_server.config import Config
from disque_server.hooks import Hooks, JobEvents
from disque_server.jobs.queue import Queues
from disque_server.jobs.registry import Jobs
from disque_server.log import Log
from disque_server.memory import Memory
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


def new_jobs() -> tuple[Jobs, Queues]:
    """A job registry and its queues alone, wired as a node wires them (jobs.build),
    telling nothing above them: the base Hooks and JobEvents, a lone node's."""
    registry, queues, _ = jobs.build(
        Hooks(), JobEvents(), Memory(Config()), Log("warning"), idle_loop()
    )
    return registry, queues


@functools.cache
def idle_loop() -> asyncio.AbstractEventLoop:
    """An event loop for the objects that keep one (never run: nothing is waited for)."""
    return asyncio.new_event_loop()
