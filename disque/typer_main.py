"""How each command-line program of the project runs its typer app: one line on
stderr and exit status 2 for a command line that does not parse (redis-cli's
manner, no usage box), the app's own status otherwise, never a traceback.

Used by disque-benchmark, disque-check-aof, disque-tui and ``python -m disque_spark.report``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
import typer

# A command line that does not parse: typer's own copy of click raises a
# typer.TyperException, typer before that copy (0.12 and on) click's
# ClickException; both have format_message() and exit_code.
USAGE_ERROR: type[click.ClickException] = getattr(typer, "TyperException", click.ClickException)


def run_app(app: typer.Typer, argv: Sequence[str] | None, prog: str) -> int:
    """Run ``app`` on ``argv`` (else sys.argv's arguments): its exit status."""
    try:
        code = app(args=None if argv is None else list(argv), prog_name=prog, standalone_mode=False)
    except USAGE_ERROR as exc:  # click's UsageError and kin
        print(f"{prog}: {exc.format_message().rstrip('.')} (see --help)", file=sys.stderr)
        return exc.exit_code
    except SystemExit as done:  # typer's exit on a closed pipe
        return done.code if isinstance(done.code, int) else int(done.code is not None)
    return code if isinstance(code, int) else 0
