#!/usr/bin/env python3
"""Single-node throughput and memory benchmark of disque_server.

Starts a fresh Disque node (``python -m disque_server``) and a ``redis-server``
on free loopback ports, drives them with ``redis-benchmark`` (50 clients,
unpipelined and ``-P 16``) and with a small asyncio + hiredis driver for the
ADDJOB -> GETJOB -> ACKJOB cycle, and measures the resident memory per queued
job. Every rate is compared with redis-server's PING rate (the ceiling: what
redis-benchmark itself can push through this machine's loopback).

    python bench/single_node.py [--quick] [--markdown]

Installs nothing: needs ``redis-server`` and ``redis-benchmark`` (Debian
packages redis-server and redis-tools) and the ``hiredis`` Python package.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import io
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # (testkit/processes.py: how the tests start servers too)

from testkit.polling import Poll  # noqa: E402
from testkit.processes import (  # noqa: E402
    HOST,
    ServerProcess,
    StartError,
    free_port,
    node_argv,
    node_env,
)

CLIENTS = 50
PIPELINE = 16
FILL_PIPELINE = 64
MEM_BODY = "0123456789abcdef"  # 16 bytes
RUN_TIMEOUT = 600.0

# Targets from the issue.
TARGET_ADDJOB_RATIO = 0.75
TARGET_ADDJOB_PIPELINED_RATIO = 0.12
TARGET_BYTES_PER_JOB = 650.0


@dataclass(frozen=True)
class Counts:
    """How many requests each scenario sends."""

    name: str
    disque: int  # unpipelined ADDJOB / GETJOB requests
    disque_pipelined: int  # -P 16 ADDJOB / GETJOB requests
    ping: int  # unpipelined PING requests (redis-server)
    ping_pipelined: int  # -P 16 PING requests (redis-server)
    cycles: int  # ADDJOB -> GETJOB -> ACKJOB cycles
    mem_jobs: int  # jobs queued for the memory measurement


QUICK = Counts(
    "quick",
    disque=20_000,
    disque_pipelined=20_000,
    ping=50_000,
    ping_pipelined=200_000,
    cycles=5_000,
    mem_jobs=100_000,
)
FULL = Counts(
    "full",
    disque=200_000,
    disque_pipelined=480_000,
    ping=500_000,
    ping_pipelined=3_200_000,
    cycles=80_000,
    mem_jobs=1_000_000,
)


@dataclass
class Result:
    scenario: str
    rate: float
    unit: str  # "req/s", "cycles/s" or "B/job"
    ceiling: float | None = None  # the rate this one is compared with
    target: str = "—"
    ok: bool | None = None  # target met?
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        if self.ceiling is None or self.ceiling <= 0:
            return None
        return self.rate / self.ceiling


class BenchError(Exception):
    """A benchmark step failed: message for the user, exit code 1."""


# --------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------


class Server(ServerProcess):
    """A server process a benchmark started (testkit/processes.py, the tests' way): its
    output in <log>.out, in a session of its own, stopped when the script dies."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        port: int,
        log: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        output = log.with_suffix(".out")
        super().__init__(name, argv, port, log, env, cwd, output=output, detached=True)

    def start(self, wait: bool = True) -> None:
        try:
            super().start(wait)
        except StartError as exc:
            raise BenchError(str(exc)) from None

    def stop(self) -> None:
        self.terminate()


def pure_tree(tmp: Path) -> Path:
    """The node's Python sources alone, copied under tmp: started from there, the
    node runs as plain Python even when this checkout has compiled it in place
    (its extension modules sit beside the sources and are imported first)."""
    dest = tmp / "pure-src"
    if not dest.exists():
        for src in (REPO_ROOT / "disque_server").rglob("*.py"):
            target = dest / src.relative_to(REPO_ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def start_node(tmp: Path, name: str, extra: Sequence[str] = (), source: Path = REPO_ROOT) -> Server:
    """A disque_server process from this checkout (or the source tree given), in
    tmp/name, on a free port pair, with no AOF unless ``extra`` says otherwise. A
    port taken meanwhile by another process is retried (twice) on another."""
    node_dir = tmp / name
    node_dir.mkdir(exist_ok=True)
    log = node_dir / "disque.log"
    directives = [*(["--appendonly", "no"] if "--appendonly" not in extra else []), *extra]
    for attempt in range(3):
        port = free_port()
        argv = node_argv(port, node_dir, log, directives=directives)
        # In its own directory: python -m puts it first on the path (node_env).
        server = Server(f"disque node ({name})", argv, port, log, node_env(source), node_dir)
        try:
            server.start()
            return server
        except BenchError:
            server.stop()
            if attempt == 2 or "address already in use" not in server.log_tail():
                raise
    raise AssertionError("unreachable")


def start_redis(tmp: Path) -> Server:
    port = free_port(bus=False)
    redis_dir = tmp / "redis"
    redis_dir.mkdir()
    log = redis_dir / "redis.log"
    argv = [
        "redis-server",
        "--port",
        str(port),
        "--bind",
        HOST,
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(redis_dir),
        "--logfile",
        str(log),
        "--daemonize",
        "no",
    ]
    server = Server("redis-server", argv, port, log)
    server.start()
    return server


# --------------------------------------------------------------------------
# A minimal blocking RESP client, for set-up and checks
# --------------------------------------------------------------------------


def encode(*args: str | bytes | int) -> bytes:
    import hiredis  # (late, as everywhere here: missing_prerequisites reports its absence)

    return hiredis.pack_command(args)


def command(port: int, *args: str | bytes | int, timeout: float = 30.0) -> Any:
    """Send one command, return the decoded reply (hiredis.ReplyError if an error)."""
    import hiredis

    reader = hiredis.Reader(encoding="utf-8", errors="replace")
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(encode(*args))
        while True:
            reply = reader.gets()
            if reply is not False:
                return reply
            data = s.recv(65536)
            if not data:
                raise OSError("connection closed")
            reader.feed(data)


# --------------------------------------------------------------------------
# redis-benchmark
# --------------------------------------------------------------------------

RPS_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?) requests per second")


def parse_rps(stdout: str) -> float:
    """The requests per second of a redis-benchmark -q [--csv] run.

    --csv gives a header line then '"COMMAND","rps",...' (older versions: no
    header, two fields). Without --csv, -q prints carriage-return progress lines
    before the final 'COMMAND: N requests per second'; take the last match.
    """
    rate: float | None = None
    for row in csv.reader(io.StringIO(stdout.replace("\r", "\n"))):
        if len(row) >= 2 and row[0] != "test":
            with contextlib.suppress(ValueError):
                rate = float(row[1])
    if rate is not None:
        return rate
    matches = RPS_RE.findall(stdout)
    if not matches:
        raise BenchError(f"could not find the rate in redis-benchmark's output:\n{stdout!r}")
    return float(matches[-1])


def redis_benchmark(
    port: int, requests: int, pipeline: int, cmd: Sequence[str], clients: int = CLIENTS
) -> float:
    argv = [
        "redis-benchmark",
        "-h",
        HOST,
        "-p",
        str(port),
        "-c",
        str(clients),
        "-n",
        str(requests),
        "-P",
        str(pipeline),
        "-q",
        "--csv",
        *cmd,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    if proc.returncode != 0:
        raise BenchError(
            f"{' '.join(argv)} exited with {proc.returncode}:\n"
            f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    errors = [
        line
        for line in proc.stderr.replace("\r", "\n").splitlines()
        if line.strip() and "Could not fetch server CONFIG" not in line
    ]
    if errors:
        raise BenchError(f"{' '.join(argv)} reported errors:\n" + "\n".join(errors[:10]))
    return parse_rps(proc.stdout)


# --------------------------------------------------------------------------
# ADDJOB -> GETJOB -> ACKJOB cycle driver (asyncio protocols + hiredis)
# --------------------------------------------------------------------------


class CycleProtocol(asyncio.Protocol):
    """One connection doing ADDJOB, GETJOB NOHANG, ACKJOB of the returned id, in a loop.

    A state machine driven straight from data_received (no coroutine per
    request), so the driver costs as little CPU as Python allows.
    """

    def __init__(self, driver: CycleDriver, commands: tuple[bytes, bytes]) -> None:
        import hiredis

        self.driver = driver
        self.addjob, self.getjob = commands
        self.reader = hiredis.Reader()
        self.transport: asyncio.Transport | None = None
        self.step = 0  # 0: ADDJOB sent, 1: GETJOB sent, 2: ACKJOB sent

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def begin(self) -> None:
        if self.driver.claim():
            self.step = 0
            assert self.transport is not None
            self.transport.write(self.addjob)
        else:
            self.driver.finished_one()

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            reply = self.reader.gets()
            if reply is False:
                return
            self.on_reply(reply)

    def on_reply(self, reply: Any) -> None:
        assert self.transport is not None
        if isinstance(reply, Exception):
            self.driver.fail(f"step {self.step}: {reply}")
            return
        if self.step == 0:
            self.step = 1
            self.transport.write(self.getjob)
        elif self.step == 1:
            if not reply:  # cannot happen: each connection adds before it gets
                self.driver.empty_gets += 1
                self.begin()
                return
            job_id = reply[0][1]
            self.step = 2
            self.transport.write(b"*2\r\n$6\r\nACKJOB\r\n$%d\r\n%s\r\n" % (len(job_id), job_id))
        else:
            if reply != 1:
                self.driver.fail(f"ACKJOB replied {reply!r}")
                return
            self.driver.completed += 1
            self.begin()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.driver.done.done():
            self.driver.fail(f"connection lost: {exc}")


class PingCycleProtocol(CycleProtocol):
    """The same driver doing three PINGs per cycle: its own ceiling against redis-server."""

    def on_reply(self, reply: Any) -> None:
        assert self.transport is not None
        if isinstance(reply, Exception):
            self.driver.fail(str(reply))
        elif self.step < 2:
            self.step += 1
            self.transport.write(self.addjob)
        else:
            self.driver.completed += 1
            self.begin()


class CycleDriver:
    def __init__(self, cycles: int, connections: int) -> None:
        self.cycles = cycles
        self.connections = connections
        self.claimed = 0
        self.completed = 0
        self.empty_gets = 0
        self.idle = 0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def claim(self) -> bool:
        if self.claimed >= self.cycles:
            return False
        self.claimed += 1
        return True

    def finished_one(self) -> None:
        self.idle += 1
        if self.idle == self.connections and not self.done.done():
            self.done.set_result(None)

    def fail(self, message: str) -> None:
        if not self.done.done():
            self.done.set_exception(BenchError(f"cycle driver: {message}"))


async def _run_cycles(
    port: int, cycles: int, connections: int, queue: str, ping: bool
) -> tuple[float, float, int]:
    loop = asyncio.get_running_loop()
    driver = CycleDriver(cycles, connections)
    if ping:
        cmds = (encode("PING"), encode("PING"))
        factory: type[CycleProtocol] = PingCycleProtocol
    else:
        cmds = (encode("ADDJOB", queue, "body", 0), encode("GETJOB", "NOHANG", "FROM", queue))
        factory = CycleProtocol
    protocols: list[CycleProtocol] = []
    try:
        for _ in range(connections):
            _, proto = await loop.create_connection(lambda: factory(driver, cmds), HOST, port)
            protocols.append(proto)
        cpu0, t0 = time.process_time(), time.perf_counter()
        for proto in protocols:
            proto.begin()
        try:
            await asyncio.wait_for(asyncio.shield(driver.done), RUN_TIMEOUT)
        except TimeoutError:
            raise BenchError(
                f"cycle driver: {driver.completed} of {cycles} cycles done after {RUN_TIMEOUT:.0f}s"
            ) from None
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
    finally:
        if not driver.done.done():
            driver.done.cancel()
        for proto in protocols:
            if proto.transport is not None:
                proto.transport.close()
    if driver.completed != cycles:
        raise BenchError(f"cycle driver: {driver.completed} of {cycles} cycles completed")
    return cycles / elapsed, cpu / elapsed, driver.empty_gets


def run_cycles(
    port: int, cycles: int, connections: int = CLIENTS, queue: str = "cq", ping: bool = False
) -> tuple[float, float, int]:
    """Cycles per second, the driver's CPU use (1.0 = one core busy), empty GETJOBs."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_run_cycles(port, cycles, connections, queue, ping))
    return uvloop.run(_run_cycles(port, cycles, connections, queue, ping))


# --------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------


def flush(node: Server) -> None:
    reply = command(node.port, "DEBUG", "FLUSHALL")
    if reply != "OK":
        raise BenchError(f"DEBUG FLUSHALL replied {reply!r}")


def qlen(node: Server, queue: str) -> int:
    return int(command(node.port, "QLEN", queue))


def issued(requests: int, pipeline: int) -> int:
    """How many commands redis-benchmark -n REQUESTS -P PIPELINE really sends.

    It hands out whole pipelines, so the count is rounded up to a multiple of
    the pipeline length.
    """
    return -(-requests // pipeline) * pipeline


def fill(node: Server, queue: str, jobs: int, body: str = "body") -> None:
    """Queue exactly JOBS jobs in QUEUE, fast (pipelined redis-benchmark)."""
    pipeline = next(p for p in range(FILL_PIPELINE, 0, -1) if jobs % p == 0)
    redis_benchmark(node.port, jobs, pipeline, ["ADDJOB", queue, body, "0"])
    n = qlen(node, queue)
    if n != jobs:
        raise BenchError(f"QLEN {queue} is {n} after adding {jobs} jobs")


def wait_until(check: Callable[[], Any], timeout: float, message: str, every: float = 0.1) -> float:
    """Poll check() until it holds (testkit/polling.py: an error is "not yet"); the
    seconds it took. BenchError after timeout seconds."""
    start = time.monotonic()
    poll = Poll(check, timeout, message)
    try:
        while poll.value() is None:
            time.sleep(every)
    except AssertionError as exc:
        raise BenchError(str(exc)) from None
    return time.monotonic() - start


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fmt_rate(rate: float, unit: str) -> str:
    return f"{rate:,.0f} {unit}"


def report(result: Result) -> None:
    line = f"  {result.scenario:<42} {fmt_rate(result.rate, result.unit):>18}"
    if result.ratio is not None:
        line += f"   {result.ratio:6.3f} of ceiling"
    if result.ok is not None:
        line += f"   target {result.target}: {'met' if result.ok else 'MISSED'}"
    for note in result.notes:
        line += f"   ({note})"
    print(line, flush=True)


def bench_throughput(tmp: Path, counts: Counts, results: list[Result]) -> None:
    redis = start_redis(tmp)
    node: Server | None = None
    try:
        say(f"redis-server pid {redis.pid} on port {redis.port}")
        node = start_node(tmp, "throughput")
        say(f"disque node pid {node.pid} on port {node.port}")

        say("PING ceiling (redis-server) ...")
        ping1 = redis_benchmark(redis.port, counts.ping, 1, ["PING"])
        ping16 = redis_benchmark(redis.port, counts.ping_pipelined, PIPELINE, ["PING"])
        for name, rate, ceiling in (
            ("PING, redis-server (ceiling)", ping1, ping1),
            (f"PING -P {PIPELINE}, redis-server (ceiling)", ping16, ping16),
        ):
            results.append(Result(name, rate, "req/s", ceiling))
            report(results[-1])

        say("PING (disque node) ...")
        for pipeline, n, ceiling in (
            (1, counts.disque, ping1),
            (PIPELINE, counts.disque_pipelined, ping16),
        ):
            rate = redis_benchmark(node.port, n, pipeline, ["PING"])
            suffix = f" -P {pipeline}" if pipeline > 1 else ""
            results.append(Result(f"PING{suffix}, disque node", rate, "req/s", ceiling))
            report(results[-1])

        say("ADDJOB q body 0 ...")
        for pipeline, n, ceiling in (
            (1, counts.disque, ping1),
            (PIPELINE, counts.disque_pipelined, ping16),
        ):
            flush(node)
            rate = redis_benchmark(node.port, n, pipeline, ["ADDJOB", "q", "body", "0"])
            got, sent = qlen(node, "q"), issued(n, pipeline)
            suffix = f" -P {pipeline}" if pipeline > 1 else ""
            target = TARGET_ADDJOB_RATIO if pipeline == 1 else TARGET_ADDJOB_PIPELINED_RATIO
            result = Result(f"ADDJOB{suffix}", rate, "req/s", ceiling, f">= {target:.2f}")
            result.ok = result.ratio is not None and result.ratio >= target
            if got != sent:
                result.notes.append(f"QLEN q = {got}, expected {sent}")
            results.append(result)
            report(result)

        say("GETJOB NOHANG FROM q (queue pre-filled) ...")
        for pipeline, n, ceiling in (
            (1, counts.disque, ping1),
            (PIPELINE, counts.disque_pipelined, ping16),
        ):
            flush(node)
            sent = issued(n, pipeline)
            fill(node, "q", sent)  # one job for every GETJOB
            rate = redis_benchmark(node.port, n, pipeline, ["GETJOB", "NOHANG", "FROM", "q"])
            left = qlen(node, "q")
            suffix = f" -P {pipeline}" if pipeline > 1 else ""
            result = Result(f"GETJOB NOHANG{suffix}", rate, "req/s", ceiling)
            if left != 0:
                result.notes.append(f"{left} of {sent} jobs left: some GETJOBs returned no job")
            results.append(result)
            report(result)

        say("ADDJOB -> GETJOB -> ACKJOB cycle (asyncio + hiredis driver) ...")
        flush(node)
        ping_cycles, ping_cpu, _ = run_cycles(redis.port, counts.cycles, ping=True)
        ceiling_result = Result(
            "3×PING cycle, redis-server (driver ceiling)",
            ping_cycles,
            "cycles/s",
            ping_cycles,
            notes=[f"driver CPU {ping_cpu:.0%}"],
        )
        results.append(ceiling_result)
        report(ceiling_result)
        cycles, cpu, empty = run_cycles(node.port, counts.cycles)
        result = Result(
            "ADDJOB → GETJOB → ACKJOB cycle",
            cycles,
            "cycles/s",
            ping_cycles,
            notes=[
                f"driver CPU {cpu:.0%}",
                f"{3 * cycles:,.0f} req/s: {3 * cycles / ping1:.3f} of "
                f"the redis-benchmark PING ceiling",
            ],
        )
        if empty:
            result.notes.append(f"{empty} empty GETJOBs")
        left = qlen(node, "cq")
        if left:
            result.notes.append(f"{left} jobs left in cq")
        results.append(result)
        report(result)
    finally:
        if node is not None:
            node.stop()
        redis.stop()


def bench_aof(tmp: Path, counts: Counts, results: list[Result]) -> None:
    """ADDJOB with the append-only file on, beside the in-memory figure."""
    in_memory = next((r.rate for r in results if r.scenario == "ADDJOB"), None)
    for policy in ("everysec", "always"):
        node = start_node(tmp, f"aof-{policy}", ["--appendonly", "yes", "--appendfsync", policy])
        try:
            say(f"ADDJOB q body 0 with appendfsync {policy} ...")
            for pipeline, n in ((1, counts.disque), (PIPELINE, counts.disque_pipelined)):
                flush(node)
                rate = redis_benchmark(node.port, n, pipeline, ["ADDJOB", "q", "body", "0"])
                suffix = f" -P {pipeline}" if pipeline > 1 else ""
                result = Result(
                    f"ADDJOB{suffix}, appendfsync {policy}",
                    rate,
                    "req/s",
                    in_memory if pipeline == 1 else None,
                )
                if pipeline == 1:
                    result.notes.append("ratio: to in-memory unpipelined ADDJOB")
                results.append(result)
                report(result)
        finally:
            node.stop()


def bench_memory(tmp: Path, counts: Counts, results: list[Result]) -> None:
    node = start_node(tmp, "memory", ["--maxmemory", "0"])
    try:
        say(
            f"memory: disque node pid {node.pid} on port {node.port}, "
            f"adding {counts.mem_jobs:,} jobs with a {len(MEM_BODY)}-byte body ..."
        )
        time.sleep(0.5)
        before = node.rss()
        fill(node, "memq", counts.mem_jobs, MEM_BODY)
        time.sleep(0.5)
        after = node.rss()
        per_job = (after - before) / counts.mem_jobs
        result = Result(
            f"RSS per queued job ({len(MEM_BODY)}-byte body)",
            per_job,
            "B/job",
            target=f"<= {TARGET_BYTES_PER_JOB:.0f} B",
        )
        result.ok = per_job <= TARGET_BYTES_PER_JOB
        result.notes.append(
            f"RSS {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB for {counts.mem_jobs:,} jobs"
        )
        results.append(result)
        report(result)
    finally:
        node.stop()


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------


def markdown(results: list[Result], counts: Counts, header: str) -> str:
    lines = ["| scenario | rate | ratio to ceiling | target |", "| --- | ---: | ---: | --- |"]
    for r in results:
        ratio = f"{r.ratio:.3f}" if r.ratio is not None else "—"
        target = r.target
        if r.ok is not None:
            target += " ✅" if r.ok else " ❌"
        lines.append(f"| {r.scenario} | {fmt_rate(r.rate, r.unit)} | {ratio} | {target} |")
    lines.append("")
    lines.append(
        f"{header}; {CLIENTS} clients; counts: {counts.name} "
        f"({counts.disque:,} unpipelined / {counts.disque_pipelined:,} pipelined "
        f"requests, {counts.cycles:,} cycles, {counts.mem_jobs:,} jobs for memory)."
    )
    return "\n".join(lines)


def environment() -> str:
    try:
        version = subprocess.run(
            ["redis-server", "--version"], capture_output=True, text=True, timeout=10
        ).stdout.split()
        redis = next((w[2:] for w in version if w.startswith("v=")), "?")
    except (OSError, subprocess.SubprocessError):
        redis = "?"
    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs (load {load}), "
        f"Python {platform.python_version()} ({loop}), redis {redis}"
    )


def missing_prerequisites() -> list[str]:
    missing = []
    for tool, package in (("redis-server", "redis-server"), ("redis-benchmark", "redis-tools")):
        if shutil.which(tool) is None:
            missing.append(
                f"{tool} not found: install the Debian package {package} "
                f"(apt-get install {package})"
            )
    try:
        import hiredis  # noqa: F401
    except ImportError:
        missing.append("the Python package hiredis is missing (pip install hiredis)")
    return missing


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Make SIGTERM/SIGHUP unwind like Ctrl-C, so the finally blocks stop the servers."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="small counts: a smoke run of ~20-30 seconds"
    )
    parser.add_argument(
        "--markdown", action="store_true", help="also print a Markdown table of the results"
    )
    parser.add_argument(
        "--no-aof", action="store_true", help="skip the ADDJOB runs with the append-only file on"
    )
    args = parser.parse_args(argv)

    missing = missing_prerequisites()
    if missing:
        for line in missing:
            print(f"single_node.py: {line}", file=sys.stderr)
        return 2

    counts = QUICK if args.quick else FULL
    header = environment()
    print(f"disque_server single-node benchmark ({counts.name}): {header}", flush=True)
    results: list[Result] = []
    started = time.monotonic()
    try:
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="disque-bench-") as d:
            tmp = Path(d)
            bench_throughput(tmp, counts, results)
            if not args.no_aof:
                bench_aof(tmp, counts, results)
            bench_memory(tmp, counts, results)
    except KeyboardInterrupt:
        print("interrupted: servers stopped", file=sys.stderr)
        return 130
    except (BenchError, subprocess.SubprocessError, OSError) as exc:
        print(f"single_node.py: {exc}", file=sys.stderr)
        return 1
    print(f"done in {time.monotonic() - started:.0f}s", flush=True)
    if args.markdown:
        print()
        print(markdown(results, counts, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
