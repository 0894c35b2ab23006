"""Numbers in arguments (disque_server/commands/args.py), in-process, as Disque 1.0-rc1
reads them: parse_ll is getLongLongFromObject (strtoll, base 10, then the whole C
string must be used and no blank may come first), parse_scan_cursor is
parseScanCursorOrReply (the same with strtoul). The tables were checked against a
disque-server 1.0-rc1 (ADDJOB RETRY, QPEEK, QSCAN/JSCAN cursors)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disque_server.commands.args import LLONG_MAX, LLONG_MIN, ULONG_MAX, parse_ll, parse_scan_cursor
from disque_server.job import field_int

# No deadline and no speed check: a loaded machine must not fail a property on timing.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(
    ("arg", "value"),
    [
        (b"0", 0),
        (b"60", 60),
        (b"+60", 60),
        (b"-60", -60),
        (b"-0", 0),
        (b"", 0),  # no digits and nothing left over
        (b"0" * 30 + b"5", 5),  # leading zeros do not count
        (b"5\x00abc", 5),  # the C string ends at the NUL
        (b"\x005", 0),
        (b"9223372036854775807", LLONG_MAX),
        (b"-9223372036854775808", LLONG_MIN),
    ],
)
def test_a_long_long(arg: bytes, value: int) -> None:
    assert parse_ll(arg) == value


@pytest.mark.parametrize(
    "arg",
    [
        b" 5",
        b"\t5",
        b"5 ",
        b"5\n",  # a blank first or anything left over
        b"+",
        b"-",
        b"+-5",
        b"--5",  # a sign with no digits
        b"1_0",
        b"0x10",
        b"1e3",
        b"1.5",
        b"five",
        "\u0661".encode(),  # a digit, not an ASCII one
        b"9223372036854775808",
        b"-9223372036854775809",  # ERANGE
        b"1" * 5000,
        b"0" * 100_000 + b"x",
    ],
)
def test_not_a_long_long(arg: bytes) -> None:
    assert parse_ll(arg) is None


@RELAXED
@given(value=st.integers(LLONG_MIN, LLONG_MAX), zeros=st.integers(0, 30), plus=st.booleans())
def test_any_long_long_however_written(value: int, zeros: int, plus: bool) -> None:
    sign = "-" if value < 0 else "+" if plus else ""
    assert parse_ll(f"{sign}{'0' * zeros}{abs(value)}".encode()) == value


@RELAXED
@given(value=st.one_of(st.integers(max_value=LLONG_MIN - 1), st.integers(min_value=LLONG_MAX + 1)))
def test_past_a_long_long(value: int) -> None:
    assert parse_ll(str(value).encode()) is None


@pytest.mark.parametrize(
    ("arg", "cursor"),
    [
        (b"0", 0),
        (b"", 0),
        (b"+7", 7),
        (b"7\x00x", 7),
        (b"18446744073709551615", ULONG_MAX),
        (b"-1", ULONG_MAX),  # strtoul negates modulo 2**64
        (b"-18446744073709551615", 1),
        (b"-0", 0),
    ],
)
def test_a_scan_cursor(arg: bytes, cursor: int) -> None:
    assert parse_scan_cursor(arg) == cursor


@pytest.mark.parametrize(
    "arg",
    [
        b"18446744073709551616",
        b"-18446744073709551616",
        b" 1",
        b"1 ",
        b"+",
        b"x",
        b"0x1",
    ],
)
def test_not_a_scan_cursor(arg: bytes) -> None:
    assert parse_scan_cursor(arg) is None


@RELAXED
@given(st.one_of(st.integers(-(10**20), 10**20).map(lambda n: b"%d" % n), st.binary(max_size=21)))
def test_a_job_field_reads_as_int_does(field: bytes) -> None:
    """job_from_fields' numbers (REPLJOB, YOURJOBS, the AOF): field_int is int()."""
    try:
        expected: int | None = int(field)
    except ValueError:
        expected = None
    try:
        got: int | None = field_int(field)
    except ValueError:
        got = None
    assert got == expected
