"""Commands on queues: QLEN QSTAT QPEEK PAUSE."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from disque_server.commands.args import SYNTAX_ERROR, parse_ll_or_reply
from disque_server.jobs.queue import PAUSE_NAMES, PAUSED_IN, PAUSED_OUT
from disque_server.resp import array_header, integer

if TYPE_CHECKING:
    from disque_server.client import Client


def qlen_command(c: Client, argv: list[bytes]) -> None:
    c.reply(integer(c.server.queues.length(argv[1])))


def qstat_command(c: Client, argv: list[bytes]) -> None:
    q = c.server.queues.lookup(argv[1])
    if q is None:
        c.reply(c.proto.null)
        return
    c.reply_value(q.stat())


def qpeek_command(c: Client, argv: list[bytes]) -> None:
    count = parse_ll_or_reply(c, argv[2])
    if count is None:
        return
    q = c.server.queues.lookup(argv[1])
    if q is None or count == 0:
        c.reply(array_header(0))
        return
    jobs = q.jobs.first(count) if count > 0 else q.jobs.last(-count)
    c.reply_value([[job.queue, job.id, job.body] for job in jobs])


_PAUSE_OPTIONS: Final = {b"in": PAUSED_IN, b"out": PAUSED_OUT, b"all": PAUSED_IN | PAUSED_OUT}


def pause_command(c: Client, argv: list[bytes]) -> None:
    server = c.server
    name = argv[1]
    new_flags, update, bcast = 0, False, False
    for arg in argv[2:]:
        opt = arg.lower()
        if opt == b"none":
            new_flags, update = 0, True
        elif opt in _PAUSE_OPTIONS:
            new_flags |= _PAUSE_OPTIONS[opt]
            update = True
        elif opt == b"bcast":
            bcast = True
        elif opt != b"state":
            c.reply(SYNTAX_ERROR)
            return
    q = server.queues.lookup(name)
    if q is None and update and new_flags:
        q = server.queues.create(name)
    if q is not None and update:
        server.queues.set_pause(q, new_flags)
    flags = q.flags & (PAUSED_IN | PAUSED_OUT) if q is not None else 0
    if bcast:
        server.cluster.broadcast(b"PAUSE", [name, b"%d" % flags])
    c.reply(b"+%s\r\n" % PAUSE_NAMES[flags])
