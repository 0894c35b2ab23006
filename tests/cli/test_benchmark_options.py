"""disque-benchmark's command line (typer), in this process: the options of each
help panel, their defaults, and what a bad value gives (one line on stderr; exit
status 2 when the command line does not parse, 1 when a value is out of range).
None of these tests reaches a node: the runs are in test_benchmark.py."""

from __future__ import annotations

import pytest
import typer.main

from disque_benchmark.main import (
    DEFAULT_BODY,
    DEFAULT_CLIENTS,
    DEFAULT_JOBS,
    JOBS,
    LOAD,
    PROG,
    RUN,
    WHERE,
    Options,
    app,
    main,
    options,
)
from disque_cli import DEFAULT_HOST, DEFAULT_PORT, __version__

pytestmark = pytest.mark.timeout(30)


def parsed(*args: str) -> dict:
    """What the command line gives the command, parsed as the command parses it."""
    with typer.main.get_command(app).make_context(PROG, list(args)) as ctx:
        return dict(ctx.params)


def opts(*args: str) -> Options:
    return options(parsed(*args))


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert lines[0].startswith(f"{PROG}: ")
    assert "Traceback" not in text
    return lines[0]


# Every option: its names, the metavar of its value (None for a flag) and its panel.
# argparse's names, short flags and metavars; its groups are the panels.
OPTIONS = {
    WHERE: [
        (["-h", "--host"], "HOST"),
        (["-p", "--port"], "PORT"),
        (["--node"], "HOST:PORT"),
        (["--producer-node"], "HOST:PORT"),
        (["--consumer-node"], "HOST:PORT"),
        (["-a", "--auth"], "PASSWORD"),
    ],
    LOAD: [
        (["-c", "--clients"], "N"),
        (["--producers"], "N"),
        (["--consumers"], "N"),
        (["-n", "--jobs"], "N"),
        (["--duration"], "SECS"),
        (["-d", "--body-size"], "BYTES"),
        (["-P", "--pipeline"], "N"),
        (["--count"], "N"),
        (["--rate"], "JOBS/S"),
        (["--processes"], "N"),
        (["--idle"], "N"),
    ],
    JOBS: [
        (["--queue"], "NAME"),
        (["--queues"], "N"),
        (["--replicate"], "N"),
        (["--async"], None),
        (["--retry"], "SECS"),
        (["--ttl"], "SECS"),
        (["--addjob-timeout"], "MS"),
        (["--ack"], None),  # a choice: typer shows <normal|fast>
    ],
    RUN: [
        (["--drain-timeout"], "SECS"),
        (["--json"], None),
        (["-q", "--quiet"], None),
        (["--version"], None),
    ],
}


def test_every_option_keeps_its_names_metavar_and_group() -> None:
    params = typer.main.get_command(app).params
    got: dict[str, list] = {}
    for param in params:
        assert param.param_type_name == "option", param.name
        assert param.help, param.name
        got.setdefault(param.rich_help_panel, []).append((param.opts, param.metavar))
    assert got == OPTIONS


def test_defaults() -> None:
    o = opts()
    assert o.seed == (DEFAULT_HOST, DEFAULT_PORT) == ("127.0.0.1", 7711)
    assert (o.nodes, o.producer_nodes, o.consumer_nodes, o.password) == (None, None, None, None)
    assert (o.producers, o.consumers) == (DEFAULT_CLIENTS // 2, DEFAULT_CLIENTS // 2) == (25, 25)
    assert (o.jobs, o.duration) == (DEFAULT_JOBS, None) == (100_000, None)
    assert (o.body_size, o.pipeline, o.count) == (DEFAULT_BODY, 1, 1) == (64, 1, 1)
    assert (o.rate, o.processes, o.idle) == (0.0, 1, 0)
    assert o.queue == f"bench:{o.tag}" and len(o.tag) == 8
    assert (o.queues, o.replicate, o.asynchronous, o.retry, o.ttl) == (1, None, False, None, None)
    assert (o.addjob_timeout, o.ack) == (5000, "normal")
    assert (o.drain_timeout, o.json, o.quiet) == (30.0, False, False)
    assert opts().tag != o.tag  # a new queue for every run


def test_where() -> None:
    o = opts("-h", "10.0.0.5", "-p", "7712", "-a", "s3cret")
    assert (o.seed, o.password) == (("10.0.0.5", 7712), "s3cret")
    o = opts(
        "--host=db1",
        "--port=7713",
        "--node",
        "10.0.0.1:7711",
        "--node",
        "[::1]:7712",
        "--producer-node",
        "10.0.0.1:7711",
        "--consumer-node",
        "db2:7811",
        "--consumer-node",
        "db3:7811",
        "--auth",
        "pw",
    )
    assert o.seed == ("db1", 7713)
    assert o.nodes == [("10.0.0.1", 7711), ("::1", 7712)]
    assert o.producer_nodes == [("10.0.0.1", 7711)]
    assert o.consumer_nodes == [("db2", 7811), ("db3", 7811)]
    assert all(type(addr) is tuple for addr in o.nodes)  # plain tuples, as before typer
    assert o.password == "pw"


def test_load() -> None:
    o = opts("-c", "7", "-n", "500", "-d", "100", "-P", "4", "--processes", "2", "--idle", "3")
    assert (o.producers, o.consumers, o.jobs, o.body_size) == (3, 4, 500, 100)
    assert (o.pipeline, o.count, o.processes, o.idle) == (4, 4, 2, 3)  # COUNT follows -P
    o = opts("-c", "1", "--count", "8", "-P", "2", "--rate", "2500.5")
    assert (o.producers, o.consumers, o.count, o.rate) == (1, 1, 8, 2500.5)
    o = opts("--producers", "5", "--consumers", "0", "--jobs", "1_000")
    assert (o.producers, o.consumers, o.jobs) == (5, 0, 1000)
    o = opts("--duration", "2.5")
    assert (o.jobs, o.duration) == (None, 2.5)  # no job limit
    o = opts("--duration", "2.5", "-n", "10", "--body-size", "24", "--pipeline", "3")
    assert (o.jobs, o.duration, o.body_size, o.pipeline) == (10, 2.5, 24, 3)


def test_jobs() -> None:
    o = opts(
        "--queue",
        "orders",
        "--queues",
        "3",
        "--replicate",
        "2",
        "--async",
        "--retry",
        "0",
        "--ttl",
        "60",
        "--addjob-timeout",
        "0",
        "--ack",
        "fast",
    )
    assert (o.queue, o.queues, o.replicate, o.asynchronous) == ("orders", 3, 2, True)
    assert (o.retry, o.ttl, o.addjob_timeout, o.ack) == (0, 60, 0, "fast")
    assert type(o.ack) is str  # as argparse gave it: the runs and --json use the text
    assert opts("--ack", "normal").ack == "normal"


def test_run() -> None:
    o = opts("--drain-timeout", "0", "--json", "-q")
    assert (o.drain_timeout, o.json, o.quiet) == (0.0, True, True)
    assert opts("--quiet").quiet is True


def test_version_and_help(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"{PROG} {__version__}\n"
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for panel in ("Options", WHERE, LOAD, JOBS, RUN):
        assert f"─ {panel} ─" in out, panel
    host = next(line for line in out.splitlines() if "--host" in line)
    assert host.strip("│ ").split() == [
        "--host",
        "-h",
        "HOST",
        *f"seed node host (default {DEFAULT_HOST})".split(),
    ]
    assert "default 100,000, or no limit with --duration" in out
    assert "[default:" not in out  # the help texts say their defaults, once
    assert "examples:" in out and "--json prints one object" in out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-n", "lots"], "Invalid value for '-n' / '--jobs'"),
        (["-p", "http"], "Invalid value for '-p' / '--port'"),
        (["--rate", "fast"], "Invalid value for '--rate'"),
        (["--duration", "1m"], "Invalid value for '--duration'"),
        (["--bogus"], "No such option: --bogus"),
        (["--proc", "2"], "No such option: --proc"),  # no abbreviations, unlike argparse
        (["--ack", "slow"], "'slow' is not one of 'normal', 'fast'"),
        (["--node", "nohost"], "Invalid value for '--node': expected HOST:PORT, got 'nohost'"),
        (["--node", "host:"], "expected HOST:PORT, got 'host:'"),
        (["--producer-node", ":7711"], "expected HOST:PORT, got ':7711'"),
        (["--consumer-node", "host:70000"], "expected HOST:PORT, got 'host:70000'"),
        (["--node", "host:0"], "expected HOST:PORT, got 'host:0'"),
        (["-c"], "Option '-c' requires an argument"),
        (["-h"], "Option '-h' requires an argument"),
        (["--json=yes"], "Option '--json' does not take a value"),
        (["7711"], "Got unexpected extra argument"),
    ],
)
def test_a_command_line_that_does_not_parse(
    capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    assert main(args) == 2
    out, err = capsys.readouterr()
    line = one_line(err)
    assert words in line
    assert line.endswith(" (see --help)") and not line.endswith(". (see --help)")
    assert out == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "0"], "-p must be a port number (1-65535), got 0"),
        (["-p", "65536"], "-p must be a port number (1-65535), got 65536"),
        (["-c", "0"], "-c must be at least 1, got 0"),
        (["--producers", "0"], "--producers must be at least 1, got 0"),
        (["--consumers", "-1"], "--consumers must be 0 or more, got -1"),
        (["-n", "0"], "-n must be at least 1, got 0"),
        (["--duration", "0"], "--duration must be > 0, got 0.0"),
        (["--duration", "nan"], "--duration must be > 0, got nan"),
        (["-d", "23"], "-d must be at least 24 (the body holds the run tag and send time), got 23"),
        (["-P", "0"], "-P must be at least 1, got 0"),
        (["--count", "0"], "--count must be at least 1, got 0"),
        (["--rate", "-5"], "--rate must be > 0, got -5.0"),
        (["--processes", "0"], "--processes must be at least 1, got 0"),
        (["--processes", "9", "-c", "4"], "--processes 9 is more than the 4 connections"),
        (["--processes", "3", "--producers", "1", "--consumers", "1"], "than the 2 connections"),
        (["--idle", "-1"], "--idle must be 0 or more, got -1"),
        (["--queues", "0"], "--queues must be at least 1, got 0"),
        (["--replicate", "0"], "--replicate must be between 1 and 65535, got 0"),
        (["--replicate", "65536"], "--replicate must be between 1 and 65535, got 65536"),
        (["--retry", "-1"], "--retry must be 0 or more, got -1"),
        (["--ttl", "0"], "--ttl must be > 0, got 0"),
        (["--addjob-timeout", "-1"], "--addjob-timeout must be 0 or more, got -1"),
        (["--drain-timeout", "-0.5"], "--drain-timeout must be 0 or more, got -0.5"),
        (["--queue", ""], "--queue must be a non-empty name without spaces"),
        (["--queue", "my queue"], "--queue must be a non-empty name without spaces"),
    ],
)
def test_a_value_out_of_range(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(args) == 1
    out, err = capsys.readouterr()
    assert message in one_line(err)
    assert out == ""


def test_the_limits_themselves_are_accepted() -> None:
    o = opts("-p", "65535", "-c", "1", "--consumers", "0", "-d", "24", "--replicate", "65535")
    assert (o.seed[1], o.producers, o.consumers, o.body_size, o.replicate) == (
        65535,
        1,
        0,
        24,
        65535,
    )
    o = opts("--retry", "0", "--idle", "0", "--drain-timeout", "0", "--processes", "2", "-c", "2")
    assert (o.retry, o.idle, o.drain_timeout, o.processes) == (0, 0, 0.0, 2)
