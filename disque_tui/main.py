"""`disque-tui [-h host] [-p port] [-a password] [--tls ...] [--interval 1.0] [--once]`.

Parses the command line with typer, as disque-worker does (like redis-cli,
`-h` is the host and `--help` is help; the TLS options are `disque`'s),
checks that a Disque node answers at host:port before any screen is drawn
(one line on stderr and exit status 1 when not), then runs the app on a
`PollerThread`, or, with --once or without a terminal, prints the overview
once as plain text.
"""

from __future__ import annotations

import asyncio
import re
import sys
from typing import TYPE_CHECKING, Annotated

import redis
import typer
from redis.exceptions import RedisError

from disque.protocol import HelloError, connect, parse_hello
from disque.tls import (
    CLOSED_BY_SERVER,
    TLS,
    TLS_OPTIONS,
    TLSError,
    closed_hint,
    handshake_failure,
)
from disque.typer_main import run_app

if TYPE_CHECKING:
    from disque_tui.poller import Poller
    from disque_tui.snapshot import ClusterSnapshot

PROG = "disque-tui"


app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["--help"]},  # -h is the host, as in redis-cli
)


def positive(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise typer.BadParameter(f"must be positive: {value!r}")
    return value


def tls_help(dest: str) -> str:
    """The help of one of the TLS options every client takes (disque.tls)."""
    return next(opt.help for opt in TLS_OPTIONS if opt.dest == dest)


@app.command(help="Live dashboard of a Disque cluster: nodes, queues, jobs.")
def dashboard(
    host: Annotated[str, typer.Option("-h", "--host", help="a node of the cluster")] = "127.0.0.1",
    port: Annotated[int, typer.Option("-p", "--port", help="its port")] = 7711,
    password: Annotated[
        str | None,
        typer.Option("-a", "--password", envvar="DISQUECLI_AUTH", help="password for AUTH"),
    ] = None,
    tls: Annotated[bool, typer.Option("--tls", help=tls_help("tls"))] = False,
    cacert: Annotated[
        str | None, typer.Option("--cacert", metavar="FILE", help=tls_help("cacert"))
    ] = None,
    cert: Annotated[
        str | None, typer.Option("--cert", metavar="FILE", help=tls_help("cert"))
    ] = None,
    key: Annotated[str | None, typer.Option("--key", metavar="FILE", help=tls_help("key"))] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help=tls_help("insecure"))] = False,
    interval: Annotated[float, typer.Option(callback=positive, help="seconds between polls")] = 1.0,
    timeout: Annotated[
        float | None,
        typer.Option(
            callback=positive,
            help="seconds before a node is shown down (default 2 x interval, min 1)",
        ),
    ] = None,
    scan_count: Annotated[int, typer.Option(min=1, help="QSCAN COUNT per page")] = 500,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="print the overview (problems, nodes, queues that matter) once as plain "
            "text and exit, like top -b -n 1 (the default when standard output is not a "
            "terminal)",
        ),
    ] = False,
    screenshot_dir: Annotated[
        str | None,
        typer.Option(
            metavar="DIR",
            help="where the palette's Screenshot saves its SVG (default: the current directory)",
        ),
    ] = None,
) -> None:
    raise typer.Exit(
        run(
            host,
            port,
            password,
            (tls, cacert, cert, key, insecure),
            interval,
            timeout,
            scan_count,
            once,
            screenshot_dir,
        )
    )


def run(
    host: str,
    port: int,
    password: str | None,
    tls_options: tuple[bool, str | None, str | None, str | None, bool],
    interval: float,
    timeout: float | None,
    scan_count: int,
    once: bool,
    screenshot_dir: str | None,
) -> int:
    """Check that a node answers, then show the dashboard (or the overview once):
    the exit status."""
    try:
        settings = tls_settings(*tls_options)
    except TLSError as exc:
        print(f"{PROG}: could not create an SSL context: {exc}", file=sys.stderr)
        return 1
    timeout = timeout if timeout is not None else max(1.0, 2 * interval)
    problem = probe(host, port, password, min(timeout, 5.0), settings)
    if problem is not None:
        print(f"{PROG}: cannot connect to {host}:{port}: {problem}", file=sys.stderr)
        return 1

    from disque_tui.poller import Poller, PollerThread

    poller = Poller(
        host,
        port,
        password,
        interval=interval,
        timeout=timeout,
        scan_count=scan_count,
        tls=settings,
    )
    if once or not sys.stdout.isatty():
        # Without a terminal a full-screen app would write escape codes forever.
        return print_once(poller)
    from disque_tui.app import DisqueTUI

    tui = DisqueTUI(PollerThread(poller), seed=f"{host}:{port}", screenshot_dir=screenshot_dir)
    try:
        tui.run()
    except KeyboardInterrupt:
        pass
    return tui.return_code or 0


def tls_settings(
    tls: bool, cacert: str | None, cert: str | None, key: str | None, insecure: bool
) -> TLS | None:
    """The TLS settings asked for, their files checked; raises TLSError."""
    settings = TLS.from_options(tls, cacert, cert, key, insecure)
    if settings is not None:
        settings.check()
    return settings


def short_reason(exc: BaseException) -> str:
    """redis-py's "Error 111 connecting to h:p. Connection refused." as "Connection refused"."""
    tls_failure = handshake_failure(exc)  # the text of an SSLError buries the reason
    if tls_failure is not None:
        return tls_failure.rstrip(".")
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"^Error -?\d+ (while )?connecting to \S+?\.? ", "", text)
    return text.rstrip(".") or type(exc).__name__


def probe(
    host: str, port: int, password: str | None, timeout: float, tls: TLS | None = None
) -> str | None:
    """None when a Disque node answers HELLO at host:port, else why not (one line)."""
    try:
        with connect(
            host, port, password, socket_timeout=timeout, connect_timeout=timeout, tls=tls, raw=True
        ) as client:
            parse_hello(client.execute_command("HELLO"))
    except redis.exceptions.TimeoutError:
        return f"no reply within {timeout:g}s (is it a Disque client port?)"
    except redis.exceptions.ConnectionError as exc:
        reason = short_reason(exc)
        # A node hanging up on the first command sends a FIN, or a RST when our
        # HELLO still sits unread in its buffer (a plain client at a tls-port):
        # the same hang-up, one wording.
        if reset_by_peer(exc) or "closed by server" in reason:
            return CLOSED_BY_SERVER.rstrip(".") + closed_hint(tls)
        return reason
    except RedisError as exc:
        return short_reason(exc)
    except OSError as exc:
        return exc.strerror or str(exc)
    except HelloError:
        return "not a Disque node (unexpected HELLO reply)"
    return None


def reset_by_peer(exc: BaseException) -> bool:
    """A RST from the node: redis-py words it in its own ConnectionError, with or
    without the socket's ConnectionResetError as its cause."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionResetError) or "Connection reset by peer" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def print_once(poller: Poller) -> int:
    """`--once`: two polls one interval apart (rates need two), the overview printed
    as plain text; exit status 1 when it names an error (a node down or failing, jobs
    stranded), as a check would; warnings (leaving, not draining) leave it 0."""
    from disque_tui.incident import incident_text, problems

    async def two_polls() -> ClusterSnapshot:
        try:
            await poller.poll_cycle()
            await asyncio.sleep(poller.interval)
            return await poller.poll_cycle()
        finally:
            await poller.close()

    snapshot = asyncio.run(two_polls())
    sys.stdout.write(incident_text(snapshot))
    sys.stdout.flush()
    return 1 if any(p.severity == "error" for p in problems(snapshot)) else 0


def main(argv: list[str] | None = None) -> int:
    """The command (``argv``: its arguments, else sys.argv's): its exit status. A bad
    option is one line on stderr and status 2, as in the project's other commands
    (disque/typer_main.run_app)."""
    return run_app(app, argv, PROG)


if __name__ == "__main__":
    raise SystemExit(main())
