"""RESP: reply encoding, and the framing of requests as hiredis reads them.

Every byte the node writes in RESP is built here: replies, bus messages and
AOF records (``bulk_array``).

Hot replies are built from precomputed constants; ``encode`` turns plain
Python values into RESP for the less frequent, structured replies
(SHOW, QSTAT, CONFIG GET, HELLO ...). RESP2 and RESP3 differ only in
nulls and maps, so one ``Protocol`` object per version carries those.

Requests (clients) and messages (cluster bus) are parsed with hiredis,
which allocates room for an array as soon as it reads its count: a
20-byte header can cost gigabytes and seconds. ``next_array_header``
finds the headers to look at before hiredis reads them, at the cost of
one scan per read; ``Framing`` follows a stream header by header,
cutting it exactly where hiredis will, when a scan is not enough.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Final

import hiredis
from mypy_extensions import mypyc_attr

CRLF: Final = b"\r\n"
OK: Final = b"+OK\r\n"
PONG: Final = b"+PONG\r\n"
QUEUED: Final = b"+QUEUED\r\n"
EMPTY_ARRAY: Final = b"*0\r\n"
ZERO: Final = b":0\r\n"
ONE: Final = b":1\r\n"
# GETJOB on a leaving node, and the clients blocked in GETJOB when it starts leaving.
LEAVING_ERROR: Final = (
    b"-LEAVING This node is leaving the cluster, please connect to a different one\r\n"
)

_SMALL_INTS: Final = [b":%d\r\n" % i for i in range(1024)]
_ARRAY_HEADERS: Final = [b"*%d\r\n" % i for i in range(1024)]
_BULK_HEADERS: Final = [b"$%d\r\n" % i for i in range(1024)]


@mypyc_attr(native_class=False)  # mypyc compiles no subclass of bytes: a Python class
class Status(bytes):
    """A value that must be sent as a status reply (+...), not a bulk."""


def status(s: bytes) -> bytes:
    return b"+" + s + CRLF


def error(msg: str) -> bytes:
    """``msg`` includes the error code: 'ERR ...', 'NOJOB ...'."""
    # (surrogateescape: a client's bytes quoted in the message go back as they came)
    return (
        b"-"
        + msg.replace("\r", " ").replace("\n", " ").encode("utf-8", errors="surrogateescape")
        + CRLF
    )


def integer(n: int) -> bytes:
    if 0 <= n < 1024:
        return _SMALL_INTS[n]
    return b":%d\r\n" % n


def bulk(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


def array_header(n: int) -> bytes:
    if n < 1024:
        return _ARRAY_HEADERS[n]
    return b"*%d\r\n" % n


def bulk_array(parts: list[bytes]) -> bytes:
    """A RESP array of bulk strings: a bus message, an AOF record. (Compiled, a loop over
    precomputed headers beats hiredis's pack_command, which sprintf()s every length.)"""
    out = [array_header(len(parts))]
    for part in parts:
        n = len(part)
        out.append(_BULK_HEADERS[n] if n < 1024 else b"$%d\r\n" % n)
        out.append(part)
        out.append(CRLF)
    return b"".join(out)


def bulk_array_length(parts: list[bytes]) -> int:
    """Bytes of ``bulk_array(parts)``: where a request read back from a file ended."""
    return len(b"*%d\r\n" % len(parts)) + sum(len(b"$%d\r\n" % len(a)) + len(a) + 2 for a in parts)


class Protocol:
    """What differs between RESP2 and RESP3."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.null = b"$-1\r\n" if version == 2 else b"_\r\n"
        self.null_array = b"*-1\r\n" if version == 2 else b"_\r\n"

    def map_header(self, n: int) -> bytes:
        return array_header(2 * n) if self.version == 2 else b"%%%d\r\n" % n

    def encode(self, value: Any) -> bytes:
        """Encode a Python value: int, bytes/str (bulk), Status, None, list, dict."""
        out: list[bytes] = []
        self._encode(value, out)
        return b"".join(out)

    def _encode(self, value: Any, out: list[bytes]) -> None:
        if isinstance(value, Status):
            out.append(b"+" + value + CRLF)
        elif isinstance(value, bytes):
            out.append(b"$%d\r\n%s\r\n" % (len(value), value))
        elif isinstance(value, bool):
            out.append(integer(int(value)))
        elif isinstance(value, int):
            out.append(integer(value))
        elif isinstance(value, str):
            self._encode(value.encode("utf-8", errors="surrogateescape"), out)
        elif value is None:
            out.append(self.null)
        elif isinstance(value, dict):
            out.append(self.map_header(len(value)))
            for k, v in value.items():
                self._encode(k, out)
                self._encode(v, out)
        elif isinstance(value, (list, tuple)):
            out.append(array_header(len(value)))
            for v in value:
                self._encode(v, out)
        else:
            raise TypeError(f"cannot encode {type(value).__name__}")


RESP2: Final = Protocol(2)
RESP3: Final = Protocol(3)


# ---- request framing ---------------------------------------------------------------------

# The type bytes hiredis knows (read.c, processItem): any other byte where a reply or an
# element starts is a protocol error to it.
RESP_TYPES: Final = frozenset(b"*$+-:,_#(=%|~>")
AGGREGATE_TYPES: Final = frozenset(b"*%|~>")  # hiredis allocates room for their count at once
PAIR_TYPES: Final = frozenset(b"%|")  # maps and attributes: count pairs
BLOB_TYPES: Final = frozenset(b"$=")  # a length line, then that many bytes and 2 more
HEADER_TYPES: Final = AGGREGATE_TYPES | BLOB_TYPES
MAX_HEADER_LINE: Final = 22  # type byte, sign, 20 digits: no longer number parses
STAR: Final = ord("*")
DOLLAR: Final = ord("$")


def byte_name(b: int) -> str:
    return chr(b) if 32 <= b < 127 else f"\\x{b:02x}"


def header_number(digits: bytes) -> int | None:
    if digits.isdigit() or (digits[:1] == b"-" and digits[1:].isdigit()):
        return int(digits)
    return None


class Framing:
    """Follows a stream of RESP requests header by header, cutting it where hiredis will.

    Nothing is built and payloads are skipped by their length, so it costs a few
    operations per element whatever the payload sizes; the stream may come in any cuts
    (the state carries over). It stops at the first header that breaks the rules of a
    request, before hiredis would act on it: an array inside a request (hiredis would
    allocate its count at once, and requests are flat), a count over ``max_count``, a
    length over ``max_bulk``; with ``bulk_only`` (the cluster bus), anything but a
    top-level '*' of '$' bulk strings.

    The cuts are hiredis's: a line ends at the first CRLF, and a bulk string is its
    length line then length + 2 bytes, whatever those 2 are (hiredis does not check
    them, so the next item may start right after any byte).
    """

    __slots__ = ("max_count", "max_bulk", "bulk_only", "need", "skip", "line")

    END: ClassVar[str] = ""  # walk outcomes: used up the buffer (the state is kept) ...
    BOUNDARY: ClassVar[str] = (
        "boundary"  # ... stopped between two requests, after the number asked for
    )
    INLINE: ClassVar[str] = "inline"  # ... stopped at a request starting with no RESP type byte
    # Anything else is what is wrong with the header walk stopped at.

    def __init__(self, max_count: int, max_bulk: int, bulk_only: bool = False) -> None:
        self.max_count = max_count
        self.max_bulk = max_bulk
        self.bulk_only = bulk_only
        self.need = 0  # elements still to come in the request (0: between requests)
        self.skip = 0  # bytes of a payload, and its 2 trailing ones, still to come
        self.line = b""  # a line cut by the end of the last buffer: its start

    def walk(self, buf: bytes, pos: int = 0, requests: int = -1) -> tuple[int, str]:
        """Follow buf from pos: (where it stopped, why). It stops at the end of buf,
        at a bad header (its start), at a request boundary once ``requests`` requests
        (any top-level reply) are complete, or at an inline command."""
        size, done = len(buf), 0
        while True:
            if self.skip:
                if size - pos < self.skip:
                    self.skip -= size - pos
                    return size, self.END
                pos += self.skip
                self.skip = 0
                done += self._element_done()
                continue
            if self.line:  # finish a line cut by the last buffer
                if pos >= size:
                    return size, self.END
                kind = self.line[0]
                if kind not in HEADER_TYPES:
                    # Only where it ends matters: the start kept is the type byte, and a
                    # CR if the cut fell between CR and LF.
                    if self.line[-1:] == b"\r" and buf[pos] == 10:
                        pos += 1
                    else:
                        end = buf.find(b"\r\n", pos)
                        if end < 0:
                            self._keep_line(kind, buf)
                            return size, self.END
                        pos = end + 2
                    self.line = b""
                    done += self._element_done()
                    continue
                head = self.line + buf[pos : pos + MAX_HEADER_LINE + 2]
                end = head.find(b"\r\n")
                if end < 0 and len(head) < MAX_HEADER_LINE + 2:
                    self.line = head  # still cut: buf is used up
                    return size, self.END
                if end < 0 or end > MAX_HEADER_LINE:
                    return pos, self._bad_number(kind)
                start = pos  # (the header began before buf)
                pos += end + 2 - len(self.line)
                self.line = b""
                digits = head[1:end]
            else:
                if not self.need and done == requests:
                    return pos, self.BOUNDARY
                if pos >= size:
                    return size, self.END
                kind = buf[pos]
                problem = self._type_problem(kind)
                if problem:
                    return pos, problem
                if kind not in HEADER_TYPES:
                    end = buf.find(b"\r\n", pos + 1)
                    if end < 0:
                        self._keep_line(kind, buf)
                        return size, self.END
                    pos = end + 2
                    done += self._element_done()
                    continue
                end = buf.find(b"\r\n", pos + 1, pos + MAX_HEADER_LINE + 2)
                if end < 0:
                    if size - pos >= MAX_HEADER_LINE + 2:
                        return pos, self._bad_number(kind)
                    self.line = buf[pos:]
                    return size, self.END
                digits = buf[pos + 1 : end]
                start, pos = pos, end + 2
            number = header_number(digits)
            if kind in AGGREGATE_TYPES:  # a request (nested ones were refused)
                if (
                    number is None
                    or number < -1
                    or number > self.max_count
                    or (self.bulk_only and number < 1)
                ):
                    return start, "invalid multibulk length"
                elements = number * 2 if kind in PAIR_TYPES else number
                if elements > 0:
                    self.need = elements
                else:
                    done += 1  # an empty or null array
                continue
            if (
                number is None
                or number < -1
                or number > self.max_bulk
                or (self.bulk_only and number < 0)
            ):
                return start, "invalid bulk length"
            if number < 0:
                done += self._element_done()  # a null
            else:
                self.skip = number + 2

    def _type_problem(self, kind: int) -> str | None:
        if self.need:  # an element
            if kind == DOLLAR or (
                kind in RESP_TYPES and kind not in AGGREGATE_TYPES and not self.bulk_only
            ):
                return None
            return f"expected '$', got '{byte_name(kind)}'"
        if kind == STAR or (kind in RESP_TYPES and not self.bulk_only):
            return None
        return f"expected '*', got '{byte_name(kind)}'" if self.bulk_only else self.INLINE

    def _element_done(self) -> int:
        """One more element is complete: 1 if that completed a request."""
        if not self.need:
            return 1  # a top-level reply that is no array
        self.need -= 1
        return 0 if self.need else 1

    def _keep_line(self, kind: int, buf: bytes) -> None:
        self.line = bytes((kind,)) + (b"\r" if buf[-1:] == b"\r" else b"")

    @staticmethod
    def _bad_number(kind: int) -> str:
        return "invalid multibulk length" if kind in AGGREGATE_TYPES else "invalid bulk length"


# ---- array headers to look at before hiredis reads them ------------------------------------

# hiredis does not check the 2 bytes after a bulk string, so an item may start after any
# byte: array headers are searched anywhere, not only after a CRLF. A count of up to 99
# may pass unchecked where a request start was checked before it in the same read
# (small_ok): one nested in a request costs a bounded multiple of its 5 bytes, and the
# request is refused when complete. So that they cannot pile up over reads, the caller
# looks at every array of the next read (small_ok false) until it checks a request start
# again. Patterns have a literal first byte, with a memchr first for the rarer bytes: a
# scan with a character class costs 20 times more per byte.
_BIG_ARRAYS: Final = [
    (bytes((c,)), re.compile(re.escape(bytes((c,))) + rb"\d{3}")) for c in b"*%|~>"
]
_ANY_ARRAYS: Final = [(bytes((c,)), re.compile(re.escape(bytes((c,))) + rb"\d")) for c in b"*%|~>"]
_CUT_ARRAY: Final = re.compile(rb"[*%|~>]\d*\Z")  # a count cut by the end of the read
_CUT_BYTES: Final = frozenset(b"*%|~>0123456789")
# Small reads (pipelines of short requests, the hot path) are cheaper to fold into one
# array byte and one digit and search with find: one C pass, little per-call overhead.
_FOLD: Final = bytes(48 if 48 <= i <= 57 else 42 if i in b"*%|~>" else i for i in range(256))
_FOLD_MAX: Final = 1024
CUT: Final = "cut"

# What a request or bus message may be made of: hiredis gives bulk and simple strings
# as bytes, other types as int, None, list... ``BYTES_ONLY.issuperset(map(type, items))``
# checks a list in C (half the time of ``all()`` over a generator).
BYTES_ONLY: Final = frozenset((bytes,))


def next_array_header(buf: bytes, start: int, small_ok: bool) -> int:
    """Where in buf, from start, the next array header hiredis must not read before it is
    looked at begins (len(buf) if none): any array, or with small_ok one of 100 elements
    or more; and one whose count the read cuts."""
    end = len(buf)
    if buf[-1] in _CUT_BYTES:
        match = _CUT_ARRAY.search(buf, max(start, end - MAX_HEADER_LINE))
        if match:
            end = match.start()
    if end - start <= _FOLD_MAX:
        found = buf[start:end].translate(_FOLD).find(b"*000" if small_ok else b"*0")
        return end if found < 0 else start + found
    # Searching each pattern only before the earliest match so far is enough: a match
    # starts with a type byte, which cannot be a digit of an earlier one.
    for byte, pattern in _BIG_ARRAYS if small_ok else _ANY_ARRAYS:
        first = buf.find(byte, start, end)  # a memchr: cheap when the byte is absent
        if first >= 0:
            match = pattern.search(buf, first, end)
            if match:
                end = match.start()
    return end


NESTED: Final = -1


def feed_array_inside(reader: hiredis.Reader, buf: bytes, pos: int) -> int:
    """An array header at buf[pos] inside a request (or bus message), hiredis having run
    all that came before it: is it payload bytes, or an array element? Requests and
    messages are flat, so an element array is refused (NESTED) before hiredis reads its
    count. Else what was fed is returned: 0 or 1 byte.

    With input left over, hiredis is inside a payload: the header is part of it (nothing
    fed). All consumed: an element starts here, or the byte before was the type of one,
    which hiredis takes at once ("+*123"). Fed alone (no count line: no allocation), the
    array type byte is kept unconsumed in the second case only."""
    if reader.has_data():
        return 0
    reader.feed(buf, pos, 1)
    try:  # (hiredis reads at gets; nothing completes)
        reader.gets()
    except (hiredis.ProtocolError, ValueError, TypeError):
        pass  # (cannot happen: no CRLF was fed)
    return 1 if reader.has_data() else NESTED


def count_problem(buf: bytes, pos: int, max_count: int) -> str | None:
    """Whether the count of the array header at pos is over max_count (hiredis judges
    the rest); CUT while its line is not all in buf."""
    end = buf.find(b"\r\n", pos + 1, pos + MAX_HEADER_LINE + 2)
    if end < 0:
        if len(buf) - pos < MAX_HEADER_LINE + 2:
            return CUT
    else:
        number = header_number(buf[pos + 1 : end])
        if number is None or number <= max_count:
            return None
    return "invalid multibulk length"
