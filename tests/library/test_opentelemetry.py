"""OpenTelemetry (disque/opentelemetry.py) on a real node: the trace goes from the
producer's send span, through the message's meta, to the worker's process span;
a failure is recorded on it."""

from __future__ import annotations

import threading

import pytest

from testkit.nodes import Node, wait_for

otel = pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from disque.opentelemetry import Tracing  # noqa: E402
from disque.tasks import TaskFailed, Tasks  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def test_a_call_is_one_trace_from_producer_to_worker(node: Node) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tasks = Tasks(f"127.0.0.1:{node.port}", middleware=[Tracing(provider)])

    @tasks.task(name="shop.ship", queue="ship", result=True)
    def ship(order: int) -> str:
        return f"shipped {order}"

    @tasks.task(name="shop.lose", queue="ship", result=True, max_attempts=1)
    def lose(order: int) -> None:
        raise LookupError(f"no order {order}")

    shipped, lost = ship.send(1), lose.send(2)
    worker = tasks.worker(fetch_timeout_ms=200)
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    try:
        assert shipped.get(timeout=20) == "shipped 1"
        with pytest.raises(TaskFailed):
            lost.get(timeout=20)
        wait_for(lambda: len(exporter.get_finished_spans()) == 4, timeout=10, message="4 spans")
    finally:
        worker.stop()
        thread.join(timeout=20)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    send, process = spans["shop.ship send"], spans["shop.ship process"]
    assert (send.kind, process.kind) == (SpanKind.PRODUCER, SpanKind.CONSUMER)
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert process.context.trace_id == send.context.trace_id
    assert process.attributes["messaging.destination.name"] == "ship"
    assert process.attributes["messaging.message.id"] == shipped.job_id
    assert process.status.status_code == StatusCode.OK
    failed = spans["shop.lose process"]
    assert failed.status.status_code == StatusCode.ERROR
    assert [event.name for event in failed.events] == ["exception"]
    assert failed.context.trace_id == spans["shop.lose send"].context.trace_id
