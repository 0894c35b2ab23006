"""Prometheus metrics of a worker (``disque-worker --metrics-port``): jobs
processed, failed, retried and dead-lettered, and handler seconds, by queue and
task (a task's name; "" for a plain handler's job)."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

LABELS = ("queue", "task")


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        def counter(name: str, doc: str) -> Counter:
            return Counter(f"disque_worker_jobs_{name}", doc, LABELS, registry=registry)

        self.processed = counter("processed", "Jobs handled and acknowledged")
        self.failed = counter("failed", "Handler runs that raised")
        self.retried = counter("retried", "Failed jobs queued again (NACK)")
        self.dead_lettered = counter("dead_lettered", "Jobs moved to a dead-letter queue")
        self.dropped = counter("dropped", "Failing RETRY 0 jobs, never delivered again")
        self.timed_out = counter("timed_out", "Handler runs stopped at their time limit")
        self.handler_seconds = Histogram(
            "disque_worker_handler_seconds",
            "Time spent in handlers",
            LABELS,
            registry=registry,
        )
