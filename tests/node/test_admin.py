"""Administrative commands: INFO, CONFIG, CLIENT, SLOWLOG, COMMAND, DEBUG, TIME, PING,
HELLO, MONITOR, LATENCY, SHUTDOWN and signals."""

from __future__ import annotations

import fnmatch
import os
import platform
import re
import time

import pytest
import redis

from testkit.conformance import Conn, plain
from testkit.nodes import Node, wait_for

# CONFIG GET * of the recording (disque-1.0-rc1-single-node.txt), in recorded order
CONFIG_NAMES = [
    "requirepass",
    "unixsocket",
    "logfile",
    "pidfile",
    "maxmemory",
    "maxmemory-samples",
    "timeout",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    "slowlog-log-slower-than",
    "latency-monitor-threshold",
    "slowlog-max-len",
    "port",
    "tcp-backlog",
    "databases",
    "maxclients",
    "watchdog-period",
    "hz",
    "cluster-node-timeout",
    "tcp-keepalive",
    "no-appendfsync-on-rewrite",
    "daemonize",
    "activerehashing",
    "aof-rewrite-incremental-fsync",
    "aof-load-truncated",
    "aof-enqueue-jobs-once",
    "maxmemory-policy",
    "loglevel",
    "appendfsync",
    "syslog-facility",
    "appendonly",
    "dir",
    "client-output-buffer-limit",
    "unixsocketperm",
    "bind",
]
DEFAULT_SECTIONS = ["Server", "Clients", "Memory", "Jobs", "Queues", "Persistence", "Stats", "CPU"]
SERVER_FIELDS = [
    "disque_version",
    "disque_git_sha1",
    "disque_git_dirty",
    "disque_build_id",
    "os",
    "arch_bits",
    "multiplexing_api",
    "gcc_version",
    "process_id",
    "run_id",
    "tcp_port",
    "uptime_in_seconds",
    "uptime_in_days",
    "hz",
    "executable",
    "config_file",
]


def info_sections(text: str) -> dict[str, dict[str, str]]:
    """INFO text -> {section: {field: value}} keeping the order of both."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.replace("\r", "").split("\n"):
        if line.startswith("# "):
            current = sections.setdefault(line[2:], {})
        elif line.strip():
            assert current is not None, f"field outside a section: {line!r}"
            key, _, value = line.partition(":")
            current[key] = value
    return sections


def info(raw: Conn, *section: str) -> dict[str, dict[str, str]]:
    t, text = raw.call("INFO", *section)
    assert t == "$"
    return info_sections(text)


def field(raw: Conn, section: str, name: str) -> str:
    return info(raw, section.lower())[section][name]


def config_get(raw: Conn, pattern: str) -> dict[str, str]:
    t, flat = raw.call("CONFIG", "GET", pattern)
    assert t == "*"
    values = [v for _, v in flat]
    return dict(zip(values[0::2], values[1::2], strict=True))


# ---- INFO ---------------------------------------------------------------------------


def test_info_default_sections_in_order(raw: Conn) -> None:
    assert list(info(raw)) == DEFAULT_SECTIONS


def test_info_all_adds_commandstats(raw: Conn) -> None:
    raw.call("PING")
    assert list(info(raw, "all")) == DEFAULT_SECTIONS + ["Commandstats"]


def test_info_lines_end_with_crlf(raw: Conn) -> None:
    _, text = raw.call("INFO", "jobs")
    assert text == "# Jobs\r\nregistered_jobs:0\r\n"


def test_info_server_fields(node: Node, raw: Conn) -> None:
    server = info(raw, "server")["Server"]
    assert list(server) == SERVER_FIELDS
    assert "1.0-rc1" in server["disque_version"]
    assert server["tcp_port"] == str(node.port)
    assert server["process_id"] == str(node.proc.pid)
    assert re.fullmatch(r"[0-9a-f]{40}", server["run_id"])
    assert server["hz"] == "10"
    assert server["config_file"] == ""
    # What is true: no GCC built this node (0.0.0, as Redis says then); the
    # build ID names the interpreter and the build (mypyc-compiled or pure).
    assert server["gcc_version"] == "0.0.0"
    interpreter = f"{platform.python_implementation().lower()}-{platform.python_version()}"
    assert server["disque_build_id"] in (f"{interpreter}-mypyc", f"{interpreter}-pure")
    # CI says which build it installed: the node started must be that one.
    expected = os.environ.get("DISQUE_EXPECT_BUILD")
    if expected:
        assert server["disque_build_id"] == f"{interpreter}-{expected}"
    # Since the process started, not since some other clock's zero.
    with open(f"/proc/{node.proc.pid}/stat") as stat:
        started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as up:
        alive_s = float(up.read().split()[0]) - started_ticks / os.sysconf("SC_CLK_TCK")
    assert abs(int(server["uptime_in_seconds"]) - alive_s) <= 2


@pytest.mark.parametrize("section", ["jobs", "JOBS", "Jobs"])
def test_info_section_is_case_insensitive(raw: Conn, section: str) -> None:
    assert list(info(raw, section)) == ["Jobs"]


def test_info_unknown_section_is_empty(raw: Conn) -> None:
    assert raw.call("INFO", "nosuchsection") == ("$", "")


def test_info_jobs_and_queues_counts(client: redis.Redis, raw: Conn) -> None:
    for q in ("a", "b", "a"):
        client.execute_command("ADDJOB", q, "x", 0)
    assert info(raw, "jobs") == {"Jobs": {"registered_jobs": "3"}}
    assert info(raw, "queues") == {"Queues": {"registered_queues": "2"}}


def test_info_connected_clients(node: Node, raw: Conn) -> None:
    base = int(field(raw, "Clients", "connected_clients"))
    extra = [Conn(node.port) for _ in range(3)]
    try:
        for c in extra:
            assert c.call("PING") == ("+", "PONG")
        assert int(field(raw, "Clients", "connected_clients")) == base + 3
    finally:
        for c in extra:
            c.close()
    wait_for(
        lambda: int(field(raw, "Clients", "connected_clients")) == base,
        5,
        message="closed clients unregistered",
    )


def test_info_stats_count_commands_and_connections(node: Node, raw: Conn) -> None:
    before = info(raw, "stats")["Stats"]
    for _ in range(5):
        raw.call("PING")
    with Conn(node.port) as other:
        other.call("PING")
    after = info(raw, "stats")["Stats"]
    assert int(after["total_commands_processed"]) >= int(before["total_commands_processed"]) + 7
    assert int(after["total_connections_received"]) == int(before["total_connections_received"]) + 1


def test_info_commandstats_counts_calls(client: redis.Redis, raw: Conn) -> None:
    for _ in range(3):
        client.execute_command("ADDJOB", "q", "x", 0)
    stats = info(raw, "commandstats")["Commandstats"]
    assert stats["cmdstat_addjob"].startswith("calls=3,usec=")
    assert re.fullmatch(r"calls=3,usec=\d+,usec_per_call=\d+\.\d\d", stats["cmdstat_addjob"])


def pipeline_of(*commands: tuple[str, ...]) -> bytes:
    return b"".join(
        b"*%d\r\n" % len(c) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in c)
        for c in commands
    )


def test_commandstats_of_a_pipelined_streak(raw: Conn) -> None:
    # A streak of one fast command in a pass is timed by one clock read and shared:
    # every call still counted, the time charged to the command of the streak.
    ack = ("ACKJOB", "D-0badc0de-000000000000000000000000-05a1")
    raw.send(pipeline_of(*[ack] * 200, ("PING",), *[ack] * 100))
    assert [raw.read() for _ in range(301)].count((":", 0)) == 300
    stats = info(raw, "commandstats")["Commandstats"]
    calls, usec = re.fullmatch(r"calls=(\d+),usec=(\d+),.*", stats["cmdstat_ackjob"]).groups()
    assert calls == "300" and int(usec) > 0
    assert "cmdstat_ping" in stats  # (the PING between the streaks: timed on its own)


def test_slowlog_at_zero_logs_each_command_of_a_pipeline(raw: Conn) -> None:
    # (a threshold of a millisecond or less wants each command's own time: no streaks)
    raw.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    raw.call("SLOWLOG", "RESET")
    raw.send(
        pipeline_of(*[("ACKJOB", f"D-0badc0de-00000000000000000000000{i}-05a1") for i in range(5)])
    )
    assert [raw.read() for _ in range(5)] == [(":", 0)] * 5
    logged = [e[3] for e in plain(raw.call("SLOWLOG", "GET", "100"))]
    assert [a[1][-6] for a in logged if a[0] == "ACKJOB"] == ["4", "3", "2", "1", "0"]


def test_config_resetstat(client: redis.Redis, raw: Conn) -> None:
    for _ in range(10):
        client.execute_command("ADDJOB", "q", "x", 0)
    assert raw.call("CONFIG", "RESETSTAT") == ("+", "OK")
    stats = info(raw, "stats")["Stats"]
    assert int(stats["total_commands_processed"]) <= 2
    assert int(stats["total_connections_received"]) <= 1
    assert "cmdstat_addjob" not in info(raw, "commandstats").get("Commandstats", {})
    # jobs are not statistics
    assert field(raw, "Jobs", "registered_jobs") == "10"


# ---- CONFIG ------------------------------------------------------------------------


def test_config_get_all_names(raw: Conn) -> None:
    assert sorted(config_get(raw, "*")) == sorted(CONFIG_NAMES)


def test_config_get_port(node: Node, raw: Conn) -> None:
    assert raw.call("CONFIG", "GET", "port") == ("*", [("$", "port"), ("$", str(node.port))])


def test_config_get_dir(node: Node, raw: Conn) -> None:
    assert config_get(raw, "dir") == {"dir": str(node.dir)}


@pytest.mark.parametrize(
    "pattern", ["max*", "*aof*", "slowlog-*", "*port*", "h?", "[pb]*", "*-*-*", "nosuchparam", "*"]
)
def test_config_get_glob(raw: Conn, pattern: str) -> None:
    expected = {n for n in CONFIG_NAMES if fnmatch.fnmatchcase(n, pattern)}
    assert set(config_get(raw, pattern)) == expected


def test_config_set_and_get_hz(raw: Conn) -> None:
    assert raw.call("CONFIG", "SET", "hz", "20") == ("+", "OK")
    assert config_get(raw, "hz") == {"hz": "20"}
    assert field(raw, "Server", "hz") == "20"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("maxmemory", "123456789"),
        ("timeout", "300"),
        ("loglevel", "warning"),
        ("slowlog-max-len", "64"),
        ("slowlog-log-slower-than", "5000"),
        ("maxclients", "500"),
        ("cluster-node-timeout", "3000"),
        ("appendfsync", "always"),
        ("aof-enqueue-jobs-once", "yes"),
    ],
)
def test_config_set_round_trip(raw: Conn, name: str, value: str) -> None:
    assert raw.call("CONFIG", "SET", name, value) == ("+", "OK")
    assert config_get(raw, name) == {name: value}


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["SET", "nosuchparam", "1"], "ERR Unsupported CONFIG parameter: nosuchparam"),
        (
            ["SET", "maxmemory", "notanumber"],
            "ERR Invalid argument 'notanumber' for CONFIG SET 'maxmemory'",
        ),
        (["SET", "hz", "abc"], "ERR Invalid argument 'abc' for CONFIG SET 'hz'"),
        (["SET", "loglevel", "loud"], "ERR Invalid argument 'loud' for CONFIG SET 'loglevel'"),
        (["FOO"], "ERR CONFIG subcommand must be one of GET, SET, RESETSTAT, REWRITE"),
    ],
)
def test_config_errors(raw: Conn, args: list[str], error: str) -> None:
    assert raw.call("CONFIG", *args) == ("-", error)


def test_config_set_wrong_arity(raw: Conn) -> None:
    assert raw.call("CONFIG", "SeT", "hz") == (
        "-",
        "ERR Wrong number of arguments for CONFIG SeT",  # (spelled as sent, as Disque)
    )
    assert config_get(raw, "hz") == {"hz": "10"}


@pytest.mark.parametrize(
    "value", [" 10", "10 ", "1_0", "0x10", "1.5", "10kb", "99999999999999999999"]
)
def test_config_set_numbers_as_disque_reads_them(raw: Conn, value: str) -> None:
    """CONFIG SET takes a number as Disque's getLongLongFromObject: digits after an
    optional sign, nothing around them (the config file is more lenient)."""
    assert raw.call("CONFIG", "SET", "timeout", value) == (
        "-",
        f"ERR Invalid argument '{value}' for CONFIG SET 'timeout'",
    )
    assert raw.call("CONFIG", "SET", "timeout", "+030") == ("+", "OK")
    assert config_get(raw, "timeout") == {"timeout": "30"}


def test_config_set_bounds_as_disque(raw: Conn) -> None:
    # hz is a hint: taken into 1..500; below 0 refused.
    assert raw.call("CONFIG", "SET", "hz", "0") == ("+", "OK")
    assert config_get(raw, "hz") == {"hz": "1"}
    assert raw.call("CONFIG", "SET", "hz", "100000") == ("+", "OK")
    assert config_get(raw, "hz") == {"hz": "500"}
    assert raw.call("CONFIG", "SET", "hz", "-1")[0] == "-"
    assert raw.call("CONFIG", "SET", "hz", "10") == ("+", "OK")
    # No negative slowlog threshold, and no unit for the AOF rewrite size here.
    assert raw.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")[0] == "-"
    assert raw.call("CONFIG", "SET", "auto-aof-rewrite-min-size", "64mb")[0] == "-"
    assert raw.call("CONFIG", "SET", "auto-aof-rewrite-min-size", "1048576") == ("+", "OK")
    assert config_get(raw, "auto-aof-rewrite-min-size") == {"auto-aof-rewrite-min-size": "1048576"}


def test_config_rewrite_without_config_file(raw: Conn) -> None:
    t, msg = raw.call("CONFIG", "REWRITE")
    assert t == "-" and msg.startswith("ERR")


# ---- CLIENT -----------------------------------------------------------------------


def test_client_list_shows_connections(node: Node, raw: Conn) -> None:
    with Conn(node.port) as other:
        other.call("CLIENT", "SETNAME", "other")
        t, text = raw.call("CLIENT", "LIST")
    assert t == "$"
    lines = [line for line in text.replace("\r", "").split("\n") if line]
    assert len(lines) >= 2
    for line in lines:
        fields = dict(kv.split("=", 1) for kv in line.split(" "))
        assert {"id", "addr", "fd", "name", "age", "idle", "flags", "cmd"} <= set(fields)
        assert fields["addr"].startswith("127.0.0.1:")
    assert any(" name=other " in f" {line} " for line in lines)
    assert any("cmd=client" in line for line in lines)


def test_client_setname_getname(raw: Conn) -> None:
    assert raw.call("CLIENT", "GETNAME") == ("nil", None)
    assert raw.call("CLIENT", "SETNAME", "myname") == ("+", "OK")
    assert raw.call("CLIENT", "GETNAME") == ("$", "myname")


def test_client_setname_rejects_spaces(raw: Conn) -> None:
    t, _ = raw.call("CLIENT", "SETNAME", "my name")
    assert t == "-"
    assert raw.call("CLIENT", "GETNAME") == ("nil", None)


@pytest.mark.timeout(30)
def test_client_kill_by_addr(node: Node, raw: Conn) -> None:
    victim = Conn(node.port)
    try:
        victim.call("CLIENT", "SETNAME", "victim")
        _, text = raw.call("CLIENT", "LIST")
        line = next(x for x in text.split("\n") if " name=victim " in f" {x} ")
        addr = re.search(r"addr=(\S+)", line).group(1)
        assert raw.call("CLIENT", "KILL", addr) == ("+", "OK")
        assert victim.is_closed(5)
        _, text = raw.call("CLIENT", "LIST")
        assert "name=victim" not in text
        t, _ = raw.call("CLIENT", "KILL", addr)
        assert t == "-"
    finally:
        victim.close()


@pytest.mark.timeout(30)
def test_client_kill_filters_as_disque(node: Node, raw: Conn) -> None:
    """The new form: ID, TYPE (normal, Disque's only type), ADDR and SKIPME filters, all
    to match; the number killed, 0 included; the caller skipped unless SKIPME no."""
    first, second = Conn(node.port), Conn(node.port)
    try:
        ids = [conn.call("CLIENT", "ID")[1] for conn in (first, second)]
        assert raw.call("CLIENT", "KILL", "ID", "999999") == (":", 0)
        assert raw.call("CLIENT", "KILL", "ADDR", "1.2.3.4:5", "TYPE", "normal") == (":", 0)
        assert raw.call("CLIENT", "KILL", "ID", str(ids[0]), "TYPE", "NORMAL") == (":", 1)
        assert first.is_closed(5) and second.call("PING") == ("+", "PONG")
        assert raw.call("CLIENT", "KILL", "TYPE", "pubsub") == (
            "-",
            "ERR Unknown client type 'pubsub'",
        )
        for bad in (["SKIPME", "maybe"], ["ADDR", "1.2.3.4:5", "ID"], ["FOO", "bar"]):
            assert raw.call("CLIENT", "KILL", *bad) == ("-", "ERR syntax error"), bad
        assert raw.call("CLIENT", "KILL") == ("-", "ERR syntax error")
        # One argument is the old form, whatever it says: an address.
        assert raw.call("CLIENT", "KILL", "ID") == ("-", "ERR No such client")
        # Every normal client but the caller, then the caller too with SKIPME no.
        assert raw.call("CLIENT", "KILL", "TYPE", "normal") == (":", 1)
        assert second.is_closed(5) and raw.call("PING") == ("+", "PONG")
        assert raw.call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no") == (":", 1)
        assert raw.is_closed(5)
    finally:
        first.close()
        second.close()


# ---- SLOWLOG / LATENCY ---------------------------------------------------------------


def test_slowlog_empty_on_fresh_node(raw: Conn) -> None:
    assert raw.call("SLOWLOG", "GET", "1") == ("*", [])
    assert raw.call("SLOWLOG", "LEN") == (":", 0)


def test_slowlog_records_slow_commands(raw: Conn) -> None:
    assert raw.call("CONFIG", "SET", "slowlog-log-slower-than", "0") == ("+", "OK")
    raw.call("ADDJOB", "slowq", "x", "0")
    t, n = raw.call("SLOWLOG", "LEN")
    assert t == ":" and n >= 1
    entries = plain(raw.call("SLOWLOG", "GET", "100"))
    assert entries and all(len(e) >= 4 for e in entries)
    ids = [e[0] for e in entries]
    assert ids == sorted(ids, reverse=True)  # newest first
    assert ["ADDJOB", "slowq", "x", "0"] in [e[3] for e in entries]
    entry = next(e for e in entries if e[3][0] == "ADDJOB")
    assert abs(entry[1] - time.time()) < 60 and 0 <= entry[2] < 1_000_000  # µs: under 1 s


def test_slowlog_get_count_limits(raw: Conn) -> None:
    raw.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    for _ in range(5):
        raw.call("PING")
    assert len(plain(raw.call("SLOWLOG", "GET", "2"))) == 2


def test_slowlog_reset(raw: Conn) -> None:
    raw.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    raw.call("PING")
    # (off: CONFIG SET takes no negative threshold, as Disque's; a file's -1 is off)
    raw.call("CONFIG", "SET", "slowlog-log-slower-than", "1000000000")
    assert raw.call("SLOWLOG", "RESET") == ("+", "OK")
    assert raw.call("SLOWLOG", "LEN") == (":", 0)
    raw.call("PING")
    assert raw.call("SLOWLOG", "GET") == ("*", [])


def test_latency_latest_empty(raw: Conn) -> None:
    assert raw.call("LATENCY", "LATEST") == ("*", [])


# ---- COMMAND ------------------------------------------------------------------------


def test_command_info_matches_recording(raw: Conn) -> None:
    assert raw.call("COMMAND", "INFO", "addjob", "getjob") == (
        "*",
        [
            (
                "*",
                [
                    ("$", "addjob"),
                    (":", -4),
                    ("*", [("+", "write"), ("+", "denyoom"), ("+", "fast")]),
                    (":", 0),
                    (":", 0),
                    (":", 0),
                ],
            ),
            (
                "*",
                [
                    ("$", "getjob"),
                    (":", -2),
                    ("*", [("+", "write"), ("+", "fast")]),
                    (":", 0),
                    (":", 0),
                    (":", 0),
                ],
            ),
        ],
    )


def test_command_info_unknown_is_null(raw: Conn) -> None:
    assert raw.call("COMMAND", "INFO", "nosuchcommand") == ("*", [("nil", None)])


def test_command_lists_all_commands(raw: Conn) -> None:
    t, count = raw.call("COMMAND", "COUNT")
    assert t == ":" and count >= 32
    commands = plain(raw.call("COMMAND"))
    assert len(commands) == count
    names = {c[0] for c in commands}
    for name in (
        "addjob",
        "getjob",
        "ackjob",
        "fastack",
        "working",
        "nack",
        "show",
        "enqueue",
        "dequeue",
        "deljob",
        "qlen",
        "qstat",
        "qpeek",
        "qscan",
        "jscan",
        "pause",
        "hello",
        "info",
        "ping",
        "time",
        "client",
        "slowlog",
        "command",
        "debug",
        "shutdown",
        "monitor",
        "latency",
        "config",
        "cluster",
        "auth",
        "loadjob",
    ):
        assert name in names, name


# ---- DEBUG, TIME, PING, HELLO -----------------------------------------------------


def test_debug_flushall_removes_jobs_and_queues(client: redis.Redis, raw: Conn) -> None:
    ids = [client.execute_command("ADDJOB", f"q{i}", "x", 0) for i in range(5)]
    client.execute_command("GETJOB", "FROM", "q0")
    client.execute_command("PAUSE", "paused", "all")
    assert raw.call("DEBUG", "FLUSHALL") == ("+", "OK")
    assert field(raw, "Jobs", "registered_jobs") == "0"
    assert field(raw, "Queues", "registered_queues") == "0"
    assert client.execute_command("SHOW", ids[0]) is None
    assert client.execute_command("QLEN", "q1") == 0
    assert client.execute_command("QSCAN", "BUSYLOOP") == [b"0", []]
    assert client.execute_command("JSCAN", "BUSYLOOP") == [b"0", []]
    # the node keeps working afterwards
    assert client.execute_command("ADDJOB", "q1", "again", 0)
    assert client.execute_command("QLEN", "q1") == 1


def test_time(raw: Conn) -> None:
    t, (secs, usecs) = raw.call("TIME")
    assert t == "*" and secs[0] == "$" and usecs[0] == "$"
    assert abs(int(secs[1]) - time.time()) < 5
    assert 0 <= int(usecs[1]) < 1_000_000


def test_ping(raw: Conn) -> None:
    assert raw.call("PING") == ("+", "PONG")
    assert raw.call("PING", "hello") == ("$", "hello")
    assert raw.call("ping") == ("+", "PONG")


def test_ping_too_many_arguments(raw: Conn) -> None:
    assert raw.call("PING", "a", "b") == ("-", "ERR wrong number of arguments for 'ping' command")


def test_hello_disque_handshake(node: Node, raw: Conn) -> None:
    myid = raw.call("CLUSTER", "MYID")[1]
    t, reply = raw.call("HELLO")
    assert t == "*" and len(reply) == 3
    assert reply[0] == (":", 1)
    assert reply[1] == ("$", myid)
    assert reply[2][0] == "*"
    nid, _ip, port, prio = reply[2][1]
    assert nid == ("$", myid)
    assert port == ("$", str(node.port))
    assert prio == ("$", "1")


def test_cluster_myid(raw: Conn) -> None:
    t, myid = raw.call("CLUSTER", "MYID")
    assert t == "$" and re.fullmatch(r"[0-9a-f]{40}", myid)


# ---- MONITOR ------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_monitor_streams_other_clients_commands(node: Node) -> None:
    with Conn(node.port, timeout=5) as mon:
        assert mon.call("MONITOR") == ("+", "OK")
        with Conn(node.port) as other:
            assert other.call("ADDJOB", "monq", "body", "0")[0] == "+"
            other.call("QLEN", "monq")
        lines = []
        pattern = re.compile(r'\d+\.\d+ \[.*\] "(?i:addjob)" "monq" "body" "0"')
        for _ in range(20):
            t, line = mon.read()
            assert t == "+"
            lines.append(line)
            if pattern.fullmatch(line):
                break
        else:
            pytest.fail(f"no ADDJOB line in MONITOR output: {lines}")
        t, line = mon.read()
        assert t == "+" and re.fullmatch(r'\d+\.\d+ \[.*\] "(?i:qlen)" "monq"', line), line


@pytest.mark.timeout(30)
def test_monitor_quotes_binary_arguments(node: Node) -> None:
    with Conn(node.port, timeout=5) as mon:
        mon.call("MONITOR")
        with Conn(node.port) as other:
            other.call("QLEN", b'a b"\n\x01')
        t, line = mon.read()
        assert t == "+"
        assert line.endswith('"a b\\"\\n\\x01"'), line


# ---- SHUTDOWN and signals ---------------------------------------------------------


@pytest.mark.timeout(30)
def test_shutdown_exits_zero(start_node) -> None:
    node = start_node()
    with Conn(node.port) as c:
        c.send(b"*1\r\n$8\r\nSHUTDOWN\r\n")
        assert c.is_closed(10)
    assert node.proc.wait(10) == 0


def test_shutdown_takes_only_rewrite_aof(node: Node, raw: Conn) -> None:
    """As Disque's: REWRITE-AOF or nothing; Redis' SAVE and NOSAVE are syntax errors."""
    for args in (["SAVE"], ["NOSAVE"], ["REWRITE-AOF", "NOW"], ["NOW"]):
        assert raw.call("SHUTDOWN", *args) == ("-", "ERR syntax error"), args
    assert node.is_running() and raw.call("PING") == ("+", "PONG")


@pytest.mark.timeout(30)
def test_sigterm_exits_zero(start_node) -> None:
    node = start_node()
    node.call("ADDJOB", "q", "x", 0)
    assert node.terminate() == 0
    assert not node.is_running()


@pytest.mark.timeout(30)
def test_sigterm_with_blocked_client(start_node) -> None:
    node = start_node()
    with Conn(node.port) as c:
        c.send(b"*3\r\n$6\r\nGETJOB\r\n$4\r\nFROM\r\n$1\r\nq\r\n")
        wait_for(
            lambda: (
                node.call("QSTAT", "q")
                and dict(zip(*[iter(node.call("QSTAT", "q"))] * 2, strict=True))[b"blocked"] == 1
            ),
            5,
            message="client blocked",
        )
        assert node.terminate() == 0
