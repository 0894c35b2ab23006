"""disque-benchmark: load a Disque cluster with producers and consumers and measure it.

In the spirit of redis-benchmark and `nats bench`. Producers add jobs
(ADDJOB), consumers take them (GETJOB) and acknowledge them (ACKJOB or
FASTACK), spread round robin over the cluster's nodes (found with HELLO from
the seed node, or given with --node). Every job body carries its send time,
so consumers measure the end-to-end latency (ADDJOB sent -> job received by
GETJOB); producers measure the ADDJOB reply latency. With -n, every produced
job is checked, by ID, to be consumed exactly once.

The client side is built not to be the bottleneck: asyncio (uvloop when
installed) protocols with hiredis, and --processes N spreads the clients
over N OS processes whose latency histograms are merged.

The command line is parsed with typer, as disque-worker and disque-tui do
(like redis-benchmark, `-h` is the host; the help is `--help`).

Exit status: 0 when the run completed with no error and (with -n) every
produced job was consumed; 1 on an error, a lost job, a connection failure
or an option's value out of range; 2 on a command line that does not parse
(an unknown option, a value that is not a number, a bad HOST:PORT); 130 when
interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import secrets
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import SimpleNamespace
from typing import Annotated, Any, NamedTuple

import typer

from disque.protocol import PRIORITY_FAILING, HelloError, parse_hello
from disque.typer_main import run_app
from disque_benchmark.hist import Histogram
from disque_benchmark.report import Display, Snapshot, json_summary, text_summary
from disque_benchmark.worker import (
    MIN_BODY,
    Final,
    Progress,
    WorkerSpec,
    encode,
    process_main,
    run_loop,
    run_worker,
)
from disque_cli import DEFAULT_HOST, DEFAULT_PORT, __version__

PROG = "disque-benchmark"
DEFAULT_JOBS = 100_000
DEFAULT_CLIENTS = 50
DEFAULT_BODY = 64
READY_TIMEOUT = 60.0  # to open every connection
FINAL_TIMEOUT = 30.0  # for the workers' final reports
GETJOB_TIMEOUT_MS = 1000

EXAMPLES = """\
examples:
  disque-benchmark                  # 100,000 jobs, 25 producers, 25 consumers
  disque-benchmark -p 7712 -n 1000000 -P 16 --processes 2
  disque-benchmark --replicate 3 --async --duration 30
  disque-benchmark --producer-node 127.0.0.1:7711 --consumer-node 127.0.0.1:7712
  disque-benchmark --rate 5000 --duration 20 --json > latency.json

Each job body holds an 8-character run tag and its send time (time.time_ns(),
16 hex digits), padded to -d bytes, so -d is at least 24. With --rate,
latencies count from each job's scheduled send time, so a stalled server
shows up in them (no coordinated omission).

--json prints one object: {"config": {...}, "produced": n, "consumed": n,
"duration_s": x, "produce_rate": x, "consume_rate": x, "addjob_latency_ms":
{"p50", "p90", "p99", "p99_9", "max"}, "e2e_latency_ms": {same}, "errors": n,
"lost": n|null, "duplicates": n|null, ...}; latencies are null with no samples."""


class BenchError(Exception):
    """The run failed, or an option's value is out of range: one line on stderr, exit
    code 1."""


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["--help"]},  # -h is the host (redis-benchmark)
)

# The panels of --help (argparse's argument groups before typer).
WHERE, LOAD, JOBS, RUN = "Where", "Load", "Jobs", "Run"


class Address(NamedTuple):
    host: str
    port: int


class Ack(StrEnum):
    """--ack: acknowledge with ACKJOB (normal) or FASTACK (fast)."""

    normal = "normal"
    fast = "fast"


def address(text: str) -> Address:
    """HOST:PORT, the value of --node, --producer-node and --consumer-node."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise typer.BadParameter(f"expected HOST:PORT, got {text!r}")
    return Address(host, int(port))


def show_version(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} {__version__}")
        raise typer.Exit()


def opt(
    panel: str,
    *names: str,
    help: str,
    metavar: str | None = None,
    parser: Callable[[str], Any] | None = None,
) -> Any:
    """An option shown in the help's `panel`; its help says its default itself, as
    redis-benchmark's does."""
    return typer.Option(
        *names, help=help, metavar=metavar, parser=parser, rich_help_panel=panel, show_default=False
    )


@app.command(help=__doc__.split("\n\n")[0], epilog=EXAMPLES)
def benchmark(
    ctx: typer.Context,
    host: Annotated[
        str,
        opt(WHERE, "-h", "--host", metavar="HOST", help=f"seed node host (default {DEFAULT_HOST})"),
    ] = DEFAULT_HOST,
    port: Annotated[
        int,
        opt(WHERE, "-p", "--port", metavar="PORT", help=f"seed node port (default {DEFAULT_PORT})"),
    ] = DEFAULT_PORT,
    node: Annotated[
        list[Address] | None,
        opt(
            WHERE,
            "--node",
            metavar="HOST:PORT",
            parser=address,
            help="use this node (repeat for more) instead of discovering the cluster with HELLO",
        ),
    ] = None,
    producer_node: Annotated[
        list[Address] | None,
        opt(
            WHERE,
            "--producer-node",
            metavar="HOST:PORT",
            parser=address,
            help="put producers on these nodes only (repeatable)",
        ),
    ] = None,
    consumer_node: Annotated[
        list[Address] | None,
        opt(
            WHERE,
            "--consumer-node",
            metavar="HOST:PORT",
            parser=address,
            help="put consumers on these nodes only (repeatable)",
        ),
    ] = None,
    auth: Annotated[
        str | None, opt(WHERE, "-a", "--auth", metavar="PASSWORD", help="password (AUTH)")
    ] = None,
    clients: Annotated[
        int,
        opt(
            LOAD,
            "-c",
            "--clients",
            metavar="N",
            help=f"connections, half producers and half consumers (default {DEFAULT_CLIENTS})",
        ),
    ] = DEFAULT_CLIENTS,
    producers: Annotated[
        int | None,
        opt(LOAD, "--producers", metavar="N", help="producer connections (overrides -c)"),
    ] = None,
    consumers: Annotated[
        int | None,
        opt(
            LOAD,
            "--consumers",
            metavar="N",
            help="consumer connections (overrides -c; 0: only add jobs)",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        opt(
            LOAD,
            "-n",
            "--jobs",
            metavar="N",
            help=f"jobs to add (default {DEFAULT_JOBS:,}, or no limit with --duration)",
        ),
    ] = None,
    duration: Annotated[
        float | None,
        opt(LOAD, "--duration", metavar="SECS", help="stop adding jobs after SECS seconds"),
    ] = None,
    body_size: Annotated[
        int,
        opt(
            LOAD,
            "-d",
            "--body-size",
            metavar="BYTES",
            help=f"job body size, at least {MIN_BODY} (default {DEFAULT_BODY})",
        ),
    ] = DEFAULT_BODY,
    pipeline: Annotated[
        int,
        opt(
            LOAD,
            "-P",
            "--pipeline",
            metavar="N",
            help="ADDJOBs in flight per producer, and GETJOB COUNT (default 1)",
        ),
    ] = 1,
    count: Annotated[
        int | None, opt(LOAD, "--count", metavar="N", help="GETJOB COUNT (default: the -P value)")
    ] = None,
    rate: Annotated[
        float | None,
        opt(
            LOAD,
            "--rate",
            metavar="JOBS/S",
            help="pace the producers to this many jobs per second in all",
        ),
    ] = None,
    processes: Annotated[
        int,
        opt(
            LOAD,
            "--processes",
            metavar="N",
            help="spread the connections over N OS processes (default 1)",
        ),
    ] = 1,
    idle: Annotated[
        int,
        opt(LOAD, "--idle", metavar="N", help="also hold N idle connections open during the run"),
    ] = 0,
    queue: Annotated[
        str | None,
        opt(
            JOBS,
            "--queue",
            metavar="NAME",
            help="queue name (default: bench:<run tag>, new for every run)",
        ),
    ] = None,
    queues: Annotated[
        int,
        opt(
            JOBS,
            "--queues",
            metavar="N",
            help="spread the jobs over N queues NAME:0 ... NAME:N-1 (default 1)",
        ),
    ] = 1,
    replicate: Annotated[
        int | None, opt(JOBS, "--replicate", metavar="N", help="ADDJOB REPLICATE N")
    ] = None,
    asynchronous: Annotated[bool, opt(JOBS, "--async", help="ADDJOB ASYNC")] = False,
    retry: Annotated[
        int | None, opt(JOBS, "--retry", metavar="SECS", help="ADDJOB RETRY SECS")
    ] = None,
    ttl: Annotated[int | None, opt(JOBS, "--ttl", metavar="SECS", help="ADDJOB TTL SECS")] = None,
    addjob_timeout: Annotated[
        int,
        opt(
            JOBS,
            "--addjob-timeout",
            metavar="MS",
            help="ADDJOB ms-timeout for synchronous replication (default 5000)",
        ),
    ] = 5000,
    ack: Annotated[
        Ack,
        opt(JOBS, "--ack", help="acknowledge with ACKJOB (normal, default) or FASTACK (fast)"),
    ] = Ack.normal,
    drain_timeout: Annotated[
        float,
        opt(
            RUN,
            "--drain-timeout",
            metavar="SECS",
            help="after the producers finish, wait at most SECS for the consumers (default 30)",
        ),
    ] = 30.0,
    json: Annotated[bool, opt(RUN, "--json", help="print the result as JSON")] = False,
    quiet: Annotated[
        bool, opt(RUN, "-q", "--quiet", help="no progress display: the final summary only")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=show_version,
            is_eager=True,
            help="show program's version number and exit",
            rich_help_panel=RUN,
        ),
    ] = False,
) -> None:
    # Every option is in ctx.params, under its parameter's name.
    raise typer.Exit(start(ctx.params))


@dataclass
class Options:
    seed: tuple[str, int]
    nodes: list[tuple[str, int]] | None
    producer_nodes: list[tuple[str, int]] | None
    consumer_nodes: list[tuple[str, int]] | None
    password: str | None
    producers: int
    consumers: int
    jobs: int | None
    duration: float | None
    body_size: int
    pipeline: int
    count: int
    rate: float
    processes: int
    idle: int
    queue: str
    queues: int
    replicate: int | None
    asynchronous: bool
    retry: int | None
    ttl: int | None
    addjob_timeout: int
    ack: str
    drain_timeout: float
    json: bool
    quiet: bool
    tag: str = field(default_factory=lambda: secrets.token_hex(4))


def need(ok: bool, message: str) -> None:
    """A value out of range: BenchError (exit status 1) unless ok."""
    if not ok:
        raise BenchError(message)


def options(params: dict[str, Any]) -> Options:
    """The run the parsed command line (the command's ctx.params) asks for, its values
    checked: BenchError for one out of range."""
    a = SimpleNamespace(**params)
    need(0 < a.port < 65536, f"-p must be a port number (1-65535), got {a.port}")
    producers, consumers = connections(a)
    count = a.count if a.count is not None else a.pipeline
    check_load(a, count, producers + consumers)
    check_jobs(a)
    need(a.drain_timeout >= 0, f"--drain-timeout must be 0 or more, got {a.drain_timeout}")
    return assemble(a, producers, consumers, count)


def connections(a: SimpleNamespace) -> tuple[int, int]:
    """The producers and consumers: --producers and --consumers, else -c halved."""
    need(a.clients >= 1, f"-c must be at least 1, got {a.clients}")
    producers = a.producers if a.producers is not None else max(1, a.clients // 2)
    consumers = a.consumers if a.consumers is not None else max(1, a.clients - a.clients // 2)
    need(producers >= 1, f"--producers must be at least 1, got {producers}")
    need(consumers >= 0, f"--consumers must be 0 or more, got {consumers}")
    return producers, consumers


def check_load(a: SimpleNamespace, count: int, connections: int) -> None:
    need(a.jobs is None or a.jobs >= 1, f"-n must be at least 1, got {a.jobs}")
    need(a.duration is None or a.duration > 0, f"--duration must be > 0, got {a.duration}")
    need(
        a.body_size >= MIN_BODY,
        f"-d must be at least {MIN_BODY} (the body holds the run tag and send time), "
        f"got {a.body_size}",
    )
    need(a.pipeline >= 1, f"-P must be at least 1, got {a.pipeline}")
    need(count >= 1, f"--count must be at least 1, got {count}")
    need(a.rate is None or a.rate > 0, f"--rate must be > 0, got {a.rate}")
    need(a.processes >= 1, f"--processes must be at least 1, got {a.processes}")
    need(
        a.processes <= connections,
        f"--processes {a.processes} is more than the {connections} connections",
    )
    need(a.idle >= 0, f"--idle must be 0 or more, got {a.idle}")


def check_jobs(a: SimpleNamespace) -> None:
    need(a.queues >= 1, f"--queues must be at least 1, got {a.queues}")
    need(
        a.replicate is None or 1 <= a.replicate <= 65535,
        f"--replicate must be between 1 and 65535, got {a.replicate}",
    )
    need(a.retry is None or a.retry >= 0, f"--retry must be 0 or more, got {a.retry}")
    need(a.ttl is None or a.ttl > 0, f"--ttl must be > 0, got {a.ttl}")
    need(a.addjob_timeout >= 0, f"--addjob-timeout must be 0 or more, got {a.addjob_timeout}")
    need(
        a.queue is None or (a.queue != "" and " " not in a.queue),
        "--queue must be a non-empty name without spaces",
    )


def addresses(given: Sequence[Address] | None) -> list[tuple[str, int]] | None:
    """--node and its kin as Options holds them: None when not given."""
    return [(addr.host, addr.port) for addr in given] if given else None


def assemble(a: SimpleNamespace, producers: int, consumers: int, count: int) -> Options:
    opts = Options(
        seed=(a.host, a.port),
        nodes=addresses(a.node),
        producer_nodes=addresses(a.producer_node),
        consumer_nodes=addresses(a.consumer_node),
        password=a.auth,
        producers=producers,
        consumers=consumers,
        jobs=a.jobs if a.jobs is not None else (None if a.duration else DEFAULT_JOBS),
        duration=a.duration,
        body_size=a.body_size,
        pipeline=a.pipeline,
        count=count,
        rate=a.rate or 0.0,
        processes=a.processes,
        idle=a.idle,
        queue="",
        queues=a.queues,
        replicate=a.replicate,
        asynchronous=a.asynchronous,
        retry=a.retry,
        ttl=a.ttl,
        addjob_timeout=a.addjob_timeout,
        ack=Ack(a.ack).value,
        drain_timeout=a.drain_timeout,
        json=a.json,
        quiet=a.quiet,
    )
    opts.queue = a.queue or f"bench:{opts.tag}"
    return opts


# --------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------


def call(
    addr: tuple[str, int],
    *args: str | bytes | int,
    password: str | None = None,
    timeout: float = 5.0,
) -> Any:
    """One command on a fresh blocking connection (AUTH first if a password is given)."""
    import hiredis

    host, port = addr
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise BenchError(f"could not connect to {host}:{port}: {reason}") from None
    reader = hiredis.Reader()
    commands = [args] if password is None else [("AUTH", password), args]
    replies = []
    try:
        with sock:
            sock.sendall(b"".join(encode(*c) for c in commands))
            while len(replies) < len(commands):
                reply = reader.gets()
                if reply is not False:
                    replies.append(reply)
                    continue
                data = sock.recv(65536)
                if not data:
                    raise BenchError(f"{host}:{port} closed the connection")
                reader.feed(data)
    except OSError as exc:
        raise BenchError(f"{host}:{port}: {exc.strerror or exc}") from None
    for reply in replies:
        if isinstance(reply, Exception):
            raise BenchError(
                f"{host}:{port} replied to {commands[replies.index(reply)][0]}: {reply}"
            )
    return replies[-1]


def discover(opts: Options) -> list[tuple[str, int]]:
    """The nodes to use: --node as given, else the seed's HELLO (reachable nodes only)."""
    if opts.nodes:
        for addr in dict.fromkeys(opts.nodes):
            call(addr, "PING", password=opts.password)
        return list(dict.fromkeys(opts.nodes))
    seed = opts.seed
    reply = call(seed, "HELLO", password=opts.password)
    try:
        hello = parse_hello(reply)
    except HelloError:
        raise BenchError(
            f"{seed[0]}:{seed[1]} does not look like a Disque node (HELLO replied {reply!r:.80})"
        ) from None
    nodes: list[tuple[str, int]] = []
    for node in hello.nodes:
        if node.id == hello.myid:
            nodes.insert(0, seed)  # reach the seed as the user does
        elif node.host and node.priority < PRIORITY_FAILING:  # skip failing and leaving nodes
            nodes.append((node.host, node.port))
    if seed not in nodes:
        nodes.insert(0, seed)
    return nodes


# --------------------------------------------------------------------------------------
# Planning: who connects where, in which process
# --------------------------------------------------------------------------------------


def addjob_options(opts: Options) -> list[bytes]:
    out = [str(opts.addjob_timeout).encode()]
    if opts.replicate is not None:
        out += [b"REPLICATE", str(opts.replicate).encode()]
    if opts.retry is not None:
        out += [b"RETRY", str(opts.retry).encode()]
    if opts.ttl is not None:
        out += [b"TTL", str(opts.ttl).encode()]
    if opts.asynchronous:
        out.append(b"ASYNC")
    return out


def plan(opts: Options, nodes: list[tuple[str, int]]) -> list[WorkerSpec]:
    pnodes = opts.producer_nodes or nodes
    cnodes = opts.consumer_nodes or nodes
    n = opts.processes
    if opts.queues == 1:
        queues = [opts.queue.encode()]
    else:
        queues = [f"{opts.queue}:{i}".encode() for i in range(opts.queues)]
    track = opts.jobs is not None and opts.consumers > 0
    per_producer = [0] * opts.producers
    if opts.jobs is not None:
        base, extra = divmod(opts.jobs, opts.producers)
        per_producer = [base + (1 if i < extra else 0) for i in range(opts.producers)]
    specs = []
    for w in range(n):
        producers = [(i, *pnodes[i % len(pnodes)]) for i in range(w, opts.producers, n)]
        consumers = [(i, *cnodes[i % len(cnodes)]) for i in range(w, opts.consumers, n)]
        idle = [nodes[i % len(nodes)] for i in range(w, opts.idle, n)]
        jobs = sum(per_producer[i] for i, _, _ in producers) if opts.jobs is not None else None
        specs.append(
            WorkerSpec(
                index=w,
                producers=producers,
                consumers=consumers,
                idle=idle,
                total_producers=opts.producers,
                total_consumers=opts.consumers,
                jobs=jobs,
                rate=opts.rate / opts.producers if opts.rate else 0.0,
                tag=opts.tag.encode(),
                queues=queues,
                body_size=opts.body_size,
                pipeline=opts.pipeline,
                count=opts.count,
                addjob_options=addjob_options(opts),
                ack=opts.ack,
                getjob_timeout_ms=GETJOB_TIMEOUT_MS,
                track_ids=track,
                password=opts.password,
            )
        )
    return specs


# --------------------------------------------------------------------------------------
# Coordinator
# --------------------------------------------------------------------------------------


@dataclass
class WorkerState:
    spec: WorkerSpec
    ready: bool = False
    producers_done: bool = False
    consumers_alive: int = 0
    last_produce_ns: int = 0
    last_consume_ns: int = 0
    final: Final | None = None
    gone: bool = False


class Coordinator:
    def __init__(
        self, opts: Options, nodes: list[tuple[str, int]], specs: list[WorkerSpec], display: Display
    ) -> None:
        self.opts = opts
        self.nodes = nodes
        self.specs = specs
        self.display = display
        self.workers = [WorkerState(s, consumers_alive=len(s.consumers)) for s in specs]
        self.produced = self.consumed = self.foreign = self.errors = 0
        self.error_kinds: dict[str, int] = {}
        self.addjob = Histogram()
        self.e2e = Histogram()
        self.win_addjob = Histogram()
        self.win_e2e = Histogram()
        self.fatal: str | None = None
        self.interrupted = False
        self.drain_timed_out = False
        self.changed: asyncio.Event | None = None
        self.controls: list[Any] = []  # per worker: a function taking a control message
        self.t0 = 0
        self.stop_ns = 0
        self.window: deque[tuple[float, int, int, Histogram, Histogram]] = deque()

    # ---- messages from the workers ---------------------------------------------------

    def on_message(self, index: int, message: tuple[Any, ...]) -> None:
        state = self.workers[index]
        kind = message[0]
        if kind == "ready":
            state.ready = True
        elif kind == "progress":
            self.add_progress(state, message[1])
        elif kind == "final":
            self.add_progress(state, message[1])
            state.final = message[2]
        elif kind == "error":
            if self.fatal is None:
                self.fatal = message[1]
        if self.changed is not None:
            self.changed.set()

    def add_progress(self, state: WorkerState, p: Progress) -> None:
        self.produced += p.produced
        self.consumed += p.consumed
        self.foreign += p.foreign
        self.errors += p.errors
        for message, count in p.error_kinds.items():
            if message in self.error_kinds or len(self.error_kinds) < 10:
                self.error_kinds[message] = self.error_kinds.get(message, 0) + count
        self.addjob.merge_state(p.addjob_hist)
        self.e2e.merge_state(p.e2e_hist)
        self.win_addjob.merge_state(p.addjob_hist)
        self.win_e2e.merge_state(p.e2e_hist)
        state.producers_done = p.producers_done
        state.consumers_alive = p.consumers_alive
        state.last_produce_ns = max(state.last_produce_ns, p.last_produce_ns)
        state.last_consume_ns = max(state.last_consume_ns, p.last_consume_ns)

    def send_all(self, message: tuple[Any, ...]) -> None:
        for state, control in zip(self.workers, self.controls, strict=True):
            if not state.gone and state.final is None:
                with contextlib.suppress(OSError, BrokenPipeError, ValueError):
                    control(message)

    # ---- the run -----------------------------------------------------------------------

    async def wait_until(self, predicate: Any, timeout: float) -> bool:
        assert self.changed is not None
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 0.5))
        return True

    async def run(self, start_workers: Any) -> None:
        loop = asyncio.get_running_loop()
        self.changed = asyncio.Event()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self.interrupt)
            loop.add_signal_handler(signal.SIGTERM, self.interrupt)
        tasks = start_workers(self)
        try:
            await self.main_loop()
        finally:
            self.stop_ns = time.perf_counter_ns()
            self.send_all(("stop",))
            await self.wait_until(
                lambda: all(w.final is not None or w.gone for w in self.workers), FINAL_TIMEOUT
            )
            if self.t0 and self.window:
                self.tick("done")
            self.display.stop()
            for task in tasks:
                task.cancel()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
                loop.remove_signal_handler(signal.SIGTERM)

    def interrupt(self) -> None:
        self.interrupted = True
        if self.changed is not None:
            self.changed.set()

    async def main_loop(self) -> None:
        ok = await self.wait_until(
            lambda: (
                self.fatal is not None
                or self.interrupted
                or all(w.ready for w in self.workers)
                or any(w.gone for w in self.workers)
            ),
            READY_TIMEOUT,
        )
        if self.fatal is not None or self.interrupted:
            return
        if not ok or not all(w.ready for w in self.workers):
            self.fatal = "worker processes did not get ready in time"
            return
        self.display.start()
        self.t0 = time.perf_counter_ns()
        self.send_all(("start",))
        opts = self.opts
        producers_stopped = False
        producers_done_at: float | None = None
        next_tick = time.monotonic() + self.display.interval
        self.window = deque(maxlen=self.display.window_ticks + 1)
        self.window.append((time.monotonic(), 0, 0, Histogram(), Histogram()))
        assert self.changed is not None
        while True:
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.05)
            now = time.monotonic()
            elapsed = (time.perf_counter_ns() - self.t0) / 1e9
            if self.fatal is not None or self.interrupted:
                return
            if any(w.gone and w.final is None for w in self.workers):
                self.fatal = "a worker process died"
                return
            if opts.duration and not producers_stopped and elapsed >= opts.duration:
                producers_stopped = True
                self.send_all(("stop_producers",))
            producing = not all(w.producers_done for w in self.workers)
            if not producing and producers_done_at is None:
                producers_done_at = now
            if now >= next_tick:
                next_tick = now + self.display.interval
                self.tick("producing" if producing else "draining")
            if producing:
                continue
            if opts.consumers == 0:
                return
            if self.consumed >= self.produced:
                return
            if sum(w.consumers_alive for w in self.workers) == 0:
                self.fatal = "every consumer connection was lost"
                return
            assert producers_done_at is not None
            if now - producers_done_at > opts.drain_timeout:
                self.drain_timed_out = True
                return

    def tick(self, phase: str) -> None:
        """One display update: rates and latencies over the last few ticks."""
        if self.display.mode == "off":
            return
        window = self.window
        window.append(
            (time.monotonic(), self.produced, self.consumed, self.win_addjob, self.win_e2e)
        )
        self.win_addjob, self.win_e2e = Histogram(), Histogram()
        elapsed = (time.perf_counter_ns() - self.t0) / 1e9
        first, last = window[0], window[-1]
        span = max(last[0] - first[0], 1e-6)
        items = list(window)[1:]
        snap = Snapshot(
            elapsed=elapsed,
            produced=self.produced,
            consumed=self.consumed,
            errors=self.errors,
            produce_rate=(last[1] - first[1]) / span,
            consume_rate=(last[2] - first[2]) / span,
            addjob=Histogram.merged(i[3] for i in items),
            e2e=Histogram.merged(i[4] for i in items),
            phase=phase,
            target=self.opts.jobs,
            duration=self.opts.duration,
            consumers=self.opts.consumers,
        )
        self.display.update(snap)

    # ---- the result ----------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        opts = self.opts
        t0 = self.t0
        last_p = max((w.last_produce_ns for w in self.workers), default=0)
        last_c = max((w.last_consume_ns for w in self.workers), default=0)
        produce_s = max(last_p - t0, 0) / 1e9 if t0 and last_p else 0.0
        consume_s = max(last_c - t0, 0) / 1e9 if t0 and last_c else 0.0
        lost: int | None = None
        duplicates: int | None = None
        finals = [w.final for w in self.workers]
        cpu = sum(f.cpu_s for f in finals if f is not None)
        elapsed = (self.stop_ns - t0) / 1e9 if t0 and self.stop_ns else 0.0
        if opts.jobs is not None and opts.consumers and all(f is not None for f in finals):
            produced_ids: set[bytes] = set()
            consumed_ids: set[bytes] = set()
            deliveries = 0
            for f in finals:
                assert f is not None
                n = f.id_len
                produced_ids.update(
                    f.produced_ids[i : i + n] for i in range(0, len(f.produced_ids), n)
                )
                for i in range(0, len(f.consumed_ids), n):
                    consumed_ids.add(f.consumed_ids[i : i + n])
                    deliveries += 1
            lost = len(produced_ids - consumed_ids)
            duplicates = deliveries - len(consumed_ids)
        return {
            "tool": f"{PROG} {__version__}",
            "config": {
                "nodes": [f"{h}:{p}" for h, p in self.nodes],
                "producer_nodes": [f"{h}:{p}" for h, p in (opts.producer_nodes or self.nodes)],
                "consumer_nodes": [f"{h}:{p}" for h, p in (opts.consumer_nodes or self.nodes)],
                "producers": opts.producers,
                "consumers": opts.consumers,
                "jobs": opts.jobs,
                "duration": opts.duration,
                "body_size": opts.body_size,
                "pipeline": opts.pipeline,
                "count": opts.count,
                "rate": opts.rate or None,
                "processes": opts.processes,
                "idle": opts.idle,
                "queue": opts.queue,
                "queues": opts.queues,
                "replicate": opts.replicate,
                "async": opts.asynchronous,
                "retry": opts.retry,
                "ttl": opts.ttl,
                "addjob_timeout_ms": opts.addjob_timeout,
                "ack": opts.ack,
                "drain_timeout": opts.drain_timeout,
                "tag": opts.tag,
            },
            "produced": self.produced,
            "consumed": self.consumed,
            "duration_s": round(max(produce_s, consume_s), 6),
            "produce_duration_s": round(produce_s, 6),
            "consume_duration_s": round(consume_s, 6),
            "produce_rate": round(self.produced / produce_s, 3) if produce_s else 0.0,
            "consume_rate": round(self.consumed / consume_s, 3) if consume_s else 0.0,
            "addjob_latency_ms": self.addjob.summary_ms(),
            "e2e_latency_ms": self.e2e.summary_ms(),
            "errors": self.errors,
            "lost": lost,
            "duplicates": duplicates,
            "foreign": self.foreign,
            "error_messages": dict(self.error_kinds),
            "drain_timed_out": self.drain_timed_out,
            "interrupted": self.interrupted,
            # CPU the client used, 100 = one core busy: near 100 x processes, the
            # client (not the server) may be the limit.
            "client_cpu_percent": round(100 * cpu / elapsed, 1) if elapsed else 0.0,
        }


# --------------------------------------------------------------------------------------
# Running the workers: in this process, or one child process each
# --------------------------------------------------------------------------------------


def run_in_process(
    opts: Options, nodes: list[tuple[str, int]], specs: list[WorkerSpec], display: Display
) -> Coordinator:
    coordinator = Coordinator(opts, nodes, specs, display)
    holder: list[Any] = []

    def start(c: Coordinator) -> list[asyncio.Task[None]]:
        def control(message: tuple[Any, ...]) -> None:
            if holder:
                holder[0].control(message)

        c.controls = [control]
        task = asyncio.ensure_future(
            run_worker(specs[0], lambda m: c.on_message(0, m), holder.append)
        )

        def finished(t: asyncio.Task[None]) -> None:
            if not t.cancelled() and t.exception() is not None and c.fatal is None:
                c.fatal = f"worker failed: {t.exception()!r}"
            c.workers[0].gone = True  # it sends nothing more
            if c.changed is not None:
                c.changed.set()

        task.add_done_callback(finished)
        return [task]

    run_loop(coordinator.run(start))
    return coordinator


def run_in_processes(
    opts: Options, nodes: list[tuple[str, int]], specs: list[WorkerSpec], display: Display
) -> Coordinator:
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    ctx = multiprocessing.get_context(method)
    procs = []
    conns = []
    try:
        # Start the children before this process has an event loop (fork-safe).
        for spec in specs:
            parent, child = ctx.Pipe(duplex=True)
            proc = ctx.Process(
                target=process_main, args=(child, spec), daemon=True, name=f"{PROG}-{spec.index}"
            )
            proc.start()
            child.close()
            procs.append(proc)
            conns.append(parent)
        coordinator = Coordinator(opts, nodes, specs, display)

        def start(c: Coordinator) -> list[asyncio.Task[None]]:
            loop = asyncio.get_running_loop()

            def make_control(conn: Any) -> Any:
                return conn.send

            c.controls = [make_control(conn) for conn in conns]

            def readable(index: int, conn: Any) -> None:
                try:
                    # uvloop's add_reader makes the pipe non-blocking: a large message
                    # (the final ID lists) must be read whole, so block on it.
                    os.set_blocking(conn.fileno(), True)
                    while conn.poll():
                        c.on_message(index, conn.recv())
                except (EOFError, OSError):
                    loop.remove_reader(conn.fileno())
                    c.workers[index].gone = True
                    if c.changed is not None:
                        c.changed.set()

            for i, conn in enumerate(conns):
                loop.add_reader(conn.fileno(), readable, i, conn)
                os.set_blocking(conn.fileno(), True)
            return []

        run_loop(coordinator.run(start))
        return coordinator
    finally:
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.close()
        for proc in procs:
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------


def fail(message: str, code: int = 1) -> int:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
    return code


def header(opts: Options, nodes: list[tuple[str, int]]) -> str:
    what = f"{opts.jobs:,} jobs" if opts.jobs is not None else "no job limit"
    if opts.duration:
        what += f", {opts.duration:g}s"
    return (
        f"{PROG}: {what}, {opts.producers} producers / {opts.consumers} consumers on "
        f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}, {opts.processes} "
        f"process{'es' if opts.processes != 1 else ''}, queue {opts.queue}"
    )


def main(argv: list[str] | None = None) -> int:
    """The command (argv: its arguments, else sys.argv's): its exit status. A command
    line that does not parse is one line on stderr and exit status 2."""
    return run_app(app, argv, PROG)


def start(params: dict[str, Any]) -> int:
    """The command, its options parsed: check them, run: the exit status."""
    try:
        opts = options(params)
    except BenchError as exc:
        return fail(str(exc))
    try:
        return run(opts)
    except KeyboardInterrupt:
        return fail("interrupted", 130)


def run(opts: Options) -> int:
    try:
        nodes = discover(opts)
        if opts.producer_nodes or opts.consumer_nodes:
            for addr in dict.fromkeys((opts.producer_nodes or []) + (opts.consumer_nodes or [])):
                if addr not in nodes:
                    call(addr, "PING", password=opts.password)
    except BenchError as exc:
        return fail(str(exc))
    specs = plan(opts, nodes)
    if opts.quiet:
        mode = "off"
    elif sys.stderr.isatty() and os.environ.get("TERM") != "dumb":
        mode = "live"
    else:
        mode = "plain"
    display = Display(mode, header(opts, nodes))
    try:
        if opts.processes == 1:
            coordinator = run_in_process(opts, nodes, specs, display)
        else:
            coordinator = run_in_processes(opts, nodes, specs, display)
    except KeyboardInterrupt:
        display.stop()
        return fail("interrupted", 130)
    if coordinator.fatal is not None and coordinator.t0 == 0:
        return fail(coordinator.fatal)  # nothing ran: no summary
    result = coordinator.result()
    try:
        if opts.json:
            json_summary(result, sys.stdout)
        else:
            text_summary(result, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 1
    if coordinator.fatal is not None:
        return fail(coordinator.fatal)
    if coordinator.interrupted:
        return fail("interrupted: partial results", 130)
    if result["lost"]:
        return fail(
            f"{result['lost']:,} of {result['produced']:,} jobs were not consumed"
            + (
                f" within the drain timeout ({opts.drain_timeout:g}s)"
                if coordinator.drain_timed_out
                else ""
            )
        )
    if coordinator.drain_timed_out:
        return fail(
            f"{result['produced'] - result['consumed']:,} jobs not consumed within the "
            f"drain timeout ({opts.drain_timeout:g}s)"
        )
    if result["errors"]:
        first = next(iter(result["error_messages"]), "see above")
        return fail(f"{result['errors']:,} errors (first: {first})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
