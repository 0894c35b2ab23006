#!/usr/bin/env python3
"""Side by side with Disque 1.0-rc1: this node and the C server, alternating.

    python bench/vs_disque.py --ref-bin PATH [--runs 3] [--quick] [--requests N]

PATH is a C ``disque-server`` built from Disque 1.0-rc1's source (``make`` in
its folder builds ``src/disque-server``). The script starts, on free loopback
ports (below 32768, bus port + 10000 free too) and in a temporary directory,
one node of each kind, this checkout's ``python -m disque_server`` ("ours")
and the C server ("C"), then a 3-node cluster of each (CLUSTER MEET, then a
wait until every node's HELLO lists all three as reachable), and runs each
figure --runs times per server, alternating ours / C (ours first on even
runs, C first on odd ones):

* redis-benchmark, 50 clients, unpipelined and -P 16: PING (the floor: no
  job work), ``ADDJOB q body 0`` on an emptied node, ``GETJOB NOHANG FROM
  q`` with one job queued beforehand for every GETJOB, and ``ACKJOB`` of
  random unknown job IDs (see ACKJOB below);
* ``ADDJOB q body 5000 REPLICATE 3`` (synchronous), redis-benchmark with 50
  clients unpipelined on the first node of each 3-node cluster;
* the ADDJOB -> GETJOB -> ACKJOB cycle: ``disque-benchmark -n N`` (this
  project's client, the same options on both: 25 producers, 25 consumers,
  64-byte bodies, one process), its jobs per second from --json, then the
  same cycle paced at a fixed rate (``--rate``, 25,000 jobs/s: well under
  what either server and the client take) for its p99 end-to-end latency.
  The unpaced cycle's p99 is shown but not judged: that loop is closed, its
  producers run ahead of its consumers (one round trip per job against two),
  so its latency is the backlog that builds up, which a server faster at
  ADDJOB makes longer (and which moves a lot from run to run);
* resident memory per queued job (16-byte body), once per server, in a fresh
  node of each kind started with ``--maxmemory 16gb``.

Around every run it reads the servers' CPU time (user and system, all
threads, from /proc/PID/stat; the sum of the three nodes for the cluster
figure) and divides it by the requests of the run (by the jobs for the
cycle: three requests each). The CPU the client used in the same time
(redis-benchmark or disque-benchmark, from getrusage) is given below the
table: a client near one whole core is the limit of that figure, not the
server.

ACKJOB: redis-benchmark sends the same command every time, with only
``__rand_int__`` changed, so it cannot acknowledge the IDs the servers gave
to real jobs; the figure acknowledges random well-formed unknown IDs
(``-r 10^12``). On a single node Disque creates nothing for an unknown ID
(a dummy ack is only made when the cluster has more than one node) and
replies 0; the script checks that both servers reply 0 and register no job,
and reports what both do with an unknown ID in the 3-node cluster (a dummy
ack). Acknowledging real jobs is in the cycle figure.

Prints one Markdown table of medians on stdout (progress on stderr); the
worst event-loop stall target (1M jobs, 10k blocked clients) is left to
bench/scale.py. --quick sends about a tenth of the requests: a smoke test,
not a measurement. Installs nothing. Always stops its servers, also on an
error, Ctrl-C or SIGTERM. Exit code 0 when the run completed (targets met or
not), 1 when a step failed, 2 when a prerequisite is missing, 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import (  # noqa: E402
    benchmark,
    environment,
    running,
)
from run_all import fill as fill_fast  # noqa: E402
from single_node import (  # noqa: E402
    CLIENTS,
    HOST,
    PIPELINE,
    BenchError,
    Server,
    command,
    fill,
    free_port,
    issued,
    missing_prerequisites,
    pure_tree,
    redis_benchmark,
    say,
    sigterm_as_interrupt,
    start_node,
    wait_until,
)

from disque.protocol import PRIORITY_OK, flat_info, parse_hello  # noqa: E402

# ours: this checkout's node as installed (compiled by mypyc when built so); pure:
# the same sources run as plain Python (--no-pure leaves it out); C: Disque 1.0-rc1.
KINDS = ("ours", "pure", "C")
# A well-formed job ID (D-, 8 hex, -, 24 characters, -, 4 hex TTL) that no server
# gives: redis-benchmark puts 12 random digits in place of __rand_int__. Its TTL
# part is odd, so that a Disque node in a cluster makes a dummy ack for it.
UNKNOWN_ID = "D-0badc0de-000000000000__rand_int__-05a1"
RANDOM_IDS = ["-r", str(10**12)]  # redis-benchmark options, placed before the command
MEM_BODY = b"0123456789abcdef"  # 16 bytes, as bench/single_node.py and bench/run_all.py
TARGET_BYTES_PER_JOB = 650
PACED_RATE = 25_000  # jobs/s of the paced cycle, whose end-to-end p99 is the latency figure
# The memory figure's nodes: C Disque wants a limit above zero, so a high one for both
# (far from the 75% at which a node starts to refuse or move jobs).
MEM_LIMIT = "16gb"
HELLO_TIMEOUT = 30.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Scale:
    """How many requests (or jobs) one run of each figure sends."""

    name: str
    requests: int  # unpipelined redis-benchmark requests
    pipelined: int  # -P 16 redis-benchmark requests
    light: int  # -P 16 requests of PING and ACKJOB of unknown IDs (they keep no state)
    replicated: int  # ADDJOB REPLICATE 3 requests
    cycles: int  # jobs of a disque-benchmark cycle run
    mem_jobs: int  # jobs queued for the memory figure

    @classmethod
    def of(cls, name: str, requests: int, mem_jobs: int) -> Scale:
        # -P 16 runs are ~4x faster: more requests keep them long enough for
        # /proc's 10 ms CPU ticks; PING and ACKJOB -P 16 run at over 2M/s, where
        # 600,000 requests are a quarter of a second, much of it the 50 clients
        # connecting: 10x keeps them about a second. The replicated and cycle runs
        # are slower.
        half = max(1, requests // 2)
        return cls(name, requests, 3 * requests, 10 * requests, half, half, mem_jobs)


FULL = Scale.of("full", 200_000, 1_000_000)
QUICK = Scale.of("quick", 20_000, 100_000)


# --------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------


def start_reference(ref_bin: Path, tmp: Path, name: str, extra: Sequence[str] = ()) -> Server:
    """A C disque-server in tmp/name (its nodes.conf goes there), on a free port pair."""
    port = free_port()
    node_dir = tmp / name
    node_dir.mkdir(exist_ok=True)
    log = node_dir / "disque.log"
    argv = [
        str(ref_bin),
        "--port",
        str(port),
        "--bind",
        HOST,
        "--dir",
        str(node_dir),
        "--logfile",
        str(log),
        "--daemonize",
        "no",
        "--appendonly",
        "no",
        *extra,
    ]
    server = Server(f"C disque-server ({name})", argv, port, log)
    server.start()
    return server


def hello_mesh(nodes: Sequence[Server]) -> bool:
    """Does every node's HELLO list all the nodes, each with priority 1 (linked, not failing)?"""
    for node in nodes:
        listed = parse_hello(command(node.port, "HELLO")).nodes
        if len(listed) != len(nodes) or any(n.priority != PRIORITY_OK for n in listed):
            return False
    return True


def wait_for_hello_mesh(nodes: Sequence[Server]) -> None:
    wait_until(
        lambda: hello_mesh(nodes),
        HELLO_TIMEOUT,
        f"HELLO did not list all {len(nodes)} nodes as reachable within {HELLO_TIMEOUT:.0f}s",
    )


@contextlib.contextmanager
def both(
    tmp: Path,
    name: str,
    starters: dict[str, Callable[..., Server]],
    count: int = 1,
    extra: Sequence[str] = (),
) -> Iterator[dict[str, list[Server]]]:
    """`count` nodes of each kind (a meshed cluster when more than one)."""
    with contextlib.ExitStack() as stack:
        nodes = {
            kind: stack.enter_context(running(tmp, f"{name}-{kind}", count, extra, start))
            for kind, start in starters.items()
        }
        if count > 1:  # running() formed them by CLUSTER INFO; HELLO is what clients see
            for kind_nodes in nodes.values():
                wait_for_hello_mesh(kind_nodes)
        yield nodes


def info_field(node: Server, section: str, name: str) -> str:
    info = command(node.port, "INFO", section)
    value = flat_info(info).get(name)
    if value is None:
        raise BenchError(f"no {name} in INFO:\n{info}")
    return value


def registered_jobs(node: Server) -> int:
    return int(info_field(node, "jobs", "registered_jobs"))


def flush_all(nodes: Sequence[Server]) -> None:
    for node in nodes:
        reply = command(node.port, "DEBUG", "FLUSHALL")
        if reply != "OK":
            raise BenchError(f"DEBUG FLUSHALL on {node.name} replied {reply!r}")


def expect_qlen(node: Server, queue: str, expected: int) -> None:
    got = int(command(node.port, "QLEN", queue))
    if got != expected:
        raise BenchError(f"QLEN {queue} on {node.name} is {got:,}, expected {expected:,}")


# --------------------------------------------------------------------------
# Measuring one run
# --------------------------------------------------------------------------


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process, all its threads (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        after_name = f.read().rsplit(")", 1)[1].split()  # the name may hold spaces
    # Fields 14 and 15 (utime, stime); after the name the list starts at field 3.
    return int(after_name[11]) / CLK_TCK, int(after_name[12]) / CLK_TCK


@dataclass(frozen=True)
class Outcome:
    """What one run of a figure gives: its rate and how many requests it made."""

    value: float  # requests or jobs per second
    requests: int  # what the server CPU is divided by
    p99_ms: float | None = None  # the cycle's end-to-end p99


@dataclass(frozen=True)
class Sample:
    outcome: Outcome
    user_us: float  # server CPU per request
    sys_us: float
    client_cpu: float  # the client's CPU over the run's wall time (1.0 = one core)


def measure(nodes: Sequence[Server], run: Callable[[], Outcome]) -> Sample:
    before = [cpu_seconds(node.pid) for node in nodes]
    client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    outcome = run()
    elapsed = time.perf_counter() - started
    client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = [cpu_seconds(node.pid) for node in nodes]
    user = sum(a[0] - b[0] for a, b in zip(after, before, strict=True))
    system = sum(a[1] - b[1] for a, b in zip(after, before, strict=True))
    client = (
        client_after.ru_utime
        - client_before.ru_utime
        + client_after.ru_stime
        - client_before.ru_stime
    )
    per = 1e6 / max(1, outcome.requests)
    return Sample(outcome, user * per, system * per, client / elapsed)


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------

Step = Callable[[list[Server]], None]


def nothing(nodes: list[Server]) -> None:
    pass


@dataclass
class Figure:
    """One line of the table: prepare (not measured), run (measured), check."""

    name: str
    target: str  # ">= 1.0", "<= 1.0" (ratio ours / C) or "—"
    run: Callable[[list[Server]], Outcome]
    prepare: Step = nothing
    check: Step = nothing
    samples: dict[str, list[Sample]] = field(default_factory=lambda: {k: [] for k in KINDS})
    p99_target: str = "<= 1.0"  # the p99 line's, for a figure that has one


def rb_run(requests: int, pipeline: int, cmd: Sequence[str]) -> Callable[[list[Server]], Outcome]:
    """redis-benchmark on the first node."""

    def run(nodes: list[Server]) -> Outcome:
        rate = redis_benchmark(nodes[0].port, requests, pipeline, cmd)
        return Outcome(rate, issued(requests, pipeline))

    return run


def cycle_run(jobs: int, rate: int = 0) -> Callable[[list[Server]], Outcome]:
    """disque-benchmark's cycle on the first node, paced to ``rate`` jobs/s if given."""
    paced = ["--rate", str(rate)] if rate else []

    def run(nodes: list[Server]) -> Outcome:
        result = benchmark(nodes[0], ["-n", str(jobs), *paced], timeout=600.0)
        if result["exit_code"] != 0 or result["errors"] or result["lost"]:
            raise BenchError(
                f"disque-benchmark on {nodes[0].name} failed (exit "
                f"{result['exit_code']}, {result['errors']} errors, "
                f"{result['lost']} lost): {result['stderr'][-500:]}"
            )
        p99 = result["e2e_latency_ms"]["p99"]
        return Outcome(
            float(result["consume_rate"]),
            int(result["consumed"]),
            None if p99 is None else float(p99),
        )

    return run


def queued_after(queue: str, count: int) -> Step:
    return lambda nodes: expect_qlen(nodes[0], queue, count)


def prefilled(queue: str, count: int) -> Step:
    def prepare(nodes: list[Server]) -> None:
        flush_all(nodes)
        fill(nodes[0], queue, count)

    return prepare


def no_job_registered(nodes: list[Server]) -> None:
    jobs = registered_jobs(nodes[0])
    if jobs:
        raise BenchError(
            f"{nodes[0].name} holds {jobs:,} jobs after ACKJOBs of unknown IDs "
            "on a single node (Disque makes no dummy ack there)"
        )


def single_node_figures(scale: Scale) -> list[Figure]:
    figures = []
    for pipeline, n, light in (
        (1, scale.requests, scale.requests),
        (PIPELINE, scale.pipelined, scale.light),
    ):
        p = f", -P {pipeline}" if pipeline > 1 else ", unpipelined"
        sent = issued(n, pipeline)
        figures += [
            Figure(f"PING{p} (floor)", "—", rb_run(light, pipeline, ["PING"])),
            Figure(
                f"ADDJOB{p}",
                ">= 1.0",
                rb_run(n, pipeline, ["ADDJOB", "q", "body", "0"]),
                flush_all,
                queued_after("q", sent),
            ),
            Figure(
                f"GETJOB NOHANG{p}",
                ">= 1.0",
                rb_run(n, pipeline, ["GETJOB", "NOHANG", "FROM", "q"]),
                prefilled("q", sent),
                queued_after("q", 0),
            ),
            Figure(
                f"ACKJOB of unknown IDs{p}",
                ">= 1.0",
                rb_run(light, pipeline, [*RANDOM_IDS, "ACKJOB", UNKNOWN_ID]),
                flush_all,
                no_job_registered,
            ),
        ]
    figures.append(
        Figure(
            "ADDJOB → GETJOB → ACKJOB cycle, jobs/s (CPU per job)",
            ">= 1.0",
            cycle_run(scale.cycles),
            flush_all,
            p99_target="—",  # (the backlog of a closed loop: see the docstring)
        )
    )
    figures.append(
        Figure(
            f"… the same cycle paced at {PACED_RATE:,} jobs/s",
            "—",
            cycle_run(scale.cycles, PACED_RATE),
            flush_all,
        )
    )
    return figures


def cluster_figures(scale: Scale) -> list[Figure]:
    n = scale.replicated
    return [
        Figure(
            "ADDJOB REPLICATE 3 sync, 3 nodes, unpipelined (CPU: sum of 3)",
            ">= 1.0",
            rb_run(n, 1, ["ADDJOB", "q", "body", "5000", "REPLICATE", "3"]),
            flush_all,
            queued_after("q", n),
        )
    ]


def run_figure(
    figure: Figure, nodes: dict[str, list[Server]], runs: int, kinds: Sequence[str] = KINDS
) -> None:
    """--runs runs of the figure on each kind of server started, the order turning at
    every run (with two kinds: ours first on even runs, C first on odd ones)."""
    say(f"  {figure.name} ...")
    kinds = tuple(k for k in kinds if k in nodes)
    for i in range(runs):
        turn = i % len(kinds)
        for kind in kinds[turn:] + kinds[:turn]:
            figure.prepare(nodes[kind])
            sample = measure(nodes[kind], partial(figure.run, nodes[kind]))
            figure.check(nodes[kind])
            figure.samples.setdefault(kind, []).append(sample)
            say(
                f"    run {i + 1} {kind:>5}: {sample.outcome.value:>10,.0f}/s, server "
                f"{sample.user_us:.1f} / {sample.sys_us:.1f} µs user / sys, "
                f"client CPU {sample.client_cpu:.0%}"
            )


# --------------------------------------------------------------------------
# Checks that are no figure
# --------------------------------------------------------------------------


def in_one_write(node: Server, *commands: Sequence[str]) -> list[Any]:
    """Send the commands in one write, so that the node runs them back to back (before
    it reads the cluster bus again); their replies."""
    import hiredis

    reader = hiredis.Reader(encoding="utf-8", errors="replace")
    got: list[Any] = []
    with socket.create_connection((HOST, node.port), timeout=30) as s:
        s.sendall(b"".join(hiredis.pack_command(tuple(c)) for c in commands))
        while len(got) < len(commands):
            reply = reader.gets()
            if reply is False:
                data = s.recv(65536)
                if not data:
                    raise BenchError(f"{node.name} closed the connection")
                reader.feed(data)
            else:
                got.append(reply)
    return got


def unknown_ack(node: Server) -> str:
    """What ACKJOB of one unknown ID does: its reply and the jobs registered just after
    (a dummy ack is short-lived in a cluster: it goes once the other nodes confirm)."""
    flush_all([node])
    reply, info = in_one_write(
        node, ("ACKJOB", UNKNOWN_ID.replace("__rand_int__", "0" * 12)), ("INFO", "jobs")
    )
    jobs = int(flat_info(info)["registered_jobs"])
    flush_all([node])
    return f"replies {reply}, {jobs} job{'s' if jobs != 1 else ''} registered just after"


def memory_per_job(node: Server, jobs: int) -> float:
    time.sleep(0.5)  # let the node settle after its start
    before = node.rss()
    fill_fast(node.port, b"memq", jobs, MEM_BODY)
    time.sleep(0.5)
    after = node.rss()
    expect_qlen(node, "memq", jobs)
    return (after - before) / jobs


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------


def median(samples: list[Sample], attr: str) -> float | None:
    """The median of one attribute of the samples ("user_us", "outcome.p99_ms", ...)."""
    values = [v for v in map(attrgetter(attr), samples) if v is not None]
    return statistics.median(values) if values else None


def verdict(ratio: float | None, target: str) -> str:
    if ratio is None or target == "—":
        return target
    met = ratio >= 1.0 if target.startswith(">=") else ratio <= 1.0
    return f"{target} {'✅' if met else '❌'}"


def show(value: float | None, how: str) -> str:
    return "—" if value is None else format(value, how)


def ratio_to_c(value: float | None, c: float | None) -> float | None:
    return value / c if value is not None and c else None


def table_line(
    name: str, samples: dict[str, list[Sample]], attr: str, fmt: str, target: str, cpu: str
) -> str:
    ours, pure, c = (median(samples.get(k, []), attr) for k in KINDS)
    ratio, pure_ratio = ratio_to_c(ours, c), ratio_to_c(pure, c)
    return (
        f"| {name} | {show(ours, fmt)} | {show(pure, fmt)} | {show(c, fmt)} | "
        f"{show(ratio, '.2f')} | {show(pure_ratio, '.2f')} | {verdict(ratio, target)} | {cpu} |"
    )


def figure_lines(figure: Figure) -> list[str]:
    s = figure.samples
    cpu = " \\| ".join(
        f"{show(median(s.get(k, []), 'user_us'), '.1f')} / "
        f"{show(median(s.get(k, []), 'sys_us'), '.1f')}"
        for k in KINDS
    )
    lines = [table_line(figure.name, s, "outcome.value", ",.0f", figure.target, cpu)]
    if median(s["ours"], "outcome.p99_ms") is not None:
        lines.append(
            table_line(
                "… p99 end-to-end latency, ms", s, "outcome.p99_ms", ".2f", figure.p99_target, ""
            )
        )
    return lines


def client_note(figures: Sequence[Figure]) -> str:
    parts = [
        f"{f.name.split(' (')[0]} "
        + " / ".join(show(median(f.samples.get(k, []), "client_cpu"), ".2f") for k in KINDS)
        for f in figures
    ]
    return "Client CPU (1.00 = one core busy), ours / pure / C: " + "; ".join(parts) + "."


def markdown(
    figures: Sequence[Figure], memory: dict[str, float] | None, notes: list[str], header: str
) -> str:
    lines = [
        "| figure | ours (median) | pure (median) | C (median) | ours / C | pure / C | "
        "target (ours) | server CPU µs/request user / sys: ours \\| pure \\| C |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for figure in figures:
        lines += figure_lines(figure)
    if memory:
        ours, pure, c = (memory.get(k) for k in KINDS)
        met = "✅" if ours is not None and ours <= TARGET_BYTES_PER_JOB else "❌"
        lines.append(
            f"| resident memory per queued job, B (16-byte body) | {show(ours, ',.0f')} | "
            f"{show(pure, ',.0f')} | {show(c, ',.0f')} | {show(ratio_to_c(ours, c), '.2f')} | "
            f"{show(ratio_to_c(pure, c), '.2f')} | ours <= {TARGET_BYTES_PER_JOB} {met} | |"
        )
    return "\n".join([*lines, "", *notes, "", header])


def versions(single: dict[str, list[Server]]) -> str:
    return "; ".join(
        f"{kind}: {info_field(nodes[0], 'server', 'disque_version')} "
        f"({info_field(nodes[0], 'server', 'disque_build_id')})"
        for kind, nodes in single.items()
    )


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def run(
    tmp: Path, ref_bin: Path, scale: Scale, runs: int, notes: list[str], pure: bool = True
) -> tuple[list[Figure], dict[str, float], str]:
    starters: dict[str, Callable[..., Server]] = {"ours": start_node}
    if pure:
        starters["pure"] = partial(start_node, source=pure_tree(tmp))
    starters["C"] = partial(start_reference, ref_bin)
    singles, clusters = single_node_figures(scale), cluster_figures(scale)
    with both(tmp, "single", starters) as single:
        built = versions(single)
        notes.append(
            "ACKJOB of an unknown ID on 1 node: "
            + "; ".join(f"{kind} {unknown_ack(nodes[0])}" for kind, nodes in single.items())
            + "."
        )
        for figure in singles:
            run_figure(figure, single, runs)
    with both(tmp, "cluster", starters, count=3) as cluster:
        notes.append(
            "ACKJOB of an unknown ID in a 3-node cluster (a dummy ack): "
            + "; ".join(f"{kind} {unknown_ack(nodes[0])}" for kind, nodes in cluster.items())
            + "."
        )
        for figure in clusters:
            run_figure(figure, cluster, runs)
    with both(tmp, "memory", starters, extra=["--maxmemory", MEM_LIMIT]) as fresh:
        say(f"  memory: {scale.mem_jobs:,} jobs with a {len(MEM_BODY)}-byte body ...")
        memory = {kind: memory_per_job(nodes[0], scale.mem_jobs) for kind, nodes in fresh.items()}
    return [*singles, *clusters], memory, built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ref-bin",
        type=Path,
        required=True,
        metavar="PATH",
        help="the C disque-server of Disque 1.0-rc1 (its src/disque-server)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        metavar="N",
        help="runs of each figure per server (default 3)",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK.requests:,} requests a run: a smoke test"
    )
    parser.add_argument(
        "--requests",
        type=int,
        metavar="N",
        help=f"unpipelined requests a run (default {FULL.requests:,}; -P 16 "
        "runs send 3 N, 10 N for PING and ACKJOB, replicated and cycle runs N / 2)",
    )
    parser.add_argument(
        "--no-pure",
        action="store_true",
        help="leave out the pure-Python run of this checkout's node (a third shorter)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or (args.requests is not None and args.requests < 1):
        parser.error("--runs and --requests must be at least 1")
    scale = QUICK if args.quick else FULL
    if args.requests is not None:
        scale = Scale.of("custom", args.requests, scale.mem_jobs)
    missing = missing_prerequisites()
    if not os.access(args.ref_bin, os.X_OK):
        missing.append(
            f"--ref-bin {args.ref_bin}: no executable there (build Disque "
            "1.0-rc1 with make; the binary is src/disque-server)"
        )
    missing = [m for m in missing if not m.startswith("redis-server")]  # not used here
    if missing:
        for line in missing:
            print(f"vs_disque.py: {line}", file=sys.stderr)
        return 2

    started = time.monotonic()
    env = environment()
    say(f"side by side with Disque 1.0-rc1 ({scale.name}, {args.runs} runs): {env}")
    notes: list[str] = []
    try:
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="disque-vs-") as d:
            figures, memory, built = run(
                Path(d), args.ref_bin.resolve(), scale, args.runs, notes, not args.no_pure
            )
    except KeyboardInterrupt:
        print("interrupted: servers stopped", file=sys.stderr)
        return 130
    except (BenchError, subprocess.SubprocessError, OSError) as exc:
        print(f"vs_disque.py: {exc}", file=sys.stderr)
        return 1
    notes.append(client_note(figures))
    notes.append(
        "Worst event-loop stall (1M jobs, 10k blocked clients): not measured here, "
        "see bench/scale.py."
    )
    header = (
        f"{env}; {built}; scale {scale.name}: {scale.requests:,} unpipelined / "
        f"{scale.pipelined:,} -P {PIPELINE} requests ({scale.light:,} for PING and "
        f"ACKJOB), {scale.replicated:,} replicated, "
        f"{scale.cycles:,} cycle jobs, {scale.mem_jobs:,} jobs for memory; "
        f"{args.runs} runs each, alternating; {CLIENTS} clients; whole run "
        f"{time.monotonic() - started:.0f}s."
    )
    print(markdown(figures, memory, notes, header), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
