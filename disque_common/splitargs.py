"""Split a line into arguments the way Redis does (sdssplitargs).

One splitter for the node (config files, inline commands) and the CLI, as in
Redis. Words are separated by blanks; "double quotes" understand \\n \\r \\t
\\b \\a, \\xHH and backslash-escaped characters; 'single quotes' only \\'. A
closing quote must be followed by a blank or the end of the line. Arguments
are bytes: \\xHH can produce any byte.
"""

from __future__ import annotations

_HEX = b"0123456789abcdefABCDEF"
_WORD_END = b" \n\r\t\0"
_BLANKS = b" \t\n\r\v\f"
_ESCAPES = {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("b"): b"\b", ord("a"): b"\a"}


class SplitError(ValueError):
    """Unbalanced quotes, or a closing quote followed by a non-blank."""


def split_args(line: str | bytes) -> list[bytes]:
    data = line.encode("utf-8", errors="surrogateescape") if isinstance(line, str) else line
    # Redis splits a C string: a NUL byte ends the line (an inline request may hold one).
    data = data.split(b"\0", 1)[0]
    n = len(data)
    i = 0
    out: list[bytes] = []
    while True:
        while i < n and data[i] in _BLANKS:
            i += 1
        if i >= n:
            return out
        current = bytearray()
        in_double = in_single = False
        while True:
            c = data[i] if i < n else 0
            nxt = data[i + 1] if i + 1 < n else 0
            if in_double:
                if (
                    c == ord("\\")
                    and nxt == ord("x")
                    and i + 3 < n
                    and data[i + 2] in _HEX
                    and data[i + 3] in _HEX
                ):
                    current.append(int(data[i + 2 : i + 4], 16))
                    i += 3
                elif c == ord("\\") and i + 1 < n:
                    i += 1
                    current += _ESCAPES.get(nxt, bytes([nxt]))
                elif c == ord('"'):
                    if i + 1 < n and nxt not in _BLANKS:
                        raise SplitError("closing quote must be followed by a space")
                    i += 1
                    break
                elif i >= n:
                    raise SplitError("unbalanced quotes")
                else:
                    current.append(c)
            elif in_single:
                if c == ord("\\") and nxt == ord("'"):
                    i += 1
                    current.append(ord("'"))
                elif c == ord("'"):
                    if i + 1 < n and nxt not in _BLANKS:
                        raise SplitError("closing quote must be followed by a space")
                    i += 1
                    break
                elif i >= n:
                    raise SplitError("unbalanced quotes")
                else:
                    current.append(c)
            else:
                if i >= n or c in _WORD_END:
                    break
                if c == ord('"'):
                    in_double = True
                elif c == ord("'"):
                    in_single = True
                else:
                    current.append(c)
            i += 1
        out.append(bytes(current))
