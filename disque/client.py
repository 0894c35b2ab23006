"""The synchronous client: one connection to the best node that answers.

Disque's README ("Client libraries") says what a client does, and this is it:

1. Given one or more ``host:port``, connect to one that answers (tried in
   random order, so clients spread over the seeds).
2. Send HELLO and learn the nodes, their IDs and priorities.
3. On ``-LEAVING``, on a connection refused or closed, move to another node,
   preferring the lowest HELLO priority (1: healthy, 10: possibly failing,
   100: leaving), a bounded number of times, then raise ``NoNodeAvailable``.

Commands are retried on the next node only when that cannot run them twice:
a refusal (``-LEAVING``), a connection that could not be opened, or any
command but ADDJOB. An ADDJOB whose connection dropped after it was sent may
have been run: ``ConnectionLost`` says so, and the caller decides (resending
makes at most a second copy of the job: at-least-once).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

import redis

from disque.errors import ConnectionLost, DisqueError, Leaving, NoAuth, NoNodeAvailable, reply_error
from disque.job import Job
from disque_common.client import Hello, Node, by_priority, connect, parse_hello, text
from disque_common.tls import TLS

DEFAULT_NODE = "127.0.0.1:7711"
MAX_MOVES = 3  # nodes tried for one command before NoNodeAvailable


def parse_address(address: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``host`` (port 7711)."""
    host, sep, port = address.rpartition(":")
    if not sep or "]" in port:
        host, port = address, "7711"
    host = host.strip("[]")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a host:port address: {address!r}")
    return host or "127.0.0.1", int(port)


class Client:
    """A Disque client for one or more seed nodes (``"host:port"``)."""

    def __init__(
        self,
        *nodes: str,
        password: str | None = None,
        tls: TLS | None = None,
        socket_timeout: float | None = None,
        connect_timeout: float = 5.0,
        max_moves: int = MAX_MOVES,
    ) -> None:
        self.seeds = [parse_address(n) for n in (nodes or (DEFAULT_NODE,))]
        self.password = password
        self.tls = tls
        self.socket_timeout = socket_timeout
        self.connect_timeout = connect_timeout
        self.max_moves = max_moves
        self.nodes: list[Node] = []  # from the last HELLO, best first
        self.myid = ""  # the ID of the node connected to
        self.address: tuple[str, int] | None = None
        self._conn: redis.Redis | None = None

    # ---- connection -----------------------------------------------------------------
    def connect(self, avoid: tuple[str, int] | None = None) -> None:
        """Connect to the best node that answers (HELLO's order, then the seeds),
        other than ``avoid``; learn the cluster from its HELLO."""
        self.close()
        tried: list[str] = []
        for host, port in self.candidates(avoid):
            conn = connect(
                host,
                port,
                self.password,
                socket_timeout=self.socket_timeout,
                connect_timeout=self.connect_timeout,
                tls=self.tls,
                raw=True,
            )
            try:
                hello = parse_hello(conn.execute_command("HELLO"))
            except redis.AuthenticationError as exc:
                conn.close()
                raise NoAuth(str(exc)) from None
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                conn.close()
                tried.append(f"{host}:{port} ({exc})")
                continue
            self._conn, self.address = conn, (host, port)
            self.learn(hello)
            return
        raise NoNodeAvailable("no Disque node answered: " + "; ".join(tried or ["none to try"]))

    def candidates(self, avoid: tuple[str, int] | None) -> list[tuple[str, int]]:
        """The nodes HELLO listed, best first, then the seeds in random order."""
        known = [(n.host, n.port) for n in by_priority(self.nodes) if n.host]
        seeds = random.sample(self.seeds, len(self.seeds))
        ordered = list(dict.fromkeys(known + seeds))
        if avoid is not None and len(ordered) > 1:
            ordered = [a for a in ordered if a != avoid] + ([avoid] if avoid in ordered else [])
        return ordered

    def learn(self, hello: Hello) -> None:
        self.myid = hello.myid
        self.nodes = by_priority(hello.nodes)

    def hello(self) -> Hello:
        """HELLO, parsed (and remembered: the next move follows it)."""
        hello = parse_hello(self.execute("HELLO"))
        self.learn(hello)
        return hello

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- commands -------------------------------------------------------------------
    def execute(self, *args: Any) -> Any:
        """Run one command, moving to another node when the one it runs on leaves
        or goes away (see the module's docstring for what is sent again)."""
        once_only = str(args[0]).upper() == "ADDJOB"
        for _ in range(self.max_moves):
            if self._conn is None:
                self.connect()
            conn = self._conn
            assert conn is not None
            try:
                return conn.execute_command(*args)
            except redis.AuthenticationError as exc:
                raise NoAuth(str(exc)) from None
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                gone = self.address
                self.close()
                if once_only:
                    raise ConnectionLost(f"{args[0]} may or may not have run: {exc}") from None
                self.connect(avoid=gone)
            except redis.exceptions.OutOfMemoryError as exc:
                raise reply_error(f"OOM {exc}") from None
            except redis.ResponseError as exc:
                error = reply_error(str(exc))
                if not isinstance(error, Leaving):
                    raise error from None
                self.connect(avoid=self.address)  # refused: safe to send again
        raise NoNodeAvailable(f"{args[0]}: still no node to run it after {self.max_moves} moves")

    def add_job(
        self,
        queue: str,
        body: str | bytes,
        timeout: int = 0,
        *,
        replicate: int | None = None,
        delay: int | None = None,
        retry: int | None = None,
        ttl: int | None = None,
        maxlen: int | None = None,
        asynchronous: bool = False,
    ) -> str:
        """ADDJOB; ``timeout`` in milliseconds (0: as long as replication takes),
        ``delay``, ``retry`` and ``ttl`` in seconds. The new job's ID."""
        args: list[Any] = ["ADDJOB", queue, body, timeout]
        for name, value in (
            ("REPLICATE", replicate),
            ("DELAY", delay),
            ("RETRY", retry),
            ("TTL", ttl),
            ("MAXLEN", maxlen),
        ):
            if value is not None:
                args += [name, value]
        if asynchronous:
            args.append("ASYNC")
        return text(self.execute(*args))

    def get_job(
        self,
        *queues: str,
        timeout: int | None = None,
        count: int | None = None,
        nohang: bool = False,
        with_counters: bool = False,
    ) -> list[Job]:
        """GETJOB FROM queues; ``timeout`` in milliseconds (None: wait for ever).
        An empty list when none came (NOHANG, or the timeout)."""
        if not queues:
            raise ValueError("get_job needs at least one queue")
        args: list[Any] = ["GETJOB"]
        if nohang:
            args.append("NOHANG")
        if timeout is not None:
            args += ["TIMEOUT", timeout]
        if count is not None:
            args += ["COUNT", count]
        if with_counters:
            args.append("WITHCOUNTERS")
        reply = self.execute(*args, "FROM", *queues)
        return [Job.from_reply(entry) for entry in reply or ()]

    def ack(self, *job_ids: str) -> int:
        """ACKJOB: the jobs are done (deleted cluster-wide); how many were known."""
        return int(self.execute("ACKJOB", *job_ids)) if job_ids else 0

    def fast_ack(self, *job_ids: str) -> int:
        """FASTACK: a best-effort ACKJOB with a single broadcast."""
        return int(self.execute("FASTACK", *job_ids)) if job_ids else 0

    def nack(self, *job_ids: str, delay: int | None = None) -> int:
        """NACK: queue the jobs again at once, their nack counter increased; with
        ``delay`` (seconds, this server's NACK ... DELAY) after that long."""
        if not job_ids:
            return 0
        extra: list[Any] = ["DELAY", delay] if delay is not None else []
        return int(self.execute("NACK", *job_ids, *extra))

    def working(self, job_id: str) -> int:
        """WORKING: postpone the job's next re-queue; the seconds it was postponed by."""
        return int(self.execute("WORKING", job_id))

    def enqueue(self, *job_ids: str) -> int:
        return int(self.execute("ENQUEUE", *job_ids)) if job_ids else 0

    def dequeue(self, *job_ids: str) -> int:
        return int(self.execute("DEQUEUE", *job_ids)) if job_ids else 0

    def del_job(self, *job_ids: str) -> int:
        """DELJOB: delete the jobs from this node only."""
        return int(self.execute("DELJOB", *job_ids)) if job_ids else 0

    def show(self, job_id: str) -> dict[str, Any] | None:
        """SHOW: the job's fields as a dict (None when unknown here)."""
        return pairs(self.execute("SHOW", job_id))

    def qlen(self, queue: str) -> int:
        return int(self.execute("QLEN", queue))

    def qpeek(self, queue: str, count: int) -> list[Job]:
        """QPEEK: the ``count`` oldest jobs (newest first when negative), left queued."""
        return [Job.from_reply(entry) for entry in self.execute("QPEEK", queue, count) or ()]

    def qstat(self, queue: str) -> dict[str, Any] | None:
        return pairs(self.execute("QSTAT", queue))

    def pause(self, queue: str, *options: str) -> str:
        """PAUSE queue in|out|all|none|state [bcast]: the queue's pause state."""
        return text(self.execute("PAUSE", queue, *options))

    def qscan(self, *, count: int | None = None, **filters: int) -> Iterator[str]:
        """Every queue name (QSCAN, cursor by cursor); ``minlen``, ``maxlen``,
        ``importrate`` filter as QSCAN's options."""
        options: list[Any] = [] if count is None else ["COUNT", count]
        for name, value in filters.items():
            options += [name.upper(), value]
        for item in self.scan("QSCAN", options):
            yield text(item)

    def jscan(
        self, *, count: int | None = None, queue: str | None = None, states: Sequence[str] = ()
    ) -> Iterator[str]:
        """Every job ID (JSCAN, cursor by cursor), of a queue and in states if given."""
        options: list[Any] = [] if count is None else ["COUNT", count]
        if queue is not None:
            options += ["QUEUE", queue]
        for state in states:
            options += ["STATE", state]
        for item in self.scan("JSCAN", options):
            yield text(item)

    def scan(self, command: str, options: list[Any]) -> Iterator[Any]:
        cursor = b"0"
        while True:
            cursor, items = self.execute(command, cursor, *options)
            yield from items
            if cursor in (b"0", "0", 0):
                return

    def info(self, section: str | None = None) -> dict[str, Any]:
        """INFO as {section: {field: value}}."""
        from disque_common.client import info_numbers, parse_info

        reply = self.execute("INFO", *([section] if section else []))
        return info_numbers(parse_info(reply))


def pairs(reply: Any) -> dict[str, Any] | None:
    """A flat [name, value, ...] reply as a dict with str names; None for nil."""
    if reply is None:
        return None
    if not isinstance(reply, list):
        raise DisqueError(f"unexpected reply {reply!r:.200}")
    return {text(k): v for k, v in zip(reply[::2], reply[1::2], strict=False)}
