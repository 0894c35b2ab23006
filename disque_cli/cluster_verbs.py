"""--cluster create, check, info and call (leave has its own module).

Each verb is `verb(parsed: VerbArgs) -> exit status`: 0 when everything went
well, 1 when a node was unreachable or a check failed (every finding is
printed first), as redis-cli --cluster does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from disque.protocol import server_kind
from disque_cli import commands
from disque_cli.cluster import (
    CLOSED,
    ID_PREFIX,
    NODE_TIMEOUT,
    Column,
    Member,
    NodeDown,
    Output,
    VerbArgs,
    VerbError,
    confirmed,
    discover,
    foreign_members,
    parse_address,
    resolve_ip,
    seed_address,
)
from disque_cli.render import Mode, RenderOptions, dumps, format_json, render
from disque_cli.replies import ErrorReply, Status
from disque_cli.waiting import waiting_jobs

CREATE_TIMEOUT = 30.0  # seconds for the mesh to complete
POLL = 0.1

NODE_COLUMNS = (
    Column("id", "ID"),
    Column("address", "Address"),
    Column("flags", "Flags"),
    Column("jobs", "Jobs", numeric=True),
    Column("queues", "Queues", numeric=True),
    Column("server", "Server"),
)


def node_row(member: Member, observer: Member | None = None) -> dict[str, Any]:
    """id, address, flags, jobs, queues, server: the flags as `observer` sees the node
    (the node's own flags, such as leaving, included)."""
    flags: set[str] = set()
    own = member.myself() if member.up else None
    if own is not None:
        flags |= own.flags
    if observer is not None and observer is not member:
        seen = next((entry for entry in observer.view if entry.id == member.id), None)
        if seen is not None:
            flags |= seen.flags
    flags -= {"myself", "noflags"}
    row: dict[str, Any] = {
        "id": (member.id or "?")[:ID_PREFIX],
        "address": member.label,
        "flags": ",".join(sorted(flags)) or "-",
        "jobs": member.number("registered_jobs") if member.up else None,
        "queues": member.number("registered_queues") if member.up else None,
        "server": server_kind(member.info) if member.up else None,
        "error": member.error,
    }
    return row


def json_rows(rows: list[dict[str, Any]], members: Sequence[Member]) -> list[dict[str, Any]]:
    """Rows for --json: full node IDs."""
    return [{**row, "id": member.id} for row, member in zip(rows, members, strict=True)]


def print_nodes(
    out: Output, members: Sequence[Member], title: str, observer: Member | None = None
) -> None:
    rows = [node_row(member, observer) for member in members]
    if out.mode is Mode.JSON:
        rows = json_rows(rows, members)
    out.table(NODE_COLUMNS, rows, title=title)


def refresh_all(out: Output, members: Sequence[Member], with_info: bool = True) -> int:
    """Refresh every member, one [ERR] line per unreachable one; return how many are up."""
    up = 0
    for member in members:
        if member.refresh(with_info):
            up += 1
        else:
            out.error(f"{member.name}: {member.error}")
    return up


def open_seed(
    parsed: VerbArgs, out: Output, usage: str, timeout: float = NODE_TIMEOUT
) -> list[Member] | None:
    """The seed node and the nodes it knows; None (after an [ERR]) if it is unreachable."""
    host, port = seed_address(parsed, usage)
    seed = parsed.member(host, port, timeout)
    if not seed.refresh():
        out.error(f"{seed.label}: {seed.error}")
        return None
    return discover(seed)


def on_seed(
    parsed: VerbArgs,
    out: Output,
    usage: str,
    run: Callable[[list[Member]], int],
    timeout: float = NODE_TIMEOUT,
) -> int:
    """``run`` on the seed and the nodes it knows (open_seed), their connections
    closed after, whatever happens; 1 when the seed cannot be reached."""
    members = open_seed(parsed, out, usage, timeout)
    if members is None:
        return 1
    try:
        return run(members)
    finally:
        for member in members:
            member.close()


# ---- create -------------------------------------------------------------------------


def cluster_create(parsed: VerbArgs) -> int:
    out = Output(parsed.mode)
    addresses = []
    for word in parsed.words:
        address = parse_address(word)
        if address is None:
            raise VerbError(f"Invalid address '{word}': expected host:port")
        if address not in addresses:
            addresses.append(address)
    if len(addresses) < 2:
        raise VerbError(
            "Usage: disque --cluster create host1:port1 host2:port2 ... (at least two nodes)"
        )
    timeout = CREATE_TIMEOUT if parsed.timeout is None else parsed.timeout
    members = [parsed.member(host, port) for host, port in addresses]
    try:
        return _create(out, members, timeout, parsed.yes)
    finally:
        for member in members:
            member.close()


def _create(out: Output, members: list[Member], timeout: float, yes: bool) -> int:
    out.title(f"Creating a cluster of {len(members)} nodes")
    if refresh_all(out, members) < len(members):
        out.error("Some nodes cannot be reached: no node was met.")
        return 1
    ids = [member.id for member in members]
    if len(set(ids)) < len(ids):
        out.error("Two addresses lead to the same node: no node was met.")
        return 1
    given = set(ids)
    merging = False
    for member in members:
        foreign = foreign_members(member, given)
        if foreign:
            merging = True
            out.warn(
                f"{member.name} already belongs to a cluster of {foreign + 1} nodes: "
                "creating this one merges them."
            )
    if merging and not confirmed(out, yes, "Merge the clusters?"):
        return 1
    first = members[0]
    for member in members[1:]:
        if any(entry.id == member.id for entry in first.view):
            continue
        if not meet(out, first, member):
            return 1
    out.line(
        f"{first.label} met {len(members) - 1} nodes; waiting for gossip to complete the mesh..."
    )
    if not mesh_complete(out, members, first, timeout):
        return 1
    out.ok(f"All {len(members)} nodes know and reach each other.")
    return 0


def meet(out: Output, first: Member, member: Member) -> bool:
    """CLUSTER MEET ``member`` on ``first``; False, after an [ERR], when that fails."""
    try:
        reply = first.call("CLUSTER", "MEET", resolve_ip(member.host), *meet_ports(member))
    except NodeDown as exc:
        out.error(f"{first.name}: {exc}")
        return False
    if isinstance(reply, ErrorReply):
        out.error(f"{first.name}: CLUSTER MEET {member.label}: {bytes(reply).decode()}")
        return False
    return True


def mesh_complete(out: Output, members: Sequence[Member], observer: Member, timeout: float) -> bool:
    """Wait for the full mesh (wait_mesh), then print the nodes as ``observer`` sees
    them; False, after the problems, when it is not complete within ``timeout``."""
    missing = wait_mesh(out, members, timeout)
    if missing:
        out.error(f"The mesh is not complete after {timeout:g}s:")
        for problem in missing:
            out.line(f"    {problem}")
        return False
    refresh_all(out, members)
    print_nodes(out, members, f"Cluster of {len(members)} nodes", observer=observer)
    return True


def meet_ports(member: Member) -> list[int]:
    """The ports to give CLUSTER MEET: the client port, and the bus port when the
    node says it is not port + 10000 (cluster-port, NAT), as redis-cli does.
    Over TLS the address given is the node's tls-port, while MEET wants its
    client port: the one the node lists for itself."""
    own = member.myself()
    if own is None or not own.port:
        return [member.port]
    port = member.port if member.tls is None else own.port
    return [port, own.bus_port] if own.bus_port else [port]


def mesh_problems(members: Sequence[Member]) -> list[str]:
    """What stops `members` from being a full mesh: each node must list every other
    one, out of handshake, with no failure flag and a connected link."""
    problems = []
    for member in members:
        if not member.refresh(with_info=False):
            problems.append(f"{member.name}: {member.error}")
            continue
        seen = {entry.id: entry for entry in member.view}
        for other in members:
            if other is member:
                continue
            entry = seen.get(other.id or "")
            if entry is None:
                problems.append(f"{member.label} does not know {other.name} yet")
            elif entry.failing:
                problems.append(
                    f"{member.label} flags {other.name} as {','.join(sorted(entry.failing))}"
                )
            elif entry.link != "connected":
                problems.append(f"{member.label} has no link to {other.name}")
    return problems


def wait_mesh(out: Output, members: Sequence[Member], timeout: float) -> list[str]:
    """Poll until the mesh is complete (return []) or `timeout` (return the problems)."""
    deadline = time.monotonic() + timeout if timeout else None
    status = None
    if out.live:
        status = out.console.status("Waiting for the full mesh...")
        status.start()
    try:
        while True:
            problems = mesh_problems(members)
            if not problems or (deadline is not None and time.monotonic() >= deadline):
                return problems
            if status is not None:
                status.update(f"Waiting for the full mesh: {problems[0]}")
            time.sleep(POLL)
    finally:
        if status is not None:
            status.stop()


# ---- check -------------------------------------------------------------------------------


def cluster_check(parsed: VerbArgs) -> int:
    out = Output(parsed.mode)
    timeout = parsed.timeout or NODE_TIMEOUT
    return on_seed(parsed, out, "check host:port", lambda members: _check(out, members), timeout)


def _check(out: Output, members: list[Member]) -> int:
    seed = members[0]
    out.title(f"Performing Cluster Check (using node {seed.label})")
    for member in members[1:]:
        member.refresh()
    findings: list[tuple[str, str]] = []
    down = [member for member in members if not member.up]
    for member in down:
        findings.append(("ERR", f"{member.name} is unreachable: {member.error}"))
    if not down:
        findings.append(("OK", f"All {len(members)} nodes are reachable."))
    up = [member for member in members if member.up]
    findings += _shared_addresses(members)
    findings += _compare_views(members, up)
    findings += _failure_flags(members, up)
    for member in up:
        for entry in member.view:
            if entry.handshake:
                findings.append(("WARN", f"{member.label} is in handshake with {entry.label}"))
            elif not entry.myself and entry.link != "connected" and not entry.failing:
                findings.append(
                    (
                        "WARN",
                        f"{member.label} has no link to {entry.label} right now (reconnecting)",
                    )
                )
    leaving = sorted(
        {
            member.name
            for member in up
            if (own := member.myself()) is not None and "leaving" in own.flags
        }
    )
    for name in leaving:
        findings.append(("WARN", f"{name} is leaving the cluster."))
    waiting = waiting_jobs(up)
    findings += waiting.findings()

    if out.mode is Mode.JSON:
        rows = json_rows([node_row(member, seed) for member in members], members)
        out.out.write(
            dumps(
                {
                    "healthy": not any(level == "ERR" for level, _ in findings),
                    "nodes": rows,
                    "findings": [{"level": level, "text": text} for level, text in findings],
                    "waiting": waiting.rows(),
                }
            )
            + "\n"
        )
        out.errors = sum(level == "ERR" for level, _ in findings)
    else:
        print_nodes(out, members, f"Cluster of {len(members)} nodes", observer=seed)
        for level, text in findings:
            out.finding(level, text)
    return 1 if out.errors else 0


def _shared_addresses(members: Sequence[Member]) -> list[tuple[str, str]]:
    """Two node IDs at one address: a node replaced on its port, the old ID still
    a member. Only the live one can be reached; the other must be forgotten."""
    findings = []
    by_label: dict[str, list[Member]] = {}
    for member in members:
        by_label.setdefault(member.label, []).append(member)
    for where, holders in by_label.items():
        if len(holders) < 2:
            continue
        gone = [member.id or "?" for member in holders if not member.up]
        ids = ", ".join((member.id or "?")[:ID_PREFIX] for member in holders)
        text = f"{where} is held by {len(holders)} node IDs ({ids})"
        if gone:
            text += (
                ": forget the one that is gone with `disque --cluster call "
                f"{members[0].label} cluster forget {gone[0]}`"
            )
        findings.append(("ERR", text))
    return findings


def _compare_views(members: Sequence[Member], up: Sequence[Member]) -> list[tuple[str, str]]:
    """Every reachable node must know the same members as the seed."""
    seed = members[0]
    reference = {member.id for member in members}
    names = {member.id: member.name for member in members}
    findings = []
    for member in up:
        known = {entry.id for entry in member.view if not entry.handshake}
        for node_id in sorted(reference - known, key=str):
            findings.append(("ERR", f"{member.label} does not know {names[node_id]}"))
        for node_id in sorted(known - reference):
            entry = next(entry for entry in member.view if entry.id == node_id)
            findings.append(
                (
                    "ERR",
                    f"{member.label} knows {entry.label} ({node_id[:ID_PREFIX]}),"
                    f" unknown to {seed.label}",
                )
            )
    if not findings and up:
        findings.append(("OK", f"All nodes agree about the cluster: {len(reference)} members."))
    return findings


def _failure_flags(members: Sequence[Member], up: Sequence[Member]) -> list[tuple[str, str]]:
    names = {member.id: member.name for member in members}
    flagged: dict[str, dict[str, list[str]]] = {}  # target -> flag -> observers
    for member in up:
        for entry in member.view:
            for flag in entry.failing:
                target = names.get(entry.id, f"{entry.label} ({entry.id[:ID_PREFIX]})")
                flagged.setdefault(target, {}).setdefault(flag, []).append(member.label)
    findings = []
    for target, flags in sorted(flagged.items()):
        for flag, observers in sorted(flags.items()):
            findings.append(
                ("ERR", f"{target} is flagged {flag.upper()} by {', '.join(observers)}")
            )
    if not flagged and up:
        findings.append(("OK", "No node is flagged PFAIL or FAIL."))
    return findings


# ---- info -----------------------------------------------------------------------------

INFO_COLUMNS = (
    Column("id", "ID"),
    Column("address", "Address"),
    Column("flags", "Flags"),
    Column("jobs", "Jobs", numeric=True),
    Column("queues", "Queues", numeric=True),
    Column("unqueued", "Unqueued", numeric=True),
    Column("clients", "Clients", numeric=True),
    Column("blocked", "Blocked", numeric=True),
    Column("memory", "Memory", numeric=True),
    Column("ops_per_sec", "Ops/s", numeric=True),
    Column("leaving", "Leaving"),
)


def cluster_info(parsed: VerbArgs) -> int:
    out = Output(parsed.mode)
    members = open_seed(parsed, out, "info host:port", parsed.timeout or NODE_TIMEOUT)
    if members is None:
        return 1
    try:
        for member in members[1:]:
            member.refresh()
        # Jobs each node holds that no node has queued (waiting.py): QLEN misses them.
        unqueued = waiting_jobs([m for m in members if m.up]).by_node
        rows = []
        seed = members[0]
        for member in members:
            own = member.myself() if member.up else None
            rows.append(
                {
                    "id": member.id if out.mode is Mode.JSON else (member.id or "?")[:ID_PREFIX],
                    "address": member.label,
                    # As the seed sees the node (pfail, fail, leaving): a dead node's row
                    # says why it has no figures.
                    "flags": node_row(member, seed)["flags"],
                    "jobs": member.number("registered_jobs") if member.up else None,
                    "queues": member.number("registered_queues") if member.up else None,
                    "unqueued": unqueued.get(member.label, 0) if member.up else None,
                    "clients": member.number("connected_clients") if member.up else None,
                    "blocked": member.number("blocked_clients") if member.up else None,
                    # Bytes for programs, as redis-cli --cluster info would print them for people.
                    "memory": (
                        member.number("used_memory")
                        if out.mode in (Mode.JSON, Mode.CSV)
                        else member.info.get("used_memory_human")
                    )
                    if member.up
                    else None,
                    "ops_per_sec": member.number("instantaneous_ops_per_sec")
                    if member.up
                    else None,
                    "leaving": ("leaving" in own.flags) if own is not None else None,
                    "error": member.error,
                }
            )
        up = [row for row in rows if row["error"] is None]
        footer = {
            "address": "total",
            "jobs": sum(row["jobs"] for row in up),
            "queues": sum(row["queues"] for row in up),
            "unqueued": sum(row["unqueued"] for row in up),
            "clients": sum(row["clients"] for row in up),
            "blocked": sum(row["blocked"] for row in up),
            "ops_per_sec": sum(row["ops_per_sec"] for row in up),
        }
        out.table(
            INFO_COLUMNS,
            rows,
            title=f"Cluster of {len(members)} nodes (seen from {members[0].label})",
            footer=footer,
        )
        for member in members:
            if not member.up:
                out.error(f"{member.name}: {member.error}")
        return 1 if out.errors else 0
    finally:
        for member in members:
            member.close()


# ---- call ------------------------------------------------------------------------------


def cluster_call(parsed: VerbArgs) -> int:
    out = Output(parsed.mode)
    usage = "call host:port command arg arg .. arg"

    def run(members: list[Member]) -> int:
        # The command's words are not options: take the address, leave the rest alone.
        if not parsed.words:
            raise VerbError(f"Usage: disque --cluster {usage}")
        return _call(out, parsed, members)

    return on_seed(parsed, out, usage, run)


def _call(out: Output, parsed: VerbArgs, members: list[Member]) -> int:
    argv = [word.encode("utf-8", errors="surrogateescape") for word in parsed.words]
    entry = commands.resolve(parsed.words)
    verbatim, shape = bool(entry and entry.verbatim), (entry.json if entry else None)
    options = RenderOptions(
        mode=parsed.mode,
        mb_delim=(parsed.config.mb_delim or "\n").encode(),
        cmd_delim=(parsed.config.cmd_delim or "\n").encode(),
    )
    name = parsed.words[0].lower()
    # Each reply within NODE_TIMEOUT, as for the other verbs (a paused node does not
    # hang the call); a command that blocks (GETJOB) asks for more: --timeout 0.
    for member in members:
        member.session.close()
        member.timeout = NODE_TIMEOUT if parsed.timeout is None else parsed.timeout or None
        member.session.reply_timeout = member.timeout
    if out.mode is not Mode.JSON:
        out.title(f"Calling {' '.join(parsed.words)} on {len(members)} nodes")
    saw_error_reply = False
    for member in members:
        try:
            reply = member.call(*argv)
        except NodeDown as exc:
            if name == "shutdown" and str(exc) == CLOSED:
                reply = Status(b"OK (the node shut down)")
            else:
                out.error(f"{member.name}: {exc}")
                continue
        saw_error_reply |= isinstance(reply, ErrorReply)
        if out.mode is Mode.JSON:
            value = json.loads(format_json(reply, shape).decode("utf-8"))
            out.out.write(dumps({"node": member.label, "id": member.id, "reply": value}) + "\n")
            out.out.flush()
            continue
        text = render(reply, options, verbatim=verbatim, shape=shape).decode(
            "utf-8", errors="replace"
        )
        body = text.rstrip("\n")
        if out.mode is Mode.CSV:
            out.out.write(f"{member.label},{body}\n")
        elif "\n" in body or verbatim:
            out.line(f"{member.label}:", "bold cyan")
            out.out.write(body + "\n")
        else:
            out.out.write(f"{member.label}: {body}\n")
        out.out.flush()
    if out.errors or (parsed.config.exit_on_error and saw_error_reply):
        return 1
    return 0
