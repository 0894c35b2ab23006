"""Which server a node runs, from its INFO's disque_build_id
(disque.protocol.server_kind): `disque --cluster check`'s Server column and
the dashboard's server column."""

from __future__ import annotations

import pytest

from disque.protocol import server_kind


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
    info = {"disque_version": "1.0-rc1"}
    if build_id is not None:
        info["disque_build_id"] = build_id
    assert server_kind(info) == kind
