"""Tasks: functions called through Disque (app.py; one task and its options:
task.py), their message format (message.py), a call run by a worker (run.py),
results and their state (results.py, store.py), workflows (canvas.py), revoke
and unique calls (revoke.py), rate limits (ratelimit.py), periodic tasks
(periodic.py), a census of the calls in a cluster (census.py) and a stub mode
for tests (stub.py)."""

from disque.tasks.app import Tasks
from disque.tasks.canvas import ChordFailed, chain, chord, group
from disque.tasks.message import BadMessage, Message
from disque.tasks.results import NoResult, Result, ResultTimeout, TaskFailed
from disque.tasks.revoke import AlreadyQueued
from disque.tasks.stub import StubFailure
from disque.tasks.task import SendFailed, Task, TaskOptions, UnknownTask

__all__ = [
    "AlreadyQueued",
    "BadMessage",
    "ChordFailed",
    "Message",
    "NoResult",
    "Result",
    "ResultTimeout",
    "SendFailed",
    "StubFailure",
    "Task",
    "TaskFailed",
    "TaskOptions",
    "Tasks",
    "UnknownTask",
    "chain",
    "chord",
    "group",
]
