"""The one-way stack at run time: below the client, the cluster and the commands,
no module reaches a module above it through the server object, except through the
hooks (disque_server/hooks.py, wired in server.NodeHooks).

test_import_order.py checks the imports; a module can still call upward without
importing anything, as ``self.server.cluster.broadcast_queued(job)`` did from
queue.py. This walk reads each module's source with ast and finds every attribute
taken from a server object (``server.X``, ``self.server.X``, ``client.server.X``),
then checks where X lives: in a module at or below the caller's layer, in the
context every layer may read (the config, the log, the event loop, the clock), or
the hooks. Anything else is the server's own (server.py, above them all)."""

from __future__ import annotations

import ast

from test_import_order import MODULES, layer

# Where each attribute of the server object lives: the module that defines it.
OWNERS = {
    "jobs": "registry",
    "queues": "queue",
    "memory": "memory",
    "aof": "aof",
    "acks": "ack",
    "cluster": "cluster",
    "clients": "client",
    "monitors": "client",
    "commands": "commands",
    "command_list": "commands",
    "hooks": "hooks",
}
# Read by every layer: not a module's state.
CONTEXT = {"config", "log", "loop", "clock_s"}

# (module, attribute): upward reaches still in the tree, each to become a hook or a
# call made by the layer above; the test fails on a new one, and on one listed here
# that is gone. eviction.py sums the clients' buffers (part of used_memory) and
# output_limits.py walks the clients to close those over their output limits.
KNOWN = {
    ("eviction", "clients"),
    ("output_limits", "clients"),
}


def is_server(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "server") or (
        isinstance(node, ast.Attribute) and node.attr == "server"
    )


def server_attributes(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text())
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and is_server(node.value)
    }


def below_the_client() -> list[str]:
    return [m for m in MODULES if layer(m) < layer("client")]


def upward_reaches() -> set[tuple[str, str]]:
    found = set()
    for module in below_the_client():
        for attr in server_attributes(module):
            if attr in CONTEXT or attr == "hooks":
                continue
            owner = OWNERS.get(attr, "server")
            if layer(owner) > layer(module):
                found.add((module, attr))
    return found


def test_the_walk_sees_the_modules_below_the_client() -> None:
    assert {"queue", "registry", "blocking", "memory", "aof", "eviction"} <= set(below_the_client())
    assert "hooks" in server_attributes("queue")  # (the walk finds self.server.X)


def test_no_module_below_the_client_reaches_above_it_but_through_hooks() -> None:
    reaches = upward_reaches()
    new = sorted(reaches - KNOWN)
    assert not new, (
        "modules calling upward through the server object (make it a hook in "
        f"hooks.py, or a call made by the layer above): {new}"
    )
    gone = sorted(KNOWN - reaches)
    assert not gone, f"gone from the tree, remove from KNOWN: {gone}"


def test_every_hook_is_wired() -> None:
    """server.NodeHooks defines each hook of hooks.Hooks (a hook left to the base
    class would do nothing)."""
    hooks = ast.parse(MODULES["hooks"].read_text())
    server = ast.parse(MODULES["server"].read_text())

    def methods(tree: ast.Module, cls: str) -> set[str]:
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        return {f.name for f in node.body if isinstance(f, ast.FunctionDef)} - {"__init__"}

    assert methods(hooks, "Hooks") == methods(server, "NodeHooks")
