"""The request reader: bytes in; requests, "need more" or a protocol error out.

One ``RequestReader`` per connection, with no I/O of its own (sans-IO): a
client connection (``client.Client``) and a cluster bus link
(``cluster.bus.BusLink``) feed it what they read and pull complete requests
(bus messages) out of it, one at a time, when they are ready to run one. A
client blocked in GETJOB just stops pulling: what it sends meanwhile is kept
here, in order, and comes out once it pulls again.

Requests are parsed with hiredis, which allocates room for an array as soon
as it reads its count, so a few bytes can cost gigabytes and seconds. The
headers that could make it do so (an array inside a request, a huge count)
are looked at before hiredis reads them (``feed_more``). A read of plain
requests is fed whole: the checks cost one scan per read.

Most requests come in the one form every client library sends: an array of
bulk strings with plain numbers, whole in the read. ``next_plain`` parses that
form itself, skipping each payload by its length, with no hiredis call and no
scan; anything else (another form, a limit passed, a request the read cuts)
goes the general way, through hiredis and its checks, from the same place.

Telnet-style inline commands ("PING\\r\\n") are read too, on clients: at the
start of a read, and after multibulk requests in the same read (hiredis
refuses the line; ``recover_inline`` finds where it starts).
"""

from __future__ import annotations

import re
from collections import deque
from typing import Final

import hiredis
from mypy_extensions import i64

from disque_common.splitargs import SplitError, split_args
from disque_server.resp import (
    AGGREGATE_TYPES,
    CUT,
    DOLLAR,
    NESTED,
    RESP_TYPES,
    STAR,
    Framing,
    byte_name,
    count_problem,
    feed_array_inside,
    next_array_header,
)

MAX_INLINE: Final = 64 * 1024
QUERY_BUFFER_LIMIT: Final = 1024 * 1024 * 1024
MAX_MULTIBULK: Final = 1024 * 1024
PROTO_MAX_BULK_LEN: Final = 512 * 1024 * 1024
SCAN_PENDING_MAX: Final = 1024 * 1024  # past this, follow the request header by header instead
FOLLOW_MAX_REQUESTS: Final = 8  # ... or inside one after fewer requests than this
NOT_BULK_STRINGS: Final = "expected a multibulk request of bulk strings"
MIN_BULK: Final = 6  # the bytes of the shortest bulk string, $0\r\n\r\n
NAME_MAX: Final = 16  # a longer first argument is not kept as ``last_name``
CR: Final = 13
LF: Final = 10
DIGIT_0: Final = 48
DIGIT_9: Final = 57

_BIG_LENGTH: Final = re.compile(rb"\$\d{9}")  # maybe over PROTO_MAX_BULK_LEN
_PARSE_ERRORS: Final = (hiredis.ProtocolError, MemoryError, ValueError, TypeError)


class RequestError(Exception):
    """The input breaks the protocol; the reason, as the error reply gives it. The
    reader is of no more use: the connection is closed after the reply."""


class RequestReader:
    """Where the parser stands: at a request boundary, or inside a request; then
    hiredis was given the ``pending`` pieces since the last boundary, and returned
    ``pending_count`` requests from them (or ``framing`` follows the stream, header by
    header). ``chunk`` is the read being fed to hiredis piece by piece, ``chunk_pos``
    where in it, ``clean`` whether a request start was checked in it (then small
    arrays need no look); ``deferred`` holds the reads not looked at yet."""

    def __init__(
        self,
        max_count: int = MAX_MULTIBULK,
        max_bulk: int = PROTO_MAX_BULK_LEN,
        buffer_limit: int = QUERY_BUFFER_LIMIT,
        inline: bool = True,
    ) -> None:
        self.max_count = max_count
        self.max_bulk = max_bulk
        self.buffer_limit = buffer_limit
        self.inline = inline  # inline commands allowed (clients), or arrays only (the bus)
        self.reader = hiredis.Reader()
        self.at_boundary = True
        self.pending: list[bytes] = []
        self.pending_len = 0
        self.pending_count = 0
        self.framing: Framing | None = None
        self.chunk = b""
        self.chunk_pos = 0
        self.clean = False
        self.deferred: deque[bytes] = deque()
        self.deferred_len = 0
        self.inline_buf = b""  # inline commands from inline_pos on
        self.inline_pos = 0
        self.header_value: i64 = 0  # the number the last header read by plain_header holds
        self.last_name = b""  # the command name of the last plain request (see next_plain)

    # ---- bytes in ----------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Keep a read; requests come out of it in the order they were sent."""
        if self.chunk_pos < len(self.chunk) or self.deferred or self.inline_buf:
            self.deferred.append(data)
            self.deferred_len += len(data)
        else:
            self.chunk, self.chunk_pos, self.clean = data, 0, False

    def has_input(self) -> bool:
        """Whether anything fed has not come out yet (a request may be complete)."""
        return bool(
            self.deferred
            or not self.at_boundary
            or self.inline_buf
            or self.chunk_pos < len(self.chunk)
        )

    def buffered(self) -> int:
        """The bytes held: the query buffer of CLIENT LIST and INFO."""
        return (
            self.pending_len
            + self.deferred_len
            + len(self.chunk)
            - self.chunk_pos
            + len(self.inline_buf)
            - self.inline_pos
        )

    # ---- requests out --------------------------------------------------------------
    def next_request(self) -> list[bytes] | None:
        """The next complete request (its arguments, at least one), or None when the
        input fed so far holds no more. Raises RequestError on a protocol error."""
        if self.at_boundary and not self.inline_buf:
            plain = self.next_plain()
            if plain is not None:
                return plain
            if self.chunk_pos >= len(self.chunk) and not self.deferred:
                return None  # all used: the common end of a read, with no hiredis call
        while True:
            if self.inline_buf:
                if self.inline_buf[self.inline_pos] == STAR:  # back to multibulk requests
                    self.chunk, self.chunk_pos, self.clean = (
                        self.inline_buf[self.inline_pos :],
                        0,
                        False,
                    )
                    self.inline_buf, self.inline_pos = b"", 0
                    continue
                argv = self.next_inline()
                if argv is None:
                    return None
                if argv:
                    return argv
                continue
            reader = self.reader  # (replaced by recover_inline)
            try:
                request = reader.gets()
            except _PARSE_ERRORS as exc:
                self.parse_failed(exc)
                continue
            if request is False:
                if self.at_boundary and self.chunk_pos >= len(self.chunk) and not self.deferred:
                    return None  # all used (the common end of a read)
                if not self.feed_more():
                    return None
                continue
            if type(request) is not list:
                raise RequestError(NOT_BULK_STRINGS)
            for part in request:
                if type(part) is not bytes:
                    raise RequestError(NOT_BULK_STRINGS)
            if reader.has_data():
                self.pending_count += 1
            else:
                self.at_boundary = True
                self.forget_pending()
            if request:
                return request

    def next_plain(self) -> list[bytes] | None:
        """The next request, if the read holds all of it in the plain form: ``*N``
        then N ``$L`` bulk strings, numbers in digits with no sign or leading zero, N
        and L within the limits. None leaves the request to the general path (which
        starts from the same place: nothing was consumed), whatever the reason.

        Positions are native 64-bit ints (``i64``: no tagged-int checks in compiled
        code). The command name is the bytes object of the request before when it is
        the same name: no new object, and its hash, cached in it, is not computed
        again for the command table (siphash of the name was 2% of a pipelined
        ACKJOB's CPU)."""
        buf = self.chunk
        pos: i64 = self.chunk_pos
        if pos >= len(buf):
            if not self.deferred:
                return None
            self.load_chunk()  # (at a boundary nothing is left of the read before)
            buf, pos = self.chunk, 0
        end: i64 = len(buf)
        if buf[pos] != STAR:
            return None
        pos = self.plain_header(buf, pos + 1, end, self.max_count)
        if pos < 0 or self.header_value == 0:
            return None  # (an empty array is skipped by the general path)
        count: i64 = self.header_value
        if count * MIN_BULK > end - pos:
            return None  # cannot be all in this read (and the list below stays small)
        max_bulk: i64 = self.max_bulk
        argv = [b"", b""] if count == 2 else [b""] * count  # (sized once: no appends)
        i: i64 = 0
        while i < count:
            if pos >= end or buf[pos] != DOLLAR:
                return None
            pos = self.plain_header(buf, pos + 1, end, max_bulk)
            if pos < 0:
                return None
            stop = pos + self.header_value
            if stop + 2 > end or buf[stop] != CR or buf[stop + 1] != LF:
                return None
            if i == 0 and self.same_name(buf, pos, stop):
                argv[0] = self.last_name
            else:
                argv[i] = buf[pos:stop]
                if i == 0 and stop - pos <= NAME_MAX:
                    self.last_name = argv[0]
            pos = stop + 2
            i += 1
        self.chunk_pos = pos
        return argv

    def same_name(self, buf: bytes, pos: i64, stop: i64) -> bool:
        """Whether buf[pos:stop] is ``last_name``, compared in place."""
        name = self.last_name
        if stop - pos != len(name):
            return False
        i: i64 = 0
        while pos < stop:
            if buf[pos] != name[i]:
                return False
            pos += 1
            i += 1
        return True

    def plain_header(self, buf: bytes, pos: i64, end: i64, limit: i64) -> i64:
        """Read the number at buf[pos] up to its CRLF into ``header_value``: where the
        header ends, or -1 if it is not plain (or not all here) or over the limit."""
        value: i64 = 0
        start = pos
        while pos < end:
            c: i64 = buf[pos]
            if c == CR:
                if pos == start or pos + 1 >= end or buf[pos + 1] != LF:
                    return -1
                if buf[start] == DIGIT_0 and pos > start + 1:
                    return -1  # a leading zero: hiredis decides
                self.header_value = value
                return pos + 2
            if c < DIGIT_0 or c > DIGIT_9:
                return -1
            value = value * 10 + c - DIGIT_0
            if value > limit:
                return -1
            pos += 1
        return -1

    def feed_more(self) -> bool:
        """Give hiredis the next piece of input: the rest of the read, or up to the next
        array header it must not read unchecked. False when there is nothing to give (all
        used, or the rest of a header still to come); RequestError on a bad header.

        Such a header is looked at once hiredis has run everything before it, and its
        state then says what the header is: at a request boundary, a request start (its
        count is checked); everything consumed but no boundary, an element (an array:
        refused); input left over, hiredis is inside a payload and the header is payload
        bytes, so from there ``framing`` follows the stream header by header, checking
        each one, to the next request boundary (it also skips payloads without looking
        at them). Lengths do not make hiredis allocate: they are checked once the read is
        used up and hiredis waits inside a request."""
        while True:
            chunk, pos = self.chunk, self.chunk_pos
            if pos >= len(chunk):
                # The read is used up inside a request. One of a few requests (big ones):
                # follow it header by header, which skips its payload without scanning
                # it, and checks its lengths. Else (a pipeline cut anywhere) only a bulk
                # length that may go over the limit needs a look; one cut by the end of
                # the read goes unseen, which costs nothing but the early error: hiredis
                # allocates nothing for a length, and the buffer limit holds.
                if (
                    not self.at_boundary
                    and self.framing is None
                    and (self.pending_count < FOLLOW_MAX_REQUESTS or _BIG_LENGTH.search(chunk))
                ):
                    self.start_framing()
                self.chunk, self.chunk_pos = b"", 0
                if not self.load_chunk():
                    return False
                continue
            if self.at_boundary:
                kind = chunk[pos]
                if kind != STAR:
                    # What does not start with '*' is an inline command at the start of a
                    # read; further on, what hiredis does not know (RESP values are read,
                    # and refused when they are no array).
                    if not self.inline:
                        raise RequestError("not an array")
                    if pos == 0 or kind not in RESP_TYPES:
                        self.inline_buf, self.inline_pos = chunk[pos:], 0
                        self.chunk, self.chunk_pos = b"", 0
                        self.framing = None
                        return True
                if kind in AGGREGATE_TYPES and chunk[pos + 2 : pos + 3] != b"\r":
                    problem = count_problem(chunk, pos, self.max_count)
                    if problem == CUT:
                        if not self.load_chunk():
                            return False
                        continue
                    if problem:
                        raise RequestError(problem)
                self.framing = None
                self.clean = True
                end = next_array_header(chunk, pos + 1, True)
            elif self.framing is not None:
                # Up to a bad header: what comes before it runs first, then the walk
                # from there finds it again.
                end, outcome = self.framing.walk(chunk, pos, 1)
                if end == pos:  # a bad header, or a boundary hiredis misses
                    raise RequestError(
                        "invalid request framing"
                        if outcome in (Framing.END, Framing.BOUNDARY, Framing.INLINE)
                        else outcome
                    )
            else:
                end = next_array_header(chunk, pos, self.clean)
                if end == pos:
                    past = pos + 1
                    fed = feed_array_inside(self.reader, chunk, pos)
                    if fed == NESTED:
                        raise RequestError(f"expected '$', got '{byte_name(chunk[pos])}'")
                    if fed:
                        self.pending.append(chunk[pos:past])
                        self.pending_len += 1
                        self.chunk_pos = pos = past
                    # Payload bytes. Follow the request header by header if that means
                    # walking few requests; else feed on to the next header to look at
                    # (a payload full of them costs 1 us each: 3 times what plain
                    # requests cost per byte, no more).
                    if self.pending_count < FOLLOW_MAX_REQUESTS:
                        self.start_framing()
                        continue
                    end = next_array_header(chunk, past, self.clean)
                    if end == pos:
                        continue
            if (
                self.framing is None
                and self.pending
                and self.pending_len + end - pos > SCAN_PENDING_MAX
            ):
                # A request too big to keep a copy of: follow it header by header.
                self.start_framing()
                continue
            self.chunk_pos = end
            self.at_boundary = False
            if self.framing is not None:
                self.reader.feed(chunk, pos, end - pos)
            else:
                piece = chunk if pos == 0 and end == len(chunk) else chunk[pos:end]
                self.reader.feed(piece)
                # A copy of what hiredis holds of the request in progress: it serves the
                # inline recovery, and to start framing mid-request.
                self.pending.append(piece)
                self.pending_len += len(piece)
            if self.reader.len() > self.buffer_limit:
                raise RequestError("query buffer limit reached")
            return True

    def load_chunk(self) -> bool:
        """Take the next read, after what is left of the current one (a header cut by
        the end of the read): False when no read is waiting."""
        if not self.deferred:
            return False
        data = self.deferred.popleft()
        self.deferred_len -= len(data)
        rest = self.chunk[self.chunk_pos :]
        self.chunk = rest + data if rest else data
        self.chunk_pos = 0
        self.clean = False
        return True

    def start_framing(self) -> None:
        """Follow the stream header by header from here on. Where hiredis stands comes
        from walking what it was given since the last request boundary."""
        framing = Framing(self.max_count, self.max_bulk)
        _, outcome = framing.walk(b"".join(self.pending))
        if outcome != Framing.END:
            # An array nested in a request, small enough to pass unchecked: the request
            # would be refused anyway.
            raise RequestError(outcome if outcome != Framing.INLINE else "invalid request framing")
        self.framing = framing
        self.forget_pending()

    def forget_pending(self) -> None:
        self.pending.clear()
        self.pending_len = 0
        self.pending_count = 0

    def parse_failed(self, exc: Exception) -> None:
        """hiredis refused the input: an inline command after multibulk ones goes on as
        such; anything else is a protocol error."""
        if not self.recover_inline(str(exc)):
            raise RequestError(str(exc).lower() or "invalid multibulk length")

    def recover_inline(self, error: str) -> bool:
        """An inline command right after multibulk ones in one read: hiredis cannot
        parse it, so restart from where the last request ended, as an inline line. That
        is found by walking what hiredis was given since the last boundary as hiredis
        did, past the requests it returned: they may use any encoding it accepts
        (simple strings for bulk ones, and so on)."""
        if not self.inline or "reply type byte" not in error or not self.pending:
            return False
        buf = b"".join(self.pending)
        end, outcome = Framing(self.max_count, self.max_bulk).walk(buf, 0, self.pending_count)
        if outcome != Framing.BOUNDARY or end >= len(buf) or buf[end] in RESP_TYPES:
            return False  # the bad byte is inside a request
        self.inline_buf, self.inline_pos = buf[end:] + self.chunk[self.chunk_pos :], 0
        self.chunk, self.chunk_pos = b"", 0
        self.reader = hiredis.Reader()
        self.at_boundary = True
        self.clean = False
        self.forget_pending()
        return True

    # ---- inline commands -----------------------------------------------------------
    def next_inline(self) -> list[bytes] | None:
        """The next inline command's arguments (none for a blank line), or None when its
        line is not all here and no more input is."""
        buf, pos = self.inline_buf, self.inline_pos
        nl = buf.find(b"\n", pos)
        while nl < 0:
            if len(buf) - pos > MAX_INLINE:
                raise RequestError("too big inline request")
            if not self.deferred:
                return None
            data = self.deferred.popleft()
            self.deferred_len -= len(data)
            buf, pos = buf[pos:] + data, 0
            self.inline_buf, self.inline_pos = buf, 0
            nl = buf.find(b"\n", len(buf) - len(data))
        line = buf[pos:nl].rstrip(b"\r")
        if nl + 1 < len(buf):
            self.inline_pos = nl + 1
        else:
            self.inline_buf, self.inline_pos = b"", 0
        try:
            return split_args(line)
        except SplitError:
            raise RequestError("unbalanced quotes in request") from None
