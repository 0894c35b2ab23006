"""The CLI's modules import each other without a circle (issue 25): counting every
import, also those under ``if TYPE_CHECKING:`` and inside functions, the graph of
disque_cli's modules has no cycle. Read with ast: nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "disque_cli"


def imports_of(path: Path) -> set[str]:
    """The disque_cli modules one module imports, by module name."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "disque_cli":
                found |= {f"disque_cli.{alias.name}" for alias in node.names}
            elif node.module.startswith("disque_cli."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("disque_cli.")}
    modules = {f"disque_cli.{p.stem}" for p in PACKAGE.glob("*.py")}
    return found & modules


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for dep in sorted(graph.get(name, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state and (cycle := visit(name)):
            return cycle
    return None


def test_the_cli_has_no_import_circle() -> None:
    graph = {f"disque_cli.{p.stem}": imports_of(p) for p in PACKAGE.glob("*.py")}
    graph.pop("disque_cli.__init__", None)
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
