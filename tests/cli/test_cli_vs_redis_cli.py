"""`disque` and redis-cli side by side, on the same redis-server.

RESP is RESP: pointed at a redis-server, disque must print exactly what
redis-cli prints, in every output mode, through pipes and on a terminal,
for one-shot commands, stdin pipelines, -x, -r, -e, -d/-D and --pipe.
Skipped where redis-server or redis-cli are not installed (the recorded
comparison of test_cli_render.py still runs there).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from cli_cases import CASES
from clihelpers import tty_output

pytestmark = pytest.mark.timeout(60)

MODES = {"pipe": [], "raw": ["--raw"], "no-raw": ["--no-raw"], "csv": ["--csv"]}


@pytest.fixture
def both(redis_cli: str, redis_server: int, run_cli, cli_env):
    """both(*args, input=b"", env={}) -> (redis-cli result, disque result) on one server."""

    def run(*args: str, input: bytes = b"", env: dict[str, str] | None = None):
        full_env = {**cli_env, "REDISCLI_HISTFILE": "/dev/null", **(env or {})}
        theirs = subprocess.run(
            [redis_cli, "-p", str(redis_server), *args],
            input=input,
            capture_output=True,
            timeout=20,
            env=full_env,
        )
        ours = run_cli("-p", str(redis_server), *args, input=input, env=env)
        return theirs, ours

    return run


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_shot_output(both, case: str, mode: str) -> None:
    theirs, ours = both(*MODES[mode], *CASES[case])
    assert ours.stdout == theirs.stdout
    assert ours.returncode == theirs.returncode


@pytest.mark.parametrize("case", ["mixed", "nested_long", "error", "status", "nil_array"])
def test_faketty_output(both, case: str) -> None:
    theirs, ours = both(*CASES[case], env={"FAKETTY": "1"})
    assert ours.stdout == theirs.stdout


@pytest.mark.parametrize("case", ["mixed", "show_like", "bulk_escapes", "empty_array"])
def test_terminal_output(spawn, redis_cli: str, redis_server: int, case: str) -> None:
    """On a real terminal both print the typed rendering, byte for byte."""
    import pexpect

    theirs = pexpect.spawn(
        redis_cli,
        ["-p", str(redis_server), *CASES[case]],
        encoding="utf-8",
        codec_errors="replace",
        timeout=10,
        env={**os.environ, "REDISCLI_HISTFILE": "/dev/null"},
    )
    ours = spawn("-p", str(redis_server), *CASES[case])
    expected = tty_output(theirs)
    assert expected.startswith(("1)", " 1)", "(empty array)", '"'))  # typed, not raw
    assert tty_output(ours) == expected


PIPELINE = b"\n".join(
    [
        b"eval \"return {1,{2,'a'},false}\" 0",
        b"eval \"return redis.status_reply('D-1')\" 0",
        b"2 eval 'return 7' 0",
        b"   ",
        b"eval \"return redis.error_reply('ERR boom')\" 0",
        b'get "unbalanced',
        b"eval \"return '\\x41\\tb'\" 0",
        b"eval 'return {}' 0",
        b"",
    ]
)


@pytest.mark.parametrize("mode", ["pipe", "no-raw", "csv"])
def test_stdin_pipeline(both, mode: str) -> None:
    theirs, ours = both(*MODES[mode], input=PIPELINE)
    assert ours.stdout == theirs.stdout
    assert ours.returncode == theirs.returncode == 0


RESP3_PIPELINE = b"\n".join(
    [
        b"hello 3",
        b'eval "redis.setresp(3); return {map={a=1}}" 0',
        b"eval \"redis.setresp(3); return {map={x={1,2},y={map={z='w'}}}}\" 0",
        b'eval "redis.setresp(3); return {set={q=true}}" 0',
        b'eval "redis.setresp(3); return {1,{double=2.5},true,false,{map={}},{set={}}}" 0',
        b'eval "redis.setresp(3); return nil" 0',
        b"eval \"redis.setresp(3); return {map={k=redis.error_reply('ERR x')}}\" 0",
        b"hello 2",
        b'eval "redis.setresp(3); return {map={a=1}}" 0',
        b"",
    ]
)


@pytest.mark.parametrize("mode", ["pipe", "no-raw", "csv"])
def test_resp3_after_hello_3(both, mode: str) -> None:
    """HELLO 3 switches the connection to RESP3: maps, sets, doubles, booleans and
    nulls print as redis-cli 7 prints them, and HELLO 2 switches back."""
    theirs, ours = both(*MODES[mode], input=RESP3_PIPELINE)
    # HELLO's replies hold the client ID, one per connection: as a map, then an array.
    client_id = re.compile(rb'("id" => \(integer\) |"id"\n *\d+\) \(integer\) |\nid[ \n]|"id",)\d+')
    assert client_id.sub(rb"\1N", ours.stdout) == client_id.sub(rb"\1N", theirs.stdout)
    assert b"Protocol error" not in ours.stdout + ours.stderr
    assert ours.returncode == theirs.returncode == 0


def test_stdin_pipeline_stops_at_quit(both) -> None:
    theirs, ours = both(input=b"eval 'return 1' 0\nquit\neval 'return 2' 0\n")
    assert ours.stdout == theirs.stdout == b"1\n"


def test_last_argument_from_stdin(both) -> None:
    theirs, ours = both("-x", "eval", "return ARGV[1]", "0", input=b'line1\nline "2"\n')
    assert ours.stdout == theirs.stdout == b'line1\nline "2"\n\n'
    theirs, ours = both("-x", "--no-raw", "eval", "return ARGV[1]", "0", input=b"a\x00b")
    assert ours.stdout == theirs.stdout == b'"a\\x00b"\n'


def test_repeat_with_interval(both) -> None:
    theirs, ours = both("-r", "3", "-i", "0.05", "eval", "return {1,2}", "0")
    assert ours.stdout == theirs.stdout == b"1\n2\n" * 3


def test_exit_on_error(both) -> None:
    theirs, ours = both("-e", "-r", "3", "eval", "return redis.error_reply('ERR boom')", "0")
    assert (
        (ours.returncode, ours.stdout, ours.stderr)
        == (theirs.returncode, theirs.stdout, theirs.stderr)
        == (1, b"", b"ERR boom\n")
    )
    theirs, ours = both("-e", "eval", "return 1", "0")
    assert ours.returncode == theirs.returncode == 0


def test_error_without_e_is_not_an_exit_status(both) -> None:
    theirs, ours = both("eval", "return redis.error_reply('ERR boom')", "0")
    assert (
        (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout) == (0, b"ERR boom\n\n")
    )


def test_delimiters(both) -> None:
    theirs, ours = both("-d", ",", "-D", "|", "-r", "2", "eval", "return {1,{2,3}}", "0")
    assert ours.stdout == theirs.stdout == b"1,2,3|1,2,3|"


def test_pipe_mode(both) -> None:
    protocol = (
        b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb\r\n"
        b"*1\r\n$13\r\nNOSUCHCOMMAND\r\n"
        b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n"
    )
    theirs, ours = both("--pipe", input=protocol)
    assert ours.stdout == theirs.stdout
    assert b"errors: 1, replies: 3" in ours.stdout
    assert ours.stderr == theirs.stderr
    assert ours.returncode == theirs.returncode == 1


def test_connection_refused(redis_cli: str, run_cli, cli_env) -> None:
    from testkit.nodes import free_port

    port = str(free_port())
    theirs = subprocess.run(
        [redis_cli, "-p", port, "ping"], capture_output=True, env=cli_env, timeout=10
    )
    ours = run_cli("-p", port, "ping")
    assert ours.returncode == theirs.returncode == 1
    assert ours.stdout == theirs.stdout == b""
    assert ours.stderr == theirs.stderr.replace(b"Redis", b"Disque")
