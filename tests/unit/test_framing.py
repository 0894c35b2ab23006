"""Request framing (disque_server/resp.py), in-process: the header walk that cuts
a stream where hiredis does, and the scans that find the array headers to look
at before hiredis reads them. hiredis itself is the oracle."""

from __future__ import annotations

import re

import hiredis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disque_server.resp import (
    CUT,
    MAX_HEADER_LINE,
    NESTED,
    Framing,
    count_problem,
    feed_array_inside,
    next_array_header,
)

# No deadline and no speed check: a loaded machine must not fail a property on timing.
RELAXED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

MAX_COUNT = 1024
MAX_BULK = 4096


# ---- streams of requests ----------------------------------------------------------------


def bulk(payload: bytes, trailer: bytes = b"\r\n") -> bytes:
    # hiredis skips the 2 bytes after a payload without looking at them.
    return b"$%d\r\n%s%s" % (len(payload), payload, trailer)


line_text = st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
trailers = st.one_of(st.just(b"\r\n"), st.binary(min_size=2, max_size=2))
bulk_elements = st.builds(bulk, st.binary(max_size=300), trailers)
# What else hiredis accepts as an element of a request (the command then refuses
# it): every RESP type with no count of its own.
other_elements = st.one_of(
    line_text.map(lambda t: b"+%s\r\n" % t),
    line_text.map(lambda t: b"-%s\r\n" % t),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: b":%d\r\n" % n),
    st.just(b"$-1\r\n"),
    st.just(b"_\r\n"),
    st.sampled_from([b"#t\r\n", b"#f\r\n"]),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: b",%r\r\n" % f),
    st.integers(0, 10**30).map(lambda n: b"(%d\r\n" % n),
    st.binary(max_size=20).map(lambda b: b"=%d\r\ntxt:%s\r\n" % (len(b) + 4, b)),
)


def requests(bulk_only: bool) -> st.SearchStrategy[bytes]:
    element = bulk_elements if bulk_only else st.one_of(bulk_elements, other_elements)
    array = st.lists(element, min_size=1, max_size=8).map(
        lambda items: b"*%d\r\n" % len(items) + b"".join(items)
    )
    if bulk_only:
        return array
    return st.one_of(array, st.sampled_from([b"*0\r\n", b"*-1\r\n"]))


def pipelines(bulk_only: bool) -> st.SearchStrategy[list[bytes]]:
    return st.lists(requests(bulk_only), min_size=1, max_size=6)


def cuts(data: st.DataObject, size: int) -> list[int]:
    return sorted(set(data.draw(st.lists(st.integers(0, size), max_size=8))))


def chunks(buf: bytes, at: list[int]) -> list[bytes]:
    edges = [0, *at, len(buf)]
    return [buf[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


def hiredis_replies(buf: bytes) -> int:
    reader = hiredis.Reader()
    reader.feed(buf)
    count = 0
    while reader.gets() is not False:
        count += 1
    return count


def ends_of(pipeline: list[bytes]) -> list[int]:
    ends, total = [], 0
    for request in pipeline:
        total += len(request)
        ends.append(total)
    return ends


# ---- Framing.walk agrees with hiredis ------------------------------------------------------


@pytest.mark.parametrize("bulk_only", [False, True], ids=["client", "bus"])
@RELAXED
@given(data=st.data())
def test_walk_stops_where_hiredis_completes_a_request(bulk_only: bool, data: st.DataObject) -> None:
    pipeline = data.draw(pipelines(bulk_only))
    buf = b"".join(pipeline)
    for k, end in enumerate(ends_of(pipeline), 1):
        assert Framing(MAX_COUNT, MAX_BULK, bulk_only).walk(buf, 0, k) == (end, Framing.BOUNDARY)
        assert hiredis_replies(buf[:end]) == k
        assert hiredis_replies(buf[: end - 1]) == k - 1


@pytest.mark.parametrize("bulk_only", [False, True], ids=["client", "bus"])
@RELAXED
@given(data=st.data())
def test_walk_carries_its_state_over_any_cuts(bulk_only: bool, data: st.DataObject) -> None:
    """Fed read by read, one request at a time, the walk finds every boundary."""
    pipeline = data.draw(pipelines(bulk_only))
    buf = b"".join(pipeline)
    framing = Framing(MAX_COUNT, MAX_BULK, bulk_only)
    found, offset = [], 0
    for chunk in chunks(buf, cuts(data, len(buf))):
        pos = 0
        while True:
            pos, outcome = framing.walk(chunk, pos, 1)
            if outcome == Framing.END:
                break
            assert outcome == Framing.BOUNDARY
            found.append(offset + pos)
        offset += len(chunk)
    assert found == ends_of(pipeline)


# ---- Framing.walk refuses what a request must not be -------------------------------------

BAD_HEADERS = [
    # (valid bytes before it, the bad header, bulk_only, the reason)
    (b"*1\r\n", b"*1\r\n$1\r\na\r\n", False, "expected '$', got '*'"),  # nested array
    (b"*2\r\n$1\r\na\r\n", b"%1\r\n", False, "expected '$', got '%'"),
    (b"", b"*%d\r\n" % (MAX_COUNT + 1), False, "invalid multibulk length"),
    (b"", b"*-2\r\n", False, "invalid multibulk length"),
    (b"", b"*x\r\n", False, "invalid multibulk length"),
    (b"", b"*" + b"1" * 30 + b"\r\n", False, "invalid multibulk length"),
    (b"*1\r\n", b"$%d\r\n" % (MAX_BULK + 1), False, "invalid bulk length"),
    (b"*1\r\n", b"$-2\r\n", False, "invalid bulk length"),
    (b"*1\r\n", b"$" + b"9" * 30, False, "invalid bulk length"),
    (b"", b"PING\r\n", False, Framing.INLINE),
    (b"*1\r\n", b"+OK\r\n", True, "expected '$', got '+'"),
    (b"", b"+OK\r\n", True, "expected '*', got '+'"),
    (b"", b"*0\r\n", True, "invalid multibulk length"),
    (b"*1\r\n", b"$-1\r\n", True, "invalid bulk length"),
]


@pytest.mark.parametrize(("before", "bad", "bulk_only", "reason"), BAD_HEADERS)
def test_walk_stops_at_a_bad_header(
    before: bytes, bad: bytes, bulk_only: bool, reason: str
) -> None:
    good = b"*2\r\n$4\r\nPING\r\n$3\r\n*99\r\n" + before  # a payload that looks like a header
    framing = Framing(MAX_COUNT, MAX_BULK, bulk_only)
    assert framing.walk(good + bad) == (len(good), reason)


@RELAXED
@given(data=st.data())
def test_walk_finds_a_nested_array_however_the_stream_is_cut(data: st.DataObject) -> None:
    pipeline = data.draw(pipelines(False))
    buf = b"".join(pipeline) + b"*2\r\n$1\r\na\r\n*1000\r\n"
    framing = Framing(MAX_COUNT, MAX_BULK)
    outcome = Framing.END
    for chunk in chunks(buf, cuts(data, len(buf))):
        _, outcome = framing.walk(chunk)
        if outcome != Framing.END:
            break
    assert outcome == "expected '$', got '*'"


# ---- next_array_header and count_problem ---------------------------------------------------

BIG = re.compile(rb"[*%|~>]\d{3}")
ANY = re.compile(rb"[*%|~>]\d")
CUT_AT_END = re.compile(rb"[*%|~>]\d*\Z")


def expected_header(buf: bytes, start: int, small_ok: bool) -> int:
    """The definition: the first array header (of 100+ elements with small_ok) from
    start, and before it none whose count the end of the read cuts."""
    end = len(buf)
    cut = CUT_AT_END.search(buf, max(start, end - MAX_HEADER_LINE))
    if cut:
        end = cut.start()
    match = (BIG if small_ok else ANY).search(buf, start, end)
    return match.start() if match else end


noisy = st.binary(max_size=3000) | st.lists(
    st.sampled_from(
        [
            b"*",
            b"%",
            b"|",
            b"~",
            b">",
            b"$",
            b"1",
            b"0",
            b"9",
            b"\r\n",
            b"x",
            b"*1",
            b"*100",
            b"$5\r\n",
        ]
    ),
    max_size=1500,
).map(b"".join)


@RELAXED
@given(buf=noisy.filter(bool), small_ok=st.booleans(), data=st.data())
def test_next_array_header_matches_its_definition(
    buf: bytes, small_ok: bool, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(buf)))
    assert next_array_header(buf, start, small_ok) == expected_header(buf, start, small_ok)


@pytest.mark.parametrize(
    ("buf", "problem"),
    [
        (b"*5\r\n", None),
        (b"*-1\r\n", None),
        (b"*%d\r\n" % MAX_COUNT, None),
        (b"*%d\r\n" % (MAX_COUNT + 1), "invalid multibulk length"),
        (b"%2000\r\n", "invalid multibulk length"),
        (b"*abc\r\n", None),  # hiredis judges that one
        (b"*12", CUT),  # the count line is not all in
        (b"*" + b"1" * (MAX_HEADER_LINE + 2), "invalid multibulk length"),  # longer than any count
    ],
)
def test_count_problem(buf: bytes, problem: str | None) -> None:
    assert count_problem(buf, 0, MAX_COUNT) == problem


# ---- an array header inside a request: payload, or a nested array ---------------------------


@pytest.mark.parametrize(
    ("before", "rest", "fed", "complete"),
    [
        # hiredis is inside a payload: the header is payload bytes, nothing is fed.
        (b"*2\r\n$3\r\nfoo\r\n$10\r\nbar", b"*123456\r\n", 0, [b"foo", b"bar*123456"]),
        # The type byte of a simple string came before: the header is its text.
        (b"*2\r\n$3\r\nfoo\r\n+", b"*123\r\n", 1, [b"foo", b"*123"]),
        (b"*1\r\n+", b"*5\r\n", 1, [b"*5"]),
        # An element starts here: an array inside a request.
        (b"*2\r\n$3\r\nfoo\r\n", b"*1000000000\r\n", NESTED, None),
        (b"*1\r\n", b"*3\r\n", NESTED, None),
    ],
    ids=["payload", "line", "first-line", "element", "first-element"],
)
def test_feed_array_inside(
    before: bytes, rest: bytes, fed: int, complete: list[bytes] | None
) -> None:
    """What hiredis holds says what the header is; only the type byte is ever fed, so a
    nested array's count is never read (it would be allocated)."""
    reader = hiredis.Reader()
    reader.feed(before)
    assert reader.gets() is False
    held = reader.len()
    assert feed_array_inside(reader, rest, 0) == fed
    assert reader.len() == held + (fed != 0)  # (NESTED: the type byte was fed)
    if complete is not None:
        reader.feed(rest, fed)
        assert reader.gets() == complete
