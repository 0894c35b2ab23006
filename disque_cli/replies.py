"""Typed RESP2 replies: what the server answered, with the reply type kept.

redis-py folds status replies into plain bytes and raises errors; a CLI must
show `+D-...` unquoted, `"body"` quoted and `(error) ...` inline, even inside
arrays. So replies are read here into five shapes:

    Status (bytes subclass)   +OK, +D-...
    ErrorReply (bytes subclass)  -ERR ...
    bytes                     $ bulk strings
    int                       : integers
    None                      $-1 and *-1 (both shown as nil)
    list                      * arrays, nested

`TypedRESP2Parser` plugs this reader into a redis-py connection; `parse_all`
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


Reply = Status | ErrorReply | bytes | int | None | list["Reply"]


def read_reply(readline: Callable[[], bytes], read: Callable[[int], bytes]) -> Reply:
    """Read one RESP2 reply. `readline` returns a line without CRLF, `read(n)` n bytes."""
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
    if kind == b"*":
        count = int(rest)
        if count < 0:
            return None
        return [read_reply(readline, read) for _ in range(count)]
    shown = kind.decode() if kind.isascii() and kind.decode().isprintable() \
        else f"\\x{kind[0]:02x}"
    raise InvalidResponse(f'Protocol error, got "{shown}" as reply type byte')


class TypedRESP2Parser(_RESP2Parser):
    """redis-py RESP2 parser returning typed replies (see module docstring)."""

    def _read_response(self, disable_decoding: bool = False, timeout: Any = SENTINEL) -> Reply:
        buffer = self._buffer
        return read_reply(lambda: buffer.readline(timeout=timeout),
                          lambda n: buffer.read(n, timeout=timeout))


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
        chunk, pos = data[pos:pos + n], pos + n + 2
        return chunk

    while pos < len(data):
        start = pos
        try:
            replies.append(read_reply(readline, read))
        except IncompleteReply:
            return replies, start
    return replies, pos
