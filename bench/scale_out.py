#!/usr/bin/env python3
"""Scale-out: what a cluster of N nodes costs each node, this node against C Disque.

    python bench/scale_out.py --ref-bin PATH [--sizes 10,25,50] [--idle 20]
                              [--node-timeout 3000] [--requests N] [--runs 1]
                              [--out PATH] [--json PATH]

For each N, one cluster at a time on loopback (C Disque's first, then this
checkout's, both with ``cluster-node-timeout`` given by --node-timeout):

1. **mesh**: every node but the first is told ``CLUSTER MEET`` the first; the
   seconds until every node knows all N and links to the other N - 1;
2. **idle**: CPU of every node process (run time from /proc/PID/task/*/schedstat) over
   --idle seconds with nothing to do: the whole cluster in cores, and per
   node in ms of CPU a second; the bus messages each node sent a second
   (CLUSTER INFO's ``cluster_stats_messages_sent``);
3. **ADDJOB REPLICATE 3**: redis-benchmark, 50 clients, on the first node;
4. **failure**: the last node killed with SIGKILL; the seconds until every
   other node flags it ``fail`` in CLUSTER NODES.

Idle CPU is the median of four windows (a burst in one is not idle). With
--runs R every cluster is measured R times, the kinds alternating (C first on
even runs, ours first on odd ones), and each figure is the median of its runs
(the idle figure moves by a third between runs on 2 shared cores).
Beyond what one machine holds, bench/membership_sim.py runs the node's
failure detector at 1,000 and 5,000 members on a simulated network.

Needs redis-benchmark and `ulimit -n` above 4N (each node holds 2(N - 1) bus
links). A Markdown table goes to stdout (and --out), progress to stderr.
About 4 minutes a run on 2 cores with the defaults. Always stops its nodes, also on
an error, Ctrl-C or SIGTERM. Exit code 0 when the run completed, 1 when a
step failed, 2 when a prerequisite is missing, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import cluster_info, environment, meshed  # noqa: E402
from single_node import (  # noqa: E402
    HOST,
    BenchError,
    Server,
    command,
    redis_benchmark,
    say,
    sigterm_as_interrupt,
    start_node,
    wait_until,
)
from vs_disque import start_reference  # noqa: E402

MESH_TIMEOUT_S = 120.0
FAIL_TIMEOUT_S = 120.0
IDLE_WINDOWS = 4
POLL_THREADS = 32  # the nodes asked at once whether they flag a killed one fail

Start = Callable[[Path, str, Sequence[str]], Server]


@dataclass
class Point:
    kind: str  # "C" or "ours"
    nodes: int
    mesh_s: float
    idle_cores: float
    messages_per_s: float  # sent by one node, the cluster's mean
    addjob_rate: float
    fail_s: float

    @property
    def per_node_ms(self) -> float:
        return self.idle_cores * 1000 / self.nodes


def median_point(runs: Sequence[Point]) -> Point:
    """One point of each figure's median over the runs of one kind and size."""
    return Point(
        runs[0].kind,
        runs[0].nodes,
        *(
            statistics.median(getattr(p, name) for p in runs)
            for name in ("mesh_s", "idle_cores", "messages_per_s", "addjob_rate", "fail_s")
        ),
    )


def run_seconds(pid: int) -> float:
    """CPU seconds of a process, all its threads, to the nanosecond (/proc/PID/task/
    */schedstat): an idle node uses a few ms a second, and /proc/PID/stat counts in
    10 ms clock ticks, given to whichever process the tick finds running."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # (a thread that just ended)
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def messages_sent(node: Server) -> int:
    return int(cluster_info(node.port).get("cluster_stats_messages_sent", "0"))


def flags_fail(node: Server, victim_port: int) -> bool:
    for line in str(command(node.port, "CLUSTER", "NODES")).splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[1].rsplit(":", 1)[-1].split("@")[0] == str(victim_port):
            return "fail" in fields[2].split(",")
    return False


def seconds_until_all_flag_fail(kind: str, nodes: Sequence[Server], victim_port: int) -> float:
    """Seconds from now (the kill) until the last node flags the victim ``fail``. The
    nodes that do not flag it yet are asked again and again, all at once (a thread
    each, up to POLL_THREADS): one after another, a round over 99 nodes took about
    0.3 s and blurred the figure at 100 by that much. A node's time is the answer
    that showed its flag."""
    t0 = time.monotonic()
    pending = list(nodes)
    last = 0.0

    def seen_at(node: Server) -> float:
        try:
            return time.monotonic() - t0 if flags_fail(node, victim_port) else 0.0
        except OSError:
            return 0.0

    with concurrent.futures.ThreadPoolExecutor(POLL_THREADS) as pool:
        while pending:
            if time.monotonic() - t0 > FAIL_TIMEOUT_S:
                raise BenchError(
                    f"{kind} {len(nodes) + 1} nodes flag the killed one fail: "
                    f"not within {FAIL_TIMEOUT_S:.0f}s ({len(pending)} do not)"
                )
            seen = list(pool.map(seen_at, pending))
            last = max([last, *seen])
            pending = [node for node, at in zip(pending, seen, strict=True) if not at]
            if pending:
                time.sleep(0.05)
    return last


def measure(kind: str, start: Start, tmp: Path, n: int, args: argparse.Namespace) -> Point:
    extra = ["--cluster-node-timeout", str(args.node_timeout)]
    nodes: list[Server] = []
    try:
        for i in range(n):
            nodes.append(start(tmp, f"{kind}-{n}-{i}", extra))
        say(f"{kind}, {n} nodes: started; meeting")
        t0 = time.monotonic()
        for node in nodes[1:]:
            if command(node.port, "CLUSTER", "MEET", HOST, nodes[0].port) != "OK":
                raise BenchError("CLUSTER MEET refused")
        wait_until(
            lambda: meshed(nodes),
            MESH_TIMEOUT_S,
            f"{kind} {n}-node mesh: not within {MESH_TIMEOUT_S:.0f}s",
        )
        mesh_s = time.monotonic() - t0
        time.sleep(min(5.0, args.idle / 4))  # handshakes and their bursts settle
        say(f"{kind}, {n} nodes: mesh in {mesh_s:.1f}s; idle for {args.idle:.0f}s")
        sent0 = sum(messages_sent(node) for node in nodes)
        windows: list[float] = []  # cluster CPU (cores) in each quarter of the idle time
        t0 = time.monotonic()
        for _ in range(IDLE_WINDOWS):
            cpu0, w0 = sum(run_seconds(node.pid) for node in nodes), time.monotonic()
            time.sleep(args.idle / IDLE_WINDOWS)
            cpu1, w1 = sum(run_seconds(node.pid) for node in nodes), time.monotonic()
            windows.append((cpu1 - cpu0) / (w1 - w0))
        elapsed = time.monotonic() - t0
        sent1 = sum(messages_sent(node) for node in nodes)
        idle_cores = statistics.median(windows)  # (a burst in one window is not idle)
        messages = (sent1 - sent0) / elapsed / n
        rate = redis_benchmark(
            nodes[0].port,
            args.requests,
            1,
            ["ADDJOB", "q", "x" * 16, "0", "REPLICATE", "3"],
        )
        victim = nodes.pop()
        assert victim.proc is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.proc.wait()
        fail_s = seconds_until_all_flag_fail(kind, nodes, victim.port)
        point = Point(kind, n, mesh_s, idle_cores, messages, rate, fail_s)
        say(
            f"{kind}, {n} nodes: idle {point.per_node_ms:.1f} ms/s a node, "
            f"{messages:.0f} msg/s a node, ADDJOB R3 {rate:,.0f}/s, fail in {fail_s:.1f}s"
        )
        return point
    finally:
        for node in nodes:
            node.stop()


def table(points: Sequence[Point]) -> str:
    lines = [
        "| N | kind | full mesh after MEET, s | idle CPU, whole cluster (cores) "
        "| per node, ms of CPU per s | bus messages sent per node per s "
        "| ADDJOB REPLICATE 3 /s | failure detected, s |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in points:
        lines.append(
            f"| {p.nodes} | {p.kind} | {p.mesh_s:.1f} | {p.idle_cores:.2f} "
            f"| {p.per_node_ms:.1f} | {p.messages_per_s:.0f} | {p.addjob_rate:,.0f} "
            f"| {p.fail_s:.1f} |"
        )
    sizes = sorted({p.nodes for p in points})
    if {p.kind for p in points} != {"C", "ours"}:
        return "\n".join(lines)
    lines += ["", "| N | ours / C: idle per node | ADDJOB REPLICATE 3 | failure detection time |"]
    lines.append("| ---: | ---: | ---: | ---: |")
    for n in sizes:
        by = {p.kind: p for p in points if p.nodes == n}
        if {"C", "ours"} <= set(by):
            c, o = by["C"], by["ours"]
            lines.append(
                f"| {n} | {ratio(o.per_node_ms, c.per_node_ms)} "
                f"| {ratio(o.addjob_rate, c.addjob_rate)} | {ratio(o.fail_s, c.fail_s)} |"
            )
    return "\n".join(lines)


def ratio(ours: float, c: float) -> str:
    """ours / c, or a dash when C's figure reads 0 (idle CPU comes in 10 ms ticks: a
    short --idle can see none)."""
    return f"{ours / c:.2f}" if c else "—"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref-bin", type=Path, help="C Disque's disque-server")
    parser.add_argument("--sizes", default="10,25,50", help="cluster sizes (default 10,25,50)")
    parser.add_argument("--idle", type=float, default=20.0, help="idle seconds measured")
    parser.add_argument("--node-timeout", type=int, default=3000, help="ms (default 3000)")
    parser.add_argument("--requests", type=int, default=50_000, help="ADDJOBs a run")
    parser.add_argument("--runs", type=int, default=1, help="runs of each cluster (medians)")
    parser.add_argument("--out", type=Path, help="also write the table here")
    parser.add_argument(
        "--json", type=Path, help="also write every run's figures here (bench/sim_vs_real.py)"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    sizes = [int(s) for s in args.sizes.split(",")]
    if shutil.which("redis-benchmark") is None:
        say("redis-benchmark not found (apt install redis-tools)")
        return 2
    kinds: list[tuple[str, Start]] = []
    if args.ref_bin is not None:
        if not os.access(args.ref_bin, os.X_OK):
            say(f"--ref-bin {args.ref_bin}: no executable there")
            return 2
        ref_bin = args.ref_bin

        def start_c(tmp: Path, name: str, extra: Sequence[str]) -> Server:
            return start_reference(ref_bin, tmp, name, extra)

        kinds.append(("C", start_c))
    kinds.append(("ours", start_node))
    runs: dict[tuple[int, str], list[Point]] = {}
    c_failed: dict[int, str] = {}  # sizes C Disque did not form a cluster of
    try:
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="scale-out-") as d:
            for i in range(args.runs):
                run_dir = Path(d) / f"run{i}"  # (fresh nodes.conf files each run)
                run_dir.mkdir()
                for n in sizes:
                    for kind, start in kinds if i % 2 == 0 else kinds[::-1]:
                        if kind == "C" and n in c_failed:
                            continue
                        try:
                            point = measure(kind, start, run_dir, n, args)
                        except BenchError as exc:
                            if kind != "C":
                                raise
                            say(f"C, {n} nodes: {exc}: left out")
                            c_failed[n] = str(exc)
                            continue
                        runs.setdefault((n, kind), []).append(point)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except BenchError as exc:
        say(f"failed: {exc}")
        return 1
    points = [median_point(runs[n, kind]) for n in sizes for kind, _ in kinds if (n, kind) in runs]
    out = "\n".join(
        [
            table(points),
            "",
            *(f"C Disque, {n} nodes: {why}." for n, why in sorted(c_failed.items())),
            "",
            f"Machine: {environment()}. Command: python bench/scale_out.py "
            + (f"--ref-bin {args.ref_bin} " if args.ref_bin else "")
            + f"--sizes {args.sizes} --idle {args.idle:.0f} "
            f"--node-timeout {args.node_timeout} --runs {args.runs}",
        ]
    )
    print(out)
    if args.out is not None:
        args.out.write_text(out + "\n")
    if args.json is not None:
        every = [dataclasses.asdict(p) for key in sorted(runs) for p in runs[key]]
        args.json.write_text(
            json.dumps({"node_timeout": args.node_timeout, "runs": every}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
