"""``disque-server [/path/to/disque.conf | -] [--directive value ...]``.

The config file is read first (``-`` reads it from standard input), then
every ``--directive value ...`` of the command line, as if appended to the
file. Errors in either end the process with exit code 1 and one clear
message, never a traceback.
"""

from __future__ import annotations

import asyncio
import os
import resource
import ssl
import sys
from typing import Final

from disque_server import BUILD, DISQUE_VERSION, __version__
from disque_server.config import Config, ConfigError
from disque_server.log import Log

USAGE: Final = """\
Usage: disque-server [/path/to/disque.conf] [options]
       disque-server - (read config from stdin)
       disque-server -v or --version
       disque-server -h or --help

Examples:
       disque-server (run the server with default conf)
       disque-server /etc/disque/7711.conf
       disque-server --port 7777
       disque-server /etc/mydisque.conf --loglevel verbose --dir /var/lib/disque
"""


def parse_command_line(argv: list[str]) -> Config:
    """Build the configuration from argv (without the program name)."""
    config = Config()
    args = list(argv)
    if args and not args[0].startswith("--"):
        source = args.pop(0)
        if source == "-":
            config.load_text(sys.stdin.read(), "stdin")
        else:
            path = os.path.abspath(source)
            try:
                with open(path) as f:
                    text = f.read()
            except OSError as exc:
                raise ConfigError(
                    f"Fatal error, can't open config file '{source}': {exc.strerror}"
                ) from None
            config.file = path
            config.load_text(text, path)
    options: list[str] = []
    for arg in args:
        if arg.startswith("--"):
            options.append("\n" + arg[2:])
        else:
            options.append(" " + quote(arg))
    if options:
        config.load_text("".join(options), "command line")
    return config


def quote(arg: str) -> str:
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def daemonize() -> None:
    """Detach from the terminal (double fork), as Redis does with 'daemonize yes'."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)


def write_pidfile(path: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(f"{os.getpid()}\n")
    except OSError as exc:
        print(f"Warning: could not write the pid file {path}: {exc}", file=sys.stderr)


def install_event_loop() -> str:
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-v", "--version"):
        print(
            f"Disque server v={DISQUE_VERSION} (disque-py {__version__}, "
            f"Python {sys.version.split()[0]}, {BUILD} build)"
        )
        return 0
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    try:
        config = parse_command_line(argv)
        os.makedirs(config["dir"], exist_ok=True)
        os.chdir(config["dir"])
    except ConfigError as exc:
        print(str(exc).lstrip("\n"), file=sys.stderr)
        return 1
    except OSError as os_error:  # (one name a clause: the compiled node types each)
        print(f"Can't chdir to '{config['dir']}': {os_error.strerror}", file=sys.stderr)
        return 1
    if config["daemonize"]:
        daemonize()
    if config["pidfile"]:
        write_pidfile(config["pidfile"])
    try:
        log = Log(
            config["loglevel"],
            config["logfile"],
            (config["syslog-ident"], config["syslog-facility"])
            if config["syslog-enabled"]
            else None,
        )
    except OSError as log_error:
        print(f"Can't open the log file: {log_error}", file=sys.stderr)
        return 1
    loop_name = install_event_loop()
    adjust_open_files_limit(config, log)
    log.notice(
        "Disque (Python %s, %s) starting, pid %d, port %d",
        sys.version.split()[0],
        loop_name,
        os.getpid(),
        config["port"],
    )
    if not config.file:
        log.warning(
            "No config file specified, using the default config. In order to "
            "specify a config file use 'disque-server /path/to/disque.conf'"
        )
    return asyncio.run(run(config, log))


RESERVED_FDS: Final = 32  # log, AOF, listeners, cluster links beyond the clients


def adjust_open_files_limit(config: Config, log: Log) -> None:
    """Make room for maxclients connections, or lower maxclients to what fits
    (as Redis does): past the limit, accept() fails and clients get nothing."""
    need = config["maxclients"] + RESERVED_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    except (ValueError, OSError):
        pass
    if soft < need:
        config.values["maxclients"] = max(soft - RESERVED_FDS, 1)
        log.warning(
            "You requested maxclients of %d requiring at least %d max file descriptors; "
            "the open files limit is %d, so maxclients is now %d.",
            need - RESERVED_FDS,
            need,
            soft,
            config["maxclients"],
        )


async def run(config: Config, log: Log) -> int:
    from disque_server.aof import AOFError
    from disque_server.server import Server

    try:
        server = Server(config, log)  # (it reads nodes.conf: may be refused)
        return await server.serve_forever()
    except (AOFError, ConfigError) as exc:
        log.warning("%s", exc)
        print(str(exc), file=sys.stderr)
        return 1
    except ssl.SSLError as tls_error:  # (one name a clause: the compiled node types each)
        log.warning("TLS configuration error: %s", tls_error)
        print(f"TLS configuration error: {tls_error}", file=sys.stderr)
        return 1
    except OSError as os_error:
        reason = os_error.strerror or os_error
        log.warning("Could not start the node on port %d: %s", config["port"], reason)
        print(f"Could not start the node on port {config['port']}: {reason}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
