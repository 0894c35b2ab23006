"""OpenTelemetry tracing for tasks and workers: the trace follows the call from
the producer through Disque to the worker.

    from disque.opentelemetry import Tracing

    tasks = Tasks("127.0.0.1:7711", middleware=[Tracing()])

(``pip install 'disque-py-client[opentelemetry]'``: opentelemetry-api; an SDK and an
exporter are the application's choice, as always with OpenTelemetry.)

* Producer: each call sent gets a ``<task> send`` span (kind PRODUCER), whose
  context is written into the message's ``meta`` with the global propagator
  (W3C ``traceparent`` by default), so a worker in any language can go on.
* Worker: each run gets a ``<task> process`` span (kind CONSUMER), child of
  the producer's, current while the handler runs (a sync handler: its
  thread), with the messaging attributes (system ``disque``, the queue, the
  job ID, the delivery count); a failure is recorded on it with its
  exception. Plain handlers (``Worker(middleware=[Tracing()])``) get a
  ``<queue> process`` span with no parent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opentelemetry import context, propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from disque.middleware import Middleware

if TYPE_CHECKING:
    from disque.tasks.message import Message
    from disque.worker import Call

SPAN = "otel.span"
TOKEN = "otel.token"


class Tracing(Middleware):
    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.tracer = trace.get_tracer("disque", tracer_provider=tracer_provider)

    def before_send(self, message: Message) -> None:
        with self.tracer.start_as_current_span(
            f"{message.task} send", kind=SpanKind.PRODUCER
        ) as span:
            span.set_attribute("messaging.system", "disque")
            span.set_attribute("messaging.message.id", message.id)
            propagate.inject(message.meta)

    def before(self, call: Call) -> None:
        meta: dict[str, str] = call.message.meta if call.message is not None else {}
        parent = propagate.extract(meta)
        span = self.tracer.start_span(
            f"{call.name} process", context=parent, kind=SpanKind.CONSUMER
        )
        job = call.job
        span.set_attribute("messaging.system", "disque")
        span.set_attribute("messaging.destination.name", job.queue)
        span.set_attribute("messaging.message.id", job.id)
        span.set_attribute(
            "messaging.message.delivery_count", job.nacks + job.additional_deliveries + 1
        )
        call.state[SPAN] = span
        call.state[TOKEN] = context.attach(trace.set_span_in_context(span))

    def after(self, call: Call, result: Any) -> None:
        self.finish(call, None)

    def on_failure(self, call: Call, exc: BaseException) -> None:
        self.finish(call, exc)

    def on_retry(self, call: Call, exc: BaseException, delay: int) -> None:
        self.finish(call, exc)  # (a Retry the handler asked for: no on_failure before)

    def on_dead_letter(self, call: Call, exc: BaseException, queue: str) -> None:
        self.finish(call, exc)

    def finish(self, call: Call, exc: BaseException | None) -> None:
        span = call.state.pop(SPAN, None)
        if span is None:
            return
        if exc is None:
            span.set_status(Status(StatusCode.OK))
        else:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()
        token = call.state.pop(TOKEN, None)
        if token is not None:
            try:
                context.detach(token)
            except ValueError:  # detached in another thread than attached: harmless
                pass
