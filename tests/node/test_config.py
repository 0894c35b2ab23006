"""Starting from a config file or stdin, directives, CONFIG REWRITE, -v and -h."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from testkit.conformance import Conn
from testkit.nodes import Node, free_port, wait_for
from testkit.processes import node_env

pytestmark = pytest.mark.timeout(60)


def run_server(
    args: list[str], cwd: Path, stdin: str | None = None, timeout: float = 20
) -> subprocess.CompletedProcess:
    """Run the server to completion (for commands that exit by themselves)."""
    return subprocess.run(
        [sys.executable, "-m", "disque_server", *args],
        cwd=cwd,
        env=node_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def config_get(node: Node, name: str) -> str:
    reply = node.call("CONFIG", "GET", name)
    assert len(reply) == 2, reply
    return reply[1].decode()


def start_from_stdin(tmp_path: Path, config: bytes) -> Node:
    """A node started with ``-`` (its config read from standard input), ready."""
    node = Node(tmp_path / "n")
    node.proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "disque_server",
            "-",
            "--port",
            str(node.port),
            "--dir",
            str(node.dir),
            "--logfile",
            str(node.logfile),
        ],
        cwd=node.dir,
        env=node_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        node.proc.stdin.write(config)
        node.proc.stdin.close()
        node.wait_ready()
    except BaseException:
        node.terminate()
        raise
    return node


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ---- starting from a file ----------------------------------------------------------


def test_start_from_config_file(start_node, tmp_path: Path) -> None:
    conf = write(tmp_path / "disque.conf", "hz 15\nloglevel verbose\nslowlog-max-len 77\n")
    node = start_node(args=[str(conf)])
    assert config_get(node, "hz") == "15"
    assert config_get(node, "loglevel") == "verbose"
    assert config_get(node, "slowlog-max-len") == "77"


def test_info_reports_config_file(start_node, tmp_path: Path) -> None:
    conf = write(tmp_path / "disque.conf", "hz 12\n")
    node = start_node(args=[str(conf)])
    with Conn(node.port) as c:
        t, text = c.call("INFO", "server")
    assert t == "$"
    assert f"config_file:{conf.resolve()}" in text.replace("\r", "").split("\n")


def test_port_from_config_file(tmp_path: Path) -> None:
    port = free_port()
    conf = write(
        tmp_path / "disque.conf", f"port {port}\ndir {tmp_path}\nlogfile {tmp_path / 'log.txt'}\n"
    )
    node = Node(tmp_path / "n", port=port)
    node.proc = subprocess.Popen(
        [sys.executable, "-m", "disque_server", str(conf)],
        cwd=tmp_path,
        env=node_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        node.wait_ready()
        assert config_get(node, "port") == str(port)
        assert config_get(node, "dir") == str(tmp_path)
        assert (tmp_path / "log.txt").exists()
    finally:
        node.terminate()


def test_command_line_overrides_file(start_node, tmp_path: Path) -> None:
    conf = write(tmp_path / "disque.conf", "hz 15\n")
    node = start_node(args=[str(conf)], config={"hz": "30"})
    assert config_get(node, "hz") == "30"


def test_command_line_directives_without_file(start_node) -> None:
    node = start_node(config={"hz": "25", "maxmemory-samples": "9"})
    assert config_get(node, "hz") == "25"
    assert config_get(node, "maxmemory-samples") == "9"


def test_quotes_comments_and_blank_lines(start_node, tmp_path: Path) -> None:
    conf = write(
        tmp_path / "disque.conf",
        "# a comment line\n"
        "\n"
        "   # an indented comment\n"
        'requirepass "pass word \\"quoted\\""\n'
        "\n"
        "HZ 11\n",
    )
    node = start_node(args=[str(conf)])
    with Conn(node.port) as c:
        assert c.call("PING") == ("-", "NOAUTH Authentication required.")
        assert c.call("AUTH", 'pass word "quoted"') == ("+", "OK")
        assert c.call("CONFIG", "GET", "hz") == ("*", [("$", "hz"), ("$", "11")])


def test_hex_escapes_in_a_config_value_are_bytes(start_node, tmp_path: Path) -> None:
    """As in Redis: "\\xff" in a config file is the byte 0xff (not the character U+00FF)."""
    conf = write(tmp_path / "disque.conf", 'requirepass "p\\xffw"\n')
    node = start_node(args=[str(conf)])
    with Conn(node.port) as c:
        assert c.call("AUTH", b"p\xffw") == ("+", "OK")
        assert c.call("CONFIG", "REWRITE") == ("+", "OK")  # written back as "p\xffw"
    assert 'requirepass "p\\xffw"' in conf.read_text()
    node.restart()
    with Conn(node.port) as c:
        assert c.call("AUTH", b"p\xffw") == ("+", "OK")
        assert c.call("CONFIG", "SET", "requirepass", b"q\xfe") == ("+", "OK")
    with Conn(node.port) as c:
        assert c.call("AUTH", b"q\xfe") == ("+", "OK")


def test_config_from_stdin(tmp_path: Path) -> None:
    node = start_from_stdin(tmp_path, b"# from stdin\nhz 17\nslowlog-max-len 33\n")
    try:
        assert config_get(node, "hz") == "17"
        assert config_get(node, "slowlog-max-len") == "33"
    finally:
        node.terminate()


def test_pidfile_written(start_node, tmp_path: Path) -> None:
    pidfile = tmp_path / "disque.pid"
    node = start_node(config={"pidfile": str(pidfile)})
    wait_for(pidfile.exists, 5, message="pidfile")
    assert pidfile.read_text().strip() == str(node.proc.pid)


def test_logfile_written(node: Node) -> None:
    wait_for(lambda: node.log().strip(), 5, message="log file content")


# ---- bad config -------------------------------------------------------------------


def test_unknown_directive_fails_with_line(tmp_path: Path) -> None:
    conf = write(tmp_path / "bad.conf", "# comment\nhz 10\nnosuchdirective 12\nport 1\n")
    res = run_server([str(conf), "--port", str(free_port())], tmp_path)
    assert res.returncode == 1
    assert str(conf) in res.stderr
    assert "line 3" in res.stderr
    assert "nosuchdirective 12" in res.stderr
    assert "Bad directive or wrong number of arguments" in res.stderr


def test_directive_without_value_fails(tmp_path: Path) -> None:
    conf = write(tmp_path / "bad.conf", "port\n")
    res = run_server([str(conf)], tmp_path)
    assert res.returncode == 1
    assert "line 1" in res.stderr


def test_bad_value_fails(tmp_path: Path) -> None:
    conf = write(tmp_path / "bad.conf", "hz 10\nloglevel loud\n")
    res = run_server([str(conf), "--port", str(free_port())], tmp_path)
    assert res.returncode == 1
    assert "line 2" in res.stderr and "loglevel loud" in res.stderr


def test_unknown_directive_from_stdin_fails(tmp_path: Path) -> None:
    res = run_server(["-", "--port", str(free_port())], tmp_path, stdin="hz 10\nbogus 1\n")
    assert res.returncode == 1
    assert "line 2" in res.stderr and "bogus 1" in res.stderr


def test_missing_config_file_fails(tmp_path: Path) -> None:
    res = run_server([str(tmp_path / "nope.conf"), "--port", str(free_port())], tmp_path)
    assert res.returncode != 0


def test_unknown_command_line_option_fails(tmp_path: Path) -> None:
    res = run_server(["--nosuchdirective", "1", "--port", str(free_port())], tmp_path)
    assert res.returncode == 1
    assert "Bad directive or wrong number of arguments" in res.stderr


# ---- a node that cannot start says why in a line, never with a traceback -------------
# (The compiled node once gave tracebacks here: see tests/unit/test_compiled_hazards.py.)


def refused(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    return res.stderr


def test_a_port_in_use_is_refused_in_a_line(node: Node, tmp_path: Path) -> None:
    res = run_server(["--port", str(node.port)], tmp_path)
    assert f"Could not start the node on port {node.port}: " in refused(res)


@pytest.mark.parametrize("port", ["65536", "99999", "-1"])
def test_a_port_out_of_range_is_refused_in_a_line(tmp_path: Path, port: str) -> None:
    assert "Invalid argument for 'port'" in refused(run_server(["--port", port], tmp_path))


def test_a_port_whose_bus_port_is_out_of_range_is_refused_in_a_line(tmp_path: Path) -> None:
    """As Disque: the bus listens on port + 10000, so the port must be below 55535."""
    res = run_server(["--port", "60000"], tmp_path)
    assert "must be lower than 55535" in refused(res)


@pytest.mark.parametrize("name", ["../disque.aof", "/tmp/disque.aof", ".."])
def test_an_aof_file_name_that_is_a_path_is_refused_in_a_line(tmp_path: Path, name: str) -> None:
    """As Disque: appendfilename is a file's name in dir, not a path."""
    res = run_server(["--port", str(free_port()), "--appendfilename", name], tmp_path)
    assert "Invalid argument for 'appendfilename'" in refused(res)


def test_a_cluster_config_it_cannot_write_is_refused_in_a_line(tmp_path: Path) -> None:
    """A new node that could not keep its ID would come back as another node."""
    nodes_conf = tmp_path / "no" / "such" / "nodes.conf"
    res = run_server(
        ["--port", str(free_port()), "--cluster-config-file", str(nodes_conf)], tmp_path
    )
    assert f"Can't write the cluster config {nodes_conf}: " in refused(res)


def test_a_log_file_it_cannot_open_is_refused_in_a_line(tmp_path: Path) -> None:
    logfile = tmp_path / "no" / "such" / "disque.log"
    res = run_server(["--port", str(free_port()), "--logfile", str(logfile)], tmp_path)
    assert "Can't open the log file" in refused(res)


def test_a_dir_it_cannot_make_is_refused_in_a_line(tmp_path: Path) -> None:
    a_file = write(tmp_path / "a-file", "")
    res = run_server(["--port", str(free_port()), "--dir", str(a_file / "dir")], tmp_path)
    assert f"Can't chdir to '{a_file / 'dir'}'" in refused(res)


def test_a_certificate_that_is_not_one_is_refused_in_a_line(tmp_path: Path) -> None:
    junk = write(tmp_path / "junk.pem", "not a certificate\n")
    tls = [
        "--tls-port",
        str(free_port()),
        "--tls-cert-file",
        str(junk),
        "--tls-key-file",
        str(junk),
    ]
    res = run_server(["--port", str(free_port()), *tls], tmp_path)
    assert "TLS configuration error" in refused(res)


# ---- -v / -h -------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-v", "--version"])
def test_version(tmp_path: Path, flag: str) -> None:
    res = run_server([flag], tmp_path)
    assert res.returncode == 0
    assert "1.0-rc1" in res.stdout
    assert re.search(r"\b(mypyc|pure) build\)", res.stdout), res.stdout


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help(tmp_path: Path, flag: str) -> None:
    res = run_server([flag], tmp_path)
    assert res.returncode == 0
    assert "usage" in (res.stdout + res.stderr).lower()


# ---- CONFIG REWRITE -------------------------------------------------------------------

REWRITE_CONF = """\
# Disque test configuration
# keep this comment

hz 10
   # indented comment, kept too
loglevel verbose
slowlog-max-len 128
"""


def test_config_rewrite_round_trip(start_node, tmp_path: Path) -> None:
    conf = write(tmp_path / "disque.conf", REWRITE_CONF)
    node = start_node(args=[str(conf)])
    assert node.call("CONFIG", "SET", "hz", "20") in (b"OK", True)
    assert node.call("CONFIG", "SET", "maxmemory-samples", "7") in (b"OK", True)
    with Conn(node.port) as c:
        assert c.call("CONFIG", "REWRITE") == ("+", "OK")
    lines = conf.read_text().splitlines()
    for kept in (
        "# Disque test configuration",
        "# keep this comment",
        "   # indented comment, kept too",
        "loglevel verbose",
    ):
        assert kept in lines, conf.read_text()
    assert "hz 20" in lines
    assert "hz 10" not in lines
    assert "maxmemory-samples 7" in lines
    # the hz line stays where it was, among the original lines
    assert lines.index("hz 20") < lines.index("loglevel verbose")
    node.restart()
    assert config_get(node, "hz") == "20"
    assert config_get(node, "maxmemory-samples") == "7"
    assert config_get(node, "loglevel") == "verbose"


def test_config_rewrite_twice_is_stable(start_node, tmp_path: Path) -> None:
    conf = write(tmp_path / "disque.conf", REWRITE_CONF)
    node = start_node(args=[str(conf)])
    node.call("CONFIG", "SET", "hz", "20")
    node.call("CONFIG", "REWRITE")
    first = conf.read_text()
    node.call("CONFIG", "REWRITE")
    assert conf.read_text() == first


def test_config_rewrite_quotes_values_with_spaces(start_node, tmp_path: Path) -> None:
    conf = write(tmp_path / "disque.conf", "hz 10\n")
    node = start_node(args=[str(conf)])
    node.call("CONFIG", "SET", "requirepass", "two words")
    with Conn(node.port) as c:
        assert c.call("AUTH", "two words") == ("+", "OK")
        assert c.call("CONFIG", "REWRITE") == ("+", "OK")
    node.restart()
    with Conn(node.port) as c:
        assert c.call("PING") == ("-", "NOAUTH Authentication required.")
        assert c.call("AUTH", "two words") == ("+", "OK")


def test_config_rewrite_that_cannot_write_is_an_error(start_node, tmp_path: Path) -> None:
    conf = write(tmp_path / "disque.conf", "hz 12\n")
    node = start_node(args=[str(conf)])
    conf.unlink()
    conf.mkdir()  # (a directory where the file was: root can write anywhere else)
    with pytest.raises(redis.ResponseError, match="^Rewriting config file: .*Is a directory"):
        node.call("CONFIG", "REWRITE")
    assert node.call("PING") is True  # (redis-py reads PONG as True)


def test_config_rewrite_without_file_is_an_error(node: Node) -> None:
    with Conn(node.port) as c:
        t, msg = c.call("CONFIG", "REWRITE")
    assert t == "-" and msg.startswith("ERR")


def test_config_rewrite_from_stdin_is_an_error(tmp_path: Path) -> None:
    node = start_from_stdin(tmp_path, b"hz 12\n")
    try:
        with Conn(node.port) as c:
            t, _ = c.call("CONFIG", "REWRITE")
        assert t == "-"
        assert node.is_running()
    finally:
        node.terminate()
