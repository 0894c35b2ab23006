#!/usr/bin/env python3
"""Dramatiq's and kombu's own test suites, on their Redis broker and on ours.

    python bench/peer_suites.py [--cache DIR] [--only dramatiq,kombu] [--timeout 60]
                                [--out DIR] [-k EXPR] [--strict]

Gets the sdists of the installed Dramatiq and kombu (``pip download
--no-binary :all: --no-deps``, into ``--cache``: a directory that already
holds them, as ``NAME-VERSION.tar.gz`` or unpacked, is used as it is),
unpacks them, and runs their tests with pytest twice: once on a redis-server
with the library's Redis broker, once on a 3-node cluster of ours
(``python -m disque_server``) with ours. Free loopback ports, a temporary
directory; the servers are stopped on the way out, also on an error or
Ctrl-C.

- Dramatiq: the sdist's tests/ has no conftest.py nor common.py; this script
  puts bench/peer_suites/dramatiq_conftest.py and dramatiq_common.py there.
  Every broker fixture (``stub_broker``, ``redis_broker``) is the side's
  broker: Dramatiq's RedisBroker, or our DisqueBroker. The test files run are
  DRAMATIQ_FILES; DRAMATIQ_LEFT_OUT says why the others are not.
- kombu: bench/peer_suites/kombu_suite.py, copied into the sdist's
  t/integration/, subclasses the test classes of its common.py with
  ``connection`` fixtures on redis:// or on disque://.

Each test has ``--timeout`` seconds (pytest-timeout): one that hangs fails.
Prints a Markdown table (tests, passed and failed on each side), then the
tests that pass on Redis and not on ours, and the other way round. Progress
on stderr; pytest's output and JUnit XML of each run in ``--out`` when given.
Needs redis-server, pytest-timeout, Dramatiq, kombu, and pika (Dramatiq's
test_broker.py imports its RabbitMQ broker): ``pip install -e '.[dev,bench]'``.
Dramatiq's test_redis.py, the Redis broker's own tests (most assert its keys or
call its methods), has rows of its own. Exit code 0 when the suites ran (1
with ``--strict`` when a suite, test_redis.py aside, passes fewer tests on ours
than on Redis), 1 when a step failed, 2 when a prerequisite is missing, 130
when interrupted.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import environment, running  # noqa: E402
from single_node import (  # noqa: E402
    HOST,
    REPO_ROOT,
    BenchError,
    Server,
    say,
    sigterm_as_interrupt,
    start_redis,
)

from testkit.processes import free_port  # noqa: E402

HERE = Path(__file__).resolve().parent / "peer_suites"
SUITE_TIMEOUT = 3600.0  # seconds for one pytest run, its tests' own timeouts aside
SIDES = ("redis", "disque")

# Dramatiq's test files that run a broker, and why the others are left out.
DRAMATIQ_FILES = (
    "test_actors.py",
    "test_broker.py",
    "test_callbacks.py",
    "test_composition.py",
    "test_encoders.py",
    "test_generic_actors.py",
    "test_messages.py",
    "test_redis.py",
    "test_results.py",
    "test_worker.py",
)
DRAMATIQ_LEFT_OUT = {
    "test_stub_broker.py": "the stub broker's own internals (its dead_letters, its queues)",
    "test_rabbitmq.py": "the RabbitMQ broker, on a RabbitMQ server",
    "test_cli.py": "the dramatiq command, started on broker modules of the suite's own",
    "test_pidfile.py": "the dramatiq command's pid file",
    "test_watch.py": "the dramatiq command's code reloading",
    "test_barrier.py": "rate-limiter backends (Redis, Memcached, stub): no broker",
    "test_bucket_rate_limiter.py": "rate-limiter backends: no broker",
    "test_concurrent_rate_limiter.py": "rate-limiter backends: no broker",
    "test_window_rate_limiter.py": "rate-limiter backends: no broker",
    "test_canteen.py": "shared memory between worker processes: no broker",
    "test_common.py": "queue-name helpers: no broker",
    "test_types.py": "type annotations: no broker",
}


@dataclass(frozen=True)
class Suite:
    name: str  # as the table says it
    project: str  # on PyPI
    tree: str  # the sdist's test directory, copied to the run directory
    copies: tuple[tuple[str, str], ...]  # (file in bench/peer_suites, where in the run dir)
    paths: tuple[str, ...]  # what pytest runs, in the run directory
    apart: tuple[str, ...] = ()  # test modules counted on rows of their own

    def version(self) -> str:
        return importlib.metadata.version(self.project)


SUITES = {
    "dramatiq": Suite(
        "Dramatiq",
        "dramatiq",
        "tests",
        (
            ("dramatiq_conftest.py", "tests/conftest.py"),
            ("dramatiq_common.py", "tests/common.py"),
            ("peer_sides.py", "tests/peer_sides.py"),
            ("", "tests/__init__.py"),  # (the tests import .common)
        ),
        tuple(f"tests/{name}" for name in DRAMATIQ_FILES),
        # The Redis broker's own tests: most assert its keys or call its methods.
        apart=("test_redis",),
    ),
    "kombu": Suite(
        "kombu",
        "kombu",
        "t",
        (
            ("kombu_suite.py", "t/integration/test_peer_suites.py"),
            ("peer_sides.py", "t/integration/peer_sides.py"),
        ),
        ("t/integration/test_peer_suites.py",),
    ),
}


# --------------------------------------------------------------------------------------
# Outcomes
# --------------------------------------------------------------------------------------

WORST_FIRST = ("failed", "error", "skipped", "passed")


@dataclass
class Run:
    """One suite on one side: each test's outcome (passed, failed, error, skipped)."""

    outcomes: dict[str, str]

    def count(self, *outcomes: str) -> int:
        return sum(1 for o in self.outcomes.values() if o in outcomes)

    def part(self, keep: Callable[[str], bool]) -> Run:
        return Run({test: said for test, said in self.outcomes.items() if keep(test)})


def test_id(case: ET.Element, prefixes: tuple[str, ...]) -> str:
    """``test_actors::test_x`` or ``TestMessage::test_ack``: the JUnit classname
    without the run directory's packages."""
    classname = case.get("classname", "")
    for prefix in prefixes:
        classname = classname.removeprefix(prefix)
    name = case.get("name", "")
    return f"{classname}::{name}" if classname else name


def outcome(case: ET.Element) -> str:
    tags = {child.tag for child in case}
    for tag, said in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        if tag in tags:
            return said
    return "passed"


def read_junit(path: Path) -> Run:
    """Each test's outcome; a test reported twice (an error at teardown after its
    call) keeps the worse."""
    outcomes: dict[str, str] = {}
    prefixes = ("tests.", "t.integration.test_peer_suites.")
    for case in ET.parse(path).getroot().iter("testcase"):
        key, said = test_id(case, prefixes), outcome(case)
        before = outcomes.get(key)
        if before is None or WORST_FIRST.index(said) < WORST_FIRST.index(before):
            outcomes[key] = said
    return Run(outcomes)


# --------------------------------------------------------------------------------------
# Getting the suites
# --------------------------------------------------------------------------------------


def sdist_tree(suite: Suite, cache: Path, unpacked: Path) -> Path:
    """The unpacked sdist of the installed version: from the cache (unpacked there,
    or its tarball), else downloaded into the cache first."""
    base = f"{suite.project}-{suite.version()}"
    if (cache / base / suite.tree).is_dir():
        return cache / base
    tarball = cache / f"{base}.tar.gz"
    if not tarball.exists():
        say(f"downloading the sdist of {suite.project}=={suite.version()} into {cache}")
        download = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:"]
        download += ["--no-deps", "--dest", str(cache), f"{suite.project}=={suite.version()}"]
        done = subprocess.run(download, capture_output=True, text=True)
        if done.returncode != 0 or not tarball.exists():
            raise BenchError(f"pip download of {base} failed:\n{done.stderr.strip()[-2000:]}")
    try:
        with tarfile.open(tarball) as archive:
            archive.extractall(unpacked, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise BenchError(f"cannot unpack {tarball}: {exc}") from None
    if not (unpacked / base / suite.tree).is_dir():
        raise BenchError(f"{tarball} has no {base}/{suite.tree}/")
    return unpacked / base


def lay_out(suite: Suite, sdist: Path, run_dir: Path) -> None:
    """The sdist's test tree alone (not its package: the installed one is under
    test) and our files in it."""
    shutil.copytree(sdist / suite.tree, run_dir / suite.tree)
    for ours, where in suite.copies:
        text = (HERE / ours).read_text() if ours else ""
        (run_dir / where).write_text(text)
    missing = [p for p in suite.paths if not (run_dir / p).exists()]
    if missing:
        raise BenchError(f"the {suite.name} sdist has no {', '.join(missing)}")


# --------------------------------------------------------------------------------------
# Running them
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    timeout: int  # seconds per test
    select: str  # pytest -k
    out: Path  # logs and JUnit XML


def pytest(argv: list[str], run_dir: Path, env: dict[str, str], log: Path) -> int:
    """One pytest run, its output to ``log``; its exit code."""
    with open(log, "w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest", *argv],
            cwd=run_dir,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # (its workers' threads and children stopped with it)
        )
        try:
            return process.wait(SUITE_TIMEOUT)
        except BaseException:  # (past SUITE_TIMEOUT, Ctrl-C)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise


def run_file(path: str, run_dir: Path, env: dict[str, str], opts: Options, stem: str) -> Run:
    """pytest over one test file. A pytest that crashes (an INTERNALERROR: Dramatiq's
    time limits raise in threads asynchronously, and one can land in pytest itself)
    runs the file once more, and says so."""
    xml, log = opts.out / f"{stem}.xml", opts.out / f"{stem}.log"
    argv = [path, "--rootdir", str(run_dir), "-p", "no:cacheprovider", "-o", "addopts="]
    argv += ["-rfE", "-q", "--timeout", str(opts.timeout), "--junitxml", str(xml)]
    argv += ["-k", opts.select] if opts.select else []
    for attempt in (1, 2):
        xml.unlink(missing_ok=True)
        try:
            code = pytest(argv, run_dir, env, log)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{path} ran past {SUITE_TIMEOUT:.0f} s (see {log})") from None
        if code in (0, 1, 5) and xml.exists():  # 1: some failed; 5: -k left none
            return read_junit(xml)
        tail = log.read_text(errors="replace")[-1500:]
        if attempt == 1:
            say(f"pytest on {path} exited {code}: running it again\n{tail}")
    raise BenchError(f"pytest on {path} exited {code} twice:\n{tail}")


def run_side(suite: Suite, run_dir: Path, side: str, env: dict[str, str], opts: Options) -> Run:
    """pytest over the suite with PEER_SIDE=side, a file at a time; the output and
    XML of each into opts.out."""
    say(f"{suite.name} on {side}: pytest, {opts.timeout} s a test at most (logs: {opts.out})")
    outcomes: dict[str, str] = {}
    for path in suite.paths:
        stem = f"{suite.project}-{side}-{Path(path).stem}"
        outcomes |= run_file(path, run_dir, {**env, "PEER_SIDE": side}, opts, stem).outcomes
    run = Run(outcomes)
    say(
        f"{suite.name} on {side}: {run.count('passed')} passed, "
        f"{run.count('failed', 'error')} failed, {run.count('skipped')} skipped"
    )
    return run


@contextmanager
def servers(tmp: Path) -> Iterator[dict[str, str]]:
    """A redis-server and a 3-node cluster of ours; the environment naming them."""
    with ExitStack() as stack:
        (tmp / "redis-home").mkdir()
        redis_server: Server = start_redis(tmp / "redis-home")
        stack.callback(redis_server.stop)
        say(f"redis-server on port {redis_server.port}")
        nodes = stack.enter_context(running(tmp, "disque", 3))
        yield {
            "PEER_REDIS": f"{HOST}:{redis_server.port}",
            "PEER_DISQUE": " ".join(f"{HOST}:{node.port}" for node in nodes),
            "PEER_DEAD": f"{HOST}:{free_port(bus=False)}",  # nothing listens there
        }


def test_env(names: dict[str, str]) -> dict[str, str]:
    """The pytest runs' environment: this checkout's disque first on the path."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **names, "PYTHONPATH": path}


def run_suites(
    chosen: list[Suite], cache: Path, tmp: Path, opts: Options
) -> dict[str, dict[str, Run]]:
    """Every chosen suite on both sides: {suite name: {side: run}}."""
    trees = {}
    for suite in chosen:
        run_dir = tmp / "run" / suite.project
        lay_out(suite, sdist_tree(suite, cache, tmp / "unpacked"), run_dir)
        trees[suite.name] = run_dir
    results: dict[str, dict[str, Run]] = {}
    with servers(tmp) as names:
        env = test_env(names)
        for suite in chosen:
            results[suite.name] = {
                side: run_side(suite, trees[suite.name], side, env, opts) for side in SIDES
            }
    return results


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------


def commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def row(label: str, redis_run: Run, disque_run: Run) -> str:
    tests = len(redis_run.outcomes.keys() | disque_run.outcomes.keys())
    return (
        f"| {label} | {tests} | {redis_run.count('passed')} "
        f"| {disque_run.count('passed')} | {redis_run.count('failed', 'error')} "
        f"| {disque_run.count('failed', 'error')} | {redis_run.count('skipped')} "
        f"| {disque_run.count('skipped')} |"
    )


def module(test: str) -> str:
    return test.split("::", 1)[0]


def suite_rows(suite: Suite, runs: dict[str, Run]) -> list[str]:
    """One row, or, with modules apart: the other files, each one apart, and all."""
    label = f"{suite.name} {suite.version()}"
    if not suite.apart:
        return [row(label, runs["redis"], runs["disque"])]

    def both(keep: Callable[[str], bool]) -> tuple[Run, Run]:
        return runs["redis"].part(keep), runs["disque"].part(keep)

    rows = [row(f"{label}, the other files", *both(lambda t: module(t) not in suite.apart))]
    for name in suite.apart:
        rows.append(row(f"{label}, {name}.py", *both(lambda t, n=name: module(t) == n)))
    rows.append(row(f"{label}, all", *both(lambda t: True)))
    return rows


def table(results: dict[str, dict[str, Run]], chosen: list[Suite]) -> list[str]:
    lines = [
        "| suite | tests | passed on Redis | passed on Disque | failed on Redis "
        "| failed on Disque | skipped on Redis | skipped on Disque |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for suite in chosen:
        lines += suite_rows(suite, results[suite.name])
    return lines


def differences(results: dict[str, dict[str, Run]], this: str, other: str) -> list[str]:
    """The tests that pass on `this` side and not on `other`, with their outcome there."""
    lines = []
    for name, runs in results.items():
        there = runs[other].outcomes
        for test, said in sorted(runs[this].outcomes.items()):
            if said == "passed" and there.get(test) != "passed":
                lines.append(f"- {name}: `{test}` ({there.get(test, 'not run')} on {other})")
    return lines or ["- none"]


def markdown(results: dict[str, dict[str, Run]], chosen: list[Suite], timeout: int) -> str:
    today = datetime.date.today().isoformat()
    lines = [
        f"Measured on {today} at commit {commit()}: {environment()}; {timeout} s a test at most.",
        "",
        *table(results, chosen),
        "",
        "Pass on Redis, not on Disque:",
        "",
        *differences(results, "redis", "disque"),
        "",
        "Pass on Disque, not on Redis:",
        "",
        *differences(results, "disque", "redis"),
    ]
    return "\n".join(lines)


def behind(results: dict[str, dict[str, Run]], chosen: list[Suite]) -> list[str]:
    """The suites passing fewer tests on ours than on Redis, the modules counted
    apart left out (the Redis broker's own tests)."""
    lagging = []
    for suite in chosen:
        runs = results[suite.name]

        def kept(t: str, apart: tuple[str, ...] = suite.apart) -> bool:
            return module(t) not in apart

        if runs["disque"].part(kept).count("passed") < runs["redis"].part(kept).count("passed"):
            lagging.append(suite.name)
    return lagging


# --------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------


def missing_prerequisites() -> list[str]:
    missing = []
    if shutil.which("redis-server") is None:
        missing.append("redis-server not found: apt-get install redis-server")
    for module, package in (
        ("pytest_timeout", "pytest-timeout"),
        ("dramatiq", "dramatiq"),
        ("kombu", "kombu"),
        ("pika", "pika"),
        ("hiredis", "hiredis"),
    ):
        if importlib.util.find_spec(module) is None:
            missing.append(
                f"the Python package {package} is missing (pip install -e '.[dev,bench]')"
            )
    return missing


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, help="where the sdists are (or go); default: temp")
    parser.add_argument("--only", default="dramatiq,kombu", help="comma-separated: dramatiq,kombu")
    parser.add_argument("--timeout", type=int, default=60, help="seconds a test (default 60)")
    parser.add_argument("--out", type=Path, help="keep pytest's logs and JUnit XML here")
    parser.add_argument("-k", dest="select", default="", help="pytest -k: run these tests only")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when ours passes fewer tests than Redis (test_redis.py aside)",
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.only.split(",") if name not in SUITES]
    if unknown or not args.only:
        parser.error(f"--only takes dramatiq and/or kombu, not {', '.join(unknown) or 'nothing'}")
    if args.timeout <= 0:
        parser.error("--timeout must be a positive number of seconds")
    for option in ("cache", "out"):
        path = getattr(args, option)
        if path is not None and path.exists() and not path.is_dir():
            parser.error(f"--{option} {path} is not a directory")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    missing = missing_prerequisites()
    if missing:
        for line in missing:
            print(f"peer_suites.py: {line}", file=sys.stderr)
        return 2
    chosen = [SUITES[name] for name in dict.fromkeys(args.only.split(","))]
    try:
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="peer-suites-") as name:
            tmp = Path(name)
            cache = (args.cache or tmp / "sdists").resolve()
            out = (args.out or tmp / "out").resolve()
            cache.mkdir(parents=True, exist_ok=True)
            out.mkdir(parents=True, exist_ok=True)
            results = run_suites(chosen, cache, tmp, Options(args.timeout, args.select, out))
    except KeyboardInterrupt:
        print("interrupted: servers stopped", file=sys.stderr)
        return 130
    except (BenchError, subprocess.SubprocessError, OSError, ET.ParseError) as exc:
        print(f"peer_suites.py: {exc}", file=sys.stderr)
        return 1
    print(markdown(results, chosen, args.timeout))
    lagging = behind(results, chosen)
    if args.strict and lagging:
        print(f"peer_suites.py: fewer passed on Disque: {', '.join(lagging)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
