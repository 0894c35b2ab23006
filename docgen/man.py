"""The disque(1) man page, written from the option and command tables.

Written by `python -m docgen` into man/disque.1; read it with `man ./man/disque.1`.
"""

from __future__ import annotations

from disque_cli import __version__, commands
from disque_cli.options import (
    CLUSTER_VERBS,
    EXAMPLES,
    OPTIONS,
    OUTPUT_FLAGS,
    SECTIONS,
    ClusterVerb,
    VerbOption,
)

DATE = "2026"  # fixed, so that regenerating gives the same file

SECTION_TITLES = {
    "connection": "Connection",
    "commands": "Running commands",
    "output": "Output",
    "modes": "Modes",
    "misc": "Miscellaneous",
}


def esc(text: str) -> str:
    """Escape text for roff: backslashes, dashes, and control characters at line start."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text[:1] in (".", "'") else text


def _option(opt) -> list[str]:
    flags = ", ".join(f"\\fB{esc(flag)}\\fR" for flag in opt.flags)
    if opt.metavar:
        flags += f" \\fI{esc(opt.metavar)}\\fR"
    return [".TP", flags, esc(opt.help)]


def _command(entry: commands.Command) -> list[str]:
    usage = f"\\fB{esc(entry.name)}\\fR"
    if entry.syntax:
        usage += f" \\fI{esc(entry.syntax)}\\fR"
    return [".TP", usage, esc(entry.summary) + "."]


# ---- CLUSTER MANAGER ----------------------------------------------------------------

# What the man page says of each verb beyond its summary in options.CLUSTER_VERBS.
VERB_NOTES = {
    "create": "Nodes already in another cluster would merge the clusters: a warning, "
    "then a question on a terminal (--yes: go on; without a terminal and --yes, nothing "
    "is done). Exit status 1, before any CLUSTER MEET, if a node cannot be reached, two "
    "addresses lead to the same node or the merge is not confirmed; 1 too if the mesh "
    "is not complete in time.",
    "add-node": "The new node is met by the existing one (both ports, as create). Exit "
    "status 1 if either cannot be reached, a merge is not confirmed, or the mesh is not "
    "complete in time; 0 if the node is a member already.",
    "del-node": "For a node that is gone for good: its jobs with copies elsewhere are "
    "queued again there after their RETRY. Exit status 1 when the ID names no node or "
    "several, when the node is up (use leave), or when a node could not forget it.",
    "restart": "Exit status 1 when a check fails (without --yes), the node does not stop, "
    "does not answer again with its own ID in time, or the cluster does not see it; 0 "
    "with a warning when some of its queued jobs wait for their RETRY (a C Disque node "
    "without aof-enqueue-jobs-once).",
    "set-timeout": "A node started without a config file keeps the value until it "
    "restarts (a warning). Exit status 1 when a node cannot be reached or refuses it.",
    "check": "Exit status 1 when any finding is an error ([ERR]); warnings ([WARN]) do "
    "not count. With --json: one object with healthy, nodes and findings.",
    "info": "With --json: an array of one object per node (full node IDs); with --csv, "
    "one line per node.",
    "call": "Each reply is printed as one command's reply would be: typed on a terminal, "
    'raw in a pipe, one line per node {"node", "id", "reply"} with --json, '
    "address,reply with --csv. A node that closes the connection on SHUTDOWN counts as "
    "done. Exit status 1 when a node cannot be reached, or, with -e, when a node "
    "answered an error.",
    "leave": "See Removing a node below.",
    "dead-letters": "The queue is named queue or queue:dead. Each node HELLO lists is "
    "asked (JSCAN QUEUE queue:dead REPLY all), and the two copies the worker makes of a "
    "dead letter count once; one whose body is not the worker's JSON record is listed "
    "with a warning and never replayed. A replay takes the dead letter out of its "
    "node's queue (DEQUEUE: a second replay at the same time does not get it), adds the "
    "original body to the original queue on host:port (3 copies, fewer when fewer "
    "nodes are up), then acknowledges the dead letter. With --json: an array of the "
    "dead letters (body included), or of the replays (id, queue, job_id, error). Exit "
    "status 1 when a node does not answer, an --id names no dead letter, or a replay "
    "fails; 0 for a queue with no dead letters.",
}

LEAVE_STEPS = (
    "CLUSTER LEAVING yes on the node: new jobs added there are replicated on other nodes "
    "only, GETJOB that would block answers -LEAVING, and HELLO lists the node with "
    "priority 100 so that clients go elsewhere.",
    "Wait until INFO registered_jobs is 0, with a progress bar (jobs moved, rate, ETA) on "
    "a terminal and a line per change in a pipe. A node of ours hands its queued jobs "
    "to the other nodes at once (a C Disque node only when consumers connected to other "
    "nodes ask for jobs of those queues); each job goes once acknowledged. After 5 "
    "seconds without progress the queues still holding jobs are listed, with what their "
    "jobs wait for.",
    "CLUSTER FORGET on every other node, those that joined meanwhile included; a node "
    "that cannot be reached is named, to be told later. Then CLUSTER RESET SOFT on the "
    "node, once every other node forgot it: it forgets its peers, so that started again "
    "from its directory it does not rejoin (CLUSTER MEET brings it back).",
    "With --shutdown, SHUTDOWN the node and wait until it stops accepting connections.",
)

LEAVE_EXAMPLE = """$ disque --cluster leave 10.0.0.3:7711 --yes --shutdown | cat
--- Removing 10.0.0.3:7711 from the cluster ---
Node f13bdbcffa139f7309074a7ae9712d2416f0b0e7 at 10.0.0.3:7711
holds 120 jobs in 2 queues; the cluster has 2 other nodes (2 reachable).
(...)
>>> Step 1/4: CLUSTER LEAVING yes on 10.0.0.3:7711 (f13bdbcf)
[OK] 10.0.0.3:7711 (f13bdbcf) is now leaving.
[OK] All 2 reachable nodes see it as leaving.
>>> Step 2/4: waiting for the jobs of 10.0.0.3:7711 to drain
    jobs left: 120/120, moved 0, 0.0 jobs/s, ETA -
    jobs left: 41/120, moved 79, 39.5 jobs/s, ETA 1s
    jobs left: 0/120, moved 120, 40.0 jobs/s, ETA 0s
[OK] Drained: 120 jobs left 10.0.0.3:7711 in 3.0s.
>>> Step 3/4: CLUSTER FORGET f13bdbcffa139f7309074a7ae9712d2416f0b0e7 on 2 nodes
[OK] 10.0.0.1:7711 (24ee1c43) forgot f13bdbcf.
[OK] 10.0.0.2:7711 (05c20cdb) forgot f13bdbcf.
>>> Step 4/4: SHUTDOWN 10.0.0.3:7711
[OK] 10.0.0.3:7711 shut down.
address        id        role     result
10.0.0.3:7711  f13bdbcf  leaving  leaving; drained 120 jobs; shut down
10.0.0.1:7711  24ee1c43  other    forgot it
10.0.0.2:7711  05c20cdb  other    forgot it
[OK] 10.0.0.3:7711 (f13bdbcf) left the cluster."""


def _verb_option(opt: VerbOption) -> str:
    label = f"\\fB{esc(opt.flag)}\\fR"
    return label + (f" \\fI{esc(opt.metavar)}\\fR" if opt.metavar else "")


def _verb(verb: ClusterVerb) -> list[str]:
    usage = " ".join(
        [
            f"\\fB{verb.name}\\fR",
            *(f"\\fI{esc(word)}\\fR" if word != "..." else word for word in verb.args.split()),
        ]
    )
    usage += "".join(f" [{_verb_option(opt)}]" for opt in verb.options)
    out = [".TP", usage, esc(verb.summary), esc(VERB_NOTES[verb.name])]
    if verb.options:
        out.append(".RS")
        for opt in verb.options:
            out += [".TP", _verb_option(opt), esc(opt.help)]
        out.append(".RE")
    return out


def cluster_section() -> list[str]:
    outputs = ", ".join(f"\\fB{esc(flag)}\\fR" for flag in OUTPUT_FLAGS)
    out = [
        ".SH CLUSTER MANAGER",
        "\\fBdisque \\-\\-cluster\\fR \\fIverb\\fR [\\fIarguments\\fR] [\\fIoptions\\fR]",
        "works on a whole cluster. \\fIhost\\fR:\\fIport\\fR is any node of it (when",
        "omitted, the node of \\fB\\-h\\fR/\\fB\\-p\\fR or \\fB\\-u\\fR; \\fBcreate\\fR needs",
        "its addresses); the other nodes are the ones it lists in \\fBCLUSTER NODES\\fR.",
        "Every node is reached with the same password (\\fB\\-a\\fR, \\fBDISQUECLI_AUTH\\fR)",
        "and the same TLS options (\\fB\\-\\-tls\\fR, \\fB\\-\\-cacert\\fR, ...): with TLS,",
        "\\fIhost\\fR:\\fIport\\fR is a \\fBtls\\-port\\fR and the other nodes are reached at the",
        "\\fBtls\\-port\\fR that \\fBHELLO\\fR lists (a node that announces none, at its",
        "plain port, where its handshake fails with one clear line).",
        ".PP",
        "A node that cannot be reached, does not answer within the timeout or refuses AUTH",
        "is reported in one line and the verb goes on with the others. Findings are",
        "\\fB[OK]\\fR, \\fB[WARN]\\fR and \\fB[ERR]\\fR lines; nodes are shown as tables, aligned",
        f"plain text in a pipe. After its arguments a verb takes its options and {outputs}",
        "(not \\fBcall\\fR, whose words are a command); with \\fB\\-\\-csv\\fR and",
        "\\fB\\-\\-json\\fR the data go to standard output and the messages to standard",
        "error. The spellings of \\fBredis\\-cli\\fR, \\fB\\-\\-cluster\\-yes\\fR and",
        "\\fB\\-\\-cluster\\-timeout\\fR, are accepted too.",
        ".SS Verbs",
    ]
    for verb in CLUSTER_VERBS:
        out += _verb(verb)
    out += [".TP", "\\fBhelp\\fR", "List the verbs and their arguments."]
    return out + _leave_walkthrough() + _cluster_exit_status()


def _leave_walkthrough() -> list[str]:
    out = [
        ".SS Removing a node",
        "\\fBdisque \\-\\-cluster leave\\fR \\fIhost\\fR:\\fIport\\fR removes a node the way",
        "Disque documents it, without losing a job. It shows what it will do and, on a",
        "terminal, asks for \\fByes\\fR (\\fB\\-\\-yes\\fR does not ask; without a",
        "terminal and without \\fB\\-\\-yes\\fR it changes nothing and exits 1), then:",
    ]
    for number, step in enumerate(LEAVE_STEPS, 1):
        out += [f'.IP "{number}." 4', esc(step)]
    out += [
        ".PP",
        "When the drain times out (\\fB\\-\\-timeout\\fR) or is interrupted, the node is not",
        "forgotten: it stays in leaving state, ready for another run once consumers are",
        "running, or for \\fBdisque \\-h\\fR \\fIhost\\fR \\fB\\-p\\fR \\fIport\\fR",
        "\\fBcluster leaving no\\fR to undo it. If the node dies while draining, the",
        "other nodes still forget it: jobs with copies elsewhere are queued again after",
        "their retry time. In a pipe the walkthrough reads:",
        ".PP",
        ".RS 2",
        ".nf",
        *(esc(line) for line in LEAVE_EXAMPLE.splitlines()),
        ".fi",
        ".RE",
    ]
    return out


def _cluster_exit_status() -> list[str]:
    return [
        ".SS Exit status",
        "0 when everything went well; 1 when the command line is wrong, a node cannot be",
        "reached, a check finds an error, the mesh is not complete in time",
        "(\\fBcreate\\fR), the removal does not complete or is refused at the prompt",
        "(\\fBleave\\fR); 130 when interrupted (\\fBleave\\fR then says whether the",
        "node was left in leaving state).",
    ]


def man_page() -> str:
    out = [
        f'.TH DISQUE 1 "{DATE}" "disque-py {__version__}" "Disque manual"',
        ".SH NAME",
        "disque \\- command line client for Disque, the distributed job queue",
        ".SH SYNOPSIS",
        ".B disque",
        "[\\fIOPTIONS\\fR] [\\fIcommand\\fR [\\fIarg\\fR ...]]",
        ".br",
        ".B disque",
        "[\\fIOPTIONS\\fR] \\fB\\-\\-cluster\\fR \\fIverb\\fR [\\fIarg\\fR ...] "
        "[\\fIverb options\\fR]",
        ".SH DESCRIPTION",
        "\\fBdisque\\fR sends commands to a Disque node and prints its replies, the way",
        "\\fBredis\\-cli\\fR(1) does for Redis. With a command on the command line it runs",
        "it once (\\fB\\-r\\fR repeats it) and exits. Without one, it reads commands from",
        "standard input, one per line, when that is not a terminal, and otherwise starts",
        "an interactive prompt with history, tab completion and syntax hints.",
        ".PP",
        "Arguments are split like a shell would: \\(dqdouble quotes\\(dq understand",
        "\\e\\fBn\\fR, \\e\\fBt\\fR, \\e\\fBxHH\\fR and friends, \\(aqsingle quotes\\(aq",
        "take the text as it is. Option parsing stops at the command name, so",
        "arguments such as \\fB\\-2\\fR in \\fBqpeek myqueue \\-2\\fR reach the server.",
        ".SH OPTIONS",
    ]
    for section in SECTIONS:
        out += [".SS " + SECTION_TITLES[section]]
        for opt in OPTIONS:
            if opt.section == section:
                out += _option(opt)
    out += [
        ".SH OUTPUT",
        "On a terminal replies are typed: \\fB(integer) 1\\fR, \\fB(nil)\\fR,",
        "\\fB(error) ERR ...\\fR, \\fB(empty array)\\fR, strings in double quotes with",
        "escapes, status replies (such as the job ID that \\fBADDJOB\\fR answers) as they",
        "are, and arrays as numbered lists, nested ones indented. When standard output",
        "is not a terminal the output is raw: one string per line, nil as an empty",
        "line, errors without the \\fB(error)\\fR prefix. \\fB\\-\\-csv\\fR prints one line",
        "of comma separated values per reply. \\fB\\-\\-json\\fR prints one JSON value per",
        "reply: \\fBSHOW\\fR, \\fBQSTAT\\fR, \\fBCONFIG GET\\fR and the jobs of",
        "\\fBJSCAN REPLY ALL\\fR as objects, \\fBHELLO\\fR as",
        "{\\(dqversion\\(dq, \\(dqid\\(dq, \\(dqnodes\\(dq}, \\fBINFO\\fR as an object of sections, and",
        "errors as {\\(dqerror\\(dq: \\(dq...\\(dq}.",
        ".PP",
        "\\fBHELLO 3\\fR switches the session to RESP3, as in redis\\-cli 7, until",
        "\\fBHELLO 2\\fR (reconnections keep it): maps print as",
        "\\fB1# \\(dqlen\\(dq => (integer) 1\\fR, sets as \\fB1~\\fR lists, doubles as",
        "\\fB(double) 1.5\\fR, booleans as \\fB(true)\\fR and \\fB(false)\\fR; with",
        "\\fB\\-\\-json\\fR maps are objects.",
        ".SH INTERACTIVE MODE",
        "The prompt shows the node, \\fB127.0.0.1:7711>\\fR, or \\fBnot connected>\\fR when",
        "the node cannot be reached; every command then tries to reconnect. Besides",
        "the server commands the prompt understands:",
        ".TP",
        "\\fBhelp\\fR, \\fBhelp\\fR \\fIcommand\\fR, \\fBhelp @\\fR\\fIgroup\\fR",
        "Help on the commands, one command or a group (" + ", ".join(commands.GROUPS) + ").",
        ".TP",
        "\\fIN\\fR \\fIcommand\\fR",
        "Run the command N times.",
        ".TP",
        "\\fBconnect\\fR \\fIhost\\fR [\\fIport\\fR]",
        "Connect to another node.",
        ".TP",
        "\\fB:set hints\\fR, \\fB:set nohints\\fR",
        "Show or hide the syntax hints (also from \\fI~/.disqueclirc\\fR).",
        ".TP",
        "\\fBclear\\fR, \\fBquit\\fR, \\fBexit\\fR",
        "Clear the screen; leave.",
        ".PP",
        "Tab completes command names, subcommands, options and known values; the",
        "grey hint after the cursor shows what is left to type. Ctrl\\-C clears the line",
        "or interrupts a blocking command, Ctrl\\-D leaves. Commands taking half a",
        "second or more print their duration.",
        *cluster_section(),
        ".SH COMMANDS",
    ]
    for group in commands.GROUPS:
        out += [f".SS {group.capitalize()}: {esc(commands.GROUP_SUMMARIES[group])}"]
        for entry in commands.in_group(group):
            out += _command(entry)
    out += [
        ".SH ENVIRONMENT",
        ".TP",
        "\\fBDISQUECLI_AUTH\\fR",
        "Password used when \\fB\\-a\\fR is not given.",
        ".TP",
        "\\fBDISQUECLI_HISTFILE\\fR",
        "History file of the interactive mode (\\fI/dev/null\\fR: none).",
        ".TP",
        "\\fBFAKETTY\\fR",
        "When set, format replies for a terminal even when standard output is not one.",
        ".SH FILES",
        ".TP",
        "\\fI~/.disquecli_history\\fR",
        "Commands typed at the prompt, one per line, readable by its owner only; lines",
        "with a password (AUTH, HELLO ... AUTH, CONFIG SET requirepass or",
        "cluster\\-password) are left out.",
        ".TP",
        "\\fI~/.disqueclirc\\fR",
        "Preferences of the interactive mode: \\fB:set hints\\fR or \\fB:set nohints\\fR.",
        ".SH EXIT STATUS",
        "0 on success; 1 when the node cannot be reached, the command line is wrong,",
        "or, with \\fB\\-e\\fR, a command answered an error (\\fB\\-\\-pipe\\fR: any error);",
        "130 when interrupted. For \\fB\\-\\-cluster\\fR, see CLUSTER MANAGER.",
        ".SH EXAMPLES",
    ]
    for example in EXAMPLES:
        out += [".PP", ".nf", esc(example), ".fi"]
    out += [
        ".SH SEE ALSO",
        "\\fBdisque\\-server\\fR(1), \\fBredis\\-cli\\fR(1)",
        "",
    ]
    return "\n".join(out)
