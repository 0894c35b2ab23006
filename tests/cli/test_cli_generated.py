"""completions/ and man/ are generated from the tables, committed, and work."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pexpect
import pytest

from disque_cli import commands
from disque_cli.options import CLUSTER_VERBS
from docgen import generate

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(30)


def test_committed_files_are_up_to_date() -> None:
    assert generate(ROOT, check=True) == [], "run `python -m docgen` and commit the result"


def bash_complete(*words: str) -> list[str]:
    script = (
        f"source {ROOT / 'completions/disque.bash'}\n"
        'COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n'
        "_disque; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    result = subprocess.run(
        ["bash", "-c", script, "bash", *words],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return result.stdout.split()


def test_bash_completion() -> None:
    assert bash_complete("disque", "addj") == ["addjob"]
    assert bash_complete("disque", "-p", "7711", "ADD") == ["ADDJOB"]
    assert bash_complete("disque", "--ra") == ["--raw"]
    assert bash_complete("disque", "-h", "127.0.0.1", "GETJOB", "") == [
        "NOHANG",
        "TIMEOUT",
        "COUNT",
        "WITHCOUNTERS",
        "FROM",
    ]
    assert bash_complete("disque", "getjob", "") == [
        "nohang",
        "timeout",
        "count",
        "withcounters",
        "from",
    ]
    assert bash_complete("disque", "config", "") == ["get", "set", "rewrite", "resetstat"]
    assert bash_complete("disque", "config", "get", "maxmemory-p") == ["maxmemory-policy"]
    assert bash_complete("disque", "SHUTDOWN", "") == ["REWRITE-AOF"]  # Disque's only option
    assert bash_complete("disque", "-p", "") == []


VERBS = [
    "create",
    "check",
    "info",
    "call",
    "add-node",
    "del-node",
    "leave",
    "restart",
    "set-timeout",
    "dead-letters",
    "help",
]
OUTPUTS = ["--raw", "--no-raw", "--csv", "--json"]


def test_bash_completes_the_cluster_manager() -> None:
    assert bash_complete("disque", "--cluster", "") == VERBS
    assert bash_complete("disque", "-p", "7711", "--cluster", "LE") == ["leave"]
    assert bash_complete("disque", "--cluster", "leave", "127.0.0.1:7711", "--") == [
        "--yes",
        "--shutdown",
        "--timeout",
        *OUTPUTS,
    ]
    assert bash_complete("disque", "--cluster", "leave", "10.0.0.3:7711", "--s") == ["--shutdown"]
    assert bash_complete("disque", "--cluster", "create", "a:1", "b:2", "--") == [
        "--yes",
        "--timeout",
        *OUTPUTS,
    ]
    assert bash_complete("disque", "--cluster", "check", "127.0.0.1:7711", "--timeout", "") == []
    assert bash_complete("disque", "--cluster", "dead-letters", "h:1", "orders", "--") == [
        "--replay",
        "--id",
        "--yes",
        "--timeout",
        *OUTPUTS,
    ]
    # Addresses, not commands, after the other verbs.
    assert bash_complete("disque", "--cluster", "check", "") == []
    assert bash_complete("disque", "--cluster", "info", "127.0.0.1:7711", "q") == []
    # call: a command after the seed address, which bash may split at ':'.
    assert bash_complete("disque", "--cluster", "call", "127.0.0.1:7711", "ql") == ["qlen"]
    assert bash_complete("disque", "--cluster", "call", "127.0.0.1", ":", "7711", "ql") == ["qlen"]
    assert bash_complete("disque", "--cluster", "call", "127.0.0.1:7711", "config", "") == [
        "get",
        "set",
        "rewrite",
        "resetstat",
    ]
    assert bash_complete("disque", "-p", "7711", "--cluster", "call", "ql") == ["qlen"]


def test_completion_tables_match_the_parser() -> None:
    """What the scripts offer after a verb is what the verb accepts."""
    from disque_cli.admin import VERB_RUNNERS
    from disque_cli.cluster import TRAILING_MODES, trailing_options

    assert [verb.name for verb in CLUSTER_VERBS] == list(VERB_RUNNERS) == VERBS[:-1]
    assert list(TRAILING_MODES) == OUTPUTS
    for verb in CLUSTER_VERBS:
        assert {opt.flag for opt in verb.options} <= set(trailing_options(verb))


def fish_complete(line: str) -> str:
    script = f"source {ROOT / 'completions/disque.fish'}; complete -C '{line}'"
    return subprocess.run(
        ["fish", "-c", script], capture_output=True, text=True, timeout=10, check=True
    ).stdout


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_the_cluster_manager() -> None:
    verbs = fish_complete("disque --cluster ")
    assert sorted(line.split("\t")[0] for line in verbs.splitlines()) == sorted(VERBS)
    assert "leave\tRemove a node without losing jobs" in verbs
    assert fish_complete("disque --cluster leave 127.0.0.1:7711 --y") == (
        "--yes\tDo not ask for confirmation (required when standard input is not a terminal)\n"
    )
    assert fish_complete("disque --cluster create a:1 b:2 --ti").startswith(
        "--timeout\tSeconds to wait for the full mesh"
    )
    assert fish_complete("disque --cluster check ") == ""
    assert fish_complete("disque --cluster call 127.0.0.1:7711 ql").startswith("qlen\t")
    assert "meet\tJoin the cluster" in fish_complete(
        "disque --cluster call 127.0.0.1:7711 cluster "
    )


def zsh_listing(child: pexpect.spawn, line: str, *expected: str) -> None:
    """Type `line`, press Tab, expect each of `expected` in what zsh shows, clear the line."""
    child.send(line + "\t")
    for text in expected:
        child.expect_exact(text)
    child.send("\x15")  # ctrl-u: kill the line


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completes_the_cluster_manager(tmp_path: Path) -> None:
    child = pexpect.spawn(
        "zsh",
        ["-f", "-i"],
        encoding="utf-8",
        timeout=10,
        dimensions=(50, 200),
        env={"TERM": "dumb", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    try:
        child.sendline(
            f"PS1='%% '; unset zle_bracketed_paste; fpath=({ROOT / 'completions'} "
            "$fpath); autoload -U compinit; compinit -u -D; "
            "zstyle ':completion:*' list-prompt ''; print READY"
        )
        child.expect_exact("READY\r\n")
        zsh_listing(
            child,
            "disque --cluster ",
            "create        -- Join nodes into a cluster",
            "dead-letters  -- List or replay the dead letters of a queue",
            "del-node      -- Forget a dead node everywhere",
            "leave         -- Remove a node without losing jobs",
        )
        zsh_listing(
            child,
            "disque --cluster leave 127.0.0.1:7711 --",
            "--shutdown  -- SHUTDOWN the node once the others forgot it",
            "--yes       -- Do not ask for confirmation",
        )
        zsh_listing(child, "disque --cluster call 127.0.0.1:7711 ql", "qlen ")
        zsh_listing(child, "disque --cluster call 127.0.0.1:7711 getjob ", "WITHCOUNTERS")
    finally:
        child.close(force=True)


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completion() -> None:
    script = (
        f"source {ROOT / 'completions/disque.fish'}; "
        "complete -C 'disque -p 7711 getj'; complete -C 'disque cluster '"
    )
    out = subprocess.run(
        ["fish", "-c", script], capture_output=True, text=True, timeout=10, check=True
    ).stdout
    assert out.startswith("getjob\tFetch jobs")
    assert "meet\tJoin the cluster" in out


@pytest.mark.parametrize(
    ("shell", "path"),
    [
        ("bash", "completions/disque.bash"),
        ("zsh", "completions/_disque"),
        ("fish", "completions/disque.fish"),
    ],
)
def test_scripts_parse(shell: str, path: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    subprocess.run([shell, "-n", str(ROOT / path)], check=True, timeout=10)


def test_man_page() -> None:
    page = (ROOT / "man/disque.1").read_text()
    for entry in commands.iter_entries():
        assert f"\\fB{entry.name}\\fR" in page
    manager = page.split(".SH CLUSTER MANAGER\n")[1].split(".SH ")[0]
    for verb in CLUSTER_VERBS:
        assert f".TP\n\\fB{verb.name}\\fR" in manager
        for opt in verb.options:
            assert f"\\fB{opt.flag.replace('-', chr(92) + '-')}\\fR" in manager
    assert ".SS Removing a node" in manager and ".SS Exit status" in manager
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed")
    result = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-z", str(ROOT / "man/disque.1")],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert result.returncode == 0 and result.stderr == ""
