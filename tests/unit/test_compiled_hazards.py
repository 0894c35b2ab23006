"""What Python allows and the compiled node (mypyc) does not, read from the source.

One name bound by two ``except ... as`` clauses of a function: mypyc gives the
local the type of the first clause, so an exception caught by the second fails a
type check in the compiled node, and the user gets a traceback where a line was
written for them (a port in use, a log file it cannot open: tests/node/test_config.py).

A call in a slice's bounds: mypyc evaluates it twice when it slices a memoryview
(``view[os.write(fd, view):]`` wrote every AOF rewrite chunk twice), so a bound is
a name or a plain expression, computed before the slice.
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


PURE_CALLS = {"len", "min", "max", "abs"}  # evaluated twice, they give the same


def calls_in_slice_bounds(source: str) -> list[str]:
    """``line: slice`` for each slice whose bounds call something (but ``len`` ...)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Slice):
            bounds = [b for b in (node.lower, node.upper, node.step) if b is not None]
            calls = [n for b in bounds for n in ast.walk(b) if isinstance(n, ast.Call)]
            if any(not (isinstance(c.func, ast.Name) and c.func.id in PURE_CALLS) for c in calls):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_finds_a_call_in_a_slice() -> None:
    assert calls_in_slice_bounds("v = v[os.write(fd, v):]\n") == ["1: os.write(fd, v):"]
    assert calls_in_slice_bounds("n = os.write(fd, v)\nv = v[n:]\nw = v[i : len(v)]\n") == []


def test_no_slice_of_the_node_calls_in_its_bounds() -> None:
    found = {
        module: lines
        for module, path in MODULES.items()
        if (lines := calls_in_slice_bounds(path.read_text()))
    }
    assert not found, f"compute slice bounds before the slice: {found}"
