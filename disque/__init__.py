"""disque: use Disque from Python (the ``disque-py-client`` distribution, which
``disque-py``, the node and its tools, depends on).

from disque import Client

with Client("127.0.0.1:7711", "127.0.0.1:7712") as client:
    job_id = client.add_job("emails", b'{"to": "ada@example.com"}', retry=60)
    for job in client.get_job("emails", timeout=1000):
        send(job.body)
        client.ack(job.id)
"""

from disque.aio import AsyncClient
from disque.client import Client
from disque.commands import parse_address
from disque.errors import (
    BadId,
    ConnectionLost,
    DisqueError,
    Leaving,
    MaxLen,
    NoAuth,
    NoJob,
    NoNodeAvailable,
    NoRepl,
    OutOfMemory,
    Paused,
    ReplyError,
)
from disque.job import Job
from disque.worker import Retry, Worker

__all__ = [
    "AsyncClient",
    "BadId",
    "Client",
    "ConnectionLost",
    "DisqueError",
    "Job",
    "Leaving",
    "MaxLen",
    "NoAuth",
    "NoJob",
    "NoNodeAvailable",
    "NoRepl",
    "OutOfMemory",
    "Paused",
    "ReplyError",
    "Retry",
    "Worker",
    "parse_address",
]
