"""The node is a one-way stack (issue 15), and so is the library (issue 60): no
module of disque_server (of disque) imports a module above it, at top level or
inside a function, nor a peer of its layer (the client and the cluster: each
may use what is below them, and not the other; a package's modules use each
other). Imports under
``if TYPE_CHECKING:`` are for annotations only and run never, so they may
point anywhere. What a lower module must call above it is a method of
hooks.Hooks or hooks.JobEvents (test_layers.py checks those calls).

The walk reads the source with ast: nothing is imported, and an import
hidden in a function body counts as much as one at the top."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest

from disque.layers import LAYERS as LIBRARY_LAYERS
from disque_server.layers import LAYERS as NODE_LAYERS

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Stack:
    """A package and its layers, bottom to top (``layers.py`` in each: the one place
    the order is written). A name stands for the module and, for a package,
    everything in it."""

    package: str
    layers: list[tuple[str, ...]]
    # (importer, imported): the upward imports still in the tree, each to be removed
    # with the import; the test fails on a new one, and on one listed here that is gone.
    known: frozenset[tuple[str, str]] = frozenset()

    @cached_property
    def modules(self) -> dict[str, Path]:
        return {self.module_name(p): p for p in sorted((ROOT / self.package).rglob("*.py"))}

    def module_name(self, path: Path) -> str:
        parts = list(path.relative_to(ROOT / self.package).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        return ".".join(parts)

    def layer(self, module: str) -> int:
        for rank, names in enumerate(self.layers):
            for name in names:
                if module == name or module.startswith(name + "."):
                    return rank
        raise AssertionError(f"{self.package}/{module}: place it in {self.package}/layers.py")


NODE = Stack("disque_server", [names for names, _ in NODE_LAYERS])
LIBRARY = Stack("disque", [names for names, _ in LIBRARY_LAYERS])
STACKS = [pytest.param(NODE, id="node"), pytest.param(LIBRARY, id="library")]
MODULES, layer = NODE.modules, NODE.layer  # the node's, for test_layers.py and others


def resolve(node: ast.ImportFrom | ast.Import, stack: Stack) -> list[str]:
    """The modules of ``stack`` an import statement loads (the package itself for
    ``from disque_server import DISQUE_VERSION``)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        assert not node.level, "relative import: the walk reads absolute ones only"
        base = node.module or ""
        names = [f"{base}.{alias.name}" for alias in node.names]
    found = []
    for name in names:
        if name != stack.package and not name.startswith(stack.package + "."):
            continue
        module = name.split(".", 1)[1] if "." in name else "__init__"
        while module not in stack.modules and "." in module:
            module = module.rsplit(".", 1)[0]  # a name inside a module
        found.append(module if module in stack.modules else "__init__")
    return found


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: str, stack: Stack) -> set[str]:
    """Every module of ``stack`` that ``module`` imports when it runs, anywhere in it."""
    found = imports_in(stack.modules[module].read_text(), stack)
    found.discard(module)
    return found


def imports_in(source: str, stack: Stack = NODE) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(resolve(node, stack))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def group(module: str) -> str:
    return module.split(".", 1)[0]


def upward_imports(stack: Stack) -> set[tuple[str, str]]:
    """(importer, imported) for each import of a module above, or of a peer."""
    return {
        (module, target)
        for module in stack.modules
        for target in imports(module, stack)
        if stack.layer(target) > stack.layer(module)
        or (stack.layer(target) == stack.layer(module) and group(target) != group(module))
    }


@pytest.mark.parametrize("stack", STACKS)
def test_every_module_has_a_layer(stack: Stack) -> None:
    for module in stack.modules:
        stack.layer(module)


@pytest.mark.parametrize("stack", STACKS)
def test_no_module_imports_a_module_above_it(stack: Stack) -> None:
    upward = upward_imports(stack)
    new = sorted(upward - stack.known)
    assert not new, "imports up the stack (a hook, or move the code up): " + ", ".join(
        f"{a} -> {b}" for a, b in new
    )
    gone = sorted(stack.known - upward)
    assert not gone, "fixed: remove from known: " + ", ".join(f"{a} -> {b}" for a, b in gone)


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


def test_the_library_walk_finds_its_own_imports() -> None:
    source = "from disque.tasks.canvas import chain\nimport disque_server.job\n"
    assert imports_in(source, LIBRARY) == {"tasks.canvas"}
