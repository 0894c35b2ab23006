"""The data source over TLS (options tls, tlsCaCert, tlsCert, tlsKey, tlsInsecure),
against a node that wants a client certificate and is given by its tls-port only."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from sparkhelpers import job_ids, read_rows  # noqa: E402

from disque_spark.client import DisqueError  # noqa: E402
from disque_spark.options import _opt_tls  # noqa: E402
from disque_spark.schema import SCHEMA  # noqa: E402
from disque_spark.stream import DisqueStreamReader  # noqa: E402


def tls_options(certs: dict[str, str], tls_port: int) -> dict[str, str]:
    return {
        "nodes": f"127.0.0.1:{tls_port}",
        "tlsCaCert": certs["ca"],
        "tlsCert": certs["cert"],
        "tlsKey": certs["key"],
    }


@pytest.mark.timeout(120)
def test_write_then_read_a_snapshot_over_tls(spark, start_tls_node, certs):
    node, tls_port = start_tls_node(auth_clients="yes")
    options = tls_options(certs, tls_port)
    bodies = [f"tls-{i}" for i in range(50)]
    df = spark.createDataFrame([(b,) for b in bodies], "body string").repartition(2)
    df.write.format("disque").options(**options).option("queue", "tq").mode("append").save()
    assert node.call("QLEN", "tq") == 50

    rows = spark.read.format("disque").options(**options).option("queue", "tq").load().collect()
    assert sorted(bytes(r.body).decode() for r in rows) == sorted(bodies)
    assert {r.state for r in rows} == {"queued"}


@pytest.mark.timeout(60)
def test_stream_reader_gets_and_acks_over_tls(start_tls_node, certs):
    """The driver side of a stream (GETJOB, then ACKJOB at commit), without Spark."""
    node, tls_port = start_tls_node(auth_clients="yes")
    ids = {node.call("ADDJOB", "sq", f"s{i}", 0).decode() for i in range(5)}
    reader = DisqueStreamReader(
        SCHEMA, {**tls_options(certs, tls_port), "queue": "sq", "timeoutMs": "0"}
    )
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, None)
        rows = [row for part in reader.partitions(start, end) for row in read_rows(reader, part)]
        assert {row[0] for row in rows} == ids
        reader.commit(end)
    finally:
        reader.stop()
    assert not job_ids(node, "sq")


@pytest.mark.timeout(120)
def test_tls_mistakes_are_clear_errors(spark, start_tls_node, certs):
    _, tls_port = start_tls_node()

    def read(key: str, value: str) -> None:  # DataFrameReader.option() mutates the reader
        spark.read.format("disque").option("nodes", f"127.0.0.1:{tls_port}").option(
            key, value
        ).load().collect()

    with pytest.raises(
        Exception,
        match=r"disque: bad TLS options: CA certificate "
        r"/nonexistent/ca.crt: No such file or directory",
    ):
        read("tlsCaCert", "/nonexistent/ca.crt")
    with pytest.raises(Exception, match="TLS handshake failed: certificate verify failed"):
        read("tls", "true")  # the system CAs: they do not know the test CA


def test_tls_options():
    assert _opt_tls({}) is None and _opt_tls({"tls": "false"}) is None
    assert _opt_tls({"TLS": "true"}).insecure is False  # options are case-insensitive
    assert _opt_tls({"tlsInsecure": "true"}).insecure is True  # implies tls
    with pytest.raises(DisqueError, match="'tls' is false but"):
        _opt_tls({"tls": "false", "tlsInsecure": "true"})
    with pytest.raises(DisqueError, match="private key /k given without a client certificate"):
        _opt_tls({"tlsKey": "/k"})
