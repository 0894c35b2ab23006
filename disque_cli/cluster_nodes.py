"""--cluster add-node, del-node and set-timeout: a node's life, as redis-cli 7's.

    add-node new:port existing:port   CLUSTER MEET, then wait for the mesh; a new
                                      node that belongs to another cluster is a
                                      merge, done only when confirmed (--yes)
    del-node host:port node-id        CLUSTER FORGET a dead node on every reachable
                                      node, by its full ID or a unique prefix (the
                                      8 characters the tables show); a node that
                                      is up goes with `leave`, which moves its jobs
    set-timeout host:port ms          cluster-node-timeout on every node
                                      (CONFIG SET, then CONFIG REWRITE)

Each is `verb(parsed: VerbArgs) -> exit status`, as in cluster_verbs.py.
"""

from __future__ import annotations

from disque_cli.cluster import (
    ID_PREFIX,
    Member,
    NodeDown,
    Output,
    VerbArgs,
    VerbError,
    confirmed,
    foreign_members,
    parse_address,
    plural,
)
from disque_cli.cluster_verbs import (
    CREATE_TIMEOUT,
    meet,
    mesh_complete,
    on_seed,
    open_seed,
)
from disque_cli.replies import ErrorReply

# ---- add-node -------------------------------------------------------------------------

ADD_USAGE = "add-node new_host:new_port existing_host:existing_port [--yes] [--timeout SECS]"


def cluster_add_node(parsed: VerbArgs) -> int:
    addresses = [parse_address(word) for word in parsed.words]
    if len(addresses) != 2 or None in addresses:
        raise VerbError(f"Usage: disque --cluster {ADD_USAGE}")
    (new_host, new_port), (host, port) = addresses  # type: ignore[misc]
    out = Output(parsed.mode)
    new = parsed.member(new_host, new_port)
    existing = open_seed(VerbArgs([f"{host}:{port}"], parsed.config), out, ADD_USAGE)
    if existing is None:
        new.close()
        return 1
    try:
        return _add_node(out, parsed, new, existing)
    finally:
        new.close()
        for member in existing:
            member.close()


def _add_node(out: Output, parsed: VerbArgs, new: Member, cluster: list[Member]) -> int:
    seed = cluster[0]
    out.title(f"Adding node {new.label} to the cluster of {seed.label}")
    if not new.refresh():
        out.error(f"{new.label}: {new.error}")
        return 1
    ids = {member.id for member in cluster}
    if new.id in ids:
        out.ok(f"{new.name} is a member already.")
        return 0
    foreign = foreign_members(new, ids)
    if foreign:
        out.warn(
            f"{new.name} belongs to another cluster of {foreign + 1} nodes, holding "
            f"{plural(new.number('registered_jobs'), 'job')}: adding it merges the two "
            "clusters."
        )
        if not confirmed(out, parsed.yes, "Merge the two clusters?"):
            return 1
    if not meet(out, seed, new):
        return 1
    members = [*cluster, new]
    timeout = CREATE_TIMEOUT if parsed.timeout is None else parsed.timeout
    out.line(f"{seed.label} met {new.label}; waiting for gossip to complete the mesh...")
    if not mesh_complete(out, members, seed, timeout):
        return 1
    out.ok(f"{new.name} joined: all {len(members)} nodes know and reach each other.")
    return 0


# ---- del-node -------------------------------------------------------------------------

DEL_USAGE = "del-node host:port node_id [--yes]"


def cluster_del_node(parsed: VerbArgs) -> int:
    out = Output(parsed.mode)

    def run(members: list[Member]) -> int:
        if len(parsed.words) != 1:
            raise VerbError(f"Usage: disque --cluster {DEL_USAGE}")
        return _del_node(out, parsed, members, parsed.words[0])

    return on_seed(parsed, out, DEL_USAGE, run)


def resolve_node(seed: Member, given: str) -> tuple[str | None, str]:
    """The full ID of the node ``given`` names (its ID or a unique prefix of it), as
    the seed knows it; (None, why) when it names none or several."""
    prefix = given.lower()
    matches = sorted(
        {entry.id for entry in seed.view if not entry.handshake and entry.id.startswith(prefix)}
    )
    if not prefix or not matches:
        return None, f"{seed.label} knows no node {given!r} (CLUSTER NODES lists the IDs)"
    if len(matches) > 1:
        shown = ", ".join(m[: max(ID_PREFIX, len(prefix) + 4)] for m in matches)
        return None, f"{given!r} names {len(matches)} nodes ({shown}): give more of the ID"
    return matches[0], ""


def _del_node(out: Output, parsed: VerbArgs, members: list[Member], given: str) -> int:
    seed = members[0]
    node_id, why = resolve_node(seed, given)
    if node_id is None:
        out.error(why)
        return 1
    if node_id == seed.id:
        out.error(f"{seed.name} is the node given as host:port: name another node there.")
        return 1
    target = next(member for member in members if member.id == node_id)
    out.title(f"Removing node {node_id} ({target.label}) from the cluster")
    if target.refresh():
        jobs = target.number("registered_jobs")
        out.error(
            f"{target.name} is up and holds {plural(jobs, 'job')}: remove it with "
            f"`disque --cluster leave {target.label}`, which moves its jobs first. "
            "Nothing was changed."
        )
        return 1
    others = [member for member in members if member is not target]
    up = [member for member in others if member.refresh(with_info=False)]
    out.warn(
        f"{target.name} is unreachable ({target.error}). Its jobs with copies on other "
        "nodes are queued again by them after their RETRY; jobs it alone held are lost."
    )
    if not confirmed(out, parsed.yes, f"Forget {node_id[:ID_PREFIX]} on {len(up)} nodes?"):
        return 1
    failed = 0
    for member in others:
        if member not in up:
            out.error(f"{member.name}: {member.error}: it still knows the node")
            failed += 1
            continue
        try:
            reply = member.call("CLUSTER", "FORGET", node_id)
        except NodeDown as exc:
            out.error(f"{member.name}: {exc}")
            failed += 1
            continue
        text = bytes(reply).decode(errors="replace") if isinstance(reply, bytes) else ""
        if isinstance(reply, ErrorReply) and not text.startswith("ERR Unknown node"):
            out.error(f"{member.name}: CLUSTER FORGET: {text}")
            failed += 1
        else:
            out.ok(f"{member.label} forgot {node_id[:ID_PREFIX]}.")
    if failed:
        out.error(
            f"{plural(failed, 'node')} still know {node_id[:ID_PREFIX]}: run this again "
            "once they are reachable (a node learns a forgotten node back from one that "
            "still knows it)."
        )
        return 1
    out.ok(f"Node {node_id} is forgotten by all {len(up)} other nodes.")
    return 0


# ---- set-timeout ----------------------------------------------------------------------

TIMEOUT_USAGE = "set-timeout host:port milliseconds"


def cluster_set_timeout(parsed: VerbArgs) -> int:
    out = Output(parsed.mode)

    def run(members: list[Member]) -> int:
        if len(parsed.words) != 1 or not parsed.words[0].isdigit():
            raise VerbError(f"Usage: disque --cluster {TIMEOUT_USAGE}")
        return _set_timeout(out, members, int(parsed.words[0]))

    return on_seed(parsed, out, TIMEOUT_USAGE, run)


def _set_timeout(out: Output, members: list[Member], ms: int) -> int:
    if ms < 100:
        out.error("The node timeout must be at least 100 ms.")
        return 1
    out.title(f"Setting cluster-node-timeout to {ms} ms on {len(members)} nodes")
    failed = 0
    for member in members:
        try:
            reply = member.call("CONFIG", "SET", "cluster-node-timeout", str(ms))
            if isinstance(reply, ErrorReply):
                raise NodeDown(f"CONFIG SET: {bytes(reply).decode(errors='replace')}")
            saved = member.call("CONFIG", "REWRITE")
        except NodeDown as exc:
            out.error(f"{member.name}: {exc}")
            failed += 1
            continue
        if isinstance(saved, ErrorReply):
            out.warn(
                f"{member.label}: set, not saved ({bytes(saved).decode(errors='replace')}):"
                " a restart goes back to its config file's value."
            )
        else:
            out.ok(f"{member.label}: set and saved (CONFIG REWRITE).")
    if failed:
        out.error(f"{plural(failed, 'node')} not set.")
        return 1
    out.ok(f"All {len(members)} nodes have cluster-node-timeout {ms}.")
    return 0
