"""docs/upgrade.md's walkthrough, run as the page writes it.

The page's first shell block upgrades a 3-node C Disque cluster to ours one
node at a time, then rolls a node back. This test reads that block and runs
each of its lines through a shell, for each node in turn, with only the
page's placeholders replaced: the port (7711), the config file
(/etc/disque/7711.conf) and C Disque's binary. Before each node stops it
holds queued jobs; each must be queued again within 2 s of the node
answering after its restart, by C Disque or by ours. A ``disque --cluster
check`` line is run until it passes, as the page says to wait for a clean
check before the next node. Needs a built C Disque (skipped, saying so,
where there is none), and the ``disque`` and ``disque-server`` commands.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from testkit.nodes import wait_for
from testkit.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "upgrade.md"
C_BINARY = "/opt/disque-1.0-rc1/src/disque-server"  # the page's path to C Disque
BACKLOG = "walkthrough"


def walkthrough() -> tuple[list[str], list[str]]:
    """The page's first sh block as command lines: the upgrade of one node, and the
    rollback of one (comments and blank lines left out)."""
    block = re.search(r"```sh\n(.*?)```", PAGE.read_text(), re.S)
    assert block, f"{PAGE}: no sh block"
    upgrade: list[str] = []
    rollback: list[str] = []
    target = upgrade
    for line in block.group(1).splitlines():
        if line.startswith("# Rolling back"):
            target = rollback
        command = line.split("  #")[0].strip()
        if command and not command.startswith("#"):
            target.append(command)
    return upgrade, rollback


class Site:
    """Three nodes' config files and processes, as an operator's hosts hold them."""

    def __init__(self, tmp: Path, c_binary: str) -> None:
        self.c_binary = c_binary
        self.ports = [free_port() for _ in range(3)]
        self.tmp = tmp
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        for port in self.ports:
            (tmp / str(port)).mkdir()
            self.conf(port).write_text(
                f"port {port}\ndir {tmp / str(port)}\nappendonly yes\n"
                f"cluster-node-timeout 3000\nlogfile {tmp / str(port) / 'node.log'}\n"
            )

    def conf(self, port: int) -> Path:
        return self.tmp / f"{port}.conf"

    def line_for(self, command: str, port: int) -> str:
        return (
            command.replace("/etc/disque/7711.conf", str(self.conf(port)))
            .replace(C_BINARY, self.c_binary)
            .replace("7711", str(port))
        )

    def run(self, command: str, port: int) -> None:
        line = self.line_for(command, port)
        words = shlex.split(line)
        if words[0].endswith("disque-server"):  # a server: it runs on, in the background
            self.start(port, words)
        elif "--cluster check" in line:
            wait_for(lambda: self.shell(line).returncode == 0, 20, message=f"a clean `{line}`")
        elif words[:3] == ["disque", "-p", str(port)] and words[3] == "shutdown":
            self.shell(line)  # (no reply: the node exits)
            proc = self.procs.pop(port)
            assert proc.wait(30) == 0, f"{line}: exit code {proc.returncode}"
        else:
            done = self.shell(line)
            assert done.returncode == 0, f"{line}: {done.stdout}{done.stderr}"

    def shell(self, line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line], capture_output=True, text=True, timeout=60, cwd=self.tmp
        )

    def start(self, port: int, words: list[str]) -> None:
        self.procs[port] = subprocess.Popen(
            words, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.tmp
        )
        wait_for(lambda: self.answers(port), 20, message=f"node {port} answers")

    def answers(self, port: int) -> bool:
        try:
            with redis.Redis(port=port, protocol=2, socket_timeout=2) as c:
                return c.ping()
        except redis.RedisError:
            return False

    def call(self, port: int, *args: object) -> object:
        with redis.Redis(port=port, protocol=2, socket_timeout=10) as c:
            return c.execute_command(*args)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)


@pytest.fixture
def site(tmp_path: Path, reference_binary: str) -> Iterator[Site]:
    for command in ("disque", "disque-server"):
        if not shutil.which(command):
            pytest.skip(f"`{command}` is not on PATH (pip install -e .)")
    site = Site(tmp_path, reference_binary)
    try:
        yield site
    finally:
        site.stop_all()


def step(site: Site, lines: list[str], port: int) -> float:
    """Run one node's lines with jobs queued on it: the seconds from the node
    answering again to its jobs queued there again."""
    ids = [
        site.call(port, "ADDJOB", BACKLOG, f"job {i}", "0", "REPLICATE", "2", "RETRY", "300")
        for i in range(20)
    ]
    assert site.call(port, "QLEN", BACKLOG) == len(ids)
    started = 0.0
    for line in lines:
        site.run(line, port)
        if shlex.split(site.line_for(line, port))[0].endswith("disque-server"):
            started = time.monotonic()
            wait_for(
                lambda: site.call(port, "QLEN", BACKLOG) == len(ids),
                10,
                message=f"{port}: its {len(ids)} queued jobs queued again",
            )
            queued_after = time.monotonic() - started
            assert queued_after <= 2.0, f"{port}: queued again after {queued_after:.1f} s"
    for jid in ids:  # consumed, so the next node's count is its own
        site.call(port, "ACKJOB", jid)
    return time.monotonic() - started


@pytest.mark.timeout(300)
def test_the_upgrade_walkthrough_as_written_keeps_every_queue(site: Site) -> None:
    upgrade, rollback = walkthrough()
    assert any("shutdown" in line for line in upgrade), upgrade
    assert any("shutdown" in line for line in rollback), rollback
    for port in site.ports:  # the C cluster
        site.start(port, [site.c_binary, str(site.conf(port))])
    for port in site.ports[1:]:
        site.call(port, "CLUSTER", "MEET", "127.0.0.1", str(site.ports[0]))
    first = site.line_for("disque --cluster check 127.0.0.1:7711", site.ports[0])
    wait_for(lambda: site.shell(first).returncode == 0, 30, message="the C cluster meshed")
    for port in site.ports:
        step(site, upgrade, port)
    servers = site.shell(first + " --json").stdout
    assert servers.count('"python"') == 3, servers
    step(site, rollback, site.ports[0])
    assert site.shell(first + " --json").stdout.count('"python"') == 2
