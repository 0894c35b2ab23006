"""completions/ and man/ are generated from the tables, committed, and work."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from disque_cli import commands
from disque_cli.gen_completions import generate

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(30)


def test_committed_files_are_up_to_date() -> None:
    assert generate(ROOT, check=True) == [], (
        "run `python -m disque_cli.gen_completions` and commit the result")


def bash_complete(*words: str) -> list[str]:
    script = (f"source {ROOT / 'completions/disque.bash'}\n"
              "COMP_WORDS=(\"$@\"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n"
              "_disque; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    result = subprocess.run(["bash", "-c", script, "bash", *words], capture_output=True,
                            text=True, timeout=10, check=True)
    return result.stdout.split()


def test_bash_completion() -> None:
    assert bash_complete("disque", "addj") == ["addjob"]
    assert bash_complete("disque", "-p", "7711", "ADD") == ["ADDJOB"]
    assert bash_complete("disque", "--ra") == ["--raw"]
    assert bash_complete("disque", "-h", "127.0.0.1", "GETJOB", "") == [
        "NOHANG", "TIMEOUT", "COUNT", "WITHCOUNTERS", "FROM"]
    assert bash_complete("disque", "getjob", "") == [
        "nohang", "timeout", "count", "withcounters", "from"]
    assert bash_complete("disque", "config", "") == ["get", "set", "rewrite", "resetstat"]
    assert bash_complete("disque", "config", "get", "maxmemory-p") == ["maxmemory-policy"]
    assert bash_complete("disque", "-p", "") == []


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completion() -> None:
    script = (f"source {ROOT / 'completions/disque.fish'}; "
              "complete -C 'disque -p 7711 getj'; complete -C 'disque cluster '")
    out = subprocess.run(["fish", "-c", script], capture_output=True, text=True,
                         timeout=10, check=True).stdout
    assert out.startswith("getjob\tFetch jobs")
    assert "meet\tJoin the cluster" in out


@pytest.mark.parametrize(("shell", "path"), [("bash", "completions/disque.bash"),
                                             ("zsh", "completions/_disque"),
                                             ("fish", "completions/disque.fish")])
def test_scripts_parse(shell: str, path: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    subprocess.run([shell, "-n", str(ROOT / path)], check=True, timeout=10)


def test_man_page() -> None:
    page = (ROOT / "man/disque.1").read_text()
    for entry in commands.iter_entries():
        assert f"\\fB{entry.name}\\fR" in page
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed")
    result = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(ROOT / "man/disque.1")],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 0 and result.stderr == ""
