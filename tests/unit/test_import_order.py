"""The node is a one-way stack (issue 15): no module of disque_server imports a
module above it, at top level or inside a function, nor a peer of its layer
(the client and the cluster: each may use what is below them, and not the
other; a package's modules use each other). Imports under
``if TYPE_CHECKING:`` are for annotations only and run never, so they may
point anywhere. What a lower module must call above it is a method of
hooks.Hooks or hooks.JobEvents (test_layers.py checks those calls).

The walk reads the source with ast: nothing is imported, and an import
hidden in a function body counts as much as one at the top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from disque_server.layers import LAYERS as NODE_LAYERS

PACKAGE = Path(__file__).resolve().parents[2] / "disque_server"

# Bottom to top (disque_server/layers.py: the one place the order is written): a
# module may import the modules of the layers below its own, and in its own layer
# those of its package only. A name stands for the module and, for a package,
# everything in it.
LAYERS: list[tuple[str, ...]] = [names for names, _ in NODE_LAYERS]

# (importer, imported): the upward imports still in the tree, each to be removed with
# the import; the test fails on a new one, and on one listed here that is gone.
KNOWN: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int:
    for rank, names in enumerate(LAYERS):
        for name in names:
            if module == name or module.startswith(name + "."):
                return rank
    raise AssertionError(f"disque_server/{module}: place it in LAYERS")


def resolve(node: ast.ImportFrom | ast.Import) -> list[str]:
    """The disque_server modules an import statement loads (the package itself for
    ``from disque_server import DISQUE_VERSION``)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        assert not node.level, "relative import: the walk reads absolute ones only"
        base = node.module or ""
        names = [f"{base}.{alias.name}" for alias in node.names]
    found = []
    for name in names:
        if name != "disque_server" and not name.startswith("disque_server."):
            continue
        module = name.split(".", 1)[1] if "." in name else "__init__"
        while module not in MODULES and "." in module:
            module = module.rsplit(".", 1)[0]  # a name inside a module
        found.append(module if module in MODULES else "__init__")
    return found


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: str) -> set[str]:
    """Every disque_server module ``module`` imports when it runs, anywhere in it."""
    found = imports_in(MODULES[module].read_text())
    found.discard(module)
    return found


def imports_in(source: str) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(resolve(node))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def group(module: str) -> str:
    return module.split(".", 1)[0]


def upward_imports() -> set[tuple[str, str]]:
    """(importer, imported) for each import of a module above, or of a peer."""
    return {
        (module, target)
        for module in MODULES
        for target in imports(module)
        if layer(target) > layer(module)
        or (layer(target) == layer(module) and group(target) != group(module))
    }


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer(module)


def test_no_module_imports_a_module_above_it() -> None:
    upward = upward_imports()
    new = sorted(upward - KNOWN)
    assert not new, "imports up the stack (use a hook set by server.py): " + ", ".join(
        f"{a} -> {b}" for a, b in new
    )
    gone = sorted(KNOWN - upward)
    assert not gone, "fixed: remove from KNOWN: " + ", ".join(f"{a} -> {b}" for a, b in gone)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from disque_server.client import Client\n", {"client"}),
        (
            "def f():\n    from disque_server.commands.getjob import reply_jobs\n",
            {"commands.getjob"},
        ),
        ("from disque_server import resp, DISQUE_VERSION\n", {"resp", "__init__"}),
        ("import disque_server.cluster.bus\n", {"cluster.bus"}),
        ("from disque_server.cluster import requeue\n", {"cluster.requeue"}),
        ("if TYPE_CHECKING:\n    from disque_server.server import Server\n", set()),
        (
            "if TYPE_CHECKING:\n    pass\nelse:\n    from disque_server.server import Server\n",
            {"server"},
        ),
    ],
)
def test_the_walk_finds_imports(source: str, expected: set[str]) -> None:
    """The walk itself: an import it missed would let an upward one through."""
    assert imports_in(source) == expected
