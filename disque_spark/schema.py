"""Columns of the ``disque`` data source and the rows built from job dicts.

``SCHEMA`` is the default schema of the snapshot and of the stream;
``EXTRA_COLUMNS`` are the other columns a user-given schema may ask for;
:class:`RowBuilder` turns a job dict into a row in a schema's column order.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from disque_spark.client import DisqueError

SCHEMA = StructType(
    [
        StructField("id", StringType(), False),
        StructField("queue", StringType(), True),
        StructField("state", StringType(), True),
        StructField("repl", IntegerType(), True),
        StructField("ttl", IntegerType(), True),
        StructField("ctime", LongType(), True),
        StructField("delay", IntegerType(), True),
        StructField("retry", IntegerType(), True),
        StructField("nacks", IntegerType(), True),
        StructField("additional_deliveries", IntegerType(), True),
        StructField("nodes_delivered", ArrayType(StringType()), True),
        StructField("body", BinaryType(), True),
        StructField("node", StringType(), True),
    ]
)

# Columns a user-given schema may also ask for (JSCAN REPLY all has them).
EXTRA_COLUMNS = {
    "nodes_confirmed": ArrayType(StringType()),
    "next_requeue_within": LongType(),
    "next_awake_within": LongType(),
}
KNOWN_COLUMNS = {f.name for f in SCHEMA.fields} | set(EXTRA_COLUMNS)


class RowBuilder:
    """Turns a job dict into a tuple in a schema's column order (picklable).

    A user schema may list any subset of the known columns, in any order, and
    may declare ``body`` as a string (decoded as UTF-8).
    """

    def __init__(self, schema: StructType) -> None:
        unknown = [f.name for f in schema.fields if f.name not in KNOWN_COLUMNS]
        if unknown:
            raise DisqueError(
                f"disque: unknown column(s) {unknown} in the schema; "
                f"known columns: {sorted(KNOWN_COLUMNS)}"
            )
        self.names = [f.name for f in schema.fields]
        self.body_as_text = any(
            f.name == "body" and isinstance(f.dataType, StringType) for f in schema.fields
        )

    def __call__(self, job: dict[str, Any]) -> tuple:
        if self.body_as_text and isinstance(job.get("body"), bytes):
            job = {**job, "body": job["body"].decode("utf-8", "replace")}
        return tuple(job.get(name) for name in self.names)
