"""Argument parsing shared by the command handlers, with Disque's error texts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from disque_server.job import valid_job_id

if TYPE_CHECKING:
    from disque_server.client import Client

SYNTAX_ERROR = b"-ERR syntax error\r\n"
BADID = b"-BADID Invalid Job ID format.\r\n"
LLONG_MIN, LLONG_MAX = -(2**63), 2**63 - 1


def parse_ll(arg: bytes) -> int | None:
    """A strict signed 64-bit integer (no spaces, no '+'), or None."""
    if len(arg) <= 20 and (arg.isdigit() or (arg[:1] == b"-" and arg[1:].isdigit())):
        value = int(arg)
        if LLONG_MIN <= value <= LLONG_MAX:
            return value
    return None


def parse_ll_or_reply(c: Client, arg: bytes) -> int | None:
    value = parse_ll(arg)
    if value is None:
        c.reply(b"-ERR value is not an integer or out of range\r\n")
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


def validate_job_ids(c: Client, ids: list[bytes]) -> bool:
    for jid in ids:
        if not valid_job_id(jid):
            c.reply(BADID)
            return False
    return True
