"""`help`, `help <command>` and `help @<group>`, printed like redis-cli prints them."""

from __future__ import annotations

from disque_cli import __version__, commands
from disque_cli.commands import Command

BOLD, GREY, YELLOW, RESET = "\x1b[1m", "\x1b[90m", "\x1b[33m", "\x1b[0m"


def generic_help() -> str:
    return (
        f"disque {__version__}\n"
        "To get help about Disque commands type:\n"
        '      "help @<group>" to get a list of commands in <group>\n'
        '      "help <command>" for help on <command>\n'
        '      "help <tab>" to get a list of possible help topics\n'
        '      "quit" to exit\n'
        "\n"
        "To set disque preferences:\n"
        '      ":set hints" enable online hints\n'
        '      ":set nohints" disable online hints\n'
        "Set your preferences in ~/.disqueclirc\n"
    )


def command_help(entry: Command, with_group: bool) -> str:
    out = (
        f"\r\n  {BOLD}{entry.name}{RESET} {GREY}{entry.syntax}{RESET}\r\n"
        f"  {YELLOW}summary:{RESET} {entry.summary}\r\n"
        f"  {YELLOW}since:{RESET} {entry.since}\r\n"
    )
    if with_group:
        out += f"  {YELLOW}group:{RESET} {entry.group}\r\n"
    return out


def help_for(args: list[str]) -> str:
    """What `help <args>` prints; unknown topics print just the closing blank line."""
    if not args:
        return generic_help()
    if args[0].startswith("@"):
        group = args[0][1:].lower()
        body = "".join(command_help(entry, False) for entry in commands.in_group(group))
        return body + "\r\n"
    wanted = tuple(arg.upper() for arg in args)
    body = ""
    for entry in commands.iter_entries():
        if entry.words == wanted:
            body += command_help(entry, True)
            if len(wanted) == 1:  # `help config` lists the subcommands too
                body += "".join(command_help(sub, True) for sub in entry.subcommands)
    return body + "\r\n"


def topics() -> list[str]:
    """What `help <tab>` offers: @groups, then commands and subcommands."""
    return [f"@{group}" for group in commands.GROUPS] + [
        entry.name for entry in commands.iter_entries()
    ]
