"""`disque --cluster check`'s Server column: which server a node runs, from its
INFO's disque_build_id (disque_cli.cluster_verbs.server_kind)."""

from __future__ import annotations

import pytest

from disque_cli.cluster import Member
from disque_cli.cluster_verbs import server_kind


def member_with_build(build_id: str | None) -> Member:
    member = Member("127.0.0.1", 7711, None)  # (connects only when asked)
    if build_id is not None:
        member.info["disque_build_id"] = build_id
    return member


@pytest.mark.parametrize(
    ("build_id", "kind"),
    [
        ("5ba3bd8fc8a3de5f", "C"),
        # C prints the 64-bit hash with %llx: a leading zero is dropped (a build
        # seen on one machine: 333f3c0dbe72e33, 15 digits)
        ("333f3c0dbe72e33", "C"),
        ("cpython-3.11.7-mypyc", "python"),
        ("cpython-3.11.7", "python"),
        ("", "?"),
        (None, "?"),
    ],
)
def test_server_kind_from_the_build_id(build_id: str | None, kind: str) -> None:
    assert server_kind(member_with_build(build_id)) == kind
