"""The command table and what it drives: argument splitting, hints, completion."""

from __future__ import annotations

import pytest

from disque_cli import commands, syntax
from disque_cli.args import SplitError, split_args
from disque_cli.repl import hint_text

DISQUE_1_0_COMMANDS = {  # COMMAND COUNT is 32 on Disque 1.0-rc1; LOADJOB is AOF-only
    "AUTH",
    "PING",
    "INFO",
    "SHUTDOWN",
    "MONITOR",
    "DEBUG",
    "CONFIG",
    "CLUSTER",
    "CLIENT",
    "SLOWLOG",
    "TIME",
    "COMMAND",
    "LATENCY",
    "HELLO",
    "ADDJOB",
    "GETJOB",
    "ACKJOB",
    "FASTACK",
    "WORKING",
    "NACK",
    "DELJOB",
    "SHOW",
    "ENQUEUE",
    "DEQUEUE",
    "BGREWRITEAOF",
    "QLEN",
    "QSTAT",
    "QPEEK",
    "QSCAN",
    "JSCAN",
    "PAUSE",
    "QUIT",
}


def test_table_covers_every_command() -> None:
    assert set(commands.command_names()) == DISQUE_1_0_COMMANDS


def test_table_entries_are_well_formed() -> None:
    for entry in commands.iter_entries():
        assert entry.group in commands.GROUPS, entry.name
        assert entry.summary and not entry.summary.endswith("."), entry.name
        assert entry.name == entry.name.upper()
        syntax.parse(entry.syntax)  # parses
        for placeholder in entry.values:
            assert placeholder in entry.syntax, (entry.name, placeholder)
    assert commands.resolve(["config", "get", "x"]).name == "CONFIG GET"
    assert commands.resolve(["info"]).verbatim
    assert commands.resolve(["nosuch"]) is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('set k "a b\\x41\\n"', [b"set", b"k", b"a bA\n"]),
        ("set k2 'it\\'s'", [b"set", b"k2", b"it's"]),
        ('a"b c" d', [b"ab c", b"d"]),
        ('x ""  ', [b"x", b""]),
        ("   ", []),
        ('"\\xff\\t"', [b"\xff\t"]),
        (b"PING\0 x", [b"PING"]),  # a NUL ends the line, as in Redis (a C string)
        (b"a \0b", [b"a"]),
    ],
)
def test_split_args(line: str, expected: list[bytes]) -> None:
    assert split_args(line) == expected


@pytest.mark.parametrize("line", ['get "unbalanced', 'get "a"b', "get 'x", b'get "a\0b"'])
def test_split_args_refuses_bad_quoting(line: str) -> None:
    with pytest.raises(SplitError):
        split_args(line)


@pytest.mark.parametrize(
    ("typed", "hint"),
    [
        (
            "addjob",
            " queue job ms-timeout [REPLICATE count] [DELAY sec] [RETRY sec] [TTL sec] "
            "[MAXLEN count] [ASYNC]",
        ),
        (
            "ADDJOB q",
            " job ms-timeout [REPLICATE count] [DELAY sec] [RETRY sec] [TTL sec] "
            "[MAXLEN count] [ASYNC]",
        ),
        (
            "addjob q body 0 ",
            "[REPLICATE count] [DELAY sec] [RETRY sec] [TTL sec] [MAXLEN count] [ASYNC]",
        ),
        (
            "addjob q body 0 ttl ",
            "sec [REPLICATE count] [DELAY sec] [RETRY sec] [MAXLEN count] [ASYNC]",
        ),
        (
            "getjob nohang ",
            "[TIMEOUT ms-timeout] [COUNT count] [WITHCOUNTERS] FROM queue [queue ...]",
        ),
        ("getjob from q1 ", "[queue ...]"),
        (
            "jscan state ",
            "state [cursor] [COUNT count] [BUSYLOOP] [QUEUE queue] "
            "[STATE state ...] [REPLY ALL|ID]",
        ),
        ("config ", "GET|SET|REWRITE|RESETSTAT"),
        ("config set ", "parameter value"),
        ("3 qlen", " queue"),
        ("qlen q", ""),
        ("qlen q extra", ""),
        ("nosuchcommand ", ""),
        ("help addjob", ""),
        ('addjob "open quote', ""),
    ],
)
def test_hints(typed: str, hint: str) -> None:
    assert hint_text(typed) == hint


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["getjob"], ["NOHANG", "TIMEOUT", "COUNT", "WITHCOUNTERS", "FROM"]),
        (["getjob", "count", "2"], ["NOHANG", "TIMEOUT", "WITHCOUNTERS", "FROM"]),
        (["getjob", "from"], []),
        (["jscan", "state"], ["wait-repl", "active", "queued", "acked"]),
        (["jscan", "reply"], ["ALL", "ID"]),
        (
            ["cluster"],
            ["MEET", "NODES", "INFO", "MYID", "FORGET", "RESET", "LEAVING", "SAVECONFIG"],
        ),
        (["cluster", "leaving"], ["YES", "NO"]),
        (["pause", "q"], ["IN", "OUT", "ALL", "NONE", "STATE", "BCAST"]),
        (["info"], list(commands.INFO_SECTIONS)),
        (["qlen", "q"], []),
    ],
)
def test_completion_candidates(words: list[str], expected: list[str]) -> None:
    assert syntax.candidates(words) == expected
