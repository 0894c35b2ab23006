"""Administration modes: --stat, --latency, --latency-history and --cluster.

--stat              one line of node statistics every interval (INFO based),
                    header repeated every 20 lines, reconnecting if needed.
--latency           PING every 10 ms; on a terminal a live `min, max, avg`
                    line, otherwise one line after 1 s (or -i) in the output
                    format (raw, csv, json).
--latency-history   the live line, closed every 15 s (or -i) with its range.
--cluster <verb>    cluster manager verbs (create, check, info, call, leave),
                    described in options.CLUSTER_VERBS; they live in cluster_verbs.py
                    and cluster_leave.py, on the helpers of cluster.py.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from disque.protocol import flat_info
from disque_cli.connection import Disconnected, Session
from disque_cli.options import CLUSTER_VERBS, ClusterVerb, Config, cluster_verb
from disque_cli.render import Mode
from disque_cli.replies import ErrorReply

LATENCY_SAMPLE_RATE = 0.010  # seconds between PINGs
LATENCY_HISTORY_DEFAULT = 15.0  # seconds per --latency-history line
STAT_HEADER_EVERY = 20


# ---- --stat -----------------------------------------------------------------------

STAT_COLUMNS = (
    ("jobs", 11),
    ("queues", 11),
    ("mem", 9),
    ("clients", 8),
    ("blocked", 8),
    ("requests", 20),
    ("connections", 12),
)


def bytes_to_human(n: int) -> str:
    """1.16M, 761.62K, 100B: the memory column of redis-cli --stat."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n < 1024:
        return f"{sign}{n}B"
    for unit, scale in (("K", 1024), ("M", 1024**2), ("G", 1024**3), ("T", 1024**4)):
        if n < scale * 1024 or unit == "T":
            return f"{sign}{n / scale:.2f}{unit}"
    return f"{sign}{n}B"  # unreachable


def stat_header() -> str:
    data_width = sum(width for _name, width in STAT_COLUMNS[:3])
    load_width = sum(width for _name, width in STAT_COLUMNS[3:])
    names = "".join(name.ljust(width) for name, width in STAT_COLUMNS)
    return (
        " data ".center(data_width - 1, "-")
        + " "
        + " load ".center(load_width - 1, "-")
        + " - child -\n"
        + names.rstrip()
        + "\n"
    )


def stat_line(fields: dict[str, str], previous_requests: int | None) -> tuple[str, int]:
    def number(name: str) -> int:
        try:
            return int(fields.get(name, "0"))
        except ValueError:
            return 0

    requests = number("total_commands_processed")
    delta = 0 if previous_requests is None else requests - previous_requests
    values = (
        str(number("registered_jobs")),
        str(number("registered_queues")),
        bytes_to_human(number("used_memory")),
        str(number("connected_clients")),
        str(number("blocked_clients")),
        f"{requests} (+{delta})",
        str(number("total_connections_received")),
    )
    line = "".join(
        value.ljust(width) for value, (_name, width) in zip(values, STAT_COLUMNS, strict=True)
    )
    if number("aof_rewrite_in_progress"):
        line += "AOF"
    return line.rstrip() + "\n", requests


def _flat_info(session: Session, out: TextIO) -> dict[str, str]:
    """INFO as one flat dict, reconnecting once a second while the node is away."""
    tries = 0
    while True:
        try:
            reply = session.call("INFO")
        except Disconnected:
            tries += 1
            out.write(f"Reconnecting ({tries})...\r")
            out.flush()
            time.sleep(1)
            continue
        if tries:
            out.write("\n")
        if isinstance(reply, ErrorReply):
            raise Disconnected(f"ERROR: {reply.text}")
        return flat_info(reply if isinstance(reply, bytes) else "")


def stat_mode(session: Session, interval: float, out: TextIO, count: int | None = None) -> int:
    previous: int | None = None
    lines = 0
    while count is None or lines < count:
        try:
            fields = _flat_info(session, out)
        except Disconnected as exc:
            print(exc, file=out)
            return 1
        if lines % STAT_HEADER_EVERY == 0:
            out.write(stat_header())
        line, previous = stat_line(fields, previous)
        out.write(line)
        out.flush()
        lines += 1
        if count is None or lines < count:
            time.sleep(interval)
    return 0


# ---- --latency / --latency-history ------------------------------------------------------


class LatencyStats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.min = self.max = self.total = self.count = 0

    def add(self, ms: int) -> None:
        if self.count == 0:
            self.min = self.max = ms
        self.min = min(self.min, ms)
        self.max = max(self.max, ms)
        self.total += ms
        self.count += 1

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0

    def format(self, mode: Mode) -> str:
        if mode is Mode.CSV:
            return f"{self.min},{self.max},{self.avg:.2f},{self.count}\n"
        if mode is Mode.RAW:
            return f"{self.min} {self.max} {self.avg:.2f} {self.count}\n"
        if mode is Mode.JSON:
            return (
                f'{{"min": {self.min}, "max": {self.max}, "avg": {self.avg:.2f}, '
                f'"count": {self.count}}}\n'
            )
        return f"min: {self.min}, max: {self.max}, avg: {self.avg:.2f} ({self.count} samples)"


def latency_mode(
    session: Session,
    mode: Mode,
    interval: float | None,
    history: bool,
    out: TextIO,
    duration: float | None = None,
) -> int:
    """Sample PING latency. `duration` bounds a live run (tests); None = until Ctrl-C."""
    stats = LatencyStats()
    live = mode is Mode.STANDARD
    window = interval or (LATENCY_HISTORY_DEFAULT if history else 1.0)
    started = window_start = time.monotonic()
    while True:
        sent = time.monotonic()
        try:
            reply = session.call("PING")
        except Disconnected as exc:
            print(f"\n{exc}", file=sys.stderr)
            return 1
        if isinstance(reply, ErrorReply):
            print(f"\nERROR: {reply.text}", file=sys.stderr)
            return 1
        now = time.monotonic()
        stats.add(int((now - sent) * 1000))
        if not live:
            if now - window_start >= window:
                out.write(stats.format(mode))
                out.flush()
                return 0
            time.sleep(LATENCY_SAMPLE_RATE)
            continue
        out.write("\x1b[0G\x1b[2K" + stats.format(mode))
        if history and now - window_start >= window:
            out.write(f" -- {now - window_start:.2f} seconds range\n")
            stats.reset()
            window_start = now
        out.flush()
        if duration is not None and now - started >= duration:
            out.write("\n")
            return 0
        time.sleep(LATENCY_SAMPLE_RATE)


def run_monitor_mode(session: Session, config: Config) -> int:
    try:
        session.connect()
    except Disconnected as exc:
        print(exc, file=sys.stderr)
        return 1
    if config.stat:
        return stat_mode(session, config.interval or 1.0, sys.stdout)
    return latency_mode(
        session, config.mode, config.interval, bool(config.latency_history), sys.stdout
    )


# ---- --cluster -----------------------------------------------------------------------


def _verb(module: str, name: str) -> Callable[[Config, ClusterVerb], int]:
    """A verb of cluster_verbs / cluster_leave, imported when used."""

    def run(config: Config, verb: ClusterVerb) -> int:
        import importlib

        from disque_cli.cluster import verb_args

        function = getattr(importlib.import_module(f"disque_cli.{module}"), name)
        return function(verb_args(config, config.args, verb))

    return run


# The verbs themselves (arguments, options, help) are in options.CLUSTER_VERBS.
VERB_RUNNERS: dict[str, Callable[[Config, ClusterVerb], int]] = {
    "create": _verb("cluster_verbs", "cluster_create"),
    "check": _verb("cluster_verbs", "cluster_check"),
    "info": _verb("cluster_verbs", "cluster_info"),
    "call": _verb("cluster_verbs", "cluster_call"),
    "add-node": _verb("cluster_nodes", "cluster_add_node"),
    "del-node": _verb("cluster_nodes", "cluster_del_node"),
    "leave": _verb("cluster_leave", "cluster_leave"),
    "restart": _verb("cluster_restart", "cluster_restart"),
    "set-timeout": _verb("cluster_nodes", "cluster_set_timeout"),
    "dead-letters": _verb("cluster_dead_letters", "cluster_dead_letters"),
}

CLUSTER_HELP_NOTES = """For check, info, call and dead-letters, host:port is any node (or -h/-p).
--timeout: create: seconds to wait for the full mesh (default 30); leave: for
the node to drain (default: no limit); check, info, dead-letters: for each
node's replies (default 5); call: for each node's reply (default 5; 0: no
limit). leave, del-node, create and add-node (a merge): --yes skips the
confirmation; leave: --shutdown stops the node. dead-letters: queue or
queue:dead; --replay puts them back on their queues (--id JOBID, repeated,
for some of them), after a confirmation (--yes: none).
TLS (--tls, --cacert, ...) and the password (-a) apply to every node.
Output: tables on a terminal, plain text in a pipe, --csv and --json for data.
"""


def cluster_help() -> str:
    lines = ["Cluster Manager Commands:"]
    for verb in CLUSTER_VERBS:
        lines.append(f"  {verb.name:<14}{verb.usage.split(' ', 1)[1]}")
    lines.append("  help")
    return "\n".join(lines) + "\n\n" + CLUSTER_HELP_NOTES


def cluster_command(name: str, config: Config) -> int:
    if name.lower() == "help":
        sys.stdout.write(cluster_help())
        return 0
    verb = cluster_verb(name)
    if verb is None:
        print(f"Unknown --cluster subcommand '{name}'", file=sys.stderr)
        sys.stderr.write(cluster_help())
        return 1
    from disque_cli.cluster import VerbError

    try:
        return VERB_RUNNERS[verb.name](config, verb)
    except VerbError as exc:
        print(exc, file=sys.stderr)
        return 1
