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


# ---- TLS: disque's options, the same checks and one-line failures ---------------------

def test_tls_options_like_disque() -> None:
    args = build_parser().parse_args(["--cacert", "ca.crt", "--cert", "c.crt", "--key", "c.key"])
    assert (args.tls, args.cacert, args.cert, args.key, args.insecure) == (
        False, "ca.crt", "c.crt", "c.key", False)
    assert build_parser().parse_args(["--tls", "--insecure"]).insecure is True
    help_text = run_tui("--help").stdout
    for flag in ("--tls", "--cacert FILE", "--cert FILE", "--key FILE", "--insecure"):
        assert flag in help_text


@pytest.mark.parametrize(("args", "expected"), [
    (["--cacert", "/nonexistent/ca.crt"],
     "CA certificate /nonexistent/ca.crt: No such file or directory"),
    (["--tls", "--key", "{key}"], "private key {key} given without a client certificate"),
    (["--cert", "{cert}", "--key", "{ca_key}"],
     "client certificate {cert} with key {ca_key}: key values mismatch"),
    (["--cacert", "{key}"], "CA certificate {key}: no certificate or crl found"),
], ids=["missing-ca", "key-without-cert", "wrong-key", "key-as-ca"])
def test_bad_tls_files_are_one_line(certs, capsys, args: list[str], expected: str) -> None:
    files = {"key": certs["key"], "cert": certs["cert"],
             "ca_key": str(Path(certs["ca"]).with_name("ca.key"))}
    assert main(["-p", str(free_port()), *(a.format(**files) for a in args)]) == 1
    err = capsys.readouterr().err
    assert err == f"disque-tui: could not create an SSL context: {expected.format(**files)}\n"


def test_tls_connection_failures_are_one_line(start_tls_node, certs, capsys) -> None:
    node, tls_port = start_tls_node(auth_clients="yes")
    cases = [
        (["-p", str(tls_port)], "Connection closed by server (is it a TLS port? see --tls)"),
        (["-p", str(tls_port), "--tls"],     # the system's CAs do not know the test CA
         "TLS handshake failed: certificate verify failed: "),
        (["-p", str(tls_port), "--cacert", certs["ca"]], "Connection closed by server (does "
         "the node require a client certificate? see --cert and --key)"),
        (["-p", str(node.port), "--insecure"],
         "TLS handshake failed: wrong version number (is it the node's tls-port?)"),
    ]
    for args, reason in cases:
        assert main([*args, "--timeout", "3"]) == 1, args
        err = capsys.readouterr().err
        assert err.startswith(f"disque-tui: cannot connect to 127.0.0.1:{args[1]}: {reason}")
        assert len(err.splitlines()) == 1, err


def test_runs_over_tls_in_a_terminal(start_tls_node, certs) -> None:
    """The real command, given the node's tls-port and a client certificate."""
    import pexpect

    _, tls_port = start_tls_node(auth_clients="yes")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", COLUMNS="100",
               LINES="30")
    child = pexpect.spawn(sys.executable, ["-m", "disque_tui", "-p", str(tls_port), "--tls",
                                           "--cacert", certs["ca"], "--cert", certs["cert"],
                                           "--key", certs["key"], "--interval", "0.3"],
                          env=env, dimensions=(30, 100), timeout=20)
    try:
        child.expect("1/1 nodes up")
        child.send("q")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
