"""The command table: name -> (handler, arity, flags), as Disque's server.c.

Negative arity means "at least". Handlers are ``<name>_command(client,
argv)`` in the module of their family:

- ``addjob``   ADDJOB
- ``getjob``   GETJOB
- ``jobs_by_id`` ACKJOB FASTACK DELJOB SHOW WORKING NACK ENQUEUE DEQUEUE LOADJOB
- ``queues``   QLEN QSTAT QPEEK PAUSE
- ``scan``     QSCAN JSCAN
- ``info``     INFO
- ``admin``    PING TIME AUTH HELLO CONFIG CLIENT SLOWLOG COMMAND LATENCY
               DEBUG SHUTDOWN MONITOR BGREWRITEAOF
- ``cluster``  CLUSTER
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

# The commands of a job's life, which dispatch calls by name instead of through
# ``handler``: a compiled call of a known function is a C call, a call through the
# attribute goes by the Python calling convention (argument tuple, wrapper).
HOT_NONE: Final = 0
HOT_ADDJOB: Final = 1
HOT_GETJOB: Final = 2
HOT_ACKJOB: Final = 3
_HOT: Final = {"addjob": HOT_ADDJOB, "getjob": HOT_GETJOB, "ackjob": HOT_ACKJOB}


@dataclass(eq=False)
class Command:
    name: str
    handler: Callable[[Any, list[bytes]], None]
    arity: int
    flags: tuple[str, ...]
    calls: int = 0
    usec: float = 0.0
    name_bytes: bytes = field(default=b"", repr=False)
    # The flags dispatch looks at for every command, as plain attributes.
    denyoom: bool = field(default=False, init=False, repr=False)
    write: bool = field(default=False, init=False, repr=False)
    noauth: bool = field(default=False, init=False, repr=False)
    # Disque's "fast" flag (O(1), or O(N) in its arguments): dispatch times a streak of
    # one such command as a whole (Server.end_streak).
    fast: bool = field(default=False, init=False, repr=False)
    # The arity as the range of argument counts dispatch accepts.
    min_argc: int = field(default=0, init=False, repr=False)
    max_argc: int = field(default=0, init=False, repr=False)
    hot: int = field(default=HOT_NONE, init=False, repr=False)  # see HOT_ADDJOB

    def __post_init__(self) -> None:
        self.name_bytes = self.name.encode()
        self.min_argc = abs(self.arity)
        # (1 << 30: past any request's argument count, and a small int for compiled
        # code; 1 << 62 is a boxed int there, compared through PyObject_RichCompare)
        self.max_argc = self.arity if self.arity > 0 else 1 << 30
        self.denyoom = "denyoom" in self.flags
        self.write = "write" in self.flags
        self.noauth = "noauth" in self.flags
        self.fast = "fast" in self.flags
        self.hot = _HOT.get(self.name, HOT_NONE)


def _spec() -> list[tuple[str, Callable, int, str]]:
    from disque_server.commands import (
        addjob,
        admin,
        cluster,
        getjob,
        info,
        jobs_by_id,
        queues,
        scan,
    )

    # The order is Disque's: INFO commandstats lists commands in this order.
    return [
        ("auth", admin.auth_command, 2, "noscript loading stale fast noauth"),
        ("ping", admin.ping_command, -1, "readonly stale"),
        ("info", info.info_command, -1, "readonly loading stale"),
        ("time", admin.time_command, 1, "readonly random fast"),
        ("hello", admin.hello_command, -1, "readonly fast noauth"),
        ("addjob", addjob.addjob_command, -4, "write denyoom fast"),
        ("getjob", getjob.getjob_command, -2, "write fast"),
        ("ackjob", jobs_by_id.ackjob_command, -1, "write fast"),
        ("fastack", jobs_by_id.fastack_command, -1, "write fast"),
        ("deljob", jobs_by_id.deljob_command, -1, "write fast"),
        ("show", jobs_by_id.show_command, 2, "readonly fast"),
        ("qlen", queues.qlen_command, 2, "readonly fast"),
        ("qpeek", queues.qpeek_command, 3, "readonly fast"),
        ("qstat", queues.qstat_command, 2, "readonly fast"),
        ("qscan", scan.qscan_command, -1, "readonly"),
        ("jscan", scan.jscan_command, -1, "readonly"),
        ("enqueue", jobs_by_id.enqueue_command, -1, "write denyoom fast"),
        ("nack", jobs_by_id.nack_command, -1, "write denyoom fast"),
        ("dequeue", jobs_by_id.dequeue_command, -1, "write fast"),
        ("working", jobs_by_id.working_command, 2, "write fast"),
        ("pause", queues.pause_command, -3, "readonly fast"),
        ("loadjob", jobs_by_id.loadjob_command, 2, "write"),
        ("config", admin.config_command, -2, "admin readonly stale"),
        ("cluster", cluster.cluster_command, -2, "admin readonly"),
        ("client", admin.client_command, -2, "admin readonly"),
        ("slowlog", admin.slowlog_command, -2, "readonly"),
        ("command", admin.command_command, 0, "readonly loading stale"),
        ("latency", admin.latency_command, -2, "admin noscript loading stale"),
        ("debug", admin.debug_command, -2, "admin noscript"),
        ("shutdown", admin.shutdown_command, -1, "admin loading stale"),
        ("monitor", admin.monitor_command, 1, "admin noscript"),
        ("bgrewriteaof", admin.bgrewriteaof_command, 1, "admin readonly"),
    ]


def build_table() -> dict[bytes, Command]:
    """Lower- and upper-case names both map to the command: no lower() on the hot path."""
    table: dict[bytes, Command] = {}
    for name, handler, arity, flags in _spec():
        cmd = Command(name, handler, arity, tuple(flags.split()))
        table[name.encode()] = cmd
        table[name.upper().encode()] = cmd
    return table


def commands_processed(command_list: list[Command]) -> int:
    """total_commands_processed: every command run, counted by command."""
    return sum(cmd.calls for cmd in command_list)
