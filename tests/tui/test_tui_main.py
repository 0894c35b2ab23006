"""`disque-tui` as a command: arguments, and the one-line failure when
nothing answers, before any screen is drawn."""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import typer.main

from disque_tui.main import PROG, app, main
from testkit.nodes import free_port

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]


def parsed(*args: str) -> dict:
    """What the command line gives the command, parsed as the command parses it."""
    with typer.main.get_command(app).make_context(PROG, list(args)) as ctx:
        return dict(ctx.params)


def run_tui(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "disque_tui", *args],
        capture_output=True,
        text=True,
        timeout=20,
        env=env,
        stdin=subprocess.DEVNULL,
    )


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
    args = parsed("-h", "10.0.0.5", "-p", "7712", "-a", "pw", "--interval", "0.5")
    assert (args["host"], args["port"], args["password"], args["interval"]) == (
        "10.0.0.5",
        7712,
        "pw",
        0.5,
    )
    result = run_tui("--help")
    assert result.returncode == 0
    for flag in ("--host", "-h ", "--port", "-p ", "--interval", "--once"):
        assert flag in result.stdout
    bad = run_tui("--interval", "0")
    assert bad.returncode == 2 and "must be positive" in bad.stderr
    assert bad.stderr.startswith("disque-tui: ") and len(bad.stderr.splitlines()) == 1
    unknown = run_tui("--no-such-option")
    assert unknown.returncode == 2 and len(unknown.stderr.splitlines()) == 1


@pytest.mark.parametrize("key", ["q", "\x03"], ids=["q", "ctrl-c"])
def test_runs_in_a_terminal_and_quits_cleanly(start_cluster, key: str) -> None:
    """The real command in a pseudo-terminal: draws the cluster, exits 0 on q / Ctrl-C."""
    import pexpect

    cluster = start_cluster(2)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", COLUMNS="100", LINES="30")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "disque_tui", "-p", str(cluster[0].port), "--interval", "0.3"],
        env=env,
        dimensions=(30, 100),
        timeout=20,
    )
    try:
        child.expect("2/2 nodes up")
        child.send(key)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


# ---- TLS: disque's options, the same checks and one-line failures ---------------------


def test_tls_options_like_disque() -> None:
    args = parsed("--cacert", "ca.crt", "--cert", "c.crt", "--key", "c.key")
    assert (args["tls"], args["cacert"], args["cert"], args["key"], args["insecure"]) == (
        False,
        "ca.crt",
        "c.crt",
        "c.key",
        False,
    )
    assert parsed("--tls", "--insecure")["insecure"] is True
    help_lines = run_tui("--help").stdout.splitlines()
    for flag in ("--tls", "--cacert", "--cert", "--key", "--insecure"):
        [line] = [line for line in help_lines if f" {flag} " in line]
        assert ("FILE" in line) == (flag in ("--cacert", "--cert", "--key")), line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--cacert", "/nonexistent/ca.crt"],
            "CA certificate /nonexistent/ca.crt: No such file or directory",
        ),
        (["--tls", "--key", "{key}"], "private key {key} given without a client certificate"),
        (
            ["--cert", "{cert}", "--key", "{ca_key}"],
            "client certificate {cert} with key {ca_key}: key values mismatch",
        ),
        (["--cacert", "{key}"], "CA certificate {key}: no certificate or crl found"),
    ],
    ids=["missing-ca", "key-without-cert", "wrong-key", "key-as-ca"],
)
def test_bad_tls_files_are_one_line(certs, capsys, args: list[str], expected: str) -> None:
    files = {
        "key": certs["key"],
        "cert": certs["cert"],
        "ca_key": str(Path(certs["ca"]).with_name("ca.key")),
    }
    assert main(["-p", str(free_port()), *(a.format(**files) for a in args)]) == 1
    err = capsys.readouterr().err
    assert err == f"disque-tui: could not create an SSL context: {expected.format(**files)}\n"


def test_tls_connection_failures_are_one_line(start_tls_node, certs, capsys) -> None:
    node, tls_port = start_tls_node(auth_clients="yes")
    cases = [
        (["-p", str(tls_port)], "Connection closed by server (is it a TLS port? see --tls)"),
        (
            ["-p", str(tls_port), "--tls"],  # the system's CAs do not know the test CA
            "TLS handshake failed: certificate verify failed: ",
        ),
        (
            ["-p", str(tls_port), "--cacert", certs["ca"]],
            "Connection closed by server (does "
            "the node require a client certificate? see --cert and --key)",
        ),
        (
            ["-p", str(node.port), "--insecure"],
            "TLS handshake failed: wrong version number (is it the node's tls-port?)",
        ),
    ]
    for args, reason in cases:
        assert main([*args, "--timeout", "3"]) == 1, args
        err = capsys.readouterr().err
        assert err.startswith(f"disque-tui: cannot connect to 127.0.0.1:{args[1]}: {reason}")
        assert len(err.splitlines()) == 1, err


def test_a_reset_on_the_first_command_reads_as_a_hang_up(capsys) -> None:
    """A TLS port drops a plain client with a FIN, or a RST when the client's HELLO
    still sits unread: both are the node hanging up (CI saw the RST once)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def reset_the_first_client() -> None:
            peer, _ = listener.accept()
            peer.recv(1)  # the rest of HELLO stays unread, as at a TLS port
            peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            peer.close()

        thread = threading.Thread(target=reset_the_first_client)
        thread.start()
        assert main(["-p", str(port), "--timeout", "3"]) == 1
        thread.join()
    err = capsys.readouterr().err
    assert err == (
        f"disque-tui: cannot connect to 127.0.0.1:{port}: "
        "Connection closed by server (is it a TLS port? see --tls)\n"
    )


def test_runs_over_tls_in_a_terminal(start_tls_node, certs) -> None:
    """The real command, given the node's tls-port and a client certificate."""
    import pexpect

    _, tls_port = start_tls_node(auth_clients="yes")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", COLUMNS="100", LINES="30")
    child = pexpect.spawn(
        sys.executable,
        [
            "-m",
            "disque_tui",
            "-p",
            str(tls_port),
            "--tls",
            "--cacert",
            certs["ca"],
            "--cert",
            certs["cert"],
            "--key",
            certs["key"],
            "--interval",
            "0.3",
        ],
        env=env,
        dimensions=(30, 100),
        timeout=20,
    )
    try:
        child.expect("1/1 nodes up")
        child.send("q")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


# ---- --once, and no terminal ----------------------------------------------------------


def test_once_prints_the_overview_as_plain_text(start_cluster) -> None:
    """`disque-tui --once` (like `top -b -n 1`): the overview once, plain text, exit
    0 when nothing is wrong, 1 once a node is down with jobs stranded on it."""
    cluster = start_cluster(3)
    cluster[0].call("ADDJOB", "fine", "x", 0)
    healthy = run_tui("-p", str(cluster[0].port), "--once", "--interval", "0.2")
    assert healthy.returncode == 0, healthy.stderr
    assert "\x1b" not in healthy.stdout
    lines = healthy.stdout.splitlines()
    assert lines[0].startswith(f"disque-tui 127.0.0.1:{cluster[0].port} │ 3/3 nodes up │ ")
    assert "No problem: every node up, no queue stranded or stuck." in lines
    assert sum(line.startswith("  ") and "  up  " in line for line in lines) == 3

    # Jobs delivered and not acknowledged are in no queue: QLEN misses them, this says so.
    for i in range(2):
        cluster[1].call("ADDJOB", "orders", f"o{i}", 0, "REPLICATE", 2, "RETRY", 600)
    assert len(cluster[1].call("GETJOB", "COUNT", 2, "FROM", "orders")) == 2
    taken = run_tui("-p", str(cluster[0].port), "--once", "--interval", "0.2")
    assert taken.returncode == 0, taken.stderr  # a warning
    assert re.search(
        r"  WARN 2 jobs of queue orders in no queue, next re-queue in (9m5\d|10m0\d)s: "
        "delivered and not acknowledged yet",
        taken.stdout,
    ), taken.stdout

    for i in range(5):
        cluster[2].call("ADDJOB", "stuck", f"job-{i}", 0, "REPLICATE", 1)
    for i in range(3):  # queued there, copied on the two others
        cluster[2].call("ADDJOB", "copied", f"job-{i}", 0, "REPLICATE", 3)
    dead_id = cluster[2].call("CLUSTER", "MYID").decode()
    cluster[2].kill()
    # Without a terminal (stdout a pipe) and without --once: the same, never escape codes.
    failing = run_tui("-p", str(cluster[0].port), "--interval", "0.2")
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "\x1b" not in failing.stdout
    assert f"  ERR  node {dead_id[:8]} 127.0.0.1:{cluster[2].port} DOWN" in failing.stdout
    # Down from the start, it is counted from the copies the nodes up hold.
    held = re.search(
        r"DOWN never seen.*; it holds (\d+) jobs copied on the nodes up", failing.stdout
    )
    assert held and int(held.group(1)) >= 3, failing.stdout
    assert "│ 2/3 nodes up │" in failing.stdout.splitlines()[0]


# ---- a real terminal ----------------------------------------------------------------------


def test_the_overview_in_a_real_terminal(start_cluster, tmp_path) -> None:
    """The real program in tmux at 160x45, as an operator would see it: the overview
    fills the screen (problems, nodes, queues that matter), and follows a node's death."""
    import shutil
    import time

    from testkit.nodes import wait_for

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")
    cluster = start_cluster(3)
    for i in range(20):
        cluster[2].call("ADDJOB", "only-there", f"job-{i}", 0, "REPLICATE", 1)
    socket = str(tmp_path / "tmux.sock")
    tmux = ["tmux", "-S", socket]
    command = (
        f"cd {ROOT} && PYTHONPATH={ROOT} TERM=xterm-256color exec {sys.executable} "
        f"-m disque_tui -p {cluster[0].port} --interval 0.3"
    )
    # pytest-xdist exports COLUMNS=80 and LINES=24 to its workers; the program, like
    # any curses one, takes them over the terminal's own size, so they must not
    # reach the tmux server (whose environment its windows inherit).
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "160", "-y", "45", command],
        check=True,
        timeout=10,
        env={**env, "TMUX": ""},
    )

    def screen() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p"], capture_output=True, text=True, timeout=10
        ).stdout

    try:

        def overview() -> str | None:
            text = screen()
            return text if "3/3 nodes up" in text and "q Quit" in text else None

        first = wait_for(overview, 20, message="the overview on the terminal")
        lines = first.splitlines()
        assert len(lines) == 45 and "q Quit" in lines[44], "not drawn at 160x45:\n" + first
        assert lines[1].split()[:2] == ["Overview", "[1]"]
        assert "✔ no problem" in lines[3]
        assert sum(f"127.0.0.1:{n.port}" in line for n in cluster for line in lines) >= 3
        assert any(line.split()[:1] == ["only-there"] for line in lines)
        cluster[2].kill()

        # Header and body must change in one capture: on a loaded CI machine a
        # capture once showed the stranded line under the header of the frame before.
        def after_the_kill() -> str | None:
            text = screen()
            header = text.splitlines()[0] if text else ""
            stranded = "20 jobs of queue only-there stranded on down node" in text
            return (
                text if stranded and "2/3 nodes up" in header and "20 stranded" in header else None
            )

        text = wait_for(after_the_kill, 20, message="the stranded jobs named on the terminal")
        used = [line for line in text.splitlines() if line.strip()]
        assert len(used) >= 12, text
        subprocess.run([*tmux, "send-keys", "q"], timeout=10)
        deadline = time.monotonic() + 10
        while (
            subprocess.run([*tmux, "has-session"], capture_output=True, timeout=10).returncode == 0
        ):
            assert time.monotonic() < deadline, "q did not quit:\n" + screen()
            time.sleep(0.1)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=10)
