#!/usr/bin/env python3
"""Cluster benchmark of disque_server with disque-benchmark.

Starts a single node and a 3-node cluster (``python -m disque_server``, free
loopback ports below 32768 whose bus port, port + 10000, is free too, in a
temporary directory), and runs ``disque-benchmark --json`` against them:

* single node, ADDJOB only (the baseline of the ratio below)
* 3 nodes, REPLICATE 3 synchronous: ADDJOB -> GETJOB -> ACKJOB, and ADDJOB only
* 3 nodes, REPLICATE 3 ASYNC: ADDJOB -> GETJOB -> ACKJOB
* 3 nodes, federation: producers on one node, consumers on another

and reports the 3-node REPLICATE 3 synchronous ADDJOB rate as a ratio of the
single-node ADDJOB rate. bench/run_all.py runs these and the single-node
scenarios; this file also holds the helpers it uses.

    python bench/cluster.py [--quick]

Installs nothing; needs the project's Python dependencies (hiredis, rich).
Always stops its nodes, also on an error, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from single_node import (  # noqa: E402
    HOST,
    BenchError,
    Server,
    command,
    say,
    sigterm_as_interrupt,
    start_node,
    wait_until,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
MESH_TIMEOUT = 30.0


# --------------------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------------------


def cluster_info(port: int) -> dict[str, str]:
    info = command(port, "CLUSTER", "INFO")
    return dict(line.split(":", 1) for line in str(info).splitlines() if ":" in line)


def form_cluster(nodes: list[Server]) -> None:
    """Every node meets the first one; wait until gossip has made a full mesh."""
    for node in nodes[1:]:
        reply = command(node.port, "CLUSTER", "MEET", HOST, nodes[0].port)
        if reply != "OK":
            raise BenchError(f"CLUSTER MEET replied {reply!r}")
    wait_until(
        lambda: meshed(nodes),
        MESH_TIMEOUT,
        f"the {len(nodes)} nodes did not form a full mesh within {MESH_TIMEOUT:.0f}s",
    )


def meshed(nodes: Sequence[Server]) -> bool:
    """Does every node know all the nodes and count the others reachable?"""
    n = len(nodes)
    for node in nodes:
        info = cluster_info(node.port)
        if info.get("cluster_known_nodes") != str(n) or info.get("cluster_reachable_nodes") != str(
            n - 1
        ):
            return False
    return True


@contextlib.contextmanager
def running(
    tmp: Path,
    name: str,
    count: int = 1,
    extra: Sequence[str] = (),
    start: Callable[[Path, str, Sequence[str]], Server] = start_node,
) -> Iterator[list[Server]]:
    """Start `count` nodes (a cluster when more than one), stop them all on the way out.
    `start` starts one node: this checkout's by default (bench/vs_disque.py passes
    one that starts the C Disque server)."""
    nodes: list[Server] = []
    try:
        for i in range(count):
            nodes.append(start(tmp, f"{name}{i}" if count > 1 else name, extra))
        if count > 1:
            form_cluster(nodes)
        say(
            f"{name}: {count} node{'s' if count > 1 else ''} on port"
            f"{'s' if count > 1 else ''} {', '.join(str(n.port) for n in nodes)}"
        )
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def flush(node: Server) -> None:
    reply = command(node.port, "DEBUG", "FLUSHALL")
    if reply != "OK":
        raise BenchError(f"DEBUG FLUSHALL replied {reply!r}")


def environment() -> str:
    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs (load {load} at the start), "
        f"Python {platform.python_version()} ({loop})"
    )


# --------------------------------------------------------------------------------------
# Running disque-benchmark
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """How long each run lasts: -n caps the jobs, --duration the time."""

    name: str
    jobs: int  # -n of each run (a cap: --duration ends it first)
    duration: float  # seconds of producing per run
    mem_jobs: int  # jobs queued for the memory measurement
    idle: int  # idle connections
    queues: int  # queues of the many-queues scenario


QUICK = Scale("quick", jobs=200_000, duration=2.0, mem_jobs=100_000, idle=1_000, queues=10_000)
FULL = Scale("full", jobs=2_000_000, duration=12.0, mem_jobs=1_000_000, idle=1_000, queues=10_000)


def benchmark(
    addr: Server | Sequence[Server],
    args: Sequence[str],
    timeout: float = 300.0,
) -> dict[str, Any]:
    """Run `disque-benchmark --json -q ARGS` (from this checkout); its JSON result, with
    "exit_code" added. Nodes: the seed (discovery) or, for a list, --node for each."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    if isinstance(addr, Server):
        where = ["-h", HOST, "-p", str(addr.port)]
    else:
        where = [a for n in addr for a in ("--node", f"{HOST}:{n.port}")]
    argv = [sys.executable, "-m", "disque_benchmark", *where, "--json", "-q", *args]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise BenchError(
            f"disque-benchmark {' '.join(args)} exited with {proc.returncode}: "
            f"{proc.stderr.strip()[-2000:]}"
        ) from None
    result["exit_code"] = proc.returncode
    result["stderr"] = proc.stderr.strip()
    return result


@dataclass
class Row:
    """One line of the results table."""

    scenario: str
    result: dict[str, Any] | None = None
    value: str = ""  # for rows that are no benchmark run (memory)
    notes: list[str] = field(default_factory=list)

    @property
    def produce_rate(self) -> float:
        return float(self.result["produce_rate"]) if self.result else 0.0

    @property
    def consume_rate(self) -> float:
        return float(self.result["consume_rate"]) if self.result else 0.0


def run_row(
    rows: list[Row],
    scenario: str,
    addr: Server | Sequence[Server],
    args: Sequence[str],
    scale: Scale,
    notes: Sequence[str] = (),
) -> Row:
    say(f"  {scenario} ...")
    full_args = ["-n", str(scale.jobs), "--duration", str(scale.duration), *args]
    result = benchmark(addr, full_args)
    row = Row(scenario, result, notes=list(notes))
    if result["errors"]:
        first = next(iter(result["error_messages"]), "")
        row.notes.append(f"{result['errors']:,} errors ({first})")
    if result["drain_timed_out"]:
        row.notes.append("drain timed out")
    if result["config"]["consumers"] and result["consume_rate"] < 0.9 * result["produce_rate"]:
        row.notes.append("consumers fell behind: end-to-end latency includes the backlog")
    rows.append(row)
    say("    " + describe(row))
    return row


def ms(lat: dict[str, Any], key: str) -> str:
    value = lat.get(key)
    return "—" if value is None else f"{value:.2f}"


def describe(row: Row) -> str:
    r = row.result
    if r is None:
        return row.value
    text = f"{r['produce_rate']:,.0f} added/s"
    if r["config"]["consumers"]:
        text += (
            f", {r['consume_rate']:,.0f} consumed/s, e2e p99 {ms(r['e2e_latency_ms'], 'p99')} ms"
        )
    text += f", ADDJOB p99 {ms(r['addjob_latency_ms'], 'p99')} ms"
    return text


def markdown(rows: list[Row], extra_lines: Sequence[str], header: str) -> str:
    lines = [
        "| scenario | added/s | consumed/s | ADDJOB p50 / p99 ms | "
        "end-to-end p50 / p99 / p99.9 ms | lost / dup | notes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        r = row.result
        if r is None:
            lines.append(f"| {row.scenario} | {row.value} | | | | | {'; '.join(row.notes)} |")
            continue
        consumers = r["config"]["consumers"]
        a, e = r["addjob_latency_ms"], r["e2e_latency_ms"]
        check = f"{r['lost']} / {r['duplicates']}" if r["lost"] is not None else "—"
        if r["drain_timed_out"] and r["lost"]:
            # Still queued when the benchmark stopped waiting: not consumed, not lost.
            check = f"{r['lost']:,} not drained / {r['duplicates']}"
        consumed = f"{r['consume_rate']:,.0f}" if consumers else "—"
        e2e = f"{ms(e, 'p50')} / {ms(e, 'p99')} / {ms(e, 'p99_9')}" if consumers else "—"
        lines.append(
            f"| {row.scenario} | {r['produce_rate']:,.0f} | {consumed} | "
            f"{ms(a, 'p50')} / {ms(a, 'p99')} | {e2e} | {check} | "
            f"{'; '.join(row.notes)} |"
        )
    lines.append("")
    lines.extend(extra_lines)
    lines.append("")
    lines.append(header)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------


def single_addjob(tmp: Path, scale: Scale, rows: list[Row], node: Server | None = None) -> Row:
    """ADDJOB only on one node: the baseline of the replication ratio."""
    if node is None:
        with running(tmp, "baseline") as nodes:
            return single_addjob(tmp, scale, rows, nodes[0])
    flush(node)
    row = run_row(rows, "1 node: ADDJOB only", node, ["--consumers", "0"], scale)
    flush(node)
    return row


def cluster_scenarios(tmp: Path, scale: Scale, rows: list[Row]) -> Row:
    """The 3-node scenarios; returns the REPLICATE 3 sync ADDJOB-only row."""
    with running(tmp, "cluster", 3) as nodes:
        run_row(rows, "3 nodes: REPLICATE 3 sync, cycle", nodes, ["--replicate", "3"], scale)
        sync_only = run_row(
            rows,
            "3 nodes: REPLICATE 3 sync, ADDJOB only",
            nodes,
            ["--replicate", "3", "--consumers", "0"],
            scale,
        )
        for node in nodes:
            flush(node)
        run_row(
            rows, "3 nodes: REPLICATE 3 ASYNC, cycle", nodes, ["--replicate", "3", "--async"], scale
        )
        run_row(
            rows,
            "3 nodes: federation, add on node 1, get on node 2 (REPLICATE 1)",
            nodes,
            [
                "--replicate",
                "1",
                "--producer-node",
                f"{HOST}:{nodes[0].port}",
                "--consumer-node",
                f"{HOST}:{nodes[1].port}",
                # Jobs move across nodes slower than they are added: give the
                # backlog time to drain, so that every job is checked.
                "--drain-timeout",
                "120",
            ],
            scale,
        )
    return sync_only


def ratio_line(sync_only: Row, single: Row) -> str:
    if not single.produce_rate:
        return "3-node REPLICATE 3 sync ADDJOB rate: no single-node baseline"
    ratio = sync_only.produce_rate / single.produce_rate
    return (
        f"3-node REPLICATE 3 sync ADDJOB rate / single-node ADDJOB rate: **{ratio:.3f}** "
        f"({sync_only.produce_rate:,.0f} / {single.produce_rate:,.0f} jobs/s)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs: a smoke test")
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else FULL
    header = f"{environment()}; scale {scale.name}"
    print(f"disque_server cluster benchmark: {header}", flush=True)
    rows: list[Row] = []
    try:
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="disque-bench-") as d:
            tmp = Path(d)
            single = single_addjob(tmp, scale, rows)
            sync_only = cluster_scenarios(tmp, scale, rows)
    except KeyboardInterrupt:
        print("interrupted: nodes stopped", file=sys.stderr)
        return 130
    except (BenchError, subprocess.SubprocessError, OSError) as exc:
        print(f"cluster.py: {exc}", file=sys.stderr)
        return 1
    print()
    print(markdown(rows, [ratio_line(sync_only, single)], header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
