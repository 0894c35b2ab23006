"""PySpark (>= 4.0) data source for Disque: ``format("disque")``.

    import disque_spark
    disque_spark.register(spark)
    df.write.format("disque").option("queue", "q").mode("append").save()   # ADDJOB
    spark.read.format("disque").load()                                     # JSCAN snapshot
    spark.readStream.format("disque").option("queue", "q").load()          # GETJOB/ACKJOB

See :mod:`disque_spark.source` for an overview (it names the module of each
part, where its options and design are described), and
``python -m disque_spark.report`` for an example pipeline.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from disque_spark.source import SCHEMA, DisqueDataSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "SCHEMA",
    "DisqueDataSource",
    "dedupe_snapshot",
    "read_snapshot",
    "register",
    "remote_session",
    "session",
]

# Which copy of a job a deduplicated snapshot keeps: an ACK anywhere wins,
# then the node that has it queued, then the active and wait-repl copies.
STATE_RANK = {"acked": 4, "queued": 3, "active": 2, "wait-repl": 1}


def register(spark: SparkSession) -> None:
    """Make ``format("disque")`` available in this session."""
    spark.dataSource.register(DisqueDataSource)


def read_snapshot(spark: SparkSession, dedupe: bool = False, **options: str) -> DataFrame:
    """``spark.read.format("disque")`` with `options`; `dedupe` keeps one row per job id."""
    register(spark)
    reader = spark.read.format("disque")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    df = reader.load()
    return dedupe_snapshot(df) if dedupe else df


def dedupe_snapshot(df: DataFrame) -> DataFrame:
    """One row per job id out of the per-node snapshot.

    The kept row is the most advanced copy (acked > queued > active >
    wait-repl, then the smallest node id); ``nacks`` and
    ``additional_deliveries`` become the largest value any node reports (they
    are best-effort, per-node counters), and a column ``nodes`` lists the nodes
    holding a copy.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rank = F.lit(0)
    for state, value in STATE_RANK.items():
        rank = F.when(F.col("state") == state, F.lit(value)).otherwise(rank)
    by_id = Window.partitionBy("id")
    ordered = by_id.orderBy(F.col("_rank").desc(), F.col("node"))
    out = (
        df.withColumn("_rank", rank)
        .withColumn("_n", F.row_number().over(ordered))
        .withColumn("nodes", F.array_sort(F.collect_set("node").over(by_id)))
    )
    for counter in ("nacks", "additional_deliveries"):
        if counter in df.columns:
            out = out.withColumn(counter, F.max(counter).over(by_id))
    return out.where(F.col("_n") == 1).drop("_rank", "_n")


def session(
    master: str | None = None, app_name: str = "disque-spark", conf: dict[str, str] | None = None
) -> SparkSession:
    """A SparkSession with the ``disque`` format registered.

    ``master`` defaults to ``local[*]``. Python workers run the current
    interpreter (PYSPARK_PYTHON, unless already set) and receive this package
    as a zip, so they import it even when it is not installed (on a real
    cluster they still need ``redis`` and ``pyarrow``).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    master = master or "local[*]"
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    ship_package(spark)
    register(spark)
    return spark


SHIPPED_PACKAGES = ("disque_spark", "disque")  # disque: connections, HELLO and TLS settings


def ship_package(spark: SparkSession) -> str:
    """Zip this package (and the one it imports) and give it to the executors, so
    they import it: ``addPyFile`` on a classic session, ``addArtifacts(pyfile=True)``
    on a Spark Connect one (``sc://``: the server's executors)."""
    root = Path(__file__).resolve().parent.parent
    fd, path = tempfile.mkstemp(prefix="disque_spark-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(path, "w") as zf:
        for package in SHIPPED_PACKAGES:
            for file in (root / package).rglob("*.py"):
                zf.write(file, file.relative_to(root).as_posix())
    if is_remote(spark):
        spark.addArtifacts(path, pyfile=True)  # uploaded now: the zip is no longer needed
        remove_zip(path)
    else:
        # The driver serves the file to executors from this path whenever one
        # starts, so it stays until this process ends.
        spark.sparkContext.addPyFile(path)
        atexit.register(remove_zip, path)
    return path


def remove_zip(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def is_remote(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def remote_session(url: str) -> SparkSession:
    """A Spark Connect session (``sc://host:port``) with the ``disque`` format
    registered and this package shipped to the server's executors."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()
    ship_package(spark)
    register(spark)
    return spark
