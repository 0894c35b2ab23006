"""Server processes for the tests and the benchmarks: the one way both start them.

A node of this checkout (``python -m disque_server``), the C disque-server or a
redis-server runs as a process of its own on a free loopback port below the
kernel's ephemeral range (a node's cluster bus port, port + 10000, free too), in
its own directory, logging to a file. It is up when it answers PING; a process
that exits first fails the start with what it printed. It stops with SIGTERM,
then SIGKILL.

testkit/nodes.py builds the tests' ``Node`` on ``ServerProcess``; bench/ (run from
the checkout, never installed) its ``Server``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
BUS_OFFSET = 10000  # a node's cluster bus port: its client port + 10000
START_TIMEOUT = 20.0

# Ports handed out by free_port in this process: a port is free until its server
# binds it, and a cluster's nodes are often all given ports before any starts.
_given: set[int] = set()


class StartError(AssertionError):
    """A server did not come up: it exited, or did not answer PING in time. The
    message says which, with what it printed. (An AssertionError: in a test, a
    node that does not start is the test failing.)"""


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def port_range() -> tuple[int, int]:
    """The client ports this process may hand out (both ends included): all of
    10000 .. 32767 - 10000, or, in a pytest-xdist worker (PYTEST_XDIST_WORKER
    "gw<i>" of PYTEST_XDIST_WORKER_COUNT), a slice of its own, so that two
    workers never pick the same free port at once and race to bind it."""
    low, high = 10000, 32767 - BUS_OFFSET
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if worker.startswith("gw") and worker[2:].isdigit() and count > 1:
        index = int(worker[2:]) % count
        size = (high - low + 1) // count
        low += index * size
        high = low + size - 1
    return low, high


def free_port(bus: bool = True) -> int:
    """A free port below 32768, so that outgoing connections (ephemeral ports) cannot
    take it between this check and the bind; with ``bus``, port + 10000 is free too.
    Never one handed out before in this process, nor one another test worker may
    hand out (port_range)."""
    low, high = port_range()
    for _ in range(1000):
        port = random.randint(low, high)
        wanted = (port, port + BUS_OFFSET) if bus else (port,)
        if any(p in _given for p in wanted):
            continue
        if all(port_free(p) for p in wanted):
            _given.update(wanted)
            return port
    raise RuntimeError(f"no free port pair (port, port + 10000) found in {low}-{high}")


def node_argv(
    port: int,
    workdir: Path,
    logfile: Path,
    args: Sequence[str] = (),
    directives: Sequence[str] = (),
) -> list[str]:
    """A node's command line: ``args`` first (a config file), then its port, directory
    and log file, then ``directives`` (``--name value``: they may override those)."""
    return [
        sys.executable,
        "-m",
        "disque_server",
        *args,
        "--port",
        str(port),
        "--dir",
        str(workdir),
        "--logfile",
        str(logfile),
        *directives,
    ]


def node_env(source: Path = ROOT) -> dict[str, str]:
    """A node's environment: ``source`` (this checkout, or a copy of the node's
    sources) first on PYTHONPATH. Start the node in its own directory: ``python -m``
    puts the working directory first on the path, and the checkout's would shadow
    another source."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(source), env.get("PYTHONPATH", "")) if p)
    return env


def answers_ping(port: int, timeout: float = 1.0) -> bool:
    """Up: a reply to PING, +PONG or an error (-NOAUTH when a password is set)."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16)[:1] in (b"+", b"-")
    except OSError:
        return False


def die_with_parent() -> None:
    """Child side of Popen: get SIGTERM when the parent dies without cleaning up."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ServerProcess:
    """One server process on ``port``: started, up when it answers PING, stopped.

    ``output``: a file that gets its stdout and stderr (appended); None: stdout is
    dropped and stderr is a pipe, read if the process exits at start (a node that
    writes much to stderr would block on a pipe nobody reads: give it a file).
    ``detached``: in a session of its own (a Ctrl-C in the terminal is not its), and
    SIGTERM when this process dies (the benchmarks').
    """

    start_timeout = START_TIMEOUT  # seconds to answer PING (subclasses: their own)

    def __init__(
        self,
        name: str,
        argv: list[str],
        port: int,
        logfile: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        output: Path | None = None,
        detached: bool = False,
    ) -> None:
        self.name = name
        self.argv = argv
        self.port = port
        self.logfile = logfile  # the server's own log
        self.env = env
        self.cwd = cwd
        self.output = output
        self.detached = detached
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    # ---- process control -----------------------------------------------------------
    def command_line(self) -> list[str]:
        return self.argv

    def popen_options(self) -> dict[str, Any]:
        """More subprocess.Popen options (subclasses: a group ID, a limit)."""
        return {}

    def start(self, wait: bool = True) -> None:
        """Start the process; by default wait until it answers PING."""
        options = self.popen_options()
        if self.detached:
            options.setdefault("start_new_session", True)
            options.setdefault("preexec_fn", die_with_parent)
        with contextlib.ExitStack() as stack:
            stdout: int | IO[bytes] = subprocess.DEVNULL
            stderr: int | IO[bytes] = subprocess.PIPE
            if self.output is not None:
                stdout = stderr = stack.enter_context(open(self.output, "ab"))
            self.proc = subprocess.Popen(
                self.command_line(),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=self.env,
                cwd=self.cwd,
                **options,
            )
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the process answers PING; fail at once if it exits (with what
        it printed), or after ``timeout`` seconds (``start_timeout`` unless given;
        it is stopped then)."""
        if timeout is None:
            timeout = self.start_timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise StartError(
                    f"{self.name} on port {self.port} exited with code "
                    f"{self.proc.returncode} at start: {self.printed()}"
                )
            if answers_ping(self.port):
                return
            time.sleep(0.02)
        self.terminate()
        raise StartError(
            f"timed out after {timeout}s waiting for {self.name} on port {self.port} "
            f"to accept connections\n{self.log_tail()}"
        )

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: the process dies without any cleanup."""
        if self.proc is not None and self.is_running():
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, and SIGKILL after ``timeout`` seconds: its exit code."""
        if self.proc is not None and self.is_running():
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode if self.proc else None

    def pause(self) -> None:
        """SIGSTOP: the process is unreachable but keeps its state."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    # ---- what it printed, what it holds -----------------------------------------------
    def printed(self) -> str:
        """What a process that exited printed: its stderr pipe, or else the tail of
        its output file and log."""
        if self.proc is not None and self.proc.stderr is not None:
            return self.proc.stderr.read().decode(errors="replace")
        return self.log_tail()

    def log_tail(self, lines: int = 15) -> str:
        text = ""
        for path in (self.logfile, self.output):
            if path is not None:
                with contextlib.suppress(OSError):
                    text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def rss(self) -> int:
        """Resident set size of the process, in bytes (VmRSS of /proc/PID/status)."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    value, unit = line.split()[1:3]
                    assert unit.lower() == "kb", line
                    return int(value) * 1024
        raise RuntimeError(f"no VmRSS in /proc/{self.pid}/status")
