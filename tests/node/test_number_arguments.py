"""Numbers in command arguments on a real node, as Disque 1.0-rc1 reads them: strtoll
for options and timeouts ('+60', '010' and '' are numbers, ' 60' is not), strtoul for
scan cursors, with Disque's error texts. The rules themselves are unit-tested in
tests/unit/test_numbers.py."""

from __future__ import annotations

import pytest
import redis

from testkit.conformance import Conn, pairs


def test_addjob_takes_numbers_with_a_plus_or_leading_zeros(client: redis.Redis) -> None:
    jid = client.execute_command("ADDJOB", "q", "body", "+0", "TTL", "+60", "RETRY", "010")
    job = pairs(client.execute_command("SHOW", jid))
    assert (job["ttl"], job["retry"]) == (60, 10)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("ADDJOB", "q", "body", "0", "TTL", " 60"), "ERR TTL must be a number > 0"),
        (("ADDJOB", "q", "body", "0", "TTL", "1_0"), "ERR TTL must be a number > 0"),
        (("ADDJOB", "q", "body", "60 "), "ERR timeout is not an integer or out of range"),
        (("GETJOB", "COUNT", "+", "FROM", "q"), "ERR COUNT must be a number greater than zero"),
        (("QPEEK", "q", " 1"), "ERR value is not an integer or out of range"),
        (("QSCAN", "0x1"), "ERR invalid cursor or option name"),
        (("CLIENT", "KILL", "ID", "x"), "ERR value is not an integer or out of range"),
        (("CLUSTER", "MEET", "127.0.0.1", "x"), "ERR Invalid TCP port specified: x"),
        (
            ("CLUSTER", "MEET", "127.0.0.1", "60000"),  # its bus port would be past 65535
            "ERR Invalid node address specified: 127.0.0.1:60000",
        ),
        # The bus port argument (Redis 7, beyond Disque): checked as the port.
        (("CLUSTER", "MEET", "127.0.0.1", "7711", "x"), "ERR Invalid bus port specified: x"),
        (
            ("CLUSTER", "MEET", "127.0.0.1", "7711", "70000"),
            "ERR Invalid node address specified: 127.0.0.1:7711@70000",
        ),
        (
            ("CLUSTER", "MEET", "127.0.0.1", "7711", "0"),
            "ERR Invalid node address specified: 127.0.0.1:7711@0",
        ),
        (
            ("CLUSTER", "MEET", "127.0.0.1", "0", "17711"),
            "ERR Invalid node address specified: 127.0.0.1:0@17711",
        ),
        (("CLUSTER", "MEET", "127.0.0.1", "x", "17711"), "ERR Invalid TCP port specified: x"),
    ],
)
def test_not_a_number_to_disque(raw: Conn, args: tuple[str, ...], error: str) -> None:
    assert raw.call(*args) == ("-", error)


def test_getjob_qpeek_and_scans_read_numbers_as_disque(client: redis.Redis) -> None:
    ids = [client.execute_command("ADDJOB", "q", f"job{i}", 0) for i in range(3)]
    assert len(client.execute_command("QPEEK", "q", "+2")) == 2
    got = client.execute_command("GETJOB", "NOHANG", "TIMEOUT", "", "COUNT", "+2", "FROM", "q")
    assert [job[1] for job in got] == ids[:2]
    assert client.execute_command("QSCAN", "COUNT", "+10", "") == [b"0", [b"q"]]
    assert client.execute_command("JSCAN", "-1")[0] == b"0"  # strtoul: 2**64 - 1, the end
