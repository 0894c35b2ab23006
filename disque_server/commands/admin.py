"""Server commands: PING TIME AUTH HELLO CONFIG CLIENT SLOWLOG COMMAND LATENCY
DEBUG SHUTDOWN MONITOR BGREWRITEAOF."""

from __future__ import annotations

import hmac
import time
from typing import TYPE_CHECKING

from disque_server import DISQUE_VERSION, resp
from disque_server.commands.args import NOT_INTEGER, SYNTAX_ERROR, parse_ll
from disque_server.config import ConfigError
from disque_server.resp import RESP2, RESP3, Status, bulk, integer

if TYPE_CHECKING:
    from disque_server.client import Client
    from disque_server.commands import Command


def ping_command(c: Client, argv: list[bytes]) -> None:
    if len(argv) > 2:
        c.reply_error("ERR wrong number of arguments for 'ping' command")
    elif len(argv) == 2:
        c.reply(bulk(argv[1]))
    else:
        c.reply(resp.PONG)


def time_command(c: Client, argv: list[bytes]) -> None:
    now = time.time()
    secs = int(now)
    c.reply_value([str(secs).encode(), str(int((now - secs) * 1e6)).encode()])


def check_password(c: Client, password: bytes) -> bool:
    expected = c.server.config["requirepass"].encode("utf-8", "surrogateescape")
    return hmac.compare_digest(password, expected)


def auth_command(c: Client, argv: list[bytes]) -> None:
    if not c.server.config["requirepass"]:
        c.reply_error("ERR Client sent AUTH, but no password is set")
    elif check_password(c, argv[1]):
        c.authenticated = True
        c.reply(resp.OK)
    else:
        c.authenticated = False
        c.reply_error("ERR invalid password")


def hello_command(c: Client, argv: list[bytes]) -> None:
    """Bare HELLO is Disque's cluster handshake; HELLO <protover> is Redis 6's."""
    if len(argv) == 1:
        if not c.authenticated:
            c.reply(b"-NOAUTH Authentication required.\r\n")
            return
        cluster = c.server.cluster
        tls = c.transport is not None and c.transport.get_extra_info("ssl_object") is not None
        c.reply_value([1, cluster.myself.id, *cluster.hello_entries(tls)])
        return
    redis_hello(c, argv)


def redis_hello(c: Client, argv: list[bytes]) -> None:
    version = parse_ll(argv[1])
    if version is None:
        c.reply_error("ERR Protocol version is not an integer or out of range")
        return
    if version not in (2, 3):
        c.reply_error("NOPROTO unsupported protocol version")
        return
    i = 2
    name = None
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"auth" and i + 2 < len(argv):
            user, password = argv[i + 1], argv[i + 2]
            if (
                not c.server.config["requirepass"]
                or user != b"default"
                or not check_password(c, password)
            ):
                c.reply_error("WRONGPASS invalid username-password pair or user is disabled.")
                return
            c.authenticated = True
            i += 3
        elif opt == b"setname" and i + 1 < len(argv):
            name = argv[i + 1]
            i += 2
        else:
            c.reply_error(f"ERR Syntax error in HELLO option '{argv[i].decode(errors='replace')}'")
            return
    if not c.authenticated:
        c.reply(
            b"-NOAUTH HELLO must be called with the client already authenticated, "
            b"otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
            b"authenticate the client and select the RESP protocol version at the same "
            b"time\r\n"
        )
        return
    if name is not None:
        c.name = name
    c.proto = RESP3 if version == 3 else RESP2
    c.reply_value(
        {
            b"server": b"disque",
            b"version": DISQUE_VERSION.encode(),
            b"proto": version,
            b"id": c.id,
            b"mode": b"cluster" if c.server.cluster.size > 1 else b"standalone",
            b"role": b"master",
            b"modules": [],
        }
    )


# ---- CONFIG ---------------------------------------------------------------------


def config_command(c: Client, argv: list[bytes]) -> None:
    sub = argv[1].lower()
    config = c.server.config
    if sub == b"get" and len(argv) == 3:
        pairs = config.get(argv[2].decode(errors="replace"))
        c.reply_value({k.encode(): v.encode("utf-8", errors="surrogateescape") for k, v in pairs})
    elif sub == b"set" and len(argv) == 4:
        try:
            # Values are text with the client's bytes kept (surrogateescape), as in
            # config files: a password set here is the one AUTH compares.
            config.set(argv[2].decode(errors="replace"), argv[3].decode(errors="surrogateescape"))
        except ConfigError as exc:
            c.reply_error(f"ERR {exc}")
            return
        c.reply(resp.OK)
    elif sub == b"rewrite" and len(argv) == 2:
        try:
            config.rewrite()
        except (ConfigError, OSError) as rewrite_error:  # (test_compiled_hazards.py)
            c.reply_error(f"ERR Rewriting config file: {rewrite_error}")
            return
        c.server.log.notice("CONFIG REWRITE executed with success.")
        c.reply(resp.OK)
    elif sub == b"resetstat" and len(argv) == 2:
        server = c.server
        server.stats.reset()
        for cmd in server.command_list:
            cmd.calls, cmd.usec = 0, 0.0
        c.reply(resp.OK)
    elif sub in (b"get", b"set", b"rewrite", b"resetstat"):
        # (the subcommand as the client spelled it, as Disque echoes it)
        c.reply_error(
            f"ERR Wrong number of arguments for CONFIG {argv[1].decode(errors='replace')}"
        )
    else:
        c.reply_error("ERR CONFIG subcommand must be one of GET, SET, RESETSTAT, REWRITE")


# ---- CLIENT -----------------------------------------------------------------------


def client_command(c: Client, argv: list[bytes]) -> None:
    sub = argv[1].lower()
    if sub == b"list" and len(argv) == 2:
        text = "".join(cl.info_line() + "\n" for cl in c.server.clients)
        c.reply(bulk(text.encode()))
    elif sub == b"setname" and len(argv) == 3:
        name = argv[2]
        if any(ch <= 32 or ch >= 127 for ch in name):
            c.reply_error("ERR Client names cannot contain spaces, newlines or special characters.")
            return
        c.name = name
        c.reply(resp.OK)
    elif sub == b"getname" and len(argv) == 2:
        c.reply(bulk(c.name) if c.name else c.proto.null)
    elif sub == b"id" and len(argv) == 2:
        c.reply(integer(c.id))
    elif sub == b"kill":
        client_kill(c, argv[2:])
    else:
        c.reply_error(
            "ERR Syntax error, try CLIENT (LIST | KILL ip:port | GETNAME | SETNAME connection-name)"
        )


def client_kill(c: Client, args: list[bytes]) -> None:
    """CLIENT KILL addr (the old form: +OK, or an error when nobody matches; a client
    may kill itself), or CLIENT KILL [ID id] [TYPE normal] [ADDR addr] [SKIPME yes|no]
    (every filter given must match; the number killed, 0 included; the caller is
    skipped unless SKIPME no). As Disque's: it has one client type, normal."""
    if not args:
        c.reply(SYNTAX_ERROR)
        return
    addr: str | None = None
    client_id = 0
    skipme = len(args) > 1
    if len(args) == 1:
        addr = args[0].decode(errors="replace")
    for i in range(0, len(args) if len(args) > 1 else 0, 2):
        opt = args[i].lower()
        if i + 1 >= len(args):
            c.reply(SYNTAX_ERROR)
            return
        value = args[i + 1]
        if opt == b"id":
            parsed = parse_ll(value)
            if parsed is None:
                c.reply(NOT_INTEGER)
                return
            client_id = parsed
        elif opt == b"type":
            if value.lower() != b"normal":
                c.reply_error(f"ERR Unknown client type '{value.decode(errors='replace')}'")
                return
        elif opt == b"addr":
            addr = value.decode(errors="replace")
        elif opt == b"skipme" and value.lower() in (b"yes", b"no"):
            skipme = value.lower() == b"yes"
        else:
            c.reply(SYNTAX_ERROR)
            return
    victims = [
        cl
        for cl in c.server.clients
        if (addr is None or cl.addr == addr)
        and (not client_id or cl.id == client_id)
        and not (skipme and cl is c)
    ]
    for victim in victims:
        if victim is c:
            victim.close_after_reply()
        else:
            victim.kill()
    if len(args) > 1:
        c.reply(integer(len(victims)))
    elif victims:
        c.reply(resp.OK)
    else:
        c.reply_error("ERR No such client")


# ---- SLOWLOG / LATENCY / COMMAND -----------------------------------------------------------


def slowlog_command(c: Client, argv: list[bytes]) -> None:
    sub = argv[1].lower()
    server = c.server
    if sub == b"get" and len(argv) in (2, 3):
        count = 10
        if len(argv) == 3:
            value = parse_ll(argv[2])
            if value is None:
                c.reply(NOT_INTEGER)
                return
            count = len(server.slowlog.entries) if value < 0 else value
        entries = list(server.slowlog.entries)[:count]
        c.reply_value([[eid, ts, dur, args] for eid, ts, dur, args in entries])
    elif sub == b"len" and len(argv) == 2:
        c.reply(integer(len(server.slowlog.entries)))
    elif sub == b"reset" and len(argv) == 2:
        server.slowlog.entries.clear()
        c.reply(resp.OK)
    else:
        c.reply_error("ERR Unknown SLOWLOG subcommand or wrong # of args. Try GET, RESET, LEN.")


def latency_command(c: Client, argv: list[bytes]) -> None:
    sub = argv[1].lower()
    server = c.server
    if sub == b"latest" and len(argv) == 2:
        events = server.latency.latest()
        c.reply_value([[name.encode(), ts, last, worst] for name, ts, last, worst in events])
    elif sub == b"reset":
        server.latency.reset()
        c.reply(integer(1))
    elif sub == b"history" and len(argv) == 3:
        c.reply_value([])
    elif sub == b"doctor":
        c.reply(
            bulk(
                b"Dave, no latency spike was observed during the lifetime of this "
                b"Disque instance, not in the slightest bit."
                if not server.latency.events
                else b"Latency spikes observed: see LATENCY LATEST."
            )
        )
    else:
        c.reply_error("ERR Syntax error, try LATENCY (LATEST | HISTORY | RESET | DOCTOR)")


def command_command(c: Client, argv: list[bytes]) -> None:
    server = c.server
    if len(argv) == 1:
        c.reply_value([command_info(cmd) for cmd in server.command_list])
        return
    sub = argv[1].lower()
    if sub == b"count" and len(argv) == 2:
        c.reply(integer(len(server.command_list)))
    elif sub == b"info":
        infos: list[object] = []
        for name in argv[2:]:
            cmd = server.commands.get(name.lower())
            infos.append(command_info(cmd) if cmd else None)
        c.reply_value(infos)
    else:
        c.reply_error("ERR Unknown subcommand or wrong number of arguments.")


def command_info(cmd: Command) -> list[object]:
    flags = [Status(f.encode()) for f in cmd.flags if f != "noauth"]
    return [cmd.name.encode(), cmd.arity, flags, 0, 0, 0]


# ---- DEBUG / SHUTDOWN / MONITOR / BGREWRITEAOF ------------------------------------------------


def debug_command(c: Client, argv: list[bytes]) -> None:
    sub = argv[1].lower()
    server = c.server
    if sub == b"flushall" and len(argv) == 2:
        server.jobs.flush_all()
        c.reply(resp.OK)
    elif sub == b"sleep" and len(argv) == 3:
        try:
            time.sleep(float(argv[2]))
        except ValueError:
            c.reply_error("ERR value is not a valid float")
            return
        c.reply(resp.OK)
    else:
        c.reply_error(
            "ERR Unknown DEBUG subcommand or wrong number of arguments for "
            f"'{argv[1].decode(errors='replace')}'"
        )


def shutdown_command(c: Client, argv: list[bytes]) -> None:
    server = c.server
    if len(argv) > 2:
        c.reply(SYNTAX_ERROR)
        return
    option = argv[1].lower() if len(argv) == 2 else b""
    if option not in (b"", b"rewrite-aof"):  # (SAVE and NOSAVE are Redis', not Disque's)
        c.reply(SYNTAX_ERROR)
        return
    if option == b"rewrite-aof" and not server.aof.rewrite_for_shutdown():
        c.reply_error("ERR Errors trying to SHUTDOWN. Check logs.")
        return
    server.hooks.shutdown_requested(0)


def monitor_command(c: Client, argv: list[bytes]) -> None:
    if c.monitor:
        return
    c.monitor = True
    c.server.monitors[c] = None
    c.reply(resp.OK)


def bgrewriteaof_command(c: Client, argv: list[bytes]) -> None:
    aof = c.server.aof
    if aof.rewriting:
        aof.rewrite_scheduled = True
        c.reply(b"+Background append only file rewriting scheduled\r\n")
    elif aof.start_rewrite():
        c.reply(b"+Background append only file rewriting started\r\n")
    else:
        c.reply_error("ERR Can't execute an AOF background rewriting. Please check the server logs")
