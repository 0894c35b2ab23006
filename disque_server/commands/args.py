"""Argument parsing shared by the command handlers, with Disque's error texts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.job import valid_job_id

if TYPE_CHECKING:
    from disque_server.client import Client

SYNTAX_ERROR: Final = b"-ERR syntax error\r\n"
BADID: Final = b"-BADID Invalid Job ID format.\r\n"
NOT_INTEGER: Final = b"-ERR value is not an integer or out of range\r\n"
LLONG_MIN: Final = -(2**63)
LLONG_MAX: Final = 2**63 - 1
ULONG_MAX: Final = 2**64 - 1


def _decimal(arg: bytes) -> tuple[bool, int] | None:
    """Sign and magnitude of an argument as Disque's strtoll/strtoul calls accept it
    (base 10): the C string ends at the first NUL, a blank first is refused, the whole
    of it must be read, and an empty one is 0 (no digits, nothing left over). None if
    not a number."""
    text = arg.split(b"\0", 1)[0]
    if not text:
        return False, 0
    negative = text[:1] == b"-"
    digits = text[1:] if text[:1] in b"+-" else text
    if not digits.isdigit():  # ASCII digits only, for bytes
        return None
    digits = digits.lstrip(b"0")
    if len(digits) > 20:  # past any 64-bit value (and int() of a long string is slow)
        return None
    return negative, int(digits or b"0")


def parse_ll(arg: bytes) -> int | None:
    """A signed 64-bit integer as Disque's getLongLongFromObject reads it (strtoll:
    '+60', '' and '007' are numbers, ' 5' and '5 ' are not), or None. Every ADDJOB and
    GETJOB comes here: plain digits short of 19 are always in range, so they go first,
    read digit by digit (compiled, cheaper than int() of bytes)."""
    if 0 < len(arg) <= 18:
        value = 0
        for digit in arg:
            if not 48 <= digit <= 57:
                break
            value = value * 10 + digit - 48
        else:
            return value
    number = _decimal(arg)
    if number is None:
        return None
    value = -number[1] if number[0] else number[1]
    return value if LLONG_MIN <= value <= LLONG_MAX else None


def parse_scan_cursor(arg: bytes) -> int | None:
    """A QSCAN/JSCAN cursor as Disque's parseScanCursorOrReply reads it (strtoul:
    unsigned 64-bit, and '-N' wraps round to 2**64 - N), or None."""
    if len(arg) <= 19 and arg.isdigit():
        return int(arg)
    number = _decimal(arg)
    if number is None or number[1] > ULONG_MAX:
        return None
    return -number[1] % 2**64 if number[0] else number[1]


def parse_ll_or_reply(c: Client, arg: bytes) -> int | None:
    value = parse_ll(arg)
    if value is None:
        c.reply(NOT_INTEGER)
    return value


def parse_timeout_or_reply(c: Client, arg: bytes) -> int | None:
    """A timeout in milliseconds, as Disque's getTimeoutFromObjectOrReply."""
    value = parse_ll(arg)
    if value is None:
        c.reply(b"-ERR timeout is not an integer or out of range\r\n")
        return None
    if value < 0:
        c.reply(b"-ERR timeout is negative\r\n")
        return None
    return value


def validate_job_ids(c: Client, ids: list[bytes], first: int = 1) -> bool:
    """Whether ids[first:] are all job IDs (else BADID is the reply). The IDs of a
    command line are argv from 1 on: no slice is made for that."""
    for i in range(first, len(ids)):
        if not valid_job_id(ids[i]):
            c.reply(BADID)
            return False
    return True
