#!/usr/bin/env python3
"""The floor: the least a Python ADDJOB server on uvloop and hiredis can do.

    python bench/floor_node.py PORT

Not a Disque node: what the performance issue measured as "a 40-line server"
(uvloop, a hiredis Reader, one dict of jobs, one SortedKeyList per queue,
the reply written once per read), so that bench/python_floor.py can put
this node between it and C Disque. An ADDJOB makes what a real one makes (a
job ID of the same form, a job object with Disque's fields, its place in
the index and in its queue) and nothing else: no options, timers, stats,
memory accounting, AOF, replication or blocked clients. Answers PING,
ADDJOB q body timeout, QLEN q and DEBUG FLUSHALL; anything else is an error.
"""

from __future__ import annotations

import asyncio
import binascii
import random
import sys
import time
from operator import attrgetter

import hiredis
import uvloop
from sortedcontainers import SortedKeyList

_getrandbits = random.Random().getrandbits
_b2a_base64 = binascii.b2a_base64
_by_ctime = attrgetter("ctime")


class Job:
    __slots__ = (
        "id", "queue", "state", "body", "ctime", "etime", "qtime", "awake", "delay",
        "retry", "repl", "nacks", "deliveries", "flags", "delivered", "confirmed", "gc_retry",
    )  # fmt: skip

    def __init__(self, jid: bytes, queue: bytes, body: bytes, ctime: int, etime: int) -> None:
        self.id, self.queue, self.state, self.body = jid, queue, 3, body
        self.ctime, self.etime, self.qtime, self.awake = ctime, etime, 0, 0
        self.delay, self.retry, self.repl, self.nacks = 0, 300, 1, 0
        self.deliveries, self.flags, self.gc_retry = 0, 0, 0
        self.delivered = self.confirmed = ()


jobs: dict[bytes, Job] = {}
queues: dict[bytes, SortedKeyList] = {}
last_ctime = 0


def addjob(argv: list[bytes]) -> bytes:
    global last_ctime
    now = int(time.time() * 1000)
    random_part = _b2a_base64(_getrandbits(144).to_bytes(18, "big"), newline=False)
    jid = b"D-dcb833cf-" + random_part + b"-05a1"
    last_ctime = ctime = max(now * 1_000_000, last_ctime + 1)
    job = jobs[jid] = Job(jid, argv[1], argv[2], ctime, now // 1000 + 86400)
    queue = queues.get(argv[1])
    if queue is None:
        queue = queues[argv[1]] = SortedKeyList(key=_by_ctime)
    queue.add(job)
    return b"+%s\r\n" % jid


def other(argv: list[bytes]) -> bytes:
    name = argv[0].lower()
    if name == b"ping":
        return b"+PONG\r\n"
    if name == b"qlen" and len(argv) == 2:
        return b":%d\r\n" % len(queues.get(argv[1], ()))
    if name == b"debug" and argv[1:] == [b"FLUSHALL"]:
        jobs.clear()
        queues.clear()
        return b"+OK\r\n"
    return b"-ERR the floor node answers PING, ADDJOB, QLEN and DEBUG FLUSHALL\r\n"


class Client(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.reader = hiredis.Reader()

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        out = []
        while (argv := reader.gets()) is not False:
            out.append(addjob(argv) if argv[0] == b"ADDJOB" else other(argv))
        self.transport.write(b"".join(out))  # type: ignore[attr-defined]


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    await loop.create_server(Client, "127.0.0.1", port)
    await asyncio.Event().wait()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1])))
