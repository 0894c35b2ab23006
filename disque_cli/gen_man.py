"""The disque(1) man page, written from the option and command tables.

Generated with the completion scripts by `python -m disque_cli.gen_completions`
into man/disque.1; read it with `man ./man/disque.1`.
"""

from __future__ import annotations

from disque_cli import __version__, commands
from disque_cli.options import EXAMPLES, OPTIONS, SECTIONS

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


def man_page() -> str:
    out = [
        f'.TH DISQUE 1 "{DATE}" "disque-py {__version__}" "Disque manual"',
        ".SH NAME",
        "disque \\- command line client for Disque, the distributed job queue",
        ".SH SYNOPSIS",
        ".B disque",
        "[\\fIOPTIONS\\fR] [\\fIcommand\\fR [\\fIarg\\fR ...]]",
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
        ".SH INTERACTIVE MODE",
        "The prompt shows the node, \\fB127.0.0.1:7711>\\fR, or \\fBnot connected>\\fR when",
        "the node cannot be reached; every command then tries to reconnect. Besides",
        "the server commands the prompt understands:",
        ".TP",
        "\\fBhelp\\fR, \\fBhelp\\fR \\fIcommand\\fR, \\fBhelp @\\fR\\fIgroup\\fR",
        "Help on the commands, one command or a group (" +
        ", ".join(commands.GROUPS) + ").",
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
        ".SH COMMANDS",
    ]
    for group in commands.GROUPS:
        out += [f".SS {group.capitalize()}: {esc(commands.GROUP_SUMMARIES[group])}"]
        for entry in commands.in_group(group):
            out += _command(entry)
    out += [
        ".SH ENVIRONMENT",
        ".TP", "\\fBDISQUECLI_AUTH\\fR",
        "Password used when \\fB\\-a\\fR is not given.",
        ".TP", "\\fBDISQUECLI_HISTFILE\\fR",
        "History file of the interactive mode (\\fI/dev/null\\fR: none).",
        ".TP", "\\fBFAKETTY\\fR",
        "When set, format replies for a terminal even when standard output is not one.",
        ".SH FILES",
        ".TP", "\\fI~/.disquecli_history\\fR",
        "Commands typed at the prompt, one per line (AUTH excepted).",
        ".TP", "\\fI~/.disqueclirc\\fR",
        "Preferences of the interactive mode: \\fB:set hints\\fR or \\fB:set nohints\\fR.",
        ".SH EXIT STATUS",
        "0 on success; 1 when the node cannot be reached, the command line is wrong,",
        "or, with \\fB\\-e\\fR, a command answered an error (\\fB\\-\\-pipe\\fR: any error);",
        "130 when interrupted.",
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
