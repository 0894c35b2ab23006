#!/usr/bin/env python3
"""Soak: does memory come back after a steady job cycle?

    python bench/soak.py [--ref-bin PATH] [--rounds 6] [--jobs 300000] [--quick]
                         [--png bench/soak.png]

Two runs, each on a fresh node: ``disque-benchmark -n JOBS`` (25 producers,
25 consumers, every job acknowledged) --rounds times in a row, first with
the default RETRY (300 s), then with ``--retry 3600``, where every job that
lives past a timer tick is filed an hour ahead. With --ref-bin (a C
``disque-server`` of Disque 1.0-rc1) a C node runs the same rounds,
alternating with ours round by round, so both see the same machine.

A sampler reads every --every seconds each node's RSS (/proc/PID/status)
and, for ours, ``used_memory`` (INFO memory: the data) and the timers' own
accounting (INFO timers). After each round the script waits until the node
has no job registered. Prints a Markdown table of the RSS after each round
and writes a plot of the samples (PNG, needs matplotlib: ``pip install
-e '.[bench]'``; without it the table alone).

The verdict, per run and node: RSS after the last round within 20% of the
RSS after the first round ("levels off"). Exit code 0 when the run completed
and every verdict holds, 3 when it completed and one does not, 1 when a
step failed, 2 when a prerequisite is missing, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import benchmark, environment  # noqa: E402
from single_node import (  # noqa: E402
    BenchError,
    Server,
    command,
    say,
    sigterm_as_interrupt,
    start_node,
    wait_until,
)
from vs_disque import start_reference  # noqa: E402

LEVEL_TOLERANCE = 0.20  # RSS after the last round vs after the first
RUNS = {"default RETRY": [], "RETRY 3600": ["--retry", "3600"]}


@dataclass
class Sample:
    t: float  # seconds since the run started
    rss: int
    used: int | None  # used_memory (ours only)
    timer_buckets: int | None


@dataclass
class Trace:
    """What one node did during one run."""

    kind: str  # "ours" or "C"
    samples: list[Sample] = field(default_factory=list)
    final: Sample | None = None  # once every round is over
    after_round: list[int] = field(default_factory=list)  # RSS once each round's jobs are gone

    def levels_off(self) -> bool:
        first, last = self.after_round[0], self.after_round[-1]
        return last <= first * (1 + LEVEL_TOLERANCE)


def info_int(node: Server, section: str, name: str) -> int | None:
    text = command(node.port, "INFO", section)
    text = text.decode() if isinstance(text, bytes) else str(text)
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    return None


def registered_jobs(node: Server) -> int:
    return info_int(node, "jobs", "registered_jobs") or 0


def sample(node: Server, kind: str, t: float) -> Sample:
    ours = kind == "ours"
    return Sample(
        t,
        node.rss(),
        info_int(node, "memory", "used_memory") if ours else None,
        info_int(node, "timers", "timer_buckets") if ours else None,
    )


@contextlib.contextmanager
def sampling(nodes: dict[str, Server], traces: dict[str, Trace], every: float) -> Iterator[None]:
    """Sample every node's memory every ``every`` seconds until the block ends."""
    stop = threading.Event()
    started = time.monotonic()

    def loop() -> None:
        while not stop.is_set():
            for kind, node in nodes.items():
                with contextlib.suppress(OSError, BenchError):
                    traces[kind].samples.append(sample(node, kind, time.monotonic() - started))
            stop.wait(every)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def one_round(node: Server, jobs: int, extra: list[str]) -> None:
    result = benchmark(node, ["-n", str(jobs), *extra], timeout=1800.0)
    if result["exit_code"] != 0 or result["errors"] or result["lost"]:
        raise BenchError(
            f"disque-benchmark on {node.name} failed (exit {result['exit_code']}, "
            f"{result['errors']} errors, {result['lost']} lost): {result['stderr'][-500:]}"
        )
    wait_until(  # acked jobs are deleted once every owner confirms
        lambda: not registered_jobs(node),
        60,
        f"{node.name}: jobs still registered 60 s after the round",
        every=0.2,
    )


def soak_run(
    tmp: Path,
    name: str,
    extra: list[str],
    ref_bin: Path | None,
    rounds: int,
    jobs: int,
    every: float,
) -> dict[str, Trace]:
    nodes: dict[str, Server] = {}
    traces = {"ours": Trace("ours")}
    slug = name.replace(" ", "-").lower()
    try:
        nodes["ours"] = start_node(tmp, f"ours-{slug}")
        if ref_bin is not None:
            nodes["C"] = start_reference(ref_bin, tmp, f"c-{slug}")
            traces["C"] = Trace("C")
        started = time.monotonic()
        with sampling(nodes, traces, every):
            for n in range(rounds):
                order = list(nodes) if n % 2 == 0 else list(reversed(nodes))
                for kind in order:
                    say(f"{name}: round {n + 1}/{rounds} on {kind}")
                    one_round(nodes[kind], jobs, extra)
                    traces[kind].after_round.append(nodes[kind].rss())
        for kind, node in nodes.items():  # the last word: every round over, no job left
            traces[kind].final = sample(node, kind, time.monotonic() - started)
    finally:
        for node in nodes.values():
            node.stop()
    return traces


def mb(n: int | None) -> str:
    return "—" if n is None else f"{n / 1e6:.1f} MB"


def markdown(results: dict[str, dict[str, Trace]]) -> str:
    lines = []
    for name, traces in results.items():
        kinds = list(traces)
        lines.append(f"\n**{name}**: RSS once each round's jobs are gone\n")
        lines.append("| round | " + " | ".join(kinds) + " |")
        lines.append("| ---: |" + " ---: |" * len(kinds))
        rounds = max(len(t.after_round) for t in traces.values())
        for n in range(rounds):
            cells = [
                mb(t.after_round[n]) if n < len(t.after_round) else "—" for t in traces.values()
            ]
            lines.append(f"| {n + 1} | " + " | ".join(cells) + " |")
        verdicts = ", ".join(
            f"{k}: {'levels off' if t.levels_off() else 'GROWS'} "
            f"({t.after_round[-1] / t.after_round[0] - 1:+.0%} from round 1)"
            for k, t in traces.items()
        )
        end = traces["ours"].final
        if end is not None:
            verdicts += (
                f"; ours after the last round: used_memory {mb(end.used)}, "
                f"timer buckets {end.timer_buckets}"
            )
        lines.append(f"\n{verdicts}")
    return "\n".join(lines)


def plot(results: dict[str, dict[str, Trace]], png: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install -e '.[bench]')"
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    for ax, (name, traces) in zip(axes[0], results.items(), strict=True):
        for kind, trace in traces.items():
            ts = [s.t for s in trace.samples]
            ax.plot(ts, [s.rss / 1e6 for s in trace.samples], label=f"{kind} RSS")
            if kind == "ours":
                used = [(s.used or 0) / 1e6 for s in trace.samples]
                ax.plot(ts, used, linestyle="--", label="ours used_memory")
        ax.set_title(f"steady cycle, {name}")
        ax.set_xlabel("seconds")
        ax.set_ylabel("MB")
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    return f"plot: {png}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref-bin", type=Path, metavar="PATH", help="C disque-server to compare")
    parser.add_argument("--rounds", type=int, default=6, metavar="N", help="rounds a run (6)")
    parser.add_argument("--jobs", type=int, default=300_000, metavar="N", help="jobs a round")
    parser.add_argument("--every", type=float, default=2.0, metavar="S", help="sample period")
    parser.add_argument("--png", type=Path, default=Path("soak.png"), help="where the plot goes")
    parser.add_argument(
        "--quick", action="store_true", help="3 rounds of 20,000 jobs: a smoke test"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.jobs = 3, 20_000
    if args.rounds < 2 or args.jobs < 1:
        parser.error("--rounds must be at least 2 and --jobs at least 1")
    if args.ref_bin is not None and not os.access(args.ref_bin, os.X_OK):
        print(f"soak.py: --ref-bin {args.ref_bin}: no executable there", file=sys.stderr)
        return 2
    ref = args.ref_bin.resolve() if args.ref_bin else None
    say(f"soak, {args.rounds} rounds of {args.jobs:,} jobs a run: {environment()}")
    results: dict[str, dict[str, Trace]] = {}
    try:
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="disque-soak-") as d:
            for name, extra in RUNS.items():
                results[name] = soak_run(
                    Path(d), name, extra, ref, args.rounds, args.jobs, args.every
                )
    except KeyboardInterrupt:
        print("interrupted: servers stopped", file=sys.stderr)
        return 130
    except (BenchError, subprocess.SubprocessError, OSError) as exc:
        print(f"soak.py: {exc}", file=sys.stderr)
        return 1
    print(markdown(results))
    print("\n" + plot(results, args.png))
    level = all(t.levels_off() for traces in results.values() for t in traces.values())
    return 0 if level else 3


if __name__ == "__main__":
    sys.exit(main())
