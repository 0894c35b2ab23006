"""The CLI's command table (help, hints, completion, man page) and the server's
(dispatch) describe the same commands.

The CLI keeps no arity of its own: the syntax it shows is the arity it
claims. So the check is that every command line the CLI's syntax allows
passes the server's arity check, which is the promise the help makes.
"""

from __future__ import annotations

import math

import pytest

from disque_cli import commands as cli_commands
from disque_cli import syntax
from disque_server.commands import _spec

SERVER_ARITY = {name.upper(): arity for name, _, arity, _ in _spec()}
# QUIT is answered before the table is looked up (server.py); LOADJOB only
# replays the AOF: no client is meant to type it.
CLI_ONLY = {"QUIT"}
SERVER_ONLY = {"LOADJOB"}


def syntax_argc(text: str) -> tuple[int, float]:
    """The fewest and most words (the command name included) a syntax allows."""
    fewest, most = 1, 1.0
    for element in syntax.parse(text):
        if element.repeat:
            most = math.inf
        elif element.optional:
            most += len(element.items)
        else:
            fewest += 1
            most += 1
    return fewest, most


def accepts(arity: int, argc: int) -> bool:
    """Disque's arity check (server.c processCommand): exact when positive, at
    least -arity when negative."""
    return not ((arity > 0 and argc != arity) or argc < -arity)


def test_same_commands() -> None:
    cli = set(cli_commands.command_names())
    assert cli - CLI_ONLY == set(SERVER_ARITY) - SERVER_ONLY


@pytest.mark.parametrize(
    "command", [c for c in cli_commands.COMMANDS if c.name not in CLI_ONLY], ids=lambda c: c.name
)
def test_cli_syntax_fits_server_arity(command: cli_commands.Command) -> None:
    arity = SERVER_ARITY[command.name]
    fewest, most = syntax_argc(command.syntax)
    assert accepts(arity, fewest), (command.usage, arity)
    if arity > 0:
        assert fewest == most == arity, (command.usage, arity)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", (1, 1)),
        ("job-id", (2, 2)),
        ("queue count", (3, 3)),
        ("[section]", (1, 2)),
        ("job-id [job-id ...]", (2, math.inf)),
        ("queue job ms-timeout [REPLICATE count] [ASYNC]", (4, 7)),
        ("[NOHANG] [TIMEOUT ms-timeout] FROM queue [queue ...]", (3, math.inf)),
    ],
)
def test_syntax_argc(text: str, expected: tuple[int, float]) -> None:
    assert syntax_argc(text) == expected
