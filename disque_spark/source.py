"""The ``disque`` PySpark data source: the entry point Spark instantiates.

Usage (after ``disque_spark.register(spark)``)::

    df.write.format("disque").option("queue", "q").mode("append").save()
    spark.read.format("disque").option("nodes", "h1:7711,h2:7711").load()
    spark.readStream.format("disque").option("queue", "q").load()

:class:`DisqueDataSource` only names the format, gives the default schema
and hands the options to the part that does the work, one module each:

``disque_spark.options``
    the options common to every part (``nodes``, ``password``, ``queue``,
    TLS: ``tls tlsCaCert tlsCert tlsKey tlsInsecure``) and their parsing.
``disque_spark.schema``
    ``SCHEMA`` (the columns of the snapshot and the stream), the extra
    columns a user schema may ask for, job dicts to rows.
``disque_spark.writer``
    batch write: pipelined ``ADDJOB`` from every task to a node chosen by
    HELLO; options ``replicate retry ttl delay maxlen async timeout
    batchSize``.
``disque_spark.snapshot``
    batch read: one partition per node, each walked with ``JSCAN``; options
    ``state scanCount skipUnreachable``.
``disque_spark.stream``
    streaming read, at-least-once: ``GETJOB`` on the driver, ``ACKJOB``
    after Spark commits the batch, ``NACK`` of uncommitted jobs when the
    query stops, Trigger.AvailableNow; options ``batchSize
    maxJobsPerTrigger timeoutMs numPartitions``.

Every module holding a class Spark pickles (readers, writer, partitions,
commit messages) is inside this package, which ``disque_spark.session()``
ships to the executors as a zip.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from disque_spark.client import DisqueError
from disque_spark.schema import SCHEMA
from disque_spark.snapshot import DisqueSnapshotReader
from disque_spark.stream import DisqueStreamReader
from disque_spark.writer import DisqueWriter

__all__ = ["SCHEMA", "DisqueDataSource"]


class DisqueDataSource(DataSource):
    """``format("disque")``: see the module docstring for the parts and their options."""

    @classmethod
    def name(cls) -> str:
        return "disque"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return DisqueSnapshotReader(schema, dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise DisqueError(
                "disque: only mode('append') is supported: a job queue cannot be overwritten"
            )
        return DisqueWriter(schema, dict(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return DisqueStreamReader(schema, dict(self.options))
