"""What disque-benchmark shows: the live progress display and the final summary."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from disque_benchmark.hist import Histogram


@dataclass
class Snapshot:
    """The state of a run at one display tick."""

    elapsed: float
    produced: int
    consumed: int
    errors: int
    produce_rate: float  # over the display window
    consume_rate: float
    addjob: Histogram  # the display window's latencies
    e2e: Histogram
    phase: str  # "producing", "draining"
    target: int | None  # jobs to produce, when -n is given
    duration: float | None
    consumers: int


def pct(h: Histogram, p: float) -> str:
    """Percentile p of h in ms, '-' when h is empty."""
    return f"{h.percentile(p) / 1000:.2f}" if h.total else "-"


def plain_line(s: Snapshot) -> str:
    line = (
        f"[{s.elapsed:6.1f}s] produced {s.produced:,} ({s.produce_rate:,.0f}/s, "
        f"ADDJOB p50 {pct(s.addjob, 50)} p99 {pct(s.addjob, 99)} ms)"
    )
    if s.consumers:
        line += (
            f"  consumed {s.consumed:,} ({s.consume_rate:,.0f}/s, e2e p50 "
            f"{pct(s.e2e, 50)} p99 {pct(s.e2e, 99)} ms)  "
            f"backlog {max(0, s.produced - s.consumed):,}"
        )
    if s.errors:
        line += f"  errors {s.errors:,}"
    if s.phase == "draining":
        line += "  draining"
    return line


class Display:
    """Progress on stderr: a rich live panel on a terminal, else a plain line a second;
    nothing with -q."""

    def __init__(self, mode: str, header: str) -> None:
        self.mode = mode  # "live", "plain" or "off"
        self.header = header
        self.live: Any = None
        self.interval = 0.25 if mode == "live" else 1.0
        self.window_ticks = 4 if mode == "live" else 1

    def start(self) -> None:
        if self.mode == "live":
            from rich.console import Console
            from rich.live import Live

            console = Console(file=sys.stderr)
            self.live = Live(
                self.render(None), console=console, auto_refresh=False, transient=False
            )
            self.live.start()
        elif self.mode == "plain":
            print(self.header, file=sys.stderr, flush=True)

    def update(self, snap: Snapshot) -> None:
        if self.mode == "live" and self.live is not None:
            self.live.update(self.render(snap), refresh=True)
        elif self.mode == "plain":
            print(plain_line(snap), file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def render(self, s: Snapshot | None) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        parts: list[Any] = [Text(self.header, style="bold")]
        if s is None:
            parts.append(Text("connecting...", style="dim"))
            return Group(*parts)
        if s.target:
            done = s.consumed if s.consumers else s.produced
            bar = Table.grid(padding=(0, 1))
            bar.add_row(
                ProgressBar(total=s.target, completed=min(done, s.target), width=40),
                Text(f"{done:,}/{s.target:,} jobs {'consumed' if s.consumers else 'added'}"),
                Text(f"{s.elapsed:.1f}s", style="dim"),
            )
            parts.append(bar)
        elif s.duration:
            bar = Table.grid(padding=(0, 1))
            bar.add_row(
                ProgressBar(total=s.duration, completed=min(s.elapsed, s.duration), width=40),
                Text(f"{s.elapsed:.1f}s of {s.duration:g}s"),
            )
            parts.append(bar)
        table = Table(box=None, padding=(0, 2), show_edge=False)
        table.add_column("")
        for col in ("jobs", "jobs/s", "p50 ms", "p90 ms", "p99 ms", "max ms"):
            table.add_column(col, justify="right")

        def row(name: str, total: int, rate: float, h: Histogram) -> None:
            table.add_row(
                name, f"{total:,}", f"{rate:,.0f}", pct(h, 50), pct(h, 90), pct(h, 99), pct(h, 100)
            )

        row("produced (ADDJOB)", s.produced, s.produce_rate, s.addjob)
        if s.consumers:
            row("consumed (end-to-end)", s.consumed, s.consume_rate, s.e2e)
        parts.append(table)
        status = Text(f"backlog {max(0, s.produced - s.consumed):,}" if s.consumers else "")
        if s.errors:
            status.append(f"  errors {s.errors:,}", style="bold red")
        if s.phase == "draining":
            status.append("  draining...", style="yellow")
        parts.append(status)
        parts.append(Text("rates and latencies: last second", style="dim"))
        return Group(*parts)


# --------------------------------------------------------------------------------------
# Final summary
# --------------------------------------------------------------------------------------


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def text_summary(result: dict[str, Any], out: TextIO) -> None:
    cfg = result["config"]
    nodes = cfg["nodes"]
    w = out.write
    w(
        f"====== disque-benchmark: {cfg['producers']} producers, {cfg['consumers']} consumers "
        f"on {len(nodes)} node{'s' if len(nodes) != 1 else ''}, "
        f"{cfg['processes']} process{'es' if cfg['processes'] != 1 else ''} ======\n"
    )
    repl = cfg["replicate"] if cfg["replicate"] is not None else "default"
    w(
        f"  {cfg['body_size']}-byte bodies, pipeline {cfg['pipeline']}, GETJOB COUNT "
        f"{cfg['count']}, REPLICATE {repl}{' ASYNC' if cfg['async'] else ''}, "
        f"{'FASTACK' if cfg['ack'] == 'fast' else 'ACKJOB'}, queue {cfg['queue']}"
        + (f" (x{cfg['queues']:,})" if cfg["queues"] > 1 else "")
        + (f", paced at {cfg['rate']:,.0f} jobs/s" if cfg["rate"] else "")
        + (f", {cfg['idle']:,} idle connections" if cfg["idle"] else "")
        + "\n"
    )
    w(f"  nodes: {' '.join(nodes)}\n\n")
    w(
        f"  produced {result['produced']:>12,} jobs in {result['produce_duration_s']:8.3f} s "
        f"{result['produce_rate']:>12,.1f} jobs/s\n"
    )
    if cfg["consumers"]:
        w(
            f"  consumed {result['consumed']:>12,} jobs in {result['consume_duration_s']:8.3f} s "
            f"{result['consume_rate']:>12,.1f} jobs/s\n"
        )
    w("\n  latency (ms)          p50       p90       p99     p99.9       max\n")
    rows = [("ADDJOB reply", result["addjob_latency_ms"])]
    if cfg["consumers"]:
        rows.append(("end-to-end", result["e2e_latency_ms"]))
    for name, lat in rows:
        w(
            f"  {name:<16}"
            + "".join(f"{fmt_ms(lat[k]):>10}" for k in ("p50", "p90", "p99", "p99_9", "max"))
            + "\n"
        )
    w("\n")
    checks = []
    if result["lost"] is not None:
        checks.append(f"lost {result['lost']:,}")
        checks.append(f"duplicates {result['duplicates']:,}")
    elif cfg["consumers"]:
        checks.append("not verified by ID (no -n)")
    if result["foreign"]:
        checks.append(f"{result['foreign']:,} jobs of other runs consumed")
    checks.append(f"errors {result['errors']:,}")
    w(
        f"  {', '.join(checks)}; total {result['duration_s']:.3f} s; client CPU "
        f"{result['client_cpu_percent']:.0f}% of a core\n"
    )
    for message, count in result["error_messages"].items():
        w(f"  error x{count:,}: {message}\n")
    if result["drain_timed_out"]:
        w(
            f"  drain timeout: not every job was consumed within {cfg['drain_timeout']:g}s "
            f"after the producers finished\n"
        )
    if result["interrupted"]:
        w("  interrupted: partial results\n")


def json_summary(result: dict[str, Any], out: TextIO) -> None:
    json.dump(result, out, indent=2)
    out.write("\n")
