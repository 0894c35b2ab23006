"""Tasks: functions called through Disque (app.py), their message format
(message.py), results (results.py), periodic tasks (periodic.py) and a stub
mode for tests (stub.py)."""

from disque.tasks.app import SendFailed, Task, TaskOptions, Tasks, UnknownTask
from disque.tasks.message import BadMessage, Message
from disque.tasks.results import NoResult, Result, ResultTimeout, TaskFailed
from disque.tasks.stub import StubFailure

__all__ = [
    "BadMessage",
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
]
