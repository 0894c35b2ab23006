"""What Python allows and the compiled node (mypyc) does not, read from the source.

One name bound by two ``except ... as`` clauses of a function: mypyc gives the
local the type of the first clause, so an exception caught by the second fails a
type check in the compiled node, and the user gets a traceback where a line was
written for them (a port in use, a log file it cannot open: tests/test_config.py).
"""

from __future__ import annotations

import ast

from test_import_order import MODULES


def mixed_except_names(source: str) -> list[str]:
    """``function: name`` for each name two except clauses of a function bind to
    different exception types."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        types: dict[str, set[str]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.ExceptHandler) and node.name:
                caught = ast.unparse(node.type) if node.type else "BaseException"
                types.setdefault(node.name, set()).add(caught)
        found += [f"{fn.name}: {name}" for name, kinds in types.items() if len(kinds) > 1]
    return found


def test_the_check_finds_one_name_for_two_exception_types() -> None:
    source = (
        "def main():\n"
        "    try:\n        start()\n    except ConfigError as exc:\n        return 1\n"
        "    try:\n        log()\n    except OSError as exc:\n        return 1\n"
    )
    assert mixed_except_names(source) == ["main: exc"]
    same = source.replace("OSError", "ConfigError")
    assert mixed_except_names(same) == []


def test_no_except_name_of_the_node_stands_for_two_exception_types() -> None:
    found = {
        module: names
        for module, path in MODULES.items()
        if (names := mixed_except_names(path.read_text()))
    }
    assert not found, f"give each except clause its own name: {found}"
