"""`disque-tui` as a command: arguments, and the one-line failure when
nothing answers, before any screen is drawn."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from nodes import free_port

from disque_tui.main import build_parser, main

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]


def run_tui(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "disque_tui", *args], capture_output=True,
                          text=True, timeout=20, env=env, stdin=subprocess.DEVNULL)


def test_nothing_listening_is_one_line_and_exit_1() -> None:
    port = free_port()
    result = run_tui("-p", str(port))
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines == [f"disque-tui: cannot connect to 127.0.0.1:{port}: Connection refused"]


def test_unknown_host_is_one_line(capsys) -> None:
    assert main(["-h", "nosuchhost.invalid", "-p", "7711"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("disque-tui: cannot connect to nosuchhost.invalid:7711: ")
    assert len(err.splitlines()) == 1


def test_wrong_password_is_one_line(start_node, capsys) -> None:
    node = start_node(config={"requirepass": "secret"})
    assert main(["-p", str(node.port), "-a", "wrong"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"disque-tui: cannot connect to 127.0.0.1:{node.port}: ")
    assert "password" in err.lower() and len(err.splitlines()) == 1


def test_arguments_like_redis_cli() -> None:
    args = build_parser().parse_args(["-h", "10.0.0.5", "-p", "7712", "-a", "pw",
                                      "--interval", "0.5"])
    assert (args.host, args.port, args.password, args.interval) == ("10.0.0.5", 7712, "pw", 0.5)
    result = run_tui("--help")
    assert result.returncode == 0
    assert "-h HOST, --host HOST" in result.stdout and "--interval" in result.stdout
    assert run_tui("--interval", "0").returncode == 2


@pytest.mark.parametrize("key", ["q", "\x03"], ids=["q", "ctrl-c"])
def test_runs_in_a_terminal_and_quits_cleanly(start_cluster, key: str) -> None:
    """The real command in a pseudo-terminal: draws the cluster, exits 0 on q / Ctrl-C."""
    import pexpect

    cluster = start_cluster(2)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", COLUMNS="100",
               LINES="30")
    child = pexpect.spawn(sys.executable, ["-m", "disque_tui", "-p", str(cluster[0].port),
                                           "--interval", "0.3"],
                          env=env, dimensions=(30, 100), timeout=20)
    try:
        child.expect("2/2 nodes up")
        child.send(key)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
