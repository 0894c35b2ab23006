#!/usr/bin/env python3
"""Scale: 1,000,000 queued jobs and 10,000 blocked GETJOB clients on one node.

    python bench/scale.py [--jobs N] [--blocked N] [--duration S] [--out PATH]

What it reports is how long the node's event loop was ever busy without
coming back to its timers (INFO latency ``event_loop_max_stall_ms``: how late
the cron ran) and how slow a PING got, measured from outside every 5 ms,
in each phase:

1. filling: N jobs queued with pipelined ADDJOBs (1,000 a batch);
2. blocking: M connections opened, each blocked in GETJOB on its own queue;
3. idle: the node holding both, with nothing to do but its cron (timers of
   N jobs, M blocked clients) for a few seconds;
4. load: the usual ADDJOB -> GETJOB -> ACKJOB cycle (disque-benchmark, 25 +
   25 clients) next to them;
5. release: ADDJOB to every blocked client's queue, each served once.

It also lists the slowest commands the node logged (SLOWLOG). The node runs
with --maxmemory 0 and --maxclients above M. Needs `ulimit -n` above M + 100
for this script. A Markdown table goes to stdout (and --out); progress to
stderr. About a minute on 2 cores with the defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import multiprocessing.connection
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import FULL, Row, environment, run_row, running  # noqa: E402
from run_all import fill  # noqa: E402
from single_node import (  # noqa: E402
    HOST,
    BenchError,
    Server,
    command,
    say,
    sigterm_as_interrupt,
    wait_until,
)

PROBE_EVERY_S = 0.005


class PingProbe:
    """PING the node every 5 ms from a process of its own (not to share this
    script's GIL); keep the slowest round trip of each phase."""

    def __init__(self, port: int) -> None:
        self.conn, child = multiprocessing.Pipe()
        self.proc = multiprocessing.Process(target=probe_loop, args=(port, child), daemon=True)
        self.proc.start()

    def take(self) -> float:
        """The worst round trip since the last call, in ms."""
        self.conn.send("take")
        return float(self.conn.recv())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.join(5)


def probe_loop(port: int, conn: multiprocessing.connection.Connection) -> None:
    sock = socket.create_connection((HOST, port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    worst = 0.0
    while True:
        started = time.perf_counter()
        sock.sendall(b"PING\r\n")
        if sock.recv(64) != b"+PONG\r\n":
            raise BenchError("PING probe: unexpected reply")
        worst = max(worst, (time.perf_counter() - started) * 1000)
        if conn.poll(PROBE_EVERY_S):
            conn.recv()
            conn.send(worst)
            worst = 0.0


def open_blocked(port: int, count: int) -> list[socket.socket]:
    """`count` connections, each blocked in GETJOB on its own queue."""
    socks = []
    for i in range(count):
        s = socket.create_connection((HOST, port), timeout=60)
        name = b"wait-%d" % i
        s.sendall(b"*3\r\n$6\r\nGETJOB\r\n$4\r\nFROM\r\n$%d\r\n%s\r\n" % (len(name), name))
        socks.append(s)
    return socks


def release_blocked(port: int, socks: list[socket.socket]) -> None:
    """One job for each blocked client's queue; wait for every client to get it."""
    batch = []
    for i in range(len(socks)):
        name = b"wait-%d" % i
        batch.append(
            b"*4\r\n$6\r\nADDJOB\r\n$%d\r\n%s\r\n$1\r\nx\r\n$1\r\n0\r\n" % (len(name), name)
        )
    with socket.create_connection((HOST, port), timeout=60) as s:
        s.sendall(b"".join(batch))
        expected = len(batch)
        got = b""
        while got.count(b"\r\n") < expected:
            data = s.recv(1 << 16)
            if not data:
                raise BenchError("the node closed the connection")
            got += data
    for s in socks:
        s.settimeout(60)
        if not s.recv(4096).startswith(b"*1\r\n"):
            raise BenchError("a blocked client did not get its job")


def info_field(port: int, section: str, field: str) -> int:
    for line in str(command(port, "INFO", section)).splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    raise BenchError(f"INFO {section} has no {field}")


def phase(
    rows: list[Row],
    name: str,
    node: Server,
    probe: PingProbe,
    started: float,
    notes: list[str] | None = None,
) -> None:
    stall = info_field(node.port, "latency", "event_loop_max_stall_ms")
    command(node.port, "LATENCY", "RESET")
    row = Row(name, value=f"{stall} ms")
    row.notes.append(f"worst PING {probe.take():.1f} ms; took {time.monotonic() - started:.1f} s")
    row.notes.extend(notes or [])
    rows.append(row)
    say(f"    {name}: max stall {stall} ms; {'; '.join(row.notes)}")


def slowlog_lines(port: int) -> list[str]:
    entries = command(port, "SLOWLOG", "GET", "5") or []
    lines = []
    for entry in entries:
        args = " ".join(str(a) for a in entry[3][:4])
        lines.append(f"- {int(entry[2]) / 1000:.1f} ms: `{args}`")
    return lines


def table(rows: list[Row]) -> str:
    lines = ["| phase | event loop max stall | notes |", "| --- | ---: | --- |"]
    for row in rows:
        lines.append(f"| {row.scenario} | {row.value} | {'; '.join(row.notes)} |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> str:
    rows: list[Row] = []
    with (
        tempfile.TemporaryDirectory(prefix="disque-scale-") as tmp,
        running(
            Path(tmp), "scale", extra=["--maxmemory", "0", "--maxclients", str(args.blocked + 1000)]
        ) as nodes,
    ):
        node = nodes[0]
        command(node.port, "CONFIG", "SET", "slowlog-log-slower-than", "10000")
        probe = PingProbe(node.port)
        try:
            say(f"  filling {args.jobs:,} jobs ...")
            started = time.monotonic()
            fill(node.port, b"bulk", args.jobs, b"0123456789abcdef")
            phase(rows, f"queue {args.jobs:,} jobs (pipelined ADDJOB)", node, probe, started)

            say(f"  blocking {args.blocked:,} clients ...")
            started = time.monotonic()
            socks = open_blocked(node.port, args.blocked)
            wait_blocked(node.port, args.blocked)
            phase(rows, f"block {args.blocked:,} GETJOB clients", node, probe, started)

            started = time.monotonic()
            time.sleep(args.idle)
            phase(rows, "idle, holding both", node, probe, started)

            say("  cycle load next to them ...")
            started = time.monotonic()
            scale = dataclasses.replace(FULL, duration=float(args.duration))
            load = run_row([], "cycle", node, [], scale)
            r = load.result or {}
            phase(
                rows,
                "ADDJOB → GETJOB → ACKJOB load",
                node,
                probe,
                started,
                [
                    f"{r.get('consume_rate', 0):,.0f} cycles/s, end-to-end p99 "
                    f"{r.get('e2e_latency_ms', {}).get('p99', 0):.2f} ms"
                ],
            )

            say("  releasing the blocked clients ...")
            started = time.monotonic()
            release_blocked(node.port, socks)
            phase(rows, f"serve the {args.blocked:,} blocked clients", node, probe, started)
            for s in socks:
                s.close()
            slow = slowlog_lines(node.port)
            qlen = int(command(node.port, "QLEN", "bulk"))
        finally:
            probe.stop()
    if qlen != args.jobs:
        raise BenchError(f"QLEN bulk is {qlen:,}, expected {args.jobs:,}")
    return "\n".join(
        [
            environment(),
            "",
            table(rows),
            "",
            "Slowest commands (SLOWLOG, over 10 ms):",
            *(slow or ["- none"]),
        ]
    )


def wait_blocked(port: int, count: int, timeout: float = 120.0) -> None:
    wait_until(
        lambda: info_field(port, "clients", "blocked_clients") >= count,
        timeout,
        f"fewer than {count:,} clients got blocked",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--blocked", type=int, default=10_000)
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of the idle phase")
    parser.add_argument("--duration", type=int, default=10, help="seconds of load")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sigterm_as_interrupt()
    try:
        text = run(args)
    except (BenchError, OSError) as exc:
        print(f"bench/scale.py: {exc}", file=sys.stderr)
        return 1
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
