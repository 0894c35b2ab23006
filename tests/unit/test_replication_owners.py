"""A new job's nodes-delivered tuple, shared by the jobs replicated to the same
nodes in a row (disque_server/cluster/replication.py: Owners)."""

from __future__ import annotations

from disque_server.cluster.replication import Owners

ME = (b"m" * 40,)
A, B, C = b"a" * 40, b"b" * 40, b"c" * 40


def test_jobs_to_the_same_nodes_share_one_tuple() -> None:
    owners = Owners()
    first = owners.of(ME, [A, B])
    assert first == (ME[0], A, B)
    assert owners.of(ME, [A, B]) is first  # an equal list, another object
    assert owners.of((), [A, B]) == (A, B)  # replicated externally: no copy here
    assert owners.of(ME, [B, A]) == (ME[0], B, A)


def test_a_slow_jobs_added_node_is_not_seen_by_the_tuple_of_the_others() -> None:
    """The cron appends a node to a slow job's own target list (Replication.targets):
    the shared tuple, and the next job to the first nodes, must not change with it."""
    owners = Owners()
    targets = [A, B]
    shared = owners.of(ME, targets)
    targets.append(C)
    assert shared == (ME[0], A, B)
    assert owners.of(ME, [A, B]) is shared
    assert owners.of(ME, targets) == (ME[0], A, B, C)
