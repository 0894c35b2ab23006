"""RESP reply encoding: RESP2 for every client, RESP3 for those that ask.

Hot replies are built from precomputed constants; ``encode`` turns plain
Python values into RESP for the less frequent, structured replies
(SHOW, QSTAT, CONFIG GET, HELLO ...). RESP2 and RESP3 differ only in
nulls and maps, so one ``Protocol`` object per version carries those.
"""

from __future__ import annotations

from typing import Any

CRLF = b"\r\n"
OK = b"+OK\r\n"
PONG = b"+PONG\r\n"
QUEUED = b"+QUEUED\r\n"
EMPTY_ARRAY = b"*0\r\n"
ZERO = b":0\r\n"
ONE = b":1\r\n"

_SMALL_INTS = [b":%d\r\n" % i for i in range(1024)]
_ARRAY_HEADERS = [b"*%d\r\n" % i for i in range(1024)]


class Status(bytes):
    """A value that must be sent as a status reply (+...), not a bulk."""


def status(s: bytes) -> bytes:
    return b"+" + s + CRLF


def error(msg: str) -> bytes:
    """``msg`` includes the error code: 'ERR ...', 'NOJOB ...'."""
    return b"-" + msg.replace("\r", " ").replace("\n", " ").encode() + CRLF


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
            self._encode(value.encode(), out)
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


RESP2 = Protocol(2)
RESP3 = Protocol(3)
