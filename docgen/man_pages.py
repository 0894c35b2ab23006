"""The man pages of the other programs: disque-benchmark(1), disque-server(1),
disque-tui(1), disque-worker(1), disque.conf(5).

Defaults come from the server's directive table (disque_server.config.PARAMS),
the options of the benchmark, the dashboard and the worker from their typer
commands, and the dashboard's keys from its help screen, so the pages follow the
code; the prose is here. disque(1) is
written by man.py. Read them with
`man ./man/disque.conf.5`.
"""

from __future__ import annotations

from typing import Any

from disque_cli.options import OPTIONS, TLS_DESTS
from docgen.man import DATE, esc

SOURCE = "disque-py"

# ---- disque.conf(5) -------------------------------------------------------------------

# (group, [(directive, value synopsis, description)]), in the order of the page.
DIRECTIVES: list[tuple[str, list[tuple[str, str, str]]]] = [
    (
        "Network",
        [
            (
                "port",
                "port",
                "TCP port for clients. The cluster bus listens on this port plus 10000, which must "
                "be free and reachable by the other nodes too.",
            ),
            (
                "bind",
                "address [address ...]",
                "Listen on these addresses only. Without it the node listens on every interface, "
                "or on the loopback interface only in protected mode (see protected-mode).",
            ),
            (
                "protected-mode",
                "yes|no",
                "When neither bind nor requirepass is set, listen on the loopback interface only, "
                "so that a node is never open to the network by accident.",
            ),
            (
                "timeout",
                "seconds",
                "Close the connection of a client idle for this many seconds; 0 never does. "
                "Clients blocked in GETJOB and MONITOR clients are not closed.",
            ),
            (
                "tcp-keepalive",
                "seconds",
                "Send TCP keepalive probes on client connections idle for this many seconds (then "
                "every third of it, dropping the connection after 3 unanswered), so dead peers "
                "are detected; 0 leaves the system's settings.",
            ),
            (
                "tcp-backlog",
                "number",
                "Length of the queue of connections not accepted yet (the kernel caps it at "
                "net.core.somaxconn).",
            ),
            (
                "unixsocket",
                "path",
                "Also listen on this Unix socket (a stale file there is removed first; the file "
                "is removed at shutdown). CONFIG GET and INFO server show it; clients connect "
                "with disque -s path.",
            ),
            (
                "unixsocketperm",
                "octal",
                "Permissions of the unixsocket file, in octal (700: its owner only); 0 leaves "
                "them to the umask. Values over 777 are refused.",
            ),
            (
                "maxclients",
                "number",
                "Most clients connected at once; beyond it new connections get "
                '"ERR max number of clients reached" and are closed.',
            ),
            (
                "client-output-buffer-limit",
                "normal hard soft soft-seconds",
                "Close a client whose replies wait unsent (it does not read them) beyond hard "
                "bytes, or beyond soft bytes for soft-seconds in a row; 0 disables a limit. "
                "Disque has one class of clients, normal; other classes are refused. Checked "
                "at every cron tick.",
            ),
        ],
    ),
    (
        "Process and logging",
        [
            (
                "dir",
                "path",
                "Working directory: the append only file and the cluster configuration file live "
                "there. Created if missing.",
            ),
            (
                "daemonize",
                "yes|no",
                "Detach from the terminal and run in the background (use pidfile and logfile "
                "with it).",
            ),
            (
                "pidfile",
                "path",
                "Write the process ID to this file at startup; it is removed at shutdown.",
            ),
            ("logfile", "path", "Log to this file; empty: to standard output."),
            (
                "loglevel",
                "debug|verbose|notice|warning",
                "How much to log, from everything to warnings only.",
            ),
            ("syslog-enabled", "yes|no", "Copy every log line to syslog too."),
            ("syslog-ident", "name", "The syslog identity of the node's lines."),
            (
                "syslog-facility",
                "user|local0|...|local7",
                "The syslog facility of the node's lines; others are refused.",
            ),
            (
                "watchdog-period",
                "milliseconds",
                "When the event loop stalls longer than this (at least two cron ticks), write "
                "the stack of every thread to the log, as Redis' software watchdog; the node "
                "keeps running. 0 disables it.",
            ),
            (
                "hz",
                "number",
                "How many times per second background tasks run: job timers (retry, delay, TTL), "
                "failure detection, client timeouts, expiring acknowledgements. Higher values are "
                "more precise and use more CPU. Taken into 1 to 500, as Disque does.",
            ),
        ],
    ),
    (
        "Security and memory",
        [
            (
                "requirepass",
                "password",
                "Clients must send AUTH password before any other command. Nodes of a cluster "
                "talk on the cluster bus, which is not protected by it.",
            ),
            (
                "maxmemory",
                "bytes",
                "Memory limit (units: b, k, kb, m, mb, g, gb), compared with used_memory (INFO "
                "memory): the memory of the node's data, not of the interpreter. It counts every "
                "job (545 bytes for the job, its ID, its index, timer and queue entries, plus its "
                "body), every queue (1,200 bytes plus its name), every client connection (3,500 "
                "bytes) with its input and output buffers, and the AOF buffers; the process' "
                "resident size is used_memory_rss. From 75% of the limit new jobs are replicated "
                "on other nodes without a local copy, and copies from other nodes are refused; "
                "from 95% acknowledged jobs and idle empty queues are evicted, and a command "
                "that needs memory, such as ADDJOB, first evicts what it may (policy acks) and "
                "is refused with an -OOM error while the node stays above 95%, as in Disque.",
            ),
            (
                "maxmemory-policy",
                "acks|noeviction",
                "acks: from 95% of maxmemory evict what is safe to lose (acknowledged jobs, "
                "delivered RETRY 0 jobs, idle empty queues); noeviction: evict nothing.",
            ),
        ],
    ),
    (
        "Append only file",
        [
            (
                "appendonly",
                "yes|no",
                "Log every change of the job set to the append only file, and load it at "
                "startup, so that jobs survive restarts and crashes. Queues are rebuilt from it "
                "only after a controlled restart (see aof-enqueue-jobs-once).",
            ),
            ("appendfilename", "name", "Name of the append only file, in dir."),
            (
                "appendfsync",
                "always|everysec|no",
                "When to fsync the file: after every write (safest, slowest), once a second "
                "(the default), or when the operating system decides.",
            ),
            (
                "aof-enqueue-jobs-once",
                "yes|no",
                "At the next start, load the append only file even with appendonly no and queue "
                "its jobs again, then switch this directive off (rewriting the configuration "
                "file). Use it to restart a node without losing its queues.",
            ),
            (
                "aof-load-truncated",
                "yes|no",
                "If the append only file ends with an incomplete record (a crash while writing), "
                "truncate the file after the last complete one, load it and log a warning; with no, "
                "refuse to start (repair the file with disque-check-aof --fix).",
            ),
            (
                "auto-aof-rewrite-percentage",
                "percent",
                "Rewrite the append only file in the background when it has grown by this "
                "percentage since the last rewrite; 0 disables automatic rewrites.",
            ),
            (
                "auto-aof-rewrite-min-size",
                "bytes",
                "No automatic rewrite while the file is smaller than this (units in the file; "
                "CONFIG SET takes bytes, as Disque).",
            ),
            (
                "no-appendfsync-on-rewrite",
                "yes|no",
                "Do not fsync the append only file while a rewrite writes its new file (the "
                "writes of that time are fsynced when it is done): less disk contention, more "
                "to lose in a power failure meanwhile.",
            ),
            (
                "aof-rewrite-incremental-fsync",
                "yes|no",
                "While rewriting, fsync the new file every 32 MB written rather than once at "
                "the end, so the disk is not flooded at once.",
            ),
        ],
    ),
    (
        "Cluster",
        [
            (
                "cluster-config-file",
                "name",
                "File, in dir, where the node saves its ID and the nodes it knows. Written by "
                "the node: do not edit it. Each node needs its own.",
            ),
            (
                "cluster-node-timeout",
                "milliseconds",
                "A node that does not answer for this long is flagged PFAIL; when the majority "
                "of the nodes agree it becomes FAIL. Lower values detect failures sooner.",
            ),
            (
                "cluster-port",
                "port",
                "Port of the cluster bus; 0 means port plus 10000. Beyond Disque, as Redis 7.",
            ),
            (
                "cluster-announce-ip",
                "address",
                "The IP address this node tells the other nodes (and HELLO and CLUSTER NODES "
                "show), when they cannot reach it at the address they see, as behind NAT or in a "
                "container. Empty: the address peers see.",
            ),
            ("cluster-announce-port", "port", "The client port this node announces; 0 means port."),
            (
                "cluster-announce-bus-port",
                "port",
                "The cluster bus port this node announces; 0 means the bus port it listens on. "
                "CLUSTER MEET reaches a node at its port plus 10000 unless given the bus port "
                "(CLUSTER MEET ip port bus-port, as Redis 7); disque --cluster create gives it.",
            ),
            (
                "cluster-password",
                "secret",
                "Every cluster bus link starts with a mutual HMAC-SHA256 challenge on this "
                "shared secret (which never crosses the wire); a peer that does not prove it is "
                "disconnected. Every node of the cluster needs the same.",
            ),
        ],
    ),
    (
        "TLS",
        [
            (
                "tls-port",
                "port",
                "Open a TLS client port too (tls-cert-file and tls-key-file are required).",
            ),
            ("tls-cert-file", "path", "The node's certificate, for tls-port and tls-cluster."),
            ("tls-key-file", "path", "The private key of tls-cert-file."),
            (
                "tls-ca-cert-file",
                "path",
                "CA certificates that verify client certificates and, with tls-cluster, peers.",
            ),
            (
                "tls-auth-clients",
                "yes|no|optional",
                "Whether TLS clients must present a certificate signed by tls-ca-cert-file.",
            ),
            (
                "tls-cluster",
                "yes|no",
                "Run the cluster bus over TLS, peers verified against tls-ca-cert-file.",
            ),
        ],
    ),
    (
        "Queues",
        [
            (
                "queue-max-idle-time",
                "seconds",
                "An empty queue, with no client waiting on it and no state (such as PAUSE), is "
                "forgotten after this many seconds without activity.",
            ),
        ],
    ),
    (
        "Accepted for compatibility",
        [
            (
                "databases",
                "number",
                "Accepted and shown by CONFIG GET as by Disque, which has no databases either: "
                "no effect.",
            ),
            (
                "maxmemory-samples",
                "number",
                "Accepted and shown by CONFIG GET as by Disque, whose eviction does not use it "
                "either: no effect.",
            ),
            (
                "activerehashing",
                "yes|no",
                "Accepted and shown by CONFIG GET as by Disque; Python's dictionaries resize "
                "at once, so there is no incremental rehashing to run: no effect.",
            ),
        ],
    ),
    (
        "Monitoring",
        [
            (
                "slowlog-log-slower-than",
                "microseconds",
                "Record in the slow log the commands that take longer than this; a negative "
                "value (in the file only: CONFIG SET takes 0 or more, as Disque) disables the "
                "slow log, 0 records every command (SLOWLOG GET).",
            ),
            ("slowlog-max-len", "number", "How many entries the slow log keeps."),
            (
                "latency-monitor-threshold",
                "milliseconds",
                "Record events (such as a late event loop) that take at least this long, for "
                "LATENCY LATEST and LATENCY HISTORY; 0 disables the latency monitor.",
            ),
            (
                "metrics-port",
                "port",
                "Serve Prometheus metrics at /metrics on this port (HTTPS when tls-cert-file and "
                "tls-key-file are set, with tls-auth-clients applying to scrapers); 0 serves none. "
                "Beyond Disque.",
            ),
            (
                "metrics-bind",
                "address [address ...]",
                "Addresses of the metrics endpoint; without it, those of the client port.",
            ),
            (
                "metrics-max-queues",
                "number",
                "Most queues given their own series (the longest first); "
                "disque_queues_not_exported counts the others.",
            ),
        ],
    ),
]


def _human_bytes(value: int) -> str:
    for unit, scale in (("gb", 1024**3), ("mb", 1024**2), ("kb", 1024)):
        if value and value % scale == 0:
            return f"{value // scale}{unit}"
    return str(value)


def default_of(name: str) -> str:
    from disque_server.config import PARAMS, format_value, parse_memory

    param = PARAMS[name]
    if name == "dir":
        return "the current directory"
    if param.parse is parse_memory:
        return _human_bytes(param.default)
    value = format_value(param.default)
    return value if value != "" else "empty"


def settable(name: str) -> bool:
    from disque_server.config import PARAMS

    return PARAMS[name].settable and PARAMS[name].visible


def conf_page() -> str:
    out = [
        f'.TH DISQUE.CONF 5 "{DATE}" "{SOURCE}" "Disque manual"',
        ".SH NAME",
        "disque.conf \\- configuration file of the Disque server",
        ".SH SYNOPSIS",
        "\\fIdirective\\fR \\fIvalue\\fR ...",
        ".SH DESCRIPTION",
        "\\fBdisque\\-server\\fR(1) reads its configuration from the file named on its",
        "command line. Each line holds one directive and its value; empty lines and lines",
        "starting with \\fB#\\fR are ignored. Values may be quoted like shell words:",
        "\\(dqdouble quotes\\(dq understand \\e\\fBn\\fR, \\e\\fBxHH\\fR and friends,",
        "\\(aqsingle quotes\\(aq take the text as it is. Sizes accept the units",
        "\\fBk\\fR (1000), \\fBkb\\fR (1024), \\fBm\\fR, \\fBmb\\fR, \\fBg\\fR and \\fBgb\\fR.",
        "A directive given twice keeps its last value.",
        ".PP",
        "Every directive can also be given on the command line as",
        "\\fB\\-\\-\\fR\\fIdirective value\\fR, after the file. Directives marked",
        "\\fIruntime\\fR can be read with \\fBCONFIG GET\\fR and changed with",
        "\\fBCONFIG SET\\fR on a running node; \\fBCONFIG REWRITE\\fR saves the current",
        "values back into the file.",
        ".SH DIRECTIVES",
    ]
    for group, entries in DIRECTIVES:
        out.append(f".SS {esc(group)}")
        for name, synopsis, text in entries:
            words = " ".join(
                f"\\fI{esc(word)}\\fR" if word not in ("yes|no",) and "|" not in word else esc(word)
                for word in synopsis.split(" ")
            )
            note = f"Default: \\fB{esc(default_of(name))}\\fR"
            note += "; runtime." if settable(name) else "."
            out += [".TP", f"\\fB{esc(name)}\\fR {words}", esc(text), note]
    out += [
        ".SH EXAMPLE",
        ".nf",
        "# /etc/disque/7711.conf",
        "port 7711",
        "bind 10.0.0.1 127.0.0.1",
        "dir /var/lib/disque/7711",
        "logfile /var/log/disque/7711.log",
        "daemonize yes",
        "pidfile /run/disque/7711.pid",
        'requirepass "a long secret"',
        "maxmemory 2gb",
        "appendonly yes",
        "appendfsync everysec",
        "cluster\\-node\\-timeout 5000",
        ".fi",
        ".SH FILES",
        ".TP",
        "\\fIdir\\fR/\\fBnodes.conf\\fR",
        "The cluster configuration file (cluster\\-config\\-file).",
        ".TP",
        "\\fIdir\\fR/\\fBdisque.aof\\fR",
        "The append only file (appendfilename).",
        ".SH SEE ALSO",
        "\\fBdisque\\-server\\fR(1), \\fBdisque\\fR(1), \\fBdisque\\-check\\-aof\\fR(1)",
        "",
    ]
    return "\n".join(out)


# ---- disque-server(1) -------------------------------------------------------------------


def server_page() -> str:
    out = [
        f'.TH DISQUE\\-SERVER 1 "{DATE}" "{SOURCE}" "Disque manual"',
        ".SH NAME",
        "disque\\-server \\- the Disque distributed job queue server",
        ".SH SYNOPSIS",
        ".B disque\\-server",
        "[\\fI/path/to/disque.conf\\fR] [\\fB\\-\\-\\fR\\fIdirective value\\fR ...]",
        ".br",
        ".B disque\\-server \\-",
        "[\\fB\\-\\-\\fR\\fIdirective value\\fR ...]",
        ".br",
        ".B disque\\-server",
        "\\fB\\-v\\fR | \\fB\\-\\-version\\fR | \\fB\\-h\\fR | \\fB\\-\\-help\\fR",
        ".SH DESCRIPTION",
        "\\fBdisque\\-server\\fR runs one node of Disque, an in\\-memory, distributed job",
        "queue, speaking the Redis protocol on its client port (7711 by default) and a",
        "cluster bus on the client port plus 10000. Producers add jobs with \\fBADDJOB\\fR,",
        "which replicates them on several nodes before answering; consumers fetch them",
        "with \\fBGETJOB\\fR and acknowledge them with \\fBACKJOB\\fR; a job not",
        "acknowledged in time is queued again (at\\-least\\-once delivery).",
        ".PP",
        "A node starts alone. Nodes form a cluster with \\fBCLUSTER MEET\\fR \\fIip port\\fR",
        "[\\fIbus\\-port\\fR]",
        "sent to any node (gossip completes the mesh) or with",
        "\\fBdisque \\-\\-cluster create\\fR; \\fBdisque \\-\\-cluster leave\\fR removes a node",
        "without losing its jobs.",
        ".SH OPTIONS",
        ".TP",
        "\\fI/path/to/disque.conf\\fR",
        "Read the configuration from this file (see \\fBdisque.conf\\fR(5)). Without it",
        "every directive has its default value.",
        ".TP",
        "\\fB\\-\\fR",
        "Read the configuration from standard input.",
        ".TP",
        "\\fB\\-\\-\\fR\\fIdirective value\\fR ...",
        "Any directive of \\fBdisque.conf\\fR(5), applied after the file, as if appended",
        "to it: \\fB\\-\\-port 7777\\fR, \\fB\\-\\-bind 10.0.0.1 127.0.0.1\\fR.",
        ".TP",
        "\\fB\\-v\\fR, \\fB\\-\\-version\\fR",
        "Print the version and exit.",
        ".TP",
        "\\fB\\-h\\fR, \\fB\\-\\-help\\fR",
        "Print the usage and exit.",
        ".SH SIGNALS",
        ".TP",
        "\\fBSIGTERM\\fR, \\fBSIGINT\\fR",
        "Shut down cleanly: stop accepting clients, flush the append only file, save the",
        "cluster configuration. A second signal exits at once.",
        ".SH EXIT STATUS",
        "0 after a clean shutdown; 1 when the configuration is wrong, the port cannot be",
        "bound or the append only file cannot be loaded (one line on standard error).",
        ".SH EXAMPLES",
    ]
    for command, what in (
        ("disque\\-server", "a node on port 7711 with the default configuration"),
        ("disque\\-server /etc/disque/7711.conf", "a node configured by a file"),
        (
            "disque\\-server \\-\\-port 7712 \\-\\-dir /var/lib/disque/7712",
            "a second node on the same host",
        ),
        ("disque \\-p 7712 cluster meet 127.0.0.1 7711", "join it to the first one"),
    ):
        out += [".PP", what + ":", ".RS", ".nf", command, ".fi", ".RE"]
    out += [
        ".SH FILES",
        ".TP",
        "\\fBnodes.conf\\fR",
        "In \\fBdir\\fR: the node ID and the nodes it knows (cluster\\-config\\-file).",
        ".TP",
        "\\fBdisque.aof\\fR",
        "In \\fBdir\\fR: the append only file, with \\fBappendonly yes\\fR.",
        ".SH SEE ALSO",
        "\\fBdisque.conf\\fR(5), \\fBdisque\\fR(1), \\fBdisque\\-tui\\fR(1),",
        "\\fBdisque\\-check\\-aof\\fR(1)",
        "",
    ]
    return "\n".join(out)


# ---- disque-tui(1) --------------------------------------------------------------------

TUI_DESCRIPTIONS = {
    "help": "Print the usage and exit.",
    "host": "A node of the cluster to start from (default 127.0.0.1). The dashboard "
    "finds the other nodes through it.",
    "port": "Its client port (default 7711).",
    "password": "Password sent with AUTH to every node (default: the DISQUECLI_AUTH "
    "environment variable).",
    "interval": "Seconds between two polls of the cluster (default 1.0).",
    "timeout": "Seconds after which a node that does not answer is shown down (default: "
    "twice the interval, at least 1).",
    "scan_count": "COUNT of each QSCAN page when listing queues (default 500).",
    "once": "Poll twice, one interval apart (rates need two polls), print the overview "
    "(problems, nodes, queues that matter) as plain text and exit, like top -b -n 1. "
    "Also what happens when standard output is not a terminal.",
    "screenshot_dir": "Where the command palette's Screenshot saves its SVG (default: the "
    "current directory); the notice says where it went, or why not.",
    # The TLS options are disque(1)'s: the same words here.
    **{opt.dest: opt.help for opt in OPTIONS if opt.dest in TLS_DESTS},
    "tls": "Connect to every node over TLS: to host:port (its tls-port) and to the other "
    "nodes at the ports HELLO lists. Each of --cacert, --cert, --key and --insecure "
    "implies it.",
}


TUI_METAVARS = {
    "interval": "seconds",
    "timeout": "seconds",
    "scan_count": "count",
    "screenshot_dir": "dir",
    **{opt.dest: opt.metavar for opt in OPTIONS if opt.dest in TLS_DESTS and opt.metavar},
}


def tui_page() -> str:
    import typer.main

    from disque_tui.help_screen import KEYS
    from disque_tui.main import app

    command = typer.main.get_command(app)
    out = [
        f'.TH DISQUE\\-TUI 1 "{DATE}" "{SOURCE}" "Disque manual"',
        ".SH NAME",
        "disque\\-tui \\- live dashboard of a Disque cluster in the terminal",
        ".SH SYNOPSIS",
        ".B disque\\-tui",
        "[\\fB\\-h\\fR \\fIhost\\fR] [\\fB\\-p\\fR \\fIport\\fR] [\\fB\\-a\\fR \\fIpassword\\fR]",
        "[\\fB\\-\\-tls\\fR] [\\fB\\-\\-cacert\\fR \\fIfile\\fR] "
        "[\\fB\\-\\-cert\\fR \\fIfile\\fR \\fB\\-\\-key\\fR \\fIfile\\fR] "
        "[\\fB\\-\\-insecure\\fR]",
        "[\\fB\\-\\-interval\\fR \\fIseconds\\fR] [\\fB\\-\\-timeout\\fR \\fIseconds\\fR]",
        "[\\fB\\-\\-once\\fR] [\\fB\\-\\-screenshot\\-dir\\fR \\fIdir\\fR]",
        ".SH DESCRIPTION",
        "\\fBdisque\\-tui\\fR shows a Disque cluster live. Its first screen is what needs",
        "attention: a strip naming every problem (a node down, PFAIL or FAIL; a node",
        "leaving, with its drain ETA; jobs stranded on a node that is down; a queue that",
        "grows while nothing consumes it), the nodes (state, priority, flags, jobs,",
        "queues, clients, memory, operations per second, a trend of the jobs), then the",
        "queues that matter, problems first (length, oldest job, in, out and import",
        "rates, blocked clients, where the jobs are). A node down keeps its last",
        "figures, greyed, and its last known queues, as stale: their jobs are stranded.",
        "The header counts job copies (a job on three nodes counts three times) and",
        "queued jobs (unique). The second panel lists every queue across all nodes,",
        "with details down to single jobs. It polls every node once per interval and",
        "checks that each address still answers with the node ID it had: a node",
        "replaced on its port is a new node, the old ID is down. A node that does not",
        "answer is shown down and polled again. It refuses to start, with one line on",
        "standard error and exit status 1, when no Disque node answers at",
        "\\fIhost\\fR:\\fIport\\fR.",
        ".PP",
        "Like \\fBredis\\-cli\\fR(1), \\fB\\-h\\fR is the host; the help is \\fB\\-\\-help\\fR.",
        ".SH OPTIONS",
    ]
    for param in command.params:
        if param.param_type_name != "option":
            continue
        name = param.name or ""
        flags = ", ".join(f"\\fB{esc(flag)}\\fR" for flag in sorted(param.opts, key=len))
        if not param.is_flag:
            flags += f" \\fI{esc(TUI_METAVARS.get(name, name))}\\fR"
        text = TUI_DESCRIPTIONS.get(name) or (param.help or "").capitalize() + "."
        out += [".TP", flags, esc(text)]
    out += [".TP", "\\fB\\-\\-help\\fR", "Print the usage and exit."]
    out.append(".SH KEYS")
    for section, keys in KEYS:
        out.append(f".SS {esc(section)}")
        for key, what in keys:
            out += [".TP", f"\\fB{esc(key)}\\fR", esc(what[:1].upper() + what[1:]) + "."]
    out += [
        ".SH EXIT STATUS",
        "0 after \\fBq\\fR; 1 when nothing answers at \\fIhost\\fR:\\fIport\\fR. With",
        "\\fB\\-\\-once\\fR (or without a terminal): 1 when the overview names an error",
        "(a node down or failing, jobs stranded), else 0.",
        ".SH ENVIRONMENT",
        ".TP",
        "\\fBDISQUECLI_AUTH\\fR",
        "Password used when \\fB\\-a\\fR is not given.",
        ".SH EXAMPLES",
        ".PP",
        ".nf",
        "disque\\-tui \\-p 7711",
        ".fi",
        ".PP",
        ".nf",
        'disque\\-tui \\-h 10.0.0.1 \\-a "$SECRET" \\-\\-interval 0.5',
        ".fi",
        ".PP",
        ".nf",
        "disque\\-tui \\-h 10.0.0.1 \\-p 7811 \\-\\-tls \\-\\-cacert ca.crt",
        ".fi",
        ".PP",
        ".nf",
        "disque\\-tui \\-p 7711 \\-\\-once >> /var/log/disque\\-overview.log",
        ".fi",
        ".SH SEE ALSO",
        "\\fBdisque\\fR(1), \\fBdisque\\-server\\fR(1)",
        "",
    ]
    return "\n".join(out)


# ---- disque-worker(1) -----------------------------------------------------------------

WORKER_DESCRIPTIONS = {
    "concurrency": "Jobs run at once (default: the worker's, 4 unless set in code). Plain "
    "handlers run in that many threads; async ones as tasks on one event loop thread.",
    "queues": "Run only the handlers of these queues (repeat the option); a queue the "
    "worker has no handler for is an error.",
    "nodes": "A node to start from, as host:port (repeat the option), instead of the "
    "nodes the worker was given in code. The others are found through HELLO.",
    "grace": "Seconds the running handlers get to finish after SIGTERM or Ctrl-C (default: "
    "the worker's, 30). Past it their jobs are NACKed and the process exits; a second "
    "signal NACKs them at once.",
    "metrics_port": "Serve Prometheus metrics over HTTP on this port: "
    "disque_worker_jobs_processed, _failed, _retried and _dead_lettered (counters by "
    "queue) and disque_worker_handler_seconds (a histogram by queue).",
    "log_level": "debug, info, warning or error (default info).",
}


WORKER_METAVARS = {
    "concurrency": "n",
    "queues": "queue",
    "nodes": "host:port",
    "grace": "seconds",
    "metrics_port": "port",
    "log_level": "level",
}


def worker_page() -> str:
    import typer.main

    from disque.worker_cli import app

    command = typer.main.get_command(app)
    out = [
        f'.TH DISQUE\\-WORKER 1 "{DATE}" "{SOURCE}" "Disque manual"',
        ".SH NAME",
        "disque\\-worker \\- run the job handlers of a disque.Worker",
        ".SH SYNOPSIS",
        ".B disque\\-worker",
        "\\fImodule\\fR[:\\fIattribute\\fR] [\\fIoptions\\fR]",
        ".SH DESCRIPTION",
        "\\fBdisque\\-worker\\fR imports \\fImodule\\fR from the current directory and",
        "runs the handlers of the \\fBdisque.Worker\\fR named by \\fIattribute\\fR",
        "(\\fBworker\\fR when left out): it fetches jobs from their queues with GETJOB,",
        "runs the handler of each, and acknowledges the job (ACKJOB) when the handler",
        "returns. A handler that raises gets its job NACKed with a delay growing with its",
        "attempts (NACK DELAY on nodes that have it), \\fBRetry\\fR(delay=) chooses",
        "the delay, and after the worker's max_attempts the job goes to the queue",
        "\\fIqueue\\fB:dead\\fR. Long handlers keep their job with WORKING. SIGTERM and",
        "Ctrl-C stop fetching and give the running handlers the grace period.",
        ".SH OPTIONS",
    ]
    for param in command.params:
        if param.param_type_name != "option":
            continue
        flags = ", ".join(f"\\fB{esc(flag)}\\fR" for flag in param.opts)
        if not param.is_flag:
            metavar = WORKER_METAVARS.get(param.name or "", param.name or "")
            flags += f" \\fI{esc(metavar)}\\fR"
        text = WORKER_DESCRIPTIONS.get(param.name or "") or (param.help or "").capitalize() + "."
        out += [".TP", flags, esc(text)]
    out += [".TP", "\\fB\\-\\-help\\fR", "Print the usage and exit."]
    out += [
        ".SH EXIT STATUS",
        "0 after a stop by signal; 1 when no node answers; 2 for a bad",
        "\\fImodule\\fR:\\fIattribute\\fR, an unknown queue or a bad option.",
        ".SH EXAMPLES",
        ".PP",
        ".nf",
        "disque\\-worker app:worker",
        "disque\\-worker app.tasks:worker \\-\\-concurrency 8 \\-\\-queues emails "
        "\\-\\-metrics\\-port 9109",
        "disque\\-worker app:worker \\-\\-node 10.0.0.1:7711 \\-\\-node 10.0.0.2:7711",
        ".fi",
        ".SH SEE ALSO",
        "\\fBdisque\\fR(1), \\fBdisque\\-server\\fR(1)",
        "",
    ]
    return "\n".join(out)


# ---- disque-benchmark(1) -------------------------------------------------------------

# The metavar of an option whose value is a choice (typer shows it as <normal|fast>).
BENCHMARK_METAVARS = {"ack": "normal|fast"}


def benchmark_option(param: Any) -> list[str]:
    """One option of disque-benchmark(1): its flags (short first), the metavar of its
    value as --help shows it (in lower case, as the other pages), its help."""
    flags = ", ".join(f"\\fB{esc(flag)}\\fR" for flag in sorted(param.opts, key=len))
    if not param.is_flag:
        metavar = BENCHMARK_METAVARS.get(param.name) or param.metavar or param.name
        flags += f" \\fI{esc(metavar.lower())}\\fR"
    text = param.help or ""
    return [".TP", flags, esc(text[:1].upper() + text[1:]) + "."]


def benchmark_options() -> list[str]:
    """The options, a subsection for each panel of --help (argparse's groups before)."""
    import typer.main

    from disque_benchmark.main import RUN, app

    panels: dict[str, list[str]] = {}
    for param in typer.main.get_command(app).params:
        if param.param_type_name == "option":
            panels.setdefault(param.rich_help_panel, []).extend(benchmark_option(param))
    panels[RUN] += [".TP", "\\fB\\-\\-help\\fR", "Print the usage and exit."]
    out = [".SH OPTIONS"]
    for panel, entries in panels.items():
        out += [f".SS {esc(panel)}", *entries]
    return out


def benchmark_page() -> str:
    from disque_benchmark.main import EXAMPLES

    examples, *notes = EXAMPLES.split("\n\n")
    out = [
        f'.TH DISQUE\\-BENCHMARK 1 "{DATE}" "{SOURCE}" "Disque manual"',
        ".SH NAME",
        "disque\\-benchmark \\- load a Disque cluster with producers and consumers and measure it",
        ".SH SYNOPSIS",
        ".B disque\\-benchmark",
        "[\\fB\\-h\\fR \\fIhost\\fR] [\\fB\\-p\\fR \\fIport\\fR] [\\fB\\-c\\fR \\fIn\\fR] "
        "[\\fB\\-n\\fR \\fIn\\fR] [\\fB\\-d\\fR \\fIbytes\\fR] [\\fB\\-P\\fR \\fIn\\fR] "
        "[\\fIoptions\\fR]",
        ".SH DESCRIPTION",
        "\\fBdisque\\-benchmark\\fR loads a Disque node or cluster in the spirit of",
        "\\fBredis\\-benchmark\\fR(1): producers add jobs (ADDJOB), consumers take them",
        "(GETJOB) and acknowledge them (ACKJOB, or FASTACK with \\fB\\-\\-ack fast\\fR),",
        "spread round robin over the cluster's nodes, found with HELLO from the seed",
        "node or given with \\fB\\-\\-node\\fR. It reports the produce and consume rates,",
        "the ADDJOB reply latency and the end\\-to\\-end latency (ADDJOB sent to job",
        "received by GETJOB) as p50, p90, p99, p99.9 and max: live on standard error",
        "while it runs (a plain line a second when standard error is not a terminal,",
        "nothing with \\fB\\-q\\fR), then a summary on standard output. With \\fB\\-n\\fR",
        "every produced job is checked, by ID, to be consumed exactly once. The client",
        "side is built not to be the bottleneck: \\fB\\-\\-processes\\fR spreads the",
        "connections over several processes whose latency histograms are merged.",
        ".PP",
        "Like \\fBredis\\-benchmark\\fR(1), \\fB\\-h\\fR is the host; the help is "
        "\\fB\\-\\-help\\fR.",
        *benchmark_options(),
        ".SH NOTES",
    ]
    for note in notes:
        out += [".PP", esc(" ".join(note.split()))]
    out += [
        ".SH EXIT STATUS",
        "0 when the run completed with no error and (with \\fB\\-n\\fR) every produced",
        "job was consumed; 1 on an error, a lost job, a connection failure or an",
        "option's value out of range; 2 on a command line that does not parse (an",
        "unknown option, a value that is not a number, a bad \\fIhost\\fR:\\fIport\\fR);",
        "130 when interrupted, after the partial results.",
        ".SH EXAMPLES",
        ".PP",
        ".nf",
        *(esc(line.strip()) for line in examples.splitlines()[1:]),
        ".fi",
        ".SH SEE ALSO",
        "\\fBdisque\\fR(1), \\fBdisque\\-server\\fR(1), \\fBdisque\\-tui\\fR(1), "
        "\\fBredis\\-benchmark\\fR(1)",
        "",
    ]
    return "\n".join(out)


PAGES = {
    "man/disque-benchmark.1": benchmark_page,
    "man/disque-server.1": server_page,
    "man/disque-tui.1": tui_page,
    "man/disque-worker.1": worker_page,
    "man/disque.conf.5": conf_page,
}
