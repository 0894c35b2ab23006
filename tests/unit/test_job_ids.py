"""Job IDs (disque_server/job.py), in-process: the format Disque 1.0-rc1 writes
(D-<node 8>-<144 random bits, base64>-<TTL minutes, 4 hex>), the odd/even TTL
that tells at-least-once from at-most-once jobs, and what counts as an ID."""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disque_server.job import (
    ID_LEN,
    RANDOM_POOL_IDS,
    generate_job_id,
    is_at_least_once_id,
    ttl_minutes_from_id,
    valid_job_id,
)

# No deadline and no speed check: a loaded machine must not fail a property on timing.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

NODE_ID = b"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"
ID_FORMAT = re.compile(rb"D-0f1e2d3c-[A-Za-z0-9+/]{24}-[0-9a-f]{4}\Z")

ttls = st.integers(1, 2**31)  # ADDJOB refuses a TTL of 0 or less
retries = st.integers(0, 2**31)


@RELAXED
@given(ttl=ttls, retry=retries)
def test_id_format(ttl: int, retry: int) -> None:
    jid = generate_job_id(NODE_ID, ttl, retry)
    assert len(jid) == ID_LEN
    assert ID_FORMAT.match(jid), jid
    assert len(base64.b64decode(jid[11:35], validate=True)) == 18  # 144 bits
    assert valid_job_id(jid)


@RELAXED
@given(ttl=ttls, retry=retries)
def test_ttl_in_minutes_odd_for_at_least_once(ttl: int, retry: int) -> None:
    jid = generate_job_id(NODE_ID, ttl, retry)
    minutes = ttl_minutes_from_id(jid)
    exact = min(ttl // 60, 0xFFFF)
    # Forcing the parity moves the value by one minute at most, never past 0xffff.
    assert abs(minutes - exact) <= 1 and minutes <= 0xFFFF
    assert minutes % 2 == (1 if retry else 0)
    assert is_at_least_once_id(jid) == bool(retry)


@pytest.mark.parametrize(
    ("ttl", "retry", "suffix"),
    [
        (59, 0, b"-0000"),  # under a minute, at most once: 0
        (59, 1, b"-0001"),  # ... at least once: forced to 1
        (24 * 3600, 30, b"-05a1"),  # the default TTL, 1440 minutes, forced odd
        (24 * 3600, 0, b"-05a0"),
        (2**31, 5, b"-ffff"),  # capped at 16 bits
        (2**31, 0, b"-fffe"),
    ],
)
def test_ttl_field(ttl: int, retry: int, suffix: bytes) -> None:
    assert generate_job_id(NODE_ID, ttl, retry).endswith(suffix)


def test_ids_differ_and_the_cached_parts_do_not_leak() -> None:
    """Prefix and TTL field are cached per node and per TTL: mixing them must not
    hand one job the parts of another."""
    other = b"aaaabbbbccccddddeeeeffff0000111122223333"
    ids = {
        generate_job_id(node, ttl, retry)
        for node in (NODE_ID, other)
        for ttl in (60, 120, 3600)
        for retry in (0, 1)
        for _ in range(50)
    }
    assert len(ids) == 2 * 3 * 2 * 50
    for jid in ids:
        assert jid[2:10] in (NODE_ID[:8], other[:8])


# ---- what counts as an ID (validateJobID: the length and the three separators) ----


@RELAXED
@given(body=st.binary(min_size=ID_LEN - 4, max_size=ID_LEN - 4))
def test_any_bytes_in_the_right_places_are_an_id(body: bytes) -> None:
    jid = b"D-" + body[:8] + b"-" + body[8:32] + b"-" + body[32:]
    assert valid_job_id(jid)


@pytest.mark.parametrize(
    "jid",
    [
        b"",
        b"D-0f1e2d3c-" + b"A" * 24 + b"-05a",  # 39 bytes
        b"D-0f1e2d3c-" + b"A" * 24 + b"-05a11",  # 41 bytes
        b"d-0f1e2d3c-" + b"A" * 24 + b"-05a1",  # the D is upper case
        b"DX0f1e2d3c-" + b"A" * 24 + b"-05a1",
        b"D-0f1e2d3cX" + b"A" * 24 + b"-05a1",
        b"D-0f1e2d3c-" + b"A" * 24 + b"X05a1",
    ],
)
def test_not_an_id(jid: bytes) -> None:
    assert not valid_job_id(jid)


def test_ttl_field_of_a_foreign_id() -> None:
    jid = b"D-0f1e2d3c-" + b"A" * 24 + b"-%s"
    assert ttl_minutes_from_id(jid % b"05a1") == 0x5A1
    assert ttl_minutes_from_id(jid % b"05A1") == 0x5A1  # Disque lowers the digits
    assert ttl_minutes_from_id(jid % b"zzzz") == 0


@pytest.mark.parametrize(
    ("field", "minutes"),
    [
        (b"00g1", 0x0001),  # Disque: odd, at least once; int(): 0, even
        (b"1f1 ", 0x1F10),
        (b"1_f1", 0x10F1),
        (b" 0x1", 0x0001),  # no prefix, no blanks: each char is a digit or 0
        (b"00\x001", 0x0101),  # hexToInt's strchr finds the NUL: 16, ORed into the next digit
    ],
)
def test_ttl_field_with_non_hex_digits(field: bytes, minutes: int) -> None:
    jid = b"D-0f1e2d3c-" + b"A" * 24 + b"-" + field
    assert ttl_minutes_from_id(jid) == minutes


def test_ids_stay_distinct_and_well_formed_past_a_pool_of_random_parts() -> None:
    """The random parts come from a pool encoded RANDOM_POOL_IDS at a time: IDs cut
    from it and from the next are well formed, and none repeats."""
    ids = [generate_job_id(NODE_ID, 3600, 1) for _ in range(3 * RANDOM_POOL_IDS + 7)]
    assert len(set(ids)) == len(ids)
    assert all(ID_FORMAT.match(jid) for jid in ids)
