"""One-shot `disque cmd args...` against a real node: output modes, exit codes,
connection and authentication, option parsing."""

from __future__ import annotations

import json
import re

import pytest
from clihelpers import tty_output

from disque_cli.connection import Endpoint, Session
from disque_cli.replies import Map
from testkit.nodes import free_port, wait_for

pytestmark = pytest.mark.timeout(30)

JOB_ID = re.compile(r"^D-[0-9a-f]{8}-[A-Za-z0-9+/]{24}-[0-9a-f]{4}$")


def add_job(cli, queue: str = "q", body: str = "body") -> str:
    result = cli("addjob", queue, body, "0")
    assert result.returncode == 0, result.err
    job_id = result.out.strip()
    assert JOB_ID.match(job_id), job_id
    return job_id


# ---- rendering on a terminal -------------------------------------------------------


def test_terminal_rendering_of_disque_replies(node, spawn, cli) -> None:
    port = str(node.port)
    status = tty_output(spawn("-p", port, "addjob", "q", 'say "hi"\n', "0"))
    job_id = status.strip()
    assert JOB_ID.match(job_id), "ADDJOB answers a status: shown unquoted"
    assert tty_output(spawn("-p", port, "qlen", "q")) == "(integer) 1\n"
    assert tty_output(spawn("-p", port, "getjob", "nohang", "from", "emptyq")) == "(nil)\n"
    assert tty_output(spawn("-p", port, "qpeek", "q", "0")) == "(empty array)\n"
    assert tty_output(spawn("-p", port, "show", "notajobid")) == (
        "(error) BADID Invalid Job ID format.\n"
    )
    assert tty_output(spawn("-p", port, "qpeek", "q", "1")) == (
        f'1) 1) "q"\n   2) "{job_id}"\n   3) "say \\"hi\\"\\n"\n'
    )
    show = tty_output(spawn("-p", port, "show", job_id)).splitlines()
    assert len(show) == 30
    assert show[0] == ' 1) "id"' and show[1] == f' 2) "{job_id}"'
    assert show[7] == " 8) (integer) 1"
    assert re.fullmatch(r'22\) 1\) "[0-9a-f]{40}"', show[21])
    assert show[23] == "24) (empty array)"
    assert show[29] == '30) "say \\"hi\\"\\n"'


def test_verbatim_replies_are_not_quoted_on_a_terminal(node, spawn) -> None:
    info = tty_output(spawn("-p", str(node.port), "info", "jobs")).replace("\r", "")
    assert info.startswith("# Jobs\n") and "registered_jobs:" in info
    assert '"' not in info
    nodes = tty_output(spawn("-p", str(node.port), "cluster", "nodes"))
    assert "myself" in nodes and not nodes.startswith('"')


# ---- raw, csv, json through pipes -----------------------------------------------------


def test_raw_output_when_stdout_is_a_pipe(cli) -> None:
    job_id = add_job(cli, "q", "line1\nline2")
    got = cli("getjob", "from", "q")
    assert got.out == f"q\n{job_id}\nline1\nline2\n"
    assert cli("qlen", "q").out == "0\n"
    assert cli("getjob", "nohang", "from", "q").out == "\n"
    assert cli("show", "bad").out == "BADID Invalid Job ID format.\n\n"
    assert cli("--no-raw", "qlen", "q").out == "(integer) 0\n"


def test_csv(cli) -> None:
    job_id = add_job(cli, "q", "a,b")
    assert cli("--csv", "qpeek", "q", "1").out == f'"q","{job_id}","a,b"\n'
    assert cli("--csv", "qstat", "nosuchqueue").out == "NULL\n"
    assert cli("--csv", "show", "bad").out == 'ERROR,"BADID Invalid Job ID format."\n'


def test_json_objects(cli, node) -> None:
    job_id = add_job(cli, "q", "body")
    job = json.loads(cli("--json", "show", job_id).out)
    assert job["id"] == job_id and job["queue"] == "q" and job["state"] == "queued"
    assert job["body"] == "body" and isinstance(job["ttl"], int)
    assert job["nodes-confirmed"] == [] and len(job["nodes-delivered"]) == 1
    queue = json.loads(cli("--json", "qstat", "q").out)
    assert queue["name"] == "q" and queue["len"] == 1 and queue["pause"] == "none"
    hello = json.loads(cli("--json", "hello").out)
    assert hello["version"] == 1 and hello["nodes"][0]["port"] == node.port
    assert hello["nodes"][0]["id"] == hello["id"]
    scan = json.loads(cli("--json", "jscan", "reply", "all").out)
    assert scan[0] == "0" and scan[1][0]["id"] == job_id
    ids = json.loads(cli("--json", "jscan").out)
    assert ids == ["0", [job_id]]
    info = json.loads(cli("--json", "info").out)
    assert info["jobs"]["registered_jobs"] == 1
    assert info["server"]["tcp_port"] == node.port


def test_json_natural_replies(cli) -> None:
    job_id = add_job(cli, "q", "body")
    assert json.loads(cli("--json", "qpeek", "q", "1").out) == [["q", job_id, "body"]]
    assert json.loads(cli("--json", "qlen", "q").out) == 1
    assert json.loads(cli("--json", "qstat", "nope").out) is None
    assert json.loads(cli("--json", "show", "bad").out) == {"error": "BADID Invalid Job ID format."}
    assert json.loads(cli("--json", "config", "get", "port").out) == {
        "port": cli("config", "get", "port").out.split()[1]
    }


# ---- arguments, stdin, repetition, exit codes -------------------------------------


def test_arguments_starting_with_dash_pass_through(cli) -> None:
    first, second = add_job(cli, "q", "old"), add_job(cli, "q", "new")
    newest = cli("qpeek", "q", "-1").out.split("\n")
    assert newest[1] == second and first not in newest
    assert cli("addjob", "q", "-x", "0").returncode == 0  # a body that looks like an option


def test_last_argument_from_stdin(cli) -> None:
    job_id = add_job(cli)
    assert cli("-x", "show", input=job_id.encode()).out.startswith(f"id\n{job_id}\n")
    assert cli("-x", "ping", input=b"a\nb").out == "a\nb\n"


def test_repeat(cli) -> None:
    out = cli("-r", "3", "-i", "0.05", "addjob", "q", "x", "0").out.split()
    assert len(out) == 3 and len(set(out)) == 3
    assert cli("qlen", "q").out == "3\n"


def test_exit_code_on_error_with_e(cli) -> None:
    result = cli("-e", "show", "notajobid")
    assert (result.returncode, result.out, result.err) == (1, "", "BADID Invalid Job ID format.\n")
    assert cli("show", "notajobid").returncode == 0
    assert cli("-e", "qlen", "q").returncode == 0


def test_connection_refused_is_one_line(run_cli) -> None:
    port = free_port()
    result = run_cli("-p", str(port), "qlen", "q")
    assert result.returncode == 1
    assert result.out == ""
    assert result.err == f"Could not connect to Disque at 127.0.0.1:{port}: Connection refused\n"
    for mode in (["--pipe"], ["--stat"], ["--latency"], []):
        result = run_cli("-p", str(port), *mode)
        assert result.returncode == 1 and "Traceback" not in result.err
        assert result.err.startswith("Could not connect to Disque at")


def test_unix_socket_with_s(start_node, run_cli, tmp_path) -> None:
    path = str(tmp_path / "d.sock")
    if len(path) > 100:
        path = f"/tmp/disque-cli-{free_port()}.sock"
    start_node(config={"unixsocket": path})
    result = run_cli("-s", path, "addjob", "q", "body", "0")
    assert result.returncode == 0 and JOB_ID.match(result.out.strip()), result.err
    result = run_cli("-s", path, "-p", str(free_port()), "qlen", "q")  # -s wins over -p
    assert (result.returncode, result.out) == (0, "1\n"), result.err
    missing = str(tmp_path / "none.sock")
    result = run_cli("-s", missing, "ping")
    assert result.returncode == 1
    assert result.err == f"Could not connect to Disque at {missing}: No such file or directory\n"


def test_unknown_host(run_cli) -> None:
    result = run_cli("-h", "nosuchhost.invalid", "ping")
    assert result.returncode == 1
    assert result.err.startswith("Could not connect to Disque at nosuchhost.invalid:7711: ")


def test_host_option_and_help(cli, node, run_cli) -> None:
    assert run_cli("-h", "127.0.0.1", "-p", str(node.port), "ping").out == "PONG\n"
    usage = run_cli("--help")
    assert usage.returncode == 0 and "-h <hostname>" in usage.out
    assert "Usage: disque [OPTIONS] [cmd [arg [arg ...]]]" in usage.out
    assert run_cli("--version").out.startswith("disque ")
    bad = run_cli("--nosuchoption", "ping")
    assert (bad.returncode, bad.err) == (
        1,
        "Unrecognized option or bad number of args for: '--nosuchoption'\n",
    )
    assert run_cli("-p").returncode == 1
    assert run_cli("-p", str(node.port), "--raw", "--csv", "ping").out == '"PONG"\n'
    assert run_cli("-p", str(node.port), "--csv", "--raw", "ping").out == "PONG\n"
    assert "Invalid value for '-p'" in run_cli("-p", "abc", "ping").err


def test_shutdown(cli, node) -> None:
    result = cli("shutdown")
    assert (result.returncode, result.out, result.err) == (0, "", "")
    node.proc.wait(10)


# ---- authentication -----------------------------------------------------------------


@pytest.fixture
def secured(start_node):
    return start_node(config={"requirepass": "pw"})


def test_auth_with_a(run_cli, secured) -> None:
    port = str(secured.port)
    ok = run_cli("-p", port, "-a", "pw", "qlen", "q")
    assert ok.out == "0\n"
    assert ok.err.startswith("Warning: Using a password with '-a' or '-u' option")
    quiet = run_cli("-p", port, "-a", "pw", "--no-auth-warning", "qlen", "q")
    assert (quiet.out, quiet.err) == ("0\n", "")
    denied = run_cli("-p", port, "qlen", "q")
    assert denied.out == "NOAUTH Authentication required.\n\n"
    wrong = run_cli("-p", port, "-a", "bad", "--no-auth-warning", "qlen", "q")
    assert wrong.err == "AUTH failed: ERR invalid password\n"
    assert wrong.out.startswith("NOAUTH")


def test_auth_with_uri_and_environment(run_cli, secured) -> None:
    port = secured.port
    by_uri = run_cli("-u", f"disque://:pw@127.0.0.1:{port}", "--no-auth-warning", "qlen", "q")
    assert by_uri.out == "0\n"
    by_env = run_cli("-p", str(port), "qlen", "q", env={"DISQUECLI_AUTH": "pw"})
    assert (by_env.out, by_env.err) == ("0\n", "")
    assert run_cli("-u", "http://x", "ping").err.startswith("Invalid URI scheme")


def test_ctrl_c_on_a_blocked_command(spawn, node) -> None:
    import pexpect

    child = spawn("-p", str(node.port), "getjob", "from", "nothing")
    wait_for(lambda: node.call("QSTAT", "nothing"), message="GETJOB to block")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130 and "Traceback" not in child.before


def test_hello_3_one_shot(cli) -> None:
    """HELLO 3 in one shot prints the RESP3 map, in every output mode."""
    assert '3# "proto" => (integer) 3\n' in cli("--no-raw", "hello", "3").out
    assert "\nproto 3\n" in cli("hello", "3").out
    hello = json.loads(cli("--json", "hello", "3").out)
    assert hello["server"] == "disque" and hello["proto"] == 3


def test_resp3_survives_a_reconnection(node) -> None:
    """The session speaks RESP3 again after a lost connection, as the user asked."""
    session = Session(Endpoint(port=node.port))
    try:
        session.call("HELLO", "3")
        assert isinstance(session.call("CONFIG", "GET", "hz"), Map)
        session.close()  # as a lost connection: the next call reconnects
        assert isinstance(session.call("CONFIG", "GET", "hz"), Map)
        session.call("HELLO", "2")
        session.close()
        reply = session.call("CONFIG", "GET", "hz")
        assert reply == [b"hz", b"10"] and not isinstance(reply, Map)
    finally:
        session.close()
