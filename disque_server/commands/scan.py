"""QSCAN and JSCAN: cursor iteration over queues and jobs.

A cursor is a position in a fixed key order (a hash of the queue name, or
the job ID's own order; see ``jobs.cursor_of``), so elements added or
removed during an iteration never make it skip the others: every element
present for the whole iteration is returned at least once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.clock import now_ms
from disque_server.commands.args import NOT_INTEGER, SYNTAX_ERROR, parse_ll, parse_scan_cursor
from disque_server.job import STATE_BY_NAME
from disque_server.resp import Status

if TYPE_CHECKING:
    from disque_server.client import Client

DEFAULT_COUNT: Final = 100
INVALID_CURSOR: Final = b"-ERR invalid cursor or option name\r\n"


def cursor_argument(c: Client, arg: bytes, cursor: int) -> int | None:
    """An argument that is no option is the cursor, once: Disque's rule. On error
    reply and return None."""
    if cursor != -1:
        c.reply(SYNTAX_ERROR)
        return None
    value = parse_scan_cursor(arg)
    if value is None:
        c.reply(INVALID_CURSOR)
    return value


def qscan_command(c: Client, argv: list[bytes]) -> None:
    cursor, count, busyloop = -1, DEFAULT_COUNT, False
    minlen, maxlen, importrate = 0, -1, -1
    i, argc = 1, len(argv)
    while i < argc:
        opt = argv[i].lower()
        last = i == argc - 1
        if opt == b"busyloop":
            busyloop = True
        elif opt in (b"count", b"minlen", b"maxlen", b"importrate") and not last:
            value = parse_ll(argv[i + 1])
            if value is None:
                c.reply(NOT_INTEGER)
                return
            if opt == b"count":
                if value < 1:
                    c.reply(SYNTAX_ERROR)
                    return
                count = value
            elif opt == b"minlen":
                minlen = value
            elif opt == b"maxlen":
                maxlen = value
            else:
                importrate = value
            i += 1
        else:
            given = cursor_argument(c, argv[i], cursor)
            if given is None:
                return
            cursor = given
        i += 1

    index = c.server.queues.scan_index
    pos = index.bisect_key_left(max(cursor, 0))
    end = len(index) if busyloop else min(pos + count, len(index))
    names = []
    for q in index.islice(pos, end):
        qlen = len(q.jobs)
        if qlen < minlen or (maxlen >= 0 and qlen > maxlen):
            continue
        if importrate >= 0 and q.import_rate < importrate:
            continue
        names.append(q.name)
    next_cursor = index[end].scan_key if end < len(index) else 0
    c.reply_value([str(next_cursor).encode(), names])


def jscan_command(c: Client, argv: list[bytes]) -> None:
    cursor, count, busyloop = -1, DEFAULT_COUNT, False
    queue: bytes | None = None
    states: set[int] = set()
    reply_all = False
    i, argc = 1, len(argv)
    while i < argc:
        opt = argv[i].lower()
        last = i == argc - 1
        if opt == b"count" and not last:
            value = parse_ll(argv[i + 1])
            if value is None:
                c.reply(NOT_INTEGER)
                return
            if value < 1:
                c.reply(SYNTAX_ERROR)
                return
            count = value
            i += 1
        elif opt == b"busyloop":
            busyloop = True
        elif opt == b"queue" and not last:
            queue = argv[i + 1]
            i += 1
        elif opt == b"state" and not last:
            state = STATE_BY_NAME.get(argv[i + 1].lower())
            if state is None:
                c.reply(b"-ERR Invalid job state name\r\n")
                return
            states.add(state)
            i += 1
        elif opt == b"reply" and not last:
            kind = argv[i + 1].lower()
            if kind not in (b"id", b"all"):
                c.reply(b"-ERR Invalid REPLY type, try ID or ALL\r\n")
                return
            reply_all = kind == b"all"
            i += 1
        else:
            given = cursor_argument(c, argv[i], cursor)
            if given is None:
                return
            cursor = given
        i += 1

    jobs = c.server.jobs
    next_cursor, ids = jobs.scan(max(cursor, 0), len(jobs) + 1 if busyloop else count)
    now = now_ms()
    items: list[object] = []
    for jid in ids:
        job = jobs.lookup(jid)
        if job is None or (queue is not None and job.queue != queue):
            continue
        if states and job.state not in states:
            continue
        items.append(dict(job.show_pairs(now)) if reply_all else Status(jid))
    c.reply_value([str(next_cursor).encode(), items])
