"""The interactive prompt, driven through a pseudo-terminal with pexpect."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest
from cli_screen import Screen

from testkit.nodes import wait_for

pytestmark = pytest.mark.timeout(60)


class Repl:
    """A `disque` REPL on a terminal, read through a Screen: what a person sees."""

    def __init__(self, child: pexpect.spawn, port: int) -> None:
        self.child = child
        self.port = port
        self.screen = Screen()

    def pump(self) -> bool:
        """Feed what the program printed meanwhile; False once it has exited."""
        try:
            self.screen.feed(self.child.read_nonblocking(65536, timeout=0.05))
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            return False
        return True

    def wait(self, check: Callable[[], object], what: str, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline or not self.pump() and not check():
                raise AssertionError(f"timed out waiting for {what}; screen:\n{self.screen.text()}")

    def wait_text(self, pattern: str, from_row: int = 0) -> None:
        self.wait(lambda: re.search(pattern, self.screen.text(from_row)), repr(pattern))

    def wait_line(self, expected: str) -> None:
        """Wait until the cursor line reads exactly `expected`."""
        self.wait(lambda: self.screen.cursor_line() == expected, repr(expected))

    def label(self, port: int | None = None) -> str:
        return f"127.0.0.1:{port or self.port}>"

    def prompt(self, port: int | None = None) -> None:
        self.wait_line(self.label(port))

    def send(self, text: str) -> None:
        self.child.send(text)

    def ask(self, line: str, reply: str, port: int | None = None) -> None:
        """Type a line, wait for the reply pattern, then for a fresh prompt."""
        start = self.screen.row
        self.send(line + "\r")
        self.wait_text(reply, start)
        self.prompt(port)

    def exit_status(self) -> int | None:
        self.child.expect(pexpect.EOF)
        self.child.close()
        return self.child.exitstatus


@pytest.fixture
def repl(node, spawn):
    def start(*args: str, port: int | None = None) -> Repl:
        port = port or node.port
        session = Repl(spawn("-p", str(port), *args), port)
        session.prompt()
        return session

    return start


def test_prompt_and_typed_replies(repl) -> None:
    session = repl()
    session.ask("addjob q body 0", r"\nD-[0-9a-f]{8}-\S{24}-05a1\n")
    session.ask("qlen q", r"\(integer\) 1\n")
    session.ask("qpeek q 1", r'1\) 1\) "q"\n   2\) "D-')
    session.ask("show nope", r"\(error\) BADID Invalid Job ID format\.\n")
    session.ask("getjob nohang from nothing", r"\(nil\)\n")


def test_hello_3_switches_the_session_to_resp3(repl) -> None:
    """As in redis-cli 7: after HELLO 3 the node answers in RESP3 and maps print as
    `1# "key" => value`; HELLO 2 goes back (it was a protocol error and a lost
    connection before)."""
    session = repl()
    session.ask("addjob q body 0", r"\nD-")
    session.ask("hello 3", r'1# "server" => "disque"\n(.*\n)*3# "proto" => \(integer\) 3\n')
    session.ask("qstat q", r' 1# "name" => "q"\n 2# "len" => \(integer\) 1\n')
    session.ask("getjob nohang from nothing", r"\(nil\)\n")
    session.ask("hello", r'1\) \(integer\) 1\n2\) "[0-9a-f]{40}"\n')
    session.ask("hello 2", r' 5\) "proto"\n 6\) \(integer\) 2\n')
    session.ask("qstat q", r' 1\) "name"\n 2\) "q"\n')
    assert "Protocol error" not in session.screen.text()


@pytest.mark.parametrize("term", ["xterm-256color", "dumb"])
def test_expect_sees_the_exact_prompt_at_once(spawn, node, term: str) -> None:
    """As an expect script drives redis-cli: wait for the exact prompt text, send a
    line, wait for the reply and the next prompt. pexpect never answers cursor
    position requests: no wait, no warning, a reply per command at once."""
    prompt = f"127.0.0.1:{node.port}> "
    started = time.monotonic()
    child = spawn("-p", str(node.port), env={"TERM": term}, timeout=5)
    child.logfile_read = transcript = io.StringIO()
    child.expect_exact(prompt)
    assert time.monotonic() - started < 4
    started = time.monotonic()
    for i in range(20):
        child.send(f"addjob q{i} body 0\r")
        child.expect(r"D-[0-9a-f]{8}-\S{24}-05a1")
        child.expect_exact(prompt)
    # A second per command when CPR is awaited: 20 s.
    assert time.monotonic() - started < 8
    child.send("qlen q7\r")
    child.expect_exact("1")
    child.expect_exact(prompt)
    child.send("quit\r")
    child.expect(pexpect.EOF)
    assert "cursor position" not in transcript.getvalue()


def test_hints_while_typing(repl) -> None:
    session = repl()
    label = session.label()
    session.send("addjob ")
    session.wait_line(
        f"{label} addjob queue job ms-timeout [REPLICATE count] [DELAY sec] "
        "[RETRY sec] [TTL sec] [MAXLEN count] [ASYNC]"
    )
    session.send("q body 0 ttl")
    session.wait_line(
        f"{label} addjob q body 0 ttl sec [REPLICATE count] [DELAY sec] "
        "[RETRY sec] [MAXLEN count] [ASYNC]"
    )
    session.send("\x03")  # Ctrl-C clears the line
    session.prompt()
    session.send(":set nohints\r")
    session.prompt()
    session.send("getjob")
    session.wait_line(f"{label} getjob")
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        session.pump()
    assert session.screen.cursor_line() == f"{label} getjob", "no hint with :set nohints"


def test_tab_completion(repl) -> None:
    session = repl()
    label = session.label()
    session.send("qle\t")
    session.wait_line(f"{label} qlen queue")  # completed, and the hint follows
    session.ask(" q", r"\(integer\) 0")
    session.send("GETJOB NO\t")
    session.wait_line(
        f"{label} GETJOB NOHANG [TIMEOUT ms-timeout] [COUNT count] "
        "[WITHCOUNTERS] FROM queue [queue ...]"
    )
    session.ask(" FROM q", r"\(nil\)")
    session.send("de\t")  # several candidates: a menu
    session.wait_text(r"debug")
    session.wait_text(r"dequeue")
    session.wait_text(r"deljob")
    session.send("\x03")
    session.prompt()
    session.send("help @qu\t")
    session.wait_line(f"{label} help @queues")
    session.ask("", r"QSTAT")


def test_help(repl) -> None:
    session = repl()
    session.ask("help", r'"help @<group>" to get a list of commands in <group>')
    session.ask("help addjob", r"  ADDJOB queue job ms-timeout .*\n  summary: Add a job")
    session.ask("help @queues", r"  QSTAT queue\n")
    session.ask("help config get", r"  group: server")


def test_repeat_and_timing(repl) -> None:
    session = repl()
    session.ask("3 ping", r"PONG\nPONG\nPONG\n")
    session.ask("getjob timeout 600 from nothing", r"\(nil\)\n\(0\.\d\ds\)\n")


def test_history_across_sessions(repl, cli_env) -> None:
    first = repl()
    first.ask("qlen fromhistory", r"\(integer\) 0")
    first.ask("auth secret", r"\(error\)")
    first.ask("hello 3 auth default s3cret", r"\(error\)")
    first.ask("config set requirepass s3cret", r"\nOK\n")
    first.ask("config set requirepass ''", r"\nOK\n")
    first.ask("config set cluster-password s3cret", r"\(error\)")
    first.ask("config set loglevel notice", r"\nOK\n")
    first.send("\x04")  # Ctrl-D
    assert first.exit_status() == 0
    path = Path(cli_env["DISQUECLI_HISTFILE"])
    assert path.stat().st_mode & 0o777 == 0o600, "the history is its owner's only"
    lines = path.read_text().splitlines()
    assert lines == ["qlen fromhistory", "config set loglevel notice"], (
        "AUTH, HELLO with AUTH and CONFIG SET of a secret are never written to the history"
    )
    second = repl()
    second.send("\x1b[A")  # Up arrow: the last command of the previous session
    second.wait_line(f"{second.label()} config set loglevel notice")
    second.send("\x1b[A")
    second.wait_line(f"{second.label()} qlen fromhistory")
    second.ask("", r"\(integer\) 0")


def test_connect_to_another_node(repl, start_node) -> None:
    other = start_node()
    session = repl()
    session.ask(f"connect 127.0.0.1 {other.port}", "", port=other.port)
    other_id = other.call("CLUSTER", "MYID").decode()
    session.ask("cluster myid", re.escape(other_id), port=other.port)


def test_reconnect_after_the_node_restarts(repl, node) -> None:
    session = repl()
    session.ask("qlen q", r"\(integer\) 0")
    node.kill()
    session.send("qlen q\r")
    session.wait_text("Error: Server closed the connection")
    session.wait_line("not connected>")
    session.send("qlen q\r")
    session.wait_text(f"Could not connect to Disque at 127.0.0.1:{node.port}: Connection refused")
    session.wait_line("not connected>")
    node.start()
    session.ask("qlen q", r"\(integer\) 0")


def test_start_without_a_node(spawn, node) -> None:
    port = node.port
    node.kill()
    session = Repl(spawn("-p", str(port)), port)
    session.wait_text(f"Could not connect to Disque at 127.0.0.1:{port}")
    session.wait_line("not connected>")
    node.start()
    session.ask("ping", "PONG")


def _queue_stat(node, queue: str, field: str):
    reply = node.call("QSTAT", queue)
    return dict(zip(reply[::2], reply[1::2], strict=True)).get(field.encode()) if reply else None


def test_ctrl_c_interrupts_a_blocked_getjob(repl, node) -> None:
    session = repl()
    session.send("getjob from emptyqueue\r")
    wait_for(lambda: _queue_stat(node, "emptyqueue", "blocked") == 1, message="GETJOB to block")
    session.send("\x03")
    session.prompt()
    session.ask("qlen q", r"\(integer\) 0")


def test_quit_and_ctrl_d(repl) -> None:
    session = repl()
    session.send("quit\r")
    assert session.exit_status() == 0
    other = repl()
    other.send("\x04")
    assert other.exit_status() == 0


def test_monitor_until_ctrl_c(repl, node) -> None:
    session = repl()
    session.send("monitor\r")
    session.wait_text(r"\nOK\n")
    node.call("QLEN", "watched")
    session.wait_text(r'\n\d+\.\d+ \[0 127\.0\.0\.1:\d+\] "QLEN" "watched"\n')
    session.send("\x03")
    session.prompt()
    session.ask("ping", "PONG")


def test_auth_typed_at_the_prompt_survives_a_reconnection(start_node, spawn) -> None:
    secured = start_node(config={"requirepass": "pw"})
    session = Repl(spawn("-p", str(secured.port)), secured.port)
    session.prompt()
    session.ask("qlen q", r"\(error\) NOAUTH Authentication required\.")
    session.ask("auth pw", r"\nOK\n")
    secured.kill()
    secured.start()
    session.send("qlen q\r")
    session.wait_text("Error: Server closed the connection")
    session.ask("qlen q", r"\(integer\) 0")


@pytest.mark.parametrize(
    ("line", "sensitive"),
    [
        ("AUTH pw", True),
        ("3 auth pw", True),
        ("hello 3 auth default pw", True),
        ("HELLO 3 SETNAME me AUTH default pw", True),
        ("hello 3", False),
        ("hello", False),
        ("config set requirepass pw", True),
        ("CONFIG SET cluster-password pw", True),
        ("config set loglevel debug requirepass pw", True),
        ("config set loglevel debug", False),
        ("config get requirepass", False),
        ("addjob auth body 0", False),
    ],
)
def test_lines_with_a_password_are_recognised(line: str, sensitive: bool) -> None:
    from disque_cli.repl import is_sensitive

    assert is_sensitive(line) is sensitive
