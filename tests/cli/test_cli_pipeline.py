"""Commands from stdin against a real node: pipelines, --pipe mass insertion, -e."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.timeout(30)

JOB_ID = r"D-[0-9a-f]{8}-[A-Za-z0-9+/]{24}-[0-9a-f]{4}"


def test_commands_from_stdin(cli) -> None:
    script = (
        b"\n".join(
            [
                b"addjob q 'first job' 0",
                b'addjob q "second\\njob" 0 REPLICATE 1',
                b"qlen q",
                b"",
                b"getjob count 2 from q",
                b"2 qlen q",
                b'show "unterminated',
                b"show notajobid",
            ]
        )
        + b"\n"
    )
    result = cli(input=script)
    assert result.returncode == 0, result.err
    assert re.fullmatch(
        rf"({JOB_ID})\n({JOB_ID})\n2\nq\n\1\nfirst job\nq\n\2\nsecond\njob\n0\n0\n"
        r"Invalid argument\(s\)\nBADID Invalid Job ID format\.\n\n",
        result.out,
    ), result.out


def test_typed_output_for_stdin_commands(cli) -> None:
    result = cli("--no-raw", input=b"qlen q\nqpeek q 1\nhello\n")
    lines = result.out.splitlines()
    assert lines[:2] == ["(integer) 0", "(empty array)"]
    assert lines[2] == "1) (integer) 1"


def test_e_makes_a_pipeline_fail_on_error_replies(cli) -> None:
    good = cli("-e", input=b"qlen q\nping\n")
    assert good.returncode == 0
    bad = cli("-e", input=b"qlen q\nshow bad\nping\n")
    assert bad.returncode == 1
    assert bad.out.endswith("PONG\n"), "the pipeline goes on after the error"


def test_stdin_pipeline_on_unreachable_node(run_cli) -> None:
    from testkit.nodes import free_port

    result = run_cli("-p", str(free_port()), input=b"ping\nping\n")
    assert result.returncode == 1
    assert result.err.count("Could not connect to Disque at") == 1


def _addjob_protocol(queue: str, count: int) -> bytes:
    out = []
    for i in range(count):
        body = f"job{i}".encode()
        out.append(
            b"*4\r\n$6\r\nADDJOB\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$1\r\n0\r\n"
            % (len(queue), queue.encode(), len(body), body)
        )
    return b"".join(out)


def test_pipe_mass_insertion(cli) -> None:
    result = cli("--pipe", input=_addjob_protocol("bulk", 2000))
    assert result.returncode == 0, result.err
    assert result.out == (
        "All data transferred. Waiting for the last reply...\n"
        "Last reply received from server.\n"
        "errors: 0, replies: 2000\n"
    )
    assert cli("qlen", "bulk").out == "2000\n"


def test_pipe_counts_errors(cli) -> None:
    protocol = (
        _addjob_protocol("q", 3) + b"*2\r\n$4\r\nSHOW\r\n$3\r\nbad\r\n" + b"PING\r\n"
    )  # an inline command after multibulk ones
    result = cli("--pipe", input=protocol)
    assert result.returncode == 1
    assert result.out.endswith("errors: 1, replies: 5\n")
    assert result.err == "BADID Invalid Job ID format.\n"


def test_pipe_reports_a_lost_connection(cli) -> None:
    result = cli("--pipe", input=b"*1\r\n$4\r\nQUIT\r\n")
    assert result.returncode == 1
    assert result.err.startswith("Error reading from the server: ")
    assert "Traceback" not in result.err
