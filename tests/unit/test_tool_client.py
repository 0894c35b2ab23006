"""disque.protocol (in the `disque` package applications use), the one place
the tools read HELLO and INFO: the parsers on replies as Disque 1.0-rc1 sends
them, node priority, and checks that the tools keep to it (one definition of
each parser, and every tool that sends HELLO reads it with parse_hello; the
dashboard and the Spark connector never import the CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from disque.protocol import (
    HelloError,
    Node,
    by_priority,
    flat_info,
    info_numbers,
    parse_hello,
    parse_info,
)

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("disque_cli", "disque_tui", "disque_spark", "disque_common", "disque", "bench")

HELLO = [
    1,
    b"5b5ace285121e336847f55fb92f1935774ebfce4",
    [b"78e24da148cd9c9fc69d2b889eba1abb7bdf05b0", b"127.0.0.1", b"7712", b"1"],
    [b"5b5ace285121e336847f55fb92f1935774ebfce4", b"127.0.0.1", b"7711", b"1"],
    [b"725c0613b8b134d5d1c8b5e88bf61de102c81c10", b"127.0.0.1", b"7713", b"100"],
]
INFO = (
    b"# Server\r\ndisque_version:1.0.0\r\nrun_id:123\r\nuptime_in_seconds:9\r\n\r\n"
    b"# Jobs\r\nregistered_jobs:3\r\n\r\n# Stats\r\nused_cpu_sys:0.25\r\n"
    b"executable:/a:b\r\n"
)


def test_parse_hello() -> None:
    hello = parse_hello(HELLO)
    assert (hello.version, hello.myid) == (1, "5b5ace285121e336847f55fb92f1935774ebfce4")
    assert [(n.port, n.priority) for n in hello.nodes] == [(7712, 1), (7711, 1), (7713, 100)]
    assert hello.nodes[0].addr == "127.0.0.1:7712"
    assert parse_hello([1, "myid"]).nodes == ()


@pytest.mark.parametrize(
    "reply",
    [
        b"OK",
        [],
        [1],
        [2, b"id"],
        [1, 5],
        [1, b"id", [b"a", b"h", b"7711"]],
        [1, b"id", [b"a", b"h", b"port", b"1"]],
        [1, b"id", b"entry"],
    ],
)
def test_parse_hello_refuses_what_is_not_hello(reply: object) -> None:
    with pytest.raises(HelloError, match="unexpected HELLO"):
        parse_hello(reply)


def test_by_priority_prefers_the_lowest() -> None:
    nodes = [
        Node("leaving", "h", 1, 100),
        Node("a", "h", 2, 1),
        Node("failing", "h", 3, 10),
        Node("b", "h", 4, 1),
    ]
    for _ in range(20):  # ties in random order, never before a better node
        order = [n.id for n in by_priority(nodes)]
        assert sorted(order[:2]) == ["a", "b"] and order[2:] == ["failing", "leaving"]


def test_parse_info_by_section() -> None:
    info = parse_info(INFO)
    assert info["server"]["disque_version"] == "1.0.0"
    assert info["jobs"] == {"registered_jobs": "3"}
    assert info["stats"]["executable"] == "/a:b"
    assert parse_info("top:1\r\n# Jobs\r\nregistered_jobs:3\r\n") == {
        "top": "1",
        "jobs": {"registered_jobs": "3"},
    }


def test_flat_info() -> None:
    assert flat_info(INFO)["registered_jobs"] == "3"
    assert flat_info(INFO.decode())["executable"] == "/a:b"
    assert flat_info(b"") == {}


def test_info_numbers() -> None:
    numbers = info_numbers(parse_info(INFO))
    assert numbers["server"] == {"disque_version": "1.0.0", "run_id": "123", "uptime_in_seconds": 9}
    assert numbers["stats"] == {"used_cpu_sys": 0.25, "executable": "/a:b"}


# ---- the tools keep to it -------------------------------------------------------------


def package_files(*packages: str) -> list[Path]:
    return sorted(path for package in packages for path in (ROOT / package).rglob("*.py"))


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at top level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", ["disque_tui", "disque_spark", "disque_common", "disque"])
def test_no_tool_but_the_cli_imports_the_cli(package: str) -> None:
    """The dashboard and the Spark connector share code through the disque package."""
    offenders = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in package_files(package)
        for module in imported_modules(path)
        if module == "disque_cli" or module.startswith("disque_cli.")
    }
    assert not offenders, sorted(offenders)


def test_hello_and_info_are_parsed_once() -> None:
    """The parsers are defined in disque/protocol.py and nowhere else; and
    the marks of parsing HELLO (its node entries, `reply[2:]`) or INFO (its section
    headers, `startswith("#")`) appear nowhere else in the tools."""
    home = ROOT / "disque" / "protocol.py"
    parsers = {"parse_hello", "parse_info", "flat_info", "info_value"}
    definitions = [
        (path, node.name)
        for path in package_files(*TOOLS)
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in parsers
    ]
    assert sorted(name for _, name in definitions) == sorted(parsers)
    assert {path for path, _ in definitions} == {home}
    marks = ("reply[2:]", 'startswith("#")')
    elsewhere = [
        f"{path.relative_to(ROOT)}: {mark}"
        for path in package_files(*TOOLS)
        if path != home
        for mark in marks
        if mark in path.read_text()
    ]
    assert not elsewhere, elsewhere


def sends_hello(call: ast.Call) -> bool:
    """A call with the command HELLO among its arguments (HELLO 3, a protocol switch
    whose reply is not read, aside)."""
    args = [a.value for a in call.args if isinstance(a, ast.Constant)]
    return "HELLO" in args and "3" not in args


def called_names(node: ast.AST) -> set[str]:
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def hello_readers(path: Path, root: Path = ROOT) -> list[str]:
    """The functions of path that send HELLO and do not read the reply with
    parse_hello (themselves, or through a function of the module that does)."""
    tree = ast.parse(path.read_text(), str(path))
    functions = [
        fn for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    readers = {"parse_hello"} | {fn.name for fn in functions if "parse_hello" in called_names(fn)}
    return [
        f"{path.relative_to(root)}:{fn.lineno} {fn.name}"
        for fn in functions
        if any(isinstance(c, ast.Call) and sends_hello(c) for c in ast.walk(fn))
        and not readers & called_names(fn)
    ]


def test_every_tool_reads_hello_with_parse_hello() -> None:
    """The CLI, the dashboard, the benchmarks and the Spark source send HELLO and
    read it through the disque package: a second HELLO parser fails here."""
    offenders = [
        where
        for path in package_files(*TOOLS)
        if path != ROOT / "disque" / "protocol.py"
        for where in hello_readers(path)
    ]
    assert not offenders, offenders


def test_a_second_hello_parser_is_found(tmp_path: Path) -> None:
    tool = tmp_path / "tool.py"
    tool.write_text(
        "def nodes(conn):\n"
        "    reply = conn.execute_command('HELLO')\n"
        "    return [entry[1] for entry in reply[2:]]\n"
    )
    assert hello_readers(tool, tmp_path) == ["tool.py:1 nodes"]
