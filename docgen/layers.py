"""docs/layers.md: the node's module map, from disque_server/layers.py, and the
library's, from disque/layers.py."""

from __future__ import annotations

from pathlib import Path

from disque.layers import LAYERS as LIBRARY_LAYERS
from disque_server.layers import LAYERS

ROOT = Path(__file__).resolve().parent.parent


def modules_of(package: str, name: str) -> str:
    """``clock.py``; for a package, ``cluster/`` and its modules."""
    if (ROOT / package / name).is_dir():
        inner = sorted(p.stem for p in (ROOT / package / name).glob("*.py") if p.stem != "__init__")
        return f"`{name}/` ({', '.join(inner)})"
    return f"`{name}.py`"


def table(package: str, layers: list[tuple[tuple[str, ...], str]]) -> list[str]:
    return [
        "| layer | modules | what for |",
        "| ---: | --- | --- |",
        *(
            f"| {rank} | {', '.join(modules_of(package, n) for n in names)} | {what} |"
            for rank, (names, what) in enumerate(layers)
        ),
    ]


def page() -> str:
    return "\n".join(
        [
            "# The node's layers",
            "",
            "<!-- Written by `python -m docgen` from disque_server/layers.py: edit that. -->",
            "",
            "`disque_server/` is a one-way stack: a module imports only the modules of",
            "the layers below its own and, in its own layer, those of its own package.",
            "What a lower module must call above it is a method of `hooks.JobEvents`",
            "(carried out by `cluster.events`) or of `hooks.Hooks` (by `server.NodeHooks`).",
            "`tests/unit/test_import_order.py` checks every import",
            "(at the top of a module or inside a function) against this order, which",
            "`disque_server/layers.py` holds; bottom first:",
            "",
            *table("disque_server", LAYERS),
            "",
            "## The library's layers",
            "",
            "`disque/` (the client, the worker, the task library and the brokers) is",
            "a one-way stack by the same rule, checked by the same test against",
            "`disque/layers.py`; bottom first:",
            "",
            *table("disque", LIBRARY_LAYERS),
            "",
        ]
    )
