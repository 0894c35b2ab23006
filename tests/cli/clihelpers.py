"""Helpers shared by the CLI tests (fixtures live in conftest.py)."""

from __future__ import annotations

import signal
from dataclasses import dataclass

import pexpect


@dataclass
class CliResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")


def tty_output(child: pexpect.spawn) -> str:
    """Everything a one-shot command printed on its terminal, with \\n line ends."""
    child.expect(pexpect.EOF)
    child.close()
    return child.before.replace("\r\n", "\n")


def default_sigint() -> None:
    """preexec_fn of every spawned program: SIGINT back to its default action.

    A test run started in the background by a non-interactive shell (`pytest &`)
    ignores SIGINT, and ignored signals stay ignored across exec: the Ctrl-C
    tests would then test nothing but that inheritance."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
