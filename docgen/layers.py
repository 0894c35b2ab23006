"""docs/layers.md: the node's module map, from disque_server/layers.py."""

from __future__ import annotations

from pathlib import Path

from disque_server.layers import LAYERS

PACKAGE = Path(__file__).resolve().parent.parent / "disque_server"


def modules_of(name: str) -> str:
    """``clock.py``; for a package, ``cluster/`` and its modules."""
    if (PACKAGE / name).is_dir():
        inner = sorted(p.stem for p in (PACKAGE / name).glob("*.py") if p.stem != "__init__")
        return f"`{name}/` ({', '.join(inner)})"
    return f"`{name}.py`"


def page() -> str:
    rows = [
        f"| {rank} | {', '.join(modules_of(n) for n in names)} | {what} |"
        for rank, (names, what) in enumerate(LAYERS)
    ]
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
            "| layer | modules | what for |",
            "| ---: | --- | --- |",
            *rows,
            "",
        ]
    )
