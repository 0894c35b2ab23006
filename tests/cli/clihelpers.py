"""Helpers shared by the CLI tests (fixtures live in conftest.py)."""

from __future__ import annotations

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
