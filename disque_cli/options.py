"""The command line options of `disque`, as data.

One table feeds the option parser (main.py), `disque --help`, the
completion scripts and the man page. Spellings and meanings follow
redis-cli: `-h` is the host, `--help` the help. CLUSTER_VERBS does the same
for the verbs of --cluster: their parser (cluster.verb_args), `--cluster
help`, the completion scripts and the man page's CLUSTER MANAGER section.
"""

from __future__ import annotations

from dataclasses import dataclass

from disque.tls import TLS_OPTIONS
from disque_cli.connection import Endpoint
from disque_cli.render import Mode, RenderOptions


@dataclass(frozen=True)
class CliOption:
    flags: tuple[str, ...]
    dest: str
    help: str
    metavar: str | None = None  # the option takes a value
    kind: type = str  # type of the value
    flag_value: str | None = None  # switches sharing one dest (output modes)
    default: object = None
    section: str = "connection"  # grouping in --help and the man page
    complete: str | None = None  # value completion: "host", "file", "none"
    planned: bool = False  # parsed and documented, not implemented yet

    @property
    def takes_value(self) -> bool:
        return self.metavar is not None

    @property
    def label(self) -> str:
        names = ", ".join(self.flags)
        return f"{names} <{self.metavar}>" if self.metavar else names


OPTIONS: tuple[CliOption, ...] = (
    # ---- connection ----
    CliOption(
        ("-h",), "host", "Server hostname (default: 127.0.0.1).", "hostname", complete="host"
    ),
    CliOption(("-p",), "port", "Server port (default: 7711).", "port", kind=int),
    CliOption(
        ("-s",), "socket", "Server socket (overrides hostname and port).", "socket", complete="file"
    ),
    CliOption(
        ("-a",),
        "password",
        "Password to use when connecting to the server. You can also use the "
        "DISQUECLI_AUTH environment variable to pass this password more safely "
        "(if both are used, this argument takes precedence).",
        "password",
    ),
    CliOption(
        ("-u",), "uri", "Server URI: disque://[:password@]host[:port] (disques:// for TLS).", "uri"
    ),
    CliOption(
        ("--no-auth-warning",),
        "no_auth_warning",
        "Don't show the warning about passwords on the command line.",
    ),
    *(
        CliOption(
            (opt.flag,),
            opt.dest,
            opt.help,
            "file" if opt.takes_file else None,
            complete="file" if opt.takes_file else None,
        )
        for opt in TLS_OPTIONS
    ),
    # ---- commands ----
    CliOption(
        ("-r",),
        "repeat",
        "Execute the specified command N times (-1: forever).",
        "repeat",
        kind=int,
        section="commands",
    ),
    CliOption(
        ("-i",),
        "interval",
        "When -r is used, waits <interval> seconds per command. It is possible to "
        "specify sub-second times like -i 0.1. Also the interval of --stat and "
        "--latency-history.",
        "interval",
        kind=float,
        section="commands",
    ),
    CliOption(("-x",), "stdin_arg", "Read the last argument from STDIN.", section="commands"),
    CliOption(
        ("-e",),
        "exit_on_error",
        "Return exit error code when command execution fails.",
        section="commands",
    ),
    # ---- output ----
    CliOption(
        ("--raw",),
        "output",
        "Use raw formatting for replies (default when STDOUT is not a tty).",
        flag_value="raw",
        section="output",
    ),
    CliOption(
        ("--no-raw",),
        "output",
        "Force formatted output even when STDOUT is not a tty.",
        flag_value="standard",
        section="output",
    ),
    CliOption(("--csv",), "output", "Output in CSV format.", flag_value="csv", section="output"),
    CliOption(
        ("--json",),
        "output",
        "Output in JSON format; SHOW, QSTAT, HELLO, INFO and "
        "the jobs of JSCAN REPLY ALL as objects.",
        flag_value="json",
        section="output",
    ),
    CliOption(
        ("-d",),
        "mb_delim",
        "Delimiter between response bulks for raw formatting (default: \\n).",
        "delimiter",
        section="output",
        complete="none",
    ),
    CliOption(
        ("-D",),
        "cmd_delim",
        "Delimiter between responses for raw formatting (default: \\n).",
        "delimiter",
        section="output",
        complete="none",
    ),
    # ---- modes ----
    CliOption(
        ("--pipe",), "pipe", "Transfer raw Disque protocol from stdin to server.", section="modes"
    ),
    CliOption(
        ("--pipe-timeout",),
        "pipe_timeout",
        "In --pipe mode, abort with error if "
        "after sending all data no reply is received within <n> seconds. Default "
        "timeout: 30. Use 0 to wait forever.",
        "n",
        kind=int,
        default=30,
        section="modes",
    ),
    CliOption(
        ("--stat",),
        "stat",
        "Print rolling stats about the node: jobs, queues, memory, clients, ...",
        section="modes",
    ),
    CliOption(
        ("--latency",),
        "latency",
        "Enter a special mode continuously sampling "
        "latency. When STDOUT is not a tty, or with --raw/--csv/--json, it samples "
        "for 1 second (or -i) and prints a single line.",
        section="modes",
    ),
    CliOption(
        ("--latency-history",),
        "latency_history",
        "Like --latency but tracking "
        "latency changes over time. Default time interval is 15 sec. Change it using "
        "-i.",
        section="modes",
    ),
    CliOption(
        ("--cluster",),
        "cluster",
        "Cluster manager command: create, check, info, "
        "call, leave. Run --cluster help for the arguments.",
        "command",
        section="modes",
    ),
    CliOption(
        ("--yes",),
        "cluster_yes",
        "With --cluster leave: do not ask for confirmation (required without a terminal).",
        section="modes",
    ),
    CliOption(
        ("--shutdown",),
        "cluster_shutdown",
        "With --cluster leave: SHUTDOWN the node once the others forgot it.",
        section="modes",
    ),
    CliOption(
        ("--timeout",),
        "cluster_timeout",
        "With --cluster: "
        "seconds to wait for the full mesh (create, default 30), for the node to "
        "drain (leave, default no limit), for each node's replies (check, info, "
        "call, dead-letters: default 5). 0: no limit.",
        "seconds",
        kind=float,
        section="modes",
        complete="none",
    ),
    # ---- misc ----
    CliOption(("--help",), "help", "Output this help and exit.", section="misc"),
    CliOption(("-v", "--version"), "version", "Output version and exit.", section="misc"),
)

SECTIONS = ("connection", "commands", "output", "modes", "misc")


# ---- the cluster manager's verbs ----------------------------------------------------


@dataclass(frozen=True)
class VerbOption:
    """An option given after a --cluster verb's arguments (`leave HOST:PORT --yes`)."""

    flag: str
    help: str
    metavar: str | None = None
    aliases: tuple[str, ...] = ()  # redis-cli's spellings, accepted, not advertised


@dataclass(frozen=True)
class ClusterVerb:
    """`disque --cluster NAME ARGS [OPTIONS]`."""

    name: str
    args: str  # its arguments, as the usage line shows them
    brief: str  # a few words, for completion menus
    summary: str
    options: tuple[VerbOption, ...] = ()
    trailing: bool = True  # False: the words after the address are a command

    @property
    def usage(self) -> str:
        extra = "".join(
            f" [{opt.flag}{' ' + opt.metavar.upper() if opt.metavar else ''}]"
            for opt in self.options
        )
        return f"{self.name} {self.args}{extra}"


def _yes(what: str) -> VerbOption:
    return VerbOption("--yes", what, aliases=("--cluster-yes",))


def _timeout(what: str) -> VerbOption:
    return VerbOption(
        "--timeout", f"Seconds {what}; 0: no limit.", "secs", aliases=("--cluster-timeout",)
    )


CLUSTER_VERBS: tuple[ClusterVerb, ...] = (
    ClusterVerb(
        "create",
        "host1:port1 ... hostN:portN",
        "Join nodes into a cluster",
        "Join the nodes into one cluster: the first one meets the others (CLUSTER "
        "MEET), then wait until every node knows and reaches every other one. A node "
        "that belongs to another cluster would merge the clusters: done only when "
        "confirmed.",
        (
            _yes("Merge without asking (required without a terminal)."),
            _timeout("to wait for the full mesh (default 30)"),
        ),
    ),
    ClusterVerb(
        "check",
        "host:port",
        "Check the health of the cluster",
        "Check the cluster seen from one node: every node reachable and answering "
        "with its own ID, one node per address, every node knowing the same "
        "members, none flagged PFAIL or FAIL; warn about handshakes, lost links "
        "and leaving nodes. The table's Server column tells C Disque nodes (C) "
        "from ours (python), as during a rolling upgrade.",
        (_timeout("to wait for the replies of each node (default 5)"),),
    ),
    ClusterVerb(
        "info",
        "host:port",
        "Jobs, queues and load of every node",
        "Flags (as the seed sees them: pfail, fail, leaving), jobs, queues, jobs "
        "held in no queue (unqueued: delivered and not acknowledged, or waiting for "
        "their RETRY), clients, blocked clients, memory (bytes with --json and --csv) and "
        "operations per second of every node, with the totals.",
        (_timeout("to wait for the replies of each node (default 5)"),),
    ),
    ClusterVerb(
        "call",
        "host:port command [arg ...]",
        "Run a command on every node",
        "Run a command on every node and print each node's reply. The words after "
        "host:port are the command, but for a last --timeout SECS: seconds for each "
        "reply (default 5; 0: no limit, for a GETJOB that blocks).",
        trailing=False,
    ),
    ClusterVerb(
        "add-node",
        "new_host:new_port existing_host:existing_port",
        "Add a node to a cluster",
        "Add the node at new_host:new_port to the cluster of existing_host:existing_port "
        "(CLUSTER MEET, then wait for the full mesh). A new node that belongs to "
        "another cluster would merge the two: done only when confirmed.",
        (
            _yes("Merge without asking (required without a terminal)."),
            _timeout("to wait for the full mesh (default 30)"),
        ),
    ),
    ClusterVerb(
        "del-node",
        "host:port node_id",
        "Forget a dead node everywhere",
        "Forget a node that is down on every reachable node (CLUSTER FORGET), by its "
        "full ID or a unique prefix (the 8 characters the tables show). A node that is "
        "up is refused: `leave` moves its jobs first.",
        (_yes("Do not ask for confirmation (required without a terminal)."),),
    ),
    ClusterVerb(
        "leave",
        "host:port",
        "Remove a node without losing jobs",
        "Remove the node at host:port without losing a job: CLUSTER LEAVING yes, "
        "wait for its jobs to drain, CLUSTER FORGET it on every other node.",
        (
            _yes("Do not ask for confirmation (required when standard input is not a terminal)."),
            VerbOption("--shutdown", "SHUTDOWN the node once the others forgot it."),
            _timeout(
                "to wait for the node to drain (default: no limit); past it, stop "
                "before forgetting it"
            ),
        ),
    ),
    ClusterVerb(
        "restart",
        "host:port",
        "Restart or upgrade one node safely",
        "Restart the node at host:port and wait until the cluster sees it again: check "
        "that every other node is up and that its jobs survive (appendonly), SHUTDOWN "
        "(REWRITE-AOF for C Disque), start it with --start's command (the new version's, "
        "for an upgrade) or wait for its supervisor, then wait for its own ID to answer, "
        "every node to link to it and its queued jobs to be queued again.",
        (
            VerbOption(
                "--start", "Shell command that starts the node (one quoted word).", "command"
            ),
            _yes("Go on without asking, and despite a failed check."),
            _timeout("for the node to answer again and be seen (default 60)"),
        ),
    ),
    ClusterVerb(
        "set-timeout",
        "host:port milliseconds",
        "Set cluster-node-timeout on every node",
        "Set cluster-node-timeout on every node (CONFIG SET), and save it in each "
        "node's config file (CONFIG REWRITE).",
    ),
    ClusterVerb(
        "dead-letters",
        "host:port queue",
        "List or replay the dead letters of a queue",
        "List the dead letters of queue (queue:dead, where the worker puts the jobs that "
        "failed max_attempts times or were rejected) on every node, each once however "
        "many copies it has: its ID, the node it is queued on, the original queue, the "
        "attempts, its age and the error. With --replay, put each one's original body "
        "back on its original queue: ADDJOB there first, then ACKJOB of the dead letter, "
        "so a failure in between runs the job twice, never loses it.",
        (
            VerbOption(
                "--replay",
                "Replay the dead letters: ADDJOB of the original body to the original "
                "queue, then ACKJOB of the dead letter.",
            ),
            VerbOption("--id", "Only this dead letter (repeat --id for more).", "jobid"),
            _yes("Replay without asking (required without a terminal)."),
            _timeout("to wait for the replies of each node (default 5)"),
        ),
    ),
)

# What every verb but call also takes after its arguments: the output formats.
OUTPUT_FLAGS: dict[str, str] = {
    flag: str(opt.flag_value) for opt in OPTIONS if opt.dest == "output" for flag in opt.flags
}

CLUSTER_HELP_VERB = ("help", "List the verbs and their arguments")


def cluster_verb(name: str) -> ClusterVerb | None:
    return next((verb for verb in CLUSTER_VERBS if verb.name == name.lower()), None)


# The TLS options, which disque-tui takes too: same flags, same meaning.
TLS_DESTS = tuple(opt.dest for opt in TLS_OPTIONS)

EXAMPLES = (
    'printf %s "$JOB_ID" | disque -x ackjob',
    "disque addjob myqueue body 0 REPLICATE 1",
    "disque --json getjob nohang from myqueue | jq -r '.[0][2]'",
    "disque -r 100 addjob myqueue x 0",
    "disque -r 100 -i 1 info | grep registered_jobs:",
    "disque --json show D-dcb833cf-8YL1NT17e9+wsA/09NqxscQI-05a1 | jq .state",
    "disque --cluster create 10.0.0.1:7711 10.0.0.2:7711 10.0.0.3:7711",
    "disque --cluster check 10.0.0.1:7711",
    "disque --json --cluster info 10.0.0.1:7711 | jq '.[] | select(.jobs > 0)'",
    "disque --cluster call 10.0.0.1:7711 qlen myqueue",
    "disque --cluster leave 10.0.0.3:7711 --shutdown",
)


@dataclass
class Config:
    """The parsed command line: where to connect, how to print, the command, and
    every option of options.OPTIONS by its dest name, as click parsed it (a
    unit test checks that the fields and the table agree)."""

    endpoint: Endpoint
    mode: Mode
    render: RenderOptions
    args: list[bytes]  # the command and its arguments
    # ---- connection
    host: str | None = None
    port: int | None = None
    socket: str | None = None
    password: str | None = None
    uri: str | None = None
    no_auth_warning: bool = False
    tls: bool = False
    cacert: str | None = None
    cert: str | None = None
    key: str | None = None
    insecure: bool = False
    # ---- commands
    repeat: int | None = None
    interval: float | None = None
    stdin_arg: bool = False
    exit_on_error: bool = False
    # ---- output
    output: str | None = None
    mb_delim: str | None = None
    cmd_delim: str | None = None
    # ---- modes
    pipe: bool = False
    pipe_timeout: int = 30
    stat: bool = False
    latency: bool = False
    latency_history: bool = False
    cluster: str | None = None
    cluster_yes: bool = False
    cluster_shutdown: bool = False
    cluster_timeout: float | None = None
    # ---- misc
    help: bool = False
    version: bool = False
