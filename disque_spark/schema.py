"""Columns of the ``disque`` data source and the rows built from job dicts.

``SCHEMA`` is the default schema of the snapshot and of the stream;
``EXTRA_COLUMNS`` are the other columns a user-given schema may ask for;
:class:`RowBuilder` turns jobs (dicts, or columns) into Arrow record batches in
a schema's column order: what the snapshot's and the stream's tasks yield.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
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
ARROW_BATCH_ROWS = 10_000  # Spark's spark.sql.execution.arrow.maxRecordsPerBatch default


class RowBuilder:
    """Turns jobs into Arrow record batches in a schema's column order (picklable).

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
        self.schema = schema
        self._arrow_schema: Any = None

    def batches(
        self, jobs: Iterable[dict[str, Any]], size: int = ARROW_BATCH_ROWS
    ) -> Iterator[Any]:
        """Job dicts as ``pyarrow.RecordBatch``es of up to ``size`` rows."""
        jobs = iter(jobs)
        while chunk := list(islice(jobs, size)):
            yield self.batch({name: [job.get(name) for job in chunk] for name in self.names})

    def batch(self, columns: dict[str, Any]) -> Any:
        """One ``pyarrow.RecordBatch`` from columns: name -> a list of values, or one
        value for every row (:class:`Same`); a column not given is null. A task
        that yields tuples has Spark's Python worker convert each cell with a
        Python call; a column goes to Arrow in one C call."""
        import pyarrow as pa

        rows = max(len(v) for v in columns.values() if isinstance(v, list))
        arrays = [
            _arrow_column(columns.get(name), field.type, rows, self.body_as_text and name == "body")
            for name, field in zip(self.names, self.arrow_schema(), strict=True)
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema())

    def arrow_schema(self) -> Any:
        """The schema as Spark converts it, which a batch must match exactly."""
        if self._arrow_schema is None:
            from pyspark.sql.pandas.types import to_arrow_schema

            self._arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        return self._arrow_schema


class Same:
    """A column with one value on every row (the node a task read from)."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _arrow_column(values: Any, arrow_type: Any, rows: int, as_text: bool) -> Any:
    import pyarrow as pa

    if values is None:
        return pa.nulls(rows, arrow_type)
    if isinstance(values, Same):
        return pa.repeat(pa.scalar(values.value, arrow_type), rows)
    if as_text:
        values = [_text(v) for v in values]
    try:
        return pa.array(values, type=arrow_type)  # (bytes for a string column: UTF-8)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([_text(v) for v in values], type=arrow_type)  # not UTF-8


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
