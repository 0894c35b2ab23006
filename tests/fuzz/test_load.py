"""Load tests: maxclients, many concurrent clients, 10,000 blocked GETJOB, slow readers.

The open-files limit of this process is raised (up to the hard limit) before
a node starts, so the node inherits it; tests that need more descriptors
than the hard limit allows are skipped with the numbers.
"""

from __future__ import annotations

import asyncio
import selectors
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from fuzz_util import (
    FuzzNode,
    call,
    close_all,
    connect,
    encode,
    info_field,
    raise_nofile_limit,
    read_for,
    used_memory,
)

from testkit.nodes import wait_for

MAX_CLIENTS_ERROR = b"-ERR max number of clients reached\r\n"


@pytest.fixture
def start(tmp_path) -> Iterator:
    nodes: list[FuzzNode] = []

    def factory(config: dict[str, str] | None = None) -> FuzzNode:
        node = FuzzNode(tmp_path / f"node{len(nodes)}", config=config)
        nodes.append(node)
        return node.start()  # type: ignore[return-value]

    yield factory
    for node in nodes:
        node.resume()
        node.terminate()


def ping_latency(port: int) -> float:
    t0 = time.monotonic()
    assert call(port, "PING", timeout=30) == b"PONG"
    return time.monotonic() - t0


@pytest.mark.timeout(60)
def test_maxclients_is_enforced(start) -> None:
    node = start({"maxclients": "50"})
    socks = [connect(node.port) for _ in range(60)]
    try:
        for s in socks:
            s.sendall(b"PING\r\n")
        answers = []
        for s in socks:
            s.settimeout(10)
            data = b""
            while not data.endswith(b"\r\n"):
                chunk = s.recv(64)
                if not chunk:
                    break
                data += chunk
            answers.append(data)
        assert answers.count(b"+PONG\r\n") == 50, answers
        assert answers.count(MAX_CLIENTS_ERROR) == 10, answers
    finally:
        close_all(socks)
    # Once they are gone, new clients are welcome again. Until the node has seen
    # them close, INFO itself may be refused (max clients): wait_for retries.
    wait_for(
        lambda: info_field(node.port, "clients", "connected_clients") <= 1,
        message="closed clients to be no longer counted",
    )
    with connect(node.port) as s:
        s.sendall(b"PING\r\n")
        assert read_for(s, quiet=1.0)[0] == b"+PONG\r\n"


@pytest.mark.timeout(120)
def test_a_thousand_concurrent_clients(start) -> None:
    if raise_nofile_limit(4096) < 1200:
        pytest.skip("needs about 1200 open files (process limit too low)")
    node = start()

    async def one(i: int) -> list[bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", node.port)
        writer.write(encode(["PING"]) + encode(["ADDJOB", "load", b"job-%d" % i, 0]))
        await writer.drain()
        lines = [await reader.readline(), await reader.readline()]
        writer.close()
        await writer.wait_closed()
        return lines

    async def main() -> list:
        conns = [one(i) for i in range(1000)]
        return await asyncio.wait_for(asyncio.gather(*conns, return_exceptions=True), 90)

    results = asyncio.run(main())
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:5]
    assert all(r[0] == b"+PONG\r\n" and r[1].startswith(b"+D-") for r in results), [
        r for r in results if r[0] != b"+PONG\r\n" or not r[1].startswith(b"+D-")
    ][:5]
    assert call(node.port, "QLEN", "load") == 1000


@pytest.mark.timeout(240)
def test_ten_thousand_blocked_getjob_clients(start) -> None:
    clients = 10_000
    limit = raise_nofile_limit(clients + 600)
    if limit < clients + 600:
        pytest.skip(f"needs {clients + 600} open files, the hard limit allows {limit}")
    node = start({"maxclients": str(clients + 100)})
    before = used_memory(node.port)
    socks: list[socket.socket] = []
    request = encode(["GETJOB", "TIMEOUT", 0, "FROM", "blockq"])
    try:
        for _ in range(clients):
            s = socket.create_connection(("127.0.0.1", node.port), timeout=30)
            s.sendall(request)
            socks.append(s)
        deadline = time.monotonic() + 120
        while info_field(node.port, "clients", "blocked_clients") < clients:
            assert time.monotonic() < deadline, (
                f"only {info_field(node.port, 'clients', 'blocked_clients')} clients blocked"
            )
            time.sleep(0.2)
        assert ping_latency(node.port) < 5
        grown = used_memory(node.port) - before
        print(f"\n{clients} blocked clients: RSS +{grown >> 20} MB")
        assert grown < 500 << 20, f"{grown >> 20} MB for {clients} blocked clients"
        # Jobs go to blocked clients, one each.
        jobs = 500
        with connect(node.port) as s:
            s.sendall(b"".join(encode(["ADDJOB", "blockq", b"j%d" % i, 0]) for i in range(jobs)))
            got = b""
            while got.count(b"\r\n") < jobs:
                chunk = s.recv(65536)
                assert chunk
                got += chunk
        sel = selectors.DefaultSelector()
        for s in socks:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        served, deadline = 0, time.monotonic() + 60
        while served < jobs and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                data = key.fileobj.recv(4096)  # type: ignore[union-attr]
                assert data.startswith(b"*1\r\n*3\r\n"), data[:100]
                sel.unregister(key.fileobj)
                served += 1
        sel.close()
        assert served == jobs, f"{served} of {jobs} jobs reached a blocked client"
        assert info_field(node.port, "clients", "blocked_clients") == clients - jobs
    finally:
        close_all(socks)
    deadline = time.monotonic() + 60
    while info_field(node.port, "clients", "blocked_clients") > 0:
        assert time.monotonic() < deadline, "disconnected clients still blocked"
        time.sleep(0.2)


@pytest.mark.timeout(120)
def test_pipelining_client_that_never_reads_is_throttled(start) -> None:
    """The node stops reading a client that does not read its replies: its memory
    stays bounded and other clients are served meanwhile."""
    node = start()
    before = used_memory(node.port)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", node.port))
    s.settimeout(2.0)
    chunk = encode(["INFO"]) * 1024  # whole requests; ~3 KB replies each
    sent, stalled = 0, False
    t0 = time.monotonic()
    peak = before
    try:
        while time.monotonic() - t0 < 40:
            try:
                s.sendall(chunk)
                sent += len(chunk)
            except TimeoutError:
                stalled = True  # 2 s without the node reading: throttled
                break
            if sent % (len(chunk) * 256) == 0:
                peak = max(peak, used_memory(node.port))
                assert ping_latency(node.port) < 5
        peak = max(peak, used_memory(node.port))
        assert ping_latency(node.port) < 5
        grown = peak - before
        print(
            f"\nnon-reading client: sent {sent >> 20} MB, stalled={stalled}, RSS +{grown >> 20} MB"
        )
        assert stalled, f"the node read {sent >> 20} MB from a client that reads nothing"
        # The replies wait up to the 64 MB high-water mark; nothing more is run until
        # they drain (the requests already read would make many times their size).
        assert grown < 160 << 20, f"RSS grew {grown >> 20} MB"
    finally:
        s.close()
    assert threading.active_count() >= 1
