"""--latency, --latency-history and --stat (--cluster: test_cli_cluster.py)."""

from __future__ import annotations

import json
import re

import pexpect
import pytest

pytestmark = pytest.mark.timeout(30)


def test_latency_through_a_pipe_is_one_line(cli) -> None:
    raw = cli("--latency", "-i", "0.3")
    assert raw.returncode == 0
    assert re.fullmatch(r"(\d+) (\d+) \d+\.\d\d (\d+)\n", raw.out), raw.out
    samples = int(raw.out.split()[3])
    assert 5 <= samples <= 40, "one PING every 10 ms for 0.3 s"
    assert re.fullmatch(r"\d+,\d+,\d+\.\d\d,\d+\n", cli("--latency", "--csv", "-i", "0.1").out)
    stats = json.loads(cli("--latency", "--json", "-i", "0.1").out)
    assert set(stats) == {"min", "max", "avg", "count"} and stats["count"] > 0


def test_latency_on_a_terminal_is_live(spawn, node) -> None:
    child = spawn("-p", str(node.port), "--latency")
    child.expect(r"min: \d+, max: \d+, avg: \d+\.\d\d \((\d+) samples\)")
    first = int(child.match.group(1))
    child.expect(r"\x1b\[0G\x1b\[2Kmin: \d+, max: \d+, avg: \d+\.\d\d \((\d+) samples\)")
    assert int(child.match.group(1)) > first
    child.sendintr()  # Ctrl-C
    child.expect(pexpect.EOF)
    assert "Traceback" not in child.before
    child.close()
    assert child.exitstatus == 130


def test_latency_history_closes_a_range_every_interval(spawn, node) -> None:
    child = spawn("-p", str(node.port), "--latency-history", "-i", "0.3")
    child.expect(r"\(\d+ samples\) -- 0\.\d\d seconds range\r\n")
    child.expect(r"\(\d+ samples\) -- 0\.\d\d seconds range\r\n")


def test_stat(spawn, node, cli) -> None:
    cli("addjob", "q1", "a", "0")
    cli("addjob", "q2", "b", "0")
    child = spawn("-p", str(node.port), "--stat", "-i", "0.2")
    child.expect(r"jobs +queues +mem +clients +blocked +requests +connections\r\n")
    child.expect(r"2 +2 +[\d.]+[BKMG] +1 +0 +\d+ \(\+0\) +\d+\r\n")
    child.expect(r"2 +2 +[\d.]+[BKMG] +1 +0 +\d+ \(\+1\) +\d+\r\n")
