"""Example pipeline: a per-queue report of a Disque cluster, with its dead letters.

    python -m disque_spark.report [--nodes h:p,...] [--out DIR] [--threshold N]
                                  [--queue Q] [--password P] [--master URL]

Reads a snapshot of every job on every node (``format("disque")``, one row
per job id after deduplication), then writes, as Parquet under ``--out``:

* ``summary``: one row per queue: jobs, how many are wait-repl / active /
  queued / acked, the largest nacks and additional-deliveries counters, and
  how many jobs are dead letters;
* ``dead_letters``: the jobs whose ``nacks`` or ``additional_deliveries``
  reached ``--threshold``: the "dead letter queue" view the Disque README
  describes (Disque keeps counters instead of a special queue; the
  application decides what too many deliveries means).

Both are also printed as tables. Runs on ``local[*]`` unless ``--master``
names a cluster (the package is shipped to the executors, which need
``redis`` and ``pyarrow`` installed).

The command line is parsed with typer, as disque-benchmark and disque-tui do
(``-h`` and ``--help`` are the help). Exit status: 0 when the report was
written; 1 when it could not be (one line on stderr, ``error: ...``); 2 on a
command line that does not parse (one line on stderr); 130 when interrupted.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import disque_spark
from disque.typer_main import run_app
from disque_spark.client import DEFAULT_NODES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PROG = "python -m disque_spark.report"
DEFAULT_THRESHOLD = 3
DEFAULT_OUT = "disque-report"
DEFAULT_SHOW = 20
STATES = ("wait-repl", "active", "queued", "acked")
SUMMARY_COLUMNS = [
    "queue",
    "jobs",
    "wait_repl",
    "active",
    "queued",
    "acked",
    "max_nacks",
    "max_additional_deliveries",
    "dead_letters",
]
DEAD_COLUMNS = ["queue", "id", "state", "nacks", "additional_deliveries", "ttl", "nodes", "body"]


def build_report(
    spark: SparkSession,
    nodes: str = DEFAULT_NODES,
    threshold: int = DEFAULT_THRESHOLD,
    password: str | None = None,
    queue: str | None = None,
) -> tuple[DataFrame, DataFrame]:
    """(summary, dead_letters) DataFrames for the cluster reachable from `nodes`."""
    from pyspark.sql import functions as F

    options = {"nodes": nodes}
    if password:
        options["password"] = password
    if queue:
        options["queue"] = queue
    jobs = disque_spark.read_snapshot(spark, dedupe=True, **options).cache()
    dead_cond = (F.col("nacks") >= threshold) | (F.col("additional_deliveries") >= threshold)
    summary = (
        jobs.groupBy("queue")
        .agg(
            F.count("*").alias("jobs"),
            *[
                F.sum(F.when(F.col("state") == s, 1).otherwise(0))
                .cast("long")
                .alias(s.replace("-", "_"))
                for s in STATES
            ],
            F.max("nacks").alias("max_nacks"),
            F.max("additional_deliveries").alias("max_additional_deliveries"),
            F.sum(F.when(dead_cond, 1).otherwise(0)).cast("long").alias("dead_letters"),
        )
        .orderBy("queue")
        .select(*SUMMARY_COLUMNS)
    )
    dead = (
        jobs.where(dead_cond)
        .withColumn("body", F.col("body").cast("string"))
        .select(*DEAD_COLUMNS)
        .orderBy(F.col("nacks").desc(), F.col("additional_deliveries").desc(), "id")
    )
    return summary, dead


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], max_width: int = 48) -> str:
    """A plain fixed-width text table."""

    def cell(value: Any) -> str:
        if isinstance(value, list):
            value = ",".join(str(v)[:8] for v in value)
        text = "" if value is None else str(value)
        return text if len(text) <= max_width else text[: max_width - 3] + "..."

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def fmt(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    out = [line, fmt(list(columns)), line, *(fmt(r) for r in cells), line]
    return "\n".join(out)


def run_report(
    spark: SparkSession,
    nodes: str = DEFAULT_NODES,
    out: str | Path = DEFAULT_OUT,
    threshold: int = DEFAULT_THRESHOLD,
    password: str | None = None,
    queue: str | None = None,
    show: int = DEFAULT_SHOW,
) -> dict[str, Any]:
    """Build the report, write it as Parquet under `out`, print it; return what was found."""
    summary, dead = build_report(spark, nodes, threshold, password, queue)
    out = Path(out)
    summary.write.mode("overwrite").parquet(str(out / "summary"))
    dead.write.mode("overwrite").parquet(str(out / "dead_letters"))
    summary_rows = summary.collect()
    dead_count = dead.count()
    dead_rows = dead.limit(show).collect()
    print(
        f"Disque report ({nodes}): {sum(r['jobs'] for r in summary_rows)} jobs "
        f"in {len(summary_rows)} queues"
    )
    print(format_table(SUMMARY_COLUMNS, [[r[c] for c in SUMMARY_COLUMNS] for r in summary_rows]))
    print(f"Dead letters (nacks or additional deliveries >= {threshold}): {dead_count}")
    if dead_rows:
        print(format_table(DEAD_COLUMNS, [[r[c] for c in DEAD_COLUMNS] for r in dead_rows]))
        if dead_count > len(dead_rows):
            print(f"... and {dead_count - len(dead_rows)} more in {out / 'dead_letters'}")
    print(f"Parquet written to {out / 'summary'} and {out / 'dead_letters'}")
    return {"summary": [r.asDict() for r in summary_rows], "dead_letters": dead_count}


def error_summary(exc: BaseException) -> str:
    """The connector's own message out of a Spark error (which wraps a Python traceback)."""
    found = re.findall(r"DisqueError: (disque: .*)", str(exc))
    if found:
        return found[-1].strip()
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(exc).__name__


@dataclass(frozen=True)
class Options:
    """The report the command line asks for."""

    nodes: str = DEFAULT_NODES
    password: str | None = None
    queue: str | None = None
    out: str = DEFAULT_OUT
    threshold: int = DEFAULT_THRESHOLD
    master: str | None = None
    show: int = DEFAULT_SHOW


app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def opt(*names: str, help: str, metavar: str | None = None, **kwargs: Any) -> Any:
    """An option whose help says its default itself, as argparse's did."""
    return typer.Option(*names, help=help, metavar=metavar, show_default=False, **kwargs)


@app.command(help="Per-queue report and dead letters of a Disque cluster, with Spark.")
def report(
    nodes: Annotated[
        str,
        opt(
            "--nodes",
            metavar="NODES",
            help=f"comma-separated host:port seed nodes (default {DEFAULT_NODES})",
        ),
    ] = DEFAULT_NODES,
    password: Annotated[
        str | None, opt("--password", metavar="PASSWORD", help="Disque requirepass")
    ] = None,
    queue: Annotated[
        str | None,
        opt("--queue", metavar="QUEUE", help="report only this queue (comma list)"),
    ] = None,
    out: Annotated[
        str,
        opt(
            "--out",
            metavar="OUT",
            help=f"output directory for the Parquet files (default ./{DEFAULT_OUT})",
        ),
    ] = DEFAULT_OUT,
    threshold: Annotated[
        int,
        opt(
            "--threshold",
            metavar="THRESHOLD",
            help="a job is a dead letter when its nacks or additional "
            f"deliveries reach this (default {DEFAULT_THRESHOLD})",
        ),
    ] = DEFAULT_THRESHOLD,
    master: Annotated[
        str | None, opt("--master", metavar="MASTER", help="Spark master URL (default local[*])")
    ] = None,
    show: Annotated[
        int,
        opt(
            "--show", metavar="SHOW", min=0, help=f"dead letters to print (default {DEFAULT_SHOW})"
        ),
    ] = DEFAULT_SHOW,
) -> None:
    options = Options(
        nodes=nodes,
        password=password,
        queue=queue,
        out=out,
        threshold=threshold,
        master=master,
        show=show,
    )
    raise typer.Exit(start(options))


def start(opts: Options) -> int:
    """The report `opts` asks for, on a Spark session of its own: the exit status."""
    try:
        spark = disque_spark.session(opts.master, app_name="disque-report")
        spark.sparkContext.setLogLevel("ERROR")
        try:
            run_report(
                spark,
                opts.nodes,
                opts.out,
                opts.threshold,
                opts.password,
                opts.queue,
                opts.show,
            )
        except Exception as exc:
            print(f"error: {error_summary(exc)}", file=sys.stderr)
            return 1
        finally:
            spark.stop()
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command (argv: its arguments, else sys.argv's): its exit status. A command
    line that does not parse is one line on stderr and exit status 2."""
    return run_app(app, argv, PROG)


if __name__ == "__main__":
    sys.exit(main())
