"""`disque`: parse the command line, then hand over to the mode it asks for.

    disque [options] cmd [args...]     one-shot: run, print, exit
    disque [options] < commands.txt    stdin pipeline: one command per line
    disque [options]                   interactive REPL (stdin is a terminal)
    disque --pipe / --stat / --latency special modes
    disque --cluster create|check|info|call|leave ...   cluster manager

Options follow redis-cli (`-h` is the host, `--help` the help); parsing stops
at the command name, so arguments such as `-2` in `qpeek q -2` pass through.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Sequence

import click

from disque.tls import TLS, TLSError
from disque_cli import __version__
from disque_cli.connection import BadURI, Disconnected, Endpoint, Session, parse_uri
from disque_cli.options import EXAMPLES, OPTIONS, SECTIONS, Config
from disque_cli.render import Mode, RenderOptions
from disque_cli.runner import Outcome, Runner

AUTH_WARNING = (
    "Warning: Using a password with '-a' or '-u' option on the command line "
    "interface may not be safe."
)


class UsageError(Exception):
    """A bad command line: print the message and exit 1."""


# ---- parsing -------------------------------------------------------------------


def _click_command() -> click.Command:
    params: list[click.Parameter] = []
    for opt in OPTIONS:
        decls = [*opt.flags, opt.dest]
        if opt.flag_value is not None:
            params.append(click.Option(decls, flag_value=opt.flag_value, default=None))
        elif opt.takes_value:
            kind = {int: click.INT, float: click.FLOAT}.get(opt.kind, click.STRING)
            params.append(click.Option(decls, type=kind, default=opt.default))
        else:
            params.append(click.Option(decls, is_flag=True, default=False))
    params.append(click.Argument(["args"], nargs=-1, type=click.UNPROCESSED))
    return click.Command(
        "disque",
        params=params,
        context_settings={
            "help_option_names": [],
            "allow_interspersed_args": False,
            "ignore_unknown_options": False,
        },
    )


def _fail_message(exc: click.ClickException) -> str:
    if isinstance(exc, (click.NoSuchOption, click.BadOptionUsage)):
        name = getattr(exc, "option_name", None) or str(exc.message).split()[-1]
        return f"Unrecognized option or bad number of args for: '{name}'"
    if isinstance(exc, click.BadParameter) and exc.param is not None:
        flags = "/".join(getattr(exc.param, "opts", []) or [exc.param.name or "?"])
        return f"Invalid value for '{flags}': {exc.message}"
    return exc.format_message()


def parse(argv: Sequence[str], stdout_is_tty: bool) -> Config:
    try:
        ctx = _click_command().make_context("disque", list(argv))
    except click.ClickException as exc:
        raise UsageError(_fail_message(exc)) from None
    params = ctx.params
    endpoint = Endpoint()
    if params["uri"]:
        try:
            endpoint = parse_uri(params["uri"])
        except BadURI as exc:
            raise UsageError(str(exc)) from None
    if params["host"]:
        endpoint.host = params["host"]
    if params["port"] is not None:
        endpoint.port = params["port"]
    if params["socket"]:
        endpoint.socket = params["socket"]
    endpoint.tls = (
        TLS.from_options(
            params["tls"], params["cacert"], params["cert"], params["key"], params["insecure"]
        )
        or endpoint.tls
    )
    _check_tls(endpoint.tls)
    if params["password"] is not None:
        endpoint.password = params["password"]
    elif endpoint.password is None and os.environ.get("DISQUECLI_AUTH"):
        endpoint.password = os.environ["DISQUECLI_AUTH"]
    default_mode = Mode.STANDARD if stdout_is_tty or os.environ.get("FAKETTY") else Mode.RAW
    mode = Mode(params["output"]) if params["output"] else default_mode
    render = RenderOptions(
        mode=mode,
        mb_delim=(params["mb_delim"] or "\n").encode(),
        cmd_delim=(params["cmd_delim"] or "\n").encode(),
    )
    args = [arg.encode("utf-8", errors="surrogateescape") for arg in params["args"]]
    options = {name: value for name, value in params.items() if name != "args"}
    return Config(endpoint, mode, render, args, **options)


def _check_tls(tls: TLS | None) -> None:
    """Bad certificate files fail here, in one line, before any connection."""
    if tls is None:
        return
    try:
        tls.check()
    except TLSError as exc:
        raise UsageError(f"Could not create an SSL context: {exc}") from None


def usage() -> str:
    lines = [f"disque {__version__}", "", "Usage: disque [OPTIONS] [cmd [arg [arg ...]]]"]
    for section in SECTIONS:
        for opt in OPTIONS:
            if opt.section != section:
                continue
            label = f"  {opt.label}"
            width = 21
            body = textwrap.wrap(opt.help, 78 - width)
            first = (
                label.ljust(width - 1) + " " + body[0]
                if len(label) < width - 1
                else label + " " + body[0]
            )
            lines.append(first)
            lines += [" " * width + rest for rest in body[1:]]
    lines += ["", "Examples:"] + [f"  {example}" for example in EXAMPLES]
    lines += [
        "",
        "When no command is given, disque starts in interactive mode.",
        'Type "help" in interactive mode for information on available commands',
        "and settings.",
        "",
    ]
    return "\n".join(lines)


# ---- modes -----------------------------------------------------------------------


def _one_shot(config: Config, session: Session) -> int:
    args = list(config.args)
    if config.stdin_arg:
        args.append(sys.stdin.buffer.read())
    try:
        session.connect()
    except Disconnected as exc:
        print(exc, file=sys.stderr)
        return 1
    runner = Runner(
        session, config.render, interval=config.interval or 0.0, exit_on_error=config.exit_on_error
    )
    repeat = config.repeat if config.repeat is not None else 1
    outcome = runner.execute(args, repeat)
    return 1 if outcome is Outcome.NOT_CONNECTED else 0


def _stdin_pipeline(config: Config, session: Session) -> int:
    try:
        session.connect()
    except Disconnected as exc:
        print(exc, file=sys.stderr)
        return 1
    runner = Runner(session, config.render, interval=config.interval or 0.0, show_timing=True)
    for raw_line in sys.stdin.buffer:
        if runner.run_line(raw_line.rstrip(b"\r\n")) is Outcome.QUIT:
            break
    return 1 if config.exit_on_error and runner.saw_error_reply else 0


def run(argv: Sequence[str]) -> int:
    try:
        config = parse(argv, sys.stdout.isatty())
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 1
    if config.help:
        sys.stdout.write(usage())
        return 0
    if config.version:
        print(f"disque {__version__}")
        return 0
    if (
        config.password is not None or (config.uri and config.endpoint.password)
    ) and not config.no_auth_warning:
        print(AUTH_WARNING, file=sys.stderr)
    session = Session(config.endpoint)
    try:
        if config.cluster:
            from disque_cli import admin

            return admin.cluster_command(config.cluster, config)
        if config.pipe:
            from disque_cli import pipe

            return pipe.run(session, config.pipe_timeout)
        if config.stat or config.latency or config.latency_history:
            from disque_cli import admin

            return admin.run_monitor_mode(session, config)
        if config.args:
            return _one_shot(config, session)
        if sys.stdin.isatty():
            from disque_cli import repl

            return repl.run(session, config)
        return _stdin_pipeline(config, session)
    finally:
        session.close()


def main(argv: Sequence[str] | None = None) -> None:
    try:
        code = run(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        # The reader went away (`disque ... | head`): not an error worth a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    sys.exit(code)
