"""The AOF, both ways with C Disque 1.0-rc1 (#39): a file a C node wrote loads
here with every job as C itself loads it, and one written here loads in C the
same way, so a node can be upgraded in place and rolled back.

The same jobs are made on the writer (queued, delivered, delayed, RETRY 0,
NACKed, one acknowledged, some before and some after a BGREWRITEAOF); the file
is then loaded by a C node and by one of ours, and their SHOW of every job
compared. ``fixtures/aof/`` holds a file C wrote and what C showed after
loading it, so the loader is tested where no C Disque is built too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from testkit.nodes import Node, ReferenceNode, as_dict, wait_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "aof"
TTL = "315360000"  # ten years: the fixture's jobs must outlive the fixture
AOF = {"appendonly": "yes", "appendfsync": "always"}
COMPARED = (
    b"id",
    b"queue",
    b"state",
    b"repl",
    b"ctime",
    b"delay",
    b"retry",
    b"nacks",
    b"additional-deliveries",
    b"body",
)


def add(node: Node, queue: str, body: str | bytes, *options: str) -> str:
    return node.call("ADDJOB", queue, body, "0", "TTL", TTL, *options).decode()


def rewritten(node: Node) -> bool:
    info = node.info("persistence")
    return not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]


def make_jobs(node: Node) -> dict[str, str]:
    """Jobs in every state an AOF holds, on a node with the AOF on; their IDs by name."""
    ids = {"delivered": add(node, "q", "delivered-body", "RETRY", "60")}
    [[_, got, _]] = node.call("GETJOB", "FROM", "q")
    assert got.decode() == ids["delivered"]
    ids["queued"] = add(node, "q", "queued-body", "RETRY", "60")
    ids["delayed"] = add(node, "q", "delayed-body", "RETRY", "60", "DELAY", "3600")
    ids["at_most_once"] = add(node, "once", "once-body", "RETRY", "0")
    ids["nacked"] = add(node, "n", "nacked-body", "RETRY", "60")
    node.call("GETJOB", "FROM", "n")
    node.call("NACK", ids["nacked"])
    assert node.call("BGREWRITEAOF")
    wait_for(lambda: rewritten(node), timeout=20, message="the AOF rewritten")
    ids["after_rewrite"] = add(node, "q", "after-body", "RETRY", "30")
    ids["acked"] = add(node, "q", "acked-body", "RETRY", "60")
    node.call("ACKJOB", ids["acked"])
    ids["binary"] = add(node, "q", b"\x00\r\n\xff body", "RETRY", "60")
    return ids


def shown(node: Node, ids: dict[str, str]) -> dict[str, dict[str, object]]:
    """SHOW of every job, the fields both kinds keep from the file, the TTL as the
    unix time the job expires (compared by ``same``: the loads are seconds apart)."""
    result: dict[str, dict[str, object]] = {}
    for name, jid in ids.items():
        fields = as_dict(node.call("SHOW", jid))
        if not fields:
            result[name] = {}
            continue
        kept: dict[str, object] = {k.decode(): fields[k] for k in COMPARED}
        kept = {k: v.decode("latin-1") if isinstance(v, bytes) else v for k, v in kept.items()}
        kept["expires"] = int(time.time()) + fields[b"ttl"]
        result[name] = kept
    return result


def same(a: dict[str, dict[str, object]], b: dict[str, dict[str, object]]) -> None:
    """Two ``shown`` views agree: every field, the expire times within 5 s."""
    assert a.keys() == b.keys()
    for name in a:
        left, right = dict(a[name]), dict(b[name])
        expires = left.pop("expires", 0), right.pop("expires", 0)
        assert left == right, name
        assert abs(expires[0] - expires[1]) <= 5, (name, expires)  # type: ignore[operator]


def loaded(make: Callable[[Path], Node], aof: Path, workdir: Path, **config: str) -> Node:
    """A node of the kind ``make`` starts, on a directory holding ``aof``."""
    workdir.mkdir(parents=True)
    shutil.copy(aof, workdir / "disque.aof")
    node = make(workdir)
    node.config.update({**AOF, **config})
    return node.start()


@pytest.fixture
def kinds(tmp_path: Path, reference_binary: str) -> dict[str, Callable[[Path], Node]]:
    started: list[Node] = []

    def ours(workdir: Path) -> Node:
        node = Node(workdir)
        started.append(node)
        return node

    def c(workdir: Path) -> Node:
        node = ReferenceNode(workdir, reference_binary)
        started.append(node)
        return node

    yield {"ours": ours, "C": c}
    for node in started:
        node.kill()


@pytest.mark.parametrize("writer", ["C", "ours"])
@pytest.mark.parametrize("enqueue_once", ["no", "yes"])
def test_an_aof_loads_the_same_in_both_kinds(
    tmp_path: Path, kinds: dict[str, Callable[[Path], Node]], writer: str, enqueue_once: str
) -> None:
    source = kinds[writer](tmp_path / "writer")
    source.config.update(AOF)
    source.start()
    ids = make_jobs(source)
    source.kill()
    aof = source.dir / "disque.aof"
    views = {
        kind: shown(
            loaded(make, aof, tmp_path / f"load-{kind}", **{"aof-enqueue-jobs-once": enqueue_once}),
            ids,
        )
        for kind, make in kinds.items()
    }
    if enqueue_once == "yes":
        # C queues a job it loads queued with its re-queue flag still set, so it counts
        # one more delivery (and broadcasts QUEUED); here a restart is no delivery.
        for job in views["C"].values():
            if job.get("state") == "queued":
                job["additional-deliveries"] -= 1  # type: ignore[operator]
        # C's loader leaves a queued RETRY 0 job active (its queue time is 0), where it
        # is never delivered; here it is queued again, as aof-enqueue-jobs-once says.
        assert views["C"]["at_most_once"]["state"] == "active"
        views["C"]["at_most_once"]["state"] = "queued"
    same(views["ours"], views["C"])
    view = views["ours"]
    assert view["delivered"]["state"] == "active"
    assert view["queued"]["state"] == ("queued" if enqueue_once == "yes" else "active")
    assert view["delayed"]["state"] == "active" and view["delayed"]["delay"] == 3600
    assert view["nacked"]["nacks"] == 1
    assert view["binary"]["body"] == "\x00\r\n\xff body"
    assert view["after_rewrite"]["retry"] == 30


def test_disque_check_aof_reads_both_kinds_of_file(
    tmp_path: Path, kinds: dict[str, Callable[[Path], Node]]
) -> None:
    for kind, make in kinds.items():
        node = make(tmp_path / kind)
        node.config.update(AOF)
        node.start()
        make_jobs(node)
        node.kill()
        path = node.dir / "disque.aof"
        check = [sys.executable, "-m", "disque_server.check_aof", str(path)]
        res = subprocess.run(check, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert res.returncode == 0 and "AOF is valid" in res.stdout, (kind, res.stdout)


def test_a_file_c_disque_wrote_loads_as_c_loads_it(tmp_path: Path) -> None:
    """No C node needed: the fixture file C 1.0-rc1 wrote (make_jobs), and the
    SHOW of its jobs by a C node that loaded it (record_fixture below)."""
    expected = json.loads((FIXTURES / "disque-1.0-rc1.json").read_text())
    node = loaded(Node, FIXTURES / "disque-1.0-rc1.aof", tmp_path / "ours")
    try:
        same(shown(node, expected["ids"]), expected["shown"])
    finally:
        node.kill()


def record_fixture(binary: str, workdir: Path) -> None:
    """Write the fixture: ``python tests/node/test_aof_disque.py /path/to/disque-server``."""
    writer = ReferenceNode(workdir / "writer", binary, AOF).start()
    ids = make_jobs(writer)
    writer.kill()
    aof = writer.dir / "disque.aof"
    reader = loaded(lambda d: ReferenceNode(d, binary), aof, workdir / "reader")
    try:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        shutil.copy(aof, FIXTURES / "disque-1.0-rc1.aof")
        record = {"ids": ids, "shown": shown(reader, ids)}
        (FIXTURES / "disque-1.0-rc1.json").write_text(json.dumps(record, indent=1) + "\n")
    finally:
        reader.kill()


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        record_fixture(sys.argv[1], Path(tmp))
