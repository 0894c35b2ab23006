"""The request reader in process (no I/O): streams of requests cut anywhere come out
as hiredis reads them fed whole (the oracle), inline commands between them as
split_args reads their lines, and what breaks the rules as a RequestError."""

from __future__ import annotations

import re

import hiredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from disque_server.request_reader import MAX_INLINE, RequestError, RequestReader

# Element bytes rich in what the checks look for: type bytes, digits, CR and LF.
ELEMENT = st.binary(max_size=40) | st.sampled_from(
    [b"*123", b"*9\r\n", b"$-1", b"\r\n*2\r\n", b"%7|8~45>6", b"0" * 30, b"ACKJOB"]
)


def encode_element(element: bytes, simple: bool) -> bytes:
    """A bulk string, or a simple one where the element allows it (hiredis takes both)."""
    if simple and b"\r" not in element and b"\n" not in element:
        return b"+" + element + b"\r\n"
    return b"$%d\r\n%s\r\n" % (len(element), element)


@st.composite
def request_streams(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    requests = draw(
        st.lists(st.lists(st.tuples(ELEMENT, st.booleans()), min_size=1, max_size=6), max_size=12)
    )
    stream = b"".join(
        b"*%d\r\n" % len(req) + b"".join(encode_element(e, simple) for e, simple in req)
        for req in requests
    )
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    return stream, cuts


def hiredis_reads(stream: bytes) -> list[list[bytes]]:
    reader = hiredis.Reader()
    reader.feed(stream)
    out = []
    while (request := reader.gets()) is not False:
        if request:
            out.append(request)
    return out


def read_in_pieces(reader: RequestReader, stream: bytes, cuts: list[int]) -> list[list[bytes]]:
    """Feed the stream cut at ``cuts``, pulling every request out after each piece."""
    out = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        if start < end:
            reader.feed(stream[start:end])
        while (request := reader.next_request()) is not None:
            out.append(request)
    return out


@settings(max_examples=300, deadline=None)
@given(request_streams())
def test_requests_cut_anywhere_come_out_as_hiredis_reads_them(case) -> None:
    stream, cuts = case
    reader = RequestReader()
    assert read_in_pieces(reader, stream, cuts) == hiredis_reads(stream)
    assert not reader.has_input() and reader.buffered() == 0


@settings(max_examples=100, deadline=None)
@given(request_streams())
def test_bus_messages_cut_anywhere_come_out_as_hiredis_reads_them(case) -> None:
    stream, cuts = case
    assert read_in_pieces(RequestReader(inline=False), stream, cuts) == hiredis_reads(stream)


@settings(max_examples=100, deadline=None)
@given(request_streams(), st.integers(0, 12))
def test_requests_pulled_later_come_out_in_order(case, later: int) -> None:
    """A blocked client pulls nothing while reads come in: they are kept, in order."""
    stream, cuts = case
    reader = RequestReader()
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    out = []
    for i, piece in enumerate(pieces):
        if piece:
            reader.feed(piece)
        if i >= later:
            while (request := reader.next_request()) is not None:
                out.append(request)
    while (request := reader.next_request()) is not None:
        out.append(request)
    assert out == hiredis_reads(stream)


@pytest.mark.parametrize(
    ("first", "plain"),
    [
        (b"*3\r\n$6\r\nACKJOB\r\n$1\r\n*\r\n$2\r\n\r\n\r\n", True),
        (b"*2\r\n$6\r\nACKJOB\r\n$0\r\n\r\n", True),
        (b"*1\r\n+PING\r\n", False),  # a simple string
        (b"*2\r\n$4\r\nECHO\r\n+x\r\n", False),
    ],
)
def test_plain_requests_are_read_without_hiredis(first: bytes, plain: bool) -> None:
    """The plain form is parsed by the reader itself; hiredis, given the rest of the
    read at once, holds the next request after the first."""
    stream = first + b"*1\r\n$4\r\nPING\r\n"
    reader = RequestReader()
    reader.feed(stream)
    assert reader.next_request() == hiredis_reads(stream)[0]
    assert reader.at_boundary is plain
    assert read_in_pieces(reader, b"", []) == hiredis_reads(stream)[1:]


def test_inline_commands_before_between_and_after_multibulk_ones() -> None:
    stream = (
        b'PING\r\nSET "a b" c\n*1\r\n$4\r\nPING\r\nECHO x\r\n\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n'
    )
    expected = [[b"PING"], [b"SET", b"a b", b"c"], [b"PING"], [b"ECHO", b"x"], [b"GET", b"k"]]
    for cut in range(len(stream) + 1):
        reader = RequestReader()
        assert read_in_pieces(reader, stream, [cut]) == expected, cut


@pytest.mark.parametrize(
    ("stream", "reason"),
    [
        (b"*2\r\n*3\r\n", "expected '$', got '*'"),
        (b"*99999999999\r\n", "invalid multibulk length"),
        (b"*1\r\n:1\r\n", "expected a multibulk request of bulk strings"),
        (b'GET "unbalanced\r\n', "unbalanced quotes in request"),
        (b"PING" + b"x" * (MAX_INLINE + 1), "too big inline request"),
    ],
)
def test_what_breaks_the_rules_is_a_request_error(stream: bytes, reason: str) -> None:
    reader = RequestReader()
    with pytest.raises(RequestError, match=re.escape(reason)):
        for i in range(0, len(stream), 1000):
            reader.feed(stream[i : i + 1000])
            while reader.next_request() is not None:
                pass


def test_the_bus_takes_arrays_only() -> None:
    reader = RequestReader(inline=False)
    reader.feed(b"PING\r\n")
    with pytest.raises(RequestError, match="not an array"):
        reader.next_request()
