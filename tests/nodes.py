"""Real `disque-server` processes for tests: start, stop, kill, pause, restart.

Every node runs as its own process (`python -m disque_server`) on a free
port, in its own temporary directory, logging to a file the test can read.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02,
             message: str = "condition") -> Any:
    """Poll `predicate` until it returns a truthy value; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # the node may be starting or restarting
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}"
                         + (f" (last error: {last_exc!r})" if last_exc else ""))


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A client port whose cluster bus port (port + 10000) is free too."""
    for _ in range(1000):
        port = random.randint(20000, 45000)
        if _port_free(port) and _port_free(port + 10000):
            return port
    raise RuntimeError("no free port pair found")


class Node:
    """One disque-server process under test."""

    def __init__(self, workdir: Path, port: int | None = None,
                 config: dict[str, str] | None = None, args: list[str] | None = None):
        self.port = port or free_port()
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = dict(config or {})
        self.extra_args = list(args or [])
        self.proc: subprocess.Popen | None = None
        self.logfile = self.dir / "node.log"

    # ---- process control -------------------------------------------------
    def command_line(self) -> list[str]:
        cmd = [sys.executable, "-m", "disque_server", *self.extra_args,
               "--port", str(self.port), "--dir", str(self.dir),
               "--logfile", str(self.logfile)]
        for key, value in self.config.items():
            cmd += [f"--{key}", str(value)]
        return cmd

    def start(self, wait: bool = True) -> Node:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(self.command_line(), cwd=self.dir, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 15.0) -> None:
        def ready() -> bool:
            if self.proc and self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise AssertionError(f"node on {self.port} exited {self.proc.returncode}: {err}")
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG") or True
        try:
            wait_for(ready, timeout, message=f"node on port {self.port} to accept connections")
        except AssertionError:
            self.terminate()
            raise

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: the node dies without any cleanup."""
        if self.is_running():
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self, timeout: float = 10.0) -> int | None:
        """SIGTERM and wait: a clean shutdown."""
        if self.is_running():
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode if self.proc else None

    def pause(self) -> None:
        """SIGSTOP: the node is unreachable but keeps its state."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def restart(self) -> Node:
        self.terminate()
        return self.start()

    # ---- talking to it ---------------------------------------------------
    def client(self, **kwargs: Any) -> redis.Redis:
        """A redis-py client speaking RESP2 (raw replies, bytes)."""
        kwargs.setdefault("protocol", 2)
        kwargs.setdefault("socket_timeout", 10)
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def call(self, *args: Any) -> Any:
        with self.client() as c:
            return c.execute_command(*args)

    def log(self) -> str:
        return self.logfile.read_text(errors="replace") if self.logfile.exists() else ""

    def __repr__(self) -> str:
        return f"<Node port={self.port} dir={self.dir}>"
