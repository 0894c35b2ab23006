"""`disque-tui [-h host] [-p port] [-a password] [--tls ...] [--interval 1.0] [--once]`.

Parses the command line (like redis-cli, `-h` is the host; `--help` is
help; the TLS options are `disque`'s), checks that a Disque node answers at
host:port before any screen is drawn (one line on stderr and exit status 1
when not), then runs the app on a `PollerThread`, or, with --once or without
a terminal, prints the overview once as plain text.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from typing import TYPE_CHECKING

import redis
from redis.exceptions import RedisError

from disque.protocol import HelloError, connect, parse_hello
from disque.tls import TLS, TLS_OPTIONS, TLSError, closed_hint, handshake_failure

if TYPE_CHECKING:
    from disque_tui.poller import Poller
    from disque_tui.snapshot import ClusterSnapshot

PROG = "disque-tui"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        add_help=False,
        description="Live dashboard of a Disque cluster: nodes, queues, jobs.",
    )
    parser.add_argument("--help", action="help", help="show this help and exit")
    parser.add_argument(
        "-h", "--host", default="127.0.0.1", help="a node of the cluster (default 127.0.0.1)"
    )
    parser.add_argument("-p", "--port", type=int, default=7711, help="its port (default 7711)")
    parser.add_argument(
        "-a",
        "--password",
        default=os.environ.get("DISQUECLI_AUTH"),
        help="password for AUTH (default $DISQUECLI_AUTH)",
    )
    add_tls_arguments(parser)
    parser.add_argument(
        "--interval", type=positive_float, default=1.0, help="seconds between polls (default 1.0)"
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        help="seconds before a node is shown down (default 2 x interval, min 1)",
    )
    parser.add_argument(
        "--scan-count", type=int, default=500, help="QSCAN COUNT per page (default 500)"
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="print the overview (problems, nodes, queues that matter) once "
        "as plain text and exit, like top -b -n 1 (the default when "
        "standard output is not a terminal)",
    )
    parser.add_argument(
        "--screenshot-dir",
        metavar="DIR",
        default=None,
        help="where the palette's Screenshot saves its SVG (default: the current directory)",
    )
    return parser


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """`disque`'s --tls --cacert --cert --key --insecure (disque.tls)."""
    for opt in TLS_OPTIONS:
        if opt.takes_file:
            parser.add_argument(
                opt.flag, dest=opt.dest, metavar="FILE", help=argparse_help(opt.help)
            )
        else:
            parser.add_argument(
                opt.flag, dest=opt.dest, action="store_true", help=argparse_help(opt.help)
            )


def argparse_help(sentence: str) -> str:
    """The CLI's "Private key file." in this parser's style: "private key file"."""
    first = sentence.split(" ", 1)[0]
    if not first.isupper():  # keep acronyms: "CA certificate ..."
        sentence = sentence[:1].lower() + sentence[1:]
    return sentence.rstrip(".")


def tls_settings(args: argparse.Namespace) -> TLS | None:
    """The TLS settings asked for, their files checked; raises TLSError."""
    tls = TLS.from_options(args.tls, args.cacert, args.cert, args.key, args.insecure)
    if tls is not None:
        tls.check()
    return tls


def positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value!r}")
    return number


def short_reason(exc: BaseException) -> str:
    """redis-py's "Error 111 connecting to h:p. Connection refused." as "Connection refused"."""
    tls_failure = handshake_failure(exc)  # the text of an SSLError buries the reason
    if tls_failure is not None:
        return tls_failure
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
        return reason + closed_hint(tls) if "closed by server" in reason else reason
    except RedisError as exc:
        return short_reason(exc)
    except OSError as exc:
        return exc.strerror or str(exc)
    except HelloError:
        return "not a Disque node (unexpected HELLO reply)"
    return None


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
    args = build_parser().parse_args(argv)
    try:
        tls = tls_settings(args)
    except TLSError as exc:
        print(f"{PROG}: could not create an SSL context: {exc}", file=sys.stderr)
        return 1
    timeout = args.timeout if args.timeout is not None else max(1.0, 2 * args.interval)
    problem = probe(args.host, args.port, args.password, min(timeout, 5.0), tls)
    if problem is not None:
        print(f"{PROG}: cannot connect to {args.host}:{args.port}: {problem}", file=sys.stderr)
        return 1

    from disque_tui.poller import Poller, PollerThread

    poller = Poller(
        args.host,
        args.port,
        args.password,
        interval=args.interval,
        timeout=timeout,
        scan_count=args.scan_count,
        tls=tls,
    )
    if args.once or not sys.stdout.isatty():
        # Without a terminal a full-screen app would write escape codes forever.
        return print_once(poller)
    from disque_tui.app import DisqueTUI

    app = DisqueTUI(
        PollerThread(poller), seed=f"{args.host}:{args.port}", screenshot_dir=args.screenshot_dir
    )
    try:
        app.run()
    except KeyboardInterrupt:
        pass
    return app.return_code or 0


if __name__ == "__main__":
    raise SystemExit(main())
