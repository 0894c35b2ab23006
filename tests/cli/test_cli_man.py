"""man/disque-benchmark.1, man/disque-server.1, man/disque-tui.1,
man/disque-worker.1, man/disque.conf.5: generated, fresh, readable."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from docgen import generate
from docgen.man_pages import DIRECTIVES, PAGES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(30)


def conf_directives() -> list[str]:
    """Every directive the server accepts: each must be documented."""
    from disque_server.config import PARAMS

    return list(PARAMS)


def test_pages_are_up_to_date() -> None:
    assert generate(ROOT, check=True) == [], "run `python -m docgen` and commit the result"


def test_every_directive_is_documented_and_real() -> None:
    documented = [name for _group, entries in DIRECTIVES for name, _syntax, _text in entries]
    assert sorted(documented) == sorted(conf_directives())


def render(page: str) -> str:
    if shutil.which("man") is None:
        pytest.skip("man is not installed")
    result = subprocess.run(
        ["man", "--warnings", "-E", "UTF-8", "-l", str(ROOT / page)],
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": ""},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", f"{page}: {result.stderr}"
    return result.stdout


def test_pages_render_without_warnings() -> None:
    for page in (*PAGES, "man/disque.1"):
        render(page)


def test_page_contents() -> None:
    conf = render("man/disque.conf.5")
    for name in conf_directives():
        assert f"\n       {name} " in conf, name
    assert "Default: 7711" in conf and "Default: 1gb" in conf
    tui = render("man/disque-tui.1")
    for option in (
        "-h, --host host",
        "-p, --port port",
        "-a, --password password",
        "--interval seconds",
    ):
        assert option in tui
    server = render("man/disque-server.1")
    assert "disque.conf(5)" in server and "--directive value" in server
    cli = render("man/disque.1")
    assert "--cluster command" in cli and "--shutdown" in cli
    manager = cli.split("\nCLUSTER MANAGER\n")[1].split("\nCOMMANDS\n")[0]
    assert "leave host:port [--yes] [--shutdown] [--timeout secs]" in manager
    assert "Removing a node" in manager and "[OK] 10.0.0.3:7711 shut down." in manager


def test_worker_page_lists_every_option() -> None:
    import typer.main

    from disque.worker_cli import app

    page = render("man/disque-worker.1")
    options = [p for p in typer.main.get_command(app).params if p.param_type_name == "option"]
    assert len(options) >= 6
    for option in options:
        assert f"\n       {', '.join(option.opts)} " in page, option.opts
    assert "disque-worker module[:attribute] [options]" in page


def test_benchmark_page_lists_every_option_in_its_group() -> None:
    import typer.main

    from disque_benchmark.main import EXAMPLES, app

    page = render("man/disque-benchmark.1")
    options = [p for p in typer.main.get_command(app).params if p.param_type_name == "option"]
    assert len(options) == 29
    sections = page.split("\nOPTIONS\n")[1].split("\nNOTES\n")[0]
    groups = {
        chunk.split("\n")[0]: chunk for chunk in re.split(r"\n   (?=\S)", "\n" + sections)[1:]
    }
    assert list(groups) == ["Where", "Load", "Jobs", "Run"]
    for option in options:
        assert f"\n       {', '.join(option.opts)}" in groups[option.rich_help_panel], option.opts
    for flags in ("-h, --host host", "-n, --jobs n", "--rate jobs/s", "--ack normal|fast"):
        assert f"\n       {flags}\n" in sections
    assert "\n       --help Print the usage and exit." in sections
    for example in EXAMPLES.split("\n\n")[0].splitlines()[1:]:
        assert f"\n       {example.strip()}\n" in page
    assert "2 on a command line that does not parse" in page.replace("\n       ", " ")
