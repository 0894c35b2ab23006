"""The one-way stack at run time: no module below server.py reaches a module above
it, or a peer of its layer, through the server object, except through the hooks
(disque_server/hooks.py: JobEvents, carried out by cluster.events, and Hooks, by
server.NodeHooks).

test_import_order.py checks the imports; a module can still call upward without
importing anything, as ``self.server.cluster.broadcast_queued(job)`` did from
queue.py. This walk reads each module's source with ast and finds every attribute
taken from a server object (``server.X``, ``self.server.X``, ``client.server.X``,
and a name bound to one: a parameter annotated ``NodeState``, ``s = self.server``),
then checks where X lives: in a module at or below the caller's layer, in the
context every layer may read (the config, the log, the event loop, the clock, the
node's run ID and start time), or the hooks.

Those modules see the server as a ``state.NodeState`` (never as ``Server``), so
mypy already refuses the server's own methods and state there; this walk checks
the pieces' layers, which one class cannot say."""

from __future__ import annotations

import ast

from test_import_order import MODULES, layer

# Where each attribute of the server object lives: the module that defines it.
OWNERS = {
    "jobs": "jobs",
    "queues": "jobs",
    "memory": "memory",
    "aof": "aof",
    "acks": "jobs",
    "eviction": "eviction",
    "cluster": "cluster",
    "clients": "client",
    "monitors": "client",
    "commands": "commands",
    "command_list": "commands",
    "stats": "stats",
    "slowlog": "slowlog",
    "latency": "latency",
    "ctime_clock": "job",
    "hooks": "hooks",
    "job_events": "cluster",
    "collector": "collector",
    "watchdog": "watchdog",
    "output_limits": "output_limits",
}
# Read by every layer: not a module's state.
CONTEXT = {"config", "log", "loop", "clock_s", "run_id", "start_time"}


def server_names(tree: ast.Module) -> set[str]:
    """The names a module gives a server object: ``server``, parameters annotated
    ``NodeState``, and names assigned ``<something>.server``."""
    names = {"server"}
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            if ast.unparse(node.annotation).strip("'\"") == "NodeState":
                names.add(node.arg)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            if node.value.attr == "server":
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def server_attributes(module: str, source: str | None = None) -> set[str]:
    """The attributes a module (its source: read from disque_server unless given)
    takes from a server object."""
    tree = ast.parse(MODULES[module].read_text() if source is None else source)
    names = server_names(tree)

    def is_server(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id in names) or (
            isinstance(node, ast.Attribute) and node.attr == "server"
        )

    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and is_server(node.value)
    }


def package(module: str) -> str:
    return module.split(".")[0]


def reaches_up(module: str, attributes: set[str]) -> set[tuple[str, str]]:
    """(module, attribute) for each attribute that lives above the module, or in a
    peer of its layer (the client and the cluster reach each other only through
    what is below them)."""
    found = set()
    for attr in attributes - CONTEXT:
        owner = OWNERS.get(attr, "server")
        above = layer(owner) > layer(module)
        peer = layer(owner) == layer(module) and package(owner) != package(module)
        if above or peer:
            found.add((module, attr))
    return found


def below_the_server() -> list[str]:
    return [m for m in MODULES if layer(m) < layer("server")]


def upward_reaches() -> set[tuple[str, str]]:
    found = set()
    for module in below_the_server():
        found |= reaches_up(module, server_attributes(module))
    return found


def test_the_walk_sees_the_modules_below_the_server() -> None:
    modules = set(below_the_server())
    assert {
        "jobs.queue",
        "jobs.registry",
        "eviction",
        "client",
        "cluster",
        "commands.admin",
    } <= modules
    assert "metrics" in modules
    assert "config" in server_attributes("cluster")  # (self.server.X)
    assert "acks" in server_attributes("jobs.blocking")  # (client.server.X)
    assert "latency" in server_attributes("commands.info")  # (s: NodeState, s.X)
    assert "latency" in server_attributes("metrics")  # (s = self.server, s.X)


def test_the_walk_finds_an_upward_reach() -> None:
    """What it would report: the server's own method called from a client, the
    cluster reached from the queues, the clients from the cluster (a peer), the
    server's state read through a name; not the cluster from its own package."""
    client = "def run(self, argv):\n    self.server.dispatch(self, argv)\n"
    assert reaches_up("client", server_attributes("client", client)) == {("client", "dispatch")}
    queue = "def add(q, server):\n    server.cluster.broadcast_queued(q)\n"
    assert reaches_up("jobs.queue", server_attributes("jobs.queue", queue)) == {
        ("jobs.queue", "cluster")
    }
    peer = "def leave(cluster):\n    cluster.server.clients.clear()\n"
    assert reaches_up("cluster", server_attributes("cluster", peer)) == {("cluster", "clients")}
    own = "def gone(cluster):\n    cluster.server.cluster.nodes.clear()\n"
    assert reaches_up("cluster.gc", server_attributes("cluster.gc", own)) == set()
    info = "def section(s: NodeState):\n    return [s.config, s.streak_calls]\n"
    assert reaches_up("commands.info", server_attributes("commands.info", info)) == {
        ("commands.info", "streak_calls")
    }


def node_state_attributes() -> set[str]:
    tree = ast.parse(MODULES["state"].read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "NodeState")
    return {
        n.target.id
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }


def test_each_piece_of_the_node_state_has_its_layer() -> None:
    assert node_state_attributes() == set(OWNERS) | CONTEXT


def test_no_module_below_the_server_imports_or_types_server() -> None:
    """They type the server as a NodeState: the name Server never appears in them,
    in an import, an annotation or a string."""
    found = []
    for module in below_the_server():
        for node in ast.walk(ast.parse(MODULES[module].read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "disque_server.server":
                found.append((module, "import"))
            elif isinstance(node, ast.Name) and node.id == "Server":
                found.append((module, "name"))
            elif isinstance(node, ast.Constant) and node.value == "Server":
                found.append((module, "string annotation"))
    assert not found


def test_no_module_below_the_server_reaches_above_it_or_a_peer_but_through_hooks() -> None:
    reaches = sorted(upward_reaches())
    assert not reaches, (
        "modules calling upward through the server object (make it a hook in "
        f"hooks.py, or a call made by the layer above): {reaches}"
    )


def test_every_hook_and_job_event_is_wired() -> None:
    """server.NodeHooks defines each hook of hooks.Hooks, and
    cluster.events.ClusterJobEvents each event of hooks.JobEvents (one left to the
    base class would do nothing)."""
    hooks = ast.parse(MODULES["hooks"].read_text())

    def methods(tree: ast.Module, cls: str) -> set[str]:
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        return {f.name for f in node.body if isinstance(f, ast.FunctionDef)} - {"__init__"}

    server = ast.parse(MODULES["server"].read_text())
    assert methods(hooks, "Hooks") == methods(server, "NodeHooks")
    events = ast.parse(MODULES["cluster.events"].read_text())
    assert methods(hooks, "JobEvents") == methods(events, "ClusterJobEvents")
