"""--cluster restart: stop one node, start it again (or a new version), and wait
until the cluster sees it and its queues are back.

    disque --cluster restart 10.0.0.1:7711 --start "systemctl start disque@7711"

1. Check: every other node up and not failing (a restart must not take the
   last copy of a job away while another node is down), and the node's jobs
   survive the restart: `appendonly yes`, or nothing held (else refused
   unless --yes: its jobs would come back only from copies elsewhere).
2. Stop it cleanly: SHUTDOWN (a node of ours writes its snapshot and queues
   its jobs again as it starts: restart.py); a C Disque node gets SHUTDOWN
   REWRITE-AOF, and queues them again only with `aof-enqueue-jobs-once yes`
   in its config file (said when not).
3. Start it with --start's shell command (an upgrade: the new version's), or
   wait for its supervisor (systemd's Restart=) to do it.
4. Wait until it answers with its own ID, every other node links to it with
   no failure flag, and the jobs queued before are queued again.
"""

from __future__ import annotations

import subprocess
import time

from disque.protocol import server_kind
from disque_cli.cluster import (
    CLOSED,
    Member,
    NodeDown,
    Output,
    VerbArgs,
    accepting,
    confirmed,
    open_target,
    plural,
    queue_lengths,
)
from disque_cli.cluster_verbs import mesh_problems
from disque_cli.replies import ErrorReply

USAGE = "restart host:port [--start COMMAND] [--yes] [--timeout SECS]"
START_TIMEOUT = 60.0  # seconds for the node to answer again and the cluster to see it
POLL = 0.1


def cluster_restart(parsed: VerbArgs) -> int:
    out = Output(parsed.mode)
    members = open_target(parsed, out, USAGE)
    if members is None:
        return 1
    try:
        return restart(out, parsed, members)
    finally:
        for member in members:
            member.close()


def restart(out: Output, parsed: VerbArgs, members: list[Member]) -> int:
    target, others = members[0], members[1:]
    kind = server_kind(target.info)
    if not ready(out, parsed, target, others, kind):
        return 1
    queued = sum(queue_lengths(target).values())
    out.title(f"Restarting {target.name} ({plural(queued, 'queued job')})")
    if not confirmed(out, parsed.yes, f"Restart {target.label}?"):
        return 1
    if not stop(out, target, kind):
        return 1
    if parsed.start:
        out.line(f"Starting: {parsed.start}")
        subprocess.Popen(  # (its own session: it outlives this command)
            ["sh", "-c", parsed.start],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    else:
        out.line(f"Waiting for {target.label} to be started again (by its supervisor)...")
    timeout = START_TIMEOUT if parsed.timeout is None else parsed.timeout or None
    deadline = None if timeout is None else time.monotonic() + timeout
    if not back(out, target, deadline) or not seen(out, members, deadline):
        return 1
    return requeued(out, target, queued, deadline)


def ready(out: Output, parsed: VerbArgs, target: Member, others: list[Member], kind: str) -> bool:
    """Step 1: the others up and not failing; the node's jobs safe across a restart."""
    problems = []
    for member in others:
        if not member.refresh(with_info=False):
            problems.append(f"{member.name} is unreachable: {member.error}")
    for entry in target.view:
        if entry.failing and not entry.myself:
            problems.append(f"{entry.label} is flagged {','.join(sorted(entry.failing))}")
    jobs = target.number("registered_jobs")
    appendonly = config_value(target, "appendonly")
    if jobs and appendonly != "yes":
        problems.append(
            f"{target.label} has appendonly {appendonly or '?'}: the {plural(jobs, 'job')} it "
            "holds would come back only from their copies on other nodes, after their "
            "RETRY, and those it alone holds would be lost. Turn it on (CONFIG SET "
            "appendonly yes) or move them first (--cluster leave)"
        )
    if (
        kind == "C"
        and appendonly == "yes"
        and config_value(target, "aof-enqueue-jobs-once") != "yes"
    ):
        out.warn(
            f"{target.label} is a C Disque node without aof-enqueue-jobs-once yes in its "
            "config file: its queued jobs come back after their RETRY (docs/upgrade.md)."
        )
    for problem in problems:
        out.error(problem)
    if problems and not parsed.yes:
        out.line("Nothing was changed (--yes restarts it all the same).")
        return False
    return True


def config_value(member: Member, name: str) -> str:
    try:
        reply = member.call("CONFIG", "GET", name)
    except NodeDown:
        return ""
    if isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], bytes):
        return reply[1].decode(errors="replace")
    return ""


def stop(out: Output, target: Member, kind: str) -> bool:
    """Step 2: SHUTDOWN (REWRITE-AOF for C Disque), then wait for the port to close."""
    command = ("SHUTDOWN", "REWRITE-AOF") if kind == "C" else ("SHUTDOWN",)
    try:
        reply = target.call(*command)
    except NodeDown as exc:
        if str(exc) != CLOSED:
            out.error(f"{target.name}: {' '.join(command)}: {exc}")
            return False
        reply = None
    if isinstance(reply, ErrorReply):
        out.error(f"{target.name}: {' '.join(command)}: {bytes(reply).decode(errors='replace')}")
        return False
    target.close()
    deadline = time.monotonic() + 30
    while accepting(target) and time.monotonic() < deadline:
        time.sleep(POLL)
    if accepting(target):
        out.error(f"{target.label} still accepts connections 30s after {' '.join(command)}.")
        return False
    out.ok(f"{target.label} stopped ({' '.join(command)}).")
    return True


def back(out: Output, target: Member, deadline: float | None) -> bool:
    """Step 3: the node answers again, with its own ID."""
    node_id = target.id
    target.id = None  # (refresh would take another ID for a replaced node, and fail)
    while True:
        if target.refresh():
            if target.id == node_id:
                out.ok(f"{target.name} answers again, with its own ID.")
                return True
            out.error(
                f"{target.label} answers as another node ({(target.id or '?')[:8]}): was it "
                "started on another directory? Its old ID stays in the cluster."
            )
            return False
        if deadline is not None and time.monotonic() > deadline:
            out.error(f"{target.label} does not answer: {target.error}")
            return False
        time.sleep(POLL)


def seen(out: Output, members: list[Member], deadline: float | None) -> bool:
    """Step 4: every node links to it, none flags it failing."""
    while True:
        problems = mesh_problems(members)
        if not problems:
            out.ok(f"All {len(members)} nodes see each other again.")
            return True
        if deadline is not None and time.monotonic() > deadline:
            for problem in problems:
                out.error(problem)
            return False
        time.sleep(POLL)


def requeued(out: Output, target: Member, before: int, deadline: float | None) -> int:
    """Step 4, the queues: as many jobs queued as before the stop (within a few
    seconds: a job shared with other owners is queued a second after the start)."""
    soon = time.monotonic() + 5
    while True:
        now_queued = sum(queue_lengths(target).values())
        if now_queued >= before:
            out.ok(
                f"{target.label} restarted: {plural(now_queued, 'job')} queued ({before} before)."
            )
            return 0
        if time.monotonic() > soon or (deadline is not None and time.monotonic() > deadline):
            out.warn(
                f"{target.label} restarted, {plural(now_queued, 'job')} queued of {before} "
                "before: the others wait for their RETRY (--cluster check lists them)."
            )
            return 0
        time.sleep(POLL)
