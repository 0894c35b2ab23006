"""INFO [section]: the sections and field names of Disque 1.0-rc1.

The default sections and ``all`` list exactly Disque's fields; ``latency``
is an extra section shown only when asked for by name.
"""

from __future__ import annotations

import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from disque_server import BUILD_ID, DISQUE_VERSION
from disque_server.commands import commands_processed
from disque_server.memory import rss_bytes

if TYPE_CHECKING:
    from disque_server.client import Client
    from disque_server.state import NodeState


def human_bytes(n: float) -> str:
    for unit in ("B", "K", "M", "G", "T"):
        if n < 1024 or unit == "T":
            return f"{n:.2f}{unit}" if unit != "B" else f"{int(n)}B"
        n /= 1024
    return str(n)


def section_server(s: NodeState) -> list[str]:
    uptime = int(time.time() - s.start_time)
    uname = platform.uname()
    return [
        f"disque_version:{DISQUE_VERSION}",
        "disque_git_sha1:00000000",
        "disque_git_dirty:0",
        # Disque 1.0-rc1's fields, no more (the recorded replies are replayed field by
        # field, and INFO parsers see what they know): the interpreter is named in
        # the build ID (and whether mypyc compiled the node), and gcc_version is 0.0.0, as Redis and Disque report it when
        # no GCC built them.
        f"disque_build_id:{BUILD_ID}",
        f"os:{uname.system} {uname.release} {uname.machine}",
        f"arch_bits:{64 if sys.maxsize > 2**32 else 32}",
        "multiplexing_api:" + ("epoll" if sys.platform.startswith("linux") else "kqueue"),
        "gcc_version:0.0.0",
        f"process_id:{os.getpid()}",
        f"run_id:{s.run_id}",
        f"tcp_port:{s.config['port']}",
        f"uptime_in_seconds:{uptime}",
        f"uptime_in_days:{uptime // 86400}",
        f"hz:{s.config['hz']}",
        f"executable:{os.path.abspath(sys.argv[0])}",
        f"config_file:{s.config.file or ''}",
    ] + ([f"unixsocket:{s.config['unixsocket']}"] if s.config["unixsocket"] else [])


def section_clients(s: NodeState) -> list[str]:
    clients = list(s.clients)
    return [
        f"connected_clients:{len(clients)}",
        f"client_longest_output_list:{max((len(c.out) for c in clients), default=0)}",
        f"client_biggest_input_buf:{max((c.requests.buffered() for c in clients), default=0)}",
        f"blocked_clients:{s.stats.blocked_clients}",
    ]


def section_memory(s: NodeState) -> list[str]:
    m = s.memory
    s.eviction.sample_buffers()
    s.jobs.refresh_memory()
    rss = rss_bytes()
    return [
        f"used_memory:{m.used}",
        f"used_memory_human:{human_bytes(m.used)}",
        f"used_memory_rss:{rss}",
        f"used_memory_peak:{m.peak}",
        f"used_memory_peak_human:{human_bytes(m.peak)}",
        f"mem_fragmentation_ratio:{rss / max(m.used, 1):.2f}",
        "mem_allocator:pymalloc",
    ]


def section_jobs(s: NodeState) -> list[str]:
    return [f"registered_jobs:{len(s.jobs)}"]


def section_queues(s: NodeState) -> list[str]:
    return [f"registered_queues:{len(s.queues)}"]


def section_persistence(s: NodeState) -> list[str]:
    return s.aof.info_fields()


def section_stats(s: NodeState) -> list[str]:
    st = s.stats
    return [
        f"total_connections_received:{st.connections_received}",
        f"total_commands_processed:{commands_processed(s.command_list)}",
        f"instantaneous_ops_per_sec:{int(st.rate(1))}",
        f"total_net_input_bytes:{st.net_input_bytes}",
        f"total_net_output_bytes:{st.net_output_bytes}",
        f"instantaneous_input_kbps:{st.rate(2) / 1024:.2f}",
        f"instantaneous_output_kbps:{st.rate(3) / 1024:.2f}",
        f"rejected_connections:{st.rejected_connections}",
        "latest_fork_usec:0",
    ]


def section_cpu(s: NodeState) -> list[str]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return [
        f"used_cpu_sys:{me.ru_stime:.2f}",
        f"used_cpu_user:{me.ru_utime:.2f}",
        f"used_cpu_sys_children:{kids.ru_stime:.2f}",
        f"used_cpu_user_children:{kids.ru_utime:.2f}",
    ]


def section_commandstats(s: NodeState) -> list[str]:
    lines = []
    for cmd in s.command_list:
        if cmd.calls:
            usec = int(cmd.usec * 1e6)
            lines.append(
                f"cmdstat_{cmd.name}:calls={cmd.calls},usec={usec},"
                f"usec_per_call={usec / cmd.calls:.2f}"
            )
    return lines


def section_latency(s: NodeState) -> list[str]:
    return [
        f"event_loop_max_stall_ms:{s.latency.max_stall_ms}",
        f"slowlog_len:{len(s.slowlog.entries)}",
    ]


SECTIONS: Final[dict[str, Callable[[NodeState], list[str]]]] = {
    "server": section_server,
    "clients": section_clients,
    "memory": section_memory,
    "jobs": section_jobs,
    "queues": section_queues,
    "persistence": section_persistence,
    "stats": section_stats,
    "cpu": section_cpu,
    "commandstats": section_commandstats,
}


def section_timers(s: NodeState) -> list[str]:
    return [
        *s.jobs.timer_fields(),
        f"cron_ticks:{s.stats.cron_ticks}",
        f"cron_ticks_coalesced:{s.stats.cron_ticks_coalesced}",
    ]


# Beyond Disque, shown only when asked for by name (INFO latency, INFO timers).
EXTRA_SECTIONS: Final[dict[str, Callable[[NodeState], list[str]]]] = {
    "latency": section_latency,
    "timers": section_timers,
}
DEFAULT: Final = [name for name in SECTIONS if name != "commandstats"]


def info_text(s: NodeState, which: str = "default") -> str:
    which = which.lower()
    if which in ("default", ""):
        names = DEFAULT
    elif which in ("all", "everything"):
        names = list(SECTIONS)
    elif which in SECTIONS or which in EXTRA_SECTIONS:
        names = [which]
    else:
        return ""
    parts = []
    for name in names:
        render = SECTIONS.get(name) or EXTRA_SECTIONS[name]
        title = "CPU" if name == "cpu" else name.capitalize()
        parts.append("\r\n".join([f"# {title}", *render(s)]) + "\r\n")
    return "\r\n".join(parts)


def info_command(c: Client, argv: list[bytes]) -> None:
    if len(argv) > 2:
        c.reply(b"-ERR syntax error\r\n")
        return
    which = argv[1].decode(errors="replace") if len(argv) == 2 else "default"
    c.reply_value(info_text(c.server, which).encode())
