"""The documentation generator: a build tool of the repository, not part of any
program (the wheel does not ship it).

    python -m docgen            write completions/, man/ and docs/layers.md
    python -m docgen --check    exit 1 if a committed file is stale

Every generated file comes from the code's own tables, so the pages follow
it: `completions.py` writes the shell completion scripts and `man.py` the
disque(1) page from disque_cli's option and command tables; `man_pages.py`
writes disque-benchmark(1), disque-server(1), disque-tui(1), disque-worker(1)
and disque.conf(5) from the server's directive table, the typer commands of
the benchmark, the dashboard and the worker, and the dashboard's keys;
`layers.py` writes docs/layers.md, the node's module map, from
disque_server/layers.py.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def outputs() -> dict[str, str]:
    """Every generated file: its path under the repository root, and its content."""
    from docgen import completions, layers, man, man_pages

    return {
        **{path: make() for path, make in completions.SCRIPTS.items()},
        "man/disque.1": man.man_page(),
        **{path: make() for path, make in man_pages.PAGES.items()},
        "docs/layers.md": layers.page(),
    }


def generate(root: Path = ROOT, check: bool = False) -> list[str]:
    """Write (or with check, compare) every generated file; return the stale ones."""
    stale = []
    for relative, content in outputs().items():
        path = root / relative
        current = path.read_text() if path.exists() else None
        if current != content:
            stale.append(relative)
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
    return stale
