"""Fixtures for the `disque` CLI tests: run it as a real process, through pipes
or a pseudo-terminal, against real disque-server nodes (tests/conftest.py)
and, for byte-for-byte comparisons, against redis-cli and redis-server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest
from clihelpers import CliResult, default_sigint

from testkit.processes import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment: own HOME and history file, no FAKETTY, no password, and
    prompt_toolkit's own settings left alone (the REPL must cope with a terminal
    that never answers cursor position requests, as pexpect's does not)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FAKETTY", "DISQUECLI_AUTH", "DISQUECLI_HISTFILE")
        and not k.startswith("PROMPT_TOOLKIT_")
    }
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        HOME=str(home),
        DISQUECLI_HISTFILE=str(home / "history"),
        TERM="xterm",
        COLUMNS="200",
        LINES="50",
    )
    return env


Runner = Callable[..., CliResult]


@pytest.fixture
def run_cli(cli_env: dict[str, str]) -> Runner:
    """run_cli(*args, input=b"", env={}, timeout=20): `disque` with stdin/stdout as pipes."""

    def run(
        *args: str | bytes,
        input: bytes | None = b"",
        env: dict[str, str] | None = None,
        timeout: float = 20,
    ) -> CliResult:
        proc = subprocess.run(
            [sys.executable, "-m", "disque_cli", *args],
            input=input,
            capture_output=True,
            timeout=timeout,
            cwd=ROOT,
            env={**cli_env, **(env or {})},
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def cli(node, run_cli: Runner) -> Runner:
    """`disque -p <node port> ...`."""

    def run(*args: str | bytes, **kwargs) -> CliResult:
        return run_cli("-p", str(node.port), *args, **kwargs)

    return run


@pytest.fixture
def spawn(cli_env: dict[str, str]) -> Iterator[Callable[..., pexpect.spawn]]:
    """spawn(*args): `disque` on a pseudo-terminal (a real tty for stdin and stdout)."""
    children: list[pexpect.spawn] = []

    def start(*args: str, env: dict[str, str] | None = None, timeout: float = 10) -> pexpect.spawn:
        child = pexpect.spawn(
            sys.executable,
            ["-m", "disque_cli", *args],
            cwd=str(ROOT),
            env={**cli_env, **(env or {})},
            encoding="utf-8",
            codec_errors="replace",
            timeout=timeout,
            dimensions=(50, 200),
            preexec_fn=default_sigint,
        )
        children.append(child)
        return child

    yield start
    for child in children:
        child.close(force=True)


# ---- redis-cli and redis-server, for byte-for-byte comparisons -----------------------


@pytest.fixture(scope="session")
def redis_cli() -> str:
    path = shutil.which("redis-cli")
    if path is None:
        pytest.skip("redis-cli is not installed (apt install redis-tools)")
    return path


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A throw-away redis-server: its port. Skipped where redis-server is missing."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port(bus=False)
    workdir = tmp_path_factory.mktemp("redis")
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = ServerProcess("redis-server", [*argv, "--dir", str(workdir)], port, workdir / "log")
    server.start()
    try:
        yield port
    finally:
        server.terminate()
