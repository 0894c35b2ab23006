"""Helpers of the fuzz and load suites: raw sockets, RESP encoding, node health.

``FUZZ_EXAMPLES`` (environment) scales every hypothesis test: it is the
number of examples of the biggest one, the others take a share of it.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import hiredis
import pytest

from testkit.nodes import Node

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))


class FuzzNode(Node):
    """A Node whose stderr goes to a file (checked for tracebacks, and never a
    pipe nobody reads, which would freeze a node that writes a lot to it), and
    that can start with a given open-files limit."""

    def __init__(self, *args: Any, nofile: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.output = self.dir / "stderr.log"
        self.nofile = nofile

    def popen_options(self) -> dict[str, Any]:
        if self.nofile is None:
            return {}
        limit = self.nofile

        def preexec() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        return {"preexec_fn": preexec}

    def stderr_text(self) -> str:
        path = Path(self.output)
        return path.read_text(errors="replace") if path.exists() else ""


def raise_nofile_limit(wanted: int) -> int:
    """Raise this process's soft open-files limit towards `wanted` (nodes started
    afterwards inherit it); return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def examples(share: float = 1.0) -> int:
    return max(10, int(FUZZ_EXAMPLES * share))


def encode(args: Iterable[Any]) -> bytes:
    return hiredis.pack_command(tuple(args))


def connect(port: int, timeout: float = 5.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_for(
    sock: socket.socket, quiet: float = 0.02, total: float = 1.0, limit: int = 1 << 20
) -> tuple[bytes, bool]:
    """Read until `quiet` seconds pass without data (or `total`, or `limit` bytes).

    Returns (data, closed): closed when the node closed the connection."""
    out = bytearray()
    deadline = time.monotonic() + total
    sock.settimeout(quiet)
    while time.monotonic() < deadline and len(out) < limit:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, BlockingIOError):
            return bytes(out), False
        except OSError:
            return bytes(out), True
        if not chunk:
            return bytes(out), True
        out += chunk
    return bytes(out), False


def send_chunks(
    port: int, chunks: list[bytes], gap: float = 0.0, quiet: float = 0.02, total: float = 1.0
) -> tuple[bytes, bool]:
    """Open a connection, send the chunks (a write each), read what comes back, close."""
    with connect(port) as s:
        for chunk in chunks:
            try:
                s.sendall(chunk)
            except OSError:  # the node may close a connection it found broken
                break
            if gap:
                time.sleep(gap)
        return read_for(s, quiet, total)


def parse_replies(data: bytes) -> list[Any]:
    """Every complete RESP reply in data (errors as hiredis.ReplyError)."""
    reader = hiredis.Reader()
    reader.feed(data)
    replies = []
    while True:
        r = reader.gets()
        if r is False:
            return replies
        replies.append(r)


def read_replies(sock: socket.socket, n: int, reader: hiredis.Reader | None = None) -> list:
    """Exactly n replies (raises ConnectionError if the node closes first)."""
    reader = reader or hiredis.Reader()
    replies: list[Any] = []
    while len(replies) < n:
        r = reader.gets()
        if r is not False:
            replies.append(r)
            continue
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed by the node after {len(replies)} replies")
        reader.feed(chunk)
    return replies


def call(port: int, *args: Any, timeout: float = 10.0) -> Any:
    with connect(port, timeout) as s:
        s.sendall(encode(args))
        return read_replies(s, 1)[0]


def info_field(port: int, section: str, field: str) -> int:
    reply = call(port, "INFO", section)
    if isinstance(reply, hiredis.ReplyError):
        raise AssertionError(f"INFO {section} answered an error: {reply}")
    text = reply.decode()
    for line in text.split("\r\n"):
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    raise KeyError(field)


def used_memory(port: int) -> int:
    """INFO used_memory_rss: the node's RSS (used_memory counts only its data)."""
    return info_field(port, "memory", "used_memory_rss")


def proc_rss(pid: int) -> int:
    """RSS of a process from /proc (bytes), 0 where /proc is missing."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Health:
    """What must hold after every fuzz example: the node lives, serves others,
    keeps the jobs it had, and its memory stays bounded."""

    def __init__(self, node: Node, jobs: int = 5, memory_budget: int = 200 << 20) -> None:
        self.node = node
        self.queue = b"fuzz-sentinel-" + os.urandom(6).hex().encode()
        self.ids = [
            call(
                node.port,
                "ADDJOB",
                self.queue,
                b"sentinel-%d" % i,
                0,
                "REPLICATE",
                1,
                "RETRY",
                3600,
            )
            for i in range(jobs)
        ]
        assert all(isinstance(j, bytes) and j.startswith(b"D-") for j in self.ids), self.ids
        self.rss_start = used_memory(node.port)
        self.rss_peak = self.rss_start
        self.memory_budget = memory_budget
        self.checks = 0
        self.stderr_seen = len(node.stderr_text()) if isinstance(node, FuzzNode) else 0

    def check(self, context: str = "") -> None:
        node = self.node
        assert node.is_running(), (
            f"node died (exit {node.proc.returncode if node.proc else None}) {context}"
        )
        if isinstance(node, FuzzNode):
            err = node.stderr_text()
            new, self.stderr_seen = err[self.stderr_seen :], len(err)
            assert "Traceback" not in new and "Fatal error" not in new, (
                f"uncaught exception in the node {context}:\n{new[-3000:]}"
            )
        probe = [encode(["PING"]), encode(["QLEN", self.queue])]
        probe += [encode(["SHOW", jid]) for jid in self.ids[:2]]
        try:
            with connect(node.port, timeout=10) as s:
                s.sendall(b"".join(probe))
                replies = read_replies(s, len(probe))
        except OSError as exc:
            raise AssertionError(f"node does not serve other clients: {exc!r} {context}") from exc
        assert replies[0] == b"PONG", f"PING -> {replies[0]!r} {context}"
        assert replies[1] == len(self.ids), f"QLEN sentinel -> {replies[1]!r} {context}"
        for r in replies[2:]:
            assert isinstance(r, list) and r, f"SHOW sentinel -> {r!r} {context}"
        self.checks += 1

    def check_memory(self, context: str = "") -> int:
        rss = used_memory(self.node.port)
        self.rss_peak = max(self.rss_peak, rss)
        grown = rss - self.rss_start
        assert grown < self.memory_budget, (
            f"RSS grew by {grown >> 20} MB (from {self.rss_start >> 20} MB) {context}"
        )
        return grown


def close_all(socks: Iterable[socket.socket]) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.close()


def bug(reason: str) -> pytest.MarkDecorator:
    """A server bug still open: a strict xfail, so the fix shows up as XPASS
    (see test_server_bugs.py for the convention)."""
    return pytest.mark.xfail(reason="SERVER BUG: " + reason, strict=True)
