"""Typed replies: what the server answered, with the reply type kept.

redis-py folds status replies into plain bytes and raises errors; a CLI must
show `+D-...` unquoted, `"body"` quoted and `(error) ...` inline, even inside
arrays. So replies are read here into these shapes:

    Status (bytes subclass)   +OK, +D-...
    ErrorReply (bytes subclass)  -ERR ...
    bytes                     $ bulk strings
    int                       : integers
    None                      $-1 and *-1 (both shown as nil)
    list                      * arrays, nested

and, once `HELLO 3` switched the connection to RESP3 (the node speaks it
beyond Disque, as Redis does), the RESP3 types, as hiredis reads them for
redis-cli:

    Map (list subclass)       % maps: keys and values alternate
    RespSet (list subclass)   ~ sets
    Push (list subclass)      > out-of-band pushes
    Double (bytes subclass)   , doubles, as the text the server sent
    Verbatim (bytes subclass) = verbatim strings, without their format prefix
    bool                      # booleans
    None                      _ null
    int                       ( big numbers
    ErrorReply                ! blob errors

`TypedParser` plugs this reader into a redis-py connection; `parse_all`
reads replies from a byte string (tests, --pipe).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis._parsers.resp2 import _RESP2Parser
from redis.exceptions import ConnectionError, InvalidResponse
from redis.utils import SENTINEL


class Status(bytes):
    """A status reply (`+...`): shown unquoted."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Status({bytes(self)!r})"


class ErrorReply(bytes):
    """An error reply (`-...`): a value, not an exception, so arrays can hold it."""

    __slots__ = ()

    @property
    def text(self) -> str:
        return self.decode("utf-8", errors="replace")

    @property
    def code(self) -> str:
        """The error code prefix (`ERR`, `BADID`, `NOJOB`...) clients switch on."""
        return self.text.split(" ", 1)[0]

    def __repr__(self) -> str:
        return f"ErrorReply({bytes(self)!r})"


class Map(list):
    """A RESP3 map, flat: key, value, key, value... (so pair-array code reads it too)."""

    __slots__ = ()


class RespSet(list):
    """A RESP3 set: its elements, in the order the server sent them."""

    __slots__ = ()


class Push(list):
    """A RESP3 push (out-of-band data)."""

    __slots__ = ()


class Double(bytes):
    """A RESP3 double, kept as the server's text (redis-cli prints it as is)."""

    __slots__ = ()


class Verbatim(bytes):
    """A RESP3 verbatim string, without its `txt:` format prefix: shown as is."""

    __slots__ = ()


Reply = Status | ErrorReply | bytes | int | bool | None | list["Reply"]

_AGGREGATES: dict[bytes, type[list]] = {b"*": list, b"~": RespSet, b">": Push}


def read_reply(readline: Callable[[], bytes], read: Callable[[int], bytes]) -> Reply:
    """Read one reply. `readline` returns a line without CRLF, `read(n)` n bytes."""
    line = readline()
    if not line:
        raise ConnectionError("Connection closed by server.")
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return Status(rest)
    if kind == b"-":
        return ErrorReply(rest)
    if kind == b":":
        return int(rest)
    if kind == b"$":
        length = int(rest)
        return None if length < 0 else bytes(read(length))
    if kind in _AGGREGATES:
        count = int(rest)
        if count < 0:
            return None
        return _AGGREGATES[kind](read_reply(readline, read) for _ in range(count))
    if kind in (b"%", b"|"):
        pairs = [read_reply(readline, read) for _ in range(2 * int(rest))]
        if kind == b"|":  # attributes describe the reply that follows: not shown
            return read_reply(readline, read)
        return Map(pairs)
    if kind == b"_":
        return None
    if kind == b"#":
        return rest == b"t"
    if kind == b",":
        return Double(rest)
    if kind == b"(":
        return int(rest)
    if kind in (b"=", b"!"):
        data = bytes(read(int(rest)))
        return Verbatim(data[4:]) if kind == b"=" else ErrorReply(data)
    shown = kind.decode() if kind.isascii() and kind.decode().isprintable() else f"\\x{kind[0]:02x}"
    raise InvalidResponse(f'Protocol error, got "{shown}" as reply type byte')


class TypedParser(_RESP2Parser):
    """redis-py's RESP2 parser class, reading typed replies (see the module docstring):
    RESP3 ones too, after a HELLO 3 redis-py knows nothing of."""

    def _read_response(self, disable_decoding: bool = False, timeout: Any = SENTINEL) -> Reply:
        buffer = self._buffer
        return read_reply(
            lambda: buffer.readline(timeout=timeout), lambda n: buffer.read(n, timeout=timeout)
        )


class IncompleteReply(Exception):
    """The byte string ends in the middle of a reply."""


def parse_all(data: bytes) -> tuple[list[Reply], int]:
    """Parse every complete reply in `data`; return them and the bytes consumed."""
    pos = 0
    replies: list[Reply] = []

    def readline() -> bytes:
        nonlocal pos
        end = data.find(b"\r\n", pos)
        if end < 0:
            raise IncompleteReply
        line, pos = data[pos:end], end + 2
        return line

    def read(n: int) -> bytes:
        nonlocal pos
        if pos + n + 2 > len(data):
            raise IncompleteReply
        chunk, pos = data[pos : pos + n], pos + n + 2
        return chunk

    while pos < len(data):
        start = pos
        try:
            replies.append(read_reply(readline, read))
        except IncompleteReply:
            return replies, start
    return replies, pos
