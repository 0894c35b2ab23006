"""A job's state has one owner (issue 60): its re-queue time (``qtime``), its
flags and its awake time are written by the jobs package (``jobs/lifecycle.py``'s
verbs, the registry's timers, the queues) and nowhere else. A command or a bus
handler says what happened to the job (``lifecycle.requeue_later``,
``copy_arrived``, ...) instead of setting the fields itself, so a change to
re-queue behaviour has one place and a stray write fails here.

Still outside, and listed below until they move (the test fails on a new one
and on a listed one that is gone): the job module, which builds a job (its
constructor) and reads one from the bus's fields, and serialize.py, which
reads one from Disque's bytes. Both set the timer rule of a job as read.

The walk reads the source with ast: nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "disque_server"
FIELDS = {"qtime", "flags", "awake"}
OWNER = "jobs"  # the package that owns them

# (module, function): writers still outside the jobs package (see above).
KNOWN: set[tuple[str, str]] = {
    ("job", "Job.__init__"),
    ("job", "job_from_fields"),
    ("serialize", "deserialize_job"),
}


def writes(tree: ast.Module) -> set[tuple[str, int, str]]:
    """(function, line, field) of each assignment to ``<expr>.qtime/flags/awake``
    of a job: ``x.flags`` of any name, except a class's own ``self.flags`` outside
    the job module (a cluster node's flags are not a job's)."""
    found: set[tuple[str, int, str]] = set()

    def visit(node: ast.AST, where: list[str], in_class: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, [*where, child.name], child.name)
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, [*where, child.name], in_class)
                continue
            targets: list[ast.expr] = []
            if isinstance(child, ast.Assign):
                targets = [t for target in child.targets for t in flatten(target)]
            elif isinstance(child, ast.AugAssign | ast.AnnAssign):
                targets = [child.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in FIELDS:
                    own = isinstance(target.value, ast.Name) and target.value.id == "self"
                    if not own or in_class == "Job":
                        found.add((".".join(where), child.lineno, target.attr))
            visit(child, where, in_class)

    visit(tree, [], "")
    return found


def flatten(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        return [t for element in target.elts for t in flatten(element)]
    return [target]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def outside_writers() -> dict[tuple[str, str], list[str]]:
    writers: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if module == OWNER or module.startswith(OWNER + "."):
            continue
        for function, line, field in writes(ast.parse(path.read_text(), str(path))):
            writers.setdefault((module, function), []).append(f"{path.name}:{line} .{field}")
    return writers


def test_only_the_jobs_package_writes_a_jobs_state() -> None:
    writers = outside_writers()
    new = {key: lines for key, lines in writers.items() if key not in KNOWN}
    assert not new, (
        "a job's qtime, flags or awake time written outside disque_server/jobs/: say what "
        f"happened with a verb of jobs/lifecycle.py instead: {new}"
    )
    gone = KNOWN - set(writers)
    assert not gone, f"no longer writing a job's state, take them off KNOWN: {gone}"


def test_the_walk_sees_a_write() -> None:
    """The test above can fail: a write of each kind is found."""
    source = (
        "def f(job):\n    job.qtime = 1\n    job.flags |= 2\n    a.awake, b = 3, 4\n"
        "class Node:\n    def g(self):\n        self.flags = 0\n"
    )
    assert {(f, field) for f, _, field in writes(ast.parse(source))} == {
        ("f", "qtime"),
        ("f", "flags"),
        ("f", "awake"),
    }
