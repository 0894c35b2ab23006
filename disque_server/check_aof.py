"""``disque-check-aof [--fix] <file.aof>``: find, and optionally cut, a bad AOF tail.

Reads the file record by record (RESP commands, LOADJOB/DELJOB: a C Disque
1.0-rc1's file or one of ours, which are the same format) and reports
the offset of the first byte that is not part of a complete, well formed
record. With --fix the file is truncated there, after asking for
confirmation when standard input is a terminal (as redis-check-aof does).

The command line is parsed with typer, as disque-benchmark and disque-tui do;
`-h` is the help as well as `--help` (redis-check-aof has no host option).
Exit status: 0 when the file is valid or was fixed; 1 when it is not valid,
cannot be opened or truncated, or the fix was declined; 2 on a command line
that does not parse (one line on stderr).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Final

import hiredis
import typer

from disque.typer_main import run_app
from disque_server.job import FIELDS
from disque_server.resp import BYTES_ONLY, bulk_array_length
from disque_server.serialize import SerializeError, deserialize_job

OLD_LOADJOB_LEN: Final = 3 + FIELDS  # this project's earlier LOADJOB, field by field

PROG: Final = "disque-check-aof"


def well_formed(record: list[bytes]) -> bool:
    """A DELJOB, or a LOADJOB whose job reads back (Disque's serialized job, or
    this project's earlier field-by-field record)."""
    name = record[0].upper()
    if name == b"DELJOB":
        return len(record) == 2
    if name != b"LOADJOB":
        return False
    if len(record) == 2:
        try:
            return deserialize_job(record[1])[1] == len(record[1])
        except SerializeError:
            return False
    return len(record) == OLD_LOADJOB_LEN


def check(path: str) -> tuple[int, int, str]:
    """(offset of the first bad byte, records read, reason); offset == size when all is good."""
    reader = hiredis.Reader()
    offset = records = 0
    with open(path, "rb") as f:
        data = f.read()
    reader.feed(data)
    while True:
        try:
            record = reader.gets()
        except (hiredis.ProtocolError, TypeError, ValueError, MemoryError) as exc:
            return offset, records, f"bad format: {exc}"
        if record is False:
            break
        if (
            type(record) is not list
            or not record
            or not BYTES_ONLY.issuperset(map(type, record))
            or not well_formed(record)
        ):
            return offset, records, "not a LOADJOB/DELJOB record"
        offset += bulk_array_length(record)
        records += 1
    if offset < len(data):
        return offset, records, "truncated record at the end of the file"
    return offset, records, ""


app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # no host option to take -h
)


@app.command(help="Check (and fix) a Disque append only file.")
def check_aof(
    file: Annotated[
        str, typer.Argument(metavar="FILE", show_default=False, help="the append only file")
    ],
    fix: Annotated[
        bool, typer.Option("--fix", help="truncate the file after the last good record")
    ] = False,
) -> None:
    raise typer.Exit(run(file, fix))


def run(path: str, fix: bool) -> int:
    """Check the file at `path`, and with `fix` truncate it: the exit status."""
    try:
        size = os.path.getsize(path)
        offset, records, reason = check(path)
    except OSError as exc:
        print(f"Cannot open file {path}: {exc.strerror}", file=sys.stderr)
        return 1
    if not reason:
        print(f"AOF is valid: {records} records, {size} bytes")
        return 0
    print(
        f"AOF analyzed: size={size}, ok_up_to={offset}, diff={size - offset}, records ok={records}"
    )
    print(f"0x{offset:08x}: Expected a complete record: {reason}")
    if not fix:
        print("AOF is not valid. Use the --fix option to try fixing it.")
        return 1
    if sys.stdin.isatty():
        try:
            answer = input(
                f"This will shrink the AOF from {size} bytes, with {size - offset} "
                "bytes, to "
                f"{offset} bytes\nContinue? [y/N]: "
            )
        except (EOFError, KeyboardInterrupt):  # Ctrl-D or Ctrl-C: a no
            print()
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("Aborting...")
            return 1
    try:
        os.truncate(path, offset)
    except OSError as exc:
        print(f"Cannot truncate file {path}: {exc.strerror}", file=sys.stderr)
        return 1
    print("Successfully truncated AOF")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The command (argv: its arguments, else sys.argv's): its exit status. A command
    line that does not parse is one line on stderr and exit status 2."""
    return run_app(app, argv, PROG)


if __name__ == "__main__":
    raise SystemExit(main())
