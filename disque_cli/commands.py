"""The Disque command table: every command the server knows, once, as data.

Each entry says how the command is written (syntax, in redis-cli's notation:
UPPERCASE tokens, lowercase placeholders, `[optional]`, `a|b` choices,
`[x ...]` repetition), what it does, its group and since-version, and how the
CLI treats its reply (`verbatim` text, the `json` shape). Commands with
subcommands (CLUSTER, CONFIG, CLIENT, ...) list them as entries of their own.

This table feeds the REPL help, tab completion and hints (`syntax.py`), the
renderers (`render.py`), and the generated completion scripts and man page
(`python -m docgen`): edit here, regenerate there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

GROUPS: tuple[str, ...] = ("jobs", "queues", "cluster", "server", "connection")

GROUP_SUMMARIES: Mapping[str, str] = {
    "jobs": "add, fetch, acknowledge and inspect jobs",
    "queues": "queue lengths, statistics, scanning and pausing",
    "cluster": "nodes, membership and the client handshake",
    "server": "information, configuration and administration",
    "connection": "authentication, connection and client state",
}

# Completion values for placeholders that take a known set of words.
INFO_SECTIONS = (
    "server",
    "clients",
    "memory",
    "jobs",
    "queues",
    "persistence",
    "stats",
    "cpu",
    "commandstats",
    "all",
    "default",
)
JOB_STATES = ("wait-repl", "active", "queued", "acked")
CONFIG_PARAMETERS = (
    "activerehashing",
    "aof-enqueue-jobs-once",
    "aof-load-truncated",
    "aof-rewrite-incremental-fsync",
    "appendfsync",
    "appendonly",
    "auto-aof-rewrite-min-size",
    "auto-aof-rewrite-percentage",
    "bind",
    "client-output-buffer-limit",
    "cluster-config-file",
    "cluster-node-timeout",
    "daemonize",
    "databases",
    "dir",
    "hz",
    "latency-monitor-threshold",
    "logfile",
    "loglevel",
    "maxclients",
    "maxmemory",
    "maxmemory-policy",
    "maxmemory-samples",
    "no-appendfsync-on-rewrite",
    "pidfile",
    "port",
    "requirepass",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "syslog-facility",
    "tcp-backlog",
    "tcp-keepalive",
    "timeout",
    "unixsocket",
    "unixsocketperm",
    "watchdog-period",
)
LATENCY_EVENTS = (
    "command",
    "fast-command",
    "aof-write",
    "aof-fsync-always",
    "aof-write-pending-fsync",
    "aof-write-active-child",
    "aof-write-alone",
    "aof-rewrite-diff-write",
    "aof-rename",
    "expire-cycle",
    "eviction-cycle",
)


@dataclass(frozen=True)
class Command:
    name: str  # "ADDJOB", or "CLUSTER MEET" for a subcommand
    syntax: str  # the arguments after the name
    summary: str
    group: str
    since: str = "1.0.0"
    verbatim: bool = False  # the reply is text to print as is (INFO, CLUSTER NODES)
    json: str | None = None  # --json shape, see render.JSON_SHAPES
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    subcommands: tuple[Command, ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(self.name.split())

    @property
    def usage(self) -> str:
        return f"{self.name} {self.syntax}".rstrip()


def _sub(parent: str, name: str, syntax: str, summary: str, group: str, **kwargs) -> Command:
    return Command(f"{parent} {name}", syntax, summary, group, **kwargs)


COMMANDS: tuple[Command, ...] = (
    # ---- jobs ----
    Command(
        "ADDJOB",
        "queue job ms-timeout [REPLICATE count] [DELAY sec] [RETRY sec] "
        "[TTL sec] [MAXLEN count] [ASYNC]",
        "Add a job to a queue, replicated to the given number of nodes",
        "jobs",
    ),
    Command(
        "GETJOB",
        "[NOHANG] [TIMEOUT ms-timeout] [COUNT count] [WITHCOUNTERS] FROM queue [queue ...]",
        "Fetch jobs from the first non-empty queue, blocking until one is available",
        "jobs",
    ),
    Command(
        "ACKJOB",
        "job-id [job-id ...]",
        "Acknowledge jobs as processed, and garbage collect them cluster-wide",
        "jobs",
    ),
    Command(
        "FASTACK",
        "job-id [job-id ...]",
        "Acknowledge jobs with a best-effort cluster-wide deletion",
        "jobs",
    ),
    Command(
        "WORKING", "job-id", "Postpone the next delivery of a job still being worked on", "jobs"
    ),
    Command(
        "NACK",
        "job-id [job-id ...] [DELAY seconds]",
        "Put jobs back in the queue ASAP, incrementing their nacks counter; "
        "DELAY (an extension): after that many seconds, on one node",
        "jobs",
    ),
    Command("SHOW", "job-id", "Describe a job as key/value pairs", "jobs", json="pairs"),
    Command("DELJOB", "job-id [job-id ...]", "Delete jobs from the local node only", "jobs"),
    Command(
        "JSCAN",
        "[cursor] [COUNT count] [BUSYLOOP] [QUEUE queue] [STATE state ...] [REPLY ALL|ID]",
        "Iterate the jobs of the local node",
        "jobs",
        json="jscan",
        values={"state": JOB_STATES},
    ),
    # ---- queues ----
    Command("QLEN", "queue", "Number of jobs queued in a queue of the local node", "queues"),
    Command(
        "QSTAT",
        "queue",
        "Statistics of a queue of the local node as key/value pairs",
        "queues",
        json="pairs",
    ),
    Command(
        "QPEEK",
        "queue count",
        "Return jobs of a queue without consuming them, newest first if count < 0",
        "queues",
    ),
    Command(
        "ENQUEUE", "job-id [job-id ...]", "Put jobs in their queue if not queued yet", "queues"
    ),
    Command("DEQUEUE", "job-id [job-id ...]", "Remove jobs from their queue", "queues"),
    Command(
        "QSCAN",
        "[cursor] [COUNT count] [BUSYLOOP] [MINLEN len] [MAXLEN len] [IMPORTRATE rate]",
        "Iterate the queues of the local node",
        "queues",
    ),
    Command(
        "PAUSE",
        "queue IN|OUT|ALL|NONE|STATE|BCAST [IN|OUT|ALL|NONE|STATE|BCAST ...]",
        "Pause a queue in input, output or both, possibly on every node",
        "queues",
    ),
    # ---- cluster ----
    Command(
        "HELLO",
        "",
        "Handshake: format version, this node ID and all the known nodes",
        "cluster",
        json="hello",
    ),
    Command(
        "CLUSTER",
        "subcommand [argument ...]",
        "Cluster membership and state",
        "cluster",
        subcommands=(
            _sub(
                "CLUSTER",
                "MEET",
                "ip port [bus-port]",
                "Join the cluster of the node at ip:port (bus-port, an extension as Redis "
                "7: its bus when not port + 10000)",
                "cluster",
            ),
            _sub(
                "CLUSTER",
                "NODES",
                "",
                "The cluster configuration as seen by this node",
                "cluster",
                verbatim=True,
            ),
            _sub(
                "CLUSTER",
                "INFO",
                "",
                "Cluster state and statistics of this node",
                "cluster",
                verbatim=True,
                json="info",
            ),
            _sub("CLUSTER", "MYID", "", "The ID of this node", "cluster"),
            _sub("CLUSTER", "FORGET", "node-id", "Remove a node from this node's view", "cluster"),
            _sub(
                "CLUSTER",
                "RESET",
                "HARD|SOFT",
                "Forget every other node and flush jobs and queues; HARD also changes the node ID",
                "cluster",
            ),
            _sub(
                "CLUSTER",
                "LEAVING",
                "[YES|NO]",
                "Get or set the leaving state of the node",
                "cluster",
            ),
            _sub("CLUSTER", "SAVECONFIG", "", "Save the cluster configuration to disk", "cluster"),
        ),
    ),
    # ---- server ----
    Command(
        "INFO",
        "[section]",
        "Information and statistics about the node",
        "server",
        verbatim=True,
        json="info",
        values={"section": INFO_SECTIONS},
    ),
    Command(
        "CONFIG",
        "subcommand [argument ...]",
        "Read and change the configuration",
        "server",
        subcommands=(
            _sub(
                "CONFIG",
                "GET",
                "parameter",
                "Values of the parameters matching a glob pattern",
                "server",
                json="pairs",
                values={"parameter": CONFIG_PARAMETERS},
            ),
            _sub(
                "CONFIG",
                "SET",
                "parameter value",
                "Change a parameter at run time",
                "server",
                values={"parameter": CONFIG_PARAMETERS},
            ),
            _sub(
                "CONFIG",
                "REWRITE",
                "",
                "Rewrite the configuration file with the running configuration",
                "server",
            ),
            _sub("CONFIG", "RESETSTAT", "", "Reset the statistics reported by INFO", "server"),
        ),
    ),
    Command(
        "SLOWLOG",
        "subcommand [argument]",
        "The log of slow commands",
        "server",
        subcommands=(
            _sub("SLOWLOG", "GET", "[count]", "The most recent slow log entries", "server"),
            _sub("SLOWLOG", "LEN", "", "Number of entries in the slow log", "server"),
            _sub("SLOWLOG", "RESET", "", "Clear the slow log", "server"),
        ),
    ),
    Command(
        "LATENCY",
        "subcommand [argument ...]",
        "Latency monitoring",
        "server",
        subcommands=(
            _sub("LATENCY", "LATEST", "", "The latest latency spike of every event", "server"),
            _sub(
                "LATENCY",
                "HISTORY",
                "event",
                "The latency spikes of one event",
                "server",
                values={"event": LATENCY_EVENTS},
            ),
            _sub(
                "LATENCY",
                "RESET",
                "[event ...]",
                "Reset the latency data of events",
                "server",
                values={"event": LATENCY_EVENTS},
            ),
            _sub(
                "LATENCY",
                "GRAPH",
                "event",
                "An ASCII-art graph of an event's latency",
                "server",
                verbatim=True,
                values={"event": LATENCY_EVENTS},
            ),
            _sub(
                "LATENCY",
                "DOCTOR",
                "",
                "A human readable latency analysis report",
                "server",
                verbatim=True,
            ),
        ),
    ),
    Command(
        "COMMAND",
        "[subcommand [argument ...]]",
        "Details about the commands of the server",
        "server",
        subcommands=(
            _sub("COMMAND", "COUNT", "", "Number of commands of the server", "server"),
            _sub(
                "COMMAND",
                "INFO",
                "command-name [command-name ...]",
                "Details about the given commands",
                "server",
            ),
        ),
    ),
    Command(
        "DEBUG",
        "subcommand [argument ...]",
        "Debugging commands",
        "server",
        subcommands=(
            _sub("DEBUG", "SEGFAULT", "", "Make the server crash", "server"),
            _sub("DEBUG", "FLUSHALL", "", "Delete all the jobs and queues", "server"),
            _sub("DEBUG", "SLEEP", "seconds", "Stop the server for some time", "server"),
        ),
    ),
    Command("BGREWRITEAOF", "", "Rewrite the append-only file in the background", "server"),
    Command("MONITOR", "", "Stream every command received by the server", "server"),
    Command("TIME", "", "The server time: unix seconds and microseconds", "server"),
    Command(
        "SHUTDOWN",
        "[REWRITE-AOF]",
        "Stop the server (REWRITE-AOF: rewrite the AOF first)",
        "server",
    ),
    # ---- connection ----
    Command("PING", "[message]", "Ping the server", "connection"),
    Command("AUTH", "password", "Authenticate to the server", "connection"),
    Command("QUIT", "", "Close the connection", "connection"),
    Command(
        "CLIENT",
        "subcommand [argument ...]",
        "Inspect and manage client connections",
        "connection",
        subcommands=(
            _sub(
                "CLIENT", "LIST", "", "The list of client connections", "connection", verbatim=True
            ),
            _sub(
                "CLIENT",
                "KILL",
                "ip:port | [ID id] [TYPE normal] [ADDR ip:port] [SKIPME yes|no]",
                "Close client connections: by address, or those matching every filter",
                "connection",
            ),
            _sub("CLIENT", "GETNAME", "", "The name of the current connection", "connection"),
            _sub(
                "CLIENT", "SETNAME", "connection-name", "Name the current connection", "connection"
            ),
            _sub(
                "CLIENT",
                "PAUSE",
                "timeout",
                "Stop processing commands from clients for some milliseconds",
                "connection",
            ),
        ),
    ),
)

_BY_NAME: dict[str, Command] = {command.name: command for command in COMMANDS}


def iter_entries() -> Iterator[Command]:
    """Every help entry: top-level commands followed by their subcommands."""
    for command in COMMANDS:
        yield command
        yield from command.subcommands


def lookup(name: str) -> Command | None:
    return _BY_NAME.get(name.upper())


def resolve(argv: list[str]) -> Command | None:
    """The most specific entry for a command line: `CONFIG GET` rather than `CONFIG`."""
    if not argv:
        return None
    command = lookup(argv[0])
    if command is None:
        return None
    if len(argv) > 1:
        wanted = argv[1].upper()
        for sub in command.subcommands:
            if sub.words[1] == wanted:
                return sub
    return command


def in_group(group: str) -> list[Command]:
    return [entry for entry in iter_entries() if entry.group == group.lower()]


def command_names() -> list[str]:
    return [command.name for command in COMMANDS]
