"""The load generators of disque-benchmark: producer and consumer connections.

One LoadProcess runs on one asyncio event loop (uvloop when installed) in one OS
process: the benchmark's own process with --processes 1, else one child
process each. Its connections are asyncio protocols driven straight from
data_received with a hiredis reader, no coroutine per request, so that the
client costs as little CPU per job as Python allows.

A worker talks to the coordinator (disque_benchmark) with messages:

    worker -> coordinator          coordinator -> worker
    ("ready",)                     ("start",)
    ("progress", Progress)         ("stop_producers",)
    ("final", Progress, Final)     ("stop",)
    ("error", message)             (fatal: the worker gives up)

A produced job's body is the run's 8-character tag, the send time
(time.time_ns(), 16 hex digits) and padding up to --body-size: consumers
compute the end-to-end latency (ADDJOB sent -> GETJOB reply received) from
it, and tell this run's jobs from others by the tag.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import hiredis

from disque_benchmark.hist import Histogram

TAG_LEN = 8
TS_LEN = 16
MIN_BODY = TAG_LEN + TS_LEN
REPORT_INTERVAL = 0.2  # seconds between progress messages
CONNECT_TIMEOUT = 10.0
ID_LEN = 40  # D-<8 hex node>-<24 chars>-<4 chars>
ROTATIONS = 16  # orders of a consumer's queues in its GETJOBs
MAX_ERROR_KINDS = 10


def encode(*args: str | bytes | int) -> bytes:
    """One command in RESP (hiredis's encoder)."""
    return hiredis.pack_command(args)


@dataclass
class WorkerSpec:
    """What one worker process does (picklable: sent to child processes)."""

    index: int
    producers: list[tuple[int, str, int]]  # (global producer index, host, port)
    consumers: list[tuple[int, str, int]]  # (global consumer index, host, port)
    idle: list[tuple[str, int]]  # idle connections to open and hold
    total_producers: int
    total_consumers: int
    jobs: int | None  # jobs for this worker's producers to add; None: until told to stop
    rate: float  # jobs/s per producer, 0 = as fast as possible
    tag: bytes
    queues: list[bytes]
    body_size: int
    pipeline: int
    count: int  # GETJOB COUNT
    addjob_options: list[bytes]  # [ms-timeout, REPLICATE, n, ASYNC, ...]
    ack: str  # "normal" (ACKJOB) or "fast" (FASTACK)
    getjob_timeout_ms: int
    track_ids: bool
    password: str | None = None


@dataclass
class Progress:
    """Counts since the previous message, and the latency histograms of that interval."""

    produced: int = 0
    consumed: int = 0
    foreign: int = 0
    errors: int = 0
    addjob_hist: tuple[dict[int, int], int, int] = ({}, 0, 0)
    e2e_hist: tuple[dict[int, int], int, int] = ({}, 0, 0)
    producers_done: bool = False
    consumers_alive: int = 0
    last_produce_ns: int = 0  # perf_counter_ns of the latest ADDJOB reply
    last_consume_ns: int = 0  # perf_counter_ns of the latest job received
    error_kinds: dict[str, int] = field(default_factory=dict)


@dataclass
class Final:
    produced_ids: bytes  # every produced job ID, concatenated (IDs are 40 bytes)
    consumed_ids: bytes
    id_len: int = 40
    cpu_s: float = 0.0  # CPU time this worker's process used from start to stop


class FatalError(Exception):
    """The run cannot go on (bad ADDJOB options, authentication...)."""


def consumer_queues(queues: list[bytes], index: int, consumers: int) -> list[bytes]:
    """The queues consumer `index` of `consumers` reads: a share of them when there are
    more queues than consumers, else one (consumers take turns over the queues)."""
    if len(queues) > consumers:
        return queues[index::consumers]
    return [queues[index % len(queues)]]


# --------------------------------------------------------------------------------------
# Connections
# --------------------------------------------------------------------------------------


class Conn(asyncio.Protocol):
    """A connection: hiredis reader, TCP_NODELAY, optional AUTH, reply dispatch."""

    def __init__(self, worker: LoadProcess, host: str, port: int) -> None:
        self.worker = worker
        self.host, self.port = host, port
        self.reader = hiredis.Reader()
        self.transport: asyncio.Transport | None = None
        self.closing = False
        self.auth_pending = False
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.worker.spec.password:
            self.auth_pending = True
            self.transport.write(encode("AUTH", self.worker.spec.password))
        else:
            self.ready.set_result(None)

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        if self.auth_pending:
            reply = reader.gets()
            if reply is False:
                return
            self.auth_pending = False
            if isinstance(reply, Exception):
                self.ready.set_exception(FatalError(f"AUTH failed on {self.address}: {reply}"))
                return
            self.ready.set_result(None)
        replies = []
        while (reply := reader.gets()) is not False:
            replies.append(reply)
        if replies:
            self.on_replies(replies)

    def on_replies(self, replies: list[Any]) -> None:  # pragma: no cover - idle connections
        pass

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(f"{self.address} closed the connection"))
        if not self.closing:
            self.closing = True
            self.on_lost(exc)

    def on_lost(self, exc: Exception | None) -> None:
        self.worker.error(f"connection to {self.address} lost" + (f": {exc}" if exc else ""))


class Producer(Conn):
    """Adds jobs: up to --pipeline ADDJOBs in flight, paced by --rate if given."""

    def __init__(self, worker: LoadProcess, host: str, port: int, index: int) -> None:
        super().__init__(worker, host, port)
        self.index = index
        self.sent: deque[int] = deque()  # perf_counter_ns each in-flight ADDJOB counts from
        self.done = False
        self.jobno = 0
        self.next_due = 0  # perf_counter_ns: the next paced send
        self.timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        w = self.worker
        if w.interval_ns:
            # Spread the producers' sends over one interval, not all at once.
            self.next_due = w.start_ns + w.interval_ns * self.index // w.spec.total_producers
            self.paced_send()
        else:
            self.send()

    def command(self, ts_ns: int) -> bytes:
        w = self.worker
        prefixes = w.addjob_prefixes
        if len(prefixes) == 1:
            prefix = prefixes[0]
        else:
            prefix = prefixes[(self.index + self.jobno * w.spec.total_producers) % len(prefixes)]
        self.jobno += 1
        return b"%s%016x%s" % (prefix, ts_ns, w.addjob_suffix)

    def send(self) -> None:
        """Unpaced: keep the pipeline full."""
        w = self.worker
        room = w.spec.pipeline - len(self.sent)
        if room <= 0 or self.transport is None:
            return
        now = time.perf_counter_ns()
        wall = time.time_ns()
        out = []
        while room > 0 and w.claim():
            out.append(self.command(wall))
            self.sent.append(now)
            room -= 1
        if out:
            self.transport.write(b"".join(out))
        elif not self.sent:
            self.finish()

    def paced_send(self) -> None:
        """Paced: send every job whose time has come (while the pipeline has room), with
        its scheduled time as the start of both latencies (no coordinated omission)."""
        self.timer = None
        w = self.worker
        if self.transport is None or self.done:
            return
        now = time.perf_counter_ns()
        room = w.spec.pipeline - len(self.sent)
        out = []
        while room > 0 and self.next_due <= now:
            if not w.claim():
                if not self.sent and not out:
                    self.finish()
                    return
                break
            due = self.next_due
            out.append(self.command(w.wall_of(due)))
            self.sent.append(due)
            self.next_due += w.interval_ns
            room -= 1
        if out:
            self.transport.write(b"".join(out))
        if room > 0 and not w.producers_stopping and (w.remaining is None or w.remaining > 0):
            delay = max(0.0, (self.next_due - time.perf_counter_ns()) / 1e9)
            self.timer = w.loop.call_later(delay, self.paced_send)
        elif not self.sent and not out and (w.producers_stopping or w.remaining == 0):
            self.finish()

    def on_replies(self, replies: list[Any]) -> None:
        w = self.worker
        now = time.perf_counter_ns()
        hist = w.addjob_hist
        sent = self.sent
        ids = w.produced_ids
        added = w.produced
        for reply in replies:
            if not sent:
                w.error(f"unexpected reply from {self.address}: {reply!r}")
                continue
            t = sent.popleft()
            if isinstance(reply, bytes) and reply.startswith(b"D-"):
                w.produced += 1
                hist.record((now - t) // 1000)
                if ids is not None:
                    if len(reply) == ID_LEN:
                        ids += reply
                    else:
                        w.error(f"unexpected job ID length: {reply!r}")
            elif isinstance(reply, Exception) and str(reply).startswith("ERR"):
                w.fatal(f"ADDJOB failed on {self.address}: {reply}")
                return
            else:
                w.error(f"ADDJOB: {reply}")
        if w.produced != added:
            w.last_produce_ns = now
        if w.interval_ns:
            if self.timer is None:
                self.paced_send()
        else:
            self.send()

    def stop(self) -> None:
        """Told to stop producing: finish once the in-flight replies are in."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.sent:
            self.finish()

    def finish(self) -> None:
        if not self.done:
            self.done = True
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            self.worker.producer_done()

    def on_lost(self, exc: Exception | None) -> None:
        super().on_lost(exc)
        self.sent.clear()
        self.finish()


class Consumer(Conn):
    """GETJOB TIMEOUT t COUNT n FROM its queues; acknowledges each batch pipelined with
    the next GETJOB."""

    def __init__(self, worker: LoadProcess, host: str, port: int, index: int) -> None:
        super().__init__(worker, host, port)
        self.index = index
        queues = consumer_queues(worker.spec.queues, index, worker.spec.total_consumers)
        # GETJOB takes from its queues left to right: with many queues, vary which comes
        # first (ROTATIONS evenly spaced orders, in turn) so that none starves.
        n = len(queues)
        self.getjobs = [
            encode(
                "GETJOB",
                "TIMEOUT",
                worker.spec.getjob_timeout_ms,
                "COUNT",
                worker.spec.count,
                "FROM",
                *queues[k:],
                *queues[:k],
            )
            for k in sorted({i * n // ROTATIONS for i in range(min(n, ROTATIONS))})
        ]
        self.turn = 0
        self.expect: deque[bool] = deque()  # True: a GETJOB reply, False: an ACK reply
        self.alive = True

    @property
    def getjob(self) -> bytes:
        getjobs = self.getjobs
        if len(getjobs) == 1:
            return getjobs[0]
        self.turn = (self.turn + 1) % len(getjobs)
        return getjobs[self.turn]

    def start(self) -> None:
        assert self.transport is not None
        self.expect.append(True)
        self.transport.write(self.getjob)

    def on_replies(self, replies: list[Any]) -> None:
        w = self.worker
        out: list[bytes] = []
        expect = self.expect
        for reply in replies:
            is_getjob = expect.popleft() if expect else True
            if not is_getjob:
                if isinstance(reply, Exception):
                    w.error(f"{w.ack_name}: {reply}")
                continue
            if isinstance(reply, Exception):
                w.error(f"GETJOB: {reply}")
                if str(reply).startswith("ERR"):
                    w.fatal(f"GETJOB failed on {self.address}: {reply}")
                    return
            elif reply:
                wall = time.time_ns()
                tag = w.spec.tag
                hist = w.e2e_hist
                ids = w.consumed_ids
                ours = 0
                acks = []
                for item in reply:
                    job_id, body = item[1], item[2]
                    acks.append(b"$%d\r\n%s\r\n" % (len(job_id), job_id))
                    if body[:TAG_LEN] == tag:
                        ours += 1
                        ts = int(body[TAG_LEN:MIN_BODY], 16)
                        hist.record((wall - ts) // 1000 if wall > ts else 0)
                        if ids is not None and len(job_id) == ID_LEN:
                            ids += job_id
                    else:
                        w.foreign += 1
                if ours:
                    w.consumed += ours
                    w.last_consume_ns = time.perf_counter_ns()
                out.append(b"*%d\r\n%s%s" % (len(acks) + 1, w.ack_header, b"".join(acks)))
                expect.append(False)
            if not self.closing:
                out.append(self.getjob)
                expect.append(True)
        if out and self.transport is not None and not self.closing:
            self.transport.write(b"".join(out))

    def on_lost(self, exc: Exception | None) -> None:
        super().on_lost(exc)
        if self.alive:
            self.alive = False
            self.worker.consumers_alive -= 1


# --------------------------------------------------------------------------------------
# The worker
# --------------------------------------------------------------------------------------


class LoadProcess:
    def __init__(self, spec: WorkerSpec, send: Callable[[tuple[Any, ...]], None]) -> None:
        self.spec = spec
        self.send_message = send
        self.loop = asyncio.get_running_loop()
        self.remaining = spec.jobs
        self.producers_stopping = False
        self.producers: list[Producer] = []
        self.consumers: list[Consumer] = []
        self.idle: list[Conn] = []
        self.producers_running = len(spec.producers)
        self.consumers_alive = len(spec.consumers)
        self.produced = self.consumed = self.foreign = self.errors = 0
        self.error_kinds: dict[str, int] = {}
        self.addjob_hist = Histogram()
        self.e2e_hist = Histogram()
        # Job IDs, 40 bytes each, end to end (cheaper than a list of bytes objects).
        self.produced_ids: bytearray | None = bytearray() if spec.track_ids else None
        self.consumed_ids: bytearray | None = bytearray() if spec.track_ids else None
        self.last_produce_ns = self.last_consume_ns = 0
        self.start_ns = 0
        self.wall0 = self.perf0 = 0
        self.cpu0 = 0.0
        self.interval_ns = int(1e9 / spec.rate) if spec.rate > 0 else 0
        self.ack_name = "FASTACK" if spec.ack == "fast" else "ACKJOB"
        self.ack_header = b"$%d\r\n%s\r\n" % (len(self.ack_name), self.ack_name.encode())
        self.finished: asyncio.Future[None] = self.loop.create_future()
        self.report_timer: asyncio.TimerHandle | None = None
        self.stopped = False
        self.failed = False
        # ADDJOB queue body ms-timeout [options]: everything but the body's time stamp.
        pad = spec.body_size - MIN_BODY
        options = spec.addjob_options
        self.addjob_prefixes = [
            b"*%d\r\n$6\r\nADDJOB\r\n$%d\r\n%s\r\n$%d\r\n%s"
            % (4 + len(options) - 1, len(q), q, spec.body_size, spec.tag)
            for q in spec.queues
        ]
        self.addjob_suffix = (
            b"x" * pad + b"\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(o), o) for o in options)
        )

    # ---- called by the connections ------------------------------------------------

    def claim(self) -> bool:
        if self.producers_stopping:
            return False
        if self.remaining is None:
            return True
        if self.remaining > 0:
            self.remaining -= 1
            return True
        return False

    def wall_of(self, perf_ns: int) -> int:
        return self.wall0 + (perf_ns - self.perf0)

    def producer_done(self) -> None:
        self.producers_running -= 1
        if self.producers_running == 0:
            self.report()  # tell the coordinator at once

    def error(self, message: str) -> None:
        self.errors += 1
        kinds = self.error_kinds
        if message in kinds or len(kinds) < MAX_ERROR_KINDS:
            kinds[message] = kinds.get(message, 0) + 1

    def fatal(self, message: str) -> None:
        if not self.failed:
            self.failed = True
            self.send_message(("error", message))
            self.shutdown()

    # ---- life cycle -------------------------------------------------------------------

    async def connect(self) -> None:
        spec = self.spec

        async def open_one(make: Callable[[], Conn]) -> Conn:
            conn = make()
            try:
                await asyncio.wait_for(
                    self.loop.create_connection(lambda: conn, conn.host, conn.port), CONNECT_TIMEOUT
                )
            except TimeoutError:
                raise ConnectionError(
                    f"could not connect to {conn.address}: timed out after {CONNECT_TIMEOUT:.0f}s"
                ) from None
            except OSError as exc:
                reason = exc.strerror or str(exc)
                raise ConnectionError(f"could not connect to {conn.address}: {reason}") from None
            await conn.ready
            return conn

        def producer(i: int, host: str, port: int) -> Callable[[], Conn]:
            return lambda: Producer(self, host, port, i)

        def consumer(i: int, host: str, port: int) -> Callable[[], Conn]:
            return lambda: Consumer(self, host, port, i)

        def idle(host: str, port: int) -> Callable[[], Conn]:
            return lambda: Conn(self, host, port)

        makers: list[tuple[str, Callable[[], Conn]]] = (
            [("p", producer(*p)) for p in spec.producers]
            + [("c", consumer(*c)) for c in spec.consumers]
            + [("i", idle(*a)) for a in spec.idle]
        )
        # Open in batches: thousands at once can overflow a listen backlog.
        for start in range(0, len(makers), 200):
            batch = makers[start : start + 200]
            results = await asyncio.gather(*(open_one(m) for _, m in batch), return_exceptions=True)
            failure = next((r for r in results if isinstance(r, BaseException)), None)
            if failure is not None:
                for r in results:
                    if isinstance(r, Conn):
                        r.close()
                raise failure
            for (kind, _), conn in zip(batch, results, strict=True):
                if kind == "p":
                    self.producers.append(cast(Producer, conn))
                elif kind == "c":
                    self.consumers.append(cast(Consumer, conn))
                else:
                    self.idle.append(conn)

    def control(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "start":
            self.start()
        elif kind == "stop_producers":
            self.stop_producers()
        elif kind == "stop":
            self.stop()

    def start(self) -> None:
        self.cpu0 = time.process_time()
        self.perf0 = time.perf_counter_ns()
        self.wall0 = time.time_ns()
        self.start_ns = self.perf0
        for c in self.consumers:
            c.start()
        for p in self.producers:
            p.start()
        if not self.producers:
            self.report()
        self.report_timer = self.loop.call_later(REPORT_INTERVAL, self.tick)

    def tick(self) -> None:
        self.report()
        if not self.stopped:
            self.report_timer = self.loop.call_later(REPORT_INTERVAL, self.tick)

    def take_progress(self) -> Progress:
        p = Progress(
            self.produced,
            self.consumed,
            self.foreign,
            self.errors,
            self.addjob_hist.take(),
            self.e2e_hist.take(),
            self.producers_running == 0,
            self.consumers_alive,
            self.last_produce_ns,
            self.last_consume_ns,
            self.error_kinds,
        )
        self.produced = self.consumed = self.foreign = self.errors = 0
        self.error_kinds = {}
        return p

    def report(self) -> None:
        if not self.stopped:
            self.send_message(("progress", self.take_progress()))

    def stop_producers(self) -> None:
        self.producers_stopping = True
        for p in self.producers:
            p.stop()

    def shutdown(self) -> None:
        self.stopped = True
        if self.report_timer is not None:
            self.report_timer.cancel()
        for p in self.producers:
            if p.timer is not None:
                p.timer.cancel()
        for conn in (*self.producers, *self.consumers, *self.idle):
            conn.close()
        if not self.finished.done():
            self.finished.set_result(None)

    def stop(self) -> None:
        if self.stopped:
            return
        progress = self.take_progress()
        final = Final(
            bytes(self.produced_ids or b""),
            bytes(self.consumed_ids or b""),
            cpu_s=time.process_time() - self.cpu0 if self.cpu0 else 0.0,
        )
        self.shutdown()
        self.send_message(("final", progress, final))


async def run_worker(
    spec: WorkerSpec,
    send: Callable[[tuple[Any, ...]], None],
    on_created: Callable[[LoadProcess], None] | None = None,
) -> None:
    """Connect, say ready, then follow the coordinator's messages until stopped."""
    worker = LoadProcess(spec, send)
    if on_created is not None:
        on_created(worker)
    try:
        await worker.connect()
    except (ConnectionError, FatalError) as exc:
        worker.shutdown()
        send(("error", str(exc)))
        return
    send(("ready",))
    await worker.finished
    # Let the transports flush their last ACKs before the loop goes away.
    await asyncio.sleep(0.01)


def run_loop(coro: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def process_main(conn: Any, spec: WorkerSpec) -> None:
    """Entry point of a child process: one worker, messages over a multiprocessing Pipe."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator handles Ctrl-C

    async def main() -> None:
        loop = asyncio.get_running_loop()
        holder: list[LoadProcess] = []

        def readable() -> None:
            try:
                os.set_blocking(conn.fileno(), True)  # add_reader may have cleared it
                while conn.poll():
                    message = conn.recv()
                    if holder:
                        holder[0].control(message)
            except (EOFError, OSError):  # the coordinator is gone
                loop.remove_reader(conn.fileno())
                if holder:
                    holder[0].shutdown()

        loop.add_reader(conn.fileno(), readable)
        os.set_blocking(conn.fileno(), True)  # sends must not fail half way
        try:
            await run_worker(spec, conn.send, holder.append)
        finally:
            loop.remove_reader(conn.fileno())

    try:
        run_loop(main())
    except (BrokenPipeError, EOFError, KeyboardInterrupt):
        pass
    finally:
        with contextlib.suppress(OSError):
            conn.close()
